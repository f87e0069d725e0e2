"""The crash soak: the engine killed with SIGKILL 20 times (and the broker restarted once) while
300,000 messages flow, then every message audited. Writes ``bench/results/soak.json``.

    bench/soak.sh [--n 300000] [--kills 20] [--rate 800]

The CI test (``tests/integration/engine/test_crashes.py``) is the same run, shorter: one kill
in each phase and one broker restart. See ``spark_dlq_devtools.chaos`` for how a run works.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys

from bench.common import RESULTS, create_topics, log, machine, unique, write_json
from spark_dlq_devtools.chaos import CrashRun
from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.paths import work_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/soak.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=300_000)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--rate", type=float, default=800.0, help="messages/s produced during the run")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--no-broker-restart", action="store_true")
    args = p.parse_args(argv)

    workdir = work_dir(f"soak-{os.getpid()}")
    broker = KafkaBroker(name=f"kafka-soak-{os.getpid()}", heap="1g", log_level="WARN")
    broker.start()
    try:
        names = {k: unique(f"soak-{k}") for k in ("source", "retry", "dlq", "output")}
        create_topics(broker.bootstrap_servers, names.values(), args.partitions)
        run = CrashRun(
            broker.bootstrap_servers,
            names,
            workdir,
            n=args.n,
            kills=args.kills,
            rate=args.rate,
            seed=args.seed,
            log=log,
            restart_broker=None if args.no_broker_restart else broker.restart,
        )
        report = run.run(settle_timeout=1200)
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(broker.root, ignore_errors=True)
    result = {
        "command": "bench/soak.sh " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        **report.as_dict(),
    }
    path = write_json(RESULTS, "soak", result)
    audit = report.audit
    print(
        f"soak: {report.kills} kills, {report.broker_restarts} broker restart(s), {audit.produced} "
        f"messages: missing {audit.lost}, misplaced {len(audit.misplaced)}, duplicates "
        f"{audit.duplicates} ({result['duplicates_per_crash']} per crash), {report.seconds:.0f} s -> {path}"
    )
    return 0 if audit.lost == 0 and not audit.misplaced else 1


if __name__ == "__main__":
    raise SystemExit(main())
