"""``dlq-engine``: run a DeadLetterPolicy as a Spark Structured Streaming job.

    dlq-engine run -f policy.yaml [--master local[2]] [--checkpoint DIR] [--once] [--create-topics]

``-f`` takes the very YAML a user applies to Kubernetes. A bad file gets one line per problem,
naming the field and line, and exit status 2. Exit status: 0 clean stop, 1 the query failed,
2 bad policy or processor, 3 the ``stop`` strategy stopped the job, 4 the error window did.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from dlq_engine.exits import EXIT_BAD_INPUT, EXIT_FAILED
from dlq_engine.model.documents import PolicyFileError, load_policy_file
from dlq_engine.model.policy import KAFKA_CLIENT_DIR

#: Default of ``--metrics-linger``: about one Prometheus scrape interval.
METRICS_LINGER_S = 20.0


def _env_int(name: str) -> int | None:
    import os

    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlq-engine", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a policy's routing job")
    run.add_argument("-f", "--file", required=True, help="the DeadLetterPolicy YAML")
    run.add_argument("--master", help="Spark master, e.g. local[2] (default: from spark-submit)")
    run.add_argument("--checkpoint", help="checkpoint folder (default: spec.spark.checkpointLocation)")
    run.add_argument("--once", action="store_true", help="process what is available, then exit")
    run.add_argument(
        "--create-topics",
        action="store_true",
        help="create the retry and dead-letter topics if missing, as the operator would from "
        "spec.topics (for a run without the operator; needs CREATE on the broker)",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        default=_env_int("SPARK_DLQ_METRICS_PORT"),
        help="serve Prometheus metrics on this port (default: $SPARK_DLQ_METRICS_PORT, else none)",
    )
    run.add_argument(
        "--metrics-linger",
        type=float,
        default=METRICS_LINGER_S,
        help="when the query failed, keep serving metrics this many seconds before exiting, so "
        "that a scrape sees the failure (default %(default)s)",
    )
    run.add_argument(
        "--kafka-client-dir",
        default=None,
        help="Kafka client properties, one file each (default: the mounted "
        f"broker.secretRef at {KAFKA_CLIENT_DIR}, if present)",
    )
    check = commands.add_parser("check", help="validate a policy file and print it normalised")
    check.add_argument("-f", "--file", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        policy = load_policy_file(args.file)
    except PolicyFileError as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.command == "check":
        import yaml

        from dlq_engine.model.policy import to_document

        print(yaml.safe_dump(to_document(policy), sort_keys=False), end="")
        return 0
    return _run(policy, args)


def _run(policy: object, args: argparse.Namespace) -> int:
    from dlq_engine.job.delay import JVM_DELAY_STAGE
    from dlq_engine.job.metrics import EngineMetrics
    from dlq_engine.job.pipeline import RunOptions, client_properties
    from dlq_engine.job.preflight import (
        PreflightError,
        check_table,
        check_topics,
        create_topics,
        engine_class,
    )
    from dlq_engine.job.processors import ProcessorLoadError, load_processor
    from dlq_engine.job.runner import Run, install_sigterm
    from dlq_engine.job.session import build_session
    from dlq_engine.model.policy import DeadLetterPolicy

    assert isinstance(policy, DeadLetterPolicy)
    location = args.checkpoint or policy.spark.checkpoint_location
    if not location:
        print(
            "dlq-engine: no checkpoint: give --checkpoint or spec.spark.checkpointLocation", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    try:
        load_processor(policy.processor.entrypoint)
    except ProcessorLoadError as error:
        print(f"dlq-engine: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = RunOptions(
        checkpoint=location, once=args.once, kafka_client_dir=args.kafka_client_dir or KAFKA_CLIENT_DIR
    )
    metrics = None
    if args.metrics_port:
        metrics = EngineMetrics(policy)
        metrics.serve(args.metrics_port)
    spark = build_session(policy, master=args.master)
    try:
        try:
            engine_class(spark, JVM_DELAY_STAGE)
            check_table(spark, policy)
            client = client_properties(options.kafka_client_dir)
            if args.create_topics:
                for line in create_topics(spark, policy, client):
                    print(f"dlq-engine: {line}")
            check_topics(spark, policy, client)
        except PreflightError as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            return EXIT_FAILED
        run = Run(spark, policy, options, metrics)
        install_sigterm(run)
        if metrics is not None:
            metrics.watch(spark, location, client_properties(options.kafka_client_dir))
        run.start()
        status = run.wait()
        print(f"dlq-engine: {run.totals.summary()}", file=sys.stderr if status else sys.stdout)
        if metrics is not None and status == EXIT_FAILED and args.metrics_linger > 0:
            time.sleep(args.metrics_linger)
        return status
    finally:
        if metrics is not None:
            metrics.close()
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
