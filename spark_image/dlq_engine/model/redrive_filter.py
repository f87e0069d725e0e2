"""The language of a redrive's ``selection.filter``, checked without Spark.

A filter is Spark SQL written by a policy author and evaluated by the redrive's driver and
executors, which hold the broker's credentials; what it computes comes back in the redrive's
status. Spark SQL can call Java (``reflect``), read files and run subqueries, so a filter is
allow-listed, never passed through: references to the dead-letter columns (``COLUMNS``),
literals, operators, ``CASE``, ``CAST`` to simple types (``CAST_TYPES``) and the pure functions
of ``FUNCTIONS``; anything else is refused with a message naming it. This module holds those
lists and a small tokenizer and parser for that subset of Spark SQL's expression grammar: the
operator refuses a redrive whose filter it rejects before anything is created for it, and the
engine before anything is read. The engine then checks the tree Spark's own parser makes of the
same text against the same lists (``dlq_engine.job.spark_filter``), so a difference between
this parser and Spark's can refuse a filter but never let one through.

The parser is stricter than Spark where strictness costs a filter nothing: no comments, ASCII
outside string literals, one spelling per construct (function calls rather than Spark's
``SUBSTRING(s FROM 1)`` or ``EXTRACT(YEAR FROM t)`` forms).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, Literal

#: The dead-letter columns a filter can name (``dlq_engine.job.redrive.dead_letter_columns``).
COLUMNS: Final = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
    "kafka_headers",
    "original_topic",
    "original_partition",
    "original_offset",
    "original_timestamp",
    "error_class",
    "error_message",
    "stacktrace",
    "reason",
    "attempts",
    "first_failure_at",
    "failed_at",
    "failed_at_ms",
    "policy",
    "subscription",
    "redrive_count",
)

#: Functions Spark lets a query name without parentheses (it reads them as columns first).
BARE_FUNCTIONS: Final = ("current_date", "current_timestamp")

#: The functions a filter may call, by kind: built-in, scalar and pure (their result depends on
#: their arguments only; ``rand``/``random`` and the current time excepted). No function that
#: calls Java, reads a file, the session's configuration or the environment, no aggregate,
#: window, generator, lambda-taking function, user-defined function or table function.
FUNCTIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "conditions and nulls": (
        "between",
        "coalesce",
        "equal_null",
        "greatest",
        "if",
        "ifnull",
        "isnan",
        "isnotnull",
        "isnull",
        "least",
        "nanvl",
        "nullif",
        "nullifzero",
        "nvl",
        "nvl2",
        "zeroifnull",
    ),
    "text": (
        "ascii",
        "bit_length",
        "btrim",
        "char",
        "char_length",
        "character_length",
        "chr",
        "concat",
        "concat_ws",
        "contains",
        "endswith",
        "find_in_set",
        "initcap",
        "instr",
        "lcase",
        "left",
        "len",
        "length",
        "levenshtein",
        "locate",
        "lower",
        "ltrim",
        "octet_length",
        "position",
        "regexp",
        "regexp_count",
        "regexp_extract",
        "regexp_extract_all",
        "regexp_instr",
        "regexp_like",
        "regexp_replace",
        "regexp_substr",
        "replace",
        "reverse",
        "right",
        "rtrim",
        "soundex",
        "split",
        "split_part",
        "startswith",
        "substr",
        "substring",
        "substring_index",
        "translate",
        "trim",
        "ucase",
        "upper",
    ),
    "bytes and encodings": (
        "base64",
        "decode",
        "encode",
        "hex",
        "is_valid_utf8",
        "make_valid_utf8",
        "unbase64",
        "unhex",
    ),
    "numbers": (
        "abs",
        "acos",
        "asin",
        "atan",
        "atan2",
        "bround",
        "cbrt",
        "ceil",
        "ceiling",
        "cos",
        "degrees",
        "e",
        "exp",
        "floor",
        "ln",
        "log",
        "log10",
        "log2",
        "mod",
        "negative",
        "pi",
        "pmod",
        "positive",
        "pow",
        "power",
        "radians",
        "rint",
        "round",
        "sign",
        "signum",
        "sin",
        "sqrt",
        "tan",
        "try_add",
        "try_divide",
        "try_mod",
        "try_multiply",
        "try_subtract",
    ),
    "dates and times": (
        "add_months",
        "convert_timezone",
        "curdate",
        "current_date",
        "current_timestamp",
        "date_add",
        "date_diff",
        "date_format",
        "date_from_unix_date",
        "date_part",
        "date_sub",
        "date_trunc",
        "dateadd",
        "datediff",
        "datepart",
        "day",
        "dayname",
        "dayofmonth",
        "dayofweek",
        "dayofyear",
        "from_unixtime",
        "from_utc_timestamp",
        "hour",
        "last_day",
        "localtimestamp",
        "make_date",
        "make_timestamp",
        "minute",
        "month",
        "monthname",
        "months_between",
        "next_day",
        "now",
        "quarter",
        "second",
        "timestamp_micros",
        "timestamp_millis",
        "timestamp_seconds",
        "to_date",
        "to_timestamp",
        "to_timestamp_ltz",
        "to_timestamp_ntz",
        "to_unix_timestamp",
        "to_utc_timestamp",
        "trunc",
        "try_to_timestamp",
        "unix_date",
        "unix_micros",
        "unix_millis",
        "unix_seconds",
        "unix_timestamp",
        "weekday",
        "weekofyear",
        "year",
    ),
    "hashes": ("crc32", "hash", "md5", "sha", "sha1", "sha2", "xxhash64"),
    "JSON text": ("get_json_object", "json_array_length", "json_object_keys"),
    "maps and arrays": (
        "array_contains",
        "array_join",
        "array_size",
        "cardinality",
        "element_at",
        "get",
        "map_contains_key",
        "map_keys",
        "map_values",
        "size",
        "try_element_at",
    ),
    "conversions": (
        "bigint",
        "binary",
        "boolean",
        "date",
        "decimal",
        "double",
        "float",
        "int",
        "smallint",
        "string",
        "timestamp",
        "tinyint",
    ),
    "random numbers": ("rand", "random"),
}
ALLOWED_FUNCTIONS: Final = frozenset(name for names in FUNCTIONS.values() for name in names)

#: The types ``CAST(x AS type)``, ``TRY_CAST`` and ``x::type`` may convert to.
CAST_TYPES: Final = (
    "string",
    "varchar",
    "char",
    "boolean",
    "tinyint",
    "byte",
    "smallint",
    "short",
    "int",
    "integer",
    "bigint",
    "long",
    "float",
    "real",
    "double",
    "decimal",
    "dec",
    "numeric",
    "date",
    "timestamp",
    "timestamp_ltz",
    "timestamp_ntz",
    "binary",
)

#: The longest filter, in characters (the CRD's ``maxLength``).
MAX_LENGTH: Final = 8192
#: The deepest expression tree, counted as Spark builds it (a chain ``a + b + c`` nests,
#: ``AND``/``OR`` chains are balanced): deeper trees make Spark's analysis slow or its parser
#: give up.
MAX_DEPTH: Final = 32

_DOCS: Final = "docs/reference.md, section 6"


def function_refused(name: str) -> str:
    """Spark looks functions up by their name in lower case: so does the message."""
    return f"function {name.lower()} is not allowed (a filter may call only the functions listed in {_DOCS})"


def column_refused(name: str) -> str:
    return f"{name} is not a dead-letter column (the columns are listed in {_DOCS})"


def construct_refused(what: str) -> str:
    return f"{what} is not allowed in a filter"


def cast_refused(type_name: str) -> str:
    return f"CAST to {type_name} is not allowed (only to {', '.join(CAST_TYPES)})"


def filter_problem(text: str) -> str | None:
    """What is wrong with ``text`` as a filter (the first problem, in reading order), or None."""
    if len(text) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters long, got {len(text)}"
    try:
        _Parser(_tokens(text)).parse()
    except _Refused as refused:
        return str(refused)
    return None


def function_allowed(name: str) -> bool:
    """Whether a filter may call ``name`` (one part, ASCII; Spark folds the case)."""
    return name.isascii() and name.lower() in ALLOWED_FUNCTIONS


def column_allowed(parts: tuple[str, ...]) -> bool:
    """Whether a name of one or more parts (``headers.team``) starts at a dead-letter column."""
    first = parts[0]
    if not first.isascii():
        return False
    return first.lower() in COLUMNS or (len(parts) == 1 and first.lower() in BARE_FUNCTIONS)


def cast_allowed(type_name: str) -> bool:
    return type_name.isascii() and type_name.lower() in CAST_TYPES


# --- the tokenizer -------------------------------------------------------------------------------

TokenKind = Literal["word", "quoted", "string", "number", "op", "end", "bad"]


@dataclass(frozen=True, slots=True)
class _Token:
    kind: TokenKind
    #: word: as written; quoted: the name (````` undone); op: the operator; bad: the problem.
    text: str
    #: Where it starts: the 1-based character position.
    at: int


class _Refused(Exception):
    """A filter refused: the message says why."""


#: Operators, longest first (Spark's lexer takes the longest match).
_OPERATORS: Final = (
    "<=>",
    ">>>",
    "<<",
    ">>",
    "<=",
    ">=",
    "<>",
    "!=",
    "==",
    "||",
    "::",
    "->",
    "=>",
    "=",
    "<",
    ">",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    "~",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    "!",
    "?",
    ":",
    ";",
)
_WHITESPACE: Final = " \t\r\n"
_WORD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Spark's numeric literals: 1, 1L/1S/1Y, 1.5, .5, 1e3, with a D, F or BD suffix.
_NUMBER: Final = re.compile(
    r"\d+[LSYlsy]|(?:\d+\.\d*|\.\d+|\d+)(?:[Ee][+-]?\d+)?(?:[Bb][Dd]|[DFdf])?", re.ASCII
)
_DIGITS: Final = "0123456789"
_WORD_CHARACTER: Final = re.compile(r"[A-Za-z0-9_]")


def _tokens(text: str) -> list[_Token]:
    """The tokens of ``text`` as Spark's lexer reads them, ending with an ``end`` token, or with
    a ``bad`` one at the first thing this language refuses to read on from (a comment, a
    character outside the language, an unterminated string)."""
    found: list[_Token] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i == n:
            found.append(_Token("end", "", i + 1))
            return found
        c, start = text[i], i
        if text.startswith(("--", "/*"), i):
            # Spark drops comments before parsing (nested ones too, and a `--` comment goes on
            # past a backslash at the end of a line): nothing in a filter needs one.
            found.append(_Token("bad", construct_refused(f"a comment ({text[i : i + 2]})"), i + 1))
            return found
        if c in "'\"" or (c in "rR" and i + 1 < n and text[i + 1] in "'\""):
            end = _string_end(text, i)
            if end is None:
                found.append(
                    _Token("bad", f"does not parse: the string at character {i + 1} is not closed", i + 1)
                )
                return found
            found.append(_Token("string", text[start:end], start + 1))
            i = end
        elif c == "`":
            quoted = _quoted(text, i)
            if quoted is None:
                found.append(
                    _Token("bad", f"does not parse: the name at character {i + 1} is not closed", i + 1)
                )
                return found
            name, i = quoted
            found.append(_Token("quoted", name, start + 1))
        elif c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            number = _NUMBER.match(text, i)
            assert number is not None  # a digit, or a dot and a digit, always starts a number
            i = number.end()
            if i < n and _WORD_CHARACTER.match(text, i):
                found.append(_Token("bad", _unexpected(text[start : i + 1], start + 1), start + 1))
                return found
            found.append(_Token("number", number.group(), start + 1))
        elif word := _WORD.match(text, i):
            i = word.end()
            found.append(_Token("word", word.group(), start + 1))
        else:
            operator = next((op for op in _OPERATORS if text.startswith(op, i)), None)
            if operator is None:
                found.append(_Token("bad", _unexpected(c, i + 1), i + 1))
                return found
            i += len(operator)
            found.append(_Token("op", operator, start + 1))


def _string_end(text: str, i: int) -> int | None:
    """The end of the string literal at ``i``: ``'...'`` or ``"..."`` where a backslash escapes
    the next character, or a raw ``r'...'`` where it does not. None: not closed."""
    raw = text[i] in "rR"
    if raw:
        i += 1
    quote, i = text[i], i + 1
    while i < len(text):
        if text[i] == "\\" and not raw:
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return None


def _quoted(text: str, i: int) -> tuple[str, int] | None:
    """The name in backquotes at ``i`` (two backquotes stand for one) and where it ends."""
    name: list[str] = []
    i += 1
    while i < len(text):
        if text[i] == "`":
            if text.startswith("``", i):
                name.append("`")
                i += 2
                continue
            return "".join(name), i + 1
        name.append(text[i])
        i += 1
    return None


def _unexpected(shown: str, at: int) -> str:
    return f"does not parse: unexpected {shown!r} at character {at}"


# --- the parser ----------------------------------------------------------------------------------

#: Operators of Spark's value expressions from the loosest to the tightest binding.
_LEVELS: Final = (
    frozenset({"=", "==", "<=>", "<>", "!=", "<", "<=", ">", ">="}),
    frozenset({"|"}),
    frozenset({"^"}),
    frozenset({"&"}),
    frozenset({"<<", ">>", ">>>"}),
    frozenset({"+", "-", "||"}),
    frozenset({"*", "/", "%", "DIV"}),
)
#: Operators that only the constructs they name use.
_CONSTRUCT_OPERATORS: Final = {
    "->": "a lambda function (->)",
    "=>": "a named argument (=>)",
    "?": "a parameter marker (?)",
    ":": "a parameter marker or path (:)",
    "*": "*",
}
_QUERY_WORDS: Final = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "FROM"})
_TYPED_LITERALS: Final = frozenset({"DATE", "TIMESTAMP", "TIMESTAMP_LTZ", "TIMESTAMP_NTZ", "X"})
_INTERVAL_UNITS: Final = frozenset(
    unit + plural
    for unit in ("YEAR", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND")
    for plural in ("", "S")
)
#: Words that are never a column or a function where a value is expected.
_RESERVED: Final = frozenset(
    {"AND", "OR", "NOT", "IN", "IS", "LIKE", "ILIKE", "RLIKE", "REGEXP", "BETWEEN", "WHEN", "THEN"}
    | {"ELSE", "END", "AS", "ESCAPE", "DIV", "DISTINCT", "ALL"}
)
_SUBQUERY: Final = "a subquery"


class _Parser:
    """A recursive-descent parser of the filter language, following the precedence of Spark's
    grammar (``SqlBaseParser.g4``: ``booleanExpression``, ``predicate``, ``valueExpression``,
    ``primaryExpression``). It builds no tree: each rule returns the depth of the tree Spark
    would build for what it read, and refuses at the first thing outside the language."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.nesting = 0

    def parse(self) -> None:
        self._depth(self.expression())
        if self.token.kind != "end":
            raise self.unexpected()

    # tokens

    @property
    def token(self) -> _Token:
        return self.tokens[self.i]

    def peek(self, ahead: int = 1) -> _Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.token
        if token.kind not in ("end", "bad"):
            self.i += 1
        return token

    def is_word(self, *words: str, token: _Token | None = None) -> bool:
        token = token or self.token
        return token.kind == "word" and token.text.upper() in words

    def is_op(self, *operators: str, token: _Token | None = None) -> bool:
        token = token or self.token
        return token.kind == "op" and token.text in operators

    def expect_op(self, operator: str) -> None:
        if not self.is_op(operator):
            raise self.unexpected()
        self.advance()

    def expect_word(self, word: str) -> None:
        if not self.is_word(word):
            raise self.unexpected()
        self.advance()

    def unexpected(self) -> _Refused:
        token = self.token
        if token.kind == "bad":
            return _Refused(token.text)
        if token.kind == "end":
            return _Refused(f"does not parse: it ends early, at character {token.at}")
        if token.kind == "op" and token.text in _CONSTRUCT_OPERATORS:
            return _Refused(construct_refused(_CONSTRUCT_OPERATORS[token.text]))
        shown = f"`{token.text}`" if token.kind == "quoted" else token.text
        return _Refused(_unexpected(shown, token.at))

    @contextmanager
    def deeper(self) -> Iterator[None]:
        """Around a rule that nests (parentheses, arguments, operands of a prefix operator):
        bounds the recursion of this parser as ``MAX_DEPTH`` bounds Spark's tree."""
        self.nesting += 1
        self._depth(self.nesting)
        try:
            yield
        finally:
            self.nesting -= 1

    @staticmethod
    def _depth(depth: int) -> int:
        if depth > MAX_DEPTH:
            raise _Refused(f"is nested too deeply: at most {MAX_DEPTH} levels")
        return depth

    # booleanExpression

    def expression(self) -> int:
        return self._chain("OR", self._conjunction)

    def _conjunction(self) -> int:
        return self._chain("AND", self._negation)

    def _chain(self, word: str, operand: Callable[[], int]) -> int:
        """``a AND b AND c``: Spark builds a balanced tree of a chain of ANDs or ORs."""
        depths = [operand()]
        while self.is_word(word):
            self.advance()
            depths.append(operand())
        return self._depth(max(depths) + math.ceil(math.log2(len(depths))))

    def _negation(self) -> int:
        if self.is_word("NOT"):
            self.advance()
            with self.deeper():
                return self._depth(self._negation() + 1)
        if self.is_op("!"):
            raise _Refused(construct_refused("! (write NOT)"))
        return self._predicated()

    # predicate

    def _predicated(self) -> int:
        depth = self._value()
        negated = self.is_word("NOT") and self.is_word(
            "IN", "LIKE", "ILIKE", "RLIKE", "REGEXP", "BETWEEN", token=self.peek()
        )
        if negated:
            self.advance()
        if self.is_word("BETWEEN"):
            self.advance()
            low = self._value()
            self.expect_word("AND")
            depth = max(depth, low, self._value()) + 1
        elif self.is_word("IN"):
            self.advance()
            self.expect_op("(")
            depth = max(depth, *self._list()) + 1
        elif self.is_word("LIKE", "ILIKE"):
            self.advance()
            if self.is_word("ANY", "SOME", "ALL") and self.is_op("(", token=self.peek()):
                self.advance()
                self.advance()
                depth = max(depth, *self._list()) + 1
            else:
                depth = max(depth, self._value()) + 1
                if self.is_word("ESCAPE"):
                    self.advance()
                    if self.token.kind != "string":
                        raise self.unexpected()
                    self.advance()
        elif self.is_word("RLIKE", "REGEXP"):
            self.advance()
            depth = max(depth, self._value()) + 1
        elif self.is_word("IS"):
            self.advance()
            depth += 1
            if self.is_word("NOT"):
                self.advance()
                depth += 1
            if self.is_word("NULL", "TRUE", "FALSE"):
                self.advance()
            elif self.is_word("DISTINCT"):
                self.advance()
                self.expect_word("FROM")
                depth = max(depth, self._value() + 1)
            elif self.is_word("UNKNOWN"):
                raise _Refused(construct_refused("IS UNKNOWN (write IS NULL)"))
            else:
                raise self.unexpected()
        return self._depth(depth + int(negated))

    def _list(self) -> list[int]:
        """``expression, ...)`` after an opening parenthesis: the items' depths."""
        with self.deeper():
            depths = [self.expression()]
            while self.is_op(","):
                self.advance()
                depths.append(self.expression())
        self.expect_op(")")
        return depths

    # valueExpression

    def _value(self, level: int = 0) -> int:
        if level == len(_LEVELS):
            return self._unary()
        depth = self._value(level + 1)
        while self.is_op(*_LEVELS[level]) or ("DIV" in _LEVELS[level] and self.is_word("DIV")):
            self.advance()
            depth = self._depth(max(depth, self._value(level + 1)) + 1)
        return depth

    def _unary(self) -> int:
        if self.is_op("-", "+", "~"):
            self.advance()
            with self.deeper():
                return self._depth(self._unary() + 1)
        return self._postfix()

    def _postfix(self) -> int:
        depth = self._primary()
        while True:
            if self.is_op("["):
                self.advance()
                with self.deeper():
                    index = self._value()
                self.expect_op("]")
                depth = max(depth, index) + 1
            elif self.is_op(".") and self.peek().kind in ("word", "quoted"):
                self.advance()
                self.advance()
                if self.is_op("("):
                    raise self.unexpected()
                depth += 1
            elif self.is_op(".") and self.is_op("*", token=self.peek()):
                raise _Refused(construct_refused("*"))
            elif self.is_op("::"):
                self.advance()
                self._type()
                depth += 1
            elif self.is_word("COLLATE"):
                raise _Refused(construct_refused("COLLATE"))
            else:
                return self._depth(depth)

    # primaryExpression

    def _primary(self) -> int:
        token = self.token
        if token.kind == "number":
            self.advance()
            return 1
        if token.kind == "string":
            while self.token.kind == "string":  # 'a' 'b' is 'ab'
                self.advance()
            return 1
        if self.is_op("("):
            self.advance()
            with self.deeper():
                depth = self.expression()
            if self.is_op(","):
                raise _Refused(construct_refused("a row or struct ((a, b))"))
            self.expect_op(")")
            return depth + 1
        if token.kind == "word":
            word = token.text.upper()
            if word in ("TRUE", "FALSE", "NULL"):
                self.advance()
                return 1
            if word in _QUERY_WORDS or (
                word == "EXISTS" and self.is_op("(", token=self.peek()) and self._query_at(self.peek(2))
            ):
                raise _Refused(construct_refused(_SUBQUERY))
            if word == "CASE":
                return self._case()
            if word in ("CAST", "TRY_CAST") and self.is_op("(", token=self.peek()):
                return self._cast()
            if word == "INTERVAL":
                return self._interval()
            if word in _TYPED_LITERALS and self.peek().kind == "string":
                self.advance()
                self.advance()
                return 1
            if word in _RESERVED:
                raise self.unexpected()
        if token.kind in ("word", "quoted"):
            return self._name()
        raise self.unexpected()

    def _query_at(self, token: _Token) -> bool:
        return token.kind == "word" and token.text.upper() in _QUERY_WORDS

    def _name(self) -> int:
        """A column (``error_message``, ``headers.team``) or a function call (``upper(x)``):
        Spark reads ``a.b.c`` as one name, and ``a.b(x)`` as a call of function ``a.b``."""
        parts = [self.advance().text]
        while self.is_op(".") and self.peek().kind in ("word", "quoted"):
            self.advance()
            parts.append(self.advance().text)
        if self.is_op("("):
            return self._call(parts)
        if self.is_op("=>", "->"):  # f(name => x), x -> x + 1
            raise self.unexpected()
        if not column_allowed(tuple(parts)):
            raise _Refused(column_refused(parts[0]))
        return 1

    def _call(self, parts: list[str]) -> int:
        if len(parts) != 1 or not function_allowed(parts[0]):
            raise _Refused(function_refused(".".join(parts)))
        self.advance()  # (
        if self.is_op(")"):
            self.advance()
            return 1
        return max(self._list()) + 1

    def _case(self) -> int:
        self.advance()  # CASE
        depths: list[int] = []
        with self.deeper():
            if not self.is_word("WHEN"):  # CASE x WHEN 1 ...: each branch is x = 1
                depths.append(self.expression() + 1)
            if not self.is_word("WHEN"):
                raise self.unexpected()
            while self.is_word("WHEN"):
                self.advance()
                depths.append(self.expression() + 1)
                self.expect_word("THEN")
                depths.append(self.expression())
            if self.is_word("ELSE"):
                self.advance()
                depths.append(self.expression())
            self.expect_word("END")
        return self._depth(max(depths) + 1)

    def _cast(self) -> int:
        self.advance()  # CAST or TRY_CAST
        self.advance()  # (
        with self.deeper():
            depth = self.expression()
        self.expect_word("AS")
        self._type()
        self.expect_op(")")
        return depth + 1

    def _type(self) -> None:
        token = self.token
        if token.kind != "word":
            raise self.unexpected()
        if not cast_allowed(token.text):
            raise _Refused(cast_refused(token.text.lower()))
        self.advance()
        if self.is_op("("):  # DECIMAL(10, 2), VARCHAR(10)
            self.advance()
            while True:
                if self.token.kind != "number":
                    raise self.unexpected()
                self.advance()
                if not self.is_op(","):
                    break
                self.advance()
            self.expect_op(")")
        if self.is_word("COLLATE"):
            raise _Refused(construct_refused("COLLATE"))

    def _interval(self) -> int:
        """``INTERVAL '1 day'``, ``INTERVAL 1 DAY 2 HOURS``, ``INTERVAL '1-2' YEAR TO MONTH``."""
        self.advance()  # INTERVAL
        if self.token.kind == "string" and not self.is_word(*_INTERVAL_UNITS, token=self.peek()):
            self.advance()
            return 1
        while True:
            if self.is_op("+", "-"):
                self.advance()
            if self.token.kind not in ("number", "string"):
                raise self.unexpected()
            self.advance()
            if not self.is_word(*_INTERVAL_UNITS):
                raise self.unexpected()
            self.advance()
            if self.is_word("TO"):
                self.advance()
                if not self.is_word(*_INTERVAL_UNITS):
                    raise self.unexpected()
                self.advance()
                return 1
            value_next = self.token.kind in ("number", "string") and self.is_word(
                *_INTERVAL_UNITS, token=self.peek()
            )
            signed_next = (
                self.is_op("+", "-")
                and self.peek().kind in ("number", "string")
                and self.is_word(*_INTERVAL_UNITS, token=self.peek(2))
            )
            if not (value_next or signed_next):
                return 1
