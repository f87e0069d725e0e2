"""The operator's pure builders (``render``): every field of the ConfigMap, the SparkApplication and
the KafkaTopic it writes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import yaml

from dlq_engine.model import config_hash, to_document
from dlq_engine.model.documents import load_policy_text
from dlq_engine.model.topics import TopicWant
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_operator import naming, render
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import PodFit
from spark_dlq_operator.naming import Owner
from tests.policy_builder import policy
from tests.unit.test_naming import LABELS

CONFIG = OperatorConfig(
    namespaces=("payments",),
    spark_image="registry/spark-dlq:1",
    spark_version="4.0.0",
    checkpoint_base="s3a://cp/dlq/",
    spark_service_account="spark-driver",
)
OWNER = Owner(name="orders-billing", namespace="payments", uid="uid-1")
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


#: What the operator sets so that the driver needs rights on its executor pods only, and the
#: image's list of Spark's jars first on the driver's and executors' class paths (the image's
#: class-data-sharing archive).
DRIVER_CONF = {
    "spark.driver.extraClassPath": "/opt/spark/spark-dlq-class-path.jar",
    "spark.executor.extraClassPath": "/opt/spark/spark-dlq-class-path.jar",
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


@pytest.mark.parametrize("key", ["spark.driver.extraClassPath", "spark.executor.extraClassPath"])
def test_a_platforms_own_class_path_is_kept_as_it_is(key: str) -> None:
    """The class's fixed sparkConf may set a class path; the operator then leaves it (that JVM
    starts without the image's archive) instead of reordering the platform's."""
    own = "/opt/platform/agent.jar:/opt/spark/jars/*"
    p = policy({"spec.spark.sparkConf": {key: own}})
    conf = render.spark_application(p, config=CONFIG, owner=OWNER)["spec"]["sparkConf"]
    assert conf == {**DRIVER_CONF, key: own}


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


def test_spark_application_is_named_and_recorded_by_its_derived_name() -> None:
    app = render.spark_application(policy({"metadata.name": "orders.billing"}), config=CONFIG, owner=OWNER)
    assert app["metadata"]["name"] == naming.application_name("orders.billing")
    assert app["metadata"]["labels"]["sparkdlq.io/policy"] == "orders.billing"
