"""``dlq-engine``: run a DeadLetterPolicy as a Spark Structured Streaming job.

    dlq-engine run -f policy.yaml [--master local[2]] [--checkpoint DIR] [--once]

``-f`` takes the very YAML a user applies to Kubernetes. A bad file gets one line per problem,
naming the field and line, and exit status 2. Exit status: 0 clean stop, 1 the query failed,
2 bad policy or processor, 3 the ``stop`` strategy stopped the job, 4 the error window did.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dlq_engine.model.documents import PolicyFileError, load_policy_file

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlq-engine", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a policy's routing job")
    run.add_argument("-f", "--file", required=True, help="the DeadLetterPolicy YAML")
    run.add_argument("--master", help="Spark master, e.g. local[2] (default: from spark-submit)")
    run.add_argument("--checkpoint", help="checkpoint folder (default: spec.spark.checkpointLocation)")
    run.add_argument("--once", action="store_true", help="process what is available, then exit")
    run.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")
    run.add_argument(
        "--kafka-client-dir",
        default=None,
        help="Kafka client properties, one file each (default: the mounted "
        "broker.secretRef at /etc/spark-dlq/kafka-client, if present)",
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
    from dlq_engine.job.pipeline import KAFKA_CLIENT_DIR, RunOptions, client_properties
    from dlq_engine.job.preflight import PreflightError, check_topics, engine_class
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
        metrics = EngineMetrics(policy.qualified_name)
        metrics.serve(args.metrics_port)
    spark = build_session(policy, master=args.master)
    try:
        try:
            engine_class(spark, JVM_DELAY_STAGE)
            check_topics(spark, policy, client_properties(options.kafka_client_dir))
        except PreflightError as error:
            print(f"dlq-engine: {error}", file=sys.stderr)
            return 1
        run = Run(spark, policy, options, metrics)
        install_sigterm(run)
        run.start()
        status = run.wait()
        print(f"dlq-engine: {run.totals.summary()}", file=sys.stderr if status else sys.stdout)
        return status
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
