"""Redrive filters, allowed and refused: one corpus for both checks of the filter language.

``tests/unit/test_redrive_filter.py`` runs every case through the model's parser and asserts
its exact message; ``tests/integration/engine/test_redrive.py`` runs the same cases through
Spark's parser and the walk of its tree (``dlq_engine.job.spark_filter``). ``spark`` says what
that walk must answer: ``same`` (the model's answer, word for word: allowed, or refused with the
same message), ``refuses`` (refused, in its own words: Spark's tree names the construct
differently, or Spark cannot parse it), ``allows`` (only the model refuses: a spelling the
model's stricter parser does not read, where Spark's tree is harmless, such as a comment).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

DOCS = "docs/reference.md, section 6"


def function(name: str) -> str:
    return f"function {name} is not allowed (a filter may call only the functions listed in {DOCS})"


def column(name: str) -> str:
    return f"{name} is not a dead-letter column (the columns are listed in {DOCS})"


def construct(what: str) -> str:
    return f"{what} is not allowed in a filter"


def cast(type_name: str) -> str:
    return (
        f"CAST to {type_name} is not allowed (only to string, varchar, char, boolean, tinyint, byte, "
        "smallint, short, int, integer, bigint, long, float, real, double, decimal, dec, numeric, date, "
        "timestamp, timestamp_ltz, timestamp_ntz, binary)"
    )


@dataclass(frozen=True)
class Case:
    text: str
    #: The model's message; None: allowed.
    problem: str | None = None
    spark: Literal["same", "refuses", "allows"] = "same"

    def param(self, id: str) -> object:
        return pytest.param(self, id=id)


def ok(text: str) -> Case:
    return Case(text)


REFLECT = "reflect('java.lang.Runtime', 'getRuntime')"

CASES: dict[str, Case] = {
    # --- what the tests, the docs and kubectl dlq's examples use ---------------------------------
    "docs-example": ok("error_message LIKE '%customer%' AND attempts >= 3"),
    "engine-test": ok("error_message LIKE '%order 1%' AND attempts = 1"),
    "offsets": ok("original_offset >= 1003"),
    "attempts": ok("attempts > 1"),
    # --- the language ------------------------------------------------------------------------------
    "every-column": ok(
        "topic LIKE '%DLQ' AND partition = 0 AND offset >= 0 AND timestamp IS NOT NULL AND key IS NOT NULL "
        "AND value IS NOT NULL AND headers IS NOT NULL AND kafka_headers IS NOT NULL "
        "AND original_topic = 'orders' AND original_partition IN (0, 1) AND original_offset > 0 "
        "AND original_timestamp IS NOT NULL AND error_class <> '' AND error_message <> '' "
        "AND stacktrace IS NOT NULL AND reason = 'exhausted' AND attempts > 0 "
        "AND first_failure_at IS NOT NULL AND failed_at IS NOT NULL AND failed_at_ms > 0 "
        "AND policy IS NOT NULL AND subscription IS NOT NULL AND redrive_count = 0"
    ),
    "case-and-quotes": ok("ERROR_MESSAGE like 'x%' and `Attempts` = 1 AND `error_class` IS NULL"),
    "in-between-not": ok(
        "reason IN ('exhausted', 'terminated') AND NOT attempts BETWEEN 2 AND 5 "
        "AND error_class NOT IN ('ValueError') AND attempts NOT BETWEEN 7 AND 9"
    ),
    "like-family": ok(
        "error_message ILIKE '%timeout%' AND error_message LIKE '50!%%' ESCAPE '!' "
        "AND upper(error_class) LIKE ANY ('%ERROR', '%EXCEPTION') AND error_message NOT LIKE ALL ('a%', 'b%') "
        "AND error_message RLIKE 'time(out)?' AND error_message NOT REGEXP '^x' AND error_message NOT ILIKE 'y'"
    ),
    "is-predicates": ok(
        "(attempts > 1) IS NOT TRUE AND (attempts > 2) IS FALSE AND reason IS DISTINCT FROM 'x' "
        "AND reason IS NOT DISTINCT FROM reason AND error_class IS NULL"
    ),
    "arithmetic": ok(
        "-attempts + +1 < ~redrive_count & 7 | 1 ^ 2 AND attempts << 1 >> 1 >>> 0 = attempts "
        "AND attempts DIV 2 = 1 AND attempts % 2 <=> 1 AND attempts != 0 AND attempts <> 5 "
        "AND attempts == attempts AND attempts * 2 / 1 - 1 >= 0"
    ),
    "literals": ok(
        "failed_at_ms BETWEEN 1795000000000L AND 1795000000000 + 3600 * 1000 AND attempts < 1.5D + 2.5F "
        "+ 1BD + 1e3 + .5 + 10S + 1Y AND key <> X'6B31' AND error_message <> 'a' 'b' \"c\" "
        "AND (redrive_count IS NOT NULL) = TRUE AND (error_class IS NOT NULL) <> FALSE AND NULL IS NULL"
    ),
    "times": ok(
        "failed_at > current_timestamp() - INTERVAL 1 DAY AND failed_at < now() "
        "AND failed_at >= current_date - INTERVAL '2' HOUR AND failed_at < current_timestamp "
        "AND failed_at >= TIMESTAMP '2026-11-25 10:00:00' AND first_failure_at < DATE '2026-12-01' "
        "AND failed_at > TIMESTAMP_NTZ '2026-01-01 00:00:00' - INTERVAL 1 DAY 2 HOURS - INTERVAL '1 day' "
        "AND failed_at > TIMESTAMP_LTZ '2026-01-01 00:00:00' - INTERVAL '1-2' YEAR TO MONTH "
        "AND date_format(failed_at, 'yyyy-MM-dd') >= '2026-11-25' AND hour(failed_at) < 24"
    ),
    "casts": ok(
        "TRY_CAST(CAST(key AS STRING) AS BIGINT) % 10 >= 0 AND CAST(original_offset AS DECIMAL(20, 0)) >= 0 "
        "AND value::string LIKE '{%' AND CAST(attempts AS VARCHAR(10)) <> '' AND string(attempts) <> '' "
        "AND int(redrive_count) = 0 AND CAST(failed_at AS TIMESTAMP_NTZ) IS NOT NULL"
    ),
    "case": ok(
        "CASE WHEN attempts > 3 THEN true WHEN reason = 'terminated' THEN false ELSE redrive_count = 0 END "
        "AND CASE reason WHEN 'exhausted' THEN attempts > 1 ELSE false END"
    ),
    "functions": ok(
        "length(stacktrace) > 100 AND size(kafka_headers) > 0 AND map_contains_key(headers, 'trace') "
        "AND coalesce(CAST(headers['team'] AS STRING), '') = '' AND headers.team IS NULL "
        "AND kafka_headers[0].key = 'trace' AND array_contains(map_keys(headers), 'trace') "
        "AND sha2(CAST(key AS STRING), 256) LIKE 'a%' AND xxhash64(value) % 2 = 0 "
        "AND if(attempts > 1, true, false) AND decode(value, 'UTF-8') LIKE '%x%' "
        "AND json_array_length(get_json_object(decode(value, 'UTF-8'), '$.items')) > 2 "
        "AND error_class || ':' || error_message LIKE '%x%' AND `upper`(reason) = 'EXHAUSTED' AND rand() < 0.5"
    ),
    "long-or-chain": ok(" OR ".join(f"original_offset = {i}" for i in range(200))),
    # --- what looks like code but is data ------------------------------------------------------------
    "function-names-in-strings": ok(
        "error_message = 'reflect(''java.lang.Runtime'')' OR error_message = \"java_method('a', 'b')\" "
        "OR error_message = 'select * from parquet.`/etc/passwd` -- /* */'"
    ),
    "escaped-quotes-stay-data": ok("error_message = '\\' OR reflect(1) OR \\''"),
    "double-quoted-escapes-stay-data": ok("error_message = \"x\\\" OR reflect('a', 'b') IS NULL OR \\\"\""),
    "unicode-escapes-stay-data": ok(
        "error_message = '\\u0027) OR reflect(\\u0027x' OR error_message = 'é日本'"
    ),
    "raw-string": ok("error_message LIKE r'%\\d%'"),
    # --- functions that call Java, read files, the configuration or the environment ----------------
    "reflect": Case(REFLECT, function("reflect")),
    "reflect-upper-case": Case("REFLECT('java.lang.Thread', 'currentThread') IS NULL", function("reflect")),
    "reflect-backquoted": Case(f"`reflect`{REFLECT[7:]} IS NULL", function("reflect")),
    "reflect-nested": Case(f"attempts > 1 AND upper({REFLECT}) = 'X'", function("reflect")),
    "java-method": Case(
        "java_method('java.lang.System', 'getenv', 'HOME') IS NOT NULL", function("java_method")
    ),
    "try-reflect": Case(f"try_{REFLECT} IS NOT NULL", function("try_reflect")),
    "java-method-in-case": Case(
        "CASE WHEN attempts > 1 THEN java_method('java.lang.System', 'exit', 1) END = 1",
        function("java_method"),
    ),
    "reflect-after-a-raw-string": Case(
        f"error_message = r'\\' OR {REFLECT} IS NOT NULL", function("reflect")
    ),
    "reflect-after-adjacent-strings": Case(
        f"error_message = 'a' 'b' OR {REFLECT} IS NULL", function("reflect")
    ),
    "reflect-before-a-comment": Case(f"{REFLECT} IS NULL -- why", function("reflect")),
    "reflect-qualified": Case(f"system.builtin.{REFLECT} IS NULL", function("system.builtin.reflect")),
    "reflect-on-a-column": Case("headers.reflect('x') IS NULL", function("headers.reflect")),
    "reflect-by-identifier": Case(
        "IDENTIFIER('reflect')('java.lang.Runtime', 'getRuntime') IS NULL", function("identifier")
    ),
    "column-by-identifier": Case("IDENTIFIER('error_message') = 'x'", function("identifier")),
    "look-alike-letter": Case("`refl\u0435ct`('a', 'b') IS NULL", function("refl\u0435ct")),
    "input-file-name": Case("input_file_name() = ''", function("input_file_name")),
    "read-files": Case("read_files('/etc/passwd') IS NULL", function("read_files")),
    "from-protobuf": Case("from_protobuf(value, 'M', '/etc/passwd') IS NULL", function("from_protobuf")),
    "xpath": Case("xpath_string(CAST(value AS STRING), '//a') = 'x'", function("xpath_string")),
    "current-user-call": Case("current_user() = 'x'", function("current_user")),
    "current-user-bare": Case("current_user = 'root'", column("current_user")),
    "version": Case("version() LIKE '4%'", function("version")),
    "current-timezone": Case("current_timezone() = 'UTC'", function("current_timezone")),
    "uuid": Case("uuid() = 'x'", function("uuid")),
    "raise-error": Case("raise_error('x') IS NULL", function("raise_error")),
    "repeat": Case("repeat('x', 1000000000) = ''", function("repeat")),
    "aes": Case("aes_decrypt(value, 'k') IS NULL", function("aes_decrypt")),
    "from-json": Case("from_json(CAST(value AS STRING), 'a INT') IS NULL", function("from_json")),
    "user-function": Case("default.my_udf(1) = 1", function("default.my_udf")),
    "unknown-function": Case("udf_from_the_catalog(1) = 1", function("udf_from_the_catalog")),
    # --- aggregates, windows, generators, lambdas ----------------------------------------------------
    "count-star": Case("count(*) > 1", function("count")),
    "count-distinct": Case("count(DISTINCT key) > 1", function("count")),
    "aggregate-filter": Case("sum(attempts) FILTER (WHERE attempts > 1) > 1", function("sum")),
    "within-group": Case(
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY attempts) > 1", function("percentile_cont")
    ),
    "first": Case("first(error_message) = 'x'", function("first")),
    "any-value": Case("any_value(error_message) = 'x'", function("any_value")),
    "window": Case("rank() OVER (ORDER BY offset) = 1", function("rank"), spark="refuses"),
    "generator": Case("explode(kafka_headers) IS NULL", function("explode")),
    "json-tuple": Case("json_tuple(value, 'a') IS NULL", function("json_tuple")),
    "higher-order": Case("filter(kafka_headers, h -> h.key = 'x') IS NULL", function("filter")),
    "exists-with-lambda": Case("exists(kafka_headers, h -> startswith(h.key, 'x'))", function("exists")),
    "lambda": Case("coalesce(x -> 1) IS NULL", construct("a lambda function (->)")),
    # --- subqueries, constructors, markers -------------------------------------------------------------
    "exists-subquery": Case("EXISTS (SELECT 1)", construct("a subquery")),
    "in-subquery": Case("attempts IN (SELECT 1)", construct("a subquery")),
    "scalar-subquery": Case("(SELECT max(attempts) FROM parquet.`/etc/passwd`) > 1", construct("a subquery")),
    "nested-subquery": Case("attempts = ((SELECT 1))", construct("a subquery")),
    "row": Case("(attempts, reason) IS NULL", construct("a row or struct ((a, b))")),
    "struct": Case("struct(attempts) IS NULL", function("struct"), spark="refuses"),
    "named-struct": Case("named_struct('a', 1) IS NULL", function("named_struct")),
    "map": Case("map('a', 1) IS NULL", function("map")),
    "star": Case("* IS NULL", construct("*")),
    "star-argument": Case("coalesce(*) IS NULL", construct("*")),
    "star-of-a-column": Case("headers.* IS NULL", construct("*")),
    "positional-parameter": Case("attempts = ?", construct("a parameter marker (?)")),
    "named-parameter": Case("attempts = :limit", construct("a parameter marker or path (:)")),
    "named-argument": Case("upper(str => error_message) = 'X'", construct("a named argument (=>)")),
    "is-unknown": Case("(attempts > 1) IS UNKNOWN", construct("IS UNKNOWN (write IS NULL)")),
    "collate": Case("error_message COLLATE UTF8_LCASE = 'x'", construct("COLLATE")),
    # --- names that are not dead-letter columns ----------------------------------------------------
    "unknown-column": Case("no_such_column = 1", column("no_such_column")),
    "dotted-name-in-quotes": Case("`error_message.x` = 'x'", column("error_message.x")),
    "user": Case("user = 'root'", column("user")),
    # --- casts -------------------------------------------------------------------------------------------
    "cast-to-map": Case("CAST(value AS MAP<STRING, STRING>) IS NULL", cast("map")),
    "cast-to-array": Case("CAST(value AS ARRAY<STRING>) IS NULL", cast("array")),
    "cast-to-struct": Case("CAST(value AS STRUCT<a: INT>) IS NULL", cast("struct")),
    "cast-to-variant": Case("CAST(value AS VARIANT) IS NULL", cast("variant")),
    "cast-to-interval": Case("CAST(attempts AS INTERVAL DAY) IS NULL", cast("interval")),
    "colon-cast-to-map": Case("value::map<string, string> IS NULL", cast("map")),
    "cast-with-collation": Case(
        "CAST(error_message AS STRING COLLATE UTF8_LCASE) = 'x'", construct("COLLATE")
    ),
    # --- what only the model refuses: Spark's tree is harmless ------------------------------------
    "block-comment": Case("attempts /* why */ > 1", construct("a comment (/*)"), spark="allows"),
    "line-comment": Case("attempts > 1 -- why", construct("a comment (--)"), spark="allows"),
    "code-in-a-comment": Case(f"attempts > 1 /* {REFLECT} */", construct("a comment (/*)"), spark="allows"),
    "line-comment-continued": Case(
        f"attempts > 1 --\\\nOR {REFLECT} IS NULL", construct("a comment (--)"), spark="allows"
    ),
    "nested-comment": Case(
        f"attempts > 1 /* /* */ OR {REFLECT} IS NULL */", construct("a comment (/*)"), spark="allows"
    ),
    "bang": Case("!(attempts > 1)", construct("! (write NOT)"), spark="allows"),
    "bang-comparison": Case(
        "attempts !> 1", "does not parse: unexpected '!' at character 10", spark="allows"
    ),
    "no-break-space": Case(
        "attempts\u00a0> 1", "does not parse: unexpected '\\xa0' at character 9", spark="allows"
    ),
    "form-feed": Case("attempts\f> 1", "does not parse: unexpected '\\x0c' at character 9", spark="allows"),
    "too-deep": Case(
        "abs(" * 40 + "attempts" + ")" * 40 + " > 0",
        "is nested too deeply: at most 32 levels",
        spark="allows",
    ),
    "too-long-a-chain": Case(
        " + ".join(["attempts"] * 40) + " > 1", "is nested too deeply: at most 32 levels", spark="allows"
    ),
    "too-long": Case(
        "error_message <> '" + "x" * 8200 + "'",
        "must be at most 8192 characters long, got 8219",
        spark="allows",
    ),
    # --- what Spark's tree names differently, or cannot parse ------------------------------------------
    "comment-then-code": Case(
        f"attempts > 1 /* */ OR {REFLECT} IS NULL", construct("a comment (/*)"), "refuses"
    ),
    "extract": Case("extract(YEAR FROM failed_at) = 2026", function("extract")),
    "substring-from": Case(
        "substring(error_message FROM 1 FOR 3) = 'ord'",
        "does not parse: unexpected 'FROM' at character 25",
        spark="refuses",
    ),
    "position-in": Case(
        "position('a' IN error_message) > 0",
        "does not parse: unexpected 'error_message' at character 17",
        "refuses",
    ),
    "trim-from": Case("trim(BOTH 'x' FROM error_message) = ''", column("BOTH"), spark="refuses"),
    "timestamp-add": Case("date_add(DAY, 1, failed_at) > now()", column("DAY"), spark="refuses"),
    "identifier-starting-with-a-digit": Case(
        "1abc = 1", "does not parse: unexpected '1a' at character 1", spark="refuses"
    ),
    "alias": Case("attempts > 1 foo", "does not parse: unexpected 'foo' at character 14", spark="refuses"),
    "two-statements": Case(
        "attempts > 1; DROP TABLE x", "does not parse: unexpected ';' at character 13", spark="refuses"
    ),
    "unclosed-string": Case(
        "error_message = 'a", "does not parse: the string at character 17 is not closed", spark="refuses"
    ),
    "double-quoted-call": Case(
        "\"reflect\"('a', 'b') IS NULL", "does not parse: unexpected '(' at character 10", spark="refuses"
    ),
    "full-width-letters": Case(
        "\uff52\uff45\uff46\uff4c\uff45\uff43\uff54('a', 'b') IS NULL",
        "does not parse: unexpected '\uff52' at character 1",
        spark="refuses",
    ),
    "other-digits": Case(
        "attempts > \u0663", "does not parse: unexpected '\u0663' at character 12", "refuses"
    ),
    "superscript-digit": Case(
        "attempts > \u00b2", "does not parse: unexpected '\u00b2' at character 12", "refuses"
    ),
    "escape-outside-a-string": Case("reflect\\u0028'a', 'b')", column("reflect"), spark="refuses"),
    "json-path": Case("value:a = 1", construct("a parameter marker or path (:)"), spark="refuses"),
    "blank": Case("   ", "does not parse: it ends early, at character 4", spark="refuses"),
    "incomplete": Case("attempts = 1 AND", "does not parse: it ends early, at character 17", spark="refuses"),
}
