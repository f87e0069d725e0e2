"""The benchmark harness (``bench/``) at toy size, so it does not rot between benchmark runs.

Runs benchmark 1 (engine in ``mode: batch``, the Spark copy straight and through
``mapInArrow``, the hand-written loop and the raw copy) on a couple of thousand messages with one failure mix and no warm-up, a few retried
messages of benchmark 3, the memory sampler, and writes the report with its plots into a
temporary folder. Figures at this size mean nothing; the test checks that every piece runs and
that the counts add up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import precision, report, throughput
from bench.common import jvm_pid, write_json
from bench.memory import MemorySampler, tree_cpu_seconds
from bench.run import operator_scale
from spark_dlq_devtools.kafka import KafkaBroker

N = 2_000


def test_the_benchmark_harness_runs_end_to_end(
    spark: Any, kafka: KafkaBroker, bootstrap_servers: str, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    assert kafka.service is not None
    assert tree_cpu_seconds(kafka.service.pid) > 0

    with MemorySampler(jvm_pid(spark), interval=0.5) as sampler:
        result = throughput.run(
            spark,
            bootstrap_servers,
            n=N,
            partitions=2,
            mixes=["1%+0.1%"],
            modes=["batch"],
            warmup_n=0,
            workdir=tmp_path,
            broker_pid=kafka.service.pid,
            rounds=1,
        )
    memory = {**sampler.summary(), "driver_memory": "1g", "samples": sampler.samples}
    write_json(results, "throughput", result)
    write_json(results, "memory", memory)

    kinds = [r["kind"] for r in result["runs"]]
    assert kinds == ["spark_copy", "spark_arrow_copy", "engine", "hand_loop", "raw_copy"]
    engine = next(r for r in result["runs"] if r["kind"] == "engine")
    counts = engine["counts"]
    # 1% transient + 0.1% poison of 2,000: 22 fail on the first pass, the rest are published.
    assert counts["total"] - counts["redelivered"] >= N
    assert counts["retried"] >= 22
    assert all(r["rate"] > 0 and r["cpu_us_per_message"] > 0 for r in result["runs"])
    hand = next(r for r in result["runs"] if r["kind"] == "hand_loop")
    assert hand["counts"]["source"] == N
    assert hand["counts"]["retried"] >= 22
    row = result["summary"]["by_mix"]["1%+0.1%"]
    assert set(row["ratios"]) >= {
        "batch_vs_copy",
        "batch_vs_hand_loop",
        "engine_vs_hand_loop",
        "batch_vs_arrow_copy",
        "engine_vs_arrow_copy",
    }
    assert memory["jvm_peak_rss_mib"] > 100
    assert memory["python_workers_seen"] >= 1

    retries = precision.run(
        spark,
        bootstrap_servers,
        m=10,
        rate=50.0,
        trigger="500ms",
        trigger_ms=500,
        partitions=1,
        workdir=tmp_path,
        kinds=["fixed 1s"],
        warm_up_messages=5,
    )
    write_json(results, "precision", retries)
    (run,) = retries["runs"]
    assert run["delivered"] == 10  # the 5 warm-up messages are not counted
    assert run["warm_up_messages"] == 5
    assert run["early"] == 0

    # Scaling needs a session per core count (a subprocess each): too slow here, so its report
    # section is checked with two made-up points.
    points = [
        {
            "cores": c,
            "partitions": 4,
            "n": N,
            "mode": "batch",
            "mix": "1%+0.1%",
            "engine_rate": 1000.0 * c,
            "copy_rate": 2000.0 * c,
        }
        for c in (1, 2)
    ]
    write_json(
        results,
        "scaling",
        {"n": N, "mode": "batch", "mix": "1%+0.1%", "points": points},
    )
    # The Pulsar benchmark starts a Kafka broker, a Pulsar and a session of its own: its section is
    # checked with a made-up result of bench/pulsar_throughput.py's shape.
    write_json(
        results,
        "pulsar_throughput",
        {
            "n": N,
            "partitions": 2,
            "mix": "1%+0.1%",
            "mode": "message",
            "runs": [
                {"broker": "kafka", "round": 0, "seconds": 2.0, "rate": 1000.0, "batches": 3},
                {"broker": "pulsar", "round": 0, "seconds": 4.0, "rate": 500.0, "batches": 2},
                {"broker": "pulsar-unbatched", "round": 0, "seconds": 5.0, "rate": 400.0, "batches": 1},
            ],
            "kafka_rate": 1000,
            "pulsar_rate": 500,
            "pulsar_vs_kafka": 0.5,
            "pulsar_unbatched_rate": 400,
            "pulsar_unbatched_vs_kafka": 0.4,
            "loadavg_end": [1.0, 1.0, 1.0],
        },
    )
    write_json(results, "meta", {"command": "smoke", "note": "smoke test", "machine": {}, "versions": {}})

    doc = report.write(tmp_path / "benchmarks.md", results)
    text = doc.read_text()
    for heading in (
        "## 1. Engine throughput",
        "## 1c. Pulsar beside Kafka",
        "## 2. Scaling",
        "## 3. Retry precision",
        "## 5. Memory",
    ):
        assert heading in text
    assert "so one fully used executor core routes about" in text  # from benchmark 1's CPU figures
    assert "| Spark copy through an identity mapInArrow | 1%+0.1% | 1 |" in text
    assert "| 1%+0.1% (headline, issue 3) | " in text.split("Against the second ceiling")[1]
    assert (
        "| Pulsar (the engine's JVM connector), source written with batching | 500 | 0.50x | 500 | 4.0 s | 2 |"
        in text
    )
    assert "| Pulsar, source written without batching | 400 | 0.40x | 400 | 5.0 s | 1 |" in text
    assert "Target (issue 28): Pulsar at 0.8x the engine's Kafka rate or more: missed (0.50x)." in text
    for image in ("throughput", "scaling", "precision", "memory"):
        assert (tmp_path / "benchmarks" / f"{image}.png").stat().st_size > 1000
    assert json.loads((results / "throughput.json").read_text())["n"] == N


def test_the_operator_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    """Benchmark 4 at toy size: its own kube-apiserver, etcd and ``dlq-operator run`` process
    (``bench/operator_scale.py``), then its section of the report."""
    results = tmp_path / "results"
    operator_scale(
        results / "operator.json",
        "smoke test",
        ("--latency", "5", "--total", "20", "--changes", "2", "--settle", "0.5"),
    )

    data = json.loads((results / "operator.json").read_text())
    assert data["latency"]["policies"] == 5
    assert 0 < data["latency"]["p50_ms"] <= data["latency"]["p99_ms"]
    assert data["throughput"]["policies"] == 20
    assert 0 < data["throughput"]["applications_s"] <= data["throughput"]["statuses_s"]
    assert data["throughput"]["rss_mib"] > 20
    assert data["change"]["policies"] == 2
    write_json(results, "meta", {"command": "smoke", "note": "", "machine": {}, "versions": {}})
    text = report.write(tmp_path / "benchmarks.md", results).read_text()
    assert "## 4. Operator" in text
    assert "| 20 policies: every status written (reconciled) |" in text
