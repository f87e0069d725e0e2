"""``kubectl dlq``: what it parses from the command line, how it filters and counts dead letters,
and how it prints them. The reading of a real topic is in tests/integration/test_kubectl_dlq.py."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.model import headers as h
from dlq_engine.model.dead_letter import DeadLetter
from dlq_engine.model.policy import parse_policy
from dlq_engine.routing.headers import failure_headers
from spark_dlq_operator.kubectl_dlq import cli, expired, policies, render, times
from spark_dlq_operator.kubectl_dlq import target as targets
from spark_dlq_operator.kubectl_dlq.errors import BadInput, Unreachable
from spark_dlq_operator.kubectl_dlq.letters import Filters, Stats, count, select
from spark_dlq_operator.kubectl_dlq.times import Window
from tests.policy_builder import DELETE, policy_document

T0 = 1_795_600_000_000  # 2026-11-25T09:46:40Z


def letter(
    offset: int = 0,
    *,
    partition: int = 0,
    failed_at: int | None = T0,
    reason: str | None = "exhausted",
    error_class: str = "ValueError",
    message: str = "bad amount",
    key: bytes | None = b"order-1",
    value: bytes | None = b'{"id": 1}',
    timestamp: int | None = None,
    stacktrace: str | None = "Traceback (most recent call last):\nValueError: bad amount",
    extra: tuple[tuple[str, bytes | None], ...] = (),
) -> DeadLetter:
    headers = failure_headers(
        origin={h.ORIGINAL_TOPIC: "orders", h.ORIGINAL_PARTITION: "2", h.ORIGINAL_OFFSET: "17"},
        attempt=4,
        error_class=error_class,
        error_message=message,
        stacktrace=stacktrace,
        policy="payments/orders-billing",
        subscription="billing",
        failed_at=failed_at if failed_at is not None else 0,
        reason=reason,
        static={"team": "payments"},
    )
    if failed_at is None:
        headers = [(k, v) for k, v in headers if k != h.FAILED_AT]
    return DeadLetter(
        partition=partition,
        offset=offset,
        timestamp=timestamp if timestamp is not None else (failed_at or T0) + 5,
        key=key,
        value=value,
        headers=(*headers, *extra),
    )


# ---------------------------------------------------------------------------------------------
# Times, ranges, positions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-25T09:46:40Z", T0),
        ("2026-11-25T09:46:40.250Z", T0 + 250),
        ("2026-11-25T10:46:40+01:00", T0),
        ("2026-11-25T09:46:40", T0),  # no zone: UTC, as printed
        ("2026-11-25", T0 - (9 * 3600 + 46 * 60 + 40) * 1000),
    ],
)
def test_times_are_iso_8601(text: str, expected: int) -> None:
    assert times.parse_time(text, flag="--after") == expected


def test_a_bad_time_names_the_flag() -> None:
    with pytest.raises(BadInput, match=r"^--before: must be an ISO-8601 time .*'yesterday'"):
        times.parse_time("yesterday", flag="--before")


def test_since_counts_back_from_now() -> None:
    assert times.parse_window("1h30m", None, None, now_ms=T0) == Window(T0 - 5_400_000, None)
    assert times.parse_window(None, None, None, now_ms=T0) == Window()
    window = times.parse_window(None, "2026-11-25T09:00:00Z", "2026-11-25T10:00:00Z", now_ms=T0)
    assert window == Window(T0 - 2_800_000, T0 + 800_000)


@pytest.mark.parametrize(
    ("since", "after", "before", "problem"),
    [
        ("1h", "2026-11-25", None, "give --since or --after, not both"),
        ("1x", None, None, "--since: must be a duration such as 500ms"),
        ("0", None, None, "--since: must be longer than 0"),
        (None, "2026-11-26", "2026-11-25", "the range is empty: 2026-11-26T00:00:00Z is not before"),
        (None, None, "soon", "--before: must be an ISO-8601 time"),
    ],
)
def test_bad_ranges_are_refused(
    since: str | None, after: str | None, before: str | None, problem: str
) -> None:
    with pytest.raises(BadInput) as info:
        times.parse_window(since, after, before, now_ms=T0)
    assert str(info.value).startswith(problem)


def test_window_bounds_after_inclusive_before_exclusive() -> None:
    window = Window(100, 200)
    assert 100 in window
    assert 199 in window
    assert 200 not in window
    assert 99 not in window
    assert None not in window
    assert None in Window()  # an open window holds records without a time


def test_positions_are_partition_slash_offset() -> None:
    assert cli.parse_position("2/1534") == (2, 1534)
    # -1: a non-partitioned Pulsar topic's, as the engine numbers it.
    assert cli.parse_position("-1/3") == (-1, 3)
    for bad in ("2", "2:1534", "-2/3", "a/b", "2/1534/1"):
        with pytest.raises(BadInput, match="PARTITION/OFFSET such as 2/1534"):
            cli.parse_position(bad)


# ---------------------------------------------------------------------------------------------
# The policy and the Kafka client's settings


def test_kafka_config_reads_key_value_lines(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# SASL\nsecurity.protocol = SASL_SSL\n\nsasl.mechanism=PLAIN\nsasl.password=a=b\n")
    assert targets.read_kafka_config(str(path)) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.password": "a=b",
    }


def test_kafka_config_problems_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\nssl.ca.location\n")
    with pytest.raises(BadInput, match=r"client.properties:2: expected key=value, got 'ssl.ca.location'"):
        targets.read_kafka_config(str(path))
    with pytest.raises(BadInput, match=r"--kafka-config .*missing: No such file"):
        targets.read_kafka_config(str(tmp_path / "missing"))


def test_the_topic_is_the_policys_dead_letter_topic() -> None:
    default = parse_policy(policy_document())
    target = targets.target_for(default, bootstrap_servers=None, kafka_config=None)
    assert target.topic == "orders-billing-DLQ"
    assert target.client == {"bootstrap.servers": "kafka.kafka:9092"}
    assert "spec.broker.bootstrapServers of payments/orders-billing" in target.broker_origin
    named = parse_policy(policy_document({"spec.deadLetter.topic": "billing-dead"}))
    assert targets.target_for(named, bootstrap_servers=None, kafka_config=None).topic == "billing-dead"


PULSAR_BROKER = {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"}


def test_a_pulsar_policy_is_read_at_its_service_url_or_the_flags() -> None:
    pulsar = parse_policy(policy_document({"spec.broker": PULSAR_BROKER}))
    target = targets.target_for(pulsar, bootstrap_servers=None, kafka_config=None)
    assert (target.broker, target.topic, target.address) == (
        "pulsar",
        "orders-billing-DLQ",
        "pulsar://p:6650",
    )
    assert target.broker_origin.startswith("spec.broker.serviceUrl of payments/orders-billing")
    given = targets.target_for(
        pulsar, bootstrap_servers=None, kafka_config=None, service_url="pulsar://laptop:6650"
    )
    assert (given.address, given.broker_origin) == ("pulsar://laptop:6650", "--service-url")


@pytest.mark.parametrize(
    ("spec", "flags", "problem"),
    [
        pytest.param(PULSAR_BROKER, {"bootstrap_servers": "k:9092"}, r"--bootstrap-servers: is for a Kafka policy; payments/orders-billing is on Pulsar", id="kafka-flag-on-pulsar"),
        pytest.param(PULSAR_BROKER, {"kafka_config": "client.properties"}, r"--kafka-config: is for a Kafka policy", id="kafka-config-on-pulsar"),
        pytest.param(None, {"service_url": "pulsar://p:6650"}, r"--service-url: is for a Pulsar policy; payments/orders-billing is on Kafka", id="pulsar-flag-on-kafka"),
        pytest.param(PULSAR_BROKER, {"service_url": "http://p:8080"}, r"--service-url: must be pulsar://host:port", id="not-a-service-url"),
    ],
)  # fmt: skip
def test_the_other_brokers_options_are_refused(spec: Any, flags: dict[str, str], problem: str) -> None:
    policy = parse_policy(policy_document({"spec.broker": spec} if spec else {}))
    given = {"bootstrap_servers": None, "kafka_config": None, **flags}
    with pytest.raises(BadInput, match=problem):
        targets.target_for(policy, **given)


def test_the_broker_address_flag_over_the_file_over_the_policy(tmp_path: Path) -> None:
    policy = parse_policy(policy_document())
    config = tmp_path / "client.properties"
    config.write_text("bootstrap.servers=file:9093\nsecurity.protocol=SSL\n")
    target = targets.target_for(policy, bootstrap_servers=None, kafka_config=str(config))
    assert target.client == {"bootstrap.servers": "file:9093", "security.protocol": "SSL"}
    assert target.broker_origin == f"bootstrap.servers in {config}"
    target = targets.target_for(policy, bootstrap_servers="localhost:9092", kafka_config=str(config))
    assert target.client["bootstrap.servers"] == "localhost:9092"
    assert target.broker_origin == "--bootstrap-servers"
    with pytest.raises(BadInput, match="--bootstrap-servers: must not be empty"):
        targets.target_for(policy, bootstrap_servers=" ", kafka_config=None)


def test_kubectl_gets_the_connection_flags_a_plugin_was_given() -> None:
    command = policies.kubectl_command(
        "orders-billing", namespace="payments", kubeconfig="/k/config", context="prod", timeout_ms=10_000
    )
    assert command[1:] == [
        "--kubeconfig=/k/config",
        "--context=prod",
        "--namespace=payments",
        "--request-timeout=10s",
        "get",
        "deadletterpolicies.sparkdlq.io",
        "orders-billing",
        "-o",
        "yaml",
    ]
    bare = policies.kubectl_command("p", namespace=None, kubeconfig=None, context=None, timeout_ms=500)
    assert bare[1:3] == ["--request-timeout=1s", "get"]


def test_policy_names_are_checked_before_kubectl_runs() -> None:
    kwargs: dict[str, Any] = {"kubeconfig": None, "context": None, "timeout_ms": 1000}
    with pytest.raises(BadInput, match="--policy: 'Orders_Billing' is not a valid resource name"):
        policies.policy_from_cluster("Orders_Billing", namespace=None, **kwargs)
    with pytest.raises(BadInput, match="--namespace: 'a b' is not a valid namespace name"):
        policies.policy_from_cluster("orders", namespace="a b", **kwargs)


def test_a_missing_kubectl_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECTL", str(tmp_path / "no-kubectl"))
    with pytest.raises(Unreachable, match=r"no-kubectl is not on the PATH \(--policy reads the policy"):
        policies.policy_from_cluster("orders", namespace=None, kubeconfig=None, context=None, timeout_ms=1000)


def test_a_bad_policy_file_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy_document({"spec.source.topic": "no spaces"})))
    with pytest.raises(BadInput, match=r"policy.yaml:\d+: spec.source.topic: "):
        policies.policy_from_file(str(path))


# ---------------------------------------------------------------------------------------------
# A dead letter's fields


def test_a_dead_letter_reads_its_headers() -> None:
    dead = letter(7, partition=2, failed_at=T0 + 1)
    assert dead.position == "2/7"
    assert dead.failed_at == T0 + 1
    assert (dead.reason, dead.error_class, dead.error_message) == ("exhausted", "ValueError", "bad amount")
    assert dead.attempt == 4
    assert dead.original == "orders/2/17"
    assert dead.redrive_count is None
    redriven = letter(extra=((h.REDRIVE_COUNT, b"2"),))
    assert redriven.redrive_count == 2


def test_failure_time_falls_back_to_the_record_timestamp() -> None:
    assert letter(failed_at=None, timestamp=T0 + 9).failed_at == T0 + 9
    garbled = DeadLetter(0, 0, T0, None, None, ((h.FAILED_AT, b"soon"), (h.ATTEMPT, b"\xff")))
    assert garbled.failed_at == T0
    assert garbled.attempt is None
    assert garbled.reason is None
    assert garbled.original is None


def test_filters_match_every_given_field() -> None:
    fraud = letter(1, reason="terminated", error_class="billing.errors.FraudError", key=b"order-9")
    flaky = letter(2, reason="exhausted", error_class="TimeoutError", key=None)
    assert Filters()(fraud)
    assert Filters()(flaky)
    assert Filters(reasons=frozenset({"terminated", "non-retryable"}))(fraud)
    assert not Filters(reasons=frozenset({"terminated"}))(flaky)
    # An error class matches by its full name or its last dotted part.
    assert Filters(error_classes=frozenset({"FraudError"}))(fraud)
    assert Filters(error_classes=frozenset({"billing.errors.FraudError"}))(fraud)
    assert not Filters(error_classes=frozenset({"errors.FraudError"}))(fraud)
    assert Filters(key="order-9")(fraud)
    assert not Filters(key="order-9")(flaky)
    assert not Filters(key="order-")(fraud)
    assert not Filters(Window(T0 + 1, None))(fraud)
    assert Filters(Window(T0, T0 + 1))(fraud)


def test_select_lists_oldest_first_and_limit_keeps_the_newest() -> None:
    letters = [letter(i, partition=i % 2, failed_at=T0 + (5 - i) * 1000) for i in range(6)]
    chosen = select(letters, Filters(), None)
    assert [d.offset for d in chosen] == [5, 4, 3, 2, 1, 0]
    assert all(d.value is None for d in chosen)  # values are not kept for a list
    assert [d.offset for d in select(letters, Filters(), 2)] == [1, 0]
    tied = [letter(3, partition=1), letter(9, partition=0), letter(2, partition=1)]
    assert [d.position for d in select(tied, Filters(), None)] == ["0/9", "1/2", "1/3"]


def test_stats_count_reasons_classes_and_both() -> None:
    letters = [
        letter(0, failed_at=T0 + 3000),
        letter(1, failed_at=T0 + 1000),
        letter(2, reason="terminated", error_class="FraudError", failed_at=T0 + 2000),
        letter(3, reason=None, failed_at=T0 + 9000),
    ]
    stats = count(letters, Window(None, T0 + 5000))
    assert stats.total == 3
    assert (stats.oldest, stats.newest) == (T0 + 1000, T0 + 3000)
    assert stats.by_reason == {"exhausted": 2, "terminated": 1}
    assert stats.by_class == {"ValueError": 2, "FraudError": 1}
    assert stats.by_both == {("exhausted", "ValueError"): 2, ("terminated", "FraudError"): 1}
    everything = count(letters, Window())
    assert everything.by_reason[times.NONE] == 1


# ---------------------------------------------------------------------------------------------
# Output


def test_times_print_in_utc() -> None:
    assert times.format_time(T0 + 123) == "2026-11-25T09:46:40Z"
    assert times.format_time(T0 + 123, precise=True) == "2026-11-25T09:46:40.123Z"
    assert times.format_time(None) == "<none>"


def test_keys_and_headers_print_as_text_or_hex() -> None:
    assert render.show_bytes(b"order-1") == "order-1"
    assert render.show_bytes(None) == "<none>"
    assert render.show_bytes(b"\x00\xff") == "0x00ff"
    assert render.show_bytes(b"a\nb") == "0x610a62"
    assert render.show_header(b"line one\n  line two") == "line one line two"
    assert render.show_header(b"\xc3") == "0xc3"


def test_table_cuts_the_last_column_to_the_width() -> None:
    rows = [["a", "short"], ["bbbb", "x" * 50]]
    text = render.table(["NAME", "MESSAGE"], rows, width=20)
    assert text.splitlines() == ["NAME   MESSAGE", "a      short", "bbbb   " + "x" * 10 + "..."]
    assert all(len(line) <= 20 for line in text.splitlines())
    assert render.table(["NAME", "MESSAGE"], rows).splitlines()[2].endswith("x" * 50)
    # Never narrower than MIN_MESSAGE_COLUMN, however narrow the terminal.
    assert render.table(["NAME", "MESSAGE"], rows, width=5).splitlines()[2] == "bbbb   xxxx..."


def test_the_width_comes_from_columns_or_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Pipe:
        def isatty(self) -> bool:
            return False

    monkeypatch.delenv("COLUMNS", raising=False)
    assert render.terminal_width(Pipe()) is None  # a pipe gets whole messages
    monkeypatch.setenv("COLUMNS", "123")
    assert render.terminal_width(Pipe()) == 123


def test_ls_rows() -> None:
    long_key = ("k" * 60).encode()
    dead = letter(3, partition=1, message="first line\nsecond line", key=long_key)
    header, [row] = render.ls_rows([dead], wide=False)
    assert header == ["TIME", "PARTITION/OFFSET", "KEY", "REASON", "CLASS", "MESSAGE"]
    assert row == [
        "2026-11-25T09:46:40Z",
        "1/3",
        "k" * 37 + "...",
        "exhausted",
        "ValueError",
        "first line second line",
    ]
    header, [row] = render.ls_rows([dead], wide=True)
    assert header[5:] == ["ATTEMPT", "ORIGINAL", "REDRIVES", "MESSAGE"]
    assert row[2] == "k" * 60
    assert row[5:8] == ["4", "orders/2/17", "0"]


def test_values_show_as_json_text_or_hex() -> None:
    assert render.value_text(b'{"id":1,"tags":["a"]}') == (
        "JSON, 21 bytes",
        '{\n  "id": 1,\n  "tags": [\n    "a"\n  ]\n}',
    )
    assert render.value_text("héllo\nworld".encode()) == ("text, 12 bytes", "héllo\nworld")
    assert render.value_text(None) == ("null", "<none>")
    kind, dump = render.value_text(b"\x00\x01AB")  # valid UTF-8, but control characters
    assert kind == "binary, 4 bytes"
    assert dump == "00000000  00 01 41 42" + " " * 36 + "  |..AB|"


def test_hexdump_lines_of_sixteen() -> None:
    lines = render.hexdump(bytes(range(65, 65 + 20))).splitlines()
    assert lines[0] == "00000000  41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50  |ABCDEFGHIJKLMNOP|"
    assert lines[1].startswith("00000010  51 52 53 54 ")
    assert lines[1].endswith("  |QRST|")


def test_show_text_has_headers_value_and_stack_trace() -> None:
    text = render.show_text(letter(4, partition=2, value=b'{"id": 17}'), topic="orders-billing-DLQ")
    lines = text.splitlines()
    assert lines[:3] == [
        "Topic:        orders-billing-DLQ",
        "Position:     2/4",
        "Timestamp:    2026-11-25T09:46:40.005Z",
    ]
    assert "Reason:       exhausted" in lines
    assert "  dlq.error.class:         ValueError" in lines
    assert "  team:                    payments" in lines
    assert not any(line.startswith("  dlq.error.stacktrace") for line in lines)  # in its own section
    assert text.endswith(
        'Value (JSON, 10 bytes):\n  {\n    "id": 17\n  }\n'
        "Stack trace:\n  Traceback (most recent call last):\n  ValueError: bad amount"
    )
    bare = render.show_text(letter(stacktrace=None, value=None), topic="t")
    assert bare.endswith("Value (null):\n  <none>\nStack trace:\n  <none>")


def test_documents_for_json_and_yaml() -> None:
    dead = letter(4, partition=2, key=b"\xff", value=b"plain")
    document = render.letter_document(dead, topic="t", value=True)
    assert document["failedAt"] == "2026-11-25T09:46:40.000Z"
    assert document["key"] == {"encoding": "hex", "data": "ff"}
    assert document["value"] == {"encoding": "text", "data": "plain"}
    assert {"name": "team", "encoding": "text", "data": "payments"} in document["headers"]
    assert "value" not in render.letter_document(dead, topic="t", value=False)
    json_value = render.letter_document(letter(value=b'{"a": [1]}'), topic="t", value=True)["value"]
    assert json_value == {"encoding": "json", "data": {"a": [1]}}
    assert json.loads(render.dump(document, "json")) == yaml.safe_load(render.dump(document, "yaml"))


def test_stats_print_as_tables_and_documents() -> None:
    letters = [letter(0), letter(1), letter(2, reason="terminated", error_class="billing.FraudError")]
    stats = count(letters, Window())
    text = render.stats_text(stats, topic="orders-billing-DLQ", window=Window(T0, None))
    assert text.splitlines()[:5] == [
        "TOPIC    orders-billing-DLQ",
        "RANGE    2026-11-25T09:46:40Z .. now",
        "TOTAL    3",
        "OLDEST   2026-11-25T09:46:40Z",
        "NEWEST   2026-11-25T09:46:40Z",
    ]
    assert text.endswith(
        "REASON       CLASS                COUNT\n"
        "exhausted    ValueError           2\n"
        "terminated   billing.FraudError   1"
    )
    document = render.stats_document(stats, topic="t", window=Window())
    assert document["byReason"] == {"exhausted": 2, "terminated": 1}
    assert list(document["byErrorClass"]) == ["ValueError", "billing.FraudError"]  # most first
    assert document["byReasonAndErrorClass"][0] == {
        "reason": "exhausted",
        "errorClass": "ValueError",
        "count": 2,
    }
    empty = render.stats_text(Stats(), topic="t", window=Window())
    assert empty.splitlines() == [
        "TOPIC    t",
        "RANGE    all",
        "TOTAL    0",
        "OLDEST   <none>",
        "NEWEST   <none>",
    ]


# ---------------------------------------------------------------------------------------------
# The command line


def test_common_options_go_before_or_after_the_command() -> None:
    before = cli.parse_args(["-f", "p.yaml", "--bootstrap-servers", "b:1", "ls", "--limit", "3"])
    after = cli.parse_args(["ls", "-f", "p.yaml", "--bootstrap-servers", "b:1", "--limit", "3"])
    for args in (before, after):
        assert (args.command, args.file, args.bootstrap_servers, args.limit) == ("ls", "p.yaml", "b:1", 3)
        assert args.policy is None
        assert args.request_timeout == "10s"
    show = cli.parse_args(["show", "2/1534", "--policy", "orders", "-n", "payments", "-o", "json"])
    assert (show.position, show.policy, show.namespace, show.output) == (
        "2/1534",
        "orders",
        "payments",
        "json",
    )


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        ([], "error: the following arguments are required: COMMAND (see 'kubectl dlq --help')"),
        (
            ["ls", "--limit", "0"],
            "error: argument --limit: must be at least 1, got 0 (see 'kubectl dlq ls --help')",
        ),
        (["ls", "-o", "csv"], "error: argument -o/--output: invalid choice: 'csv'"),
        (["stats", "--bogus"], "error: unrecognized arguments: --bogus"),
        (
            ["ls", "-f", "p.yaml", "--since", "1h", "--after", "2026-11-25"],
            "error: give --since or --after, not both",
        ),
        (["show", "2-1534", "-f", "p.yaml"], "error: the position must be PARTITION/OFFSET"),
        (["stats"], "error: give the policy as -f FILE or as --policy NAME (one of them)"),
        (["stats", "-f", "p.yaml", "--policy", "p"], "error: give the policy as -f FILE or as --policy NAME"),
        (
            ["stats", "-f", "p.yaml", "--request-timeout", "soon"],
            "error: --request-timeout: must be a duration",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_status_2(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = cli.main(argv)
    except SystemExit as exit:
        status = exit.code  # argparse's own refusals
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err.startswith(problem)
    assert captured.err.count("\n") == 1


def test_every_option_is_in_the_reference() -> None:
    from spark_dlq_devtools.paths import REPO_ROOT

    reference = (REPO_ROOT / "docs" / "reference.md").read_text()
    section = reference[reference.index("## 5. Triage: `kubectl dlq`") :]
    parser = cli.build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    options = set()
    for sub in (parser, *commands.choices.values()):
        for action in sub._actions:
            options.update(o for o in action.option_strings if o.startswith("--") and o != "--help")
    assert {"--since", "--limit", "--kafka-config", "--request-timeout"} <= options
    assert set(commands.choices) == {"stats", "ls", "show", "redrive"}
    missing = sorted(o for o in options if f"`{o}" not in section and f", `{o}" not in section)
    assert not missing, missing
    for command in commands.choices:
        assert f"kubectl dlq {command}" in section


@pytest.mark.parametrize(
    ("lows", "jumps", "spans"),
    [
        pytest.param({0: 0, 1: 0}, {}, {}, id="nothing-deleted"),
        pytest.param({0: 3, 1: 0}, {}, {0: [(0, 2)]}, id="before-the-first-kept"),
        pytest.param({0: 9}, {0: [(5, 8)]}, {0: [(0, 8)]}, id="a-jump-within-what-went-before"),
        pytest.param({0: 0}, {0: [(4, 4), (9, 9)]}, {}, id="transaction-markers-are-not-expired"),
        pytest.param({0: 7}, {0: [(6, 6)]}, {0: [(0, 6)]}, id="deleted-while-read"),
    ],
)
def test_expired_spans_are_the_offsets_below_the_first_kept(
    lows: dict[int, int], jumps: dict[int, list[tuple[int, int]]], spans: dict[int, list[tuple[int, int]]]
) -> None:
    assert expired.expired_spans(lows, jumps) == spans


def test_expired_dead_letters_in_stats() -> None:
    spans = {0: [(0, 1)], 2: [(0, 0)]}
    assert expired.describe_spans(spans) == "0/0-1, 2/0"
    text = render.stats_text(Stats(), topic="t", window=times.Window(), expired=spans)
    assert "EXPIRED   3 (deleted by the broker: 0/0-1, 2/0)" in text.splitlines()
    document = render.stats_document(Stats(), topic="t", window=times.Window(), expired=spans)
    assert (document["expired"], document["expiredRanges"][1]) == (3, {"partition": 2, "first": 0, "last": 0})
    assert "EXPIRED" not in render.stats_text(Stats(), topic="t", window=times.Window())


# --- a policy that names no broker gets its class's (issue 27: the operator's rule, reused) ---

WHERE = "deadletterpolicy payments/orders-billing"


def class_object(
    name: str, *, default: bool = False, brokers: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    annotations = {"sparkdlq.io/is-default-class": "true"} if default else {}
    spec = {"brokers": brokers} if brokers is not None else {}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": spec}


def brokerless(**overrides: Any) -> dict[str, Any]:
    return policy_document({"spec.broker": DELETE, "metadata.namespace": "payments", **overrides})


KAFKA_A = {"bootstrapServers": "kafka-a:9092", "operatorSecretRef": {"name": "op"}}
KAFKA_B = {"bootstrapServers": "kafka-b:9092", "engineSecretName": "kafka-client"}


@pytest.mark.parametrize(
    ("policy", "classes", "broker", "origin"),
    [
        pytest.param(
            brokerless(**{"spec.className": "team-b"}),
            [class_object("std", default=True, brokers=[KAFKA_A]), class_object("team-b", brokers=[KAFKA_B])],
            {"type": "kafka", "bootstrapServers": "kafka-b:9092", "secretRef": {"name": "kafka-client"}},
            "spec.brokers[0] of class 'team-b'",
            id="its-named-class",
        ),
        pytest.param(
            brokerless(),
            [class_object("std", default=True, brokers=[KAFKA_A, KAFKA_B]), class_object("team-b")],
            {"type": "kafka", "bootstrapServers": "kafka-a:9092"},
            "spec.brokers[0] of class 'std'",
            id="the-default-class-first-broker",
        ),
    ],
)
def test_a_policy_without_a_broker_gets_its_classs(
    policy: dict[str, Any], classes: list[dict[str, Any]], broker: dict[str, Any], origin: str
) -> None:
    found, note = policies.class_broker(policy, classes, where=WHERE)
    assert found == broker
    assert note == f"{origin}, the broker of {WHERE}; --bootstrap-servers overrides it"


@pytest.mark.parametrize(
    ("policy", "classes", "message"),
    [
        pytest.param(
            brokerless(**{"spec.className": "team-b"}),
            [class_object("team-b")],
            "spec.broker: is required: class 'team-b' lists no brokers (spec.brokers) to take it from; "
            "give the broker with --bootstrap-servers",
            id="class-lists-none",
        ),
        pytest.param(
            brokerless(),
            [],
            "spec.broker: is required: class 'built-in' lists no brokers (spec.brokers) to take it from "
            "(no DeadLetterPolicyClass in the cluster: the operator's built-in class, whose "
            "--kafka-config-brokers kubectl dlq cannot see); give the broker with --bootstrap-servers",
            id="no-class-in-the-cluster",
        ),
        pytest.param(
            brokerless(**{"spec.className": "gone"}),
            [class_object("std", default=True, brokers=[KAFKA_A])],
            "spec.className: DeadLetterPolicyClass 'gone' does not exist (classes: std)",
            id="class-not-found",
        ),
        pytest.param(
            brokerless(),
            [class_object("a", brokers=[KAFKA_A]), class_object("b", brokers=[KAFKA_B])],
            "spec.className: is not set and no DeadLetterPolicyClass is marked default",
            id="no-default-class",
        ),
    ],
)
def test_a_policy_without_a_broker_whose_class_gives_none_is_bad_input_naming_the_field(
    policy: dict[str, Any], classes: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(BadInput) as refused:
        policies.class_broker(policy, classes, where=WHERE)
    assert str(refused.value).startswith(f"{WHERE}: {message}"), str(refused.value)
