"""The engine's ceiling: variants of the routing hot path, paired against the plain Spark copy.

    python -m bench.ceiling --n 300000 --mix 1%+0.1% --variants base,nosizecheck --rounds 4

One broker, one ``local[2]`` SparkSession, one source topic. After a warm-up, each round runs
the plain Spark copy and the same copy through an identity ``mapInArrow`` (the least any
PySpark router pays), then the engine once per variant (the order rotated every round), and
records per run the wall-clock rate (timed as ``bench/throughput.py`` does) and the CPU of the
Spark JVM and its Python workers, and of the broker. A variant is a set of Spark settings
applied for that run only (``VARIANTS``). Every figure is also given as a ratio to each copy of
the same round, so a machine that slows down between rounds shifts both sides of the ratio.
The JVM's own CPU is given beside the Spark processes' (the JVM and its Python workers): their
difference is the Python workers'.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import bench_session, jvm_pid, log
from bench.memory import _TICKS, _own_cpu_ticks
from bench.spark_runs import spark_copy
from bench.throughput import Checkpoints, CpuMeter, engine_pass, prepare_source
from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.paths import work_dir


def _old_observe(frame: Any) -> Any:
    """The observed metrics as they were before the counts moved into the routing summaries:
    an aggregate per count, evaluated on every row in the JVM (besides the summaries)."""
    from pyspark.sql import functions as F

    from dlq_engine.job.pipeline import DEAD_REASONS, METRICS, STATS
    from dlq_engine.routing.headers import CONTROL_BLOCK
    from dlq_engine.routing.outcomes import Route

    route, reason = F.col("route"), F.col("reason")
    return frame.observe(
        METRICS,
        F.count(F.when(route <= int(Route.IGNORED), 1)).alias("total_old"),
        F.count(F.when(route == int(Route.OUTPUT), 1)).alias("output_old"),
        F.count(F.when(route == int(Route.ACK), 1)).alias("acked_old"),
        F.count(F.when(route == int(Route.RETRY), 1)).alias("retried_old"),
        F.count(F.when(route == int(Route.DEAD), 1)).alias("dead_old"),
        F.count(F.when(route == int(Route.IGNORED), 1)).alias("ignored_old"),
        F.count(F.when(route == int(Route.PARKED), 1)).alias("parked_old"),
        F.count(F.when((route == int(Route.CONTROL)) & (reason == CONTROL_BLOCK), 1)).alias("blocked_old"),
        F.count(F.col("lateness_ms")).alias("redelivered_old"),
        F.max(F.col("lateness_ms")).alias("max_lateness_ms_old"),
        F.min(F.col("lateness_ms")).alias("min_lateness_ms_old"),
        *(F.count(F.when(reason == value, 1)).alias(f"{name}_old") for name, value in DEAD_REASONS.items()),
        F.collect_list(F.col(STATS)).alias(STATS),
    )


#: variant name -> (Spark settings for that run (runtime SQL settings; reset afterwards),
#: ``dlq_engine.job.pipeline`` functions replaced for that run).
VARIANTS: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
    "base": ({}, {}),
    # No per-row size check of the Arrow batch going to Python (bounded by records only).
    "nosizecheck": ({"spark.sql.execution.arrow.maxBytesPerBatch": "2147483647"}, {}),
    "records2k": ({"spark.sql.execution.arrow.maxRecordsPerBatch": "2000"}, {}),
    "records50k": ({"spark.sql.execution.arrow.maxRecordsPerBatch": "50000"}, {}),
    "oldobserve": ({}, {"observed": _old_observe}),
}


class Recorder:
    """Java Flight Recorder on the Spark JVM for one run at a time (``jcmd``), or nothing."""

    def __init__(self, folder: Path | None, pid: int) -> None:
        self.folder, self.pid = folder, pid
        if folder:
            folder.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        if self.folder:
            subprocess.run(
                ["jcmd", str(self.pid), "JFR.start", "name=ceiling", "settings=profile"],
                check=True,
                capture_output=True,
            )

    def stop(self, name: str) -> None:
        if self.folder:
            path = self.folder / f"{name}.jfr"
            subprocess.run(
                ["jcmd", str(self.pid), "JFR.stop", "name=ceiling", f"filename={path}"],
                check=True,
                capture_output=True,
            )


def run_variant(spark: Any, name: str, run: Any) -> dict[str, Any]:
    from dlq_engine.job import pipeline

    conf, patches = VARIANTS[name]
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    originals = {attr: getattr(pipeline, attr) for attr in patches}
    for attr, replacement in patches.items():
        setattr(pipeline, attr, replacement)
    try:
        result: dict[str, Any] = run()
        return result
    finally:
        for attr, original in originals.items():
            setattr(pipeline, attr, original)
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ceiling")
    p.add_argument("--n", type=int, default=300_000)
    p.add_argument("--warmup-n", type=int, default=100_000)
    p.add_argument("--mix", default="1%+0.1%")
    p.add_argument("--mode", default="batch")
    p.add_argument("--variants", default="base")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--jfr", type=Path, default=None, help="record each timed run with JFR into this folder")
    args = p.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    workdir = work_dir(f"ceiling-{os.getpid()}")
    broker = KafkaBroker(name=f"kafka-ceiling-{os.getpid()}", heap="768m", log_level="WARN")
    broker.start()
    bootstrap = broker.bootstrap_servers
    runs: list[dict[str, Any]] = []
    try:
        spark = bench_session("local[2]")
        try:
            cpu = CpuMeter(jvm_pid(spark), broker.service.pid if broker.service else None)
            jvm = jvm_pid(spark)
            jfr = Recorder(args.jfr, jvm)
            checkpoints = Checkpoints(workdir / "checkpoints")
            source = prepare_source(bootstrap, args.n, 2)
            warm = prepare_source(bootstrap, args.warmup_n, 2, prefix="warm")
            for through_arrow in (False, True):
                spark_copy(
                    spark,
                    bootstrap,
                    warm,
                    args.warmup_n,
                    partitions=2,
                    checkpoint=checkpoints.new("w"),
                    through_arrow=through_arrow,
                )
            for mode in modes:
                for name in variants:
                    run_variant(
                        spark,
                        name,
                        lambda mode=mode: engine_pass(
                            spark, bootstrap, warm, args.warmup_n, 2, mode, args.mix, checkpoints.new("w")
                        ),
                    )
            kinds = [(mode, name) for mode in modes for name in variants]
            for round_ in range(args.rounds):
                for kind in ("copy", "arrow_copy") if round_ % 2 == 0 else ("arrow_copy", "copy"):
                    cpu.mark()
                    jvm0 = _own_cpu_ticks(jvm)
                    jfr.start()
                    copy = spark_copy(
                        spark,
                        bootstrap,
                        source,
                        args.n,
                        partitions=2,
                        checkpoint=checkpoints.new("c"),
                        through_arrow=kind == "arrow_copy",
                    )
                    jfr.stop(f"{kind}-{round_}")
                    copy_cpu = cpu.since_mark()
                    copy_cpu["jvm"] = round((_own_cpu_ticks(jvm) - jvm0) / _TICKS, 2)
                    runs.append(
                        {"round": round_, "kind": kind, "rate": args.n / copy["seconds"], "cpu": copy_cpu}
                    )
                    log(f"round {round_} {kind} {args.n / copy['seconds']:,.0f} msg/s cpu {copy_cpu}")
                shift = round_ % len(kinds)
                for mode, name in kinds[shift:] + kinds[:shift]:
                    cpu.mark()
                    jvm0 = _own_cpu_ticks(jvm)
                    jfr.start()
                    result = run_variant(
                        spark,
                        name,
                        lambda mode=mode: engine_pass(
                            spark, bootstrap, source, args.n, 2, mode, args.mix, checkpoints.new("e")
                        ),
                    )
                    jfr.stop(f"{mode}-{name}-{round_}")
                    used = cpu.since_mark()
                    used["jvm"] = round((_own_cpu_ticks(jvm) - jvm0) / _TICKS, 2)
                    rate = args.n / result["seconds"]
                    runs.append({"round": round_, "kind": f"{mode}:{name}", "rate": rate, "cpu": used})
                    log(f"round {round_} {mode}:{name} {rate:,.0f} msg/s cpu {used}")
            cpu.stop()
        finally:
            spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(broker.root, ignore_errors=True)
    summary = summarise(runs, args.n)
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": vars(args) | {"json": str(args.json)}, "runs": runs, "summary": summary}, indent=1
            )
        )
    return 0


def summarise(runs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Per kind: the median ratio to each copy of the same round (``copy``, ``arrow_copy``), by
    wall clock and by the Spark processes' CPU (the copy's CPU per message / the run's), the best
    of each, and the median CPU per message of the Spark processes, of the JVM alone and so of
    the Python workers."""
    out: dict[str, Any] = {}
    for kind in dict.fromkeys(r["kind"] for r in runs):
        mine = [r for r in runs if r["kind"] == kind]
        row: dict[str, Any] = {"rate_best": round(max(r["rate"] for r in mine))}
        for ref in ("copy", "arrow_copy"):
            copies = {r["round"]: r for r in runs if r["kind"] == ref}
            if not copies or kind == ref:
                continue
            suffix = "" if ref == "copy" else "_vs_arrow_copy"
            wall = [r["rate"] / copies[r["round"]]["rate"] for r in mine]
            spark_cpu = [copies[r["round"]]["cpu"]["spark"] / r["cpu"]["spark"] for r in mine]
            row[f"wall_ratio_median{suffix}"] = round(statistics.median(wall), 3)
            row[f"wall_ratio_best_vs_best{suffix or '_copy'}"] = round(
                max(r["rate"] for r in mine) / max(c["rate"] for c in copies.values()), 3
            )
            row[f"cpu_ratio_median{suffix}"] = round(statistics.median(spark_cpu), 3)
        spark_us = statistics.median(r["cpu"]["spark"] for r in mine) / n * 1e6
        jvm_us = statistics.median(r["cpu"]["jvm"] for r in mine) / n * 1e6
        row |= {
            "spark_cpu_us_median": round(spark_us, 2),
            "jvm_cpu_us_median": round(jvm_us, 2),
            "python_cpu_us_median": round(
                statistics.median((r["cpu"]["spark"] - r["cpu"]["jvm"]) for r in mine) / n * 1e6, 2
            ),
        }
        out[kind] = row
    return out


if __name__ == "__main__":
    sys.exit(main())
