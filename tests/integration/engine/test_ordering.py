"""``source.ordering: key`` on the real broker and Spark: the output topic keeps each key's
source order while messages of the key wait in the retry stage, with many keys and a hot key,
across a stop and a restart from the checkpoint under a changed policy; ``onDeadLetter:
block`` and the hold bounds dead-letter with reason ``ordering-overflow``, or stop the job; what
the stage holds is reported (metrics, heartbeat). The order under retries is proven on Pulsar
too (the ``broker`` fixture), and across SIGKILLs by the Pulsar crash run
(``test_pulsar_crash.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.exits import EXIT_STOP_STRATEGY
from dlq_engine.job.metrics import EngineMetrics
from spark_dlq_devtools.chaos import end_offsets, start_engine
from spark_dlq_devtools.processes import QUICK_JIT
from tests.helpers import Record, engine_policy, produce, read_all
from tests.integration.engine.brokers import BrokerUnderTest

ORDERED = {"processor": {"entrypoint": "tests.processors.ordered:process"}}


def messages(
    keys: Sequence[str], per_key: int, command: Callable[[str, int], str]
) -> list[tuple[bytes, bytes]]:
    """``per_key`` messages of every key, interleaved across keys (as a busy topic has them)."""
    return [(k.encode(), f"{k}:{i}:{command(k, i)}".encode()) for i in range(per_key) for k in keys]


def first_seen(records: Sequence[Record]) -> dict[str, list[int]]:
    """Per key, the sequence numbers in output order, each at its first occurrence (a replay
    after a stop may write a message again: at-least-once)."""
    order: dict[str, list[int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        key, seq = (record.value or b"").decode().split(":")
        if int(seq) not in order.setdefault(key, []):
            order[key].append(int(seq))
    return order


def read_distinct(
    bootstrap: str | BrokerUnderTest, topic: str, distinct: int, *, timeout: float
) -> list[Record]:
    """Every record of ``topic`` (on Kafka at ``bootstrap``, or on a broker under test) once
    ``distinct`` different values are there (duplicates, from a replayed batch, are not
    counted), or when ``timeout`` runs out."""
    read = bootstrap.read_all if isinstance(bootstrap, BrokerUnderTest) else partial(read_all, bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        records = read(topic, expect=distinct, timeout=max(1.0, min(30.0, deadline - time.monotonic())))
        if len({r.value for r in records}) >= distinct or time.monotonic() >= deadline:
            return records


def assert_in_key_order(order: dict[str, list[int]], expected: dict[str, list[int]], state: str) -> None:
    assert sorted(order) == sorted(expected), state
    for key, seqs in expected.items():
        assert order[key] == seqs, (key, state)


def flaky_now_and_then(key: str, i: int) -> str:
    # The hot key fails every 7th message once; every key fails its message 2 once; k3's
    # message 4 is poison (dead-lettered: under skip its key goes on).
    if key == "hot" and i % 7 == 3:
        return "flaky1"
    if i == 2:
        return "flaky1"
    if key == "k3" and i == 4:
        return "dead"
    return "ok"


def test_each_keys_order_holds_under_retries_with_many_keys_and_a_hot_key(broker: BrokerUnderTest) -> None:
    """On Kafka and on Pulsar (each key's messages in one partition of the source, as the
    producers' default partitioners put them)."""
    names = broker.topics(partitions=2)
    keys = [f"k{i}" for i in range(30)]
    records = messages(keys, 6, flaky_now_and_then) + messages(["hot"], 30, flaky_now_and_then)
    broker.produce(names["source"], records[: len(records) // 2])
    running = broker.engine(
        names,
        source={"ordering": "key"},
        retry={"maxRedeliverCount": 3, "backoff": {"type": "fixed", "delay": "300ms"}},
        **ORDERED,
    )
    broker.produce(names["source"], records[len(records) // 2 :])
    expected_out = sum(1 for _, v in records if not v.endswith(b":dead"))
    output = read_distinct(broker, names["output"], expected_out, timeout=180)
    state = running.describe()
    counts = dict(running.run.totals.counts)
    running.stop()

    expected = {k: [i for i in range(6) if not (k == "k3" and i == 4)] for k in keys}
    expected["hot"] = list(range(30))
    assert_in_key_order(first_seen(output), expected, state)
    dead = broker.read_all(names["dlq"], expect=1, timeout=10)
    assert [(r.key, r.header("dlq.reason")) for r in dead] == [(b"k3", "terminated")]
    # Later messages of a key did wait: parked behind a retry in their routing task.
    assert counts["parked"] > 0, counts


def test_key_order_holds_across_a_restart_from_the_checkpoint_with_a_changed_policy(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any], tmp_path: Path
) -> None:
    names = topics(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    keys = [f"k{i}" for i in range(10)]

    def first_fails(key: str, i: int) -> str:
        return "flaky1" if i == 0 else "ok"

    produce(bootstrap_servers, names["source"], messages(keys, 4, first_fails))
    # Version 1: a retry waits 8 s; stop while every key's first message waits in the stage
    # and the later ones are held behind it.
    first = engine(
        names,
        checkpoint=checkpoint,
        source={"ordering": "key"},
        retry={"maxRedeliverCount": 3, "backoff": {"type": "fixed", "delay": "8s"}},
        **ORDERED,
    )
    first.wait_for(retried=len(keys), timeout=120)
    assert first.stop() == 0
    assert read_all(bootstrap_servers, names["output"]) == []

    # More messages of the same keys while it is down; version 2 retries after 200 ms.
    produce(
        bootstrap_servers,
        names["source"],
        [(k.encode(), f"{k}:{i}:ok".encode()) for i in range(4, 8) for k in keys],
    )
    second = engine(
        names,
        checkpoint=checkpoint,
        source={"ordering": "key"},
        retry={"maxRedeliverCount": 3, "backoff": {"type": "fixed", "delay": "200ms"}},
        **ORDERED,
    )
    output = read_distinct(bootstrap_servers, names["output"], 8 * len(keys), timeout=120)
    state = second.describe()
    second.stop()
    assert_in_key_order(first_seen(output), {k: list(range(8)) for k in keys}, state)


def test_key_order_holds_across_sigkills_of_the_engine(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any], tmp_path: Path
) -> None:
    """The run after the kill is the test session's Spark on the same checkpoint (all a restart
    needs), not a second driver. On Pulsar: ``test_pulsar_crash.py``."""
    names = topics(partitions=2)
    keys = [f"k{i}" for i in range(20)]

    def flaky(key: str, i: int) -> str:
        return "flaky1" if (key == "hot" and i % 10 == 3) or (key != "hot" and i % 6 == 2) else "ok"

    records = messages(keys, 12, flaky) + messages(["hot"], 30, flaky)
    # Half of the messages per incarnation, produced after it starts: each incarnation runs a
    # batch with data (a restarted query fires its timers only once one has run).
    half = len(records) // 2
    policy = tmp_path / "policy.yaml"
    spec: dict[str, Any] = {
        # Small batches, so that the kill lands while records flow.
        "source": {"ordering": "key", "maxOffsetsPerTrigger": 60},
        "retry": {"maxRedeliverCount": 3, "backoff": {"type": "fixed", "delay": "200ms"}},
        **ORDERED,
    }
    policy.write_text(yaml.safe_dump(engine_policy(names, bootstrap_servers, **spec)))
    checkpoint = tmp_path / "checkpoint"
    # A SIGKILL of the engine's process group once it has written more output (mid-stream: a
    # batch's writes may be replayed, and held keys must come back from the checkpoint's state),
    # then a run to the end.
    running = start_engine(policy, checkpoint, tmp_path / "engine-killed.log", java_options=QUICK_JIT)
    try:
        produce(bootstrap_servers, names["source"], records[:half])
        before = end_offsets(bootstrap_servers, [names["output"]])
        running.wait_until(
            lambda: end_offsets(bootstrap_servers, [names["output"]]) > before + 20,
            timeout=120,
            what="more output",
        )
        running.kill()
    finally:
        running.stop()
    last = engine(names, checkpoint=checkpoint, **spec)
    produce(bootstrap_servers, names["source"], records[half:])
    output = read_distinct(bootstrap_servers, names["output"], len(records), timeout=180)
    state = last.describe()
    last.stop()
    expected = {k: list(range(12)) for k in keys}
    expected["hot"] = list(range(30))
    assert_in_key_order(first_seen(output), expected, state)


def test_block_keeps_a_key_held_and_the_bounds_dead_letter_as_ordering_overflow(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics(partitions=1)

    def blocked_b(key: str, i: int) -> str:
        return "dead" if key == "b" and i == 1 else "ok"

    produce(bootstrap_servers, names["source"], messages(["a", "b"], 7, blocked_b))
    running = engine(
        names,
        source={"ordering": "key"},
        ordering={"onDeadLetter": "block", "maxHeldPerKey": 3, "maxHoldTime": "4s"},
        **ORDERED,
    )
    # b1 is dead-lettered and blocks b: b2..b4 are held (the bound is 3), b5 and b6 overflow at
    # once, and the held three overflow after 4 s.
    read_all(bootstrap_servers, names["dlq"], expect=6, timeout=90)
    output = read_all(bootstrap_servers, names["output"], expect=8, timeout=10)
    state = running.describe()
    # A batch's letters reach the topics before its progress reaches the totals: wait until
    # all 14 messages are counted.
    deadline = time.monotonic() + 30
    while running.run.totals.counts.get("total", 0) < 14 and time.monotonic() < deadline:
        time.sleep(0.2)
    counts = dict(running.run.totals.counts)
    running.stop()
    dead = read_all(bootstrap_servers, names["dlq"])  # stopped: read to the end

    assert_in_key_order(first_seen(output), {"a": list(range(7)), "b": [0]}, state)
    reasons = {(r.value or b"").decode(): r.header("dlq.reason") for r in dead}
    assert reasons == {
        "b:1:dead": "terminated",
        **{f"b:{i}:ok": "ordering-overflow" for i in range(2, 7)},
    }, state
    assert counts["blocked"] == 1, counts
    assert counts["dead_ordering_overflow"] == 5, counts


def keys_in_groups(spark: Any) -> tuple[str, str, str]:
    """Two keys of one group of the ordering stage, and a key of another group."""
    group = spark._jvm.io.sparkdlq.engine.OrderByKey.group
    by_group: dict[int, list[str]] = {}
    for i in range(200):
        by_group.setdefault(int(group(f"k{i}".encode())), []).append(f"k{i}")
    first, second = next(keys[:2] for keys in by_group.values() if len(keys) >= 2)
    other = next(keys[0] for keys in by_group.values() if first not in keys)
    return first, second, other


def blocked_three(a: str, b: str, c: str) -> list[tuple[bytes, bytes]]:
    """Each key's first message is dead-lettered (under block, its key stays blocked); then
    three later messages of ``a``, two of ``b`` and one of ``c``."""
    later = [(a, 1), (b, 1), (c, 1), (a, 2), (b, 2), (a, 3)]
    records = [(k, 0, "dead") for k in (a, b, c)] + [(k, i, "ok") for k, i in later]
    return [(k.encode(), f"{k}:{i}:{command}".encode()) for k, i, command in records]


#: Every group holds one message at most (16 groups share the bound).
TOTAL_BOUND = {"onDeadLetter": "block", "maxHeldPerKey": 10, "maxHeldTotal": 16, "maxHoldTime": "10m"}


def test_the_bound_on_all_held_messages_dead_letters_past_it_and_the_held_are_reported(
    spark: Any, bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics(partitions=1)
    a, b, c = keys_in_groups(spark)
    produce(bootstrap_servers, names["source"], blocked_three(a, b, c))
    running = engine(
        names, metrics=EngineMetrics, source={"ordering": "key"}, ordering=TOTAL_BOUND, **ORDERED
    )
    # a and b share their group's one place: one of their five later messages is held, four
    # overflow; c's one is held in its own group.
    read_all(bootstrap_servers, names["dlq"], expect=7, timeout=120)
    deadline = time.monotonic() + 60
    assert running.run.ordering is not None
    while running.run.ordering.state().held != 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    held = running.run.ordering.state()
    registry = running.run.metrics.registry
    beat = json.loads(running.run.liveness().document(time.time()))
    state = running.describe()
    counts = dict(running.run.totals.counts)
    running.stop()
    dead = read_all(bootstrap_servers, names["dlq"])  # stopped: read to the end

    assert read_all(bootstrap_servers, names["output"]) == [], state
    reasons = sorted((r.key or b"").decode() + ":" + str(r.header("dlq.reason")) for r in dead)
    assert reasons.count(f"{c}:ordering-overflow") == 0, reasons
    assert sorted(r for r in reasons if r.endswith("terminated")) == [
        f"{k}:terminated" for k in sorted((a, b, c))
    ]
    overflow = [r for r in dead if r.header("dlq.reason") == "ordering-overflow"]
    assert len(overflow) == 4, reasons
    assert {(r.key or b"").decode() for r in overflow} <= {a, b}
    for record in overflow:
        assert "more than maxHeldTotal (16) messages held in all" in str(record.header("dlq.error.message"))
    assert counts["dead_ordering_overflow"] == 4, counts
    # What is held is visible: in the run's state, the metrics and the heartbeat.
    assert (held.held, held.blocked, held.blocked_sample) == (2, 3, tuple(sorted((a, b, c)))), state
    policy = running.policy.qualified_name
    assert registry.get_sample_value("spark_dlq_ordering_held_messages", {"policy": policy}) == 2
    assert registry.get_sample_value("spark_dlq_ordering_blocked_keys_current", {"policy": policy}) == 3
    assert beat["ordering"] == {"heldMessages": 2, "blockedKeys": 3, "blockedKeySample": sorted((a, b, c))}


@pytest.mark.parametrize(
    ("bounds", "named"),
    [
        pytest.param(TOTAL_BOUND, "more than maxHeldTotal (16) messages held in all", id="in-total"),
        pytest.param(
            {**TOTAL_BOUND, "maxHeldPerKey": 1, "maxHeldTotal": 100_000},
            "more than maxHeldPerKey (1) messages held for its key",
            id="per-key",
        ),
        pytest.param(
            {**TOTAL_BOUND, "maxHeldTotal": 100_000, "maxHoldTime": "3s"},
            "held longer than maxHoldTime (3000 ms) behind its key",
            id="hold-time",
        ),
    ],
)
def test_a_bound_under_on_overflow_stop_stops_the_job_naming_it_and_loses_nothing(
    bounds: dict[str, Any],
    named: str,
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = topics(partitions=1)
    checkpoint = tmp_path / "checkpoint"
    a, b, c = keys_in_groups(spark)
    produce(bootstrap_servers, names["source"], blocked_three(a, b, c))
    stopped = engine(
        names,
        checkpoint=checkpoint,
        source={"ordering": "key"},
        ordering={**bounds, "onOverflow": "stop"},
        **ORDERED,
    )
    assert stopped.join(120) == EXIT_STOP_STRATEGY, stopped.describe()
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("dlq-engine: stopped:"))
    assert "ordering.onOverflow stop" in line, line
    assert named in line, line

    # The batch that went past the bound was not committed: under skip, the same checkpoint
    # releases the blocked keys and every later message comes out, in its key's order.
    second = engine(
        names,
        checkpoint=checkpoint,
        source={"ordering": "key"},
        ordering={**bounds, "onDeadLetter": "skip"},
        **ORDERED,
    )
    output = read_distinct(bootstrap_servers, names["output"], 6, timeout=120)
    state = second.describe()
    second.stop()
    assert_in_key_order(first_seen(output), {a: [1, 2, 3], b: [1, 2], c: [1]}, state)
    dead = read_all(bootstrap_servers, names["dlq"])  # stopped: read to the end
    assert sorted(str(r.header("dlq.reason")) for r in dead) == ["terminated"] * 3
