"""The DeadLetterPolicyClass as the operator reads it, and how a policy's class is chosen: each
rule and each refusal's message."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from dlq_engine.model import PolicyError
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.policy_class import (
    BUILT_IN_CLASS,
    DEFAULT_CLASS_ANNOTATION,
    DEFAULT_SPARK_CONF_ALLOWED,
    FORBIDDEN_SPARK_CONF,
    BrokerEntry,
    ClassRefusal,
    InvalidClass,
    PolicyClass,
    SecretKeyRef,
    admit_namespace,
    built_in_class,
    conf_key_matches,
    deep_merge,
    forbidden,
    forbidden_conf_rules,
    memory_bytes,
    parse_class,
    read_class,
    select_class,
    selector_matches,
)
from spark_dlq_operator.reasons import Reason
from tests.policy_builder import policy_document


def class_object(name: str = "standard", *, default: bool = False, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if default:
        metadata["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicyClass",
        "metadata": metadata,
        "spec": spec,
    }


def problems(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(PolicyError) as refused:
        parse_class(obj)
    return [str(issue) for issue in refused.value.issues]


# --- parsing -------------------------------------------------------------------------------------


def test_an_empty_class_is_the_built_in_class_by_another_name() -> None:
    assert parse_class(class_object()) == dataclasses.replace(BUILT_IN_CLASS, name="standard")


def test_the_built_in_class_allows_resource_and_tuning_conf_only() -> None:
    assert BUILT_IN_CLASS.spark_conf.allowed == DEFAULT_SPARK_CONF_ALLOWED
    assert BUILT_IN_CLASS.brokers == ()
    assert BUILT_IN_CLASS.images.allowed == ()
    assert BUILT_IN_CLASS.pods.policy_may_override == ()


def test_every_field_is_read() -> None:
    cls = parse_class(
        class_object(
            default=True,
            namespaceSelector={"matchLabels": {"team": "billing"}},
            defaults={"retry": {"maxRedeliverCount": 3}, "topics": {"retryConfig": {"retention.ms": "1000"}}},
            brokers=[
                {
                    "bootstrapServers": "kafka:9092",
                    "operatorSecretRef": {"name": "op-kafka"},
                    "engineSecretName": "kafka-client",
                },
                {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"},
            ],
            images={"default": "spark-dlq:2", "allowed": ["registry/team-*"]},
            sparkConf={"allowed": ["spark.sql.*"], "fixed": {"spark.driver.extraJavaOptions": "-Dx=1"}},
            limits={
                "maxRedeliverCount": 100,
                "minTrigger": "1s",
                "driver": {"maxCores": 2, "maxMemory": "4g"},
                "executor": {"maxInstances": 4, "maxCores": 2, "maxMemory": "8g"},
            },
            storage={
                "checkpointBase": "s3a://cp/",
                "checkpointClaim": "cp",
                "deadLetterTableBase": "s3a://tables",
            },
            pods={
                "serviceAccountName": "spark",
                "serviceAccountAnnotations": {"iam": "role"},
                "executorServiceAccountToken": True,
                "imagePullSecrets": [{"name": "registry"}],
                "nodeSelector": {"pool": "spark"},
                "tolerations": [{"key": "spark", "operator": "Exists"}],
                "priorityClassName": "batch",
                "labels": {"cost": "dlq"},
                "annotations": {"a": "b"},
                "policyMayOverride": ["labels", "tolerations"],
            },
        )
    )
    assert cls.is_default
    assert cls.namespace_selector == {"matchLabels": {"team": "billing"}}
    assert cls.brokers[0] == BrokerEntry(
        bootstrap_servers="kafka:9092",
        operator_secret=SecretKeyRef("op-kafka", "client.properties"),
        engine_secret_name="kafka-client",
    )
    assert cls.brokers[1].address == "pulsar://p:6650"
    assert cls.storage.checkpoint_base == "s3a://cp"
    assert cls.limits.min_trigger_ms == 1000
    assert cls.limits.executor.max_instances == 4
    assert cls.pods.image_pull_secrets == ("registry",)
    assert cls.pods.settings.node_selector == {"pool": "spark"}
    assert cls.pods.policy_may_override == ("labels", "tolerations")
    assert cls.spark_conf.fixed == {"spark.driver.extraJavaOptions": "-Dx=1"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"defaults": {"source": {"topic": "x"}}},
            "spec.defaults.source.topic: is not a field a class may default",
            id="defaults-not-defaultable",
        ),
        pytest.param(
            {"defaults": {"retry": {"breaker": {"window": 200}}}},
            "spec.defaults.retry.breaker.window: is not a field a class may default",
            id="defaults-breaker-field",
        ),
        pytest.param(
            {"defaults": {"retry": {"breaker": {}}}},
            "spec.defaults.retry.breaker: is not a field a class may default",
            id="defaults-breaker-on",
        ),
        pytest.param(
            {"defaults": {"retry": {"backoff": {"jitter": 2}}}},
            "spec.defaults.retry.backoff.jitter: must be between 0 and 1, got 2.0",
            id="defaults-invalid-value",
        ),
        pytest.param(
            {"defaults": {"topics": {"deadLetterConfig": {"retention.ms": "7d"}}}},
            "spec.defaults.topics.deadLetterConfig: retention.ms must be a whole number of "
            "milliseconds, or -1 (never deleted by age), got '7d'",
            id="defaults-retention-not-milliseconds",
        ),
        pytest.param(
            {
                "defaults": {"spark": {"executor": {"instances": 8}}},
                "limits": {"executor": {"maxInstances": 4}},
            },
            "spec.defaults.spark.executor.instances: 8 is more than class 'standard' allows "
            "(spec.limits.executor.maxInstances: 4)",
            id="defaults-beyond-own-limits",
        ),
        pytest.param(
            {"limits": {"maxRedeliverCount": 10}},
            "spec.defaults.retry.maxRedeliverCount: 16 is more than class 'standard' allows "
            "(spec.limits.maxRedeliverCount: 10) (the built-in default: give the class a default within the limit)",
            id="built-in-default-beyond-limits",
        ),
        pytest.param(
            {"pods": {"policyMayOverride": ["serviceAccountName"]}},
            "spec.pods.policyMayOverride[0]: must be one of nodeSelector, tolerations, affinity, "
            "priorityClassName, labels, annotations, got 'serviceAccountName'",
            id="override-unknown",
        ),
        pytest.param(
            {"sparkConf": {"fixed": {"spark.kubernetes.namespace": "other"}}},
            "spec.sparkConf.fixed.spark.kubernetes.namespace: is the operator's: the operator submits",
            id="fixed-operator-key",
        ),
        pytest.param(
            {"sparkConf": {"fixed": {"spark.kubernetes.driver.pod.excludedFeatureSteps": "x"}}},
            "spec.sparkConf.fixed.spark.kubernetes.driver.pod.excludedFeatureSteps: is the operator's",
            id="fixed-excluded-feature-steps",
        ),
        pytest.param(
            {"brokers": [{"type": "pulsar", "serviceUrl": "pulsar://p:6650", "bootstrapServers": "k:9092"}]},
            "spec.brokers[0].bootstrapServers: is for type kafka: a pulsar broker takes serviceUrl and adminUrl",
            id="pulsar-with-bootstrap",
        ),
        pytest.param(
            {
                "brokers": [
                    {
                        "type": "pulsar",
                        "serviceUrl": "pulsar://p:6650",
                        "operatorSecretRef": {"name": "o", "key": "k"},
                    }
                ]
            },
            "spec.brokers[0].operatorSecretRef.key: is for type kafka: on Pulsar the Secret's keys are the client's",
            id="pulsar-secret-key",
        ),
        pytest.param({"brokers": [{}]}, "spec.brokers[0].bootstrapServers: is required", id="kafka-address"),
        pytest.param(
            {"limits": {"driver": {"maxMemory": "lots"}}},
            "spec.limits.driver.maxMemory: must be a JVM memory size",
            id="memory",
        ),
        pytest.param({"imagez": {}}, "spec.imagez: unknown field (did you mean 'images'?)", id="typo"),
    ],
)
def test_a_bad_class_is_refused_naming_the_field(spec: dict[str, Any], message: str) -> None:
    assert any(found.startswith(message) for found in problems(class_object(**spec))), problems(
        class_object(**spec)
    )


def test_a_bad_class_is_kept_as_invalid_with_its_default_mark() -> None:
    found = read_class(class_object(default=True, imagez={}))
    assert isinstance(found, InvalidClass)
    assert (found.name, found.is_default) == ("standard", True)


def test_the_built_in_class_lists_the_command_line_credentials_brokers() -> None:
    assert built_in_class(OperatorConfig()) is BUILT_IN_CLASS
    cls = built_in_class(OperatorConfig(kafka_config_brokers=("a:9092", "b:9092")))
    assert [(b.bootstrap_servers, b.command_line_credentials) for b in cls.brokers] == [
        ("a:9092", True),
        ("b:9092", True),
    ]


# --- sparkConf keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("spark.sql.shuffle.partitions", "spark.sql.shuffle.partitions", True),
        ("spark.sql.shuffle.partitions", "spark.sql.shuffle.partitionsX", False),
        ("spark.sql.streaming.stateStore.rocksdb.*", "spark.sql.streaming.stateStore.rocksdb.x", True),
        ("spark.jars*", "spark.jars.packages", True),
        ("spark.jars*", "spark.jar", False),
    ],
)
def test_conf_keys_match_exactly_or_by_prefix(pattern: str, key: str, matches: bool) -> None:
    assert conf_key_matches(pattern, key) is matches


@pytest.mark.parametrize(
    "key",
    [
        "spark.master",
        "spark.kubernetes.namespace",
        "spark.kubernetes.authenticate.driver.serviceAccountName",
        "spark.kubernetes.driver.volumes.hostPath.root.mount.path",
        "spark.kubernetes.executor.secrets.token",
        "spark.kubernetes.driver.podTemplateFile",
        "spark.kubernetes.container.image",
        "spark.jars.packages",
        "spark.submit.pyFiles",
        "spark.driver.extraJavaOptions",
        "spark.driver.extraClassPath",
        "spark.executor.extraClassPath",
        "spark.executorEnv.JAVA_TOOL_OPTIONS",
        "spark.sql.streaming.checkpointLocation",
    ],
)
def test_keys_no_class_can_allow(key: str) -> None:
    assert forbidden(key) is not None


@pytest.mark.parametrize(
    "key", [*DEFAULT_SPARK_CONF_ALLOWED, "spark.ui.enabled", "spark.kubernetes.driver.request"]
)
def test_the_default_allow_list_is_clear_of_the_forbidden_keys(key: str) -> None:
    assert forbidden(key.rstrip("*") + ("x" if key.endswith("*") else "")) is None


def test_one_cel_rule_per_forbidden_group_naming_the_key() -> None:
    rules = forbidden_conf_rules()
    assert len(rules) == len(FORBIDDEN_SPARK_CONF)
    first = rules[0]
    assert first["rule"].startswith("!self.exists(k, k == 'spark.master' || ")
    assert first["messageExpression"].startswith("self.filter(k, k == 'spark.master' || ")
    assert first["messageExpression"].endswith(
        '[0] + " is never allowed in a policy: the operator submits every job in cluster mode to '
        "the policy's own namespace\""
    )
    assert "k.startsWith('spark.kubernetes.authenticate.')" in rules[1]["rule"]


# --- choosing the class --------------------------------------------------------------------------


def refusal(reason: Reason, call: Any) -> str:
    with pytest.raises(ClassRefusal) as refused:
        call()
    assert refused.value.reason is reason
    return str(refused.value)


STANDARD = parse_class(class_object("standard", default=True))
TEAM = parse_class(class_object("team"))


@pytest.mark.parametrize(
    ("class_name", "classes", "chosen"),
    [
        pytest.param(None, [], BUILT_IN_CLASS, id="no-class-in-the-cluster"),
        pytest.param(None, [STANDARD, TEAM], STANDARD, id="the-default"),
        pytest.param("team", [STANDARD, TEAM], TEAM, id="named"),
        pytest.param("team", [TEAM], TEAM, id="named-without-a-default"),
    ],
)
def test_a_policy_gets_its_named_class_else_the_default(
    class_name: str | None, classes: list[PolicyClass], chosen: PolicyClass
) -> None:
    document = policy_document({"spec.className": class_name} if class_name else {})
    assert select_class(document, classes) is chosen


def test_a_named_class_that_does_not_exist() -> None:
    message = refusal(
        Reason.CLASS_NOT_FOUND,
        lambda: select_class(policy_document({"spec.className": "gold"}), [STANDARD, TEAM]),
    )
    assert message == "spec.className: DeadLetterPolicyClass 'gold' does not exist (classes: standard, team)"


def test_no_class_named_and_none_default() -> None:
    message = refusal(Reason.NO_DEFAULT_CLASS, lambda: select_class(policy_document(), [TEAM]))
    assert message == (
        "spec.className: is not set and no DeadLetterPolicyClass is marked default (annotation "
        'sparkdlq.io/is-default-class: "true"): name one of team'
    )


def test_two_default_classes_are_both_named() -> None:
    other = parse_class(class_object("other", default=True))
    message = refusal(
        Reason.DEFAULT_CLASS_AMBIGUOUS, lambda: select_class(policy_document(), [STANDARD, other])
    )
    assert "DeadLetterPolicyClasses 'other' and 'standard' are all marked default" in message


def test_an_invalid_class_refuses_its_policies() -> None:
    bad = read_class(class_object("standard", default=True, imagez={}))
    message = refusal(Reason.CLASS_INVALID, lambda: select_class(policy_document(), [bad]))
    assert message == (
        "spec.className: DeadLetterPolicyClass 'standard' is invalid: spec.imagez: unknown field "
        "(did you mean 'images'?)"
    )


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        ({}, {}, True),
        ({"matchLabels": {"team": "billing"}}, {"team": "billing"}, True),
        ({"matchLabels": {"team": "billing"}}, {"team": "orders"}, False),
        (
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]},
            {"team": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, {"team": "a"}, False),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, {}, True),
    ],
)
def test_namespace_selectors_match_as_kubernetes_does(
    selector: dict[str, Any], labels: dict[str, str], selected: bool
) -> None:
    assert selector_matches(selector, labels) is selected


def test_a_namespace_the_class_does_not_select() -> None:
    cls = parse_class(class_object(namespaceSelector={"matchLabels": {"team": "billing"}}))
    admit_namespace(cls, "payments", {"team": "billing"})
    message = refusal(Reason.NAMESPACE_NOT_ALLOWED, lambda: admit_namespace(cls, "orders", {}))
    assert message == (
        "metadata.namespace: 'orders' is not allowed by class 'standard' (spec.namespaceSelector: team=billing)"
    )


# --- helpers -------------------------------------------------------------------------------------


def test_deep_merge_merges_mappings_and_replaces_lists() -> None:
    under = {
        "retry": {"maxRedeliverCount": 3, "nonRetryableErrors": ["A"]},
        "topics": {"retryConfig": {"a": "1"}},
    }
    over = {"retry": {"nonRetryableErrors": ["B"]}, "topics": {"retryConfig": {"b": "2"}}}
    assert deep_merge(under, over) == {
        "retry": {"maxRedeliverCount": 3, "nonRetryableErrors": ["B"]},
        "topics": {"retryConfig": {"a": "1", "b": "2"}},
    }
    assert under["retry"]["nonRetryableErrors"] == ["A"]


@pytest.mark.parametrize(
    ("text", "size"),
    [("512m", 512 * 2**20), ("2g", 2 * 2**30), ("2G", 2 * 2**30), ("1024", 2**30), ("1x", None)],
)
def test_memory_sizes_read_as_spark_reads_them(text: str, size: int | None) -> None:
    assert memory_bytes(text) == size
