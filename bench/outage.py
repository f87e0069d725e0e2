"""A minute-long outage of the processor's downstream, with and without the breaker, side by side.

The harness is the breaker test's (``spark_dlq_devtools.outage``; the test runs a 12 s outage):
a Kafka broker started here, one ``local[2]`` SparkSession, two engines on it (the same policy
but for ``retry.breaker``), a producer per source topic writing the same numbers at ``--rate``,
and a real HTTP service the processor calls that stops listening for ``--outage`` seconds.
Results: ``bench/results/outage.json`` (the figures docs/engine.md, "The circuit breaker",
quotes) and the side-by-side table on stdout.

    python -m bench.outage [--outage 60] [--rate 100] [--open-time 30s]
"""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any

from bench.common import (
    RESULTS,
    bench_session,
    create_topics,
    log,
    machine,
    software_versions,
    unique,
    write_json,
)
from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.outage import OutageRun, side_by_side
from spark_dlq_devtools.paths import work_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--outage", type=float, default=60.0, help="seconds the downstream is down")
    parser.add_argument("--before", type=float, default=15.0, help="seconds of load before it goes down")
    parser.add_argument("--after", type=float, default=15.0, help="seconds of load after it is back")
    parser.add_argument("--rate", type=float, default=100.0, help="messages per second, per engine")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--open-time", default="30s")
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--max-redeliver", type=int, default=3)
    parser.add_argument("--backoff", default="2s", help="fixed backoff between attempts")
    args = parser.parse_args(argv)

    breaker = {
        "window": args.window,
        "threshold": args.threshold,
        "openTime": args.open_time,
        "probes": args.probes,
    }
    retry = {"maxRedeliverCount": args.max_redeliver, "backoff": {"type": "fixed", "delay": args.backoff}}
    workdir = work_dir(f"bench-outage-{os.getpid()}")
    kafka = KafkaBroker(name=f"kafka-bench-outage-{os.getpid()}", log_level="WARN")
    kafka.start()
    spark = None
    try:
        spark = bench_session("local[2]")
        bootstrap = kafka.bootstrap_servers

        def topics() -> dict[str, str]:
            names = {role: unique(role) for role in ("source", "retry", "dlq", "output")}
            create_topics(bootstrap, names.values(), 1)
            return names

        run = OutageRun(
            bootstrap=bootstrap,
            make_topics=topics,
            workdir=workdir,
            outage_s=args.outage,
            before_s=args.before,
            after_s=args.after,
            rate=args.rate,
            breaker=breaker,
            retry=retry,
            drain_timeout_s=300.0,
            log=log,
        )
        log(f"{args.rate:.0f} messages/s per engine, outage {args.outage:.0f}s")
        sides, recovered_at = run.run(spark)
        table = side_by_side(sides, recovered_at, args.outage, run.produced)
        print(table)
        result: dict[str, Any] = {
            "parameters": {**vars(args), "messages": run.produced, "breaker": breaker, "retry": retry},
            "recovered_at_s": round(recovered_at, 1),
            "sides": [side.figures(recovered_at) for side in sides],
            "transitions": [
                {"at_s": round(at, 1), "state": state, "reason": reason}
                for at, state, reason in sides[0].transitions
            ],
            "open_batches": len(sides[0].open_batches),
            "open_batches_reading_or_routing": sum(
                1 for read, routed in sides[0].open_batches if read or routed
            ),
            "table": table.splitlines(),
            "machine": machine(),
            "versions": software_versions(),
        }
        log(f"wrote {write_json(RESULTS, 'outage', result)}")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        kafka.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
