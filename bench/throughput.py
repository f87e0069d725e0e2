"""Benchmark 1: engine throughput against the real broker, beside the baselines, in one run.

One source topic of N messages (about 200 bytes, a key and one header) serves every run; each
run writes to fresh topics and starts from its own checkpoint. Topics are never deleted during
the run: Spark shares one cached Kafka producer between queries with the same settings, and a
record still buffered for a deleted topic makes every later flush wait a minute. The
SparkSession is warmed first (a copy and an engine run per mode on a small topic), then:

1. the plain Spark Kafka-to-Kafka copy (available-now), the ceiling for any Spark router;
2. per failure mix: the engine in ``mode: batch`` and ``mode: message`` (the first pass over
   the N source messages, with a short fixed backoff so retries do not dominate), the
   hand-written confluent-kafka loop with the same processor, then the Spark copy again;
3. after the last mix, the raw confluent-kafka copy before the last Spark copy.

Each mix is compared with the mean of the two copies that bracket it, so the ratios hold even
when the load on a shared machine drifts during the run.
"""

from __future__ import annotations

import importlib
import resource
import shutil
from pathlib import Path
from typing import Any

from bench.common import create_topics, fill_topic, jvm_pid, log, rate, unique
from bench.handloop import hand_loop, raw_copy
from bench.memory import CpuSampler
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
        roots = {"spark": jvm, **({"broker": broker} if broker else {})}
        self.trees = CpuSampler(roots)
        self.own = 0.0
        self.mark()

    @staticmethod
    def _own() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def mark(self) -> None:
        self.trees.mark()
        self.own = self._own()

    def since_mark(self) -> dict[str, float]:
        used = self.trees.since_mark()
        used["bench_process"] = round(self._own() - self.own, 2)
        return used

    def stop(self) -> None:
        self.trees.stop()


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
    spark_copy(spark, bootstrap, topic, n, partitions=partitions, checkpoint=checkpoints.new("warm-copy"))
    for mode in modes:
        engine_first_pass(
            spark,
            bootstrap,
            topic,
            n,
            partitions=partitions,
            mode=mode,
            entrypoint=entrypoint(mode, HEADLINE_MIX),
            checkpoint=checkpoints.new(f"warm-{mode}"),
        )


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
    """Every run of benchmark 1; ``warmup_n=0`` skips the warm-up (the smoke test does)."""
    checkpoints = Checkpoints(workdir / "checkpoints")
    cpu = CpuMeter(jvm_pid(spark), broker_pid)
    source = prepare_source(bootstrap, n, partitions)
    warm = None
    if warmup_n > 0:
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

    # The copy brackets every failure mix (before and after it), so each engine run is compared
    # with copies taken minutes apart at most, whatever the rest of the machine did meanwhile.
    copy_once("copy-0")
    for index, mix in enumerate(mixes):
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
        if baselines and index == len(mixes) - 1:
            target = unique("raw-copy")
            create_topics(bootstrap, [target], partitions)
            cpu.mark()
            record("raw_copy", None, None, raw_copy(bootstrap, source=source, target=target, n=n))
        copy_once(f"copy-{index + 1}")
    cpu.stop()
    return {
        "n": n,
        "partitions": partitions,
        "mixes": mixes,
        "modes": modes,
        "warmup_n": warmup_n,
        "runs": runs,
        "summary": summarise(runs, mixes, modes),
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarise(runs: list[dict[str, Any]], mixes: list[str], modes: list[str]) -> dict[str, Any]:
    copy_runs = [r for r in runs if r["kind"] == "spark_copy"]
    copies = [r["rate"] for r in copy_runs]
    copy = _mean(copies)
    raw = next((r["rate"] for r in runs if r["kind"] == "raw_copy"), None)
    by_mix: dict[str, Any] = {}
    for index, mix in enumerate(mixes):
        # The copies taken just before and just after this mix's runs.
        bracket = copy_runs[index : index + 2] or copy_runs
        ref = _mean([r["rate"] for r in bracket])
        ref_cpu = _mean([r["cpu_us_per_message"] for r in bracket])
        engine_runs = {r["mode"]: r for r in runs if r["kind"] == "engine" and r["mix"] == mix}
        engine = {mode: r["rate"] for mode, r in engine_runs.items()}
        hand = next((r["rate"] for r in runs if r["kind"] == "hand_loop" and r["mix"] == mix), None)
        row: dict[str, Any] = {"engine": engine, "hand_loop": hand, "spark_copy": round(ref, 1)}
        ratios: dict[str, float] = {}
        targets: dict[str, bool] = {}
        for mode, target in (("batch", "batch_vs_copy"), ("message", "message_vs_copy")):
            if ref and mode in engine:
                ratios[target] = round(engine[mode] / ref, 3)
                targets[target] = ratios[target] >= TARGETS[target]
                cpu = engine_runs[mode]["cpu_us_per_message"]
                if cpu:
                    ratios[f"{target}_by_cpu"] = round(ref_cpu / cpu, 3)
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
