"""``kubectl dlq``: how dead letters, counts and expired ranges print."""

from __future__ import annotations

import json

import pytest
import yaml

from spark_dlq_operator.kubectl_dlq import expired, render, times
from spark_dlq_operator.kubectl_dlq.letters import Stats, count
from spark_dlq_operator.kubectl_dlq.times import Window
from tests.unit.dead_letters import T0, letter


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
