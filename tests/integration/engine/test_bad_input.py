"""Malformed messages never crash the engine or get lost: each ends where a user would expect,
with its reason in the headers. All cases go through one engine run on the real broker and
local Spark; each record carries a ``case`` header naming it and a ``do`` header telling the
processor (``tests/processors/bad_input.py``) what to do with it. docs/reliability.md ("Bad input")
lists the same cases and outcomes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from dlq_engine.exits import EXIT_OK
from dlq_engine.routing.record_size import EMPTY_RECORD, HEADER_OVERHEAD
from tests.helpers import Record, read_all

MAX_REDELIVER = 1
MIB = 1024 * 1024
BIG = bytes(range(256)) * (MIB // 256)  # 1 MiB holding every byte value
#: The retry and dead-letter topics' limit (above the 1 MiB cases'); the source and output topics
#: take 10 MB records, so that a 10 MB result meets the sink producer's limit (max.request.size)
#: first.
LIMIT = 3 * MIB // 2
PRODUCER = 8 * MIB
TOPIC_CONFIG = {"max.message.bytes": str(LIMIT)}
LARGE_CONFIG = {"max.message.bytes": str(12 * MIB)}
TEN_MB = bytes(range(256)) * (10_000_000 // 256 + 1)
#: The most a source record of this test may hold beside its value: key b"k" and the headers
#: ``case`` and ``do`` (Kafka's upper bound, ``routing.record_size``).
HEADROOM = EMPTY_RECORD + 1 + 2 * HEADER_OVERHEAD + len("case") + len("do") + 40
#: A value that fits its topic by 3,000 bytes: a failure's headers (a 2,000-character message,
#: a stack trace) push it over, the same headers cut to fit do not.
PUSHED_BY_FAILURE_TEXT = TEN_MB[: LIMIT - HEADROOM - 3_000]
#: A value that fits by 100 bytes: even the origin and attempt of a failure push it over.
PUSHED_BY_ANY_FAILURE = TEN_MB[: LIMIT - HEADROOM - 100]
PIDS = "pids"
UNSUPPORTED = "dlq_engine.routing.outcomes.UnsupportedResult"
FAR_FUTURE = b"99999999999999"  # year 5138, in epoch milliseconds
REDRIVEN = (
    ("dlq.attempt", b"3"),
    ("dlq.reason", b"exhausted"),
    ("dlq.original.topic", b"elsewhere"),
    ("dlq.original.offset", b"77"),
    ("dlq.first.failure.at", b"5"),
    ("dlq.error.class", b"Old"),
)


@dataclass(frozen=True)
class Case:
    name: str
    do: str
    key: bytes | None = b"k"
    value: bytes | None = b"v"
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None
    on_retry_topic: bool = False  # produced straight onto the retry topic (forged retries)
    retried: bool = True  # a dead-lettered source case went round the retry topic once
    stub: bool = False  # its dead letter is a stub: no value (too large for the dead letters)
    # Expected: "output" (with ``output`` as its value, or a dict the JSON value must contain),
    # "dlq" with these dlq.* headers (a callable checks a header it is given), or "held": kept
    # in the delay stage (due in the year 9999), routed by no batch of this run.
    ends: str = "dlq"
    output: bytes | dict[str, Any] | None = None
    dlq: dict[str, Any] = field(default_factory=dict)

    def produced_headers(self) -> list[tuple[str, bytes | None]]:
        return [("case", self.name.encode()), ("do", self.do.encode()), *self.headers]


def exhausted(error_class: str, message: Any, attempt: str = str(1 + MAX_REDELIVER)) -> dict[str, Any]:
    return {
        "dlq.reason": "exhausted",
        "dlq.attempt": attempt,
        "dlq.error.class": error_class,
        "dlq.error.message": message,
    }


def describes(**fields: Any) -> dict[str, Any]:
    return {"attempt": 0, **fields}


def too_large(error_class: str, message: Any, destination: str, value: bytes) -> dict[str, Any]:
    """A stub: dead-lettered at its first attempt as ``too-large``, the value left out."""
    return {
        "dlq.reason": "too-large",
        "dlq.attempt": "1",
        "dlq.error.class": error_class,
        "dlq.error.message": message,
        "dlq.record.destination": lambda v: v.startswith(f"{destination}-"),
        "dlq.record.limit": str(PRODUCER if destination == "out" else LIMIT),
        "dlq.value.omitted": "true",
        "dlq.value.size": str(len(value)),
        "dlq.value.digest": f"sha256:{hashlib.sha256(value).hexdigest()}",
    }


CASES = [
    # Keys and values of every shape reach the processor as they are and are kept as they are.
    Case("null-key", "describe", key=None, ends="output", output=describes(key=None)),
    Case("null-value", "describe", value=None, ends="output", output=describes(value=None)),
    Case(
        "null-value-processor-fails",
        "decode",
        value=None,
        dlq=exhausted("AttributeError", "'NoneType' object has no attribute 'decode'"),
    ),
    Case("empty-value", "decode", value=b"", ends="output", output=b""),
    Case("non-utf8-key", "describe", key=b"\xff\xfe\x80k", ends="output", output=describes(key="fffe806b")),
    Case(
        "non-utf8-value",
        "decode",
        value=b"\xff\xfe\x00bad",
        dlq=exhausted(
            "UnicodeDecodeError", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
        ),
    ),
    Case("1mib-value", "echo", value=BIG, ends="output", output=BIG),
    Case("1mib-value-fails", "fail", value=BIG, dlq=exhausted("RuntimeError", "always fails (attempt 1)")),
    Case(
        "record-timestamp-1970",
        "fail",
        timestamp=1,
        dlq={**exhausted("RuntimeError", "always fails (attempt 1)"), "dlq.original.timestamp": "1"},
    ),
    # Forged dlq.* headers on a source record: ignored; it is processed from attempt 0, with the
    # whole retry budget, and every dlq.* header it leaves with is the engine's own.
    Case(
        "forged-attempt-abc",
        "fail",
        headers=(("dlq.attempt", b"abc"),),
        dlq=exhausted("RuntimeError", "always fails (attempt 1)"),
    ),
    Case(
        "forged-attempt-negative",
        "fail",
        headers=(("dlq.attempt", b"-5"),),
        dlq=exhausted("RuntimeError", "always fails (attempt 1)"),
    ),
    Case(
        "forged-attempt-huge",
        "fail",
        headers=(("dlq.attempt", b"99999999999999999999"),),
        dlq=exhausted("RuntimeError", "always fails (attempt 1)"),
    ),
    Case(
        "forged-attempt-on-a-success",
        "describe",
        headers=(("dlq.attempt", b"99999999999999999999"),),
        ends="output",
        output=describes(),
    ),
    Case(
        "redriven-dead-letter",
        "fail",
        headers=REDRIVEN,
        dlq={
            **exhausted("RuntimeError", "always fails (attempt 1)"),
            "dlq.first.failure.at": lambda v: v != "5",
        },
    ),
    Case(
        "deliver-at-far-future",
        "describe",
        headers=(("dlq.deliver.at", FAR_FUTURE),),
        ends="output",
        output=describes(),
    ),
    Case(
        "deliver-at-far-future-fails",
        "fail",
        headers=(("dlq.deliver.at", FAR_FUTURE),),
        dlq=exhausted("RuntimeError", "always fails (attempt 1)"),
    ),
    Case(
        "deliver-at-far-past",
        "describe",
        headers=(("dlq.deliver.at", b"1"),),
        ends="output",
        output=describes(),
    ),
    # Other headers: repeated keys, binary and null values are kept exactly, in order.
    Case(
        "duplicate-header-keys",
        "describe",
        headers=(("dup", b"1"), ("dup", b"2")),
        ends="output",
        output=describes(
            headers={"case": b"duplicate-header-keys".hex(), "do": b"describe".hex(), "dup": b"1".hex()}
        ),
    ),
    Case(
        "duplicate-header-keys-fails",
        "fail",
        headers=(("dup", b"1"), ("dup", b"2")),
        dlq=exhausted("RuntimeError", "always fails (attempt 1)"),
    ),
    Case(
        "binary-and-null-header-values",
        "fail",
        headers=(("bin", b"\xff\x00\xfe"), ("nothing", None)),
        dlq=exhausted("RuntimeError", "always fails (attempt 1)"),
    ),
    Case(
        "null-header-value-seen-as-empty",
        "describe",
        headers=(("nothing", None),),
        ends="output",
        output=describes(
            headers={"case": b"null-header-value-seen-as-empty".hex(), "do": b"describe".hex(), "nothing": ""}
        ),
    ),
    # What the processor returns or raises.
    Case(
        "returns-int",
        "int",
        dlq=exhausted(UNSUPPORTED, "processor returned int; return bytes, str, dict or None"),
    ),
    Case(
        "returns-set",
        "set",
        dlq=exhausted(UNSUPPORTED, "processor returned set; return bytes, str, dict or None"),
    ),
    Case("returns-list", "list", ends="output", output=b'[1,"two"]'),
    Case(
        "returns-dict-not-json",
        "datetime",
        dlq=exhausted(
            UNSUPPORTED,
            "processor returned a dict that is not JSON: Object of type datetime is not JSON serializable",
        ),
    ),
    Case(
        "returns-str-not-unicode",
        "surrogate",
        dlq=exhausted(
            UNSUPPORTED,
            "processor returned a str that is not valid Unicode text: 'utf-8' codec "
            "can't encode character '\\udcff' in position 4: surrogates not allowed",
        ),
    ),
    Case(
        "hangs",
        "hang",
        dlq={
            **exhausted("TimeoutError", "the processor did not return within 1s (processor.timeout)"),
            "dlq.error.stacktrace": lambda v: "in process" in v and "The call was abandoned" in v,
        },
    ),
    Case(
        "exception-str-raises",
        "bad-str",
        dlq=exhausted("tests.processors.bad_input.BadStr", "<unprintable BadStr: str() raised ValueError>"),
    ),
    Case(
        "exception-huge-message",
        "huge-message",
        dlq={
            **exhausted(
                "ValueError",
                lambda v: (
                    len(v) == 2000 and v.startswith("xxx") and v.endswith("...(truncated from 1000000 chars)")
                ),
            ),
            "dlq.error.stacktrace": lambda v: len(v) < 9000 and "bad_input.py" in v,
        },
    ),
    # A record too large for the topic it is meant for never stops the pipeline.
    Case(
        "10mb-result",
        "echo",
        value=TEN_MB,
        retried=False,
        stub=True,
        dlq=too_large(
            "RecordTooLarge",
            lambda v: (
                v.startswith("the record (")
                and v.endswith(
                    f"bytes with its headers) is larger than the max.request.size of the sink's producer ({PRODUCER} bytes)"
                )
            ),
            "out",
            TEN_MB,
        ),
    ),
    Case(
        "failure-text-pushes-over",
        "huge-message",
        value=PUSHED_BY_FAILURE_TEXT,
        dlq={
            **exhausted("ValueError", lambda v: v.startswith("xxx")),
            # The longest text gives way first: the trace, keeping its end.
            "dlq.error.stacktrace": lambda v: v.startswith("...(truncated from ") and v.endswith("chars)\n"),
        },
    ),
    Case(
        "any-failure-pushes-over",
        "fail",
        value=PUSHED_BY_ANY_FAILURE,
        retried=False,
        stub=True,
        dlq=too_large("RuntimeError", "always fails (attempt 0)", "retry", PUSHED_BY_ANY_FAILURE),
    ),
    Case(
        "never-returns",
        "block",
        dlq=exhausted("TimeoutError", "the processor did not return within 1s (processor.timeout)"),
    ),
    Case("sys-exit", "exit", dlq=exhausted("SystemExit", "3")),
    Case("keyboard-interrupt", "interrupt", dlq=exhausted("KeyboardInterrupt", "")),
    # Forged records written straight onto the retry topic.
    Case(
        "retry-topic-deliver-at-beyond-int64",
        "describe",
        on_retry_topic=True,
        headers=(("dlq.deliver.at", b"99999999999999999999"),),
        ends="output",
        output=describes(),
    ),
    Case("retry-topic-no-deliver-at", "describe", on_retry_topic=True, ends="output", output=describes()),
    # Near the int64 limits: clamped to 0 ... 9999-12-31 before the delay stage buckets it (the
    # bucket arithmetic overflowed under ANSI SQL and failed the query on every restart).
    Case(
        "retry-topic-deliver-at-int64-max",
        "describe",
        on_retry_topic=True,
        headers=(("dlq.deliver.at", b"9223372036854775807"),),
        ends="held",
    ),
    Case(
        "retry-topic-deliver-at-int64-min",
        "describe",
        on_retry_topic=True,
        headers=(("dlq.deliver.at", b"-9223372036854775808"),),
        ends="output",
        output=describes(),
    ),
    Case(
        "retry-topic-attempt-huge",
        "fail",
        on_retry_topic=True,
        headers=(("dlq.attempt", b"99999999999999999999"), ("dlq.deliver.at", b"1")),
        dlq=exhausted("RuntimeError", "always fails (attempt 1000000)", attempt="1000001"),
    ),
]


def produce_cases(bootstrap: str, topic: str, cases: list[Case]) -> dict[str, int]:
    """Produce each case's record; the offset of each, by case name."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.max.bytes": 16 * MIB,
            "enable.idempotence": True,
        }
    )
    offsets: dict[str, int] = {}
    errors: list[str] = []

    def delivered(name: str) -> Callable[[Any, Any], None]:
        def report(error: Any, message: Any) -> None:  # message.headers() is None here
            if error is not None:
                errors.append(f"{name}: {error}")
            offsets[name] = message.offset()

        return report

    for case in cases:
        extra = {"timestamp": case.timestamp} if case.timestamp is not None else {}
        producer.produce(
            topic,
            key=case.key,
            value=case.value,
            headers=case.produced_headers(),
            on_delivery=delivered(case.name),
            **extra,
        )
    assert producer.flush(60) == 0
    assert errors == []
    assert len(offsets) == len(cases)
    return offsets


def by_case(records: list[Record]) -> dict[str, list[Record]]:
    found: dict[str, list[Record]] = {}
    for r in records:
        found.setdefault(r.header("case") or "", []).append(r)
    return found


def test_malformed_messages_end_where_expected_with_their_reason(
    bootstrap_servers: str, make_topic: Callable[..., str], engine: Callable[..., Any], tmp_path: Path
) -> None:
    names = {
        "source": make_topic("src", config=LARGE_CONFIG),
        "retry": make_topic("retry", config=TOPIC_CONFIG),
        "dlq": make_topic("dlq", config=TOPIC_CONFIG),
        "output": make_topic("out", config=LARGE_CONFIG),
    }
    pids = tmp_path / "pids"
    cases = [
        dataclasses.replace(c, headers=(*c.headers, (PIDS, str(pids).encode()))) if c.do == "block" else c
        for c in CASES
    ]
    source_cases = [c for c in cases if not c.on_retry_topic]
    retry_cases = [c for c in cases if c.on_retry_topic]
    offsets = produce_cases(bootstrap_servers, names["source"], source_cases)
    produce_cases(bootstrap_servers, names["retry"], retry_cases)
    outputs = [c for c in cases if c.ends == "output"]
    deads = [c for c in cases if c.ends == "dlq"]
    # Every source case that is dead-lettered after exhausting its retries went round once.
    retried = [c for c in deads if not c.on_retry_topic and c.retried]

    running = engine(
        names,
        processor={"entrypoint": "tests.processors.bad_input:process", "timeout": "1s"},
        retry={"maxRedeliverCount": MAX_REDELIVER, "backoff": {"type": "fixed", "delay": "200ms"}},
    )
    held = [c for c in cases if c.ends == "held"]
    total = len(cases) + len(retried) - len(held)
    running.wait_for(timeout=150, total=total)
    assert running.status is None, "the engine stopped"
    assert running.stop() == EXIT_OK
    # Every batch is committed and the engine stopped: the topics hold all it wrote.
    output = by_case(read_all(bootstrap_servers, names["output"]))
    dead = by_case(read_all(bootstrap_servers, names["dlq"]))
    retries = by_case(read_all(bootstrap_servers, names["retry"]))

    counts = running.run.totals.counts
    assert (counts["total"], counts["output"], counts["retried"], counts["dead"]) == (
        total,
        len(outputs),
        len(retried),
        len(deads),
    )
    assert sorted(output) == sorted(c.name for c in outputs)
    assert sorted(dead) == sorted(c.name for c in deads)
    assert sorted(retries) == sorted(c.name for c in [*retry_cases, *retried])

    for case in outputs:
        (record,) = output[case.name]
        assert record.key == case.key, case.name
        # Other headers kept exactly, in order; forged dlq.* headers dropped.
        assert record.headers == [(k, v) for k, v in case.produced_headers() if not k.startswith("dlq.")], (
            case.name
        )
        if isinstance(case.output, dict):
            assert json.loads(record.value or b"null").items() >= case.output.items(), case.name
        else:
            assert record.value == case.output, case.name

    for case in deads:
        (record,) = dead[case.name]
        assert (record.key, record.value) == (case.key, None if case.stub else case.value), case.name
        kept = [(k, v) for k, v in record.headers if not k.startswith("dlq.")]
        assert kept == [(k, v) for k, v in case.produced_headers() if not k.startswith("dlq.")], case.name
        names_seen = [k for k, _ in record.headers if k.startswith("dlq.")]
        assert len(names_seen) == len(set(names_seen)), (case.name, names_seen)
        origin = names["retry"] if case.on_retry_topic else names["source"]
        assert record.header("dlq.original.topic") == origin, case.name
        if not case.on_retry_topic:
            assert record.header("dlq.original.offset") == str(offsets[case.name]), case.name
        for header, expected in case.dlq.items():
            actual = record.header(header)
            if callable(expected):
                assert actual is not None, (case.name, header)
                assert expected(actual), (case.name, header, actual)
            else:
                assert actual == expected, (case.name, header, actual)

    for case in retried:
        (retry,) = retries[case.name]
        assert retry.header("dlq.attempt") == "1", case.name
        assert int(retry.header("dlq.deliver.at") or 0) < int(FAR_FUTURE), case.name  # the engine's own
        assert retry.value == case.value, case.name

    # The failure's text gave way, marked, so that the retry and the dead letter kept the value.
    for record in (*dead["failure-text-pushes-over"], *retries["failure-text-pushes-over"]):
        texts = (record.header("dlq.error.message") or "") + (record.header("dlq.error.stacktrace") or "")
        assert "to fit the record's limit)" in texts
    # A call blocked for ever in C code: each Python worker that held one ended after its task,
    # the thread with it (it did not serve another task with the thread still there).
    hosts = {int(line) for line in pids.read_text().split()}
    assert len(hosts) == 2, hosts  # the first attempt and the retry, in two workers
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in hosts) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(pid) for pid in hosts), hosts


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
