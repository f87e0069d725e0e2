"""The DeadLetterPolicy: one typed model, one parser, every default in one place.

The operator validates a policy it watches with this module, renders it into the engine's
``policy.yaml``, and the engine loads that file with this module again, so both sides agree on
every default and every rule. The parser collects all problems at once, each named by its field
path (``spec.retry.backoff.jitter: must be between 0 and 1, got 1.5``), because a person fixing a
policy wants the whole list, not one error per attempt.

The dataclasses are frozen: a policy is a value. ``to_spec`` turns one back into the spec
mapping with every default filled in, which is what the operator writes into the ConfigMap and
what the configuration hash is computed over.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeVar, cast, get_args

from dlq_engine.model.durations import DurationError, format_ms, parse_duration_ms

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
_TOPIC_RE = re.compile(KAFKA_TOPIC_PATTERN)
#: The Pulsar topic names a policy may use: ``name`` (in ``public/default``),
#: ``tenant/namespace/name`` or ``persistent://tenant/namespace/name``, each part in Kafka's
#: characters. Only persistent topics: a non-persistent one keeps nothing for a restart to read,
#: and dead letters must be kept.
PULSAR_TOPIC_PATTERN: Final = r"^(persistent://)?([a-zA-Z0-9._-]+/[a-zA-Z0-9._-]+/)?[a-zA-Z0-9._-]+$"
_PULSAR_TOPIC_RE = re.compile(PULSAR_TOPIC_PATTERN)
#: Pulsar names the partitions of a partitioned topic ``<topic>-partition-<n>``: a topic of its
#: own may not be named so.
_PULSAR_PARTITION_RE = re.compile(r"-partition-[0-9]+$")
PULSAR_DEFAULT_TENANT: Final = "public"
PULSAR_DEFAULT_NAMESPACE: Final = "default"
#: ``spec.broker.serviceUrl`` (binary protocol) and ``spec.broker.adminUrl`` (admin REST API).
PULSAR_SERVICE_URL_PATTERN: Final = r"^pulsar(\+ssl)?://[^\s/]+/?$"
PULSAR_ADMIN_URL_PATTERN: Final = r"^https?://[^\s]+$"
#: The subscription the operator creates on a Pulsar dead-letter topic: Pulsar deletes messages
#: that no durable subscription still holds (once retention allows), so dead letters nobody has
#: read yet stay for as long as this subscription does. Nothing ever reads through it.
PULSAR_KEEP_SUBSCRIPTION: Final = "spark-dlq-keep"
_ENTRYPOINT_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")
_MEMORY_RE = re.compile(r"^[1-9][0-9]*[kmgtKMGT]?$")
#: A Kubernetes object name (DNS-1123 subdomain), for ``spec.className``.
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_HEADER_PREFIX: Final = "dlq."
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
    #: ``key``: the messages of one Kafka key are handled in their source order, a retrying
    #: message holding the later ones of its key (``Ordering``); null keys stay unordered.
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


@dataclass(frozen=True, slots=True)
class PulsarTopic:
    """A Pulsar topic name taken apart: ``orders`` is ``persistent://public/default/orders``."""

    tenant: str
    namespace: str
    local_name: str

    @property
    def full_name(self) -> str:
        return f"persistent://{self.tenant}/{self.namespace}/{self.local_name}"

    @property
    def rest_path(self) -> str:
        """The topic's part of an admin REST API path: ``persistent/<tenant>/<namespace>/<name>``."""
        return f"persistent/{self.tenant}/{self.namespace}/{self.local_name}"


def pulsar_topic(name: str) -> PulsarTopic:
    """The parts of a Pulsar topic name the parser accepted (``pulsar_topic_problem`` is None)."""
    rest = name.removeprefix("persistent://")
    parts = rest.split("/")
    if len(parts) == 3:
        return PulsarTopic(parts[0], parts[1], parts[2])
    return PulsarTopic(PULSAR_DEFAULT_TENANT, PULSAR_DEFAULT_NAMESPACE, rest)


# --------------------------------------------------------------------------------------------
# Parsing


T = TypeVar("T")
_MISSING: Final = object()


class _Fields:
    """Reads one mapping of the document, remembering which keys were used and every issue."""

    def __init__(self, raw: object, path: str, issues: list[Issue]) -> None:
        self.path = path
        self.issues = issues
        self.used: set[str] = set()
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            self.fail(path, f"must be a mapping, got {_kind(raw)}")
            raw = {}
        self.raw: Mapping[str, Any] = raw

    def fail(self, path: str, message: str) -> None:
        self.issues.append(Issue(path, message))

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def get(self, key: str) -> object:
        self.used.add(key)
        value = self.raw.get(key, _MISSING)
        return _MISSING if value is None else value

    def child(self, key: str) -> _Fields:
        value = self.get(key)
        return _Fields(None if value is _MISSING else value, self.at(key), self.issues)

    def string(self, key: str, default: str | None = None) -> str:
        value = self.get(key)
        if value is _MISSING:
            if default is None:
                self.fail(self.at(key), "is required")
                return ""
            return default
        if not isinstance(value, str):
            self.fail(self.at(key), f"must be a string, got {_kind(value)}")
            return default or ""
        if default is None and not value.strip():
            self.fail(self.at(key), "is required and must not be empty")
        return value

    def choice(self, key: str, allowed: Sequence[T], default: T) -> T:
        value = self.get(key)
        if value is _MISSING:
            return default
        if value not in allowed:
            options = ", ".join(str(a) for a in allowed)
            self.fail(self.at(key), f"must be one of {options}, got {value!r}")
            return default
        return cast(T, value)

    def integer(self, key: str, default: int, *, minimum: int | None = None) -> int:
        value = self.get(key)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(self.at(key), f"must be a whole number, got {value!r}")
            return default
        if minimum is not None and value < minimum:
            self.fail(self.at(key), f"must be at least {minimum}, got {value}")
            return default
        return value

    def number(self, key: str, default: float) -> float:
        value = self.get(key)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(self.at(key), f"must be a number, got {value!r}")
            return default
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(self.at(key), f"must be a finite number, got {value!r}")
            return default
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.fail(self.at(key), f"must be true or false, got {value!r}")
            return default
        return value

    def duration(self, key: str, default_ms: int) -> int:
        value = self.get(key)
        if value is _MISSING:
            return default_ms
        try:
            return parse_duration_ms(value)
        except DurationError as error:
            self.fail(self.at(key), str(error))
            return default_ms

    def string_map(self, key: str) -> dict[str, str]:
        """A map of strings; numbers and booleans are accepted and written as strings
        (topic configs such as ``retention.ms: 604800000`` are natural to write unquoted)."""
        value = self.get(key)
        if value is _MISSING:
            return {}
        if not isinstance(value, Mapping):
            self.fail(self.at(key), f"must be a mapping of strings, got {_kind(value)}")
            return {}
        result: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                self.fail(self.at(key), f"keys must be strings, got {k!r}")
            elif isinstance(v, bool):
                result[k] = "true" if v else "false"
            elif isinstance(v, str | int | float):
                result[k] = str(v)
            else:
                self.fail(f"{self.at(key)}.{k}", f"must be a string, got {_kind(v)}")
        return result

    def string_list(self, key: str) -> tuple[str, ...]:
        value = self.get(key)
        if value is _MISSING:
            return ()
        if not isinstance(value, list):
            self.fail(self.at(key), f"must be a list, got {_kind(value)}")
            return ()
        items: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.fail(f"{self.at(key)}[{index}]", f"must be a non-empty string, got {item!r}")
            else:
                items.append(item.strip())
        return tuple(items)

    def done(self) -> None:
        """Refuse keys this mapping does not know: a typo must not silently fall back to a
        default (``maxRedeliveryCount`` would otherwise mean 16 retries)."""
        for key in self.raw:
            if key not in self.used:
                hint = _closest(str(key), self.used)
                suffix = f" (did you mean {hint!r}?)" if hint else ""
                self.fail(self.at(str(key)), f"unknown field{suffix}")


#: The field reader, for parsers of other documents that name their problems the same way (the
#: operator's DeadLetterPolicyClass).
FieldReader = _Fields
MISSING: Final = _MISSING


def parse_policy(document: object) -> DeadLetterPolicy:
    """Parse a whole DeadLetterPolicy object (apiVersion, kind, metadata, spec).

    Raises PolicyError naming every problem. Fields Kubernetes adds (``status``, server-set
    metadata) are accepted and ignored.
    """
    issues: list[Issue] = []
    if not isinstance(document, Mapping):
        raise PolicyError([Issue("(document)", f"must be a mapping, got {_kind(document)}")])
    api_version = document.get("apiVersion")
    if api_version != API_VERSION:
        issues.append(Issue("apiVersion", f"must be {API_VERSION}, got {api_version!r}"))
    kind = document.get("kind")
    if kind != KIND:
        issues.append(Issue("kind", f"must be {KIND}, got {kind!r}"))
    metadata = document.get("metadata")
    name, namespace = "", "default"
    if not isinstance(metadata, Mapping):
        issues.append(Issue("metadata", "is required, with at least a name"))
    else:
        name = metadata.get("name") or ""
        namespace = metadata.get("namespace") or "default"
        if not isinstance(name, str) or not name:
            issues.append(Issue("metadata.name", "is required"))
            name = ""
    policy = _parse_spec(document.get("spec"), name=name, namespace=str(namespace), issues=issues)
    if issues:
        raise PolicyError(issues)
    return policy


def _parse_spec(raw: object, *, name: str, namespace: str, issues: list[Issue]) -> DeadLetterPolicy:
    if raw is None:
        issues.append(Issue("spec", "is required"))
    spec = _Fields(raw, "spec", issues)
    # Topic names are checked by the broker's rules, and the source comes before the broker.
    broker_type = _peek_broker_type(spec.raw)

    f = spec.child("source")
    source = Source(
        topic=_topic(f, "topic", broker_type, required=True),
        subscription=f.string("subscription"),
        starting_offsets=f.choice("startingOffsets", STARTING_OFFSETS, "latest"),
        max_offsets_per_trigger=f.integer("maxOffsetsPerTrigger", 0, minimum=0),
        ordering=f.choice("ordering", ORDERING_MODES, "none"),
    )
    if source.subscription and not _TOPIC_RE.match(source.subscription):
        f.fail(
            f.at("subscription"),
            "may contain only letters, digits, '.', '_' and '-' "
            f"(it is part of the default topic names), got {source.subscription!r}",
        )
    f.done()

    broker = _parse_broker(spec.child("broker"))

    f = spec.child("processor")
    entrypoint = f.string("entrypoint")
    if entrypoint and not _ENTRYPOINT_RE.match(entrypoint):
        f.fail(f.at("entrypoint"), f"must be 'module:function', got {entrypoint!r}")
    processor = Processor(
        entrypoint=entrypoint,
        mode=f.choice("mode", PROCESSOR_MODES, "message"),
        timeout_ms=f.duration("timeout", DEFAULT_PROCESSOR_TIMEOUT_MS),
    )
    f.done()

    f = spec.child("output")
    output = Output(topic=_topic(f, "topic", broker_type))
    f.done()

    retry = _parse_retry(spec.child("retry"), broker_type)
    dead_letter = _parse_dead_letter(spec.child("deadLetter"), broker_type)
    # A topic written out as its default (``to_spec`` does so) is the same policy as one left out.
    if retry.topic == default_retry_topic(source):
        retry = replace(retry, topic="")
    if dead_letter.topic == default_dead_letter_topic(source):
        dead_letter = replace(dead_letter, topic="")

    f = spec.child("errorWindow")
    error_window = ErrorWindow(size=f.integer("size", 0, minimum=0), threshold=f.number("threshold", 1.0))
    if not 0.0 < error_window.threshold <= 1.0:
        f.fail(f.at("threshold"), f"must be greater than 0 and at most 1, got {error_window.threshold}")
    f.done()

    topics = _parse_topics(spec.child("topics"))
    if broker.type == "pulsar":
        _check_pulsar_topics(spec.child("topics"), broker, topics)
    spark = _parse_spark(spec.child("spark"))
    suspend = spec.boolean("suspend", False)
    ordering = _parse_ordering(spec, source)
    class_name = spec.string("className", "")
    if class_name and not _DNS_SUBDOMAIN_RE.match(class_name):
        spec.fail(spec.at("className"), f"must be a DeadLetterPolicyClass's name, got {class_name!r}")
    spec.done()

    policy = DeadLetterPolicy(
        name=name,
        namespace=namespace,
        source=source,
        broker=broker,
        processor=processor,
        output=output,
        retry=retry,
        dead_letter=dead_letter,
        error_window=error_window,
        topics=topics,
        spark=spark,
        suspend=suspend,
        ordering=ordering,
        class_name=class_name,
    )
    _check_topic_names_distinct(policy, issues)
    _check_breaker(policy, issues)
    return policy


def _peek_broker_type(spec: Mapping[str, Any]) -> BrokerType:
    """``spec.broker.type`` when it is a known type, else kafka (``_parse_broker`` names a bad one)."""
    broker = spec.get("broker")
    found = broker.get("type") if isinstance(broker, Mapping) else None
    return cast(BrokerType, found) if found in BROKER_TYPES else "kafka"


_SERVICE_URL_RE = re.compile(PULSAR_SERVICE_URL_PATTERN)
_ADMIN_URL_RE = re.compile(PULSAR_ADMIN_URL_PATTERN)


def _parse_broker(f: _Fields) -> Broker:
    broker_type = f.choice("type", BROKER_TYPES, "kafka")
    # An unknown type is the one problem named: which fields belong is not known then.
    known = f.raw.get("type") in (None, *BROKER_TYPES)
    pulsar = broker_type == "pulsar"
    # Required for its own type; any other type's field is refused, not ignored.
    bootstrap = f.string("bootstrapServers", None if known and not pulsar else "")
    service_url = f.string("serviceUrl", None if pulsar else "")
    admin_url = f.string("adminUrl", "")
    if pulsar and bootstrap:
        f.fail(
            f.at("bootstrapServers"),
            "is for type kafka: a Pulsar broker is reached through serviceUrl and adminUrl",
        )
    for key, value in (("serviceUrl", service_url), ("adminUrl", admin_url)):
        if value and known and not pulsar:
            f.fail(f.at(key), "is for type pulsar (spec.broker.type is kafka)")
    if pulsar and service_url.strip() and not _SERVICE_URL_RE.match(service_url):
        f.fail(
            f.at("serviceUrl"),
            f"must be pulsar://host:port or pulsar+ssl://host:port (hosts separated by commas), "
            f"got {service_url!r}",
        )
    if pulsar and admin_url and not _ADMIN_URL_RE.match(admin_url):
        f.fail(f.at("adminUrl"), f"must be http://host:port or https://host:port, got {admin_url!r}")
    secret_ref = None
    if f.get("secretRef") is not _MISSING:
        s = f.child("secretRef")
        secret_ref = SecretRef(name=s.string("name"))
        s.done()
    f.done()
    return Broker(
        bootstrap_servers=bootstrap,
        secret_ref=secret_ref,
        type=broker_type,
        service_url=service_url,
        admin_url=admin_url,
    )


def _check_pulsar_topics(f: _Fields, broker: Broker, topics: Topics) -> None:
    """``spec.topics`` fields that only mean something on Kafka are refused with type pulsar,
    and the operator needs the admin URL to create the topics."""
    if topics.create and not broker.admin_url:
        f.fail(
            "spec.broker.adminUrl",
            "is required with type pulsar when spec.topics.create is true: the operator creates "
            "the topics through Pulsar's admin REST API",
        )
    if topics.provisioner == "strimzi":
        f.fail(
            f.at("provisioner"),
            "strimzi provisions Kafka topics: with broker type pulsar use auto or admin "
            "(Pulsar's admin REST API)",
        )
    if topics.replication_factor != -1:
        f.fail(
            f.at("replicationFactor"),
            "must be -1 with broker type pulsar: a Pulsar topic's replicas are its namespace's "
            f"persistence policy, got {topics.replication_factor}",
        )
    for key, config in (
        ("retryConfig", topics.retry_config),
        ("deadLetterConfig", topics.dead_letter_config),
    ):
        if config:
            f.fail(
                f.at(key),
                "must be empty with broker type pulsar: these are Kafka topic configs (a Pulsar "
                "topic takes retention and the rest from its namespace's policies)",
            )


def _parse_ordering(spec: _Fields, source: Source) -> Ordering:
    present = spec.get("ordering") is not _MISSING
    f = spec.child("ordering")
    ordering = Ordering(
        on_dead_letter=f.choice("onDeadLetter", ON_DEAD_LETTER, "skip"),
        max_held_per_key=f.integer("maxHeldPerKey", DEFAULT_MAX_HELD_PER_KEY, minimum=1),
        max_held_total=f.integer("maxHeldTotal", DEFAULT_MAX_HELD_TOTAL, minimum=1),
        max_hold_ms=f.duration("maxHoldTime", DEFAULT_MAX_HOLD_MS),
        on_overflow=f.choice("onOverflow", ON_OVERFLOW, "deadLetter"),
    )
    if present and source.ordering != "key":
        f.fail(f.path, f"is only read with spec.source.ordering key, got {source.ordering!r}")
    if ordering.max_held_per_key > MAX_HELD_PER_KEY:
        f.fail(f.at("maxHeldPerKey"), f"must be at most {MAX_HELD_PER_KEY}, got {ordering.max_held_per_key}")
    if ordering.max_hold_ms <= 0:
        f.fail(f.at("maxHoldTime"), "must be longer than 0")
    f.done()
    return ordering


def _ordering_spec(ordering: Ordering) -> dict[str, Any]:
    return {
        "onDeadLetter": ordering.on_dead_letter,
        "maxHeldPerKey": ordering.max_held_per_key,
        "maxHeldTotal": ordering.max_held_total,
        "maxHoldTime": format_ms(ordering.max_hold_ms),
        "onOverflow": ordering.on_overflow,
    }


def _parse_retry(f: _Fields, broker_type: BrokerType) -> RetrySpec:
    max_redeliver = f.integer("maxRedeliverCount", DEFAULT_MAX_REDELIVER_COUNT, minimum=0)
    topic = _topic(f, "topic", broker_type)
    backoff = _parse_backoff(f.child("backoff"))
    non_retryable = f.string_list("nonRetryableErrors")
    budget = f.duration("maxRetryDuration", 0)
    rules = _parse_rules(f, max_redeliver, backoff, non_retryable, budget)
    breaker = _parse_breaker(f.child("breaker")) if f.get("breaker") is not _MISSING else None
    f.done()
    return RetrySpec(
        max_redeliver_count=max_redeliver,
        topic=topic,
        backoff=backoff,
        non_retryable_errors=non_retryable,
        rules=rules,
        max_retry_duration_ms=budget,
        breaker=breaker,
    )


def _parse_breaker(f: _Fields) -> BreakerSpec:
    """``retry.breaker``: given at all (``{}`` too) means on, with the defaults."""
    breaker = BreakerSpec(
        window=f.integer("window", DEFAULT_BREAKER_WINDOW, minimum=1),
        threshold=f.number("threshold", DEFAULT_BREAKER_THRESHOLD),
        open_ms=f.duration("openTime", DEFAULT_BREAKER_OPEN_MS),
        probes=f.integer("probes", DEFAULT_BREAKER_PROBES, minimum=1),
    )
    if breaker.window > MAX_BREAKER_WINDOW:
        f.fail(f.at("window"), f"must be at most {MAX_BREAKER_WINDOW}, got {breaker.window}")
    if not 0.0 < breaker.threshold <= 1.0:
        f.fail(f.at("threshold"), f"must be greater than 0 and at most 1, got {breaker.threshold}")
    if breaker.open_ms <= 0:
        f.fail(f.at("openTime"), "must be longer than 0")
    if breaker.probes > MAX_BREAKER_PROBES:
        f.fail(f.at("probes"), f"must be at most {MAX_BREAKER_PROBES}, got {breaker.probes}")
    f.done()
    return breaker


def _check_breaker(policy: DeadLetterPolicy, issues: list[Issue]) -> None:
    """What the breaker cannot pause yet: the engine's Pulsar source (a Python data source the
    gate cannot wrap) and the ordering stage (its timers release a key's retries)."""
    if policy.retry.breaker is None:
        return
    if policy.is_pulsar:
        issues.append(
            Issue(
                "spec.retry.breaker",
                "is not supported with broker type pulsar yet: the engine's Pulsar source cannot be paused",
            )
        )
    if policy.source.ordering == "key":
        issues.append(
            Issue(
                "spec.retry.breaker",
                "is not supported with spec.source.ordering key yet: the ordering stage would release "
                "held retries while the breaker is open",
            )
        )


def _parse_backoff(b: _Fields) -> BackoffSpec:
    backoff = BackoffSpec(
        type=b.choice("type", BACKOFF_TYPES, "exponential"),
        delay_ms=b.duration("delay", 1_000),
        multiplier=b.number("multiplier", 2.0),
        max_delay_ms=b.duration("maxDelay", 600_000),
        jitter=b.number("jitter", 0.0),
        levels_ms=_levels(b),
    )
    if backoff.multiplier < 1.0:
        b.fail(b.at("multiplier"), f"must be at least 1.0, got {backoff.multiplier}")
    if not 0.0 <= backoff.jitter <= 1.0:
        b.fail(b.at("jitter"), f"must be between 0 and 1, got {backoff.jitter}")
    # maxDelay caps the exponential delay only (routing.backoff): fixed and levels ignore it.
    if backoff.type == "exponential" and backoff.max_delay_ms < backoff.delay_ms:
        b.fail(
            b.at("maxDelay"),
            f"must not be shorter than delay ({format_ms(backoff.delay_ms)}), "
            f"got {format_ms(backoff.max_delay_ms)}",
        )
    if backoff.type == "levels" and not backoff.levels_ms:
        b.fail(b.at("levels"), "must list at least one delay when type is levels")
    b.done()
    return backoff


#: At most this many rules, of at most this many error classes each (the CRD says the same).
MAX_RETRY_RULES: Final = 16
MAX_RULE_ERRORS: Final = 16


def _parse_rules(
    f: _Fields, max_redeliver: int, backoff: BackoffSpec, non_retryable: tuple[str, ...], budget: int
) -> tuple[RetryRule, ...]:
    """``retry.rules``: each names its errors; its limit, backoff and time budget default to the
    policy's."""
    raw = f.get("rules")
    if raw is _MISSING:
        return ()
    path = f.at("rules")
    if not isinstance(raw, list):
        f.fail(path, f"must be a list of rules, got {_kind(raw)}")
        return ()
    if len(raw) > MAX_RETRY_RULES:
        f.fail(path, f"must have at most {MAX_RETRY_RULES} rules, got {len(raw)}")
    rules: list[RetryRule] = []
    named: dict[str, str] = {}
    for index, item in enumerate(raw):
        r = _Fields(item, f"{path}[{index}]", f.issues)
        errors = r.string_list("errors")
        if not errors:
            r.fail(r.at("errors"), "must name at least one error class")
        elif len(errors) > MAX_RULE_ERRORS:
            r.fail(r.at("errors"), f"must name at most {MAX_RULE_ERRORS} error classes, got {len(errors)}")
        for name in errors:
            if name in named:
                r.fail(
                    r.at("errors"),
                    f"{name!r} is already named by {named[name]}: a class may be in one rule only",
                )
            elif name in non_retryable:
                r.fail(r.at("errors"), f"{name!r} is in retry.nonRetryableErrors: it is never retried")
            named.setdefault(name, f"{path}[{index}]")
        rule_backoff = _parse_backoff(r.child("backoff")) if r.raw.get("backoff") is not None else backoff
        rules.append(
            RetryRule(
                errors=errors,
                max_redeliver_count=r.integer("maxRedeliverCount", max_redeliver, minimum=0),
                backoff=rule_backoff,
                max_retry_duration_ms=r.duration("maxRetryDuration", budget),
            )
        )
        r.done()
    return tuple(rules)


def _levels(b: _Fields) -> tuple[int, ...]:
    value = b.get("levels")
    if value is _MISSING:
        return ()
    if not isinstance(value, list):
        b.fail(b.at("levels"), f"must be a list of durations, got {_kind(value)}")
        return ()
    levels: list[int] = []
    for index, item in enumerate(value):
        try:
            levels.append(parse_duration_ms(item))
        except DurationError as error:
            b.fail(f"{b.at('levels')}[{index}]", str(error))
    return tuple(levels)


def _parse_dead_letter(f: _Fields, broker_type: BrokerType) -> DeadLetter:
    headers = f.string_map("headers")
    for key in headers:
        if key.lower().startswith(_HEADER_PREFIX):
            f.fail(
                f"{f.at('headers')}.{key}",
                "must not start with 'dlq.': those headers are written by the engine",
            )
    dead_letter = DeadLetter(
        strategy=f.choice("strategy", DEAD_LETTER_STRATEGIES, "topic"),
        topic=_topic(f, "topic", broker_type),
        include_stack_trace=f.boolean("includeStackTrace", True),
        headers=headers,
        header_profiles=_parse_header_profiles(f),
        table=_parse_table(f) if f.get("table") is not _MISSING else None,
    )
    if dead_letter.table is not None and dead_letter.strategy != "topic":
        f.fail(
            f.at("table"),
            f"is only allowed with strategy topic (it holds what the dead-letter topic receives), "
            f"got strategy {dead_letter.strategy!r}",
        )
    f.done()
    return dead_letter


def _parse_header_profiles(f: _Fields) -> tuple[HeaderProfile, ...]:
    raw = f.get("headerProfiles")
    if raw is _MISSING or not isinstance(raw, list):
        f.string_list("headerProfiles")  # names what is wrong with a value that is not a list
        return DEFAULT_HEADER_PROFILES
    path = f.at("headerProfiles")
    profiles: list[HeaderProfile] = []
    for index, name in enumerate(f.string_list("headerProfiles")):
        if name not in HEADER_PROFILES:
            options = ", ".join(HEADER_PROFILES)
            f.fail(f"{path}[{index}]", f"must be one of {options}, got {name!r}")
        elif name in profiles:
            f.fail(f"{path}[{index}]", f"{name!r} is listed twice")
        else:
            profiles.append(name)
    if REQUIRED_HEADER_PROFILE not in profiles:
        f.fail(
            path,
            f"must include {REQUIRED_HEADER_PROFILE!r} (the engine, the redrive and the triage CLI "
            f"read the dlq.* headers), got {list(profiles)}",
        )
    return tuple(profiles)


def _parse_table(dead_letter: _Fields) -> DeadLetterTable:
    f = dead_letter.child("table")
    table = DeadLetterTable(
        format=f.choice("format", DEAD_LETTER_TABLE_FORMATS, "delta"),
        path=f.string("path"),
    )
    if len(table.path) > MAX_TABLE_PATH_LENGTH:
        f.fail(f.at("path"), f"must be at most {MAX_TABLE_PATH_LENGTH} characters, got {len(table.path)}")
    elif table.path.strip() and table.path != table.path.strip():
        f.fail(f.at("path"), f"must not start or end with white space, got {table.path!r}")
    f.done()
    return table


def _parse_topics(f: _Fields) -> Topics:
    s = f.child("strimzi")
    strimzi = StrimziTarget(namespace=s.string("namespace", ""), cluster=s.string("cluster", ""))
    s.done()
    topics = Topics(
        create=f.boolean("create", True),
        provisioner=f.choice("provisioner", PROVISIONERS, "auto"),
        strimzi=strimzi,
        partitions=f.integer("partitions", 0, minimum=0),
        replication_factor=f.integer("replicationFactor", -1, minimum=-1),
        retry_config=f.string_map("retryConfig"),
        dead_letter_config=f.string_map("deadLetterConfig"),
        delete_with_policy=f.boolean("deleteWithPolicy", False),
    )
    if topics.replication_factor == 0:
        f.fail(f.at("replicationFactor"), "must be -1 (broker default) or at least 1, got 0")
    for key, config in (
        ("retryConfig", topics.retry_config),
        ("deadLetterConfig", topics.dead_letter_config),
    ):
        raw = config.get("max.message.bytes")
        if raw is not None and not (
            raw.isascii() and raw.isdigit() and len(raw) <= 10 and int(raw) >= MIN_MAX_MESSAGE_BYTES
        ):
            f.fail(
                f.at(key),
                f"max.message.bytes must be a number of at least {MIN_MAX_MESSAGE_BYTES}: "
                "below the producer's batch.size (16 KiB) the Kafka client retries a refused "
                f"batch forever (KAFKA-8350), got {raw!r}",
            )
        retention = config.get("retention.ms")
        if retention is not None and not re.fullmatch(r"-1|[0-9]{1,19}", retention):
            f.fail(
                f.at(key),
                f"retention.ms must be a whole number of milliseconds, or -1 (never deleted by age), "
                f"got {retention!r}",
            )
    if topics.provisioner == "strimzi" and not strimzi.cluster:
        f.fail(f"{f.at('strimzi')}.cluster", "is required when provisioner is strimzi")
    f.done()
    return topics


def _parse_spark(f: _Fields) -> Spark:
    spark = Spark(
        image=f.string("image", ""),
        trigger_ms=f.duration("trigger", 1_000),
        checkpoint_location=f.string("checkpointLocation", ""),
        driver=_resources(f.child("driver"), executor=False),
        executor=_resources(f.child("executor"), executor=True),
        spark_conf=f.string_map("sparkConf"),
        pod=_parse_pod(f.child("pod")),
    )
    if spark.trigger_ms <= 0:
        f.fail(f.at("trigger"), "must be longer than 0")
    f.done()
    return spark


def _parse_pod(f: _Fields) -> PodSettings:
    pod = read_pod_settings(f)
    f.done()
    return pod


def read_pod_settings(f: _Fields) -> PodSettings:
    """The pod settings of the mapping ``f`` reads (``spec.spark.pod``, or a class's
    ``spec.pods``, which has more fields: the caller checks for unknown ones)."""
    return PodSettings(
        node_selector=f.string_map("nodeSelector"),
        tolerations=_tolerations(f),
        affinity=_affinity(f),
        priority_class_name=f.string("priorityClassName", ""),
        labels=f.string_map("labels"),
        annotations=f.string_map("annotations"),
    )


def _tolerations(pod: _Fields) -> tuple[Mapping[str, Any], ...]:
    raw = pod.get("tolerations")
    if raw is _MISSING:
        return ()
    path = pod.at("tolerations")
    if not isinstance(raw, list):
        pod.fail(path, f"must be a list of tolerations, got {_kind(raw)}")
        return ()
    found: list[Mapping[str, Any]] = []
    for index, item in enumerate(raw):
        t = _Fields(item, f"{path}[{index}]", pod.issues)
        toleration: dict[str, Any] = {}
        for key in ("key", "value"):
            if t.get(key) is not _MISSING:
                toleration[key] = t.string(key, "")
        for key, allowed in (("operator", TOLERATION_OPERATORS), ("effect", TOLERATION_EFFECTS)):
            if t.get(key) is not _MISSING:
                toleration[key] = t.choice(key, allowed, allowed[0])
        if t.get("tolerationSeconds") is not _MISSING:
            toleration["tolerationSeconds"] = t.integer("tolerationSeconds", 0)
        t.done()
        found.append(toleration)
    return tuple(found)


def _affinity(pod: _Fields) -> Mapping[str, Any]:
    raw = pod.get("affinity")
    if raw is _MISSING:
        return {}
    path = pod.at("affinity")
    if not isinstance(raw, Mapping):
        pod.fail(path, f"must be a mapping (a Kubernetes Affinity), got {_kind(raw)}")
        return {}
    for key, value in raw.items():
        if key not in AFFINITY_KINDS:
            pod.fail(f"{path}.{key}", f"unknown field (one of {', '.join(AFFINITY_KINDS)})")
        elif not isinstance(value, Mapping):
            pod.fail(f"{path}.{key}", f"must be a mapping, got {_kind(value)}")
    return copy.deepcopy(dict(raw))


def _resources(f: _Fields, *, executor: bool) -> Resources:
    resources = Resources(
        cores=f.integer("cores", 1, minimum=1),
        memory=f.string("memory", "1g"),
        instances=f.integer("instances", 1, minimum=1) if executor else 1,
    )
    if not _MEMORY_RE.match(resources.memory):
        f.fail(f.at("memory"), f"must be a JVM memory size such as 512m or 2g, got {resources.memory!r}")
    f.done()
    return resources


def _topic(f: _Fields, key: str, broker_type: BrokerType, *, required: bool = False) -> str:
    value = f.string(key, None if required else "")
    if value:
        problem = _name_problem(broker_type, value)
        if problem:
            f.fail(f.at(key), problem)
    return value


def _name_problem(broker_type: BrokerType, name: str) -> str | None:
    return pulsar_topic_problem(name) if broker_type == "pulsar" else topic_name_problem(name)


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse this topic name, or None when it is acceptable."""
    if name in (".", ".."):
        return f"must not be '.' or '..', got {name!r}"
    if len(name) > KAFKA_TOPIC_MAX_LENGTH:
        return f"must be at most {KAFKA_TOPIC_MAX_LENGTH} characters, got {len(name)}"
    if not _TOPIC_RE.match(name):
        return f"may contain only letters, digits, '.', '_' and '-', got {name!r}"
    return None


def pulsar_topic_problem(name: str) -> str | None:
    """Why a policy may not use this Pulsar topic name, or None when it is acceptable."""
    if name.startswith("non-persistent://"):
        return f"must be a persistent topic: a non-persistent one keeps no messages, got {name!r}"
    if len(name) > KAFKA_TOPIC_MAX_LENGTH:
        return f"must be at most {KAFKA_TOPIC_MAX_LENGTH} characters, got {len(name)}"
    if not _PULSAR_TOPIC_RE.match(name):
        return (
            "must be name, tenant/namespace/name or persistent://tenant/namespace/name, each part "
            f"of letters, digits, '.', '_' and '-', got {name!r}"
        )
    local = pulsar_topic(name).local_name
    if local in (".", ".."):
        return f"must not be named '.' or '..', got {name!r}"
    if _PULSAR_PARTITION_RE.search(local):
        return f"must not end in -partition-<n>: Pulsar names a topic's partitions so, got {name!r}"
    return None


def _check_topic_names_distinct(policy: DeadLetterPolicy, issues: list[Issue]) -> None:
    if not policy.source.topic or not policy.source.subscription:
        return
    broker_type = policy.broker.type

    def same(a: str, b: str) -> bool:
        """One topic on the broker: on Pulsar ``orders`` is ``persistent://public/default/orders``."""
        if broker_type == "pulsar" and not (_name_problem(broker_type, a) or _name_problem(broker_type, b)):
            return pulsar_topic(a).full_name == pulsar_topic(b).full_name
        return a == b

    named = [
        ("spec.retry.topic", policy.retry_topic),
        ("spec.deadLetter.topic", policy.dead_letter_topic),
        ("spec.output.topic", policy.output.topic),
    ]
    for path, topic in named:
        if topic and same(topic, policy.source.topic):
            issues.append(Issue(path, f"must differ from spec.source.topic ({topic!r})"))
    if same(policy.retry_topic, policy.dead_letter_topic):
        issues.append(
            Issue("spec.deadLetter.topic", f"must differ from the retry topic ({policy.retry_topic!r})")
        )
    if policy.output.topic and (
        same(policy.output.topic, policy.retry_topic) or same(policy.output.topic, policy.dead_letter_topic)
    ):
        issues.append(
            Issue(
                "spec.output.topic",
                f"must differ from the retry and dead-letter topics ({policy.output.topic!r})",
            )
        )
    for path, topic in (
        ("spec.retry.topic", policy.retry_topic),
        ("spec.deadLetter.topic", policy.dead_letter_topic),
    ):
        problem = _name_problem(broker_type, topic)
        if problem and not any(i.path == path for i in issues):
            issues.append(Issue(path, f"(derived) {problem}"))


def _kind(value: object) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{type(value).__name__} {value!r}"


def _closest(key: str, known: set[str]) -> str | None:
    import difflib

    matches = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None


# --------------------------------------------------------------------------------------------
# Back to a spec mapping


def _backoff_spec(b: BackoffSpec) -> dict[str, Any]:
    return {
        "type": b.type,
        "delay": format_ms(b.delay_ms),
        "multiplier": b.multiplier,
        "maxDelay": format_ms(b.max_delay_ms),
        "jitter": b.jitter,
        "levels": [format_ms(level) for level in b.levels_ms],
    }


def to_spec(policy: DeadLetterPolicy) -> dict[str, Any]:
    """The spec with every default filled in, in the contract's field names and shapes."""
    b = policy.retry.backoff
    spec: dict[str, Any] = {
        "source": {
            "topic": policy.source.topic,
            "subscription": policy.source.subscription,
            "startingOffsets": policy.source.starting_offsets,
            # Only when set, so that policies without it keep their config hash.
            **(
                {"maxOffsetsPerTrigger": policy.source.max_offsets_per_trigger}
                if policy.source.max_offsets_per_trigger
                else {}
            ),
            # Only when key, so that policies without it keep their config hash.
            **({"ordering": policy.source.ordering} if policy.source.ordering != "none" else {}),
        },
        "broker": _broker_spec(policy.broker),
        "processor": {
            "entrypoint": policy.processor.entrypoint,
            "mode": policy.processor.mode,
            "timeout": format_ms(policy.processor.timeout_ms),
        },
        "output": {"topic": policy.output.topic},
        "retry": {
            "maxRedeliverCount": policy.retry.max_redeliver_count,
            "topic": policy.retry_topic,
            "backoff": _backoff_spec(b),
            "nonRetryableErrors": list(policy.retry.non_retryable_errors),
            # Only when set, so that policies without it keep their config hash.
            **(
                {"maxRetryDuration": format_ms(policy.retry.max_retry_duration_ms)}
                if policy.retry.max_retry_duration_ms
                else {}
            ),
            # Only when set, so that policies without rules keep their config hash.
            **(
                {
                    "rules": [
                        {
                            "errors": list(rule.errors),
                            "maxRedeliverCount": rule.max_redeliver_count,
                            "backoff": _backoff_spec(rule.backoff),
                            # Only when it differs from the policy's, which a rule inherits.
                            **(
                                {"maxRetryDuration": format_ms(rule.max_retry_duration_ms)}
                                if rule.max_retry_duration_ms != policy.retry.max_retry_duration_ms
                                else {}
                            ),
                        }
                        for rule in policy.retry.rules
                    ]
                }
                if policy.retry.rules
                else {}
            ),
            # Only when set, so that policies without a breaker keep their config hash.
            **({"breaker": _breaker_spec(policy.retry.breaker)} if policy.retry.breaker else {}),
        },
        "deadLetter": {
            "strategy": policy.dead_letter.strategy,
            "topic": policy.dead_letter_topic,
            "includeStackTrace": policy.dead_letter.include_stack_trace,
            "headers": dict(sorted(policy.dead_letter.headers.items())),
            # Only when not the default, so that policies without it keep their config hash.
            **(
                {"headerProfiles": list(policy.dead_letter.header_profiles)}
                if policy.dead_letter.header_profiles != DEFAULT_HEADER_PROFILES
                else {}
            ),
            # Only when set, so that policies without it keep their config hash.
            **({"table": _table_spec(policy.dead_letter.table)} if policy.dead_letter.table else {}),
        },
        "errorWindow": {"size": policy.error_window.size, "threshold": policy.error_window.threshold},
        "topics": {
            "create": policy.topics.create,
            "provisioner": policy.topics.provisioner,
            "strimzi": {
                "namespace": policy.topics.strimzi.namespace,
                "cluster": policy.topics.strimzi.cluster,
            },
            "partitions": policy.topics.partitions,
            "replicationFactor": policy.topics.replication_factor,
            "retryConfig": dict(sorted(policy.topics.retry_config.items())),
            "deadLetterConfig": dict(sorted(policy.topics.dead_letter_config.items())),
            "deleteWithPolicy": policy.topics.delete_with_policy,
        },
        "spark": {
            "image": policy.spark.image,
            "trigger": format_ms(policy.spark.trigger_ms),
            "checkpointLocation": policy.spark.checkpoint_location,
            "driver": {"cores": policy.spark.driver.cores, "memory": policy.spark.driver.memory},
            "executor": {
                "instances": policy.spark.executor.instances,
                "cores": policy.spark.executor.cores,
                "memory": policy.spark.executor.memory,
            },
            "sparkConf": dict(sorted(policy.spark.spark_conf.items())),
            # Only when set, so that policies without it keep their config hash.
            **({"pod": pod_spec(policy.spark.pod)} if not policy.spark.pod.empty else {}),
        },
        "suspend": policy.suspend,
        # Only with source.ordering key (the only case it is read).
        **({"ordering": _ordering_spec(policy.ordering)} if policy.source.ordering == "key" else {}),
    }
    if policy.broker.secret_ref is not None:
        spec["broker"]["secretRef"] = {"name": policy.broker.secret_ref.name}
    if policy.class_name:
        spec["className"] = policy.class_name
    return spec


def pod_spec(pod: PodSettings) -> dict[str, Any]:
    """``spec.spark.pod`` with the fields that are set, in the CRD's names."""
    fields: dict[str, Any] = {
        "nodeSelector": dict(sorted(pod.node_selector.items())),
        "tolerations": [dict(t) for t in pod.tolerations],
        "affinity": copy.deepcopy(dict(pod.affinity)),
        "priorityClassName": pod.priority_class_name,
        "labels": dict(sorted(pod.labels.items())),
        "annotations": dict(sorted(pod.annotations.items())),
    }
    return {key: value for key, value in fields.items() if value}


def _broker_spec(broker: Broker) -> dict[str, Any]:
    # type only when pulsar, so that Kafka policies written before it keep their config hash.
    if broker.type == "kafka":
        return {"bootstrapServers": broker.bootstrap_servers}
    return {
        "type": broker.type,
        "serviceUrl": broker.service_url,
        **({"adminUrl": broker.admin_url} if broker.admin_url else {}),
    }


def _breaker_spec(breaker: BreakerSpec) -> dict[str, Any]:
    return {
        "window": breaker.window,
        "threshold": breaker.threshold,
        "openTime": format_ms(breaker.open_ms),
        "probes": breaker.probes,
    }


def _table_spec(table: DeadLetterTable) -> dict[str, Any]:
    return {"format": table.format, "path": table.path}


def to_document(policy: DeadLetterPolicy) -> dict[str, Any]:
    """The whole object as the engine reads it from ``policy.yaml``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": policy.name, "namespace": policy.namespace},
        "spec": to_spec(policy),
    }
