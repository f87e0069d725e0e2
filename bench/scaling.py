"""Benchmark 2: scaling with local cores and source partitions.

A SparkSession's core count is fixed when its JVM starts, so every (cores, partitions) point
runs in its own process (``python -m bench.scaling --worker ...``): a fresh session, a warm-up
on a small topic, then the engine (``mode: batch``, the headline failure mix) and the plain
Spark copy over the same N messages. The parent produces the topics and collects each
worker's JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import log
from spark_dlq_devtools.paths import REPO_ROOT

CORES = (1, 2)
PARTITIONS = (1, 4, 12)
MARKER = "BENCH-SCALING-RESULT "


def run(
    bootstrap: str,
    *,
    n: int,
    warmup_n: int,
    mode: str,
    mix: str,
    workdir: Path,
    cores: tuple[int, ...] = CORES,
    partitions: tuple[int, ...] = PARTITIONS,
    driver_memory: str = "1g",
    timeout: float = 1800.0,
) -> dict[str, Any]:
    from bench.throughput import prepare_source

    points: list[dict[str, Any]] = []
    for p in partitions:
        source = prepare_source(bootstrap, n, p)
        warm = prepare_source(bootstrap, warmup_n, p, prefix="warm")
        for c in cores:
            command = [
                sys.executable,
                "-m",
                "bench.scaling",
                "--worker",
                "--bootstrap",
                bootstrap,
                "--source",
                source,
                "--warm",
                warm,
                "--n",
                str(n),
                "--warmup-n",
                str(warmup_n),
                "--partitions",
                str(p),
                "--cores",
                str(c),
                "--mode",
                mode,
                "--mix",
                mix,
                "--workdir",
                str(workdir / f"scaling-c{c}-p{p}"),
                "--driver-memory",
                driver_memory,
            ]
            log(f"scaling: local[{c}], {p} partitions")
            started = time.monotonic()
            done = subprocess.run(
                command,
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
            if done.returncode != 0 or not lines:
                tail = "\n".join(done.stderr.splitlines()[-30:])
                raise RuntimeError(f"scaling worker local[{c}] p={p} failed ({done.returncode}):\n{tail}")
            point = json.loads(lines[-1][len(MARKER) :])
            point["process_seconds"] = round(time.monotonic() - started, 1)
            points.append(point)
            log(
                f"scaling: local[{c}] p={p}: engine {point['engine_rate']:,.0f} msg/s, "
                f"copy {point['copy_rate']:,.0f} msg/s"
            )
    return {"n": n, "mode": mode, "mix": mix, "points": points}


def worker(args: argparse.Namespace) -> None:
    from bench.common import bench_session
    from bench.processors import entrypoint
    from bench.spark_runs import engine_first_pass, spark_copy

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    checkpoints = Path(tempfile.mkdtemp(prefix="cp-", dir=workdir))
    spark = bench_session(
        f"local[{args.cores}]",
        driver_memory=args.driver_memory,
        app=f"bench-scaling-c{args.cores}-p{args.partitions}",
    )
    try:
        ep = entrypoint(args.mode, args.mix)
        for name, topic, n in (("warm", args.warm, args.warmup_n), ("run", args.source, args.n)):
            copy = spark_copy(
                spark,
                args.bootstrap,
                topic,
                n,
                partitions=args.partitions,
                checkpoint=checkpoints / f"{name}-copy",
            )
            engine = engine_first_pass(
                spark,
                args.bootstrap,
                topic,
                n,
                partitions=args.partitions,
                mode=args.mode,
                entrypoint=ep,
                checkpoint=checkpoints / f"{name}-engine",
            )
        point = {
            "cores": args.cores,
            "partitions": args.partitions,
            "n": args.n,
            "mode": args.mode,
            "mix": args.mix,
            "engine_rate": round(engine["rate"], 1),
            "engine_seconds": round(engine["seconds"], 3),
            "copy_rate": round(copy["rate"], 1),
            "copy_seconds": round(copy["seconds"], 3),
        }
        print(MARKER + json.dumps(point), flush=True)
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true", required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--warm", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--warmup-n", type=int, required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--cores", type=int, required=True)
    parser.add_argument("--mode", default="batch")
    parser.add_argument("--mix", default="1%+0.1%")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--driver-memory", default="1g")
    worker(parser.parse_args())


if __name__ == "__main__":
    main()
