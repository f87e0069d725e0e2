"""``python -m bench.header_profiles``: what each header profile (``deadLetter.headerProfiles``) costs: CPU microseconds per message of
``route_batch`` and header bytes per failed record, with each profile added to ``spark-dlq``.

The Arrow batch and the CPU-time method are those of ``bench/routing.py`` (10,000 rows, message
mode, best of several rounds); the failure mixes are 10% of the messages failing (the routing
benchmark's heaviest) and every message failing, where the headers are the whole difference. Writes bench/results/header_profiles.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any

import pyarrow as pa

from bench.common import RESULTS
from bench.processors import entrypoint
from bench.routing import record_batch, settings
from dlq_engine import Message
from dlq_engine.job.processors import load_processor
from dlq_engine.model.policy import HeaderProfile
from dlq_engine.processing.batches import route_batch
from dlq_engine.routing.outcomes import Route
from dlq_engine.routing.settings import RoutingSettings

PROFILE_SETS: tuple[tuple[HeaderProfile, ...], ...] = (
    ("spark-dlq",),
    ("spark-dlq", "spring"),
    ("spark-dlq", "connect"),
    ("spark-dlq", "pulsar"),
    ("spark-dlq", "spring", "connect", "pulsar"),
)


def _always_fails(message: Message) -> object:
    raise ValueError("bench: every message fails")


def _measure(
    batch: pa.RecordBatch, routing: RoutingSettings, processor: Any, rounds: int
) -> tuple[float, float]:
    """CPU µs per message (best of ``rounds``) and mean header bytes per failed record."""
    out = route_batch(batch, routing, processor)  # warm
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        route_batch(batch, routing, processor)
        best = min(best, time.process_time() - start)
    failed = [
        sum(len(h["key"]) + len(h["value"] or b"") for h in row["headers"])
        for row in out.select(["route", "headers"]).to_pylist()
        if row["route"] in (Route.RETRY, Route.DEAD)
    ]
    return best / batch.num_rows * 1e6, (sum(failed) / len(failed) if failed else 0.0)


def run(rounds: int = 7) -> dict[str, Any]:
    batch = record_batch()
    processors = {"10%": load_processor(entrypoint("message", "10%")), "100%": _always_fails}
    rows = []
    for mix, processor in processors.items():
        for profiles in PROFILE_SETS:
            routing = dataclasses.replace(settings("message"), header_profiles=profiles)
            us, header_bytes = _measure(batch, routing, processor, rounds)
            rows.append(
                {
                    "profiles": list(profiles),
                    "mix": mix,
                    "cpu_us_per_message": round(us, 2),
                    "header_bytes_per_failed_record": round(header_bytes),
                }
            )
    return {"rows_per_batch": batch.num_rows, "runs": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.header_profiles", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=7, help="rounds per figure; the best is kept")
    args = parser.parse_args(argv)
    result = {"benchmark": "header profiles", **run(args.rounds)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "header_profiles.json").write_text(json.dumps(result, indent=2) + "\n")
    for r in result["runs"]:
        print(
            f"{', '.join(r['profiles']):<36} {r['mix']:<5} {r['cpu_us_per_message']:6.2f} CPU-us/msg "
            f"{r['header_bytes_per_failed_record']:5} header bytes per failed record"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
