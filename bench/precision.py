"""Benchmark 3: retry precision. How late after ``dlq.deliver.at`` is a retry processed?

M messages are produced at a steady rate while the engine runs (so retries fall due at every
phase of the trigger, as in production). Each fails a set number of times and then succeeds;
the processor (``bench.processors:timed``) records the time it ran and the ``dlq.deliver.at``
its message carried in its output result. Lateness = ran at - due, for the last retry of each
message, measured after a warm-up through the same path. Delays: fixed 1 s, fixed 5 s, and
exponential (1 s x 2^n, each message failing 1, 2 or 3 times, so its last delay is 1, 2 or 4 s).
Target: p99 <= trigger + 250 ms, none early.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import create_topics, log, progress_summary, read_values, unique
from bench.processors import decode_timed
from bench.spark_runs import EngineRun

SLACK_MS = 250

DELAYS: dict[str, dict[str, Any]] = {
    "fixed 1s": {"backoff": {"type": "fixed", "delay": "1s"}, "failures": (1,)},
    "fixed 5s": {"backoff": {"type": "fixed", "delay": "5s"}, "failures": (1,)},
    "exponential": {
        "backoff": {"type": "exponential", "delay": "1s", "multiplier": 2.0, "maxDelay": "60s"},
        "failures": (1, 2, 3),
    },
}


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100.0 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def produce_steadily(
    bootstrap: str, topic: str, m: int, rate: float, failures: tuple[int, ...], tag: bytes = b""
) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    start = time.monotonic()
    for i in range(m):
        wait = start + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        value = b"%d|%s%09d|" % (failures[i % len(failures)], tag, i) + b"x" * 180
        producer.produce(topic, key=b"k%d" % i, value=value)
        producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError(f"precision: could not produce to {topic}")


#: Messages (tagged ``w``, not measured) sent through the whole retry path before the measured
#: ones: the first micro-batches with data start the Python workers, import the processor and
#: open the state store, which made the first kind's p99 a measure of the cold start.
WARM_UP_MESSAGES = 400


def warm_up(
    engine: EngineRun,
    bootstrap: str,
    source: str,
    rate: float,
    failures: tuple[int, ...],
    count: int,
    timeout: float = 300.0,
) -> None:
    """Run ``count`` messages through the retry path and wait until all are in the output, so
    lateness measures the steady state."""
    produce_steadily(bootstrap, source, count, rate, failures, tag=b"w")
    values = read_values(bootstrap, engine.topics["out"], count, timeout=timeout)
    if len(values) < count:
        raise TimeoutError(f"precision: {len(values)} of {count} warm-up messages in {timeout:.0f}s")


def one(
    spark: Any,
    bootstrap: str,
    *,
    kind: str,
    m: int,
    rate: float,
    trigger: str,
    trigger_ms: int,
    partitions: int,
    checkpoint: Path,
    warm_up_messages: int = WARM_UP_MESSAGES,
) -> dict[str, Any]:
    spec = DELAYS[kind]
    source = unique("timed")
    create_topics(bootstrap, [source], partitions)
    engine = EngineRun(
        spark,
        bootstrap,
        source,
        partitions=partitions,
        entrypoint="bench.processors:timed",
        mode="message",
        checkpoint=checkpoint,
        trigger=trigger,
        max_redeliver=max(spec["failures"]),
        backoff=spec["backoff"],
    )
    try:
        engine.start()
        warm_up(engine, bootstrap, source, rate, spec["failures"], warm_up_messages)
        last = engine.run.query.lastProgress if engine.run.query is not None else None
        warm_up_batches = int(last.batchId) + 1 if last is not None else 0
        producer = threading.Thread(
            target=produce_steadily, args=(bootstrap, source, m, rate, spec["failures"]), daemon=True
        )
        producer.start()
        producer.join()
        # Generous: a backlog in the delay stage shows as lateness, not as missing messages.
        values = read_values(
            bootstrap, engine.topics["out"], m + warm_up_messages, timeout=900.0, stall=180.0
        )
        counts = engine.counts()
        lateness_range = (engine.run.totals.min_lateness_ms, engine.run.totals.max_lateness_ms)
        query = engine.run.query
        batches = progress_summary(query.recentProgress) if query is not None else []
    finally:
        engine.stop()
    results = [r for r in map(decode_timed, values) if not r["warm_up"]]
    lateness = sorted(r["ran_at"] - r["due"] for r in results)
    early = sum(1 for x in lateness if x < 0)
    p99 = percentile(lateness, 99)
    summary = {
        "kind": kind,
        "backoff": spec["backoff"],
        "messages": m,
        "delivered": len(results),
        "rate_per_s": rate,
        "trigger_ms": trigger_ms,
        "p50_ms": round(percentile(lateness, 50), 1),
        "p90_ms": round(percentile(lateness, 90), 1),
        "p99_ms": round(p99, 1),
        "max_ms": round(lateness[-1], 1) if lateness else None,
        "min_ms": round(lateness[0], 1) if lateness else None,
        "early": early,
        "target_p99_ms": trigger_ms + SLACK_MS,
        "target_met": bool(lateness) and early == 0 and p99 <= trigger_ms + SLACK_MS and len(results) >= m,
        "engine_counts": counts,
        "engine_lateness_ms_min_max": lateness_range,
        "warm_up_messages": warm_up_messages,
        "warm_up_batches": warm_up_batches,
        "batches": batches,
        "lateness_ms": [round(x, 1) for x in lateness],
    }
    log(
        f"precision {kind}: delivered {len(results)}/{m} p50={summary['p50_ms']}ms "
        f"p99={summary['p99_ms']}ms max={summary['max_ms']}ms early={early}"
    )
    return summary


def run(
    spark: Any,
    bootstrap: str,
    *,
    m: int,
    rate: float,
    trigger: str,
    trigger_ms: int,
    partitions: int,
    workdir: Path,
    kinds: list[str] | None = None,
    warm_up_messages: int = WARM_UP_MESSAGES,
) -> dict[str, Any]:
    root = workdir / "precision-checkpoints"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    runs = [
        one(
            spark,
            bootstrap,
            kind=kind,
            m=m,
            rate=rate,
            trigger=trigger,
            trigger_ms=trigger_ms,
            partitions=partitions,
            checkpoint=root / kind.replace(" ", "-"),
            warm_up_messages=warm_up_messages,
        )
        for kind in (kinds or list(DELAYS))
    ]
    return {"m": m, "rate_per_s": rate, "trigger_ms": trigger_ms, "slack_ms": SLACK_MS, "runs": runs}
