"""The redrive's rate limit, measured: ``ratePerSecond`` against what was written.

    python -m bench.redrive [--rates 50,200,1000] [--messages-per-rate-second 20]

For each rate a fresh dead-letter topic gets ``rate * seconds`` dead letters (as the engine
writes them), a ``DeadLetterRedrive`` with that rate sends them to the policy's retry topic
(local Spark, the real broker), and the achieved rate is the messages over the time from the
first write (the record's broker timestamp) to the end of the run (after the last chunk's
pause): the Spark start-up before the first write is outside it. The peak is the most records
written in any one second (chunks are written as bursts, paused to keep the average). Writes bench/results/redrive.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, bench_session, create_topics, log, unique
from dlq_engine.job.redrive import Redrive
from dlq_engine.model.policy import parse_policy
from dlq_engine.model.redrive import parse_redrive
from dlq_engine.routing import headers as h
from spark_dlq_devtools.kafka import KafkaBroker


def write_dead_letters(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    now = int(time.time() * 1000)
    for i in range(n):
        headers: list[tuple[str, str | bytes | None]] = [
            *h.failure_headers(
                origin={h.ORIGINAL_TOPIC: "orders", h.ORIGINAL_PARTITION: "0", h.ORIGINAL_OFFSET: str(i)},
                attempt=3,
                error_class="ValueError",
                error_message=f"order {i}",
                stacktrace=None,
                policy="bench/redrive",
                subscription="bench",
                failed_at=now,
                reason="exhausted",
            )
        ]
        producer.produce(topic, key=b"k%d" % i, value=b"v" * 200, headers=headers)
    assert producer.flush(60) == 0


def written_times(bootstrap: str, topic: str, n: int, timeout: float = 120) -> list[int]:
    """The broker timestamps (ms) of the ``n`` records of ``topic``, in order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        stamps: list[int] = []
        deadline = time.monotonic() + timeout
        while len(stamps) < n and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                stamps.append(message.timestamp()[1])
        return sorted(stamps)
    finally:
        consumer.close()


def measure(spark: Any, bootstrap: str, rate: float, seconds: float) -> dict[str, Any]:
    n = int(rate * seconds)
    source, retry, dlq = unique("src"), unique("retry"), unique("dlq")
    create_topics(bootstrap, [source, retry, dlq], 2)
    write_dead_letters(bootstrap, dlq, n)
    policy = parse_policy(
        {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterPolicy",
            "metadata": {"name": "bench", "namespace": "bench"},
            "spec": {
                "source": {"topic": source, "subscription": "bench"},
                "broker": {"bootstrapServers": bootstrap},
                "processor": {"entrypoint": "bench.processors:timed"},
                "retry": {"topic": retry},
                "deadLetter": {"topic": dlq},
            },
        }
    )
    redrive = parse_redrive(
        {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterRedrive",
            "metadata": {"name": "bench", "namespace": "bench"},
            "spec": {"policyRef": {"name": "bench"}, "ratePerSecond": rate},
        }
    )
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.monotonic()
        progress = Redrive(spark, policy, redrive, checkpoint=Path(checkpoint)).run()
        wall = time.monotonic() - started
        ended_ms = time.time() * 1000
    stamps = written_times(bootstrap, retry, n)
    span = (ended_ms - stamps[0]) / 1000
    achieved = len(stamps) / span if span > 0 else float("inf")
    per_second: dict[int, int] = {}
    for stamp in stamps:
        per_second[stamp // 1000] = per_second.get(stamp // 1000, 0) + 1
    row = {
        "rate": rate,
        "messages": n,
        "redriven": progress.counts.redriven,
        "written": len(stamps),
        "span_s": round(span, 2),
        "wall_s": round(wall, 2),
        "achieved_per_s": round(achieved, 1),
        "achieved_over_rate": round(achieved / rate, 3),
        "peak_one_second": max(per_second.values()),
    }
    log(f"rate {rate}/s: {row}")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redrive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50,200,1000", help="comma-separated messages per second")
    parser.add_argument(
        "--seconds", type=float, default=20.0, help="each run redrives rate * seconds messages"
    )
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    broker = KafkaBroker(name="kafka-bench-redrive", log_level="WARN")
    broker.start()
    spark = bench_session(args.master)
    try:
        rows = [
            measure(spark, broker.bootstrap_servers, float(r), args.seconds) for r in args.rates.split(",")
        ]
    finally:
        spark.stop()
        broker.stop()
    result = {"benchmark": "redrive rate limit", "master": args.master, "seconds": args.seconds, "runs": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "redrive.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
