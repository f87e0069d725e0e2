"""The cost of ``source.ordering: key`` against ``none``: the engine's first pass over the same
source topic, in both settings, alternating, on one ``local[2]`` session and its own broker.

The source is the throughput benchmark's (every message its own key, about 200 bytes), with
the ``1%+0.1%`` failure mix (1% fail once, 0.1% always), so the ordering stage sees keys
with retries in flight. Each setting is represented by its fastest run (as in benchmark 1).
``python -m bench.ordering --n 200000 --rounds 2 [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

from bench.common import bench_session, create_topics, fill_topic, log, unique
from bench.processors import entrypoint
from bench.spark_runs import engine_first_pass
from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.paths import work_dir

MIX = "1%+0.1%"
PARTITIONS = 2


def measure(n: int, rounds: int) -> dict[str, Any]:
    broker = KafkaBroker(name=f"kafka-bench-ordering-{os.getpid()}", log_level="WARN")
    broker.start()
    root = work_dir(unique("bench-ordering"))
    try:
        spark = bench_session("local[2]")
        source = unique("ordering-src")
        create_topics(broker.bootstrap_servers, [source], PARTITIONS)
        fill_topic(broker.bootstrap_servers, source, n)
        runs: list[dict[str, Any]] = []
        for round_ in range(rounds):
            order = ["none", "key"] if round_ % 2 == 0 else ["key", "none"]
            for ordering in order:
                result = engine_first_pass(
                    spark,
                    broker.bootstrap_servers,
                    source,
                    n,
                    partitions=PARTITIONS,
                    mode="message",
                    entrypoint=entrypoint("message", MIX),
                    checkpoint=root / unique(f"ckpt-{ordering}"),
                    ordering=ordering,
                )
                log(f"ordering {ordering}, round {round_ + 1}: {result['rate']:,.0f} messages/s")
                runs.append(
                    {
                        "ordering": ordering,
                        "round": round_ + 1,
                        "rate": result["rate"],
                        "seconds": result["seconds"],
                    }
                )
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    best = {o: max(r["rate"] for r in runs if r["ordering"] == o) for o in ("none", "key")}
    return {"n": n, "mix": MIX, "runs": runs, "best": best, "key_vs_none": best["key"] / best["none"]}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ordering", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    figures = measure(args.n, args.rounds)
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
