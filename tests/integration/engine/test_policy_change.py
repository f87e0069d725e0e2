"""A policy change while messages wait in the retry stage: the job restarts from its checkpoint
(as the operator's restart does), nothing is lost, the old delay is honoured and the new
policy decides the later attempts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers import produce, read_all

N = 20


def test_a_policy_change_applies_to_later_attempts_and_loses_nothing(
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    names = topics(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    produce(bootstrap_servers, names["source"], [(f"k{i}".encode(), f"fail:{i}".encode()) for i in range(N)])

    # Version 1: five redeliveries, 4 s apart. Stop once every message waits in the retry stage.
    first = engine(
        names,
        checkpoint=checkpoint,
        retry={"maxRedeliverCount": 5, "backoff": {"type": "fixed", "delay": "4s"}},
    )
    first.wait_for(retried=N, timeout=180)
    assert first.stop() == 0
    pending = read_all(bootstrap_servers, names["retry"], expect=N, timeout=30)
    assert len(pending) == N
    assert {r.header("dlq.attempt") for r in pending} == {"1"}
    due = {r.key: int(r.header("dlq.deliver.at") or 0) for r in pending}

    # Version 2: one redelivery only, and a static header that marks it.
    second = engine(
        names,
        checkpoint=checkpoint,
        retry={"maxRedeliverCount": 1, "backoff": {"type": "fixed", "delay": "200ms"}},
        deadLetter={"headers": {"policy-version": "2"}},
    )
    dead = read_all(bootstrap_servers, names["dlq"], expect=N, timeout=180)
    state = second.describe()
    second.stop()

    assert sorted(r.key or b"" for r in dead) == sorted(f"k{i}".encode() for i in range(N)), state
    for record in dead:
        # The second processing was the last under the new limit: exhausted, not retried again.
        assert record.header("dlq.reason") == "exhausted"
        assert record.header("dlq.attempt") == "2"
        assert record.header("policy-version") == "2"
        # The retry written under version 1 still waited for its 4 s.
        assert int(record.header("dlq.failed.at") or 0) >= due[record.key]
    assert read_all(bootstrap_servers, names["output"], timeout=3) == []
    assert len(read_all(bootstrap_servers, names["retry"], timeout=5)) == N
