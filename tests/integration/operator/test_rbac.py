"""The RBAC rules in operator/README.md are enough for the whole life of a policy.

The operator runs as a user that has only the rules of the README's RBAC block (bound by a
ClusterRole), so the Helm chart can copy that block and trust it: nothing the operator or kopf
does may be refused (no 403 in the logs), from creation to deletion with topic clean-up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client

from spark_dlq_devtools.kube import ControlPlane
from tests.conftest import unique
from tests.integration.operator.conftest import (
    Cluster,
    RunningOperator,
    policy_document,
    topic_partitions,
    wait_for,
)

README = Path(__file__).resolve().parents[3] / "operator" / "README.md"


def documented_rules() -> list[dict[str, Any]]:
    """The rules of the ```yaml block in the README's RBAC section."""
    section = README.read_text().split("## RBAC", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "operator/README.md has no yaml block under ## RBAC"
    return list(yaml.safe_load(block.group(1))["rules"])


@pytest.fixture
def restricted_kubeconfig(kube: ControlPlane, kube_api: Any) -> Iterator[str]:
    user = unique("spark-dlq-operator")
    rbac = client.RbacAuthorizationV1Api(kube_api)
    rbac.create_cluster_role({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                              "metadata": {"name": user}, "rules": documented_rules()})
    rbac.create_cluster_role_binding({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
    yield str(kube.kubeconfig(user))
    rbac.delete_cluster_role_binding(user)
    rbac.delete_cluster_role(user)


def test_operator_runs_with_only_the_documented_rbac(
        restricted_kubeconfig: str, start_operator: Callable[..., RunningOperator], cluster: Cluster,
        namespace: str, make_topic: Callable[..., str], bootstrap_servers: str, kafka_admin: AdminClient,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    start_operator(kubeconfig=restricted_kubeconfig)
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers,
                                          topics={"deleteWithPolicy": True}))

    first = wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    wait_for(lambda: cluster.policy("billing")["metadata"].get("finalizers"), what="the finalizer")
    cluster.set_application_state("billing", "RUNNING")
    wait_for(lambda: cluster.status("billing").get("phase") == "Running", what="phase Running")
    cluster.patch_policy("billing", {"spec": {"retry": {"maxRedeliverCount": 2}}})
    wait_for(lambda: cluster.status("billing").get("restartCount") == 1, what="a restart")
    cluster.delete_application("billing")
    first_uid = first["metadata"]["uid"]
    wait_for(lambda: (a := cluster.application("billing")) and a["metadata"]["uid"] != first_uid,
             what="the SparkApplication recreated")
    wait_for(lambda: {"TopicCreated", "SparkApplicationCreated", "SparkApplicationRestarted"} <=
             cluster.event_reasons("billing"), what="the events")

    cluster.delete_policy("billing")
    wait_for(lambda: cluster.policy("billing") is None, what="the policy to go")
    wait_for(lambda: topic_partitions(kafka_admin, f"{source}-billing-DLQ") is None, what="topics deleted")

    refused = [r.getMessage() for r in caplog.records
               if re.search(r"\b403\b|[Ff]orbidden", r.getMessage())]
    assert not refused, refused
