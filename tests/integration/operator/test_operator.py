"""The operator against a real kube-apiserver and a real Kafka broker.

Each test runs the real operator in-process (see conftest.py), applies DeadLetterPolicies as a
user would, and checks what docs/reference.md section 2 promises: the ConfigMap, the SparkApplication
and the topics with their names, labels, owner references and hash; the status; restarts only
when the engine's configuration changes; suspend and resume; drift repair; deletion. The CRDs
are the real ones (the spark-operator's, Strimzi's); the spark-operator and Strimzi's topic
operator do not run in these tests: they write their status as those would (the real
spark-operator runs in test_spark_operator.py).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client
from prometheus_client import REGISTRY

from dlq_engine.model import config_hash, parse_policy, to_document
from dlq_engine.model.documents import load_policy_text
from spark_dlq_devtools.processes import free_port
from spark_dlq_operator.config import SPARK_VERSION
from tests.integration.operator.conftest import (
    Cluster,
    RunningOperator,
    no_change,
    policy_document,
    topic_partitions,
    wait_for,
)

MANAGED = {"app.kubernetes.io/managed-by": "spark-dlq-operator"}
REDRIVES = "deadletterredrives"


def owner_of(obj: dict[str, Any]) -> dict[str, Any]:
    [reference] = obj["metadata"]["ownerReferences"]
    return dict(reference)


def topic_config(admin: AdminClient, topic: str, name: str) -> str | None:
    """The value of topic config ``name`` as the broker describes it."""
    from confluent_kafka.admin import ConfigResource

    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    entry = future.result(timeout=30).get(name)
    return None if entry is None else entry.value


def converged(cluster: Cluster, name: str, phase: str) -> Callable[[], bool]:
    return lambda: cluster.status(name).get("phase") == phase


# ---------------------------------------------------------------------------------------------
# Creation


def test_create_provisions_topics_configmap_and_application(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
) -> None:
    source = make_topic("orders", partitions=3)
    document = policy_document(
        namespace,
        "billing",
        source=source,
        bootstrap=bootstrap_servers,
        broker={"bootstrapServers": bootstrap_servers, "secretRef": {"name": "kafka-client"}},
        topics={"deadLetterConfig": {"retention.ms": "604800000"}},
    )
    created = cluster.create_policy(document)
    uid = created["metadata"]["uid"]

    app = wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    policy = parse_policy(cluster.policy("billing"))
    digest = config_hash(policy)

    # Topics: the contract's names, partitions as the source, configs as asked; the retry topic
    # keeps its letters a week past the longest backoff (maxDelay 10m).
    wait_for(lambda: topic_partitions(kafka_admin, f"{source}-billing-RETRY") == 3, what="the retry topic")
    wait_for(lambda: topic_partitions(kafka_admin, f"{source}-billing-DLQ") == 3, what="the DLQ topic")
    assert topic_config(kafka_admin, f"{source}-billing-DLQ", "retention.ms") == "604800000"
    assert topic_config(kafka_admin, f"{source}-billing-RETRY", "retention.ms") == str(
        600_000 + 7 * 86_400_000
    )

    # The ConfigMap: name, labels, owner, and the engine's policy with the checkpoint filled in.
    config_map = cluster.config_map("billing-policy")
    assert config_map.metadata.labels == {**MANAGED, "sparkdlq.io/policy": "billing"}
    [reference] = config_map.metadata.owner_references
    assert (reference.kind, reference.name, reference.uid, reference.controller) == (
        "DeadLetterPolicy",
        "billing",
        uid,
        True,
    )
    engine_document = yaml.safe_load(config_map.data["policy.yaml"])
    expected = to_document(policy)
    expected["spec"]["spark"]["checkpointLocation"] = f"s3a://checkpoints/dlq/{namespace}/billing"
    assert engine_document == expected
    assert parse_policy(engine_document).broker.secret_ref is not None

    # The SparkApplication: names, labels, owner, hash in metadata and spec.
    assert app["metadata"]["labels"] == {**MANAGED, "sparkdlq.io/policy": "billing"}
    assert app["metadata"]["annotations"]["sparkdlq.io/config-hash"] == digest
    assert app["spec"]["driver"]["annotations"] == {"sparkdlq.io/config-hash": digest}
    assert owner_of(app) == {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicy",
        "name": "billing",
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    spec = app["spec"]
    assert (spec["type"], spec["pythonVersion"], spec["mode"], spec["sparkVersion"]) == (
        "Python",
        "3",
        "cluster",
        SPARK_VERSION,
    )
    assert spec["image"] == "registry.test/spark-dlq:test"
    assert spec["arguments"] == [
        "run",
        "-f",
        "/etc/spark-dlq/policy/policy.yaml",
        "--checkpoint",
        f"s3a://checkpoints/dlq/{namespace}/billing",
        "--heartbeat-lease",
        f"{namespace}/billing-heartbeat",
        "--config-hash",
        config_hash(load_policy_text(config_map.data["policy.yaml"])),
    ]
    assert {"name": "kafka-client", "secret": {"secretName": "kafka-client"}} in spec["driver"]["template"][
        "spec"
    ]["volumes"]
    assert spec["driver"]["serviceAccount"] == "billing-spark"
    assert spec["executor"]["template"]["spec"]["automountServiceAccountToken"] is False

    # The Spark pods' identity: their account, the Lease, the Role on it alone, the bindings.
    rbac = client.RbacAuthorizationV1Api(cluster.objects.api_client)
    coordination = client.CoordinationV1Api(cluster.objects.api_client)
    owned = [
        cluster.core.read_namespaced_service_account("billing-spark", namespace),
        coordination.read_namespaced_lease("billing-heartbeat", namespace),
        rbac.read_namespaced_role("billing-heartbeat", namespace),
        rbac.read_namespaced_role_binding("billing-heartbeat", namespace),
        rbac.read_namespaced_role_binding("billing-spark", namespace),
    ]
    for obj in owned:
        assert obj.metadata.labels == {**MANAGED, "sparkdlq.io/policy": "billing"}
        assert [(r.kind, r.uid, r.controller) for r in obj.metadata.owner_references] == [
            ("DeadLetterPolicy", uid, True)
        ]
    [rule] = owned[2].rules
    assert (rule.resources, rule.resource_names, rule.verbs) == (
        ["leases"],
        ["billing-heartbeat"],
        ["get", "update", "patch"],
    )
    assert (owned[4].role_ref.kind, owned[4].role_ref.name) == ("ClusterRole", "spark-dlq-spark-driver")
    assert [(s.kind, s.name) for s in owned[4].subjects] == [("ServiceAccount", "billing-spark")]

    # Status: names, hash, conditions; JobRunning waits for the spark-operator.
    wait_for(lambda: cluster.status("billing").get("configHash") == digest, what="the status")
    status = cluster.status("billing")
    assert status["retryTopic"] == f"{source}-billing-RETRY"
    assert status["deadLetterTopic"] == f"{source}-billing-DLQ"
    assert status["sparkApplication"] == "billing"
    assert status["restartCount"] == 0
    assert status["phase"] == "Pending"
    topics = cluster.condition("billing", "TopicsReady")
    assert (topics["status"], topics["reason"]) == ("True", "TopicsReady")  # a retention it chose
    assert cluster.condition("billing", "JobRunning")["reason"] == "Submitted"
    assert cluster.condition("billing", "Ready")["status"] == "False"
    assert status["observedGeneration"] == created["metadata"]["generation"]

    cluster.set_application_state("billing", "RUNNING")
    wait_for(converged(cluster, "billing", "Running"), what="phase Running")
    ready = cluster.condition("billing", "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Ready")
    assert ready["observedGeneration"] == created["metadata"]["generation"]

    # kopf keeps its state in our annotations; no finalizer without work for it.
    metadata = cluster.policy("billing")["metadata"]
    assert "sparkdlq.io/last-handled-configuration" in metadata["annotations"]
    assert not metadata.get("finalizers")
    assert "status" not in cluster.policy("billing")["spec"]
    wait_for(
        lambda: (
            {"TopicCreated", "ConfigMapCreated", "SparkApplicationCreated", "Ready"}
            <= cluster.event_reasons("billing")
        ),
        what="the events",
    )


def test_running_operator_serves_metrics_and_liveness(
    start_operator: Callable[..., RunningOperator],
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> None:
    metrics_port, probe_port = free_port(), free_port()
    start_operator(metrics_port=metrics_port, liveness=f"http://127.0.0.1:{probe_port}/healthz")
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))
    wait_for(lambda: cluster.application("billing"), what="the SparkApplication")

    with urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/healthz", timeout=5) as response:
        assert response.status == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    assert 'spark_dlq_operator_reconciles_total{result="ok",trigger="create"}' in text
    assert "spark_dlq_operator_reconcile_duration_seconds_bucket" in text


# ---------------------------------------------------------------------------------------------
# Changes


def test_spec_change_restarts_the_job_with_a_new_hash(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> None:
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))
    first = wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    cluster.set_application_state("billing", "RUNNING", submission="1")
    wait_for(converged(cluster, "billing", "Running"), what="phase Running")

    cluster.patch_policy("billing", {"spec": {"retry": {"maxRedeliverCount": 3}}})
    old_hash = first["metadata"]["annotations"]["sparkdlq.io/config-hash"]
    app = wait_for(
        lambda: (
            (a := cluster.application("billing"))
            and a["metadata"]["annotations"]["sparkdlq.io/config-hash"] != old_hash
            and a
        ),
        what="a new hash",
    )
    new_hash = config_hash(parse_policy(cluster.policy("billing")))
    assert app["metadata"]["annotations"]["sparkdlq.io/config-hash"] == new_hash
    assert app["spec"]["driver"]["annotations"]["sparkdlq.io/config-hash"] == new_hash
    assert app["metadata"]["uid"] == first["metadata"]["uid"]  # patched in place, not recreated

    wait_for(lambda: cluster.status("billing").get("restartCount") == 1, what="restartCount 1")
    status = cluster.status("billing")
    assert status["phase"] == "Restarting"
    assert status["configHash"] == new_hash
    assert status["lastRestartTime"]
    wait_for(lambda: "SparkApplicationRestarted" in cluster.event_reasons("billing"), what="the event")

    # The spark-operator resubmits: a new submission comes up RUNNING.
    cluster.set_application_state("billing", "PENDING_RERUN", submission="1")
    cluster.set_application_state("billing", "RUNNING", submission="2")
    wait_for(converged(cluster, "billing", "Running"), what="Running after the restart")
    assert cluster.status("billing")["restartCount"] == 1


def test_change_outside_the_engine_config_does_not_touch_the_job(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> None:
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))
    wait_for(lambda: cluster.status("billing").get("configHash"), what="the first reconcile")

    def handled(label: str) -> bool:
        annotations = cluster.policy("billing")["metadata"].get("annotations") or {}
        return label in annotations.get("sparkdlq.io/last-handled-configuration", "")

    def versions() -> tuple[str, str]:
        app, config_map = cluster.application("billing"), cluster.config_map("billing-policy")
        return app["metadata"]["resourceVersion"], config_map.metadata.resource_version

    def resync_reconciles() -> float:
        # The operator runs in this process: its counter of resync rounds' reconciles.
        found = REGISTRY.get_sample_value(
            "spark_dlq_operator_reconciles_total", {"trigger": "resync", "result": "ok"}
        )
        return found or 0.0

    with no_change(versions, settle=0):
        cluster.patch_policy(
            "billing",
            {
                "metadata": {"labels": {"team": "payments"}},
                "spec": {"suspend": False, "topics": {"retryConfig": {}}},
            },
        )
        wait_for(lambda: handled("payments"), what="kopf to handle the change")
        # Also across one resync round that reconciles the changed policy (a counter, not a sleep).
        after = resync_reconciles()
        wait_for(lambda: resync_reconciles() > after, what="a resync round after the change")
    assert cluster.status("billing")["restartCount"] == 0


def test_suspend_removes_the_job_and_resume_brings_it_back(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
) -> None:
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))
    wait_for(lambda: cluster.application("billing"), what="the SparkApplication")

    cluster.patch_policy("billing", {"spec": {"suspend": True}})
    wait_for(lambda: cluster.application("billing") is None, what="the SparkApplication to go")
    wait_for(converged(cluster, "billing", "Suspended"), what="phase Suspended")
    assert cluster.config_map("billing-policy") is not None
    assert topic_partitions(kafka_admin, f"{source}-billing-DLQ") == 1
    assert cluster.condition("billing", "JobRunning")["reason"] == "Suspended"
    assert cluster.condition("billing", "Ready")["status"] == "False"

    cluster.patch_policy("billing", {"spec": {"suspend": False}})
    wait_for(lambda: cluster.application("billing"), what="the SparkApplication again")
    wait_for(converged(cluster, "billing", "Pending"), what="phase Pending")
    assert cluster.status("billing")["restartCount"] == 0
    assert len(cluster.applications()) == 1


# ---------------------------------------------------------------------------------------------
# Problems


def test_spec_the_apiserver_accepts_but_the_model_refuses_is_invalid(
    operator: RunningOperator, cluster: Cluster, namespace: str, bootstrap_servers: str
) -> None:
    # "1h1d" passes the CRD's duration pattern but not its CEL comparison (days first only);
    # the model reads it as 25 h, longer than maxDelay.
    document = policy_document(
        namespace,
        "billing",
        source="orders",
        bootstrap=bootstrap_servers,
        retry={"backoff": {"type": "exponential", "delay": "1h1d", "maxDelay": "30m"}},
    )
    cluster.create_policy(document)  # accepted by the apiserver

    wait_for(converged(cluster, "billing", "Invalid"), what="phase Invalid")
    ready = cluster.condition("billing", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.retry.backoff.maxDelay" in ready["message"]
    assert cluster.application("billing") is None
    assert cluster.config_map("billing-policy") is None
    wait_for(lambda: "InvalidSpec" in cluster.event_reasons("billing"), what="the InvalidSpec event")

    cluster.patch_policy("billing", {"spec": {"retry": {"backoff": {"delay": "1s"}}}})
    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("reason") == "SourceTopicMissing",
        what="the fixed policy to get to its topics",
    )


def test_existing_topics_with_fewer_partitions_or_short_retention_are_reported_not_changed(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
) -> None:
    from confluent_kafka.admin import NewTopic

    source = make_topic("orders", partitions=3)
    # The retry topic with too few partitions; the dead-letter topic with a retention (a day)
    # that deletes dead letters nobody has looked at.
    existing = [
        NewTopic(f"{source}-billing-RETRY", 1, 1),
        NewTopic(f"{source}-billing-DLQ", 3, 1, config={"retention.ms": "86400000"}),
    ]
    for future in kafka_admin.create_topics(existing).values():
        future.result(timeout=30)
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))

    topics = wait_for(
        lambda: (c := cluster.condition("billing", "TopicsReady")) and c["status"] == "True" and c,
        what="TopicsReady",
    )
    assert "has 1 partitions, 3 wanted" in topics["message"]
    assert topics["reason"] == "ShortRetention"
    assert (
        f"short retention: topic '{source}-billing-DLQ' has retention.ms=86400000 (1d): its dead letters "
        "are deleted after 1d, they must be kept until someone deletes them"
    ) in topics["message"]
    assert "RETRY' has retention" not in topics["message"]  # the broker's week outlasts 10m
    wait_for(lambda: "TopicPartitionsDrift" in cluster.event_reasons("billing"), what="the drift event")
    wait_for(lambda: "TopicRetentionShort" in cluster.event_reasons("billing"), what="the retention event")
    assert topic_partitions(kafka_admin, f"{source}-billing-RETRY") == 1
    assert topic_config(kafka_admin, f"{source}-billing-DLQ", "retention.ms") == "86400000"


def test_unreachable_broker_is_reported_retried_and_recovered(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
) -> None:
    source = make_topic("orders")
    closed = f"127.0.0.1:{free_port()}"
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=closed))

    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("reason") == "BrokerUnavailable",
        timeout=30,
        what="TopicsReady BrokerUnavailable",
    )
    topics = cluster.condition("billing", "TopicsReady")
    assert topics["status"] == "False"
    assert closed in topics["message"]
    assert cluster.status("billing")["phase"] == "Provisioning"
    assert cluster.condition("billing", "Ready")["reason"] == "BrokerUnavailable"
    assert cluster.application("billing") is None
    wait_for(lambda: "BrokerUnavailable" in cluster.event_reasons("billing"), what="a Warning event")
    warnings = [e for e in cluster.events("billing") if e.reason == "BrokerUnavailable"]
    assert all(e.type == "Warning" and closed in e.message for e in warnings), warnings
    assert operator.alive()

    # The broker becomes reachable (here: the policy is pointed at the real one): it converges.
    cluster.patch_policy("billing", {"spec": {"broker": {"bootstrapServers": bootstrap_servers}}})
    digest = config_hash(parse_policy(cluster.policy("billing")))
    wait_for(lambda: cluster.status("billing").get("configHash") == digest, timeout=60, what="the status")
    assert cluster.condition("billing", "TopicsReady")["status"] == "True"
    assert cluster.status("billing")["phase"] == "Pending"
    assert topic_partitions(kafka_admin, f"{source}-billing-DLQ") == 1
    [app] = cluster.applications()
    assert app["metadata"]["annotations"]["sparkdlq.io/config-hash"] == digest
    config_maps = cluster.core.list_namespaced_config_map(
        namespace, label_selector="sparkdlq.io/policy=billing"
    ).items
    assert [c.metadata.name for c in config_maps] == ["billing-policy"]
    wait_for(
        lambda: (
            {"TopicCreated", "ConfigMapCreated", "SparkApplicationCreated"}
            <= cluster.event_reasons("billing")
        ),
        what="the events of the recovery",
    )
    assert cluster.status("billing")["restartCount"] == 0
    assert operator.alive()


def test_operator_stopped_mid_reconcile_converges_without_duplicates(
    start_operator: Callable[..., RunningOperator],
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> None:
    source = make_topic("orders")
    first = start_operator()
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))
    wait_for(lambda: cluster.config_map("billing-policy") is not None, interval=0.02, what="the ConfigMap")
    first.stop()  # somewhere between the ConfigMap and the status

    cluster.patch_policy("billing", {"spec": {"retry": {"maxRedeliverCount": 5}}})
    start_operator()
    digest = config_hash(parse_policy(cluster.policy("billing")))
    wait_for(lambda: cluster.status("billing").get("configHash") == digest, what="the status to converge")
    [app] = cluster.applications()
    assert app["metadata"]["annotations"]["sparkdlq.io/config-hash"] == digest
    config_maps = cluster.core.list_namespaced_config_map(
        namespace, label_selector="sparkdlq.io/policy=billing"
    ).items
    assert [c.metadata.name for c in config_maps] == ["billing-policy"]
    assert cluster.condition("billing", "TopicsReady")["status"] == "True"
    cluster.set_application_state("billing", "RUNNING")
    wait_for(converged(cluster, "billing", "Running"), what="phase Running")


# ---------------------------------------------------------------------------------------------
# Strimzi


def test_strimzi_topics_are_kafka_topic_objects_and_gate_the_job(
    strimzi_crd: str,
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    kube_api: Any,
    bootstrap_servers: str,
    kafka_admin: AdminClient,
    make_topic: Callable[..., str],
) -> None:
    from kubernetes import client

    kafka_namespace = f"{namespace}-kafka"
    client.CoreV1Api(kube_api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=kafka_namespace))
    )
    cluster.create_policy(
        policy_document(
            namespace,
            "billing",
            source="Orders_EU",
            bootstrap=bootstrap_servers,
            topics={
                "provisioner": "auto",
                "partitions": 4,
                "replicationFactor": 3,
                "strimzi": {"namespace": kafka_namespace, "cluster": "my-cluster"},
                "retryConfig": {"retention.ms": 86400000},
            },
        )
    )

    topics = wait_for(
        lambda: len(items := cluster.kafka_topics(kafka_namespace)) == 2 and items, what="two KafkaTopics"
    )
    by_topic = {t["spec"]["topicName"]: t for t in topics}
    assert set(by_topic) == {"Orders_EU-billing-RETRY", "Orders_EU-billing-DLQ"}
    retry = by_topic["Orders_EU-billing-RETRY"]
    assert retry["metadata"]["name"].startswith("orders-eu-billing-retry---")
    assert retry["metadata"]["labels"] == {
        "strimzi.io/cluster": "my-cluster",
        **MANAGED,
        "sparkdlq.io/policy": "billing",
        "sparkdlq.io/policy-namespace": namespace,
    }
    assert retry["spec"] == {
        "topicName": "Orders_EU-billing-RETRY",
        "partitions": 4,
        "replicas": 3,
        "config": {"retention.ms": "86400000"},
    }
    assert "ownerReferences" not in retry["metadata"]  # another namespace: no owner references
    assert by_topic["Orders_EU-billing-DLQ"]["spec"]["config"] == {"retention.ms": "-1"}
    uid = cluster.policy("billing")["metadata"]["uid"]
    assert retry["metadata"]["annotations"] == {"sparkdlq.io/policy-uid": uid}

    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("reason") == "WaitingForStrimzi",
        what="TopicsReady WaitingForStrimzi",
    )
    assert cluster.status("billing")["phase"] == "Provisioning"
    assert cluster.application("billing") is None

    for topic in topics:
        cluster.set_kafka_topic_ready(kafka_namespace, topic["metadata"]["name"])
    wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    wait_for(lambda: cluster.condition("billing", "TopicsReady").get("status") == "True", what="TopicsReady")
    annotations = cluster.config_map("billing-policy").metadata.annotations
    assert annotations == {"sparkdlq.io/topic-provisioner": "strimzi"}
    # Never both: nothing went through the Admin API.
    assert topic_partitions(kafka_admin, "Orders_EU-billing-RETRY") is None

    assert [t["name"] for t in cluster.status("billing")["ownedTopics"]] == [
        "Orders_EU-billing-RETRY",
        "Orders_EU-billing-DLQ",
    ]

    # A policy naming topics that are not its own: one another team's KafkaTopic manages (under
    # another name), one the Kafka cluster has without a KafkaTopic. The operator creates no
    # KafkaTopic for either (one would take the topic over), changes neither, deletes neither.
    group, version, plural = "kafka.strimzi.io", "v1", "kafkatopics"
    foreign_spec = {"topicName": "Ledger_EU", "partitions": 1, "config": {"retention.ms": "-1"}}
    cluster.objects.create_namespaced_custom_object(
        group,
        version,
        kafka_namespace,
        plural,
        {
            "apiVersion": f"{group}/{version}",
            "kind": "KafkaTopic",
            "metadata": {"name": "team-b-ledger", "labels": {"strimzi.io/cluster": "my-cluster"}},
            "spec": foreign_spec,
        },
    )
    cluster.set_kafka_topic_ready(kafka_namespace, "team-b-ledger")
    unmanaged = make_topic("audit-retry")
    cluster.create_policy(
        policy_document(
            namespace,
            "audit",
            source="Orders_EU",
            bootstrap=bootstrap_servers,
            retry={"topic": unmanaged},
            deadLetter={"topic": "Ledger_EU"},
            topics={
                "provisioner": "strimzi",
                "partitions": 4,
                "deleteWithPolicy": True,
                "strimzi": {"namespace": kafka_namespace, "cluster": "my-cluster"},
            },
        )
    )
    wait_for(lambda: cluster.application("audit"), what="the borrowing policy's SparkApplication")
    # The status is written after the SparkApplication: wait for it.
    message = wait_for(lambda: cluster.condition("audit", "TopicsReady").get("message"), what="TopicsReady")
    assert (
        f"KafkaTopic {kafka_namespace}/team-b-ledger is managed outside spark-dlq and used as it is"
        in message
    )
    assert (
        f"topic {unmanaged!r} exists in the Kafka cluster without a KafkaTopic and is used as it is"
        in message
    )
    assert "ownedTopics" not in cluster.status("audit")
    cluster.delete_policy("audit")
    wait_for(lambda: cluster.policy("audit") is None, what="the borrowing policy to go")
    assert cluster.kafka_topic(kafka_namespace, "team-b-ledger")["spec"] == foreign_spec  # type: ignore[index]
    assert topic_partitions(kafka_admin, unmanaged) == 1
    assert "TopicsKept" in cluster.event_reasons("audit")

    # Topics go with the policy only when asked; then a finalizer deletes the KafkaTopics in the
    # other namespace, where no owner reference can reach.
    cluster.patch_policy("billing", {"spec": {"topics": {"deleteWithPolicy": True}}})
    wait_for(lambda: cluster.policy("billing")["metadata"].get("finalizers"), what="the finalizer")
    cluster.delete_policy("billing")
    wait_for(lambda: cluster.policy("billing") is None, what="the policy to go")
    assert [t["metadata"]["name"] for t in cluster.kafka_topics(kafka_namespace)] == ["team-b-ledger"]


def test_an_older_strimzi_serving_only_v1beta2_gets_v1beta2_kafka_topics(
    strimzi_v1beta2_crd: str,
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    bootstrap_servers: str,
) -> None:
    cluster.create_policy(
        policy_document(
            namespace,
            "billing",
            source="orders",
            bootstrap=bootstrap_servers,
            topics={"provisioner": "auto", "partitions": 2, "strimzi": {"cluster": "my-cluster"}},
        )
    )
    topics = wait_for(
        lambda: len(items := cluster.kafka_topics(namespace, version="v1beta2")) == 2 and items,
        what="two v1beta2 KafkaTopics",
    )
    assert {t["apiVersion"] for t in topics} == {"kafka.strimzi.io/v1beta2"}
    for topic in topics:
        cluster.set_kafka_topic_ready(namespace, topic["metadata"]["name"], version="v1beta2")
    wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    # The status with the condition is written after the SparkApplication is created.
    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("status") == "True",
        what="TopicsReady",
    )


def test_strimzi_not_served_is_reported_and_the_finalizer_never_claims_the_topics_gone(
    start_operator: Callable[..., RunningOperator],
    cluster: Cluster,
    namespace: str,
    bootstrap_servers: str,
) -> None:
    start_operator(finalizer_timeout=1.5)
    cluster.create_policy(
        policy_document(
            namespace,
            "billing",
            source="orders",
            bootstrap=bootstrap_servers,
            topics={"provisioner": "strimzi", "partitions": 2, "strimzi": {"cluster": "my-cluster"}},
        )
    )
    condition = wait_for(
        lambda: (c := cluster.condition("billing", "TopicsReady")).get("reason") == "StrimziNotServed" and c,
        what="TopicsReady StrimziNotServed",
    )
    assert condition["status"] == "False"
    assert "kafka.strimzi.io/v1 or kafka.strimzi.io/v1beta2" in condition["message"]
    assert cluster.status("billing")["phase"] == "Provisioning"
    assert cluster.application("billing") is None

    cluster.patch_policy("billing", {"spec": {"topics": {"deleteWithPolicy": True}}})
    wait_for(lambda: cluster.policy("billing")["metadata"].get("finalizers"), what="the finalizer")
    record_owned(cluster, "billing", bootstrap_servers, "orders-billing-DLQ")
    cluster.delete_policy("billing")
    wait_for(lambda: cluster.policy("billing") is None, timeout=60, what="the policy to go")
    reasons = cluster.event_reasons("billing")
    assert "CleanupAbandoned" in reasons
    assert "TopicsDeleted" not in reasons


# ---------------------------------------------------------------------------------------------
# Drift and deletion


def test_drift_is_repaired(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
) -> None:
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))
    first = wait_for(lambda: cluster.application("billing"), what="the SparkApplication")

    cluster.delete_application("billing")
    again = wait_for(
        lambda: (
            (a := cluster.application("billing")) and a["metadata"]["uid"] != first["metadata"]["uid"] and a
        ),
        what="a new SparkApplication",
    )
    assert again["metadata"]["annotations"] == first["metadata"]["annotations"]
    wait_for(lambda: "SparkApplicationMissing" in cluster.event_reasons("billing"), what="the event")

    dlq = f"{source}-billing-DLQ"
    for future in kafka_admin.delete_topics([dlq]).values():
        future.result(timeout=30)
    cluster.core.delete_namespaced_config_map("billing-policy", namespace)
    wait_for(lambda: cluster.config_map("billing-policy") is not None, timeout=20, what="the ConfigMap back")
    wait_for(lambda: topic_partitions(kafka_admin, dlq) == 1, timeout=30, what="the DLQ topic back")
    assert len(cluster.applications()) == 1


def test_deleting_a_policy_deletes_only_the_topics_it_created_and_only_when_asked(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 26's attacks on topics: a policy naming an existing topic it did not create as its
    dead-letter topic, with deleteWithPolicy, runs, and deleting it keeps that topic; a policy
    naming another policy's dead-letter topic is refused and gets nothing."""
    source = make_topic("orders")
    ledger = make_topic("ledger", partitions=2)  # another team's topic
    cluster.create_policy(policy_document(namespace, "kept", source=source, bootstrap=bootstrap_servers))
    cluster.create_policy(
        policy_document(
            namespace,
            "gone",
            source=source,
            bootstrap=bootstrap_servers,
            retry={"topic": f"{source}-gone-RETRY"},
            deadLetter={"topic": ledger},
            topics={"deleteWithPolicy": True},
        )
    )
    wait_for(lambda: cluster.application("kept") and cluster.application("gone"), what="both applications")
    wait_for(
        lambda: cluster.policy("gone")["metadata"].get("finalizers") == ["sparkdlq.io/finalizer"],
        what="the finalizer of the policy whose topics go with it",
    )
    assert not cluster.policy("kept")["metadata"].get("finalizers")
    cluster.set_application_state("gone", "RUNNING")
    wait_for(converged(cluster, "gone", "Running"), what="the borrowing policy Running")
    assert cluster.status("gone")["ownedTopics"] == [
        {"broker": bootstrap_servers, "name": f"{source}-gone-RETRY", "kind": "retry"}
    ]
    assert cluster.condition("gone", "TopicsReady")["message"].endswith(
        f"; kept when the policy is deleted (the operator did not create them for it): {ledger!r}"
    )

    # Another policy naming kept's dead-letter topic (another subscription, so its retry topic
    # is its own): refused, naming kept; nothing is created for it.
    cluster.create_policy(
        policy_document(
            namespace,
            "sharer",
            source=source,
            bootstrap=bootstrap_servers,
            deadLetter={"topic": f"{source}-billing-DLQ"},
            retry={"topic": f"{source}-sharer-RETRY"},
        )
    )
    refused = wait_for(
        lambda: (c := cluster.condition("sharer", "TopicsReady")).get("reason") == "TopicInUse" and c,
        what="TopicsReady TopicInUse",
    )
    assert refused["status"] == "False"
    assert refused["message"] == (
        f"spec.deadLetter.topic: topic '{source}-billing-DLQ' on broker '{bootstrap_servers}' is the "
        f"dead-letter topic of DeadLetterPolicy {namespace}/kept, which keeps it (the operator created it "
        "for that policy): a retry or dead-letter topic belongs to one policy; name another"
    )
    assert cluster.status("sharer")["phase"] == "Provisioning"
    assert cluster.application("sharer") is None
    assert cluster.config_map("sharer-policy") is None
    assert topic_partitions(kafka_admin, f"{source}-sharer-RETRY") is None
    wait_for(lambda: "TopicInUse" in cluster.event_reasons("sharer"), what="the TopicInUse event")

    cluster.delete_policy("kept")
    assert cluster.policy("kept") is None  # no finalizer: gone at once
    cluster.delete_policy("gone")
    wait_for(lambda: cluster.policy("gone") is None, what="the policy with deleteWithPolicy to go")
    wait_for(
        lambda: topic_partitions(kafka_admin, f"{source}-gone-RETRY") is None, what="its retry topic deleted"
    )
    assert topic_partitions(kafka_admin, ledger) == 2  # kept: not created for it
    [kept] = [e.message for e in cluster.events("gone") if e.reason == "TopicsKept"]
    assert kept.startswith(f"topic {ledger!r} kept: the operator did not create it for this policy")
    assert any(kept in r.getMessage() for r in caplog.records), "the operator's log names the kept topic"
    assert topic_partitions(kafka_admin, f"{source}-billing-DLQ") == 1
    assert topic_partitions(kafka_admin, f"{source}-billing-RETRY") == 1

    # kept is gone: the refused policy gets its turn (kopf's retry or the resync).
    wait_for(lambda: cluster.application("sharer"), timeout=30, what="the refused policy's application")
    wait_for(lambda: cluster.condition("sharer", "TopicsReady").get("status") == "True", what="TopicsReady")


def test_finalizer_gives_up_when_the_broker_is_gone(
    start_operator: Callable[..., RunningOperator], cluster: Cluster, namespace: str
) -> None:
    start_operator(finalizer_timeout=1.5, kafka_timeout=1.0)
    closed = f"127.0.0.1:{free_port()}"
    cluster.create_policy(
        policy_document(
            namespace, "billing", source="orders", bootstrap=closed, topics={"deleteWithPolicy": True}
        )
    )
    wait_for(lambda: cluster.policy("billing")["metadata"].get("finalizers"), what="the finalizer")
    record_owned(cluster, "billing", closed, "orders-billing-DLQ")

    cluster.delete_policy("billing")
    wait_for(lambda: cluster.policy("billing") is None, timeout=30, what="deletion despite the broker")
    wait_for(lambda: "CleanupAbandoned" in cluster.event_reasons("billing"), what="the event")


def record_owned(cluster: Cluster, name: str, broker: str, topic: str) -> None:
    """Write what an earlier run of the operator would have recorded: it created ``topic``."""
    cluster.objects.patch_namespaced_custom_object_status(
        "sparkdlq.io",
        "v1alpha1",
        cluster.namespace,
        "deadletterpolicies",
        name,
        {"status": {"ownedTopics": [{"broker": broker, "name": topic, "kind": "deadLetter"}]}},
    )
