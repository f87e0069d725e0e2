"""The operator's own configuration: what the command line and the environment decide.

Everything a policy does not say comes from here (the default Spark image, the checkpoint base,
the Spark version, the drivers' ClusterRole), along with how the operator itself runs
(watched namespaces, peering, probes, timings). It is one frozen value built once at start-up
and passed down explicitly, so the pure render functions see the same defaults as the rest of
the operator and tests can build one with short timings. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dlq_engine.model.policy import Provisioner

#: The Spark version the engine image ships (scripts/setup/versions.env keeps SPARK_VERSION in
#: step); written into every SparkApplication's ``spec.sparkVersion``.
SPARK_VERSION: Final = "4.2.0"
DEFAULT_SPARK_IMAGE: Final = "spark-dlq:0.1.0"
DEFAULT_CHECKPOINT_BASE: Final = "/var/lib/spark-dlq/checkpoints"
#: The ClusterRole (the chart's) with what a Spark driver needs for its executors, which the
#: operator binds to each policy's service account.
DEFAULT_DRIVER_CLUSTER_ROLE: Final = "spark-dlq-spark-driver"
DEFAULT_METRICS_PORT: Final = 9090


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """How one operator process runs. Durations are in seconds."""

    #: Namespaces to watch; empty together with ``all_namespaces`` False means none (refused by
    #: the CLI).
    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    spark_image: str = DEFAULT_SPARK_IMAGE
    spark_version: str = SPARK_VERSION
    checkpoint_base: str = DEFAULT_CHECKPOINT_BASE
    #: A PersistentVolumeClaim (in each policy's namespace) mounted read-write at
    #: ``checkpoint_base`` in the driver and the executors, for checkpoints on a shared volume
    #: rather than an object store; None when ``checkpoint_base`` is a URL (s3a://, ...).
    checkpoint_claim: str | None = None
    #: One existing service account every policy's Spark pods run as (shared: each driver may
    #: write every Lease of its namespace); empty for a service account per policy, which the
    #: operator makes.
    spark_service_account: str = ""
    #: The ClusterRole bound to the Spark pods' service account in the policy's namespace.
    spark_driver_cluster_role: str = DEFAULT_DRIVER_CLUSTER_ROLE
    #: Spark's NetworkPolicy for each application (from Spark 4.2 ``spark-submit`` makes one:
    #: the executors take ingress only from their own application's pods). False for a platform
    #: that cannot let the spark-operator's controller make them: every SparkApplication then
    #: excludes the step that does (``render.NETWORK_POLICY_STEP``).
    spark_network_policy: bool = True
    #: The namespaces the spark-operator watches (its chart's ``spark.jobNamespaces``), as the
    #: platform team declares them; empty when not declared (then only the silence of a new
    #: SparkApplication hints at it). A policy in another namespace is told at once.
    spark_job_namespaces: tuple[str, ...] = ()
    #: A SparkApplication that has no state this long after it was created is reported: the
    #: spark-operator may not watch its namespace, or may not run.
    spark_operator_timeout: float = 120.0
    #: The spark-operator's restart policy (``Always``): seconds per submission so far that it
    #: waits after a failed run, and after a failed submission.
    restart_interval: int = 10
    submission_retry_interval: int = 20
    #: Its wait grows with every submission over the application's life; past this many seconds
    #: after the last submission, the operator resubmits a failed application itself (which
    #: resets the spark-operator's counters).
    restart_backoff_cap: float = 300.0
    #: The supervisor: a RUNNING driver whose heartbeat reports no progress of its query for
    #: longer than this is resubmitted; 0 turns that off.
    stall_timeout: float = 300.0
    #: An application stuck without a running driver (SUBMITTED, PENDING_RERUN) this
    #: long after its last submission gets JobRunning DriverPending naming the pod's reason.
    pending_timeout: float = 300.0
    #: Overrides ``auto`` in every policy's ``spec.topics.provisioner`` (an explicit admin or
    #: strimzi in a policy still wins).
    provisioner: Provisioner = "auto"
    #: kopf's liveness endpoint, e.g. ``http://0.0.0.0:8080/healthz``; None for none.
    liveness: str | None = None
    #: Prometheus metrics port; 0 for none.
    metrics_port: int = DEFAULT_METRICS_PORT
    #: A named kopf peering (several replicas) or None for standalone.
    peering: str | None = None
    priority: int = 0
    #: Seconds a replica's keep-alive in the peering object stays valid. kopf renews it 5-10 s
    #: before it lapses (whatever the lifetime), and a standby resumes once the active's has
    #: lapsed: the takeover after a crash takes at most this long.
    peering_lifetime: int = 15
    #: A kubeconfig file; None means in-cluster, then the usual kubeconfig locations.
    kubeconfig: str | None = None
    #: Extra librdkafka settings for the operator's Kafka admin clients (``key=value`` lines):
    #: the operator's own credentials, never the policies' secrets. Used only for the brokers in
    #: ``kafka_config_brokers``, and only while no DeadLetterPolicyClass exists (a class names the
    #: operator's credentials for its own brokers).
    kafka_config: tuple[tuple[str, str], ...] = ()
    #: The bootstrap servers of the brokers ``kafka_config`` is for: they become the built-in
    #: class's broker list (policies governed by it may name only these).
    kafka_config_brokers: tuple[str, ...] = ()
    #: The operator's own namespace, where the Secrets a class's ``operatorSecretRef`` names live;
    #: None: unknown (in-cluster it is read from the service account's mount).
    operator_namespace: str | None = None

    #: Every policy is reconciled again this often, which repairs drift (a deleted topic, a
    #: deleted ConfigMap). A deleted SparkApplication is recreated at once.
    resync_interval: float = 60.0
    #: How long a finalizer keeps trying to delete topics before it gives up with an event.
    finalizer_timeout: float = 300.0
    #: One Kafka admin request (metadata, create, delete), or one call to Pulsar's admin REST
    #: API, may take this long.
    kafka_timeout: float = 10.0
    #: Retry delays: broker unreachable (grows up to 8x), waiting for Strimzi, other topic problems.
    broker_retry_delay: float = 10.0
    strimzi_poll_delay: float = 5.0
    topics_retry_delay: float = 30.0
    #: kopf's watch requests: the server ends each after ``server_timeout``; the client gives up
    #: a little later.
    server_timeout: float = 300.0
    client_timeout: float = 330.0
    #: How long kopf waits for its own patch of a policy to come back on the watch before it
    #: acts on the events before it (kopf's default, 5 s, is short for a busy operator).
    consistency_timeout: float = 30.0
    #: How many policies one resync round reconciles at a time.
    resync_concurrency: int = 8


def client_properties(text: str) -> dict[str, str]:
    """librdkafka ``key=value`` lines (``#`` comments and blank lines skipped): the operator's
    ``--kafka-config`` file, or the Secret a class's ``operatorSecretRef`` names."""
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            pairs[key.strip()] = value.strip()
    return pairs
