"""Benchmark 1: engine throughput against the real broker, beside the baselines, in one run.

One source topic of N messages (about 200 bytes, a key and one header) serves every run; each
run writes to fresh topics and starts from its own checkpoint. The SparkSession is warmed
first (a copy and an engine run per mode on a small topic), then, in this order:

1. the plain Spark Kafka-to-Kafka copy (available-now), the ceiling for any Spark router;
2. per failure mix: the engine in ``mode: batch`` and ``mode: message`` (the first pass over
   the N source messages, with a short fixed backoff so retries do not dominate), and the
   hand-written confluent-kafka loop with the same processor;
3. the raw confluent-kafka copy, and the Spark copy again (noise shows as their difference).
"""

from __future__ import annotations

import importlib
import resource
import shutil
from pathlib import Path
from typing import Any

from bench.common import create_topics, delete_topics, fill_topic, jvm_pid, log, rate, unique
from bench.handloop import hand_loop, raw_copy
from bench.memory import tree_cpu_seconds
from bench.processors import MIXES, entrypoint
from bench.spark_runs import engine_first_pass, spark_copy

HEADLINE_MIX = "1%+0.1%"
TARGETS = {"batch_vs_copy": 0.8, "message_vs_copy": 0.5, "engine_vs_hand_loop": 2.0}


def _processor(mode: str, mix: str) -> Any:
    module_name, _, name = entrypoint(mode, mix).partition(":")
    return getattr(importlib.import_module(module_name), name)


class CpuMeter:
    """CPU seconds used by the Spark JVM and its Python workers, by the broker, and by this
    process (the confluent-kafka baselines run here), between ``mark`` and ``since_mark``."""

    def __init__(self, jvm: int, broker: int | None) -> None:
        self.jvm = jvm
        self.broker = broker
        self.start = self.read()

    def read(self) -> dict[str, float]:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "spark": tree_cpu_seconds(self.jvm),
            "broker": tree_cpu_seconds(self.broker) if self.broker else 0.0,
            "bench_process": usage.ru_utime + usage.ru_stime,
        }

    def mark(self) -> None:
        self.start = self.read()

    def since_mark(self) -> dict[str, float]:
        now = self.read()
        return {k: round(now[k] - self.start[k], 2) for k in now}


class Checkpoints:
    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        self.count = 0

    def new(self, name: str) -> Path:
        self.count += 1
        return self.root / f"{self.count:02d}-{name}"


def prepare_source(bootstrap: str, n: int, partitions: int, prefix: str = "source") -> str:
    topic = unique(f"{prefix}-p{partitions}")
    create_topics(bootstrap, [topic], partitions)
    seconds = fill_topic(bootstrap, topic, n)
    log(f"produced {n} messages to {topic} ({partitions} partitions) in {seconds:.1f}s")
    return topic


def warm_up(
    spark: Any,
    bootstrap: str,
    topic: str,
    n: int,
    partitions: int,
    modes: list[str],
    checkpoints: Checkpoints,
) -> None:
    log("warming up: Spark copy and the engine on a small topic")
    result = spark_copy(
        spark, bootstrap, topic, n, partitions=partitions, checkpoint=checkpoints.new("warm-copy")
    )
    delete_topics(bootstrap, result["topics"].values())
    for mode in modes:
        result = engine_first_pass(
            spark,
            bootstrap,
            topic,
            n,
            partitions=partitions,
            mode=mode,
            entrypoint=entrypoint(mode, HEADLINE_MIX),
            checkpoint=checkpoints.new(f"warm-{mode}"),
        )
        delete_topics(bootstrap, result["topics"].values())


def run(
    spark: Any,
    bootstrap: str,
    *,
    n: int,
    partitions: int,
    mixes: list[str],
    modes: list[str],
    warmup_n: int,
    workdir: Path,
    baselines: bool = True,
    broker_pid: int | None = None,
) -> dict[str, Any]:
    checkpoints = Checkpoints(workdir / "checkpoints")
    cpu = CpuMeter(jvm_pid(spark), broker_pid)
    source = prepare_source(bootstrap, n, partitions)
    warm = prepare_source(bootstrap, warmup_n, partitions, prefix="warm")
    warm_up(spark, bootstrap, warm, warmup_n, partitions, modes, checkpoints)

    runs: list[dict[str, Any]] = []

    def record(kind: str, mix: str | None, mode: str | None, result: dict[str, Any]) -> None:
        used = cpu.since_mark()
        row = {
            "kind": kind,
            "mix": mix,
            "mode": mode,
            "n": n,
            "seconds": round(result["seconds"], 3),
            "rate": round(rate(n, result["seconds"]), 1),
            "counts": result.get("counts"),
            "batches": result.get("batches"),
            "cpu_seconds": used,
            "cpu_us_per_message": round(sum(used.values()) / n * 1e6, 2),
        }
        runs.append(row)
        log(
            f"{kind:<12} mix={mix or '-':<8} mode={mode or '-':<8} {row['rate']:>10,.0f} msg/s "
            f"({row['seconds']:.2f}s, {row['cpu_us_per_message']:.1f} CPU-us/msg) {result.get('counts')}"
        )

    def copy_once(label: str) -> None:
        cpu.mark()
        result = spark_copy(
            spark, bootstrap, source, n, partitions=partitions, checkpoint=checkpoints.new(label)
        )
        record("spark_copy", None, None, result)
        delete_topics(bootstrap, result["topics"].values())

    copy_once("copy-1")
    for mix in mixes:
        for mode in modes:
            cpu.mark()
            result = engine_first_pass(
                spark,
                bootstrap,
                source,
                n,
                partitions=partitions,
                mode=mode,
                entrypoint=entrypoint(mode, mix),
                checkpoint=checkpoints.new(f"engine-{mode}"),
            )
            record("engine", mix, mode, result)
            delete_topics(bootstrap, result["topics"].values())
        if baselines:
            names = {k: unique(k) for k in ("hand-retry", "hand-dlq", "hand-out")}
            create_topics(bootstrap, names.values(), partitions)
            cpu.mark()
            result = hand_loop(
                bootstrap,
                source=source,
                retry=names["hand-retry"],
                dlq=names["hand-dlq"],
                output=names["hand-out"],
                n=n,
                process=_processor("message", mix),
            )
            record("hand_loop", mix, "message", result)
            delete_topics(bootstrap, names.values())
    if baselines:
        target = unique("raw-copy")
        create_topics(bootstrap, [target], partitions)
        cpu.mark()
        record("raw_copy", None, None, raw_copy(bootstrap, source=source, target=target, n=n))
        delete_topics(bootstrap, [target])
    copy_once("copy-2")
    delete_topics(bootstrap, [source, warm])
    return {
        "n": n,
        "partitions": partitions,
        "mixes": mixes,
        "modes": modes,
        "warmup_n": warmup_n,
        "runs": runs,
        "summary": summarise(runs, mixes, modes),
    }


def summarise(runs: list[dict[str, Any]], mixes: list[str], modes: list[str]) -> dict[str, Any]:
    copies = [r["rate"] for r in runs if r["kind"] == "spark_copy"]
    copy = sum(copies) / len(copies) if copies else 0.0
    raw = next((r["rate"] for r in runs if r["kind"] == "raw_copy"), None)
    by_mix: dict[str, Any] = {}
    for mix in mixes:
        engine = {r["mode"]: r["rate"] for r in runs if r["kind"] == "engine" and r["mix"] == mix}
        hand = next((r["rate"] for r in runs if r["kind"] == "hand_loop" and r["mix"] == mix), None)
        row: dict[str, Any] = {"engine": engine, "hand_loop": hand}
        ratios: dict[str, float] = {}
        targets: dict[str, bool] = {}
        if copy and "batch" in engine:
            ratios["batch_vs_copy"] = round(engine["batch"] / copy, 3)
            targets["batch_vs_copy"] = ratios["batch_vs_copy"] >= TARGETS["batch_vs_copy"]
        if copy and "message" in engine:
            ratios["message_vs_copy"] = round(engine["message"] / copy, 3)
            targets["message_vs_copy"] = ratios["message_vs_copy"] >= TARGETS["message_vs_copy"]
        if hand:
            for mode, value in engine.items():
                ratios[f"{mode}_vs_hand_loop"] = round(value / hand, 3)
            best = max(engine.values(), default=0.0)
            ratios["engine_vs_hand_loop"] = round(best / hand, 3)
            targets["engine_vs_hand_loop"] = ratios["engine_vs_hand_loop"] >= TARGETS["engine_vs_hand_loop"]
        row["ratios"] = ratios
        row["targets_met"] = targets
        by_mix[mix] = row
    return {
        "spark_copy": round(copy, 1),
        "spark_copy_runs": copies,
        "raw_copy": raw,
        "by_mix": by_mix,
        "headline_mix": HEADLINE_MIX if HEADLINE_MIX in mixes else (mixes[0] if mixes else None),
        "targets": TARGETS,
    }


ALL_MIXES = list(MIXES)
