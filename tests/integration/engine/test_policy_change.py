"""A policy change while messages wait in the retry stage: the job restarts from its checkpoint
(as the operator's restart does), nothing is lost, the old delay is honoured and the new
policy decides the later attempts. The retries are in the delay stage's checkpointed state
when the job stops, and nothing new arrives after the restart: the restarted job must still
release them."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlq_engine.job.metrics import EngineMetrics
from dlq_engine.routing.headers import CONTROL, CONTROL_WAKE
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

    # Version 1: five redeliveries, 8 s apart. Stop once every retry was read into the delay
    # stage's state, long before any is due.
    first = engine(
        names,
        checkpoint=checkpoint,
        retry={"maxRedeliverCount": 5, "backoff": {"type": "fixed", "delay": "8s"}},
    )
    first.wait_for(retried=N, timeout=180)
    deadline = time.monotonic() + 60
    while first.rows_read(names["retry"]) < N and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.rows_read(names["retry"]) == N, first.describe()
    assert first.stop() == 0
    pending = read_all(bootstrap_servers, names["retry"], expect=N, timeout=30)
    assert len(pending) == N
    assert {r.header("dlq.attempt") for r in pending} == {"1"}
    due = {r.key: int(r.header("dlq.deliver.at") or 0) for r in pending}

    # Version 2: one redelivery only, and a static header that marks it. It also adds a breaker
    # (its window of 100 calls never fills here): the source is then read through the breaker's
    # gate, from the checkpoint the plain Kafka source wrote.
    second = engine(
        names,
        checkpoint=checkpoint,
        metrics=EngineMetrics,
        retry={"maxRedeliverCount": 1, "backoff": {"type": "fixed", "delay": "200ms"}, "breaker": {}},
        deadLetter={"headers": {"policy-version": "2"}},
    )
    dead = read_all(bootstrap_servers, names["dlq"], expect=N, timeout=180)
    # The held-retries gauge: the N retries in the checkpoint's delay state (read after the
    # first batch the restart planned), less those released since; the wake record is not one of them.
    assert second.metrics is not None
    held = wait_held(second.metrics, timeout=60)
    state = second.describe()
    second.stop()
    assert held == (0.0, float(N)), state

    assert sorted(r.key or b"" for r in dead) == sorted(f"k{i}".encode() for i in range(N)), state
    for record in dead:
        # The second processing was the last under the new limit: exhausted, not retried again.
        assert record.header("dlq.reason") == "exhausted"
        assert record.header("dlq.attempt") == "2"
        assert record.header("policy-version") == "2"
        # The retry written under version 1 still waited for its 8 s.
        assert int(record.header("dlq.failed.at") or 0) >= due[record.key]
    assert read_all(bootstrap_servers, names["output"]) == []
    retries = read_all(bootstrap_servers, names["retry"])
    # The N retries of version 1, and the one control record the restart wrote.
    assert [r.header(CONTROL) for r in retries].count(CONTROL_WAKE) == 1
    assert len([r for r in retries if r.header(CONTROL) is None]) == N


def wait_held(metrics: EngineMetrics, *, timeout: float) -> tuple[float | None, float | None]:
    """The held-retries gauge and the retries this run released, once the first is 0 and the
    second ``N`` (or at the timeout, as they were)."""
    labels = {"policy": metrics.policy}
    deadline = time.monotonic() + timeout
    while True:
        found = (
            metrics.registry.get_sample_value("spark_dlq_retry_held", labels),
            metrics.registry.get_sample_value("spark_dlq_messages_in_total", {**labels, "source": "retry"}),
        )
        if found == (0.0, float(N)) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
