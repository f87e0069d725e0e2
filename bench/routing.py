"""The Python side alone: CPU microseconds per message of ``route_batch`` on an Arrow batch.

No Spark and no broker: the same 10,000-row record batch the Spark job hands to ``mapInArrow``
(key, ~200-byte value, one header, topic, partition, offset, timestamp) is routed with the
benchmark processors, and the CPU time (``time.process_time``, best of several rounds) is
divided by the rows. CPU time, not wall-clock time, so other load on the machine matters little.

Old against new, interleaved in one run (each variant in its own Python, round after round, so
both see about the same load): extract the old tree and name it with ``--against``:

    git archive main | tar -x -C /tmp/routing-main
    python -m bench.routing --against /tmp/routing-main --rounds 3

Each round runs the whole benchmark once per tree (that tree's own ``bench.routing.run``); the
table gives each tree's median and best over the rounds and their ratios (the best is the
figure another process's load disturbs least). Writes
``bench/results/routing-ab.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.common import RESULTS, source_value, write_json
from bench.processors import MIXES, entrypoint
from dlq_engine.job.processors import load_processor
from dlq_engine.model.policy import BackoffSpec, ProcessorMode
from dlq_engine.processing.batches import HEADER_TYPE, route_batch
from dlq_engine.routing.outcomes import Classifier
from dlq_engine.routing.settings import RoutingSettings

ROWS = 10_000


def record_batch(rows: int = ROWS, *, retry_topic: str = "retry") -> pa.RecordBatch:
    filler = b"x" * 300
    headers = [[{"key": "trace", "value": b"0123456789abcdef"}] for _ in range(rows)]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([b"k%d" % i for i in range(rows)], pa.binary()),
            pa.array([source_value(i, filler) for i in range(rows)], pa.binary()),
            pa.array(headers, HEADER_TYPE),
            pa.array(["source"] * rows, pa.string()),
            pa.array([i % 2 for i in range(rows)], pa.int32()),
            pa.array(list(range(rows)), pa.int64()),
            pa.array([1_700_000_000_000_000 + i for i in range(rows)], pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "headers", "topic", "partition", "offset", "timestamp"],
    )


def settings(mode: ProcessorMode) -> RoutingSettings:
    classifier = Classifier(
        max_redeliver=2,
        strategy="topic",
        has_output=True,
        backoff=BackoffSpec(type="fixed", delay_ms=200),
        include_stack=True,
    )
    return RoutingSettings(
        classifier=classifier, retry_topic="retry", policy="bench/routing", subscription="bench", mode=mode
    )


def measure(mode: ProcessorMode, mix: str, batch: pa.RecordBatch, rounds: int = 7) -> float:
    processor = load_processor(entrypoint(mode, mix))
    routing = settings(mode)
    route_batch(batch, routing, processor)  # warm: imports, caches
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        route_batch(batch, routing, processor)
        best = min(best, time.process_time() - start)
    rows: int = batch.num_rows
    return best / rows * 1e6


def run(
    mixes: list[str] | None = None, modes: tuple[ProcessorMode, ...] = ("message", "batch", "arrow")
) -> dict[str, Any]:
    batch = record_batch()
    rows = []
    for mix in mixes or list(MIXES):
        for mode in modes:
            us = measure(mode, mix, batch)
            rows.append(
                {
                    "mode": mode,
                    "mix": mix,
                    "cpu_us_per_message": round(us, 2),
                    "messages_per_cpu_second": round(1e6 / us),
                }
            )
    return {"rows_per_batch": batch.num_rows, "runs": rows}


#: The paths a tree's code is imported from (as docs/testing.md sets ``PYTHONPATH``).
_TREE_PATHS = ("spark_image", "operator", "devtools", ".")


def run_in(tree: Path) -> dict[str, Any]:
    """``run()`` of the tree at ``tree``, in a Python of its own that imports that tree's code."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(tree / part) for part in _TREE_PATHS)}
    code = "import json; from bench.routing import run; print(json.dumps(run()))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def against(old: Path, new: Path, rounds: int) -> dict[str, Any]:
    """Both trees' ``run()``, alternating for ``rounds`` rounds; each figure's median per tree."""
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for _ in range(rounds):
        for name, tree in (("old", old), ("new", new)):
            runs[name].append(run_in(tree))
    table = []
    for row in runs["new"][0]["runs"]:
        mode, mix = row["mode"], row["mix"]
        figures = {
            name: [
                r["cpu_us_per_message"]
                for result in results
                for r in result["runs"]
                if (r["mode"], r["mix"]) == (mode, mix)
            ]
            for name, results in runs.items()
        }
        median = {name: statistics.median(values) for name, values in figures.items()}
        best = {name: min(values) for name, values in figures.items()}
        table.append(
            {
                "mode": mode,
                "mix": mix,
                "old_us": median["old"],
                "new_us": median["new"],
                "ratio": round(median["new"] / median["old"], 3),
                "old_best_us": best["old"],
                "new_best_us": best["new"],
                "best_ratio": round(best["new"] / best["old"], 3),
            }
        )
    return {"old": str(old), "new": str(new), "rounds": rounds, "table": table, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", type=Path, help="the old tree, compared with this one in one run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.against is None:
        print(json.dumps(run(), indent=2))
        return
    here = Path(__file__).resolve().parent.parent
    result = against(args.against.resolve(), here, args.rounds)
    write_json(RESULTS, "routing-ab", result)
    print("| mode | failures | old µs | new µs | new / old |")
    print("| --- | --- | ---: | ---: | ---: |")
    for row in result["table"]:
        print(
            f"| {row['mode']} | {row['mix']} | {row['old_us']:.2f} | {row['new_us']:.2f} | {row['ratio']:.2f} |"
        )


if __name__ == "__main__":
    main()
