"""DeadLetterPolicyClasses on the real apiserver, with the real operator: a class governs the
policies that name it, refuses what exceeds it (nothing is created for such a policy), and a
change to it restarts a job only when it changes what the job runs. The rules themselves are
tested in tests/unit (test_governance.py, test_classes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from spark_dlq_operator import naming
from tests.conftest import unique
from tests.integration.operator.conftest import (
    GROUP,
    VERSION,
    Cluster,
    RunningOperator,
    policy_document,
    wait_for,
)

PLURAL = "deadletterpolicyclasses"


class Classes:
    """Cluster-scoped DeadLetterPolicyClasses made by one test, deleted after it."""

    def __init__(self, api_client: Any) -> None:
        self.objects = client.CustomObjectsApi(api_client)
        self.names: list[str] = []

    def create(self, spec: dict[str, Any]) -> str:
        name = unique("class")
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DeadLetterPolicyClass",
            "metadata": {"name": name},
        }
        self.objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, {**body, "spec": spec})
        self.names.append(name)
        return name

    def patch(self, name: str, spec: dict[str, Any]) -> None:
        self.objects.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"spec": spec})

    def delete_all(self) -> None:
        for name in self.names:
            try:
                self.objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            except ApiException as error:
                if error.status != 404:
                    raise


@pytest.fixture
def classes(kube_api: Any) -> Iterator[Classes]:
    made = Classes(kube_api)
    yield made
    made.delete_all()


def ready(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.condition(name, "Ready")


def test_a_class_governs_refuses_and_restarts_only_what_it_changes(
    operator: RunningOperator, cluster: Cluster, namespace: str, classes: Classes
) -> None:
    name = classes.create({"defaults": {"spark": {"trigger": "2s"}}, "images": {"allowed": ["spark-dlq:*"]}})

    def policy(policy_name: str, **spark: Any) -> dict[str, Any]:
        document = policy_document(
            namespace, policy_name, source="orders", bootstrap="kafka.invalid:9092", topics={"create": False}
        )
        document["spec"]["className"] = name
        document["spec"]["spark"] = spark
        return document

    cluster.create_policy(policy("billing"))
    cluster.create_policy(policy("evil", image="evil:1"))

    app = wait_for(lambda: cluster.application("billing"), what="the SparkApplication of the class's policy")
    config_map = cluster.config_map("billing-policy")
    assert yaml.safe_load(config_map.data["policy.yaml"])["spec"]["spark"]["trigger"] == "2s"
    wait_for(lambda: cluster.status("evil").get("phase") == "Invalid", what="the refused policy Invalid")
    assert ready(cluster, "evil")["reason"] == "ClassViolation"
    assert ready(cluster, "evil")["message"] == (
        f"spec.spark.image: 'evil:1' is not allowed by class '{name}' (spec.images.allowed: spark-dlq:*)"
    )
    assert cluster.application("evil") is None
    assert cluster.config_map("evil-policy") is None

    # First a change the job does not see, then one it does. kopf handles one object's events in
    # order, so once the second has restarted the job, the first was handled: it restarted nothing.
    classes.patch(name, {"limits": {"maxRedeliverCount": 100}})
    classes.patch(name, {"defaults": {"spark": {"trigger": "5s"}}})
    wait_for(lambda: cluster.status("billing").get("restartCount") == 1, what="the job restarted once")
    restarted = cluster.application("billing")
    assert restarted is not None
    digest = restarted["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION]
    assert digest != app["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION]
    assert cluster.status("billing")["configHash"] == digest
    config_map = cluster.config_map("billing-policy")
    assert yaml.safe_load(config_map.data["policy.yaml"])["spec"]["spark"]["trigger"] == "5s"
    assert [e.reason for e in cluster.events("billing")].count("SparkApplicationRestarted") == 1
