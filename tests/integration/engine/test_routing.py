"""The engine routes every message to output, retry or dead letter, on real Kafka and Spark."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.helpers import produce, read_all


def test_every_outcome_reaches_its_topic(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics()
    values = [b"ok:a", b"ack", b"flaky:1", b"fail:x", b"terminate:t", b"nonretry:k", b"dict:d"]
    produce(
        bootstrap_servers,
        names["source"],
        [(f"k{i}".encode(), v) for i, v in enumerate(values)],
        headers=[("trace", b"t1")],
    )
    running = engine(
        names,
        retry={
            "maxRedeliverCount": 2,
            "nonRetryableErrors": ["LookupError"],
            "backoff": {"type": "fixed", "delay": "300ms"},
        },
    )

    read_all(bootstrap_servers, names["output"], expect=3, timeout=120)
    read_all(bootstrap_servers, names["dlq"], expect=3, timeout=60)
    running.stop()
    # Stopped: what the topics hold is all it wrote.
    output = read_all(bootstrap_servers, names["output"])
    dead = read_all(bootstrap_servers, names["dlq"])

    assert sorted(r.value for r in output) == sorted(
        [b"A", b"recovered after 1", b'{"value":"d","attempt":0}']
    )
    by_reason = {r.header("dlq.reason"): r for r in dead}
    assert set(by_reason) == {"exhausted", "terminated", "non-retryable"}
    exhausted = by_reason["exhausted"]
    assert exhausted.value == b"fail:x"
    assert exhausted.key == b"k3"
    assert exhausted.header("dlq.attempt") == "3"
    assert exhausted.header("dlq.original.topic") == names["source"]
    assert exhausted.header("dlq.original.offset") == "3"
    assert exhausted.header("dlq.error.class") == "RuntimeError"
    assert exhausted.header("trace") == "t1"
    assert [k for k, _ in exhausted.headers].count("dlq.attempt") == 1
    assert by_reason["non-retryable"].header("dlq.error.class") == "KeyError"
    assert by_reason["terminated"].header("dlq.attempt") == "1"
