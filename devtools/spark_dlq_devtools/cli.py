"""``spark-dlq-dev``: the development tools from the command line.

spark-dlq-dev demo [--orders N] [--seed S] [--monitor] [--dashboard PNG] [--rate R]
                                                  the local end-to-end demo
spark-dlq-dev cluster [--no-kafka] [--ready-file F]   a one-node Kubernetes cluster here
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark-dlq-dev", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the local end-to-end demo")
    demo.add_argument("--orders", type=int, default=400, help="orders in the first wave (default 400)")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--monitor", action="store_true", help="also run a Prometheus scraping the operator and the engine"
    )
    demo.add_argument(
        "--dashboard", type=Path, help="at the end, draw the chart's Grafana dashboard from it into this PNG"
    )
    demo.add_argument("--rate", type=float, default=0, help="orders per second (default: all at once)")
    cluster = commands.add_parser("cluster", help="start a one-node cluster here; Ctrl-C stops it")
    cluster.add_argument("--no-kafka", action="store_true", help="no Kafka broker for the pods")
    cluster.add_argument(
        "--wait-for-node",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another node on this machine to stop (default: fail at once)",
    )
    cluster.add_argument(
        "--ready-file", type=Path, help="write the kubeconfig path and addresses here as JSON"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        from spark_dlq_devtools.demo import main as demo_main

        return demo_main(
            orders=args.orders, seed=args.seed, monitor=args.monitor, dashboard=args.dashboard, rate=args.rate
        )
    if args.command == "cluster":
        from spark_dlq_devtools.cluster import main as cluster_main

        return cluster_main(
            kafka=not args.no_kafka, lock_timeout=args.wait_for_node, ready_file=args.ready_file
        )
    return 2


if __name__ == "__main__":
    sys.exit(main())
