"""``spark-dlq-dev``: the development tools from the command line.

spark-dlq-dev demo [--broker kafka|pulsar] [--orders N] [--seed S] [--monitor] [--dashboard PNG] [--rate R]
                                                  the local end-to-end demo
spark-dlq-dev cluster [--no-kafka] [--ready-file F]   a one-node Kubernetes cluster here
spark-dlq-dev kafka [--port P] [--topic NAME:PARTITIONS ...]
                                                  a bare Kafka broker here, in the foreground
spark-dlq-dev pulsar [--port P] [--web-port W] [--topic NAME:PARTITIONS ...]
                                                  a bare standalone Pulsar here, in the foreground
spark-dlq-dev env                                 shell exports for a local dlq-engine run
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
    demo.add_argument(
        "--broker",
        choices=("kafka", "pulsar"),
        default="kafka",
        help="the broker the orders go through, with its example policy (default kafka)",
    )
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
    kafka = commands.add_parser("kafka", help="start a bare Kafka broker here; Ctrl-C stops it")
    kafka.add_argument("--port", type=int, default=9092, help="listen on 127.0.0.1:PORT (default 9092)")
    kafka.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME:PARTITIONS",
        help="create this topic once the broker is up (repeatable)",
    )
    pulsar = commands.add_parser("pulsar", help="start a bare standalone Pulsar here; Ctrl-C stops it")
    pulsar.add_argument("--port", type=int, default=6650, help="the broker on 127.0.0.1:PORT (default 6650)")
    pulsar.add_argument(
        "--web-port", type=int, default=8080, help="the admin REST API on 127.0.0.1:PORT (default 8080)"
    )
    pulsar.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME:PARTITIONS",
        help="create this partitioned topic in public/default once the broker is up (repeatable)",
    )
    commands.add_parser(
        "env",
        help="print the exports a local dlq-engine run needs (the Kafka connector, Delta, Pulsar client and engine jars); "
        'use as eval "$(spark-dlq-dev env)"',
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "demo":
        from spark_dlq_devtools.demo import main as demo_main

        return demo_main(
            orders=args.orders,
            seed=args.seed,
            monitor=args.monitor,
            dashboard=args.dashboard,
            rate=args.rate,
            broker=args.broker,
        )
    if args.command == "cluster":
        from spark_dlq_devtools.cluster import main as cluster_main

        return cluster_main(
            kafka=not args.no_kafka, lock_timeout=args.wait_for_node, ready_file=args.ready_file
        )
    if args.command == "kafka":
        return _kafka(args.port, args.topic)
    if args.command == "pulsar":
        return _pulsar(args.port, args.web_port, args.topic)
    if args.command == "env":
        import shlex

        from spark_dlq_devtools.spark import submit_env

        env = submit_env({})
        for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS"):
            print(f"export {name}={shlex.quote(env[name])}")
        return 0
    return 2


def _topics(command: str, topics: Sequence[str]) -> list[tuple[str, int]] | None:
    """``NAME:PARTITIONS`` arguments; None (after saying why) when one is not."""
    wanted: list[tuple[str, int]] = []
    for topic in topics:
        name, _, count = topic.rpartition(":")
        if not name or not count.isdigit() or int(count) < 1:
            print(
                f"spark-dlq-dev {command}: --topic {topic!r}: expected NAME:PARTITIONS, e.g. orders:3",
                file=sys.stderr,
            )
            return None
        wanted.append((name, int(count)))
    return wanted


def _kafka(port: int, topics: Sequence[str]) -> int:
    import signal
    import threading

    from spark_dlq_devtools.kafka import KafkaBroker, create_topics

    wanted = _topics("kafka", topics)
    if wanted is None:
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    broker = KafkaBroker(name=f"kafka-{port}", port=port, log_level="WARN")
    try:
        broker.start()
        for name, partitions in wanted:
            create_topics(broker.bootstrap_servers, [name], partitions)
            print(f"topic {name!r}: {partitions} partitions")
        print(f"kafka: {broker.bootstrap_servers}; log {broker.log_path()}; Ctrl-C stops it", flush=True)
        stop.wait()
        return 0
    finally:
        broker.stop()


def _pulsar(port: int, web_port: int, topics: Sequence[str]) -> int:
    import signal
    import threading

    from spark_dlq_devtools.pulsar import PulsarBroker

    wanted = _topics("pulsar", topics)
    if wanted is None:
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    broker = PulsarBroker(name=f"pulsar-{port}", port=port, web_port=web_port, log_level="WARN")
    try:
        broker.start()
        for name, partitions in wanted:
            broker.create_topic(name, partitions)
            print(f"topic {name!r}: {partitions} partitions")
        print(
            f"pulsar: {broker.service_url}, admin {broker.admin_url}; log {broker.log_path()}; Ctrl-C stops it",
            flush=True,
        )
        stop.wait()
        return 0
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
