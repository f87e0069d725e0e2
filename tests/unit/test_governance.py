"""A policy as its class lets it run: each rule of ``govern`` and each refusal's message."""

from __future__ import annotations

from typing import Any

import pytest

from dlq_engine.model import PolicyError, config_hash, parse_policy
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import Governed, govern
from spark_dlq_operator.policy_class import BUILT_IN_CLASS, ClassRefusal, PolicyClass, parse_class
from spark_dlq_operator.reasons import Reason
from tests.policy_builder import DELETE, policy_document

CONFIG = OperatorConfig(spark_image="spark-dlq:1")


def klass(**spec: Any) -> PolicyClass:
    return parse_class({"metadata": {"name": "standard"}, "spec": spec})


def governed(cls: PolicyClass = BUILT_IN_CLASS, overrides: dict[str, Any] | None = None) -> Governed:
    return govern(policy_document(overrides), cls, config=CONFIG)


def refused(cls: PolicyClass, overrides: dict[str, Any]) -> list[str]:
    with pytest.raises(ClassRefusal) as refusal:
        governed(cls, overrides)
    assert refusal.value.reason is Reason.CLASS_VIOLATION
    return [str(issue) for issue in refusal.value.issues]


def test_the_built_in_class_runs_a_policy_as_written() -> None:
    """Compatibility: the same effective policy, so the same configuration hash, as before."""
    document = policy_document({"spec.spark.sparkConf": {"spark.kubernetes.driver.request.cores": "300m"}})
    result = govern(document, BUILT_IN_CLASS, config=CONFIG)
    assert result.policy == parse_policy(document)
    assert config_hash(result.policy) == config_hash(parse_policy(document))
    assert (result.class_name, result.broker) == ("built-in", None)


# --- defaults ------------------------------------------------------------------------------------


def test_class_defaults_apply_under_the_policy() -> None:
    cls = klass(
        defaults={
            "retry": {"maxRedeliverCount": 3, "backoff": {"delay": "5s"}},
            "topics": {"retryConfig": {"retention.ms": "1000", "segment.ms": "60000"}},
            "spark": {"trigger": "10s", "executor": {"instances": 2}},
        }
    )
    policy = governed(
        cls, {"spec.retry.maxRedeliverCount": 7, "spec.topics.retryConfig": {"retention.ms": "2000"}}
    ).policy
    assert policy.retry.max_redeliver_count == 7  # the policy's
    assert policy.retry.backoff.delay_ms == 5000  # the class's
    assert policy.retry.backoff.max_delay_ms == 600_000  # the model's
    assert policy.topics.retry_config == {"retention.ms": "2000", "segment.ms": "60000"}
    assert (policy.spark.trigger_ms, policy.spark.executor.instances) == (10_000, 2)


def test_a_list_in_the_policy_replaces_the_class_default() -> None:
    cls = klass(defaults={"retry": {"nonRetryableErrors": ["ValueError"]}})
    assert governed(cls).policy.retry.non_retryable_errors == ("ValueError",)
    replaced = governed(cls, {"spec.retry.nonRetryableErrors": ["KeyError"]})
    assert replaced.policy.retry.non_retryable_errors == ("KeyError",)


def test_the_class_may_default_the_retry_budget_and_the_time_limit() -> None:
    """Both are class-defaultable (issue 27): a rule without a budget takes the class's through
    the policy's; the policy's own ``0s`` still turns either off."""
    cls = klass(defaults={"retry": {"maxRetryDuration": "2h"}, "processor": {"timeout": "5s"}})
    policy = governed(cls, {"spec.retry.rules": [{"errors": ["KeyError"]}]}).policy
    assert (policy.retry.max_retry_duration_ms, policy.processor.timeout_ms) == (7_200_000, 5_000)
    assert policy.retry.rules[0].max_retry_duration_ms == 7_200_000
    off = governed(cls, {"spec.retry.maxRetryDuration": "0s", "spec.processor.timeout": "0s"}).policy
    assert (off.retry.max_retry_duration_ms, off.processor.timeout_ms) == (0, 0)
    # Neither set anywhere: the model's own (no budget, 30 s).
    built_in = governed().policy
    assert (built_in.retry.max_retry_duration_ms, built_in.processor.timeout_ms) == (0, 30_000)


# --- brokers -------------------------------------------------------------------------------------

BROKERS = klass(
    brokers=[
        {"bootstrapServers": "kafka-a:9092,kafka-b:9092", "operatorSecretRef": {"name": "op"}},
        {"bootstrapServers": "other:9092", "engineSecretName": "kafka-client"},
        {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"},
    ]
)


def test_a_policy_without_a_broker_gets_the_class_first_broker() -> None:
    result = governed(BROKERS, {"spec.broker": DELETE})
    assert result.policy.broker.bootstrap_servers == "kafka-a:9092,kafka-b:9092"
    assert result.broker is not None
    assert result.broker.operator_secret is not None
    assert result.broker.operator_secret.name == "op"


def test_a_named_broker_must_be_listed_in_any_order() -> None:
    result = governed(BROKERS, {"spec.broker.bootstrapServers": " kafka-b:9092, kafka-a:9092"})
    assert result.broker is BROKERS.brokers[0]
    assert refused(BROKERS, {"spec.broker.bootstrapServers": "evil:9092"}) == [
        "spec.broker.bootstrapServers: 'evil:9092' is not allowed by class 'standard' "
        "(spec.brokers: kafka-a:9092,kafka-b:9092, other:9092, pulsar://p:6650)"
    ]


def test_the_engine_secret_of_a_listed_broker() -> None:
    filled = governed(BROKERS, {"spec.broker.bootstrapServers": "other:9092"})
    assert filled.policy.broker.secret_ref is not None
    assert filled.policy.broker.secret_ref.name == "kafka-client"
    assert refused(
        BROKERS, {"spec.broker": {"bootstrapServers": "other:9092", "secretRef": {"name": "mine"}}}
    ) == [
        "spec.broker.secretRef.name: 'mine' is not allowed by class 'standard' "
        "(spec.brokers[1].engineSecretName: kafka-client)"
    ]


#: A class listing the Pulsar broker without an admin URL (and with the operator's credentials
#: for it, which would go to the policy's admin URL).
NO_ADMIN_URL = klass(
    brokers=[{"type": "pulsar", "serviceUrl": "pulsar://p:6650", "operatorSecretRef": {"name": "op"}}]
)


@pytest.mark.parametrize(
    ("cls", "given", "rule"),
    [
        (BROKERS, "http://p:8080", "spec.brokers[2].adminUrl: http://p:8080"),
        (NO_ADMIN_URL, "", "spec.brokers[0] names no adminUrl"),
    ],
    ids=["the-entrys", "none-where-the-entry-names-none"],
)
def test_a_pulsar_broker_takes_the_class_entrys_admin_url_only(
    cls: PolicyClass, given: str, rule: str
) -> None:
    pulsar: dict[str, Any] = {
        "spec.broker": {"type": "pulsar", "serviceUrl": "pulsar://p:6650"},
        "spec.topics.create": False,
    }
    assert governed(cls, pulsar).policy.broker.admin_url == given
    pulsar["spec.broker"] = {
        "type": "pulsar",
        "serviceUrl": "pulsar://p:6650",
        "adminUrl": "http://evil:8080",
    }
    assert refused(cls, pulsar) == [
        f"spec.broker.adminUrl: 'http://evil:8080' is not allowed by class 'standard' ({rule})"
    ]


def test_the_strimzi_cluster_is_the_class_entrys() -> None:
    """A KafkaTopic takes over the topic it names on its own cluster: the author may not point
    the KafkaTopics at a cluster other than the one of the broker the class lets them use."""
    pinned = klass(
        brokers=[
            {"bootstrapServers": "analytics:9092", "strimzi": {"namespace": "kafka", "cluster": "analytics"}},
            {"bootstrapServers": "other:9092"},
        ]
    )
    on_analytics = {"spec.broker.bootstrapServers": "analytics:9092", "spec.topics.provisioner": "strimzi"}
    target = governed(pinned, on_analytics).policy.topics.strimzi
    assert (target.namespace, target.cluster) == ("kafka", "analytics")
    same = {**on_analytics, "spec.topics.strimzi": {"namespace": "kafka", "cluster": "analytics"}}
    assert governed(pinned, same).policy.topics.strimzi.cluster == "analytics"
    assert refused(
        pinned, {**on_analytics, "spec.topics.strimzi": {"namespace": "kafka", "cluster": "prod"}}
    ) == [
        "spec.topics.strimzi.cluster: 'prod' is not allowed by class 'standard' "
        "(spec.brokers[0].strimzi.cluster: analytics)"
    ]
    assert refused(
        pinned,
        {
            "spec.broker.bootstrapServers": "other:9092",
            "spec.topics.strimzi": {"namespace": "kafka", "cluster": "a"},
        },
    ) == [
        "spec.topics.strimzi.namespace: 'kafka' is not allowed by class 'standard' "
        "(spec.brokers[1] names no strimzi cluster)",
        "spec.topics.strimzi.cluster: 'a' is not allowed by class 'standard' (spec.brokers[1] names no strimzi cluster)",
    ]
    with pytest.raises(
        PolicyError, match=r"spec.brokers\[0\].strimzi: is for type kafka: Strimzi runs Kafka"
    ):
        klass(
            brokers=[
                {
                    "type": "pulsar",
                    "serviceUrl": "pulsar://p:6650",
                    "strimzi": {"namespace": "k", "cluster": "c"},
                }
            ]
        )
    # The built-in class, without classes in the cluster, leaves it to the policy as before.
    free = {
        "spec.topics.provisioner": "strimzi",
        "spec.topics.strimzi": {"namespace": "kafka", "cluster": "any"},
    }
    assert governed(BUILT_IN_CLASS, free).policy.topics.strimzi.cluster == "any"


def test_a_class_without_brokers_takes_any_and_gives_no_operator_credentials() -> None:
    assert governed(klass(), {"spec.broker.bootstrapServers": "anywhere:9092"}).broker is None
    assert refused(klass(), {"spec.broker": DELETE}) == [
        "spec.broker: is required: class 'standard' lists no brokers (spec.brokers) to take it from"
    ]


# --- images --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("images", "asked", "runs"),
    [
        pytest.param({}, "", "", id="operator-default"),
        pytest.param({}, "spark-dlq:1", "spark-dlq:1", id="operator-default-named"),
        pytest.param({"default": "team:2"}, "", "team:2", id="class-default"),
        pytest.param(
            {"allowed": ["registry/spark-dlq:3"]}, "registry/spark-dlq:3", "registry/spark-dlq:3", id="exact"
        ),
        pytest.param({"allowed": ["registry/team-*"]}, "registry/team-a:1", "registry/team-a:1", id="prefix"),
    ],
)
def test_images_the_class_allows(images: dict[str, Any], asked: str, runs: str) -> None:
    assert governed(klass(images=images), {"spec.spark.image": asked}).policy.spark.image == runs


@pytest.mark.parametrize(
    ("images", "message"),
    [
        pytest.param(
            {"allowed": ["spark-dlq:*"]},
            "spec.spark.image: 'evil:1' is not allowed by class 'standard' (spec.images.allowed: spark-dlq:*)",
            id="allow-list",
        ),
        pytest.param(
            {},
            "spec.spark.image: 'evil:1' is not allowed by class 'standard' (spec.images.allowed is empty: only "
            "the default image spark-dlq:1)",
            id="default-only",
        ),
    ],
)
def test_an_image_outside_the_class(images: dict[str, Any], message: str) -> None:
    assert refused(klass(images=images), {"spec.spark.image": "evil:1"}) == [message]


# --- sparkConf -----------------------------------------------------------------------------------


def test_spark_conf_allowed_keys_pass_and_fixed_keys_are_added() -> None:
    cls = klass(sparkConf={"allowed": ["spark.sql.*"], "fixed": {"spark.driver.extraJavaOptions": "-Dp=1"}})
    conf = governed(
        cls, {"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "4"}}
    ).policy.spark.spark_conf
    assert conf == {"spark.sql.shuffle.partitions": "4", "spark.driver.extraJavaOptions": "-Dp=1"}


def test_a_key_outside_the_allow_list() -> None:
    cls = klass(sparkConf={"allowed": ["spark.sql.shuffle.partitions"]})
    assert refused(cls, {"spec.spark.sparkConf": {"spark.ui.enabled": "false"}}) == [
        "spec.spark.sparkConf.spark.ui.enabled: is not allowed by class 'standard' "
        "(spec.sparkConf.allowed: spark.sql.shuffle.partitions)"
    ]


def test_a_fixed_key_keeps_the_class_value() -> None:
    cls = klass(sparkConf={"allowed": ["spark.*"], "fixed": {"spark.sql.shuffle.partitions": "8"}})
    assert governed(cls, {"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "8"}})
    assert refused(cls, {"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "2"}}) == [
        "spec.spark.sparkConf.spark.sql.shuffle.partitions: is set by class 'standard' "
        "(spec.sparkConf.fixed: spark.sql.shuffle.partitions=8)"
    ]


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("spark.kubernetes.namespace", "the operator submits every job in cluster mode"),
        (
            "spark.kubernetes.authenticate.driver.serviceAccountName",
            "the Spark pods' service account comes from the policy's class",
        ),
        (
            "spark.kubernetes.driver.volumes.hostPath.root.options.path",
            "volumes and secrets are mounted by the operator",
        ),
        ("spark.jars.packages", "code comes from the engine image"),
        # Spark 4.2's per-application NetworkPolicy is the platform's (the operator's
        # --no-spark-network-policy), never a policy author's to switch off.
        ("spark.kubernetes.driver.pod.excludedFeatureSteps", "use spec.spark.pod"),
        ("spark.kubernetes.executor.pod.excludedFeatureSteps", "use spec.spark.pod"),
        ("spark.kubernetes.driver.pod.featureSteps", "use spec.spark.pod"),
        (
            "spark.driver.extraJavaOptions",
            "JVM options, class paths and the pods' environment are the platform's",
        ),
    ],
)
def test_keys_no_class_can_allow_are_refused_even_by_spark_star(key: str, instead: str) -> None:
    [message] = refused(klass(sparkConf={"allowed": ["spark.*"]}), {"spec.spark.sparkConf": {key: "x"}})
    assert message.startswith(f"spec.spark.sparkConf.{key}: is never allowed in a policy: {instead}")


# --- storage -------------------------------------------------------------------------------------


def test_checkpoints_and_tables_live_under_the_class_bases() -> None:
    cls = klass(storage={"checkpointBase": "s3a://cp/", "deadLetterTableBase": "s3a://tables"})
    policy = governed(cls, {"spec.deadLetter.table": {"format": "parquet"}}).policy
    assert policy.spark.checkpoint_location == "s3a://cp/payments/orders-billing"
    assert policy.dead_letter.table is not None
    assert (policy.dead_letter.table.path, policy.dead_letter.table.format) == (
        "s3a://tables/payments/orders-billing",
        "parquet",
    )


def test_without_a_class_base_the_operator_base_applies() -> None:
    assert governed(klass()).policy.spark.checkpoint_location == ""


def test_a_table_in_a_class_without_tables() -> None:
    assert refused(klass(), {"spec.deadLetter.table": {"format": "delta"}}) == [
        "spec.deadLetter.table: is not allowed by class 'standard' (spec.storage.deadLetterTableBase is "
        "empty: the class keeps no dead-letter tables)"
    ]


def test_free_paths_are_never_allowed() -> None:
    cls = klass(storage={"deadLetterTableBase": "s3a://tables"})
    assert refused(
        cls,
        {"spec.spark.checkpointLocation": "s3a://b/other", "spec.deadLetter.table": {"path": "s3a://b/t"}},
    ) == [
        "spec.spark.checkpointLocation: is never allowed in a policy: the policy's class decides where "
        "checkpoints live (<checkpointBase>/<namespace>/<name>, DeadLetterPolicyClass "
        "spec.storage.checkpointBase)",
        "spec.deadLetter.table.path: is never allowed in a policy: the policy's class decides where "
        "dead-letter tables live (<deadLetterTableBase>/<namespace>/<name>, DeadLetterPolicyClass "
        "spec.storage.deadLetterTableBase)",
    ]


# --- limits --------------------------------------------------------------------------------------

LIMITS = klass(
    defaults={"retry": {"maxRedeliverCount": 5}},
    limits={
        "maxRedeliverCount": 10,
        "minTrigger": "1s",
        "driver": {"maxCores": 2, "maxMemory": "2g"},
        "executor": {"maxInstances": 4, "maxCores": 2, "maxMemory": "4g"},
    },
)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"spec.retry.maxRedeliverCount": 11},
            "spec.retry.maxRedeliverCount: 11 is more than class 'standard' allows (spec.limits.maxRedeliverCount: 10)",
            id="redeliveries",
        ),
        pytest.param(
            {"spec.retry.rules": [{"errors": ["E"], "maxRedeliverCount": 50}]},
            "spec.retry.rules[0].maxRedeliverCount: 50 is more than class 'standard' allows "
            "(spec.limits.maxRedeliverCount: 10)",
            id="rule-redeliveries",
        ),
        pytest.param(
            {"spec.spark.trigger": "500ms"},
            "spec.spark.trigger: 500ms is shorter than class 'standard' allows (spec.limits.minTrigger: 1s)",
            id="trigger",
        ),
        pytest.param(
            {"spec.spark.driver.cores": 3},
            "spec.spark.driver.cores: 3 is more than class 'standard' allows (spec.limits.driver.maxCores: 2)",
            id="driver-cores",
        ),
        pytest.param(
            {"spec.spark.driver.memory": "3g"},
            "spec.spark.driver.memory: 3g is more than class 'standard' allows (spec.limits.driver.maxMemory: 2g)",
            id="driver-memory",
        ),
        pytest.param(
            {"spec.spark.executor.instances": 5},
            "spec.spark.executor.instances: 5 is more than class 'standard' allows "
            "(spec.limits.executor.maxInstances: 4)",
            id="executors",
        ),
        pytest.param(
            {"spec.spark.executor.cores": 3},
            "spec.spark.executor.cores: 3 is more than class 'standard' allows (spec.limits.executor.maxCores: 2)",
            id="executor-cores",
        ),
        pytest.param(
            {"spec.spark.executor.memory": "4097m"},
            "spec.spark.executor.memory: 4097m is more than class 'standard' allows "
            "(spec.limits.executor.maxMemory: 4g)",
            id="executor-memory",
        ),
    ],
)
def test_limits(overrides: dict[str, Any], message: str) -> None:
    assert refused(LIMITS, overrides) == [message]


def test_within_limits() -> None:
    governed(LIMITS, {"spec.retry.maxRedeliverCount": 10, "spec.spark.executor.memory": "4096m"})


# --- the pods ------------------------------------------------------------------------------------

PODS = klass(
    pods={
        "serviceAccountName": "spark",
        "imagePullSecrets": [{"name": "registry"}],
        "nodeSelector": {"pool": "spark", "zone": "a"},
        "tolerations": [{"key": "spark", "operator": "Exists"}],
        "priorityClassName": "batch",
        "labels": {"cost-center": "platform"},
        "annotations": {"owner": "platform"},
        "policyMayOverride": ["nodeSelector", "tolerations", "labels", "annotations"],
    },
    storage={"checkpointBase": "/cp", "checkpointClaim": "checkpoints"},
)


def test_the_pods_fit_merges_the_policy_where_the_class_allows() -> None:
    result = governed(
        PODS,
        {
            "spec.spark.pod": {
                "nodeSelector": {"zone": "b"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "labels": {"team": "billing", "cost-center": "billing"},
            }
        },
    )
    pod = result.policy.spark.pod
    assert pod.node_selector == {"pool": "spark", "zone": "b"}
    assert pod.tolerations == (
        {"key": "spark", "operator": "Exists"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    )
    assert pod.labels == {"team": "billing", "cost-center": "platform"}  # the class's keys win
    assert (pod.priority_class_name, pod.annotations) == ("batch", {"owner": "platform"})
    assert result.fit.service_account == "spark"
    assert result.fit.image_pull_secrets == ("registry",)
    assert (result.fit.checkpoint_claim, result.fit.checkpoint_base) == ("checkpoints", "/cp")


def test_pod_fields_the_class_does_not_let_a_policy_set() -> None:
    assert refused(
        PODS, {"spec.spark.pod": {"priorityClassName": "critical", "affinity": {"nodeAffinity": {}}}}
    ) == [
        "spec.spark.pod.affinity: is not allowed by class 'standard' (spec.pods.policyMayOverride: nodeSelector, "
        "tolerations, labels, annotations)",
        "spec.spark.pod.priorityClassName: is not allowed by class 'standard' (spec.pods.policyMayOverride: "
        "nodeSelector, tolerations, labels, annotations)",
    ]
    assert refused(klass(), {"spec.spark.pod": {"labels": {"a": "b"}}}) == [
        "spec.spark.pod.labels: is not allowed by class 'standard' (spec.pods.policyMayOverride is empty)"
    ]


# --- everything at once --------------------------------------------------------------------------


def test_every_problem_is_named_at_once() -> None:
    found = refused(
        klass(),
        {
            "spec.spark.image": "evil:1",
            "spec.spark.sparkConf": {"spark.ui.enabled": "false", "spark.master": "x"},
        },
    )
    assert [line.split(":")[0] for line in found] == [
        "spec.spark.sparkConf.spark.master",
        "spec.spark.image",
        "spec.spark.sparkConf.spark.ui.enabled",
    ]


def test_an_invalid_policy_is_the_model_s_refusal() -> None:
    with pytest.raises(PolicyError) as invalid:
        governed(klass(), {"spec.retry.backoff.jitter": 2})
    assert not isinstance(invalid.value, ClassRefusal)
    assert [i.path for i in invalid.value.issues] == ["spec.retry.backoff.jitter"]


def test_a_breaker_on_the_class_s_pulsar_broker_is_the_model_s_refusal() -> None:
    """The API server cannot see the broker a class gives; the model refuses it naming the field."""
    pulsar_only = klass(
        brokers=[{"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"}]
    )
    with pytest.raises(PolicyError) as invalid:
        governed(pulsar_only, {"spec.broker": DELETE, "spec.topics.create": False, "spec.retry.breaker": {}})
    assert not isinstance(invalid.value, ClassRefusal)
    assert [i.path for i in invalid.value.issues] == ["spec.retry.breaker"]


def test_a_null_section_still_gets_the_class_paths() -> None:
    cls = klass(storage={"checkpointBase": "/cp"})
    assert (
        governed(cls, {"spec.spark": None}).policy.spark.checkpoint_location == "/cp/payments/orders-billing"
    )
