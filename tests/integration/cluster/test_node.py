"""The test bed's node runs real pods: scheduling, DNS, Services, the API from a pod, the
Kafka broker from a pod, controllers, logs and exec."""

from __future__ import annotations

import json
import time

from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.network import KUBERNETES_SERVICE_IP, POD_CIDR, host_address
from spark_dlq_devtools.node import NODE_NAME, Node, probe_image
from spark_dlq_devtools.paths import versions
from tests.integration.cluster.conftest import apply, probe, probe_pod, wait_ready


def test_node_registers_ready_with_its_runtime_and_address(node: Node) -> None:
    status = json.loads(node.kubectl("get", "node", NODE_NAME, "-o", "json"))["status"]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == "True"
    assert conditions["DiskPressure"] == "False"
    info = status["nodeInfo"]
    assert info["kubeletVersion"] == f"v{versions()['KUBERNETES_VERSION']}"
    assert info["containerRuntimeVersion"].startswith("containerd://1.")
    assert {"type": "InternalIP", "address": host_address()} in status["addresses"]
    # The kubelet lists its images in a status update after the one that reports it Ready.
    deadline = time.monotonic() + 60
    while probe_image() not in (listed := _listed_images(node)):
        assert time.monotonic() < deadline, f"the node's status lists {sorted(listed)}, not {probe_image()}"
        time.sleep(0.5)


def _listed_images(node: Node) -> set[str]:
    status = json.loads(node.kubectl("get", "node", NODE_NAME, "-o", "json"))["status"]
    return {name for image in status.get("images") or [] for name in image["names"]}


def test_pod_is_scheduled_runs_and_logs(node: Node, pod_namespace: str) -> None:
    apply(node, probe_pod("server", pod_namespace, "serve", "-greeting", "hi"))
    wait_ready(node, pod_namespace, "server")
    pod = json.loads(node.kubectl("get", "pod", "server", "-n", pod_namespace, "-o", "json"))
    assert pod["spec"]["nodeName"] == NODE_NAME
    ip = pod["status"]["podIP"]
    assert ip.startswith(POD_CIDR.rsplit(".", 1)[0] + ".")
    logs = node.kubectl("logs", "server", "-n", pod_namespace)
    assert "serving on [::]:7077" in logs


def test_exec_runs_inside_the_pod(node: Node, pod_namespace: str) -> None:
    apply(node, probe_pod("shell", pod_namespace))
    wait_ready(node, pod_namespace, "shell")
    assert probe(node, pod_namespace, "shell", "hostname").strip() == "shell"


def test_pod_reaches_the_api_server_by_service_name_with_its_token(node: Node, pod_namespace: str) -> None:
    apply(node, probe_pod("client", pod_namespace))
    wait_ready(node, pod_namespace, "client")
    resolved = probe(node, pod_namespace, "client", "resolve", "kubernetes.default.svc")
    assert resolved.split() == [KUBERNETES_SERVICE_IP]
    review = json.loads(
        probe(node, pod_namespace, "client", "kube-api", "-server", "https://kubernetes.default.svc")
    )
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{pod_namespace}:default"


def test_pod_reaches_another_pod_through_a_headless_service(node: Node, pod_namespace: str) -> None:
    """How Spark executors reach their driver: ``<app>-driver-svc.<namespace>.svc``."""
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "app-driver-svc", "namespace": pod_namespace},
        "spec": {
            "clusterIP": "None",
            "selector": {"app": "driver"},
            "ports": [{"name": "rpc", "port": 7077}],
        },
    }
    apply(
        node,
        headless,
        probe_pod("driver", pod_namespace, "serve", "-greeting", "from-driver"),
        probe_pod("executor", pod_namespace),
    )
    wait_ready(node, pod_namespace, "driver")
    wait_ready(node, pod_namespace, "executor")
    driver_ip = node.kubectl("get", "pod", "driver", "-n", pod_namespace, "-o", "jsonpath={.status.podIP}")
    name = f"app-driver-svc.{pod_namespace}.svc"
    assert probe(node, pod_namespace, "executor", "resolve", name).split() == [driver_ip]
    reply = probe(node, pod_namespace, "executor", "tcp", f"{name}:7077")
    assert reply.split() == [f"{driver_ip}:7077", "from-driver"]


def test_pod_reaches_the_kafka_broker_at_its_advertised_address(
    node: Node, pod_namespace: str, kafka: KafkaBroker
) -> None:
    apply(node, probe_pod("producer", pod_namespace))
    wait_ready(node, pod_namespace, "producer")
    out = probe(node, pod_namespace, "producer", "kafka-metadata", kafka.pod_bootstrap_servers)
    assert out.splitlines() == [f"broker 1 {kafka.pod_bootstrap_servers} reachable"]


def test_deployment_creates_a_running_pod(node: Node, pod_namespace: str) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": pod_namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": probe_pod("web", pod_namespace)["spec"],
            },
        },
    }
    apply(node, deployment)
    node.kubectl("rollout", "status", "deployment/web", "-n", pod_namespace, "--timeout=120s", timeout=130)
    listing = node.kubectl("get", "pods", "-n", pod_namespace, "-l", "app=web", "-o", "json")
    pods = json.loads(listing)["items"]
    assert len(pods) == 2
    assert all(p["status"]["phase"] == "Running" for p in pods)
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"ReplicaSet"}
