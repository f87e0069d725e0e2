"""The DeadLetterPolicy's types: every section as a frozen dataclass, its defaults, and the
closed sets of values (``Literal`` types, read by the parser and the CRD tests alike).

A policy is a value: the parser (``policy_parser``) builds one, the write-back
(``policy_spec``) turns one back into a spec. Each default is written here once, on the field
it belongs to; the parser reads it from here (``DEFAULTS``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

#: The least ``max.message.bytes`` a policy may give its retry or dead-letter topic: the Kafka
#: producer's ``batch.size``. Below it, kafka-clients 3.9 splits a refused batch into batches of
#: ``batch.size`` again, forever (KAFKA-8350), and the pipeline stalls.
MIN_MAX_MESSAGE_BYTES: Final = 16_384

API_VERSION: Final = "sparkdlq.io/v1alpha1"
KIND: Final = "DeadLetterPolicy"

StartingOffsets = Literal["earliest", "latest"]
ProcessorMode = Literal["message", "batch", "arrow"]
BackoffType = Literal["fixed", "exponential", "levels"]
DeadLetterStrategy = Literal["topic", "ignore", "stop"]
DeadLetterTableFormat = Literal["delta", "parquet"]
Provisioner = Literal["auto", "admin", "strimzi"]
#: Whose header names and encodings dead letters and retry records carry the failure's facts in
#: (``deadLetter.headerProfiles``; routing/headers.py writes them).
HeaderProfile = Literal["spark-dlq", "spring", "connect", "pulsar"]
OrderingMode = Literal["none", "key"]
OnDeadLetter = Literal["skip", "block"]
OnOverflow = Literal["deadLetter", "stop"]
#: The broker a policy's topics live on (``spec.broker.type``).
BrokerType = Literal["kafka", "pulsar"]
#: Each enum's values, for parsers, CLIs and the CRD test (tests/unit/test_crd_schema.py).
STARTING_OFFSETS: Final[tuple[StartingOffsets, ...]] = get_args(StartingOffsets)
PROCESSOR_MODES: Final[tuple[ProcessorMode, ...]] = get_args(ProcessorMode)
BACKOFF_TYPES: Final[tuple[BackoffType, ...]] = get_args(BackoffType)
DEAD_LETTER_STRATEGIES: Final[tuple[DeadLetterStrategy, ...]] = get_args(DeadLetterStrategy)
DEAD_LETTER_TABLE_FORMATS: Final[tuple[DeadLetterTableFormat, ...]] = get_args(DeadLetterTableFormat)
PROVISIONERS: Final[tuple[Provisioner, ...]] = get_args(Provisioner)
HEADER_PROFILES: Final[tuple[HeaderProfile, ...]] = get_args(HeaderProfile)
#: The engine reads its own ``dlq.*`` headers back (attempt, due time, origin), and the redrive,
#: the triage CLI and the dead-letter table read them from dead letters: every list includes it.
REQUIRED_HEADER_PROFILE: Final[HeaderProfile] = "spark-dlq"
DEFAULT_HEADER_PROFILES: Final[tuple[HeaderProfile, ...]] = (REQUIRED_HEADER_PROFILE,)
ORDERING_MODES: Final[tuple[OrderingMode, ...]] = get_args(OrderingMode)
ON_DEAD_LETTER: Final[tuple[OnDeadLetter, ...]] = get_args(OnDeadLetter)
ON_OVERFLOW: Final[tuple[OnOverflow, ...]] = get_args(OnOverflow)
BROKER_TYPES: Final[tuple[BrokerType, ...]] = get_args(BrokerType)

#: Where the SparkApplication mounts the Secret named by ``broker.secretRef`` and where the
#: engine reads it: one file per Kafka client property (``security.protocol``, ...).
KAFKA_CLIENT_DIR: Final = "/etc/spark-dlq/kafka-client"
#: The same on Pulsar: one file per key of ``dlq_engine.model.pulsar_client`` (token, ca.crt, ...).
PULSAR_CLIENT_DIR: Final = "/etc/spark-dlq/pulsar-client"

#: Kafka's own rule for topic names (kafka.common.internals.Topic).
KAFKA_TOPIC_PATTERN: Final = r"^[a-zA-Z0-9._-]+$"
KAFKA_TOPIC_MAX_LENGTH: Final = 249
#: The Pulsar topic names a policy may use: ``name`` (in ``public/default``),
#: ``tenant/namespace/name`` or ``persistent://tenant/namespace/name``, each part in Kafka's
#: characters. Only persistent topics: a non-persistent one keeps nothing for a restart to read,
#: and dead letters must be kept.
PULSAR_TOPIC_PATTERN: Final = r"^(persistent://)?([a-zA-Z0-9._-]+/[a-zA-Z0-9._-]+/)?[a-zA-Z0-9._-]+$"
PULSAR_DEFAULT_TENANT: Final = "public"
PULSAR_DEFAULT_NAMESPACE: Final = "default"
#: ``spec.broker.serviceUrl`` (binary protocol) and ``spec.broker.adminUrl`` (admin REST API).
PULSAR_SERVICE_URL_PATTERN: Final = r"^pulsar(\+ssl)?://[^\s/]+/?$"
PULSAR_ADMIN_URL_PATTERN: Final = r"^https?://[^\s]+$"
#: The subscription the operator creates on a Pulsar dead-letter topic: Pulsar deletes messages
#: that no durable subscription still holds (once retention allows), so dead letters nobody has
#: read yet stay for as long as this subscription does. Nothing ever reads through it.
PULSAR_KEEP_SUBSCRIPTION: Final = "spark-dlq-keep"
#: The longest ``deadLetter.table.path`` (the CRD's maxLength).
MAX_TABLE_PATH_LENGTH: Final = 4096

#: Default levels are not given: `type: levels` must name its own.
DEFAULT_MAX_REDELIVER_COUNT: Final = 16
#: ``processor.timeout`` when a policy gives none: a call that has not returned after it fails
#: with a TimeoutError and is retried (docs/engine.md, "The processor's time limit", says why
#: this value).
DEFAULT_PROCESSOR_TIMEOUT_MS: Final = 30_000


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem in a policy: the field path and what is wrong with it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class PolicyError(ValueError):
    """A policy that cannot be run. ``issues`` lists every problem found."""

    def __init__(self, issues: Sequence[Issue]) -> None:
        self.issues: tuple[Issue, ...] = tuple(issues)
        super().__init__("; ".join(str(i) for i in self.issues))


@dataclass(frozen=True, slots=True)
class Source:
    topic: str
    subscription: str
    starting_offsets: StartingOffsets = "latest"
    #: The most records one micro-batch reads from the source topic, and from the retry topic
    #: (Spark's maxOffsetsPerTrigger; 0: no limit). Keeps batches short while a backlog drains,
    #: e.g. after a restart.
    max_offsets_per_trigger: int = 0
    #: ``key``: the messages of one key (Kafka's record key, Pulsar's partition key) are handled
    #: in their source order, a retrying message holding the later ones of its key
    #: (``Ordering``); null keys stay unordered.
    ordering: OrderingMode = "none"


#: The defaults of ``spec.ordering`` (the CRD says the same).
DEFAULT_MAX_HELD_PER_KEY: Final = 1_000
DEFAULT_MAX_HELD_TOTAL: Final = 100_000
#: The ordering stage counts one key's held messages in a Java int.
MAX_HELD_PER_KEY: Final = 2**31 - 1
DEFAULT_MAX_HOLD_MS: Final = 3_600_000


@dataclass(frozen=True, slots=True)
class Ordering:
    """``spec.ordering``: how ``source.ordering: key`` holds later messages behind a retry."""

    #: ``skip``: a dead-lettered message releases the next one of its key; ``block``: its key
    #: stays held (its later messages wait, up to the bounds below).
    on_dead_letter: OnDeadLetter = "skip"
    #: The most messages held behind one key; the most held behind all keys together (shared
    #: evenly by the ordering stage's groups of keys); the longest one message is held.
    max_held_per_key: int = DEFAULT_MAX_HELD_PER_KEY
    max_held_total: int = DEFAULT_MAX_HELD_TOTAL
    max_hold_ms: int = DEFAULT_MAX_HOLD_MS
    #: What happens to a message beyond a bound: dead-lettered with reason
    #: ``ordering-overflow``, or the job stops naming the bound.
    on_overflow: OnOverflow = "deadLetter"


@dataclass(frozen=True, slots=True)
class SecretRef:
    name: str


@dataclass(frozen=True, slots=True)
class Broker:
    """``spec.broker``: a Kafka cluster (``bootstrap_servers``) or a Pulsar cluster
    (``service_url`` for clients, ``admin_url`` for the admin REST API); the other kind's
    fields stay empty (the parser refuses a mix)."""

    bootstrap_servers: str = ""
    secret_ref: SecretRef | None = None
    type: BrokerType = "kafka"
    service_url: str = ""
    admin_url: str = ""

    @property
    def address(self) -> str:
        """Where clients reach the broker, for messages: the bootstrap servers or service URL."""
        return self.service_url if self.type == "pulsar" else self.bootstrap_servers

    @property
    def client_dir(self) -> str:
        """Where the engine's pods find the ``secret_ref`` Secret's files."""
        return PULSAR_CLIENT_DIR if self.type == "pulsar" else KAFKA_CLIENT_DIR


@dataclass(frozen=True, slots=True)
class Processor:
    entrypoint: str
    mode: ProcessorMode = "message"
    #: Per-message time limit in milliseconds; 0 means none. A processor that overruns it
    #: fails that message with a ``TimeoutError`` (retried like any other failure).
    timeout_ms: int = DEFAULT_PROCESSOR_TIMEOUT_MS

    @property
    def module(self) -> str:
        return self.entrypoint.split(":", 1)[0]

    @property
    def function(self) -> str:
        return self.entrypoint.split(":", 1)[1]


@dataclass(frozen=True, slots=True)
class Output:
    topic: str = ""


@dataclass(frozen=True, slots=True)
class BackoffSpec:
    type: BackoffType = "exponential"
    delay_ms: int = 1_000
    multiplier: float = 2.0
    max_delay_ms: int = 600_000
    jitter: float = 0.0
    levels_ms: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RetryRule:
    """``retry.rules[i]``: failures of these error classes (or their subclasses) get their own
    redelivery limit and backoff."""

    errors: tuple[str, ...]
    max_redeliver_count: int
    backoff: BackoffSpec
    #: The rule's ``maxRetryDuration`` (the policy's when the rule gives none); 0: none.
    max_retry_duration_ms: int = 0


#: The defaults of ``retry.breaker`` (the CRD's descriptions say the same): Resilience4j's
#: window, threshold and half-open calls, a shorter open time (a probe costs a few calls).
DEFAULT_BREAKER_WINDOW: Final = 100
DEFAULT_BREAKER_THRESHOLD: Final = 0.5
DEFAULT_BREAKER_OPEN_MS: Final = 30_000
DEFAULT_BREAKER_PROBES: Final = 10
#: The bounds of ``retry.breaker.window`` and ``probes`` (the CRD says the same).
MAX_BREAKER_WINDOW: Final = 1_000_000
MAX_BREAKER_PROBES: Final = 10_000


@dataclass(frozen=True, slots=True)
class BreakerSpec:
    """``retry.breaker``: pause while the processor's downstream is down, probe, resume
    (``routing.breaker``; docs/engine.md, "The circuit breaker")."""

    #: Trips when ``threshold`` of the last ``window`` processor calls failed transiently.
    window: int = DEFAULT_BREAKER_WINDOW
    threshold: float = DEFAULT_BREAKER_THRESHOLD
    #: How long it stays open (nothing read, retries held) before it lets probes through.
    open_ms: int = DEFAULT_BREAKER_OPEN_MS
    #: Messages let through while half-open (per micro-batch from the source, per delay-stage
    #: task from the retries), and the calls that decide: closed again or open again.
    probes: int = DEFAULT_BREAKER_PROBES


@dataclass(frozen=True, slots=True)
class RetrySpec:
    max_redeliver_count: int = DEFAULT_MAX_REDELIVER_COUNT
    topic: str = ""
    backoff: BackoffSpec = field(default_factory=BackoffSpec)
    non_retryable_errors: tuple[str, ...] = ()
    #: First match wins; a failure no rule matches gets the settings above.
    rules: tuple[RetryRule, ...] = ()
    #: ``maxRetryDuration``: a retry due later than this after the message's first failure (or
    #: its latest redrive) is not made, the message is dead-lettered ``retry-timeout``; 0: none.
    max_retry_duration_ms: int = 0
    #: None: no breaker (every failure is retried and, in the end, dead-lettered as it comes).
    breaker: BreakerSpec | None = None


@dataclass(frozen=True, slots=True)
class DeadLetterTable:
    """A queryable copy of the dead letters: every record written to the dead-letter topic is
    appended to this table in the same micro-batch (``dlq_engine.job.dead_letter_table``)."""

    #: Where the table lives: a path Spark's Hadoop file systems can write (a local or mounted
    #: folder, ``s3a://...``, ``abfss://...``, ...).
    path: str
    format: DeadLetterTableFormat = "delta"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    strategy: DeadLetterStrategy = "topic"
    topic: str = ""
    include_stack_trace: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The header profiles written on dead letters and retry records, in this order.
    header_profiles: tuple[HeaderProfile, ...] = DEFAULT_HEADER_PROFILES
    #: Only with strategy ``topic`` (the table holds what the dead-letter topic receives).
    table: DeadLetterTable | None = None


@dataclass(frozen=True, slots=True)
class ErrorWindow:
    size: int = 0
    threshold: float = 1.0

    @property
    def enabled(self) -> bool:
        return self.size > 0


@dataclass(frozen=True, slots=True)
class StrimziTarget:
    namespace: str = ""
    cluster: str = ""


@dataclass(frozen=True, slots=True)
class Topics:
    create: bool = True
    provisioner: Provisioner = "auto"
    strimzi: StrimziTarget = field(default_factory=StrimziTarget)
    partitions: int = 0
    replication_factor: int = -1
    retry_config: Mapping[str, str] = field(default_factory=dict)
    dead_letter_config: Mapping[str, str] = field(default_factory=dict)
    delete_with_policy: bool = False


@dataclass(frozen=True, slots=True)
class Resources:
    cores: int = 1
    memory: str = "1g"
    instances: int = 1


#: ``spec.spark.pod.tolerations[i].operator`` and ``.effect``: Kubernetes' own values.
TOLERATION_OPERATORS: Final = ("Exists", "Equal")
TOLERATION_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
#: The keys of ``spec.spark.pod.affinity`` (a Kubernetes ``Affinity``; the CRD checks the rest).
AFFINITY_KINDS: Final = ("nodeAffinity", "podAffinity", "podAntiAffinity")


@dataclass(frozen=True, slots=True)
class PodSettings:
    """``spec.spark.pod``: where the driver and executor pods go and what they carry. The engine
    never reads it; the operator puts it in the pods' templates, merged with what the policy's
    class gives (and only as far as the class lets a policy set it)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: Kubernetes ``Toleration`` objects, as written (``key``, ``operator``, ``value``,
    #: ``effect``, ``tolerationSeconds``).
    tolerations: tuple[Mapping[str, Any], ...] = ()
    #: A Kubernetes ``Affinity`` object, as written; empty for none.
    affinity: Mapping[str, Any] = field(default_factory=dict)
    priority_class_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (
            self.node_selector
            or self.tolerations
            or self.affinity
            or self.priority_class_name
            or self.labels
            or self.annotations
        )


@dataclass(frozen=True, slots=True)
class Spark:
    image: str = ""
    trigger_ms: int = 1_000
    checkpoint_location: str = ""
    driver: Resources = field(default_factory=Resources)
    executor: Resources = field(default_factory=Resources)
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    pod: PodSettings = field(default_factory=PodSettings)


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """A whole policy: identity plus spec, with every default applied."""

    name: str
    namespace: str
    source: Source
    broker: Broker
    processor: Processor
    output: Output = field(default_factory=Output)
    retry: RetrySpec = field(default_factory=RetrySpec)
    dead_letter: DeadLetter = field(default_factory=DeadLetter)
    error_window: ErrorWindow = field(default_factory=ErrorWindow)
    topics: Topics = field(default_factory=Topics)
    spark: Spark = field(default_factory=Spark)
    suspend: bool = False
    ordering: Ordering = field(default_factory=Ordering)
    #: ``spec.className``: the DeadLetterPolicyClass that governs the policy in a cluster (empty:
    #: the default class). Only the operator reads it; the engine runs what the file says.
    class_name: str = ""

    @property
    def qualified_name(self) -> str:
        """``namespace/name``, as written in the ``dlq.policy`` header."""
        return f"{self.namespace}/{self.name}"

    @property
    def retry_topic(self) -> str:
        return self.retry.topic or default_retry_topic(self.source)

    @property
    def dead_letter_topic(self) -> str:
        return self.dead_letter.topic or default_dead_letter_topic(self.source)

    @property
    def is_pulsar(self) -> bool:
        return self.broker.type == "pulsar"


def default_retry_topic(source: Source) -> str:
    """``<topic>-<subscription>-RETRY``: Pulsar's own default name for a retry letter topic; on
    Pulsar a fully qualified source gives a fully qualified retry topic in its namespace."""
    return f"{source.topic}-{source.subscription}-RETRY"


def default_dead_letter_topic(source: Source) -> str:
    """``<topic>-<subscription>-DLQ``: Pulsar's own default name for a dead letter topic."""
    return f"{source.topic}-{source.subscription}-DLQ"


#: A policy that sets nothing: every section at the defaults declared above (the names a policy
#: must give left empty). The parser reads each default from here, the write-back's
#: ``DEFAULT_SPEC`` is its spec.
DEFAULTS: Final = DeadLetterPolicy(
    name="", namespace="", source=Source("", ""), broker=Broker(), processor=Processor("")
)
#: The defaults of the optional sections (absent: off): ``retry.breaker`` and ``deadLetter.table``.
DEFAULT_BREAKER: Final = BreakerSpec()
DEFAULT_TABLE: Final = DeadLetterTable(path="")
