"""The operator's pure builders: every field of what it writes, and the status it computes."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from typing import Any

import pytest
import yaml

from dlq_engine.model import config_hash, to_document
from dlq_engine.model.documents import load_policy_text
from dlq_engine.model.topics import (
    PulsarSubscriptionWant,
    TopicWant,
    broker_topic_name,
    pulsar_subscriptions,
    wanted_topics,
)
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_operator import naming, render
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import PodFit
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.application_state import (
    JOB_RESTARTING,
    JOB_SUBMITTED,
    JOB_SUSPENDED,
    application_state,
    job_condition,
    resubmission,
    resubmit_due,
    unnoticed,
    unwatched,
)
from spark_dlq_operator.policies.status import ConditionState, Observation, next_status
from spark_dlq_operator.policies.supervision import (
    breaker_condition,
    driver_pending,
    engine_stalled,
    ordering_status,
)
from spark_dlq_operator.reasons import Reason
from tests.policy_builder import policy

CONFIG = OperatorConfig(
    namespaces=("payments",),
    spark_image="registry/spark-dlq:1",
    spark_version="4.0.0",
    checkpoint_base="s3a://cp/dlq/",
    spark_service_account="spark-driver",
)
OWNER = Owner(name="orders-billing", namespace="payments", uid="uid-1")
LABELS = {"app.kubernetes.io/managed-by": "spark-dlq-operator", "sparkdlq.io/policy": "orders-billing"}
REFERENCE = {
    "apiVersion": "sparkdlq.io/v1alpha1",
    "kind": "DeadLetterPolicy",
    "name": "orders-billing",
    "uid": "uid-1",
    "controller": True,
    "blockOwnerDeletion": True,
}
#: The restricted Pod Security Standard on the driver and executor pods.
POD_SECURITY = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
NOW = "2026-11-22T01:00:00Z"
LATER = "2026-11-22T02:00:00Z"


# --- names and labels --------------------------------------------------------------------------


def test_labels_name_the_operator_and_the_policy() -> None:
    assert naming.labels("orders-billing") == LABELS


def test_label_value_keeps_a_short_name() -> None:
    assert naming.label_value("orders-billing") == "orders-billing"


def test_label_value_shortens_a_long_name_with_a_hash() -> None:
    long = "a" * 100
    value = naming.label_value(long)
    assert len(value) <= 63
    assert value.startswith("a" * 50)
    assert value != naming.label_value("a" * 99)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({}, "s3a://cp/dlq/payments/orders-billing", id="from-the-base"),
        pytest.param({"spec.spark.checkpointLocation": "hdfs:///own"}, "hdfs:///own", id="from-the-policy"),
    ],
)
def test_checkpoint_location(overrides: dict[str, Any], expected: str) -> None:
    assert render.checkpoint_location(policy(overrides), CONFIG) == expected


# --- ConfigMap ---------------------------------------------------------------------------------


def test_config_map_holds_the_normalised_policy_with_its_checkpoint() -> None:
    p = policy({"spec.retry.maxRedeliverCount": 3})
    manifest = render.config_map(p, config=CONFIG, owner=OWNER)
    assert manifest["apiVersion"] == "v1"
    assert manifest["kind"] == "ConfigMap"
    assert manifest["metadata"] == {
        "name": "orders-billing-policy",
        "namespace": "payments",
        "labels": LABELS,
        "ownerReferences": [REFERENCE],
    }
    expected = to_document(p)
    expected["spec"]["spark"]["checkpointLocation"] = "s3a://cp/dlq/payments/orders-billing"
    assert yaml.safe_load(manifest["data"]["policy.yaml"]) == expected
    assert list(manifest["data"]) == ["policy.yaml"]


@pytest.mark.parametrize("suspend", [pytest.param(False, id="running"), pytest.param(True, id="suspended")])
def test_desired_renders_the_objects_and_names_with_one_hash(suspend: bool) -> None:
    p = policy({"spec.suspend": suspend})
    want = render.desired(p, config=CONFIG, owner=OWNER, fit=PodFit())
    assert want.config_hash == config_hash(p)
    assert want.config_map == render.config_map(p, config=CONFIG, owner=OWNER)
    if suspend:
        assert want.application is None
    else:
        assert want.application == render.spark_application(p, config=CONFIG, owner=OWNER)
    assert (want.application_name, want.service_account) == ("orders-billing", "spark-driver")
    assert (want.retry_topic, want.dead_letter_topic) == (p.retry_topic, p.dead_letter_topic)


def test_pin_provisioner_annotates_a_copy() -> None:
    plain = render.config_map(policy(), config=CONFIG, owner=OWNER)
    pinned = render.pin_provisioner(plain, "strimzi")
    assert pinned == render.config_map(policy(), config=CONFIG, owner=OWNER, provisioner="strimzi")
    assert "annotations" not in plain["metadata"]
    assert render.pin_provisioner(plain, None) is plain


def test_config_map_pins_the_provisioner_when_given() -> None:
    manifest = render.config_map(policy(), config=CONFIG, owner=OWNER, provisioner="strimzi")
    assert manifest["metadata"]["annotations"] == {"sparkdlq.io/topic-provisioner": "strimzi"}


PULSAR = {
    "type": "pulsar",
    "serviceUrl": "pulsar://pulsar.pulsar:6650",
    "adminUrl": "http://pulsar.pulsar:8080",
}


def test_config_map_of_a_pulsar_policy_carries_its_broker() -> None:
    manifest = render.config_map(policy({"spec.broker": PULSAR}), config=CONFIG, owner=OWNER)
    assert yaml.safe_load(manifest["data"]["policy.yaml"])["spec"]["broker"] == PULSAR


def test_spark_application_of_a_pulsar_policy_runs_the_same_engine_without_kafka_settings() -> None:
    kafka = render.spark_application(policy(), config=CONFIG, owner=OWNER)
    pulsar = render.spark_application(policy({"spec.broker": PULSAR}), config=CONFIG, owner=OWNER)
    # The same command; only the policy file's hash differs.
    assert pulsar["spec"]["arguments"][:-1] == kafka["spec"]["arguments"][:-1]
    assert pulsar["spec"]["arguments"][-1] != kafka["spec"]["arguments"][-1]
    assert [v["name"] for v in pulsar["spec"]["driver"]["template"]["spec"]["volumes"]] == ["policy"]
    assert pulsar["spec"]["driver"]["annotations"] != kafka["spec"]["driver"]["annotations"]


# --- SparkApplication --------------------------------------------------------------------------


def test_spark_application_metadata() -> None:
    p = policy()
    app = render.spark_application(p, config=CONFIG, owner=OWNER)
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert app["kind"] == "SparkApplication"
    assert app["metadata"] == {
        "name": "orders-billing",
        "namespace": "payments",
        "labels": LABELS,
        "annotations": {"sparkdlq.io/config-hash": config_hash(p)},
        "ownerReferences": [REFERENCE],
    }


def test_spark_application_spec() -> None:
    p = policy(
        {
            "spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "4"},
            "spec.spark.driver": {"cores": 2, "memory": "2g"},
            "spec.spark.executor": {"instances": 3, "cores": 4, "memory": "4g"},
        }
    )
    digest = config_hash(p)
    spec = render.spark_application(p, config=CONFIG, owner=OWNER)["spec"]
    mounts = [{"name": "policy", "mountPath": "/etc/spark-dlq/policy", "readOnly": True}]
    assert spec == {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "sparkVersion": "4.0.0",
        "image": "registry/spark-dlq:1",
        "mainApplicationFile": "local:///opt/spark-dlq/dlq_engine_main.py",
        "arguments": [
            "run",
            "-f",
            "/etc/spark-dlq/policy/policy.yaml",
            "--checkpoint",
            "s3a://cp/dlq/payments/orders-billing",
            "--heartbeat-lease",
            "payments/orders-billing-heartbeat",
            "--config-hash",
            render.policy_file_hash(p, CONFIG),
        ],
        "sparkConf": {"spark.sql.shuffle.partitions": "4", **DRIVER_CONF},
        "restartPolicy": {
            "type": "Always",
            "onFailureRetryInterval": 10,
            "onSubmissionFailureRetryInterval": 20,
        },
        "driver": {
            "cores": 2,
            "memory": "2g",
            "serviceAccount": "spark-driver",
            "labels": LABELS,
            "annotations": {"sparkdlq.io/config-hash": digest},
            "template": template("spark-kubernetes-driver", mounts, **DRIVER_METRICS),
        },
        "executor": {
            "instances": 3,
            "cores": 4,
            "memory": "4g",
            "labels": LABELS,
            "template": template("spark-kubernetes-executor", mounts, token=False),
        },
    }


#: What the operator sets so that the driver needs rights on its executor pods only.
DRIVER_CONF = {
    "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
    "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
    "spark.kubernetes.driver.service.deleteOnTermination": "false",
    "spark.kubernetes.executor.disableConfigMap": "true",
}


@pytest.mark.parametrize(
    "checkpoint",
    [pytest.param("", id="the-operators-checkpoint"), pytest.param("s3a://own/cp", id="the-policys-own")],
)
def test_the_config_hash_given_to_the_engine_is_the_one_of_the_file_it_mounts(checkpoint: str) -> None:
    """What ``dlq-engine run --config-hash`` compares: the hash of the policy it loads from the
    ConfigMap's text, exactly as the operator wrote it."""
    p = policy({"spec.spark.checkpointLocation": checkpoint})
    arguments = render.spark_application(p, config=CONFIG, owner=OWNER)["spec"]["arguments"]
    given = arguments[arguments.index("--config-hash") + 1]
    text = render.config_map(p, config=CONFIG, owner=OWNER)["data"]["policy.yaml"]
    assert config_hash(load_policy_text(text)) == given
    # With its own checkpoint the file says what the policy says: the same hash as the annotation.
    assert (given == config_hash(p)) is bool(checkpoint)


def test_the_spark_pods_run_as_the_policys_own_service_account_unless_one_is_shared() -> None:
    own = render.spark_application(policy(), config=OperatorConfig(), owner=OWNER)["spec"]
    assert own["driver"]["serviceAccount"] == "orders-billing-spark"
    assert "serviceAccount" not in own["executor"]  # Spark gives executors the driver's
    shared = render.spark_application(policy(), config=CONFIG, owner=OWNER)["spec"]
    assert shared["driver"]["serviceAccount"] == "spark-driver"
    # The class's shared account wins over the operator's (render.shared_service_account).
    named = render.spark_application(
        policy(), config=CONFIG, owner=OWNER, fit=PodFit(service_account="team-spark")
    )
    assert named["spec"]["driver"]["serviceAccount"] == "team-spark"


def test_executors_get_a_token_only_when_asked() -> None:
    def tokens(app: dict[str, Any]) -> tuple[object, object]:
        return tuple(  # type: ignore[return-value]
            app["spec"][role]["template"]["spec"].get("automountServiceAccountToken", "unset")
            for role in ("driver", "executor")
        )

    assert tokens(render.spark_application(policy(), config=CONFIG, owner=OWNER)) == ("unset", False)
    asked = render.spark_application(
        policy(), config=CONFIG, owner=OWNER, fit=PodFit(executor_service_account_token=True)
    )
    assert tokens(asked) == ("unset", True)


def test_the_operators_spark_settings_win_over_the_policys() -> None:
    p = policy({"spec.spark.sparkConf": {"spark.kubernetes.executor.disableConfigMap": "false"}})
    conf = render.spark_application(p, config=CONFIG, owner=OWNER)["spec"]["sparkConf"]
    assert conf == DRIVER_CONF


def test_spark_makes_its_network_policy_unless_the_platform_turned_them_off() -> None:
    """Spark 4.2's NetworkPolicyFeatureStep runs by default; ``--no-spark-network-policy``
    excludes it from every SparkApplication, whatever the policy says."""
    on = render.spark_application(policy({}), config=CONFIG, owner=OWNER)["spec"]["sparkConf"]
    assert render.EXCLUDED_DRIVER_STEPS not in on
    off = dataclasses.replace(CONFIG, spark_network_policy=False)
    conf = render.spark_application(policy({}), config=off, owner=OWNER)["spec"]["sparkConf"]
    assert (
        conf[render.EXCLUDED_DRIVER_STEPS] == "org.apache.spark.deploy.k8s.features.NetworkPolicyFeatureStep"
    )


#: The driver serves the engine's metrics on a port the chart's PodMonitor selects by name.
DRIVER_METRICS: dict[str, Any] = {
    "ports": [{"name": "metrics", "containerPort": 9091}],
    "env": [{"name": "SPARK_DLQ_METRICS_PORT", "value": "9091"}],
}


def template(
    container: str, mounts: list[dict[str, Any]], *, token: bool | None = None, **extra: Any
) -> dict[str, Any]:
    """A pod template as the SparkApplication carries it for the policy's volumes."""
    spec: dict[str, Any] = {
        "securityContext": POD_SECURITY,
        "volumes": [{"name": "policy", "configMap": {"name": "orders-billing-policy"}}],
        "containers": [
            {"name": container, "securityContext": CONTAINER_SECURITY, "volumeMounts": mounts} | extra
        ],
    }
    if token is not None:
        spec["automountServiceAccountToken"] = token
    return {"spec": spec}


def test_driver_metrics_port_is_the_one_the_chart_scrapes() -> None:
    values = yaml.safe_load((REPO_ROOT / "charts/spark-dlq-operator/values.yaml").read_text())
    spec = render.spark_application(policy(), config=CONFIG, owner=OWNER)["spec"]
    [driver] = spec["driver"]["template"]["spec"]["containers"]
    [port] = driver["ports"]
    assert port["name"] == values["monitoring"]["podMonitor"]["portName"]
    assert {"name": "SPARK_DLQ_METRICS_PORT", "value": str(port["containerPort"])} in driver["env"]


def test_spark_application_needs_no_webhook_for_volumes_or_security_contexts() -> None:
    """Only the spark-operator's mutating webhook copies ``spec.volumes``, ``volumeMounts`` and the
    security-context fields onto the pods: none of them is used, the pod templates carry it all."""
    spec = render.spark_application(policy(), config=CONFIG, owner=OWNER)["spec"]
    assert "volumes" not in spec
    for role in ("driver", "executor"):
        assert not {"volumeMounts", "podSecurityContext", "securityContext"} & set(spec[role])


def test_spark_application_image_from_the_policy_wins() -> None:
    app = render.spark_application(policy({"spec.spark.image": "own/image:2"}), config=CONFIG, owner=OWNER)
    assert app["spec"]["image"] == "own/image:2"


def test_spark_application_spark_version_comes_from_the_config() -> None:
    config = OperatorConfig(spark_version="4.1.0")
    assert render.spark_application(policy(), config=config, owner=OWNER)["spec"]["sparkVersion"] == "4.1.0"


def test_spark_application_mounts_the_kafka_client_secret_by_name_only() -> None:
    spec = render.spark_application(
        policy({"spec.broker.secretRef": {"name": "kafka-client"}}), config=CONFIG, owner=OWNER
    )["spec"]
    secret_mount = {"name": "kafka-client", "mountPath": "/etc/spark-dlq/kafka-client", "readOnly": True}
    for role in ("driver", "executor"):
        pod = spec[role]["template"]["spec"]
        assert pod["volumes"][1] == {"name": "kafka-client", "secret": {"secretName": "kafka-client"}}
        assert secret_mount in pod["containers"][0]["volumeMounts"]


@pytest.mark.parametrize(
    ("overrides", "restarts"),
    [
        pytest.param({"spec.retry.maxRedeliverCount": 3}, True, id="engine-setting"),
        pytest.param({"spec.spark.image": "other:1"}, True, id="image"),
        pytest.param({"spec.suspend": False}, False, id="suspend-false"),
        pytest.param({"spec.topics.partitions": 6}, False, id="topic-provisioning"),
    ],
)
def test_spark_application_changes_only_with_the_engine_config(
    overrides: dict[str, Any], restarts: bool
) -> None:
    before = render.spark_application(policy(), config=CONFIG, owner=OWNER)
    after = render.spark_application(policy(overrides), config=CONFIG, owner=OWNER)
    assert (before != after) is restarts
    assert (before["spec"]["driver"]["annotations"] != after["spec"]["driver"]["annotations"]) is restarts


# --- topics ------------------------------------------------------------------------------------


def test_wanted_topics_follow_the_source_partitions() -> None:
    p = policy({"spec.topics.retryConfig": {"retention.ms": "1000"}, "spec.topics.replicationFactor": 3})
    retry, dlq = wanted_topics(p, source_partitions=6)
    assert (retry.name, retry.partitions, retry.replication_factor) == ("orders-billing-RETRY", 6, 3)
    assert retry.config == {"retention.ms": "1000"}
    assert (dlq.name, dlq.partitions, dlq.replication_factor) == ("orders-billing-DLQ", 6, 3)
    assert dlq.config == {"retention.ms": "-1"}  # tests/unit/test_topics.py: the retention defaults


def test_pulsar_topics_subscriptions_and_status_names() -> None:
    p = policy({"spec.broker": PULSAR, "spec.source.topic": "shop/orders/orders"})
    retry, dlq = wanted_topics(p, source_partitions=0)
    assert (retry.name, retry.partitions, dlq.name) == (
        "shop/orders/orders-billing-RETRY",
        0,
        "shop/orders/orders-billing-DLQ",
    )
    assert pulsar_subscriptions(p) == (
        PulsarSubscriptionWant("shop/orders/orders-billing-RETRY", "billing"),
        PulsarSubscriptionWant("shop/orders/orders-billing-DLQ", "spark-dlq-keep"),
    )
    assert broker_topic_name(p, p.dead_letter_topic) == "persistent://shop/orders/orders-billing-DLQ"
    assert broker_topic_name(policy(), "orders-billing-DLQ") == "orders-billing-DLQ"


def test_wanted_topics_partitions_from_the_policy_win() -> None:
    retry, dlq = wanted_topics(policy({"spec.topics.partitions": 2}), source_partitions=6)
    assert (retry.partitions, dlq.partitions) == (2, 2)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        pytest.param("orders-billing-dlq", "orders-billing-dlq", id="valid-name-kept"),
        pytest.param("orders.v1", "orders.v1", id="dots-kept"),
        pytest.param("Orders_EU-RETRY", "orders-eu-retry---", id="sanitised-with-hash"),
    ],
)
def test_kafka_topic_name(topic: str, expected: str) -> None:
    name = naming.kafka_topic_name(topic)
    assert name.startswith(expected)
    if name != topic:
        assert len(name) == len(expected) + 40
        assert name != naming.kafka_topic_name(topic.lower())


def test_kafka_topic_manifest() -> None:
    p = policy(
        {
            "spec.topics.provisioner": "strimzi",
            "spec.topics.strimzi": {"namespace": "kafka", "cluster": "my-cluster"},
        }
    )
    want = TopicWant("orders-billing-DLQ", 3, 2, {"retention.ms": "5"})
    manifest = render.kafka_topic(p, want, owner=None, uid="uid-1")
    assert manifest["apiVersion"] == "kafka.strimzi.io/v1"
    assert manifest["kind"] == "KafkaTopic"
    assert manifest["metadata"]["namespace"] == "kafka"
    assert manifest["metadata"]["name"] == naming.kafka_topic_name("orders-billing-DLQ")
    assert manifest["metadata"]["labels"] == {
        "strimzi.io/cluster": "my-cluster",
        **LABELS,
        "sparkdlq.io/policy-namespace": "payments",
    }
    # The uid of the policy it was created for: what tells the operator the topic is that policy's.
    assert manifest["metadata"]["annotations"] == {"sparkdlq.io/policy-uid": "uid-1"}
    assert "ownerReferences" not in manifest["metadata"]
    assert manifest["spec"] == {
        "topicName": "orders-billing-DLQ",
        "partitions": 3,
        "replicas": 2,
        "config": {"retention.ms": "5"},
    }


def test_kafka_topic_defaults_leave_partitions_and_replicas_to_the_broker() -> None:
    p = policy({"spec.topics.strimzi": {"cluster": "c"}})
    manifest = render.kafka_topic(p, TopicWant("t", None, -1, {}), owner=OWNER, uid=OWNER.uid)
    assert manifest["metadata"]["namespace"] == "payments"
    assert manifest["metadata"]["ownerReferences"] == [REFERENCE]
    assert manifest["spec"] == {"topicName": "t", "config": {}}


@pytest.mark.parametrize(
    ("obj", "ready"),
    [
        pytest.param({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, True, id="ready"),
        pytest.param(
            {"status": {"conditions": [{"type": "Ready", "status": "False", "message": "boom"}]}},
            False,
            id="not-ready",
        ),
        pytest.param({}, False, id="no-status"),
        pytest.param(
            {
                "metadata": {"generation": 2},
                "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]},
            },
            False,
            id="stale-generation",
        ),
    ],
)
def test_strimzi_ready(obj: dict[str, Any], ready: bool) -> None:
    assert render.strimzi_ready(obj)[0] is ready


# --- status ------------------------------------------------------------------------------------


def app_in(state: str, error: str = "") -> dict[str, Any]:
    return {"status": {"applicationState": {"state": state, "errorMessage": error}, "submissionID": "s"}}


@pytest.mark.parametrize(
    ("state", "status", "reason"),
    [
        pytest.param("RUNNING", "True", "Running", id="running"),
        pytest.param("", "False", "Submitted", id="no-state"),
        pytest.param("SUBMITTED", "False", "Submitted", id="submitted"),
        pytest.param("PENDING_RERUN", "False", "Restarting", id="pending-rerun"),
        pytest.param("INVALIDATING", "False", "Restarting", id="invalidating"),
        pytest.param("SUCCEEDING", "False", "Restarting", id="succeeding"),
        pytest.param("FAILED", "False", "Failed", id="failed"),
        pytest.param("SUBMISSION_FAILED", "False", "Restarting", id="submission-failed-is-retried"),
        pytest.param("FAILING", "False", "Restarting", id="failing-is-retried"),
        pytest.param("SUSPENDING", "False", "Restarting", id="suspending"),
        pytest.param("RESUMING", "False", "Restarting", id="resuming"),
        pytest.param("SUSPENDED", "False", "Suspended", id="suspended-by-hand"),
        pytest.param("COMPLETED", "False", "Completed", id="completed"),
        pytest.param("UNKNOWN", "Unknown", "DriverUnknown", id="unknown-driver"),
    ],
)
def test_job_condition_maps_the_application_state(state: str, status: str, reason: str) -> None:
    condition = job_condition(app_in(state))
    assert (condition.status, condition.reason) == (status, reason)


def test_job_condition_carries_the_error_message() -> None:
    assert "driver OOM" in job_condition(app_in("FAILED", "driver OOM")).message
    assert "driver OOM" in job_condition(app_in("FAILING", "driver OOM")).message


def test_restart_policy_never_runs_out() -> None:
    """The spark-operator counts OnFailure retries over the application's life: a streaming job
    uses Always, which resubmits after every failure."""
    policy_ = render.restart_policy(OperatorConfig(restart_interval=7, submission_retry_interval=9))
    assert policy_ == {"type": "Always", "onFailureRetryInterval": 7, "onSubmissionFailureRetryInterval": 9}


def test_kafka_topic_is_written_in_the_version_served() -> None:
    p = policy({"spec.topics.strimzi": {"cluster": "c"}})
    want = TopicWant("t", 1, 1, {})
    assert (
        render.kafka_topic(p, want, owner=None, uid="u", version="v1beta2")["apiVersion"]
        == "kafka.strimzi.io/v1beta2"
    )
    assert naming.STRIMZI_VERSIONS == ("v1", "v1beta2")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("orders-billing", id="label"),
        pytest.param("a", id="one-letter"),
        pytest.param("x" * 63, id="63-characters"),
    ],
)
def test_application_name_is_the_policy_name_when_it_is_a_dns_1035_label(name: str) -> None:
    assert naming.application_name(name) == name


DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(
    ("name", "start"),
    [
        pytest.param("orders.billing", "orders-billing-", id="dot"),
        pytest.param("9orders", "p-9orders-", id="leading-digit"),
        pytest.param("x" * 64, "x" * 54 + "-", id="64-characters"),
        pytest.param("a." + "b" * 250, "a-" + "b" * 52 + "-", id="253-characters"),
        pytest.param("1.2", "p-1-2-", id="digits-and-dot"),
    ],
)
def test_application_name_of_any_policy_name_is_a_dns_1035_label(name: str, start: str) -> None:
    derived = naming.application_name(name)
    assert DNS_1035.match(derived)
    assert len(derived) <= 63
    assert derived.startswith(start)
    assert derived == naming.application_name(name), "deterministic"


def test_application_names_of_similar_policies_differ() -> None:
    derived = [naming.application_name(n) for n in ["orders.billing", "orders-billing", "orders..billing"]]
    assert len(set(derived)) == 3, derived


def test_spark_application_is_named_and_recorded_by_its_derived_name() -> None:
    app = render.spark_application(policy({"metadata.name": "orders.billing"}), config=CONFIG, owner=OWNER)
    assert app["metadata"]["name"] == naming.application_name("orders.billing")
    assert app["metadata"]["labels"]["sparkdlq.io/policy"] == "orders.billing"


NOW = datetime.datetime(2026, 11, 24, 12, 0, 0, tzinfo=datetime.UTC)


def failing(state: str, *, attempts: int, seconds_ago: float, interval: int = 10) -> dict[str, Any]:
    last = NOW - datetime.timedelta(seconds=seconds_ago)
    return {
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {
            "restartPolicy": {
                "type": "Always",
                "onFailureRetryInterval": interval,
                "onSubmissionFailureRetryInterval": interval,
            }
        },
        "status": {
            "applicationState": {"state": state},
            "submissionAttempts": attempts,
            "lastSubmissionAttemptTime": last.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }


def resubmitted(app: dict[str, Any], times: int) -> dict[str, Any]:
    app["spec"]["driver"] = {"annotations": {naming.RESUBMIT_ANNOTATION: str(times)}}
    return app


@pytest.mark.parametrize(
    ("app", "due"),
    [
        pytest.param(failing("FAILING", attempts=3, seconds_ago=5), None, id="spark-operator-within-cap"),
        pytest.param(failing("FAILING", attempts=31, seconds_ago=100), 200.0, id="past-cap-waits-for-cap"),
        pytest.param(failing("FAILING", attempts=31, seconds_ago=400), 0.0, id="past-cap-due-now"),
        pytest.param(failing("SUBMISSION_FAILED", attempts=40, seconds_ago=0), 300.0, id="submission-failed"),
        pytest.param(failing("RUNNING", attempts=99, seconds_ago=0), None, id="running"),
        pytest.param(failing("FAILED", attempts=99, seconds_ago=4), 6.0, id="failed-first-interval"),
        pytest.param(failing("FAILED", attempts=1, seconds_ago=400), 0.0, id="failed-due-now"),
        pytest.param(resubmitted(failing("FAILED", attempts=1, seconds_ago=0), 3), 80.0, id="failed-doubles"),
        pytest.param(resubmitted(failing("FAILED", attempts=1, seconds_ago=0), 9), 300.0, id="failed-capped"),
    ],
)
def test_resubmit_due_caps_the_spark_operators_growing_wait(app: dict[str, Any], due: float | None) -> None:
    assert resubmit_due(app, cap=300, now=NOW) == due


def test_resubmission_bumps_a_spec_annotation_outside_the_config_hash() -> None:
    app = {
        "spec": {"driver": {"annotations": {"sparkdlq.io/config-hash": "h", "sparkdlq.io/resubmission": "2"}}}
    }
    assert resubmission(app) == {"spec": {"driver": {"annotations": {"sparkdlq.io/resubmission": "3"}}}}
    assert resubmission({}) == {"spec": {"driver": {"annotations": {"sparkdlq.io/resubmission": "1"}}}}


def test_unwatched_namespace_is_named_when_the_job_namespaces_are_declared() -> None:
    assert unwatched("payments", ()) is None
    assert unwatched("payments", ("payments", "other")) is None
    assert unwatched("payments", ("",)) is None
    condition = unwatched("payments", ("spark-jobs",))
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "NamespaceNotWatched")
    assert "watches spark-jobs, not payments" in condition.message


def test_unnoticed_application_gets_a_hint_after_the_timeout() -> None:
    created = (NOW - datetime.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    app: dict[str, Any] = {"metadata": {"name": "a", "namespace": "payments", "creationTimestamp": created}}
    assert unnoticed(app, now=NOW, timeout=60) is None
    condition = unnoticed(app, now=NOW, timeout=20)
    assert condition is not None
    assert condition.reason == "NotPickedUp"
    assert "may not watch namespace payments" in condition.message
    app["status"] = {"applicationState": {"state": "SUBMITTED"}}
    assert unnoticed(app, now=NOW, timeout=20) is None


def test_application_state_includes_the_submission() -> None:
    assert application_state(app_in("RUNNING")) == ("RUNNING", "s", "")


TOPICS_OK = ConditionState("True", "TopicsReady", "ok")


def full(job: ConditionState, **kwargs: Any) -> Observation:
    return Observation(
        generation=2,
        topics=TOPICS_OK,
        job=job,
        retry_topic="r",
        dead_letter_topic="d",
        spark_application="orders-billing",
        config_hash="abc",
        **kwargs,
    )


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_next_status_from_nothing() -> None:
    status = next_status({}, full(JOB_SUBMITTED), now=NOW)
    assert status["observedGeneration"] == 2
    assert status["phase"] == "Pending"
    names = ("retryTopic", "deadLetterTopic", "sparkApplication", "configHash")
    assert tuple(status[k] for k in names) == ("r", "d", "orders-billing", "abc")
    assert status["restartCount"] == 0
    assert "lastRestartTime" not in status
    assert [c["type"] for c in status["conditions"]] == ["Ready", "TopicsReady", "JobRunning"]
    for condition in status["conditions"]:
        assert condition["lastTransitionTime"] == NOW
        assert condition["observedGeneration"] == 2
    ready = conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Submitted")


def test_next_status_ready_when_topics_and_job_are() -> None:
    status = next_status({}, full(ConditionState("True", "Running", "up")), now=NOW)
    assert status["phase"] == "Running"
    ready = conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Ready")


def test_next_status_keeps_the_transition_time_of_an_unchanged_condition() -> None:
    first = next_status({}, full(JOB_SUBMITTED), now=NOW)
    second = next_status(first, full(ConditionState("True", "Running", "up")), now=LATER)
    assert conditions(second)["TopicsReady"]["lastTransitionTime"] == NOW
    assert conditions(second)["JobRunning"]["lastTransitionTime"] == LATER
    assert conditions(second)["Ready"]["lastTransitionTime"] == LATER


def test_next_status_counts_a_restart() -> None:
    first = next_status({}, full(JOB_SUBMITTED), now=NOW)
    second = next_status(first, full(JOB_RESTARTING, restarted=True), now=LATER)
    assert second["restartCount"] == 1
    assert second["lastRestartTime"] == LATER
    assert second["phase"] == "Restarting"


def test_next_status_invalid_names_the_fields() -> None:
    observation = Observation(generation=3, invalid=["spec.a: bad", "spec.b: worse"])
    status = next_status({}, observation, now=NOW)
    assert status["phase"] == "Invalid"
    ready = conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert ready["message"] == "spec.a: bad\nspec.b: worse"
    assert status["observedGeneration"] == 3


def test_next_status_an_application_event_does_not_clear_invalid() -> None:
    invalid = next_status({}, Observation(generation=3, invalid=["spec.a: bad"]), now=NOW)
    status = next_status(invalid, Observation(job=ConditionState("True", "Running", "up")), now=LATER)
    assert status["phase"] == "Invalid"
    assert conditions(status)["JobRunning"]["status"] == "True"


def test_next_status_a_valid_reconcile_clears_invalid() -> None:
    invalid = next_status({}, Observation(generation=3, invalid=["spec.a: bad"]), now=NOW)
    status = next_status(invalid, full(JOB_SUBMITTED), now=LATER)
    assert status["phase"] == "Pending"


def test_next_status_leaves_unobserved_fields_alone() -> None:
    before = next_status({}, full(JOB_SUBMITTED), now=NOW)
    after = next_status(before, Observation(), now=LATER)
    assert after == before


@pytest.mark.parametrize(
    ("topics", "job", "phase"),
    [
        pytest.param(TOPICS_OK, ConditionState("True", "Running", ""), "Running", id="running"),
        pytest.param(
            ConditionState("False", "BrokerUnavailable", ""), None, "Provisioning", id="provisioning"
        ),
        pytest.param(TOPICS_OK, JOB_SUSPENDED, "Suspended", id="suspended"),
        pytest.param(TOPICS_OK, JOB_RESTARTING, "Restarting", id="restarting"),
        pytest.param(TOPICS_OK, ConditionState("False", "Failed", ""), "Failed", id="failed"),
        pytest.param(TOPICS_OK, ConditionState("False", "Completed", ""), "Failed", id="completed"),
        pytest.param(TOPICS_OK, JOB_SUBMITTED, "Pending", id="pending"),
    ],
)
def test_phase(topics: ConditionState, job: ConditionState | None, phase: str) -> None:
    observation = Observation(generation=1, topics=topics, job=job)
    assert next_status({}, observation, now=NOW)["phase"] == phase


# --- the supervisor ----------------------------------------------------------------------------


def _at(seconds_ago: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def running_app(*, submitted_ago: float, state: str = "RUNNING") -> dict[str, Any]:
    return {
        "metadata": {"name": "a", "namespace": "n", "creationTimestamp": _at(submitted_ago + 60)},
        "status": {
            "applicationState": {"state": state},
            "submissionID": "s1",
            "lastSubmissionAttemptTime": _at(submitted_ago),
            "driverInfo": {"podName": "a-driver"},
        },
    }


def beat(*, at_ago: float, progress_ago: float, active: bool = True) -> dict[str, Any]:
    document = {
        "time": _at(at_ago),
        "queryActive": active,
        "lastProgressTime": _at(progress_ago),
        "batchId": 7,
    }
    return {"metadata": {"annotations": {naming.HEARTBEAT_ANNOTATION: json.dumps(document)}}}


@pytest.mark.parametrize(
    ("app", "config_map", "reason"),
    [
        pytest.param(running_app(submitted_ago=900), beat(at_ago=5, progress_ago=20), None, id="progressing"),
        pytest.param(
            running_app(submitted_ago=900), beat(at_ago=5, progress_ago=400), "EngineStalled", id="stalled"
        ),
        pytest.param(
            running_app(submitted_ago=900),
            beat(at_ago=5, progress_ago=400, active=False),
            "EngineStalled",
            id="query-dead",
        ),
        pytest.param(
            running_app(submitted_ago=100), beat(at_ago=200, progress_ago=900), None, id="previous-driver"
        ),
        pytest.param(running_app(submitted_ago=900), None, None, id="never-reported"),
        pytest.param(
            running_app(submitted_ago=900, state="SUBMITTED"),
            beat(at_ago=5, progress_ago=400),
            None,
            id="not-running",
        ),
        pytest.param(
            running_app(submitted_ago=900),
            {"metadata": {"annotations": {naming.HEARTBEAT_ANNOTATION: "{not json"}}},
            None,
            id="unreadable",
        ),
    ],
)
def test_engine_stalled_judges_only_this_submissions_heartbeat(
    app: dict[str, Any], config_map: dict[str, Any] | None, reason: str | None
) -> None:
    found = engine_stalled(app, config_map, bound=300)
    assert (found.reason if found else None) == reason
    if found is not None:
        assert "(bound 300s)" in found.message


def test_a_stalled_message_names_the_last_progress_and_the_query_state() -> None:
    found = engine_stalled(
        running_app(submitted_ago=900), beat(at_ago=5, progress_ago=400, active=False), bound=300
    )
    assert found is not None
    assert found.message.startswith(
        f"the driver reports no progress of its query (not active) since {_at(400)}"
    )
    assert "395s before its heartbeat" in found.message


IMAGE_PULL_POD = {
    "status": {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "spark-kubernetes-driver",
                "state": {
                    "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x:1"'}
                },
            }
        ],
    }
}
UNSCHEDULABLE_POD = {
    "status": {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
        ],
    }
}


@pytest.mark.parametrize(
    ("app", "pod", "expected"),
    [
        pytest.param(
            running_app(submitted_ago=400, state="SUBMITTED"),
            IMAGE_PULL_POD,
            'driver pod a-driver: container spark-kubernetes-driver is waiting: ImagePullBackOff: Back-off pulling image "x:1"',
            id="image-pull",
        ),
        pytest.param(
            running_app(submitted_ago=400, state="PENDING_RERUN"),
            UNSCHEDULABLE_POD,
            "driver pod a-driver: PodScheduled is False: Unschedulable: 0/3 nodes",
            id="unschedulable",
        ),
        pytest.param(
            running_app(submitted_ago=400, state="SUBMITTED"),
            None,
            "driver pod a-driver does not exist",
            id="no-pod",
        ),
        pytest.param(
            running_app(submitted_ago=100, state="SUBMITTED"), IMAGE_PULL_POD, None, id="within-bound"
        ),
        pytest.param(running_app(submitted_ago=400), IMAGE_PULL_POD, None, id="running"),
    ],
)
def test_driver_pending_names_the_pods_reason(
    app: dict[str, Any], pod: dict[str, Any] | None, expected: str | None
) -> None:
    found = driver_pending(app, pod, now=NOW, bound=300)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert found.reason == "DriverPending"
    state = app["status"]["applicationState"]["state"]
    assert (
        found.message
        == f"the Spark application is in state {state} since {_at(400)}, more than 300s: {expected}"
    )


def test_no_state_at_all_is_left_to_the_not_picked_up_hint() -> None:
    app = running_app(submitted_ago=400, state="")
    assert driver_pending(app, None, now=NOW, bound=300) is None


def ordering_beat(*, at_ago: float, ordering: object) -> dict[str, Any]:
    config_map = beat(at_ago=at_ago, progress_ago=at_ago)
    annotations = config_map["metadata"]["annotations"]
    document = json.loads(annotations[naming.HEARTBEAT_ANNOTATION])
    annotations[naming.HEARTBEAT_ANNOTATION] = json.dumps({**document, "ordering": ordering})
    return config_map


HELD = {"heldMessages": 12, "blockedKeys": 2, "blockedKeySample": ["order-7", "order-9"]}


@pytest.mark.parametrize(
    ("app", "config_map", "expected"),
    [
        pytest.param(
            running_app(submitted_ago=900), ordering_beat(at_ago=5, ordering=HELD), HELD, id="reported"
        ),
        pytest.param(
            running_app(submitted_ago=900), beat(at_ago=5, progress_ago=5), None, id="no-ordering-report"
        ),
        pytest.param(
            running_app(submitted_ago=60),
            ordering_beat(at_ago=90, ordering=HELD),
            None,
            id="previous-submission",
        ),
        pytest.param(None, ordering_beat(at_ago=5, ordering=HELD), None, id="no-application"),
        pytest.param(
            running_app(submitted_ago=900),
            ordering_beat(at_ago=5, ordering={**HELD, "heldMessages": -1}),
            None,
            id="negative-count",
        ),
        pytest.param(
            running_app(submitted_ago=900),
            ordering_beat(at_ago=5, ordering={**HELD, "blockedKeySample": [7]}),
            None,
            id="key-not-text",
        ),
        pytest.param(
            running_app(submitted_ago=900),
            ordering_beat(
                at_ago=5, ordering={**HELD, "blockedKeySample": [f"k{i}" + "x" * 200 for i in range(12)]}
            ),
            {**HELD, "blockedKeySample": [f"k{i}" + "x" * 98 for i in range(10)]},
            id="sample-bounded",
        ),
    ],
)
def test_ordering_status_comes_from_this_submissions_heartbeat(
    app: dict[str, Any] | None, config_map: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    assert ordering_status(app, config_map) == expected


def test_next_status_takes_the_ordering_report_and_drops_it_when_ordering_is_off() -> None:
    status = next_status({}, full(JOB_SUBMITTED), now=NOW)
    held = next_status(status, Observation(ordering=HELD), now=NOW)  # type: ignore[arg-type]
    assert held["ordering"] == HELD
    assert next_status(held, Observation(), now=NOW)["ordering"] == HELD
    assert "ordering" not in next_status(held, Observation(ordering_off=True), now=NOW)


# --- the breaker's condition (retry.breaker) ------------------------------------------------------


def breaker_beat(*, at_ago: float, breaker: object) -> dict[str, Any]:
    config_map = beat(at_ago=at_ago, progress_ago=at_ago)
    annotations = config_map["metadata"]["annotations"]
    document = json.loads(annotations[naming.HEARTBEAT_ANNOTATION])
    annotations[naming.HEARTBEAT_ANNOTATION] = json.dumps({**document, "breaker": breaker})
    return config_map


WHY = "18 of the last 20 processor calls failed transiently (ConnectionRefusedError)"
OPEN_REPORT = {
    "state": "open",
    "since": "2026-11-24T11:58:00Z",
    "reason": WHY,
    "opens": 1,
    "probeAt": "2026-11-24T11:58:30Z",
}


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        pytest.param(
            OPEN_REPORT,
            ConditionState(
                "False",
                Reason.BREAKER_OPEN,
                f"the breaker opened at 2026-11-24T11:58:00Z because {WHY}: the engine reads no new source "
                "message and holds its retries until it probes at 2026-11-24T11:58:30Z (opened 1 time in this run)",
            ),
            id="open",
        ),
        pytest.param(
            {**OPEN_REPORT, "state": "half-open", "since": "2026-11-24T11:58:30Z", "probeAt": "", "opens": 2},
            ConditionState(
                "False",
                Reason.BREAKER_HALF_OPEN,
                "the breaker is half-open since 2026-11-24T11:58:30Z: a few messages probe the processor's "
                f"downstream; it opened because {WHY} (opened 2 times in this run)",
            ),
            id="half-open",
        ),
        pytest.param(
            {**OPEN_REPORT, "state": "closed", "probeAt": "", "opens": 3},
            ConditionState(
                "True",
                Reason.BREAKER_CLOSED,
                f"the breaker is closed; it last opened because {WHY} (opened 3 times in this run)",
            ),
            id="closed-after-opening",
        ),
        pytest.param(
            {"state": "closed", "since": "2026-11-24T11:00:00Z", "reason": "", "opens": 0, "probeAt": ""},
            ConditionState("True", Reason.BREAKER_CLOSED, "the breaker is closed"),
            id="never-opened",
        ),
        pytest.param({**OPEN_REPORT, "state": "ajar"}, None, id="unknown-state"),
        pytest.param({**OPEN_REPORT, "opens": -1}, None, id="negative-count"),
        pytest.param({**OPEN_REPORT, "since": "yesterday"}, None, id="bad-time"),
        pytest.param({**OPEN_REPORT, "reason": 7}, None, id="reason-not-text"),
        pytest.param("open", None, id="not-a-mapping"),
        pytest.param(None, None, id="no-breaker"),
    ],
)
def test_breaker_condition_comes_from_this_submissions_heartbeat(
    report: object, expected: ConditionState | None
) -> None:
    app = running_app(submitted_ago=900)
    assert breaker_condition(app, breaker_beat(at_ago=5, breaker=report)) == expected


def test_breaker_condition_ignores_an_earlier_submissions_heartbeat() -> None:
    app = running_app(submitted_ago=60)
    assert breaker_condition(app, breaker_beat(at_ago=90, breaker=OPEN_REPORT)) is None
    assert breaker_condition(None, breaker_beat(at_ago=5, breaker=OPEN_REPORT)) is None


def test_breaker_reason_is_bounded() -> None:
    app = running_app(submitted_ago=900)
    found = breaker_condition(app, breaker_beat(at_ago=5, breaker={**OPEN_REPORT, "reason": "x" * 5000}))
    assert found is not None
    assert found.message.count("x") == 1000


def test_next_status_puts_the_breaker_condition_last_and_drops_it_without_a_breaker() -> None:
    status = next_status({}, full(JOB_SUBMITTED), now=NOW)
    opened = ConditionState("False", Reason.BREAKER_OPEN, "the breaker opened at ...")
    with_breaker = next_status(status, Observation(breaker=opened), now=LATER)
    assert [c["type"] for c in with_breaker["conditions"]] == [
        "Ready",
        "TopicsReady",
        "JobRunning",
        "BreakerClosed",
    ]
    assert with_breaker["conditions"][-1]["lastTransitionTime"] == LATER
    # Ready is the topics and the job: an open breaker pauses the job, it does not make it unready.
    assert with_breaker["conditions"][0] == status["conditions"][0]
    half = ConditionState("False", Reason.BREAKER_HALF_OPEN, "the breaker is half-open ...")
    later = next_status(with_breaker, Observation(breaker=half), now="2026-11-22T03:00:00Z")
    assert later["conditions"][-1]["lastTransitionTime"] == LATER  # still False: since it opened
    assert next_status(later, Observation(), now=NOW)["conditions"] == later["conditions"]
    gone = next_status(later, Observation(breaker_off=True), now=NOW)
    assert [c["type"] for c in gone["conditions"]] == ["Ready", "TopicsReady", "JobRunning"]
