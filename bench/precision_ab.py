"""Retry precision, the delay stage as it was against as it is, interleaved in one run.

On a shared machine the load moves by a factor of two within minutes, so two benchmark runs
minutes apart compare the load as much as the code. This runs benchmark 3 (``bench.precision``)
for each delay kind with each variant in turn, round after round, on one broker and one Spark
session, so every variant sees about the same load:

- ``before``: released retries in the order the delay stage emits them, state commits writing
  snapshots (the engine before issue 20);
- ``in-due-order``: released retries not yet due handed on in due order (``InDueOrder``);
- ``changelog``: and RocksDB changelog checkpointing (the engine now).

    python -m bench.precision_ab --m 2000 --rounds 2

Writes ``bench/results/precision-ab.json``; ``bench/notes/11-retry-precision.md`` reads it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import precision
from bench.common import RESULTS, bench_session, log, write_json
from dlq_engine.job import delay, pipeline
from dlq_engine.job.preflight import engine_class
from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.paths import work_dir

CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def emitted_order(retries: Any, lookahead_ms: int) -> Any:
    """The delay stage with ``InDueOrder`` keyed on a constant 0: every record counts as due,
    so all pass on in the order the stateful stage emits them, as before."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    with_due = retries.where(~delay.control_record()).select(
        *delay.RECORD_COLUMNS, delay.deliver_at_column().alias(delay.DELIVER_AT_COLUMN)
    )
    with_due = with_due.withColumn(
        "due", (F.ceil(F.col(delay.DELIVER_AT_COLUMN) / delay.BUCKET_MS) * delay.BUCKET_MS).cast("bigint")
    ).withColumn("zero", F.lit(0).cast("bigint"))
    spark = with_due.sparkSession
    stage = engine_class(spark, delay.JVM_DELAY_STAGE)
    held = DataFrame(stage.holdUntilDue(with_due._jdf, "due", "zero", int(lookahead_ms)), spark)
    return held.select(*delay.RECORD_COLUMNS, delay.DELIVER_AT_COLUMN)


#: variant -> (the delay stage ``pipeline`` builds, changelog checkpointing on)
VARIANTS: dict[str, tuple[Callable[[Any, int], Any], bool]] = {
    "before": (emitted_order, False),
    "in-due-order": (delay.hold_until_due, False),
    "changelog": (delay.hold_until_due, True),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.precision_ab", description=__doc__.split("\n\n")[0])
    p.add_argument("--m", type=int, default=2_000, help="retried messages per kind, variant and round")
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--kinds", default=",".join(precision.DELAYS))
    p.add_argument("--results", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    workdir = work_dir(f"bench-ab-{os.getpid()}")
    broker = KafkaBroker(name=f"kafka-bench-ab-{os.getpid()}", heap="1g", log_level="WARN")
    broker.start()
    runs: list[dict[str, Any]] = []
    try:
        spark = bench_session("local[2]")
        try:
            for round_ in range(args.rounds):
                for kind in kinds:
                    for name, (stage, changelog) in VARIANTS.items():
                        setattr(pipeline, "hold_until_due", stage)  # noqa: B010 - the pipeline builds with it
                        spark.conf.set(CHANGELOG, "true" if changelog else "false")
                        summary = precision.one(
                            spark,
                            broker.bootstrap_servers,
                            kind=kind,
                            m=args.m,
                            rate=args.rate,
                            trigger="1s",
                            trigger_ms=1000,
                            partitions=2,
                            checkpoint=workdir / f"{name}-{kind.replace(' ', '-')}-{round_}",
                        )
                        del summary["lateness_ms"], summary["batches"]
                        runs.append({"variant": name, "round": round_, **summary})
                        log(f"{name} {kind}: p99 {summary['p99_ms']} ms")
                        write_json(args.results, "precision-ab", {"m": args.m, "runs": runs})
        finally:
            setattr(pipeline, "hold_until_due", delay.hold_until_due)  # noqa: B010
            spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(broker.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
