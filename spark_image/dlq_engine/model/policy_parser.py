"""Parsing a DeadLetterPolicy document into its types, with the topic name grammars.

``parse_policy`` reads the whole object (``apiVersion``, ``kind``, ``metadata``, ``spec``)
with a ``FieldReader`` and names every problem at once. Defaults are the types' own
(``policy_types``); the rules between fields (a Pulsar broker's topics, the breaker with key
ordering, distinct topics, ...) are checked here. Kafka and Pulsar topic names each have their
grammar (``topic_name_problem``, ``pulsar_topic_problem``, ``pulsar_topic``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, cast

from dlq_engine.model.durations import DurationError, format_ms, parse_duration_ms
from dlq_engine.model.field_reader import (
    _MISSING,
    _Fields,
    _kind,
)
from dlq_engine.model.policy_types import (
    AFFINITY_KINDS,
    API_VERSION,
    BACKOFF_TYPES,
    BROKER_TYPES,
    DEAD_LETTER_STRATEGIES,
    DEAD_LETTER_TABLE_FORMATS,
    DEFAULT_BREAKER,
    DEFAULT_HEADER_PROFILES,
    DEFAULT_TABLE,
    DEFAULTS,
    HEADER_PROFILES,
    KAFKA_TOPIC_MAX_LENGTH,
    KAFKA_TOPIC_PATTERN,
    KIND,
    MAX_BREAKER_PROBES,
    MAX_BREAKER_WINDOW,
    MAX_HELD_PER_KEY,
    MAX_TABLE_PATH_LENGTH,
    MIN_MAX_MESSAGE_BYTES,
    ON_DEAD_LETTER,
    ON_OVERFLOW,
    ORDERING_MODES,
    PROCESSOR_MODES,
    PROVISIONERS,
    PULSAR_ADMIN_URL_PATTERN,
    PULSAR_DEFAULT_NAMESPACE,
    PULSAR_DEFAULT_TENANT,
    PULSAR_SERVICE_URL_PATTERN,
    PULSAR_TOPIC_PATTERN,
    REQUIRED_HEADER_PROFILE,
    STARTING_OFFSETS,
    TOLERATION_EFFECTS,
    TOLERATION_OPERATORS,
    BackoffSpec,
    BreakerSpec,
    Broker,
    BrokerType,
    DeadLetter,
    DeadLetterPolicy,
    DeadLetterTable,
    ErrorWindow,
    HeaderProfile,
    Issue,
    Ordering,
    Output,
    PodSettings,
    PolicyError,
    Processor,
    Resources,
    RetryRule,
    RetrySpec,
    SecretRef,
    Source,
    Spark,
    StrimziTarget,
    Topics,
    default_dead_letter_topic,
    default_retry_topic,
)

_TOPIC_RE = re.compile(KAFKA_TOPIC_PATTERN)
_PULSAR_TOPIC_RE = re.compile(PULSAR_TOPIC_PATTERN)
#: Pulsar names the partitions of a partitioned topic ``<topic>-partition-<n>``: a topic of its
#: own may not be named so.
_PULSAR_PARTITION_RE = re.compile(r"-partition-[0-9]+$")
_ENTRYPOINT_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")
_MEMORY_RE = re.compile(r"^[1-9][0-9]*[kmgtKMGT]?$")
#: A Kubernetes object name (DNS-1123 subdomain), for ``spec.className``.
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_HEADER_PREFIX: Final = "dlq."


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
        starting_offsets=f.choice("startingOffsets", STARTING_OFFSETS, DEFAULTS.source.starting_offsets),
        max_offsets_per_trigger=f.integer(
            "maxOffsetsPerTrigger", DEFAULTS.source.max_offsets_per_trigger, minimum=0
        ),
        ordering=f.choice("ordering", ORDERING_MODES, DEFAULTS.source.ordering),
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
        mode=f.choice("mode", PROCESSOR_MODES, DEFAULTS.processor.mode),
        timeout_ms=f.duration("timeout", DEFAULTS.processor.timeout_ms),
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
    error_window = ErrorWindow(
        size=f.integer("size", DEFAULTS.error_window.size, minimum=0),
        threshold=f.number("threshold", DEFAULTS.error_window.threshold),
    )
    if not 0.0 < error_window.threshold <= 1.0:
        f.fail(f.at("threshold"), f"must be greater than 0 and at most 1, got {error_window.threshold}")
    f.done()

    topics = _parse_topics(spec.child("topics"))
    if broker.type == "pulsar":
        _check_pulsar_topics(spec.child("topics"), broker, topics)
    spark = _parse_spark(spec.child("spark"))
    suspend = spec.boolean("suspend", False)
    ordering = _parse_ordering(spec, source)
    class_name = spec.string("className", DEFAULTS.class_name)
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
    broker_type = f.choice("type", BROKER_TYPES, DEFAULTS.broker.type)
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
        on_dead_letter=f.choice("onDeadLetter", ON_DEAD_LETTER, DEFAULTS.ordering.on_dead_letter),
        max_held_per_key=f.integer("maxHeldPerKey", DEFAULTS.ordering.max_held_per_key, minimum=1),
        max_held_total=f.integer("maxHeldTotal", DEFAULTS.ordering.max_held_total, minimum=1),
        max_hold_ms=f.duration("maxHoldTime", DEFAULTS.ordering.max_hold_ms),
        on_overflow=f.choice("onOverflow", ON_OVERFLOW, DEFAULTS.ordering.on_overflow),
    )
    if present and source.ordering != "key":
        f.fail(f.path, f"is only read with spec.source.ordering key, got {source.ordering!r}")
    if ordering.max_held_per_key > MAX_HELD_PER_KEY:
        f.fail(f.at("maxHeldPerKey"), f"must be at most {MAX_HELD_PER_KEY}, got {ordering.max_held_per_key}")
    if ordering.max_hold_ms <= 0:
        f.fail(f.at("maxHoldTime"), "must be longer than 0")
    f.done()
    return ordering


def _parse_retry(f: _Fields, broker_type: BrokerType) -> RetrySpec:
    max_redeliver = f.integer("maxRedeliverCount", DEFAULTS.retry.max_redeliver_count, minimum=0)
    topic = _topic(f, "topic", broker_type)
    backoff = _parse_backoff(f.child("backoff"))
    non_retryable = f.string_list("nonRetryableErrors")
    budget = f.duration("maxRetryDuration", DEFAULTS.retry.max_retry_duration_ms)
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
        window=f.integer("window", DEFAULT_BREAKER.window, minimum=1),
        threshold=f.number("threshold", DEFAULT_BREAKER.threshold),
        open_ms=f.duration("openTime", DEFAULT_BREAKER.open_ms),
        probes=f.integer("probes", DEFAULT_BREAKER.probes, minimum=1),
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
        type=b.choice("type", BACKOFF_TYPES, DEFAULTS.retry.backoff.type),
        delay_ms=b.duration("delay", DEFAULTS.retry.backoff.delay_ms),
        multiplier=b.number("multiplier", DEFAULTS.retry.backoff.multiplier),
        max_delay_ms=b.duration("maxDelay", DEFAULTS.retry.backoff.max_delay_ms),
        jitter=b.number("jitter", DEFAULTS.retry.backoff.jitter),
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
        strategy=f.choice("strategy", DEAD_LETTER_STRATEGIES, DEFAULTS.dead_letter.strategy),
        topic=_topic(f, "topic", broker_type),
        include_stack_trace=f.boolean("includeStackTrace", DEFAULTS.dead_letter.include_stack_trace),
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
        format=f.choice("format", DEAD_LETTER_TABLE_FORMATS, DEFAULT_TABLE.format),
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
    strimzi = StrimziTarget(
        namespace=s.string("namespace", DEFAULTS.topics.strimzi.namespace),
        cluster=s.string("cluster", DEFAULTS.topics.strimzi.cluster),
    )
    s.done()
    topics = Topics(
        create=f.boolean("create", DEFAULTS.topics.create),
        provisioner=f.choice("provisioner", PROVISIONERS, DEFAULTS.topics.provisioner),
        strimzi=strimzi,
        partitions=f.integer("partitions", DEFAULTS.topics.partitions, minimum=0),
        replication_factor=f.integer("replicationFactor", DEFAULTS.topics.replication_factor, minimum=-1),
        retry_config=f.string_map("retryConfig"),
        dead_letter_config=f.string_map("deadLetterConfig"),
        delete_with_policy=f.boolean("deleteWithPolicy", DEFAULTS.topics.delete_with_policy),
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
        image=f.string("image", DEFAULTS.spark.image),
        trigger_ms=f.duration("trigger", DEFAULTS.spark.trigger_ms),
        checkpoint_location=f.string("checkpointLocation", DEFAULTS.spark.checkpoint_location),
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
        priority_class_name=f.string("priorityClassName", DEFAULTS.spark.pod.priority_class_name),
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
        cores=f.integer("cores", DEFAULTS.spark.executor.cores, minimum=1),
        memory=f.string("memory", DEFAULTS.spark.executor.memory),
        instances=f.integer("instances", DEFAULTS.spark.executor.instances, minimum=1) if executor else 1,
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
