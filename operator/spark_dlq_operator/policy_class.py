"""The DeadLetterPolicyClass: what the platform team lets the policies of a class do.

A policy author is trusted with their own namespace, nothing more (docs/security.md). Everything
a policy says that reaches a pod, a path, a broker or an image is therefore decided against a
class the platform team owns: the class gives defaults (merged under the policy), the brokers a
policy may name (and the operator's credentials for them), the images, the sparkConf keys, the
limits, where checkpoints and dead-letter tables live, and how the Spark pods fit the cluster.
``govern`` turns a policy as written into the policy as it runs (``Governed``), or refuses it
with an ``Issue`` per problem naming the policy's field and the class's rule.

Pure: no I/O. Governing a policy by its class is ``governance.py``'s; reading classes,
namespaces and Secrets is ``classes.py``'s; rendering what ``govern`` returns is ``render.py``'s. The sparkConf keys no class can allow are listed here
once; the DeadLetterPolicy CRD's rules are generated from the list (tests/unit/test_policy_class.py
keeps them in step) so the API server refuses them at admission with the same words.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

from dlq_engine.model import DeadLetterPolicy, Issue, PolicyError, format_ms, parse_policy
from dlq_engine.model.policy import (
    API_VERSION,
    BROKER_TYPES,
    KIND,
    MISSING,
    BrokerType,
    FieldReader,
    PodSettings,
    read_pod_settings,
)
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.reasons import Reason

CLASS_KIND: Final = "DeadLetterPolicyClass"
CLASS_PLURAL: Final = "deadletterpolicyclasses"
#: The annotation that marks the default class (as StorageClass and IngressClass do).
DEFAULT_CLASS_ANNOTATION: Final = "sparkdlq.io/is-default-class"
#: The class in force when the cluster holds no DeadLetterPolicyClass object.
BUILT_IN_NAME: Final = "built-in"
#: The key of a class's ``operatorSecretRef`` when it names none.
DEFAULT_SECRET_KEY: Final = "client.properties"

#: The ``spec.spark.pod`` fields a class may let its policies set (``spec.pods.policyMayOverride``).
PodField = Literal["nodeSelector", "tolerations", "affinity", "priorityClassName", "labels", "annotations"]
POD_FIELDS: Final[tuple[PodField, ...]] = get_args(PodField)

#: The policy fields a class may default (``spec.defaults``), as dotted paths below ``spec``. The
#: DeadLetterPolicy CRD gives none of them a default of its own (the model's built-in default
#: applies when neither the policy nor its class sets one). Not ``retry.breaker``: its presence
#: turns it on, so a class default would switch it on for every policy of the class, including
#: those that cannot have one yet (docs/reference.md, section 7).
DEFAULTABLE: Final = (
    "retry.maxRedeliverCount",
    "retry.backoff.type",
    "retry.backoff.delay",
    "retry.backoff.multiplier",
    "retry.backoff.maxDelay",
    "retry.backoff.jitter",
    "retry.backoff.levels",
    "retry.maxRetryDuration",
    "retry.nonRetryableErrors",
    "processor.timeout",
    "deadLetter.includeStackTrace",
    "deadLetter.headerProfiles",
    "topics.retryConfig",
    "topics.deadLetterConfig",
    "topics.partitions",
    "topics.replicationFactor",
    "spark.trigger",
    "spark.driver.cores",
    "spark.driver.memory",
    "spark.executor.instances",
    "spark.executor.cores",
    "spark.executor.memory",
)
#: Mappings among them whose keys are the user's (merged key by key, not checked against a schema).
_DEFAULTABLE_MAPS: Final = frozenset({"topics.retryConfig", "topics.deadLetterConfig"})

#: The sparkConf keys a policy may set when its class says nothing (``spec.sparkConf.allowed``):
#: resources and tuning. A key ending in ``*`` allows every key it starts.
DEFAULT_SPARK_CONF_ALLOWED: Final = (
    "spark.kubernetes.driver.request.cores",
    "spark.kubernetes.executor.request.cores",
    "spark.kubernetes.driver.limit.cores",
    "spark.kubernetes.executor.limit.cores",
    "spark.driver.memoryOverhead",
    "spark.executor.memoryOverhead",
    "spark.driver.memoryOverheadFactor",
    "spark.executor.memoryOverheadFactor",
    "spark.sql.shuffle.partitions",
    "spark.default.parallelism",
    "spark.memory.fraction",
    "spark.memory.storageFraction",
    "spark.network.timeout",
    "spark.executor.heartbeatInterval",
    "spark.sql.streaming.stateStore.rocksdb.*",
    "spark.sql.streaming.metricsEnabled",
    "spark.sql.execution.arrow.maxRecordsPerBatch",
    "spark.python.worker.memory",
    "spark.kubernetes.allocation.batch.size",
)


@dataclass(frozen=True, slots=True)
class ForbiddenConf:
    """sparkConf keys no class can allow a policy (exact, or a prefix ending in ``*``): what
    they would do is the operator's or the platform's, and ``instead`` says where it comes from.
    spark-submit takes the last value of a key, so a policy's value would win over the
    operator's. ``platform_may_set``: a class's ``spec.sparkConf.fixed`` may set them (JVM
    options, class paths: the platform team is trusted); the others are the operator's own."""

    keys: tuple[str, ...]
    instead: str
    platform_may_set: bool = False

    def matches(self, key: str) -> bool:
        return any(conf_key_matches(pattern, key) for pattern in self.keys)


FORBIDDEN_SPARK_CONF: Final = (
    ForbiddenConf(
        (
            "spark.master",
            "spark.submit.deployMode",
            "spark.kubernetes.namespace",
            "spark.kubernetes.context",
            "spark.kubernetes.driver.master",
        ),
        "the operator submits every job in cluster mode to the policy's own namespace",
    ),
    ForbiddenConf(
        (
            "spark.kubernetes.authenticate.*",
            "spark.kubernetes.driver.serviceAccountName",
            "spark.kubernetes.executor.serviceAccountName",
        ),
        "the Spark pods' service account comes from the policy's class (spec.pods.serviceAccountName)",
    ),
    ForbiddenConf(
        (
            "spark.kubernetes.driver.volumes.*",
            "spark.kubernetes.executor.volumes.*",
            "spark.kubernetes.driver.secrets.*",
            "spark.kubernetes.executor.secrets.*",
            "spark.kubernetes.driver.secretKeyRef.*",
            "spark.kubernetes.executor.secretKeyRef.*",
            "spark.kubernetes.kerberos.*",
            "spark.kubernetes.hadoop.*",
        ),
        "volumes and secrets are mounted by the operator only: use spec.broker.secretRef for the "
        "Kafka client's settings; checkpoints and dead-letter tables live where the policy's class "
        "says (spec.storage)",
    ),
    ForbiddenConf(
        (
            "spark.kubernetes.driver.podTemplate*",
            "spark.kubernetes.executor.podTemplate*",
            "spark.kubernetes.driver.pod.*",
            "spark.kubernetes.executor.pod.*",
            "spark.kubernetes.driver.label.*",
            "spark.kubernetes.executor.label.*",
            "spark.kubernetes.driver.annotation.*",
            "spark.kubernetes.executor.annotation.*",
            "spark.kubernetes.node.selector.*",
            "spark.kubernetes.driver.node.selector.*",
            "spark.kubernetes.executor.node.selector.*",
            "spark.kubernetes.scheduler.name",
            "spark.kubernetes.driver.scheduler.name",
            "spark.kubernetes.executor.scheduler.name",
        ),
        "use spec.spark.pod (nodeSelector, tolerations, affinity, priorityClassName, labels, "
        "annotations) as far as the policy's class allows (spec.pods.policyMayOverride)",
    ),
    ForbiddenConf(
        (
            "spark.kubernetes.container.image*",
            "spark.kubernetes.driver.container.image",
            "spark.kubernetes.executor.container.image",
        ),
        "use spec.spark.image (an image the policy's class allows, spec.images); pull secrets come "
        "from the class (spec.pods.imagePullSecrets)",
    ),
    ForbiddenConf(
        ("spark.jars*", "spark.files", "spark.archives", "spark.submit.pyFiles", "spark.pyspark.*"),
        "code comes from the engine image: build the processor into an image the policy's class "
        "allows (spec.spark.image)",
    ),
    ForbiddenConf(
        (
            "spark.driver.extraJavaOptions",
            "spark.executor.extraJavaOptions",
            "spark.driver.defaultJavaOptions",
            "spark.executor.defaultJavaOptions",
            "spark.driver.extraClassPath",
            "spark.executor.extraClassPath",
            "spark.driver.extraLibraryPath",
            "spark.executor.extraLibraryPath",
            "spark.kubernetes.driverEnv.*",
            "spark.executorEnv.*",
        ),
        "JVM options, class paths and the pods' environment are the platform's (the class's "
        "spec.sparkConf.fixed)",
        platform_may_set=True,
    ),
    ForbiddenConf(
        ("spark.sql.streaming.checkpointLocation",),
        "the policy's class decides where checkpoints live (spec.storage.checkpointBase)",
        platform_may_set=True,
    ),
)

#: Why ``spec.spark.checkpointLocation`` and ``spec.deadLetter.table.path`` are refused in a
#: policy (the CRD's messages say the same).
NEVER_CHECKPOINT: Final = (
    "is never allowed in a policy: the policy's class decides where checkpoints live "
    "(<checkpointBase>/<namespace>/<name>, DeadLetterPolicyClass spec.storage.checkpointBase)"
)
NEVER_TABLE_PATH: Final = (
    "is never allowed in a policy: the policy's class decides where dead-letter tables live "
    "(<deadLetterTableBase>/<namespace>/<name>, DeadLetterPolicyClass spec.storage.deadLetterTableBase)"
)


def conf_key_matches(pattern: str, key: str) -> bool:
    """A sparkConf key against an allow- or deny-list entry: equal, or ``pattern`` ends in ``*``
    and ``key`` starts with what comes before it."""
    return key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern


def forbidden(key: str) -> ForbiddenConf | None:
    """The entry of ``FORBIDDEN_SPARK_CONF`` that refuses ``key``, if one does."""
    return next((group for group in FORBIDDEN_SPARK_CONF if group.matches(key)), None)


def never_allowed_message(group: ForbiddenConf) -> str:
    return f"is never allowed in a policy: {group.instead}"


def forbidden_conf_rules() -> list[dict[str, str]]:
    """The CEL rules of the DeadLetterPolicy CRD's ``spec.spark.sparkConf``: one per entry of
    ``FORBIDDEN_SPARK_CONF``, whose message names the first offending key."""
    rules: list[dict[str, str]] = []
    for group in FORBIDDEN_SPARK_CONF:
        predicate = " || ".join(
            f"k.startsWith('{key[:-1]}')" if key.endswith("*") else f"k == '{key}'" for key in group.keys
        )
        rules.append(
            {
                "rule": f"!self.exists(k, {predicate})",
                "reason": "FieldValueForbidden",
                "message": f"holds a key ({', '.join(group.keys)}) that {never_allowed_message(group)}",
                "messageExpression": (f'self.filter(k, {predicate})[0] + " {never_allowed_message(group)}"'),
            }
        )
    return rules


# --- the class ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SecretKeyRef:
    """A key of a Secret in the operator's own namespace (Kafka: librdkafka ``key=value``
    lines), or, with ``files``, every key of it (Pulsar: ``dlq_engine.model.pulsar_client``)."""

    name: str
    key: str = DEFAULT_SECRET_KEY
    files: bool = False


@dataclass(frozen=True, slots=True)
class BrokerEntry:
    """One broker a class's policies may name (``spec.brokers[i]``)."""

    type: BrokerType = "kafka"
    bootstrap_servers: str = ""
    service_url: str = ""
    admin_url: str = ""
    #: The operator's own credentials for this broker, in the operator's namespace: librdkafka
    #: ``key=value`` lines (Kafka), the Pulsar client's keys (Pulsar); None: the operator uses no
    #: credentials of its own for this broker.
    operator_secret: SecretKeyRef | None = None
    #: The Secret (in the policy's namespace) the engine mounts; a policy's own
    #: ``spec.broker.secretRef`` must then be absent or name the same.
    engine_secret_name: str = ""
    #: Only in the built-in class: the operator's ``--kafka-config`` is its credentials here.
    command_line_credentials: bool = False
    #: Kafka: the Strimzi cluster of these bootstrap servers (``spec.brokers[i].strimzi``), where
    #: the strimzi provisioner writes the KafkaTopics: its namespace and name; empty: a policy
    #: may name none.
    strimzi_namespace: str = ""
    strimzi_cluster: str = ""

    @property
    def address(self) -> str:
        return self.service_url if self.type == "pulsar" else self.bootstrap_servers

    def as_policy_broker(self) -> dict[str, Any]:
        """The ``spec.broker`` of a policy that names none."""
        if self.type == "pulsar":
            broker: dict[str, Any] = {"type": "pulsar", "serviceUrl": self.service_url}
            if self.admin_url:
                broker["adminUrl"] = self.admin_url
        else:
            broker = {"type": "kafka", "bootstrapServers": self.bootstrap_servers}
        if self.engine_secret_name:
            broker["secretRef"] = {"name": self.engine_secret_name}
        return broker


@dataclass(frozen=True, slots=True)
class Images:
    #: Empty: the operator's ``--spark-image``.
    default: str = ""
    #: Exact names, or prefixes ending in ``*``; the default is always allowed.
    allowed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SparkConfRules:
    allowed: tuple[str, ...] = DEFAULT_SPARK_CONF_ALLOWED
    #: Set by the platform on every policy of the class, last; a policy cannot change them.
    fixed: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    max_instances: int | None = None
    max_cores: int | None = None
    max_memory: str | None = None


@dataclass(frozen=True, slots=True)
class Limits:
    max_redeliver_count: int | None = None
    min_trigger_ms: int = 0
    driver: ResourceLimits = field(default_factory=ResourceLimits)
    executor: ResourceLimits = field(default_factory=ResourceLimits)


@dataclass(frozen=True, slots=True)
class Storage:
    #: Empty: the operator's ``--checkpoint-base``; a policy's checkpoint is ``<base>/<ns>/<name>``.
    checkpoint_base: str = ""
    #: A PersistentVolumeClaim (in the policy's namespace) mounted at the checkpoint base. Empty:
    #: the operator's ``--checkpoint-claim`` when the class keeps the operator's base, else none.
    checkpoint_claim: str = ""
    #: A policy's dead-letter table is ``<base>/<ns>/<name>``; empty: no tables in this class.
    dead_letter_table_base: str = ""


@dataclass(frozen=True, slots=True)
class Pods:
    """How the Spark pods of the class's policies fit the cluster."""

    #: Empty: the service account the operator gives each policy; else this existing one,
    #: shared by every policy of the class in a namespace.
    service_account_name: str = ""
    service_account_annotations: Mapping[str, str] = field(default_factory=dict)
    executor_service_account_token: bool = False
    image_pull_secrets: tuple[str, ...] = ()
    settings: PodSettings = field(default_factory=PodSettings)
    policy_may_override: tuple[PodField, ...] = ()


@dataclass(frozen=True, slots=True)
class PolicyClass:
    name: str
    is_default: bool = False
    #: A ``metav1.LabelSelector``; empty selects every namespace.
    namespace_selector: Mapping[str, Any] = field(default_factory=dict)
    #: A partial DeadLetterPolicy spec (only ``DEFAULTABLE`` fields) merged under each policy's.
    defaults: Mapping[str, Any] = field(default_factory=dict)
    #: Empty: a policy may name any broker, and the operator uses no credentials of its own.
    brokers: tuple[BrokerEntry, ...] = ()
    images: Images = field(default_factory=Images)
    spark_conf: SparkConfRules = field(default_factory=SparkConfRules)
    limits: Limits = field(default_factory=Limits)
    storage: Storage = field(default_factory=Storage)
    pods: Pods = field(default_factory=Pods)


#: What governs policies when the cluster holds no DeadLetterPolicyClass: today's behaviour where
#: it is safe (the chart's default class, ``defaultClass`` in its values, is the same).
BUILT_IN_CLASS: Final = PolicyClass(name=BUILT_IN_NAME)


@dataclass(frozen=True, slots=True)
class InvalidClass:
    """A class object whose spec the operator cannot use; a policy it would govern is Invalid."""

    name: str
    is_default: bool
    issues: tuple[Issue, ...]


def built_in_class(config: OperatorConfig) -> PolicyClass:
    """``BUILT_IN_CLASS``, with the brokers ``--kafka-config-brokers`` names (the operator's
    ``--kafka-config`` being its credentials for them, and for no other broker)."""
    if not config.kafka_config_brokers:
        return BUILT_IN_CLASS
    entries = tuple(
        BrokerEntry(bootstrap_servers=address, command_line_credentials=True)
        for address in config.kafka_config_brokers
    )
    return replace(BUILT_IN_CLASS, brokers=entries)


def read_class(obj: Mapping[str, Any]) -> PolicyClass | InvalidClass:
    """``parse_class``, with a class that fails it kept as an ``InvalidClass``."""
    try:
        return parse_class(obj)
    except PolicyError as error:
        metadata = obj.get("metadata") or {}
        return InvalidClass(str(metadata.get("name", "")), _is_default(metadata), error.issues)


def _is_default(metadata: Mapping[str, Any]) -> bool:
    return str((metadata.get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true"


def parse_class(obj: Mapping[str, Any]) -> PolicyClass:
    """A DeadLetterPolicyClass object as the operator uses it. Raises PolicyError naming every
    problem (paths below the class: ``spec.images.allowed[0]``)."""
    issues: list[Issue] = []
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name") or "")
    if not name:
        issues.append(Issue("metadata.name", "is required"))
    spec = FieldReader(obj.get("spec"), "spec", issues)
    selector = spec.get("namespaceSelector")
    namespace_selector: Mapping[str, Any] = {}
    if selector is not MISSING:
        namespace_selector = _parse_selector(selector, "spec.namespaceSelector", issues)
    defaults = spec.get("defaults")
    cls = PolicyClass(
        name=name,
        is_default=_is_default(metadata),
        namespace_selector=namespace_selector,
        defaults=_parse_defaults(defaults, issues) if defaults is not MISSING else {},
        brokers=_parse_brokers(spec, issues),
        images=_parse_images(spec.child("images")),
        spark_conf=_parse_spark_conf(spec.child("sparkConf")),
        limits=_parse_limits(spec.child("limits")),
        storage=_parse_storage(spec.child("storage")),
        pods=_parse_pods(spec.child("pods")),
    )
    spec.done()
    if not issues:
        _check_defaults_within_limits(cls, issues)
    if issues:
        raise PolicyError(issues)
    return cls


def _parse_selector(raw: object, path: str, issues: list[Issue]) -> Mapping[str, Any]:
    f = FieldReader(raw, path, issues)
    labels = f.string_map("matchLabels")
    expressions: list[dict[str, Any]] = []
    raw_expressions = f.get("matchExpressions")
    if raw_expressions is not MISSING:
        if not isinstance(raw_expressions, list):
            f.fail(f.at("matchExpressions"), "must be a list")
            raw_expressions = []
        for index, item in enumerate(raw_expressions):
            e = FieldReader(item, f"{f.at('matchExpressions')}[{index}]", issues)
            operator = e.choice("operator", _SELECTOR_OPERATORS, "In")
            values = list(e.string_list("values"))
            expressions.append({"key": e.string("key"), "operator": operator, "values": values})
            if operator in ("In", "NotIn") and not values:
                e.fail(e.at("values"), f"must not be empty with operator {operator}")
            if operator in ("Exists", "DoesNotExist") and values:
                e.fail(e.at("values"), f"must be empty with operator {operator}")
            e.done()
    f.done()
    selector: dict[str, Any] = {}
    if labels:
        selector["matchLabels"] = labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")

#: A policy, in the CRD's shape, to check a class's defaults through the policy model with.
_SKELETON: Final[Mapping[str, Any]] = {
    "apiVersion": API_VERSION,
    "kind": KIND,
    "metadata": {"name": "defaults", "namespace": "class"},
    "spec": {
        "source": {"topic": "source", "subscription": "class"},
        "broker": {"bootstrapServers": "broker:9092"},
        "processor": {"entrypoint": "class:defaults"},
    },
}


def _parse_defaults(raw: object, issues: list[Issue]) -> Mapping[str, Any]:
    path = "spec.defaults"
    if not isinstance(raw, Mapping):
        issues.append(Issue(path, "must be a mapping: a partial DeadLetterPolicy spec"))
        return {}
    unknown = sorted(set(_leaves(raw)) - set(DEFAULTABLE))
    for leaf in unknown:
        issues.append(
            Issue(f"{path}.{leaf}", f"is not a field a class may default (one of {', '.join(DEFAULTABLE)})")
        )
    if unknown:
        return {}
    document = copy.deepcopy(dict(_SKELETON))
    document["spec"] = deep_merge(raw, document["spec"])
    try:
        parse_policy(document)
    except PolicyError as error:
        issues.extend(Issue(f"{path}{i.path.removeprefix('spec')}", i.message) for i in error.issues)
    return copy.deepcopy(dict(raw))


def _leaves(raw: Mapping[str, Any], prefix: str = "") -> list[str]:
    found: list[str] = []
    for key, value in raw.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and path not in _DEFAULTABLE_MAPS:
            found.extend(_leaves(value, path) if value else [path])
        else:
            found.append(path)
    return found


def _parse_brokers(spec: FieldReader, issues: list[Issue]) -> tuple[BrokerEntry, ...]:
    raw = spec.get("brokers")
    if raw is MISSING:
        return ()
    if not isinstance(raw, list):
        spec.fail(spec.at("brokers"), "must be a list of brokers")
        return ()
    entries: list[BrokerEntry] = []
    for index, item in enumerate(raw):
        b = FieldReader(item, f"spec.brokers[{index}]", issues)
        kind = b.choice("type", BROKER_TYPES, "kafka")
        pulsar = kind == "pulsar"
        operator_secret = None
        if b.get("operatorSecretRef") is not MISSING:
            s = b.child("operatorSecretRef")
            if pulsar:
                # Every key of the Secret is one of the Pulsar client's (token, ca.crt, ...).
                operator_secret = SecretKeyRef(name=s.string("name"), key="", files=True)
                if s.get("key") not in (MISSING, DEFAULT_SECRET_KEY):  # the CRD's default
                    s.fail(
                        s.at("key"),
                        "is for type kafka: on Pulsar the Secret's keys are the client's "
                        "(token, ca.crt, tls.crt, tls.key, oauth2.*)",
                    )
            else:
                operator_secret = SecretKeyRef(name=s.string("name"), key=s.string("key", DEFAULT_SECRET_KEY))
            s.done()
        strimzi = ("", "")
        if b.get("strimzi") is not MISSING:
            z = b.child("strimzi")
            strimzi = (z.string("namespace"), z.string("cluster"))
            z.done()
            if pulsar:
                b.fail(b.at("strimzi"), "is for type kafka: Strimzi runs Kafka clusters")
        entry = BrokerEntry(
            type=kind,
            bootstrap_servers=b.string("bootstrapServers", "" if pulsar else None),
            service_url=b.string("serviceUrl", None if pulsar else ""),
            admin_url=b.string("adminUrl", ""),
            operator_secret=operator_secret,
            engine_secret_name=b.string("engineSecretName", ""),
            strimzi_namespace=strimzi[0],
            strimzi_cluster=strimzi[1],
        )
        if pulsar and entry.bootstrap_servers:
            b.fail(
                b.at("bootstrapServers"), "is for type kafka: a pulsar broker takes serviceUrl and adminUrl"
            )
        if not pulsar and (entry.service_url or entry.admin_url):
            b.fail(b.path, "serviceUrl and adminUrl are for type pulsar")
        b.done()
        entries.append(entry)
    return tuple(entries)


def _parse_images(f: FieldReader) -> Images:
    images = Images(default=f.string("default", ""), allowed=f.string_list("allowed"))
    f.done()
    return images


def _parse_spark_conf(f: FieldReader) -> SparkConfRules:
    allowed = f.string_list("allowed") if f.get("allowed") is not MISSING else DEFAULT_SPARK_CONF_ALLOWED
    fixed = f.string_map("fixed")
    for key in fixed:
        group = forbidden(key)
        if group is not None and not group.platform_may_set:
            f.fail(f"{f.at('fixed')}.{key}", f"is the operator's: {group.instead}")
    f.done()
    return SparkConfRules(allowed=allowed, fixed=fixed)


def _parse_limits(f: FieldReader) -> Limits:
    def resources(r: FieldReader, *, executor: bool) -> ResourceLimits:
        limits = ResourceLimits(
            max_instances=_optional_int(r, "maxInstances") if executor else None,
            max_cores=_optional_int(r, "maxCores"),
            max_memory=r.string("maxMemory", "") or None,
        )
        if limits.max_memory is not None and memory_bytes(limits.max_memory) is None:
            r.fail(
                r.at("maxMemory"), f"must be a JVM memory size such as 512m or 2g, got {limits.max_memory!r}"
            )
        r.done()
        return limits

    limits = Limits(
        max_redeliver_count=_optional_int(f, "maxRedeliverCount", minimum=0),
        min_trigger_ms=f.duration("minTrigger", 0),
        driver=resources(f.child("driver"), executor=False),
        executor=resources(f.child("executor"), executor=True),
    )
    f.done()
    return limits


def _optional_int(f: FieldReader, key: str, *, minimum: int = 1) -> int | None:
    if f.get(key) is MISSING:
        return None
    return f.integer(key, minimum, minimum=minimum)


def _parse_storage(f: FieldReader) -> Storage:
    storage = Storage(
        checkpoint_base=f.string("checkpointBase", "").rstrip("/"),
        checkpoint_claim=f.string("checkpointClaim", ""),
        dead_letter_table_base=f.string("deadLetterTableBase", "").rstrip("/"),
    )
    f.done()
    return storage


def _parse_pods(f: FieldReader) -> Pods:
    secrets: list[str] = []
    raw = f.get("imagePullSecrets")
    if raw is not MISSING:
        if not isinstance(raw, list):
            f.fail(f.at("imagePullSecrets"), "must be a list of {name: ...}")
            raw = []
        for index, item in enumerate(raw):
            s = FieldReader(item, f"{f.at('imagePullSecrets')}[{index}]", f.issues)
            secrets.append(s.string("name"))
            s.done()
    may_override: list[PodField] = []
    for index, item in enumerate(f.string_list("policyMayOverride")):
        if item not in POD_FIELDS:
            f.fail(
                f"{f.at('policyMayOverride')}[{index}]",
                f"must be one of {', '.join(POD_FIELDS)}, got {item!r}",
            )
        elif item not in may_override:
            may_override.append(item)
    pods = Pods(
        service_account_name=f.string("serviceAccountName", ""),
        service_account_annotations=f.string_map("serviceAccountAnnotations"),
        executor_service_account_token=f.boolean("executorServiceAccountToken", False),
        image_pull_secrets=tuple(secrets),
        settings=read_pod_settings(f),
        policy_may_override=tuple(may_override),
    )
    f.done()
    return pods


def _check_defaults_within_limits(cls: PolicyClass, issues: list[Issue]) -> None:
    """A class's defaults, and the model's where the class sets none, must pass its own limits:
    else every policy that takes them would be refused."""
    document = copy.deepcopy(dict(_SKELETON))
    document["spec"] = deep_merge(cls.defaults, document["spec"])
    set_here = set(_leaves(cls.defaults))
    for issue in limit_issues(parse_policy(document), cls):
        path = issue.path.removeprefix("spec.")
        hint = (
            "" if path in set_here else " (the built-in default: give the class a default within the limit)"
        )
        issues.append(Issue(f"spec.defaults.{path}", issue.message + hint))


# --- choosing a policy's class -----------------------------------------------------------------


class ClassRefusal(PolicyError):
    """A policy its class refuses (or that has no usable class): ``reason`` for its Ready
    condition, ``issues`` naming the policy's fields and the class's rules."""

    def __init__(self, reason: Reason, issues: Sequence[Issue]) -> None:
        super().__init__(issues)
        self.reason = reason


def select_class(
    policy: Mapping[str, Any],
    classes: Sequence[PolicyClass | InvalidClass],
    *,
    built_in: PolicyClass = BUILT_IN_CLASS,
) -> PolicyClass:
    """The class that governs ``policy`` (an object as the API server returns it): the one its
    ``spec.className`` names, else the one class marked default, else ``built_in`` when the
    cluster holds no class at all. Raises ClassRefusal."""
    spec = policy.get("spec") or {}
    name = spec.get("className") if isinstance(spec, Mapping) else None
    if name:
        found = next((c for c in classes if c.name == name), None)
        if found is None:
            known = ", ".join(sorted(c.name for c in classes)) or "none"
            raise ClassRefusal(
                Reason.CLASS_NOT_FOUND,
                [
                    Issue(
                        "spec.className", f"DeadLetterPolicyClass {name!r} does not exist (classes: {known})"
                    )
                ],
            )
        return _usable(found, "spec.className")
    if not classes:
        return built_in
    defaults = sorted((c for c in classes if c.is_default), key=lambda c: c.name)
    marker = f'annotation {DEFAULT_CLASS_ANNOTATION}: "true"'
    if not defaults:
        known = ", ".join(sorted(c.name for c in classes))
        raise ClassRefusal(
            Reason.NO_DEFAULT_CLASS,
            [
                Issue(
                    "spec.className",
                    f"is not set and no DeadLetterPolicyClass is marked default ({marker}): name one "
                    f"of {known}",
                )
            ],
        )
    if len(defaults) > 1:
        names = " and ".join(repr(c.name) for c in defaults)
        raise ClassRefusal(
            Reason.DEFAULT_CLASS_AMBIGUOUS,
            [
                Issue(
                    "spec.className",
                    f"is not set and DeadLetterPolicyClasses {names} are all marked default ({marker}): "
                    "name one, or have the platform team unmark all but one",
                )
            ],
        )
    return _usable(defaults[0], "spec.className")


def _usable(found: PolicyClass | InvalidClass, path: str) -> PolicyClass:
    if isinstance(found, InvalidClass):
        problems = "; ".join(str(i) for i in found.issues)
        raise ClassRefusal(
            Reason.CLASS_INVALID,
            [Issue(path, f"DeadLetterPolicyClass {found.name!r} is invalid: {problems}")],
        )
    return found


def admit_namespace(cls: PolicyClass, namespace: str, labels: Mapping[str, str]) -> None:
    """Raise ClassRefusal when the class's ``namespaceSelector`` does not select the namespace
    (``labels``: the namespace's labels)."""
    if selector_matches(cls.namespace_selector, labels):
        return
    raise ClassRefusal(
        Reason.NAMESPACE_NOT_ALLOWED,
        [
            Issue(
                "metadata.namespace",
                f"{namespace!r} is not allowed by class {cls.name!r} "
                f"(spec.namespaceSelector: {describe_selector(cls.namespace_selector)})",
            )
        ],
    )


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A ``metav1.LabelSelector`` against labels; an empty selector selects everything."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def describe_selector(selector: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or []:
        values = ",".join(e.get("values") or [])
        parts.append(f"{e['key']} {e['operator']}" + (f" ({values})" if values else ""))
    return ", ".join(parts) or "everything"


# --- shared by the class's parser and the governance ---------------------------------------


def deep_merge(under: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged onto ``under``: mappings merged key by key, ``over`` wins, lists and
    other values replace. The result is plain dicts and lists; neither argument is changed."""
    merged: dict[str, Any] = {str(k): _plain(v) for k, v in under.items()}
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[str(key)] = deep_merge(merged[key], value)
        else:
            merged[str(key)] = _plain(value)
    return merged


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return copy.deepcopy(value)


def class_label(cls: PolicyClass) -> str:
    """How a refusal names the class: ``class 'standard'``."""
    return f"class {cls.name!r}"


_MEMORY_UNITS: Final = {"": 2**20, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def memory_bytes(text: str) -> int | None:
    """A JVM memory size in bytes (``512m``, ``2g``; a bare number is MiB, as Spark reads
    ``spark.driver.memory``); None when it is not one."""
    unit = text[-1:].lower() if text[-1:].isalpha() else ""
    digits = text[: -1 if unit else None]
    if not digits.isdigit() or unit not in _MEMORY_UNITS:
        return None
    return int(digits) * _MEMORY_UNITS[unit]


def limit_issues(policy: DeadLetterPolicy, cls: PolicyClass) -> list[Issue]:
    limits = cls.limits
    found: list[Issue] = []

    def more(path: str, value: object, rule: str, limit: object) -> None:
        found.append(
            Issue(path, f"{value} is more than {class_label(cls)} allows (spec.limits.{rule}: {limit})")
        )

    cap = limits.max_redeliver_count
    if cap is not None:
        if policy.retry.max_redeliver_count > cap:
            more("spec.retry.maxRedeliverCount", policy.retry.max_redeliver_count, "maxRedeliverCount", cap)
        for index, rule in enumerate(policy.retry.rules):
            if rule.max_redeliver_count > cap:
                more(
                    f"spec.retry.rules[{index}].maxRedeliverCount",
                    rule.max_redeliver_count,
                    "maxRedeliverCount",
                    cap,
                )
    if policy.spark.trigger_ms < limits.min_trigger_ms:
        found.append(
            Issue(
                "spec.spark.trigger",
                f"{format_ms(policy.spark.trigger_ms)} is shorter than {class_label(cls)} allows "
                f"(spec.limits.minTrigger: {format_ms(limits.min_trigger_ms)})",
            )
        )
    for role, resources, bounds in (
        ("driver", policy.spark.driver, limits.driver),
        ("executor", policy.spark.executor, limits.executor),
    ):
        if bounds.max_instances is not None and resources.instances > bounds.max_instances:
            more(
                f"spec.spark.{role}.instances",
                resources.instances,
                f"{role}.maxInstances",
                bounds.max_instances,
            )
        if bounds.max_cores is not None and resources.cores > bounds.max_cores:
            more(f"spec.spark.{role}.cores", resources.cores, f"{role}.maxCores", bounds.max_cores)
        if bounds.max_memory is not None:
            wanted, cap_bytes = memory_bytes(resources.memory), memory_bytes(bounds.max_memory)
            if wanted is not None and cap_bytes is not None and wanted > cap_bytes:
                more(f"spec.spark.{role}.memory", resources.memory, f"{role}.maxMemory", bounds.max_memory)
    return found
