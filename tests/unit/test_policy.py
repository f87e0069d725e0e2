from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from dlq_engine.model import (
    API_VERSION,
    KIND,
    DeadLetterPolicy,
    Issue,
    PolicyError,
    parse_policy,
    to_document,
    to_spec,
    topic_name_problem,
)
from dlq_engine.model.config_hash import config_hash, engine_config
from dlq_engine.model.policy import (
    KAFKA_CLIENT_DIR,
    PULSAR_CLIENT_DIR,
    BackoffSpec,
    BreakerSpec,
    Broker,
    DeadLetter,
    DeadLetterTable,
    ErrorWindow,
    Output,
    Processor,
    Resources,
    RetrySpec,
    SecretRef,
    Source,
    Spark,
    StrimziTarget,
    Topics,
    pulsar_topic,
)
from tests.policy_builder import DELETE, every_field_document, issues, policy, policy_document

TOPIC_CHARS = "may contain only letters, digits, '.', '_' and '-'"
DURATION_HINT = "must be a duration such as 500ms, 1s or 2m"

# --------------------------------------------------------------------------------------------
# Defaults


#: How the model refuses a retry or DLQ topic whose max.message.bytes is too small.
MESSAGE_BYTES_REFUSAL = (
    "max.message.bytes must be a number of at least 16384: below the producer's "
    "batch.size (16 KiB) the Kafka client retries a refused batch forever (KAFKA-8350)"
)


def test_defaults_identity_and_constants() -> None:
    assert API_VERSION == "sparkdlq.io/v1alpha1"
    assert KIND == "DeadLetterPolicy"


def test_defaults_every_field_of_minimal_policy() -> None:
    # Written out in full, not through the dataclass defaults: a changed default must show here.
    assert policy() == DeadLetterPolicy(
        name="orders-billing",
        namespace="payments",
        source=Source(topic="orders", subscription="billing", starting_offsets="latest"),
        broker=Broker(bootstrap_servers="kafka.kafka:9092", secret_ref=None),
        processor=Processor(entrypoint="billing.handlers:process", mode="message", timeout_ms=30_000),
        output=Output(topic=""),
        retry=RetrySpec(
            max_redeliver_count=16,
            topic="",
            backoff=BackoffSpec(
                type="exponential",
                delay_ms=1_000,
                multiplier=2.0,
                max_delay_ms=600_000,
                jitter=0.0,
                levels_ms=(),
            ),
            non_retryable_errors=(),
        ),
        dead_letter=DeadLetter(strategy="topic", topic="", include_stack_trace=True, headers={}, table=None),
        error_window=ErrorWindow(size=0, threshold=1.0),
        topics=Topics(
            create=True,
            provisioner="auto",
            strimzi=StrimziTarget(namespace="", cluster=""),
            partitions=0,
            replication_factor=-1,
            retry_config={},
            dead_letter_config={},
            delete_with_policy=False,
        ),
        spark=Spark(
            image="",
            trigger_ms=1_000,
            checkpoint_location="",
            driver=Resources(cores=1, memory="1g", instances=1),
            executor=Resources(cores=1, memory="1g", instances=1),
            spark_conf={},
        ),
        suspend=False,
    )


#: The example policy of the reference (docs/reference.md) with every default, in the contract's own shapes.
CONTRACT_DEFAULT_SPEC: dict[str, Any] = {
    "source": {
        "topic": "orders",
        "subscription": "billing",
        "startingOffsets": "latest",
        "maxOffsetsPerTrigger": 0,
        "ordering": "none",
    },
    "broker": {"type": "kafka", "bootstrapServers": "kafka.kafka:9092"},
    "processor": {"entrypoint": "billing.handlers:process", "mode": "message", "timeout": "30s"},
    "output": {"topic": ""},
    "retry": {
        "maxRedeliverCount": 16,
        "topic": "orders-billing-RETRY",
        "backoff": {
            "type": "exponential",
            "delay": "1s",
            "multiplier": 2.0,
            "maxDelay": "10m",
            "jitter": 0.0,
            "levels": [],
        },
        "nonRetryableErrors": [],
        "maxRetryDuration": "0s",
        "rules": [],
    },
    "deadLetter": {
        "strategy": "topic",
        "topic": "orders-billing-DLQ",
        "includeStackTrace": True,
        "headers": {},
        "headerProfiles": ["spark-dlq"],
    },
    "errorWindow": {"size": 0, "threshold": 1.0},
    "topics": {
        "create": True,
        "provisioner": "auto",
        "strimzi": {"namespace": "", "cluster": ""},
        "partitions": 0,
        "replicationFactor": -1,
        "retryConfig": {},
        "deadLetterConfig": {},
        "deleteWithPolicy": False,
    },
    "spark": {
        "image": "",
        "trigger": "1s",
        "checkpointLocation": "",
        "driver": {"cores": 1, "memory": "1g"},
        "executor": {"instances": 1, "cores": 1, "memory": "1g"},
        "sparkConf": {},
        "pod": {},
    },
    "suspend": False,
    "className": "",
}


def test_defaults_to_spec_fills_in_the_contract_defaults() -> None:
    assert to_spec(policy()) == CONTRACT_DEFAULT_SPEC


def test_defaults_namespace_is_default_when_not_written() -> None:
    assert policy({"metadata.namespace": DELETE}).namespace == "default"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("spec.retry.maxRedeliverCount", id="integer"),
        pytest.param("spec.retry.backoff.delay", id="duration"),
        pytest.param("spec.retry.backoff.jitter", id="number"),
        pytest.param("spec.deadLetter.strategy", id="choice"),
        pytest.param("spec.deadLetter.includeStackTrace", id="boolean"),
        pytest.param("spec.spark.sparkConf", id="mapping"),
        pytest.param("spec.output", id="section"),
        pytest.param("spec.retry.topic", id="topic"),
        pytest.param("spec.deadLetter.table", id="dead-letter-table"),
    ],
)
def test_defaults_null_is_the_same_as_omitted(path: str) -> None:
    assert policy({path: None}) == policy()


def test_defaults_processor_module_and_function() -> None:
    processor = policy({"spec.processor.entrypoint": "billing.handlers:process"}).processor
    assert (processor.module, processor.function) == ("billing.handlers", "process")


@pytest.mark.parametrize(
    ("size", "enabled"),
    [pytest.param(0, False, id="zero-disables"), pytest.param(100, True, id="positive")],
)
def test_defaults_error_window_enabled(size: int, enabled: bool) -> None:
    assert policy({"spec.errorWindow.size": size}).error_window.enabled is enabled


def test_defaults_qualified_name_is_namespace_slash_name() -> None:
    assert policy().qualified_name == "payments/orders-billing"


# --------------------------------------------------------------------------------------------
# Derived topic names


def test_derived_retry_topic_is_topic_subscription_retry() -> None:
    assert policy().retry_topic == "orders-billing-RETRY"


def test_derived_dead_letter_topic_is_topic_subscription_dlq() -> None:
    assert policy().dead_letter_topic == "orders-billing-DLQ"


def test_derived_topics_follow_source_and_subscription() -> None:
    p = policy({"spec.source.topic": "payments.v2", "spec.source.subscription": "audit_1"})
    assert (p.retry_topic, p.dead_letter_topic) == ("payments.v2-audit_1-RETRY", "payments.v2-audit_1-DLQ")


def test_derived_topics_explicit_names_win() -> None:
    p = policy({"spec.retry.topic": "billing-retry", "spec.deadLetter.topic": "billing-dead"})
    assert (p.retry_topic, p.dead_letter_topic) == ("billing-retry", "billing-dead")


def test_derived_topics_empty_string_means_derived() -> None:
    p = policy({"spec.retry.topic": "", "spec.deadLetter.topic": ""})
    assert (p.retry_topic, p.dead_letter_topic) == ("orders-billing-RETRY", "orders-billing-DLQ")


def test_derived_topics_written_out_equal_omitted() -> None:
    written = policy(
        {"spec.retry.topic": "orders-billing-RETRY", "spec.deadLetter.topic": "orders-billing-DLQ"}
    )
    assert written == policy()


# --------------------------------------------------------------------------------------------
# Accepted values and their parsed form


@pytest.mark.parametrize(
    ("overrides", "attribute", "expected"),
    [
        pytest.param(
            {"spec.source.startingOffsets": "earliest"},
            "source.starting_offsets",
            "earliest",
            id="starting-offsets-earliest",
        ),
        pytest.param(
            {"spec.broker.secretRef": {"name": "kafka-client"}},
            "broker.secret_ref",
            SecretRef(name="kafka-client"),
            id="secret-ref",
        ),
        pytest.param({"spec.processor.mode": "batch"}, "processor.mode", "batch", id="processor-mode-batch"),
        pytest.param(
            {"spec.processor.timeout": "10s"}, "processor.timeout_ms", 10_000, id="processor-timeout"
        ),
        pytest.param(
            {"spec.processor.entrypoint": "handler:run"},
            "processor.entrypoint",
            "handler:run",
            id="entrypoint-single-module",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "_pkg.mod_2:_fn"},
            "processor.entrypoint",
            "_pkg.mod_2:_fn",
            id="entrypoint-underscores-digits",
        ),
        pytest.param(
            {"spec.output.topic": "orders-billed"}, "output.topic", "orders-billed", id="output-topic"
        ),
        pytest.param({"spec.output.topic": "a" * 249}, "output.topic", "a" * 249, id="topic-249-characters"),
        pytest.param(
            {"spec.retry.maxRedeliverCount": 0},
            "retry.max_redeliver_count",
            0,
            id="max-redeliver-zero-means-no-retry",
        ),
        pytest.param({"spec.retry.backoff.type": "fixed"}, "retry.backoff.type", "fixed", id="backoff-fixed"),
        pytest.param(
            {"spec.retry.backoff.delay": 5}, "retry.backoff.delay_ms", 5_000, id="delay-number-is-seconds"
        ),
        pytest.param(
            {"spec.retry.backoff.multiplier": 1}, "retry.backoff.multiplier", 1.0, id="multiplier-one"
        ),
        pytest.param({"spec.retry.backoff.jitter": 0}, "retry.backoff.jitter", 0.0, id="jitter-zero"),
        pytest.param({"spec.retry.backoff.jitter": 1}, "retry.backoff.jitter", 1.0, id="jitter-one"),
        pytest.param(
            {"spec.retry.backoff.delay": "1m", "spec.retry.backoff.maxDelay": "60s"},
            "retry.backoff.max_delay_ms",
            60_000,
            id="max-delay-equal-to-delay",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "fixed", "spec.retry.backoff.delay": "30m"},
            "retry.backoff.delay_ms",
            1_800_000,
            id="fixed-delay-not-capped-by-max-delay",
        ),
        pytest.param(
            {
                "spec.retry.backoff.type": "levels",
                "spec.retry.backoff.delay": "20m",
                "spec.retry.backoff.levels": ["1s"],
            },
            "retry.backoff.delay_ms",
            1_200_000,
            id="levels-delay-not-capped-by-max-delay",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "levels", "spec.retry.backoff.levels": ["1s", "5s", 10, "1m"]},
            "retry.backoff.levels_ms",
            (1_000, 5_000, 10_000, 60_000),
            id="levels",
        ),
        pytest.param(
            {"spec.retry.nonRetryableErrors": ["ValueError", " billing.BadInput "]},
            "retry.non_retryable_errors",
            ("ValueError", "billing.BadInput"),
            id="non-retryable-errors-stripped",
        ),
        pytest.param(
            {"spec.deadLetter.strategy": "stop"}, "dead_letter.strategy", "stop", id="strategy-stop"
        ),
        pytest.param(
            {"spec.deadLetter.includeStackTrace": False},
            "dead_letter.include_stack_trace",
            False,
            id="no-stack-trace",
        ),
        pytest.param(
            {"spec.deadLetter.headers": {"team": "billing", "priority": 1, "paged": True, "ratio": 0.5}},
            "dead_letter.headers",
            {"team": "billing", "priority": "1", "paged": "true", "ratio": "0.5"},
            id="headers-scalars-become-strings",
        ),
        pytest.param({"spec.errorWindow.threshold": 1}, "error_window.threshold", 1.0, id="threshold-one"),
        pytest.param(
            {"spec.errorWindow.threshold": 0.01}, "error_window.threshold", 0.01, id="threshold-small"
        ),
        pytest.param(
            {
                "spec.topics.provisioner": "strimzi",
                "spec.topics.strimzi": {"namespace": "kafka", "cluster": "my-cluster"},
            },
            "topics.strimzi",
            StrimziTarget(namespace="kafka", cluster="my-cluster"),
            id="strimzi-target",
        ),
        pytest.param(
            {"spec.topics.replicationFactor": 1}, "topics.replication_factor", 1, id="replication-factor-one"
        ),
        pytest.param(
            {"spec.topics.retryConfig": {"retention.ms": 604800000}},
            "topics.retry_config",
            {"retention.ms": "604800000"},
            id="topic-config-number-becomes-string",
        ),
        pytest.param(
            {"spec.topics.deadLetterConfig": {"cleanup.policy": "compact"}},
            "topics.dead_letter_config",
            {"cleanup.policy": "compact"},
            id="dead-letter-topic-config",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": "/data/dead-letters"}},
            "dead_letter.table",
            DeadLetterTable(path="/data/dead-letters", format="delta"),
            id="dead-letter-table-delta-by-default",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"format": "parquet", "path": "s3a://bucket/dead letters/orders"}},
            "dead_letter.table",
            DeadLetterTable(path="s3a://bucket/dead letters/orders", format="parquet"),
            id="dead-letter-table-parquet",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": "/t"}, "spec.deadLetter.strategy": "topic"},
            "dead_letter.table.path",
            "/t",
            id="dead-letter-table-with-strategy-topic-written",
        ),
        pytest.param({"spec.spark.trigger": "500ms"}, "spark.trigger_ms", 500, id="trigger"),
        pytest.param(
            {"spec.spark.executor": {"instances": 3, "cores": 2, "memory": "2G"}},
            "spark.executor",
            Resources(cores=2, memory="2G", instances=3),
            id="executor-resources",
        ),
        pytest.param({"spec.spark.driver.memory": "512m"}, "spark.driver.memory", "512m", id="driver-memory"),
        pytest.param(
            {"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": 4}},
            "spark.spark_conf",
            {"spark.sql.shuffle.partitions": "4"},
            id="spark-conf-number-becomes-string",
        ),
        pytest.param({"spec.suspend": True}, "suspend", True, id="suspend"),
    ],
)
def test_accepts_value(overrides: dict[str, Any], attribute: str, expected: object) -> None:
    value: Any = policy(overrides)
    for name in attribute.split("."):
        value = getattr(value, name)
    assert value == expected


def test_accepts_fields_kubernetes_adds() -> None:
    document = policy_document(
        {
            "metadata.uid": "0b0c7c1e",
            "metadata.resourceVersion": "42",
            "metadata.generation": 3,
            "metadata.labels": {"team": "billing"},
            "metadata.annotations": {"note": "x"},
            "status": {"phase": "Running", "configHash": "9f2c"},
        }
    )
    assert parse_policy(document) == policy()


# --------------------------------------------------------------------------------------------
# Validation: every rule, with the exact message it produces


def _long(n: int) -> str:
    return "t" * n


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # -- the class and the pods' fit
        pytest.param(
            {"spec.className": "Gold Class"},
            ["spec.className: must be a DeadLetterPolicyClass's name, got 'Gold Class'"],
            id="class-name-not-a-name",
        ),
        pytest.param(
            {"spec.spark.pod": {"tolerations": [{"key": "gpu", "operator": "Maybe"}]}},
            ["spec.spark.pod.tolerations[0].operator: must be one of Exists, Equal, got 'Maybe'"],
            id="toleration-operator",
        ),
        pytest.param(
            {"spec.spark.pod": {"affinity": {"nodeAfinity": {}}}},
            [
                "spec.spark.pod.affinity.nodeAfinity: unknown field (one of nodeAffinity, podAffinity, podAntiAffinity)"
            ],
            id="affinity-typo",
        ),
        pytest.param(
            {"spec.spark.pod": {"serviceAccountName": "admin"}},
            ["spec.spark.pod.serviceAccountName: unknown field"],
            id="pod-service-account-is-not-a-policy-field",
        ),
        # -- apiVersion, kind, metadata
        pytest.param(
            {"apiVersion": "sparkdlq.io/v1"},
            ["apiVersion: must be sparkdlq.io/v1alpha1, got 'sparkdlq.io/v1'"],
            id="api-version-wrong",
        ),
        pytest.param(
            {"apiVersion": DELETE},
            ["apiVersion: must be sparkdlq.io/v1alpha1, got None"],
            id="api-version-missing",
        ),
        pytest.param(
            {"kind": "DeadLetterPolicies"},
            ["kind: must be DeadLetterPolicy, got 'DeadLetterPolicies'"],
            id="kind-wrong",
        ),
        pytest.param({"kind": DELETE}, ["kind: must be DeadLetterPolicy, got None"], id="kind-missing"),
        pytest.param(
            {"metadata": DELETE}, ["metadata: is required, with at least a name"], id="metadata-missing"
        ),
        pytest.param(
            {"metadata": "orders-billing"},
            ["metadata: is required, with at least a name"],
            id="metadata-not-mapping",
        ),
        pytest.param({"metadata.name": DELETE}, ["metadata.name: is required"], id="metadata-name-missing"),
        pytest.param({"metadata.name": ""}, ["metadata.name: is required"], id="metadata-name-empty"),
        pytest.param(
            {"metadata.name": ["orders"]}, ["metadata.name: is required"], id="metadata-name-not-string"
        ),
        # -- spec as a whole
        pytest.param(
            {"spec": DELETE},
            [
                "spec: is required",
                "spec.source.topic: is required",
                "spec.source.subscription: is required",
                "spec.broker.bootstrapServers: is required",
                "spec.processor.entrypoint: is required",
            ],
            id="spec-missing",
        ),
        pytest.param(
            {"spec": ["orders"]},
            [
                "spec: must be a mapping, got a list",
                "spec.source.topic: is required",
                "spec.source.subscription: is required",
                "spec.broker.bootstrapServers: is required",
                "spec.processor.entrypoint: is required",
            ],
            id="spec-not-mapping",
        ),
        pytest.param(
            {"spec.retry": 3}, ["spec.retry: must be a mapping, got int 3"], id="section-not-mapping"
        ),
        # -- source
        pytest.param(
            {"spec.source.topic": DELETE}, ["spec.source.topic: is required"], id="source-topic-missing"
        ),
        pytest.param(
            {"spec.source.topic": "  "},
            [
                "spec.source.topic: is required and must not be empty",
                f"spec.source.topic: {TOPIC_CHARS}, got '  '",
                f"spec.retry.topic: (derived) {TOPIC_CHARS}, got '  -billing-RETRY'",
                f"spec.deadLetter.topic: (derived) {TOPIC_CHARS}, got '  -billing-DLQ'",
            ],
            id="source-topic-blank",
        ),
        pytest.param(
            {"spec.source.topic": 42},
            ["spec.source.topic: must be a string, got int 42"],
            id="source-topic-not-string",
        ),
        pytest.param(
            {"spec.source.topic": "orders/v1"},
            [
                f"spec.source.topic: {TOPIC_CHARS}, got 'orders/v1'",
                f"spec.retry.topic: (derived) {TOPIC_CHARS}, got 'orders/v1-billing-RETRY'",
                f"spec.deadLetter.topic: (derived) {TOPIC_CHARS}, got 'orders/v1-billing-DLQ'",
            ],
            id="source-topic-bad-chars",
        ),
        pytest.param(
            {"spec.source.topic": _long(250)},
            [
                "spec.source.topic: must be at most 249 characters, got 250",
                "spec.retry.topic: (derived) must be at most 249 characters, got 264",
                "spec.deadLetter.topic: (derived) must be at most 249 characters, got 262",
            ],
            id="source-topic-too-long",
        ),
        pytest.param(
            {"spec.source.topic": _long(240)},
            [
                "spec.retry.topic: (derived) must be at most 249 characters, got 254",
                "spec.deadLetter.topic: (derived) must be at most 249 characters, got 252",
            ],
            id="derived-topics-too-long",
        ),
        pytest.param(
            {"spec.source.subscription": DELETE},
            ["spec.source.subscription: is required"],
            id="subscription-missing",
        ),
        pytest.param(
            {"spec.source.subscription": ""},
            ["spec.source.subscription: is required and must not be empty"],
            id="subscription-empty",
        ),
        pytest.param(
            {"spec.source.subscription": "bill ing"},
            [
                f"spec.source.subscription: {TOPIC_CHARS} (it is part of the default "
                "topic names), got 'bill ing'",
                f"spec.retry.topic: (derived) {TOPIC_CHARS}, got 'orders-bill ing-RETRY'",
                f"spec.deadLetter.topic: (derived) {TOPIC_CHARS}, got 'orders-bill ing-DLQ'",
            ],
            id="subscription-bad-chars",
        ),
        pytest.param(
            {"spec.source.startingOffsets": "newest"},
            ["spec.source.startingOffsets: must be one of earliest, latest, got 'newest'"],
            id="starting-offsets-bad-enum",
        ),
        # -- broker
        pytest.param(
            {"spec.broker.bootstrapServers": DELETE},
            ["spec.broker.bootstrapServers: is required"],
            id="bootstrap-missing",
        ),
        pytest.param(
            {"spec.broker": DELETE}, ["spec.broker.bootstrapServers: is required"], id="broker-missing"
        ),
        pytest.param(
            {"spec.broker.secretRef": {}},
            ["spec.broker.secretRef.name: is required"],
            id="secret-ref-without-name",
        ),
        pytest.param(
            {"spec.broker.secretRef": "kafka-client"},
            [
                "spec.broker.secretRef: must be a mapping, got the string 'kafka-client'",
                "spec.broker.secretRef.name: is required",
            ],
            id="secret-ref-not-mapping",
        ),
        pytest.param(
            {"spec.broker.secretRef": {"name": "kafka", "key": "password"}},
            ["spec.broker.secretRef.key: unknown field"],
            id="secret-ref-unknown-field",
        ),
        # -- processor
        pytest.param(
            {"spec.processor.entrypoint": DELETE},
            ["spec.processor.entrypoint: is required"],
            id="entrypoint-missing",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "billing.handlers.process"},
            ["spec.processor.entrypoint: must be 'module:function', got 'billing.handlers.process'"],
            id="entrypoint-no-colon",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "billing:handlers:process"},
            ["spec.processor.entrypoint: must be 'module:function', got 'billing:handlers:process'"],
            id="entrypoint-two-colons",
        ),
        pytest.param(
            {"spec.processor.entrypoint": ":process"},
            ["spec.processor.entrypoint: must be 'module:function', got ':process'"],
            id="entrypoint-no-module",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "billing:"},
            ["spec.processor.entrypoint: must be 'module:function', got 'billing:'"],
            id="entrypoint-no-function",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "billing:handlers.process"},
            ["spec.processor.entrypoint: must be 'module:function', got 'billing:handlers.process'"],
            id="entrypoint-dotted-function",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "billing-handlers:process"},
            ["spec.processor.entrypoint: must be 'module:function', got 'billing-handlers:process'"],
            id="entrypoint-dash-in-module",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "1billing:process"},
            ["spec.processor.entrypoint: must be 'module:function', got '1billing:process'"],
            id="entrypoint-module-starts-with-digit",
        ),
        pytest.param(
            {"spec.processor.entrypoint": "billing..handlers:process"},
            ["spec.processor.entrypoint: must be 'module:function', got 'billing..handlers:process'"],
            id="entrypoint-empty-module-part",
        ),
        pytest.param(
            {"spec.processor.mode": "stream"},
            ["spec.processor.mode: must be one of message, batch, arrow, got 'stream'"],
            id="processor-mode-bad-enum",
        ),
        pytest.param(
            {"spec.processor.timeout": "soon"},
            [f"spec.processor.timeout: {DURATION_HINT}, got 'soon'"],
            id="processor-timeout-bad",
        ),
        # -- output
        pytest.param(
            {"spec.output.topic": "orders"},
            ["spec.output.topic: must differ from spec.source.topic ('orders')"],
            id="output-equals-source",
        ),
        pytest.param(
            {"spec.output.topic": "orders-billing-RETRY"},
            ["spec.output.topic: must differ from the retry and dead-letter topics ('orders-billing-RETRY')"],
            id="output-equals-retry",
        ),
        pytest.param(
            {"spec.output.topic": "orders-billing-DLQ"},
            ["spec.output.topic: must differ from the retry and dead-letter topics ('orders-billing-DLQ')"],
            id="output-equals-dead-letter",
        ),
        pytest.param(
            {"spec.output.topic": "billed!"},
            [f"spec.output.topic: {TOPIC_CHARS}, got 'billed!'"],
            id="output-topic-bad-chars",
        ),
        pytest.param(
            {"spec.output.topic": _long(250)},
            ["spec.output.topic: must be at most 249 characters, got 250"],
            id="output-topic-250-characters",
        ),
        pytest.param(
            {"spec.output.topic": "."},
            ["spec.output.topic: must not be '.' or '..', got '.'"],
            id="output-topic-dot",
        ),
        pytest.param(
            {"spec.output.topic": ".."},
            ["spec.output.topic: must not be '.' or '..', got '..'"],
            id="output-topic-dot-dot",
        ),
        # -- retry
        pytest.param(
            {"spec.retry.maxRedeliverCount": -1},
            ["spec.retry.maxRedeliverCount: must be at least 0, got -1"],
            id="max-redeliver-negative",
        ),
        pytest.param(
            {"spec.retry.maxRedeliverCount": 1.5},
            ["spec.retry.maxRedeliverCount: must be a whole number, got 1.5"],
            id="max-redeliver-fraction",
        ),
        pytest.param(
            {"spec.retry.maxRedeliverCount": "3"},
            ["spec.retry.maxRedeliverCount: must be a whole number, got '3'"],
            id="max-redeliver-string",
        ),
        pytest.param(
            {"spec.retry.maxRedeliverCount": True},
            ["spec.retry.maxRedeliverCount: must be a whole number, got True"],
            id="max-redeliver-boolean",
        ),
        pytest.param(
            {"spec.retry.topic": "orders"},
            ["spec.retry.topic: must differ from spec.source.topic ('orders')"],
            id="retry-topic-equals-source",
        ),
        pytest.param(
            {"spec.retry.topic": "retry#1"},
            [f"spec.retry.topic: {TOPIC_CHARS}, got 'retry#1'"],
            id="retry-topic-bad-chars",
        ),
        pytest.param(
            {"spec.retry.topic": ".."},
            ["spec.retry.topic: must not be '.' or '..', got '..'"],
            id="retry-topic-dot-dot",
        ),
        pytest.param(
            {"spec.retry.topic": _long(250)},
            ["spec.retry.topic: must be at most 249 characters, got 250"],
            id="retry-topic-too-long",
        ),
        pytest.param(
            {"spec.retry.topic": "billing-errors", "spec.deadLetter.topic": "billing-errors"},
            ["spec.deadLetter.topic: must differ from the retry topic ('billing-errors')"],
            id="retry-equals-dead-letter",
        ),
        pytest.param(
            {"spec.retry.topic": "orders-billing-DLQ"},
            ["spec.deadLetter.topic: must differ from the retry topic ('orders-billing-DLQ')"],
            id="retry-equals-derived-dead-letter",
        ),
        pytest.param(
            {"spec.retry.topic": "orders", "spec.deadLetter.topic": "orders", "spec.output.topic": "orders"},
            [
                "spec.retry.topic: must differ from spec.source.topic ('orders')",
                "spec.deadLetter.topic: must differ from spec.source.topic ('orders')",
                "spec.output.topic: must differ from spec.source.topic ('orders')",
                "spec.deadLetter.topic: must differ from the retry topic ('orders')",
                "spec.output.topic: must differ from the retry and dead-letter topics ('orders')",
            ],
            id="every-topic-equals-source",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "linear"},
            ["spec.retry.backoff.type: must be one of fixed, exponential, levels, got 'linear'"],
            id="backoff-type-bad-enum",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "Fixed"},
            ["spec.retry.backoff.type: must be one of fixed, exponential, levels, got 'Fixed'"],
            id="backoff-type-case-matters",
        ),
        pytest.param(
            {"spec.retry.backoff.delay": "fast"},
            [f"spec.retry.backoff.delay: {DURATION_HINT}, got 'fast'"],
            id="delay-bad",
        ),
        pytest.param(
            {"spec.retry.backoff.delay": -1},
            ["spec.retry.backoff.delay: must not be negative, got -1"],
            id="delay-negative",
        ),
        pytest.param(
            {"spec.retry.backoff.maxDelay": "forever"},
            [f"spec.retry.backoff.maxDelay: {DURATION_HINT}, got 'forever'"],
            id="max-delay-bad",
        ),
        pytest.param(
            {"spec.retry.backoff.multiplier": 0.5},
            ["spec.retry.backoff.multiplier: must be at least 1.0, got 0.5"],
            id="multiplier-below-one",
        ),
        pytest.param(
            {"spec.retry.backoff.multiplier": 0},
            ["spec.retry.backoff.multiplier: must be at least 1.0, got 0.0"],
            id="multiplier-zero",
        ),
        pytest.param(
            {"spec.retry.backoff.multiplier": "2"},
            ["spec.retry.backoff.multiplier: must be a number, got '2'"],
            id="multiplier-string",
        ),
        pytest.param(
            {"spec.retry.backoff.multiplier": float("nan")},
            ["spec.retry.backoff.multiplier: must be a finite number, got nan"],
            id="multiplier-nan",
        ),
        pytest.param(
            {"spec.retry.backoff.multiplier": float("inf")},
            ["spec.retry.backoff.multiplier: must be a finite number, got inf"],
            id="multiplier-infinite",
        ),
        pytest.param(
            {"spec.retry.backoff.jitter": 1.5},
            ["spec.retry.backoff.jitter: must be between 0 and 1, got 1.5"],
            id="jitter-above-one",
        ),
        pytest.param(
            {"spec.retry.backoff.jitter": -0.1},
            ["spec.retry.backoff.jitter: must be between 0 and 1, got -0.1"],
            id="jitter-negative",
        ),
        pytest.param(
            {"spec.retry.backoff.jitter": 2},
            ["spec.retry.backoff.jitter: must be between 0 and 1, got 2.0"],
            id="jitter-integer-above-one",
        ),
        pytest.param(
            {"spec.retry.backoff.jitter": True},
            ["spec.retry.backoff.jitter: must be a number, got True"],
            id="jitter-boolean",
        ),
        pytest.param(
            {"spec.retry.backoff.jitter": float("nan")},
            ["spec.retry.backoff.jitter: must be a finite number, got nan"],
            id="jitter-nan",
        ),
        pytest.param(
            {"spec.retry.backoff.delay": "1m", "spec.retry.backoff.maxDelay": "30s"},
            ["spec.retry.backoff.maxDelay: must not be shorter than delay (1m), got 30s"],
            id="max-delay-below-delay",
        ),
        pytest.param(
            {"spec.retry.backoff.delay": "20m"},
            ["spec.retry.backoff.maxDelay: must not be shorter than delay (20m), got 10m"],
            id="delay-above-default-max-delay",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "levels", "spec.retry.backoff.levels": []},
            ["spec.retry.backoff.levels: must list at least one delay when type is levels"],
            id="levels-empty",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "levels"},
            ["spec.retry.backoff.levels: must list at least one delay when type is levels"],
            id="levels-missing",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "levels", "spec.retry.backoff.levels": "1s"},
            [
                "spec.retry.backoff.levels: must be a list of durations, got the string '1s'",
                "spec.retry.backoff.levels: must list at least one delay when type is levels",
            ],
            id="levels-not-list",
        ),
        pytest.param(
            {"spec.retry.backoff.type": "levels", "spec.retry.backoff.levels": ["1s", "soon", -5]},
            [
                f"spec.retry.backoff.levels[1]: {DURATION_HINT}, got 'soon'",
                "spec.retry.backoff.levels[2]: must not be negative, got -5",
            ],
            id="levels-bad-items",
        ),
        pytest.param(
            {"spec.retry.nonRetryableErrors": "ValueError"},
            ["spec.retry.nonRetryableErrors: must be a list, got the string 'ValueError'"],
            id="non-retryable-not-list",
        ),
        pytest.param(
            {"spec.retry.nonRetryableErrors": ["ValueError", "", 3]},
            [
                "spec.retry.nonRetryableErrors[1]: must be a non-empty string, got ''",
                "spec.retry.nonRetryableErrors[2]: must be a non-empty string, got 3",
            ],
            id="non-retryable-bad-items",
        ),
        # -- deadLetter
        pytest.param(
            {"spec.deadLetter.strategy": "drop"},
            ["spec.deadLetter.strategy: must be one of topic, ignore, stop, got 'drop'"],
            id="strategy-bad-enum",
        ),
        pytest.param(
            {"spec.deadLetter.topic": "orders"},
            ["spec.deadLetter.topic: must differ from spec.source.topic ('orders')"],
            id="dead-letter-topic-equals-source",
        ),
        pytest.param(
            {"spec.deadLetter.topic": "orders-billing-RETRY"},
            ["spec.deadLetter.topic: must differ from the retry topic ('orders-billing-RETRY')"],
            id="dead-letter-equals-derived-retry",
        ),
        pytest.param(
            {"spec.deadLetter.topic": "dead letters"},
            [f"spec.deadLetter.topic: {TOPIC_CHARS}, got 'dead letters'"],
            id="dead-letter-topic-bad-chars",
        ),
        pytest.param(
            {"spec.deadLetter.topic": "."},
            ["spec.deadLetter.topic: must not be '.' or '..', got '.'"],
            id="dead-letter-topic-dot",
        ),
        pytest.param(
            {"spec.deadLetter.includeStackTrace": "yes"},
            ["spec.deadLetter.includeStackTrace: must be true or false, got 'yes'"],
            id="include-stack-trace-not-boolean",
        ),
        pytest.param(
            {"spec.deadLetter.headers": {"dlq.reason": "manual"}},
            [
                "spec.deadLetter.headers.dlq.reason: must not start with 'dlq.': those "
                "headers are written by the engine"
            ],
            id="header-dlq-prefix",
        ),
        pytest.param(
            {"spec.deadLetter.headers": {"DLQ.Team": "billing"}},
            [
                "spec.deadLetter.headers.DLQ.Team: must not start with 'dlq.': those "
                "headers are written by the engine"
            ],
            id="header-dlq-prefix-any-case",
        ),
        pytest.param(
            {"spec.deadLetter.headers": ["team=billing"]},
            ["spec.deadLetter.headers: must be a mapping of strings, got a list"],
            id="headers-not-mapping",
        ),
        pytest.param(
            {"spec.deadLetter.headers": {"team": ["a", "b"]}},
            ["spec.deadLetter.headers.team: must be a string, got a list"],
            id="header-value-not-scalar",
        ),
        pytest.param(
            {"spec.deadLetter.headers": {1: "x"}},
            ["spec.deadLetter.headers: keys must be strings, got 1"],
            id="header-key-not-string",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": "/data/dl"}, "spec.deadLetter.strategy": "stop"},
            [
                "spec.deadLetter.table: is only allowed with strategy topic (it holds what the "
                "dead-letter topic receives), got strategy 'stop'"
            ],
            id="table-with-strategy-stop",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": "/data/dl"}, "spec.deadLetter.strategy": "ignore"},
            [
                "spec.deadLetter.table: is only allowed with strategy topic (it holds what the "
                "dead-letter topic receives), got strategy 'ignore'"
            ],
            id="table-with-strategy-ignore",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"format": "delta"}},
            ["spec.deadLetter.table.path: is required"],
            id="table-without-path",
        ),
        pytest.param(
            {"spec.deadLetter.table": {}},
            ["spec.deadLetter.table.path: is required"],
            id="table-empty",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": "  "}},
            ["spec.deadLetter.table.path: is required and must not be empty"],
            id="table-path-blank",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": " /data/dl"}},
            ["spec.deadLetter.table.path: must not start or end with white space, got ' /data/dl'"],
            id="table-path-leading-space",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": "/" + "d" * 4096}},
            ["spec.deadLetter.table.path: must be at most 4096 characters, got 4097"],
            id="table-path-too-long",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"path": 42}},
            ["spec.deadLetter.table.path: must be a string, got int 42"],
            id="table-path-not-string",
        ),
        pytest.param(
            {"spec.deadLetter.table": {"format": "iceberg", "path": "/data/dl"}},
            ["spec.deadLetter.table.format: must be one of delta, parquet, got 'iceberg'"],
            id="table-format-bad-enum",
        ),
        pytest.param(
            {"spec.deadLetter.table": "/data/dl"},
            [
                "spec.deadLetter.table: must be a mapping, got the string '/data/dl'",
                "spec.deadLetter.table.path: is required",
            ],
            id="table-not-mapping",
        ),
        # -- errorWindow
        pytest.param(
            {"spec.errorWindow.size": -1},
            ["spec.errorWindow.size: must be at least 0, got -1"],
            id="error-window-size-negative",
        ),
        pytest.param(
            {"spec.errorWindow.threshold": 0},
            ["spec.errorWindow.threshold: must be greater than 0 and at most 1, got 0.0"],
            id="threshold-zero",
        ),
        pytest.param(
            {"spec.errorWindow.threshold": 1.5},
            ["spec.errorWindow.threshold: must be greater than 0 and at most 1, got 1.5"],
            id="threshold-above-one",
        ),
        pytest.param(
            {"spec.errorWindow.threshold": -0.5},
            ["spec.errorWindow.threshold: must be greater than 0 and at most 1, got -0.5"],
            id="threshold-negative",
        ),
        # -- topics
        pytest.param(
            {"spec.topics.create": "true"},
            ["spec.topics.create: must be true or false, got 'true'"],
            id="create-not-boolean",
        ),
        pytest.param(
            {"spec.topics.provisioner": "helm"},
            ["spec.topics.provisioner: must be one of auto, admin, strimzi, got 'helm'"],
            id="provisioner-bad-enum",
        ),
        pytest.param(
            {"spec.topics.provisioner": "strimzi"},
            ["spec.topics.strimzi.cluster: is required when provisioner is strimzi"],
            id="strimzi-without-cluster",
        ),
        pytest.param(
            {"spec.topics.provisioner": "strimzi", "spec.topics.strimzi": {"namespace": "kafka"}},
            ["spec.topics.strimzi.cluster: is required when provisioner is strimzi"],
            id="strimzi-namespace-only",
        ),
        pytest.param(
            {"spec.topics.strimzi": {"cluster": "c", "name": "x"}},
            ["spec.topics.strimzi.name: unknown field"],
            id="strimzi-unknown-field",
        ),
        pytest.param(
            {"spec.topics.partitions": -1},
            ["spec.topics.partitions: must be at least 0, got -1"],
            id="partitions-negative",
        ),
        pytest.param(
            {"spec.topics.replicationFactor": 0},
            ["spec.topics.replicationFactor: must be -1 (broker default) or at least 1, got 0"],
            id="replication-factor-zero",
        ),
        pytest.param(
            {"spec.topics.replicationFactor": -2},
            ["spec.topics.replicationFactor: must be at least -1, got -2"],
            id="replication-factor-below-minus-one",
        ),
        pytest.param(
            {"spec.topics.deadLetterConfig": {"max.message.bytes": 16383}},
            [f"spec.topics.deadLetterConfig: {MESSAGE_BYTES_REFUSAL}, got '16383'"],
            id="dlq-max-message-bytes-below-batch-size",
        ),
        pytest.param(
            {"spec.topics.retryConfig": {"max.message.bytes": "1MB"}},
            [f"spec.topics.retryConfig: {MESSAGE_BYTES_REFUSAL}, got '1MB'"],
            id="retry-max-message-bytes-not-a-number",
        ),
        pytest.param(
            {"spec.topics.deadLetterConfig": {"retention.ms": "7d"}},
            [
                "spec.topics.deadLetterConfig: retention.ms must be a whole number of milliseconds, "
                "or -1 (never deleted by age), got '7d'"
            ],
            id="dlq-retention-not-milliseconds",
        ),
        pytest.param(
            {"spec.topics.retryConfig": {"retention.ms": "-2"}},
            [
                "spec.topics.retryConfig: retention.ms must be a whole number of milliseconds, "
                "or -1 (never deleted by age), got '-2'"
            ],
            id="retry-retention-below-minus-one",
        ),
        pytest.param(
            {"spec.topics.retryConfig": "retention.ms=1"},
            ["spec.topics.retryConfig: must be a mapping of strings, got the string 'retention.ms=1'"],
            id="retry-config-not-mapping",
        ),
        pytest.param(
            {"spec.topics.deleteWithPolicy": 1},
            ["spec.topics.deleteWithPolicy: must be true or false, got 1"],
            id="delete-with-policy-not-boolean",
        ),
        # -- spark
        pytest.param(
            {"spec.spark.trigger": "0s"}, ["spec.spark.trigger: must be longer than 0"], id="trigger-zero"
        ),
        pytest.param(
            {"spec.spark.trigger": "often"},
            [f"spec.spark.trigger: {DURATION_HINT}, got 'often'"],
            id="trigger-bad",
        ),
        pytest.param(
            {"spec.spark.driver.memory": "1GB"},
            ["spec.spark.driver.memory: must be a JVM memory size such as 512m or 2g, got '1GB'"],
            id="driver-memory-bad-suffix",
        ),
        pytest.param(
            {"spec.spark.executor.memory": "2Gi"},
            ["spec.spark.executor.memory: must be a JVM memory size such as 512m or 2g, got '2Gi'"],
            id="executor-memory-kubernetes-style",
        ),
        pytest.param(
            {"spec.spark.executor.memory": "0g"},
            ["spec.spark.executor.memory: must be a JVM memory size such as 512m or 2g, got '0g'"],
            id="executor-memory-zero",
        ),
        pytest.param(
            {"spec.spark.driver.memory": ""},
            ["spec.spark.driver.memory: must be a JVM memory size such as 512m or 2g, got ''"],
            id="driver-memory-empty",
        ),
        pytest.param(
            {"spec.spark.driver.cores": 0},
            ["spec.spark.driver.cores: must be at least 1, got 0"],
            id="driver-cores-zero",
        ),
        pytest.param(
            {"spec.spark.executor.instances": 0},
            ["spec.spark.executor.instances: must be at least 1, got 0"],
            id="executor-instances-zero",
        ),
        pytest.param(
            {"spec.spark.driver.instances": 2},
            ["spec.spark.driver.instances: unknown field"],
            id="driver-has-no-instances",
        ),
        pytest.param(
            {"spec.spark.sparkConf": {"spark.x": {"nested": 1}}},
            ["spec.spark.sparkConf.spark.x: must be a string, got a mapping"],
            id="spark-conf-value-not-scalar",
        ),
        pytest.param(
            {"spec.suspend": "yes"},
            ["spec.suspend: must be true or false, got 'yes'"],
            id="suspend-not-boolean",
        ),
    ],
)
def test_validation_message(overrides: dict[str, Any], expected: list[str]) -> None:
    assert issues(policy_document(overrides)) == expected


def test_validation_long_source_with_explicit_topics_is_fine() -> None:
    # Only derived names inherit the source's length; explicit ones are checked on their own.
    p = policy({"spec.source.topic": "t" * 240, "spec.retry.topic": "r", "spec.deadLetter.topic": "d"})
    assert (p.retry_topic, p.dead_letter_topic) == ("r", "d")


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(None, "(document): must be a mapping, got NoneType None", id="none"),
        pytest.param(["spec"], "(document): must be a mapping, got a list", id="list"),
        pytest.param("policy", "(document): must be a mapping, got the string 'policy'", id="string"),
    ],
)
def test_validation_document_not_mapping(document: object, expected: str) -> None:
    assert issues(document) == [expected]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"spec.retry.maxRedeliveryCount": 3},
            "spec.retry.maxRedeliveryCount: unknown field (did you mean 'maxRedeliverCount'?)",
            id="max-redelivery-count",
        ),
        pytest.param(
            {"spec.retyr": {}}, "spec.retyr: unknown field (did you mean 'retry'?)", id="spec-level"
        ),
        pytest.param(
            {"spec.deadletter": {}},
            "spec.deadletter: unknown field (did you mean 'deadLetter'?)",
            id="case-typo",
        ),
        pytest.param(
            {"spec.retry.backoff.jiter": 0.5},
            "spec.retry.backoff.jiter: unknown field (did you mean 'jitter'?)",
            id="backoff-level",
        ),
        pytest.param(
            {"spec.source.subscripton": "x"},
            "spec.source.subscripton: unknown field (did you mean 'subscription'?)",
            id="source-level",
        ),
        pytest.param(
            {"spec.spark.sparkconf": {}},
            "spec.spark.sparkconf: unknown field (did you mean 'sparkConf'?)",
            id="spark-level",
        ),
        pytest.param(
            {"spec.topics.replication": 3},
            "spec.topics.replication: unknown field (did you mean 'replicationFactor'?)",
            id="prefix",
        ),
        pytest.param(
            {"spec.topics.replicas": 3}, "spec.topics.replicas: unknown field", id="too-far-for-a-hint"
        ),
        pytest.param({"spec.source.partition": 0}, "spec.source.partition: unknown field", id="no-hint"),
        pytest.param({"spec.status": {}}, "spec.status: unknown field", id="status-inside-spec"),
        pytest.param(
            {"spec.deadLetter.table": {"path": "/d", "fromat": "delta"}},
            "spec.deadLetter.table.fromat: unknown field (did you mean 'format'?)",
            id="table-level",
        ),
    ],
)
def test_validation_unknown_field(overrides: dict[str, Any], expected: str) -> None:
    assert issues(policy_document(overrides)) == [expected]


def test_validation_several_problems_reported_at_once() -> None:
    document = policy_document(
        {
            "kind": "Policy",
            "metadata.name": DELETE,
            "spec.source.subscription": DELETE,
            "spec.retry.maxRedeliverCount": -1,
            "spec.retry.backoff.jitter": 1.5,
            "spec.deadLetter.strategy": "drop",
            "spec.deadLetter.headers": {"dlq.reason": "x"},
            "spec.topics.replicationFactor": 0,
            "spec.spark.executor.memory": "lots",
            "spec.suspend": "no",
            "spec.retryPolicy": {},
        }
    )
    assert issues(document) == [
        "kind: must be DeadLetterPolicy, got 'Policy'",
        "metadata.name: is required",
        "spec.source.subscription: is required",
        "spec.retry.maxRedeliverCount: must be at least 0, got -1",
        "spec.retry.backoff.jitter: must be between 0 and 1, got 1.5",
        "spec.deadLetter.headers.dlq.reason: must not start with 'dlq.': those headers are "
        "written by the engine",
        "spec.deadLetter.strategy: must be one of topic, ignore, stop, got 'drop'",
        "spec.topics.replicationFactor: must be -1 (broker default) or at least 1, got 0",
        "spec.spark.executor.memory: must be a JVM memory size such as 512m or 2g, got 'lots'",
        "spec.suspend: must be true or false, got 'no'",
        "spec.retryPolicy: unknown field",
    ]


def test_validation_error_carries_issues_and_joined_message() -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(policy_document({"spec.retry.maxRedeliverCount": -1, "spec.retry.backoff.jitter": 1.5}))
    assert info.value.issues == (
        Issue("spec.retry.maxRedeliverCount", "must be at least 0, got -1"),
        Issue("spec.retry.backoff.jitter", "must be between 0 and 1, got 1.5"),
    )
    assert str(info.value) == (
        "spec.retry.maxRedeliverCount: must be at least 0, got -1; "
        "spec.retry.backoff.jitter: must be between 0 and 1, got 1.5"
    )
    assert isinstance(info.value, ValueError)


def test_validation_typo_does_not_fall_back_silently() -> None:
    # maxRedeliveryCount must not quietly mean the default 16 retries.
    with pytest.raises(PolicyError):
        parse_policy(policy_document({"spec.retry.maxRedeliveryCount": 0}))


# --------------------------------------------------------------------------------------------
# topic_name_problem


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("orders", None, id="plain"),
        pytest.param("Orders.v2_final-1", None, id="every-allowed-char"),
        pytest.param("a" * 249, None, id="249-characters"),
        pytest.param("...", None, id="three-dots"),
        pytest.param("a" * 250, "must be at most 249 characters, got 250", id="250-characters"),
        pytest.param(".", "must not be '.' or '..', got '.'", id="dot"),
        pytest.param("..", "must not be '.' or '..', got '..'", id="dot-dot"),
        pytest.param("", f"{TOPIC_CHARS}, got ''", id="empty"),
        pytest.param("orders v2", f"{TOPIC_CHARS}, got 'orders v2'", id="space"),
        pytest.param("orders/v2", f"{TOPIC_CHARS}, got 'orders/v2'", id="slash"),
        pytest.param("orders:v2", f"{TOPIC_CHARS}, got 'orders:v2'", id="colon"),
        pytest.param("ordérs", f"{TOPIC_CHARS}, got 'ordérs'", id="non-ascii"),
    ],
)
def test_topic_name_problem(name: str, expected: str | None) -> None:
    assert topic_name_problem(name) == expected


# --------------------------------------------------------------------------------------------
# to_spec / to_document round trip


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({}, id="minimal"),
        pytest.param({"metadata.namespace": DELETE}, id="default-namespace"),
        pytest.param({"spec.retry.topic": "orders-billing-RETRY"}, id="derived-topic-written"),
        pytest.param({"spec.retry.backoff.delay": 0.0015}, id="sub-second-delay"),
        pytest.param({"spec.deadLetter.table": {"format": "parquet", "path": "/dl"}}, id="dead-letter-table"),
    ],
)
def test_round_trip_parse_to_document_parse(overrides: dict[str, Any]) -> None:
    original = policy(overrides)
    assert parse_policy(to_document(original)) == original


def test_round_trip_every_field_set_is_its_own_spec() -> None:
    document = every_field_document()
    original = parse_policy(document)
    assert to_spec(original) == document["spec"]
    assert parse_policy(to_document(original)) == original


def test_round_trip_every_field_set_differs_from_minimal_everywhere() -> None:
    # Guards the round-trip case above: each section of the full policy is not at its default.
    full, minimal = parse_policy(every_field_document()), policy()
    for section in dataclasses.fields(DeadLetterPolicy):
        if section.name in ("name",):
            continue
        assert getattr(full, section.name) != getattr(minimal, section.name), section.name


def test_round_trip_to_document_shape() -> None:
    document = to_document(policy())
    assert document == {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": "orders-billing", "namespace": "payments"},
        "spec": CONTRACT_DEFAULT_SPEC,
    }


def test_round_trip_to_spec_writes_defaults_and_canonical_values() -> None:
    spec = to_spec(
        policy(
            {
                "spec.broker.secretRef": {"name": "kafka-client"},
                "spec.processor.timeout": "90s",
                "spec.retry.backoff": {"type": "exponential", "multiplier": 3},
                "spec.deadLetter.headers": {"priority": 1},
                "spec.topics.retryConfig": {"retention.ms": 604800000},
            }
        )
    )
    assert spec["broker"] == {
        "type": "kafka",
        "bootstrapServers": "kafka.kafka:9092",
        "secretRef": {"name": "kafka-client"},
    }
    assert spec["processor"]["timeout"] == "1m30s"
    assert spec["retry"]["backoff"]["multiplier"] == 3.0
    assert (spec["retry"]["maxRetryDuration"], spec["retry"]["rules"]) == ("0s", [])
    assert spec["deadLetter"]["headers"] == {"priority": "1"}
    assert spec["deadLetter"]["headerProfiles"] == ["spark-dlq"]
    assert spec["topics"]["retryConfig"] == {"retention.ms": "604800000"}


def test_round_trip_to_spec_sorts_mappings() -> None:
    spec = to_spec(
        policy(
            {"spec.deadLetter.headers": {"b": "2", "a": "1"}, "spec.spark.sparkConf": {"z": "1", "m": "2"}}
        )
    )
    assert list(spec["deadLetter"]["headers"]) == ["a", "b"]
    assert list(spec["spark"]["sparkConf"]) == ["m", "z"]


def test_round_trip_to_spec_does_not_share_mutable_state() -> None:
    p = policy({"spec.deadLetter.headers": {"team": "billing"}})
    to_spec(p)["deadLetter"]["headers"]["team"] = "changed"
    assert p.dead_letter.headers == {"team": "billing"}


def test_round_trip_to_spec_writes_the_table_only_when_set() -> None:
    # Absent, it is left out (so a policy without one keeps its config hash); set, with its format.
    assert "table" not in to_spec(policy())["deadLetter"]
    assert to_spec(policy({"spec.deadLetter.table": {"path": "/data/dl"}}))["deadLetter"]["table"] == {
        "format": "delta",
        "path": "/data/dl",
    }


# --- retry.rules ---------------------------------------------------------------------------------


def test_retry_rules_default_to_the_policy_s_limit_and_backoff() -> None:
    from tests.policy_builder import policy

    parsed = policy(
        {
            "spec.retry.maxRedeliverCount": 4,
            "spec.retry.backoff": {"type": "fixed", "delay": "2s"},
            "spec.retry.rules": [
                {
                    "errors": ["TimeoutError"],
                    "maxRedeliverCount": 10,
                    "backoff": {"type": "fixed", "delay": "30s"},
                },
                {"errors": ["ConnectionError"]},
            ],
        }
    )
    first, second = parsed.retry.rules
    assert (first.errors, first.max_redeliver_count, first.backoff.delay_ms) == (
        ("TimeoutError",),
        10,
        30_000,
    )
    assert (second.max_redeliver_count, second.backoff) == (4, parsed.retry.backoff)


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param(
            [{"maxRedeliverCount": 3}],
            "spec.retry.rules[0].errors: must name at least one error class",
            id="no-errors",
        ),
        pytest.param(
            [{"errors": ["TimeoutError"]}, {"errors": ["TimeoutError"]}],
            "spec.retry.rules[1].errors: 'TimeoutError' is already named by spec.retry.rules[0]: a class may be in one rule only",
            id="named-twice",
        ),
        pytest.param(
            [{"errors": ["KeyError"]}],
            "spec.retry.rules[0].errors: 'KeyError' is in retry.nonRetryableErrors: it is never retried",
            id="non-retryable",
        ),
        pytest.param(
            [{"errors": ["X"], "backoff": {"type": "levels"}}],
            "spec.retry.rules[0].backoff.levels: must list at least one delay when type is levels",
            id="bad-backoff",
        ),
        pytest.param(
            [{"errors": ["X"], "retries": 3}], "spec.retry.rules[0].retries: unknown field", id="typo"
        ),
        pytest.param(
            {"errors": ["X"]}, "spec.retry.rules: must be a list of rules, got a mapping", id="not-a-list"
        ),
    ],
)
def test_bad_retry_rules_name_the_field(rules: Any, expected: str) -> None:
    from tests.policy_builder import issues, policy_document

    found = issues(
        policy_document({"spec.retry.nonRetryableErrors": ["KeyError"], "spec.retry.rules": rules})
    )
    assert any(line.startswith(expected) for line in found), found


def test_rules_change_the_config_hash_and_no_rules_keep_it() -> None:
    from dlq_engine.model import config_hash
    from tests.policy_builder import policy

    assert config_hash(policy({"spec.retry.rules": []})) == config_hash(policy())
    assert config_hash(policy({"spec.retry.rules": [{"errors": ["X"]}]})) != config_hash(policy())


# --------------------------------------------------------------------------------------------
# Per-key ordering


def test_ordering_defaults_to_none_and_its_section_is_not_written() -> None:
    parsed = policy()
    assert parsed.source.ordering == "none"
    assert to_spec(parsed)["source"]["ordering"] == "none"
    assert "ordering" not in to_spec(parsed)  # the parser refuses it without source.ordering key


def test_ordering_key_writes_the_whole_ordering_section_with_defaults() -> None:
    parsed = policy({"spec.source.ordering": "key"})
    spec = to_spec(parsed)
    assert spec["source"]["ordering"] == "key"
    assert spec["ordering"] == {
        "onDeadLetter": "skip",
        "maxHeldPerKey": 1000,
        "maxHeldTotal": 100000,
        "maxHoldTime": "1h",
        "onOverflow": "deadLetter",
    }
    assert parse_policy({**policy_document(), "spec": spec}) == parsed


def test_ordering_section_is_read() -> None:
    parsed = policy(
        {
            "spec.source.ordering": "key",
            "spec.ordering": {
                "onDeadLetter": "block",
                "maxHeldPerKey": 5,
                "maxHeldTotal": 50,
                "maxHoldTime": "2m",
                "onOverflow": "stop",
            },
        }
    )
    assert parsed.ordering.on_dead_letter == "block"
    assert (parsed.ordering.max_held_per_key, parsed.ordering.max_held_total) == (5, 50)
    assert (parsed.ordering.max_hold_ms, parsed.ordering.on_overflow) == (120_000, "stop")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"spec.source.ordering": "fifo"},
            "spec.source.ordering: must be one of none, key, got 'fifo'",
            id="unknown-mode",
        ),
        pytest.param(
            {"spec.ordering.onDeadLetter": "skip"},
            "spec.ordering: is only read with spec.source.ordering key, got 'none'",
            id="section-without-key-ordering",
        ),
        pytest.param(
            {"spec.source.ordering": "key", "spec.ordering.onDeadLetter": "wait"},
            "spec.ordering.onDeadLetter: must be one of skip, block, got 'wait'",
            id="on-dead-letter",
        ),
        pytest.param(
            {"spec.source.ordering": "key", "spec.ordering.maxHeldPerKey": 0},
            "spec.ordering.maxHeldPerKey: must be at least 1, got 0",
            id="held-per-key",
        ),
        pytest.param(
            {"spec.source.ordering": "key", "spec.ordering.maxHeldPerKey": 2**31},
            "spec.ordering.maxHeldPerKey: must be at most 2147483647, got 2147483648",
            id="held-per-key-beyond-an-int",
        ),
        pytest.param(
            {"spec.source.ordering": "key", "spec.ordering.maxHeldTotal": 0},
            "spec.ordering.maxHeldTotal: must be at least 1, got 0",
            id="held-total",
        ),
        pytest.param(
            {"spec.source.ordering": "key", "spec.ordering.maxHoldTime": "0s"},
            "spec.ordering.maxHoldTime: must be longer than 0",
            id="hold-time-zero",
        ),
        pytest.param(
            {"spec.source.ordering": "key", "spec.ordering.onOverflow": "drop"},
            "spec.ordering.onOverflow: must be one of deadLetter, stop, got 'drop'",
            id="on-overflow",
        ),
    ],
)
def test_ordering_refuses(overrides: dict[str, object], expected: str) -> None:
    assert expected in issues(policy_document(overrides))


# --------------------------------------------------------------------------------------------
# The circuit breaker: spec.retry.breaker


def test_breaker_is_off_unless_given_and_is_not_written() -> None:
    parsed = policy()
    assert parsed.retry.breaker is None
    assert "breaker" not in to_spec(parsed)["retry"]
    assert policy({"spec.retry.breaker": None}).retry.breaker is None


def test_breaker_given_empty_is_on_with_the_defaults_and_round_trips() -> None:
    parsed = policy({"spec.retry.breaker": {}})
    assert parsed.retry.breaker == BreakerSpec(window=100, threshold=0.5, open_ms=30_000, probes=10)
    spec = to_spec(parsed)
    assert spec["retry"]["breaker"] == {"window": 100, "threshold": 0.5, "openTime": "30s", "probes": 10}
    assert parse_policy({**policy_document(), "spec": spec}) == parsed


def test_breaker_fields_are_read() -> None:
    given = {"window": 20, "threshold": 1, "openTime": "1m30s", "probes": 3}
    assert policy({"spec.retry.breaker": given}).retry.breaker == BreakerSpec(20, 1.0, 90_000, 3)


def test_breaker_changes_the_config_hash_and_its_absence_keeps_it() -> None:
    assert config_hash(policy({"spec.retry.breaker": None})) == config_hash(policy())
    assert config_hash(policy({"spec.retry.breaker": {}})) != config_hash(policy())
    assert config_hash(policy({"spec.retry.breaker": {"openTime": "1m"}})) != config_hash(
        policy({"spec.retry.breaker": {}})
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"spec.retry.breaker.window": 0},
            "spec.retry.breaker.window: must be at least 1, got 0",
            id="window",
        ),
        pytest.param(
            {"spec.retry.breaker.window": 1_000_001},
            "spec.retry.breaker.window: must be at most 1000000, got 1000001",
            id="window-huge",
        ),
        pytest.param(
            {"spec.retry.breaker.threshold": 0},
            "spec.retry.breaker.threshold: must be greater than 0 and at most 1, got 0.0",
            id="threshold-zero",
        ),
        pytest.param(
            {"spec.retry.breaker.threshold": 1.5},
            "spec.retry.breaker.threshold: must be greater than 0 and at most 1, got 1.5",
            id="threshold-above-one",
        ),
        pytest.param(
            {"spec.retry.breaker.openTime": "0s"},
            "spec.retry.breaker.openTime: must be longer than 0",
            id="open-zero",
        ),
        pytest.param(
            {"spec.retry.breaker.openTime": "soon"},
            f"spec.retry.breaker.openTime: {DURATION_HINT}, got 'soon'",
            id="open-text",
        ),
        pytest.param(
            {"spec.retry.breaker.probes": 0},
            "spec.retry.breaker.probes: must be at least 1, got 0",
            id="probes",
        ),
        pytest.param(
            {"spec.retry.breaker.probes": 10_001},
            "spec.retry.breaker.probes: must be at most 10000, got 10001",
            id="probes-huge",
        ),
        pytest.param(
            {"spec.retry.breaker.wndow": 5},
            "spec.retry.breaker.wndow: unknown field (did you mean 'window'?)",
            id="typo",
        ),
        pytest.param(
            {"spec.retry.breaker": 5},
            "spec.retry.breaker: must be a mapping, got int 5",
            id="not-a-mapping",
        ),
        pytest.param(
            {"spec.retry.breaker": {}, "spec.source.ordering": "key"},
            "spec.retry.breaker: is not supported with spec.source.ordering key yet: the ordering stage "
            "would release held retries while the breaker is open",
            id="with-ordering",
        ),
        pytest.param(
            {
                "spec.retry.breaker": {},
                "spec.broker": {
                    "type": "pulsar",
                    "serviceUrl": "pulsar://localhost:6650",
                    "adminUrl": "http://localhost:8080",
                },
            },
            "spec.retry.breaker: is not supported with broker type pulsar yet: the engine's Pulsar source "
            "cannot be paused",
            id="on-pulsar",
        ),
    ],
)
def test_breaker_refuses_naming_the_field(overrides: dict[str, object], expected: str) -> None:
    assert expected in issues(policy_document(overrides))


# --------------------------------------------------------------------------------------------
# Pulsar: spec.broker.type pulsar

PULSAR_BROKER = {
    "type": "pulsar",
    "serviceUrl": "pulsar://localhost:6650",
    "adminUrl": "http://localhost:8080",
}


def pulsar_document(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    return policy_document({"spec.broker": PULSAR_BROKER, **(overrides or {})})


def test_pulsar_broker_is_read_and_kafka_is_the_default() -> None:
    assert policy().broker.type == "kafka"
    assert not policy().is_pulsar
    pulsar = parse_policy(pulsar_document())
    assert pulsar.broker == Broker(
        type="pulsar", service_url="pulsar://localhost:6650", admin_url="http://localhost:8080"
    )
    assert pulsar.is_pulsar
    assert pulsar.broker.address == "pulsar://localhost:6650"
    assert policy().broker.address == "kafka.kafka:9092"


@pytest.mark.parametrize(
    ("source", "retry", "dead_letter"),
    [
        pytest.param("orders", "orders-billing-RETRY", "orders-billing-DLQ", id="short-name"),
        pytest.param(
            "persistent://payments/shop/orders",
            "persistent://payments/shop/orders-billing-RETRY",
            "persistent://payments/shop/orders-billing-DLQ",
            id="full-name",
        ),
        pytest.param(
            "payments/shop/orders",
            "payments/shop/orders-billing-RETRY",
            "payments/shop/orders-billing-DLQ",
            id="tenant-namespace-name",
        ),
    ],
)
def test_pulsar_default_topics_are_pulsars_own_names(source: str, retry: str, dead_letter: str) -> None:
    """Pulsar's clients name them <topic>-<subscription>-RETRY and -DLQ, in the source's namespace."""
    parsed = parse_policy(pulsar_document({"spec.source.topic": source}))
    assert (parsed.retry_topic, parsed.dead_letter_topic) == (retry, dead_letter)


@pytest.mark.parametrize(
    ("name", "full"),
    [
        pytest.param("orders", "persistent://public/default/orders", id="short"),
        pytest.param("t/ns/orders", "persistent://t/ns/orders", id="tenant-namespace"),
        pytest.param("persistent://t/ns/orders", "persistent://t/ns/orders", id="full"),
    ],
)
def test_pulsar_topic_names_are_taken_apart(name: str, full: str) -> None:
    topic = pulsar_topic(name)
    assert topic.full_name == full
    assert topic.rest_path == full.replace("persistent://", "persistent/")


def test_pulsar_to_spec_writes_type_and_urls_and_round_trips() -> None:
    parsed = parse_policy(pulsar_document())
    assert to_spec(parsed)["broker"] == PULSAR_BROKER
    assert parse_policy(to_document(parsed)) == parsed
    without_admin = parse_policy(
        pulsar_document({"spec.topics.create": False, "spec.broker.adminUrl": DELETE})
    )
    assert to_spec(without_admin)["broker"] == {"type": "pulsar", "serviceUrl": "pulsar://localhost:6650"}


def test_pulsar_secret_ref_is_kept_and_mounted_where_the_engine_reads_pulsar_settings() -> None:
    parsed = parse_policy(pulsar_document({"spec.broker.secretRef": {"name": "pulsar-client"}}))
    assert to_spec(parsed)["broker"]["secretRef"] == {"name": "pulsar-client"}
    assert parse_policy(to_document(parsed)) == parsed
    assert parsed.broker.client_dir == PULSAR_CLIENT_DIR
    assert policy().broker.client_dir == KAFKA_CLIENT_DIR


def test_pulsar_kafka_policies_keep_their_config_hash_and_type() -> None:
    """broker.type kafka is its default: Kafka policies hash as they did before it existed."""
    assert to_spec(policy())["broker"] == {"type": "kafka", "bootstrapServers": "kafka.kafka:9092"}
    assert config_hash(policy({"spec.broker.type": "kafka"})) == config_hash(policy())


def test_pulsar_admin_url_is_not_engine_config() -> None:
    """Only the operator reads adminUrl: changing it does not restart the job."""
    moved = parse_policy(pulsar_document({"spec.broker.adminUrl": "https://admin.example:8443"}))
    assert config_hash(moved) == config_hash(parse_policy(pulsar_document()))
    assert "adminUrl" not in engine_config(moved)["spec"]["broker"]
    other = parse_policy(pulsar_document({"spec.broker.serviceUrl": "pulsar://other:6650"}))
    assert config_hash(other) != config_hash(parse_policy(pulsar_document()))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"spec.broker": {"type": "pulsar", "adminUrl": "http://a:8080"}},
            ["spec.broker.serviceUrl: is required"],
            id="pulsar-without-service-url",
        ),
        pytest.param(
            {"spec.broker.bootstrapServers": "kafka:9092"},
            [
                "spec.broker.bootstrapServers: is for type kafka: a Pulsar broker is reached through serviceUrl and adminUrl"
            ],
            id="pulsar-with-bootstrap-servers",
        ),
        pytest.param(
            {"spec.broker.adminUrl": DELETE},
            [
                "spec.broker.adminUrl: is required with type pulsar when spec.topics.create is true: "
                "the operator creates the topics through Pulsar's admin REST API"
            ],
            id="pulsar-without-admin-url",
        ),
        pytest.param(
            {"spec.broker.serviceUrl": "http://localhost:6650"},
            [
                "spec.broker.serviceUrl: must be pulsar://host:port or pulsar+ssl://host:port "
                "(hosts separated by commas), got 'http://localhost:6650'"
            ],
            id="service-url-not-pulsar",
        ),
        pytest.param(
            {"spec.broker.adminUrl": "localhost:8080"},
            ["spec.broker.adminUrl: must be http://host:port or https://host:port, got 'localhost:8080'"],
            id="admin-url-without-scheme",
        ),
        pytest.param(
            {"spec.broker.type": "rabbitmq"},
            ["spec.broker.type: must be one of kafka, pulsar, got 'rabbitmq'"],
            id="unknown-type",
        ),
        pytest.param(
            {"spec.topics.provisioner": "strimzi", "spec.topics.strimzi.cluster": "c"},
            [
                "spec.topics.provisioner: strimzi provisions Kafka topics: with broker type pulsar use "
                "auto or admin (Pulsar's admin REST API)"
            ],
            id="pulsar-with-strimzi",
        ),
        pytest.param(
            {"spec.topics.replicationFactor": 3},
            [
                "spec.topics.replicationFactor: must be -1 with broker type pulsar: a Pulsar topic's "
                "replicas are its namespace's persistence policy, got 3"
            ],
            id="pulsar-with-replication-factor",
        ),
        pytest.param(
            {"spec.topics.deadLetterConfig": {"retention.ms": "-1"}},
            [
                "spec.topics.deadLetterConfig: must be empty with broker type pulsar: these are Kafka "
                "topic configs (a Pulsar topic takes retention and the rest from its namespace's policies)"
            ],
            id="pulsar-with-kafka-topic-configs",
        ),
        pytest.param(
            {"spec.source.topic": "non-persistent://t/ns/orders"},
            [
                "spec.source.topic: must be a persistent topic: a non-persistent one keeps no messages, "
                "got 'non-persistent://t/ns/orders'",
                "spec.retry.topic: (derived) must be a persistent topic: a non-persistent one keeps no "
                "messages, got 'non-persistent://t/ns/orders-billing-RETRY'",
                "spec.deadLetter.topic: (derived) must be a persistent topic: a non-persistent one keeps "
                "no messages, got 'non-persistent://t/ns/orders-billing-DLQ'",
            ],
            id="non-persistent-source",
        ),
        pytest.param(
            {"spec.deadLetter.topic": "orders-partition-0"},
            [
                "spec.deadLetter.topic: must not end in -partition-<n>: Pulsar names a topic's "
                "partitions so, got 'orders-partition-0'"
            ],
            id="dead-letter-topic-named-like-a-partition",
        ),
        pytest.param(
            {"spec.retry.topic": "t/ns"},
            [
                "spec.retry.topic: must be name, tenant/namespace/name or persistent://tenant/namespace/name, "
                "each part of letters, digits, '.', '_' and '-', got 't/ns'"
            ],
            id="two-part-name",
        ),
        pytest.param(
            {"spec.retry.topic": "persistent://public/default/orders"},
            ["spec.retry.topic: must differ from spec.source.topic ('persistent://public/default/orders')"],
            id="retry-is-source-by-full-name",
        ),
        pytest.param(
            {"spec.retry.topic": "public/default/orders-billing-DLQ"},
            ["spec.deadLetter.topic: must differ from the retry topic ('public/default/orders-billing-DLQ')"],
            id="retry-is-derived-dead-letter-topic-by-full-name",
        ),
    ],
)
def test_pulsar_refuses_naming_the_field(overrides: dict[str, Any], expected: list[str]) -> None:
    assert issues(pulsar_document(overrides)) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"spec.broker.serviceUrl": "pulsar://localhost:6650"},
            ["spec.broker.serviceUrl: is for type pulsar (spec.broker.type is kafka)"],
            id="service-url-with-kafka",
        ),
        pytest.param(
            {"spec.broker.adminUrl": "http://localhost:8080"},
            ["spec.broker.adminUrl: is for type pulsar (spec.broker.type is kafka)"],
            id="admin-url-with-kafka",
        ),
        pytest.param(
            {"spec.source.topic": "persistent://public/default/orders"},
            [
                f"spec.source.topic: {TOPIC_CHARS}, got 'persistent://public/default/orders'",
                f"spec.retry.topic: (derived) {TOPIC_CHARS}, got 'persistent://public/default/orders-billing-RETRY'",
                f"spec.deadLetter.topic: (derived) {TOPIC_CHARS}, got 'persistent://public/default/orders-billing-DLQ'",
            ],
            id="pulsar-topic-name-with-kafka",
        ),
    ],
)
def test_pulsar_fields_are_refused_with_kafka(overrides: dict[str, Any], expected: list[str]) -> None:
    assert issues(policy_document(overrides)) == expected


def test_pulsar_without_topic_creation_needs_no_admin_url() -> None:
    parsed = parse_policy(pulsar_document({"spec.topics.create": False, "spec.broker.adminUrl": DELETE}))
    assert parsed.broker.admin_url == ""
