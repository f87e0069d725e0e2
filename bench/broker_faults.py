"""Broker faults, the long run: the replicated-cluster test's four SIGKILLs (the leaders of the
source, retry and dead-letter topics, then the active controller) and then a rolling restart of
every node, under one running engine. Writes ``bench/results/broker_faults.json``.

    python -m bench.broker_faults [--n 60000] [--rate 250]

The CI test (``tests/integration/engine/test_broker_faults.py``) is the same run without the
rolling restart. See ``spark_dlq_devtools.broker_faults`` for how a run works.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys

from bench.common import RESULTS, log, machine, write_json
from spark_dlq_devtools.broker_faults import BrokerFaultRun
from spark_dlq_devtools.kafka_cluster import KafkaCluster, create_replicated_topics
from spark_dlq_devtools.paths import work_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.broker_faults", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=60_000)
    p.add_argument("--rate", type=float, default=250.0, help="messages/s produced during the run")
    p.add_argument("--no-rolling-restart", action="store_true")
    args = p.parse_args(argv)

    workdir = work_dir(f"broker-faults-{os.getpid()}")
    cluster = KafkaCluster(name=f"kafka-cluster-bench-{os.getpid()}")
    cluster.start()
    try:
        names = {k: f"faults-{k}" for k in ("source", "retry", "dlq", "output")}
        create_replicated_topics(cluster.bootstrap_servers, names.values(), partitions=2)
        run = BrokerFaultRun(
            cluster,
            names,
            workdir,
            n=args.n,
            rate=args.rate,
            rolling_restart=not args.no_rolling_restart,
            log=log,
        )
        report = run.run()
    finally:
        cluster.remove()
        shutil.rmtree(workdir, ignore_errors=True)
    result = {
        "command": "python -m bench.broker_faults " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        **report.as_dict(),
    }
    write_json(RESULTS, "broker_faults", result)
    print(f"lost {report.lost}, engine exits {len(report.engine_exits)}, {report.seconds:.0f} s")
    return 0 if report.lost == 0 and not report.engine_exits else 1


if __name__ == "__main__":
    sys.exit(main())
