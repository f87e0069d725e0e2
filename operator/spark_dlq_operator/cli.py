"""``dlq-operator``: the command line of the spark-dlq operator.

    dlq-operator run (--namespace NS ... | --all-namespaces) [--spark-image IMAGE] ...

Every flag has an environment variable (``SPARK_DLQ_<FLAG>``, e.g. ``SPARK_DLQ_SPARK_IMAGE``)
so a Helm chart can configure the operator either way; a flag given on the command line wins.
The flags become one ``OperatorConfig``; nothing else is read from the environment later.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from dlq_engine.model.policy import PROVISIONERS
from dlq_engine.release import version_line, with_extra
from spark_dlq_operator.config import OperatorConfig, client_properties

ENV_PREFIX = "SPARK_DLQ_"
#: Every flag's default: the configuration's own (config.py is their one home; the chart's
#: values.yaml is checked against them by tests/unit/test_operator_cli.py).
DEFAULTS: Final = OperatorConfig()
T = TypeVar("T")


def _env(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(ENV_PREFIX + name)
    return value if value not in (None, "") else None


def _typed(kind: Callable[[str], T], name: str) -> Callable[[str], T]:
    """An argparse ``type`` that names the environment variable too: argparse converts a string
    default with ``type`` (and fails cleanly), but never checks it against ``choices``."""

    def convert(value: str) -> T:
        try:
            return kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a valid {getattr(kind, '__name__', 'value')} "
                f"(from the flag or ${ENV_PREFIX}{name})"
            ) from None

    convert.__name__ = getattr(kind, "__name__", "value")
    return convert


def _one_of(choices: Sequence[str]) -> Callable[[str], str]:
    def choice(value: str) -> str:
        if value not in choices:
            raise ValueError(value)
        return value

    choice.__name__ = "choice: " + ", ".join(choices)
    return choice


def _lifetime(value: str) -> int:
    """Whole seconds, at least 10: kopf renews a keep-alive 5-10 s before it lapses."""
    seconds = int(value)
    if seconds < 10:
        raise ValueError(value)
    return seconds


_lifetime.__name__ = "number of seconds, at least 10"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _falsy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("0", "false", "no", "off")


def _parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    def env(name: str, default: str | None = None) -> str | None:
        return _env(name, environ) or default

    parser = argparse.ArgumentParser(prog="dlq-operator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=version_line("dlq-operator"))
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the operator")
    where = run.add_argument_group("what to watch")
    where.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=None,
        metavar="NS",
        help="watch this namespace (repeatable; env SPARK_DLQ_NAMESPACES, comma-separated)",
    )
    where.add_argument(
        "--all-namespaces",
        "-A",
        action="store_true",
        default=_truthy(env("ALL_NAMESPACES")),
        help="watch every namespace (env SPARK_DLQ_ALL_NAMESPACES=true)",
    )
    spark = run.add_argument_group("Spark defaults for policies")
    spark.add_argument(
        "--spark-image",
        default=env("SPARK_IMAGE", DEFAULTS.spark_image),
        help="engine image when spec.spark.image is empty (default %(default)s)",
    )
    spark.add_argument(
        "--spark-version",
        default=env("SPARK_VERSION", DEFAULTS.spark_version),
        help="spec.sparkVersion of SparkApplications (default %(default)s)",
    )
    spark.add_argument(
        "--checkpoint-base",
        default=env("CHECKPOINT_BASE", DEFAULTS.checkpoint_base),
        help="checkpoints go to <base>/<namespace>/<name> when spec.spark.checkpointLocation "
        "is empty; a filesystem every Spark pod shares, e.g. s3a://bucket/dlq "
        "(default %(default)s)",
    )
    spark.add_argument(
        "--checkpoint-claim",
        default=env("CHECKPOINT_CLAIM"),
        metavar="PVC",
        help="a PersistentVolumeClaim in each policy's namespace, mounted read-write at the "
        "checkpoint base in the driver and the executors (a shared volume instead of an object "
        "store); env SPARK_DLQ_CHECKPOINT_CLAIM",
    )
    spark.add_argument(
        "--spark-service-account",
        default=env("SPARK_SERVICE_ACCOUNT", DEFAULTS.spark_service_account),
        metavar="NAME",
        help="one existing service account the Spark pods of every policy run as (shared: "
        "weaker); default: a service account per policy, made by the operator "
        "(env SPARK_DLQ_SPARK_SERVICE_ACCOUNT)",
    )
    spark.add_argument(
        "--spark-driver-cluster-role",
        default=env("SPARK_DRIVER_CLUSTER_ROLE", DEFAULTS.spark_driver_cluster_role),
        metavar="NAME",
        help="the ClusterRole with what a Spark driver needs for its executors, bound to the "
        "Spark pods' service account in each policy's namespace (the operator needs the bind "
        "verb on it; default %(default)s)",
    )
    spark.add_argument(
        "--no-spark-network-policy",
        dest="spark_network_policy",
        action="store_false",
        default=not _falsy(env("SPARK_NETWORK_POLICY")),
        help="no NetworkPolicy per Spark application: every SparkApplication excludes Spark's "
        "NetworkPolicyFeatureStep, so the spark-operator needs no right on NetworkPolicies "
        "(default: Spark makes one; env SPARK_DLQ_SPARK_NETWORK_POLICY=false)",
    )
    spark.add_argument(
        "--spark-job-namespaces",
        default=env("SPARK_JOB_NAMESPACES", ""),
        metavar="NS,NS",
        help="the namespaces the spark-operator watches (its spark.jobNamespaces), so a policy "
        "elsewhere is told why its job never starts; empty: not known "
        "(env SPARK_DLQ_SPARK_JOB_NAMESPACES)",
    )
    spark.add_argument(
        "--spark-operator-timeout",
        type=_typed(float, "SPARK_OPERATOR_TIMEOUT"),
        default=env("SPARK_OPERATOR_TIMEOUT", str(DEFAULTS.spark_operator_timeout)),
        help="seconds a new SparkApplication may go without a state before the policy says the "
        "spark-operator may not watch its namespace (default %(default)s)",
    )
    spark.add_argument(
        "--restart-backoff-cap",
        type=_typed(float, "RESTART_BACKOFF_CAP"),
        default=env("RESTART_BACKOFF_CAP", str(DEFAULTS.restart_backoff_cap)),
        help="longest wait, in seconds after its last submission, before a failed Spark "
        "application is resubmitted (default %(default)s)",
    )
    spark.add_argument(
        "--stall-timeout",
        type=_typed(float, "STALL_TIMEOUT"),
        default=env("STALL_TIMEOUT", str(DEFAULTS.stall_timeout)),
        help="seconds a running driver may report no progress of its query before its Spark "
        "application is resubmitted; 0: never (default %(default)s)",
    )
    spark.add_argument(
        "--pending-timeout",
        type=_typed(float, "PENDING_TIMEOUT"),
        default=env("PENDING_TIMEOUT", str(DEFAULTS.pending_timeout)),
        help="seconds a Spark application may wait for a running driver after its submission "
        "before the policy reports why (the driver pod's reason) (default %(default)s)",
    )
    topics = run.add_argument_group("topics")
    topics.add_argument(
        "--provisioner",
        type=_typed(_one_of(PROVISIONERS), "PROVISIONER"),
        metavar="{" + ",".join(PROVISIONERS) + "}",
        default=env("PROVISIONER", DEFAULTS.provisioner),
        help="how topics are provisioned for policies that say auto (default %(default)s)",
    )
    topics.add_argument(
        "--kafka-config",
        default=env("KAFKA_CONFIG"),
        metavar="FILE",
        help="librdkafka key=value lines for the operator's own admin clients (its credentials) "
        "for the brokers --kafka-config-brokers names, while no DeadLetterPolicyClass exists (a "
        "class names the operator's credentials for its brokers); env SPARK_DLQ_KAFKA_CONFIG",
    )
    topics.add_argument(
        "--kafka-config-brokers",
        action="append",
        default=None,
        metavar="BOOTSTRAP",
        help="the bootstrap servers (host:port,...) of a broker --kafka-config is for (repeatable; env "
        "SPARK_DLQ_KAFKA_CONFIG_BROKERS, separated by ';'): the built-in class lists these brokers "
        "only, and the operator sends its credentials to no other",
    )
    ops = run.add_argument_group("running")
    ops.add_argument(
        "--liveness",
        default=env("LIVENESS"),
        metavar="URL",
        help="kopf liveness endpoint, e.g. http://0.0.0.0:8080/healthz",
    )
    ops.add_argument(
        "--metrics-port",
        type=_typed(int, "METRICS_PORT"),
        default=env("METRICS_PORT", str(DEFAULTS.metrics_port)),
        help="Prometheus metrics port, 0 for none (default %(default)s)",
    )
    peering = ops.add_mutually_exclusive_group()
    peering.add_argument(
        "--peering",
        default=env("PEERING"),
        metavar="NAME",
        help="run in this kopf peering (several replicas; needs kopf's peering CRDs)",
    )
    peering.add_argument("--standalone", action="store_true", help="no peering (the default)")
    ops.add_argument(
        "--priority",
        type=_typed(int, "PRIORITY"),
        default=env("PRIORITY", str(DEFAULTS.priority)),
        help="this replica's priority in the peering (default %(default)s)",
    )
    ops.add_argument(
        "--peering-lifetime",
        type=_typed(_lifetime, "PEERING_LIFETIME"),
        default=env("PEERING_LIFETIME", str(DEFAULTS.peering_lifetime)),
        help="seconds this replica's peering keep-alive stays valid: a killed active replica is "
        "taken over within this (default %(default)s)",
    )
    ops.add_argument(
        "--operator-namespace",
        default=env("OPERATOR_NAMESPACE"),
        metavar="NS",
        help="the operator's own namespace, where the Secrets classes name (operatorSecretRef) are "
        "read (default: the pod's own namespace; env SPARK_DLQ_OPERATOR_NAMESPACE)",
    )
    ops.add_argument(
        "--kubeconfig",
        default=env("KUBECONFIG"),
        help="kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)",
    )
    ops.add_argument(
        "--resync-interval",
        type=_typed(float, "RESYNC_INTERVAL"),
        default=env("RESYNC_INTERVAL", str(DEFAULTS.resync_interval)),
        help="seconds between drift-repairing passes over all policies (default %(default)s)",
    )
    ops.add_argument(
        "--finalizer-timeout",
        type=_typed(float, "FINALIZER_TIMEOUT"),
        default=env("FINALIZER_TIMEOUT", str(DEFAULTS.finalizer_timeout)),
        help="seconds a deleted policy's finalizer tries to delete topics (default %(default)s)",
    )
    ops.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    return parser


def _kafka_config(path: str | None) -> tuple[tuple[str, str], ...]:
    if not path:
        return ()
    return tuple(client_properties(Path(path).read_text(encoding="utf-8")).items())


def config_from_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> OperatorConfig:
    """The OperatorConfig that ``dlq-operator run ...`` describes (flags, then environment)."""
    return _parse(argv, os.environ if environ is None else environ)[0]


def _parse(
    argv: Sequence[str] | None, environ: Mapping[str, str]
) -> tuple[OperatorConfig, argparse.Namespace]:
    parser = _parser(environ)
    args = parser.parse_args(argv)
    namespaces = args.namespace
    if namespaces is None:
        namespaces = [n.strip() for n in (_env("NAMESPACES", environ) or "").split(",") if n.strip()]
    if args.all_namespaces and namespaces:
        parser.error("give either --namespace or --all-namespaces, not both")
    if not args.all_namespaces and not namespaces:
        parser.error("give --namespace NS (repeatable) or --all-namespaces")
    brokers = args.kafka_config_brokers
    if brokers is None:
        brokers = [b.strip() for b in (_env("KAFKA_CONFIG_BROKERS", environ) or "").split(";") if b.strip()]
    if args.kafka_config and not brokers:
        parser.error(
            "--kafka-config: name the brokers these credentials are for with --kafka-config-brokers "
            "(the operator sends its credentials to no other broker)"
        )
    config = OperatorConfig(
        namespaces=tuple(namespaces),
        all_namespaces=args.all_namespaces,
        spark_image=args.spark_image,
        spark_version=args.spark_version,
        checkpoint_base=args.checkpoint_base,
        checkpoint_claim=args.checkpoint_claim or None,
        spark_service_account=args.spark_service_account,
        spark_driver_cluster_role=args.spark_driver_cluster_role,
        spark_network_policy=args.spark_network_policy,
        spark_job_namespaces=tuple(n.strip() for n in args.spark_job_namespaces.split(",") if n.strip()),
        spark_operator_timeout=args.spark_operator_timeout,
        restart_backoff_cap=args.restart_backoff_cap,
        stall_timeout=args.stall_timeout,
        pending_timeout=args.pending_timeout,
        provisioner=args.provisioner,
        liveness=args.liveness,
        metrics_port=args.metrics_port,
        peering=None if args.standalone else args.peering,
        priority=args.priority,
        peering_lifetime=args.peering_lifetime,
        kubeconfig=args.kubeconfig,
        kafka_config=_kafka_config(args.kafka_config),
        kafka_config_brokers=tuple(brokers),
        operator_namespace=args.operator_namespace or None,
        resync_interval=args.resync_interval,
        finalizer_timeout=args.finalizer_timeout,
    )
    return config, args


def _load_runner() -> Callable[[OperatorConfig], Coroutine[Any, Any, None]]:
    """kopf and the Kubernetes and Kafka clients: without the operator extra, one line naming it."""
    from spark_dlq_operator.runner import run

    return run


def main(argv: Sequence[str] | None = None) -> int:
    config, args = _parse(argv, os.environ)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    run = with_extra("operator", "dlq-operator", _load_runner)
    asyncio.run(run(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
