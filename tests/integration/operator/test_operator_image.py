"""The operator's image, built by ``scripts/setup/images.sh``, runs as the chart runs it.

The chart is installed with helm; the container is started from the project's operator image
with the rendered Deployment's command, arguments and environment, its user and group (the
image's own numeric user), a read-only root file system writable only where the pod mounts an
emptyDir, every capability dropped and no privilege escalation (the restricted Pod Security
Standard), logged in with a token of the chart's ServiceAccount. It reconciles a policy fully:
topics on the broker, the ConfigMap, the SparkApplication, the status.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client

from spark_dlq_devtools import containers
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.paths import work_dir
from spark_dlq_devtools.processes import free_port
from tests.chart import CHART, helm, one, render
from tests.conftest import unique
from tests.integration.operator.conftest import Cluster, policy_document, topic_partitions, wait_for
from tests.integration.operator.test_rbac import token_kubeconfig


@pytest.fixture
def image_operator(kube: ControlPlane, kube_api: Any, spark_crd: str) -> Iterator[tuple[str, str]]:
    """``(namespace, log path)`` of the operator container, running until the test ends."""
    namespace, release = unique("image-op"), unique("dlq")
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    folder = work_dir(f"image-operator-{namespace}")
    values = {
        "operator": {
            "watch": {"allNamespaces": False, "namespaces": [namespace]},
            "liveness": {"port": free_port()},
            "metrics": {"port": 0},
        },
        "topics": {"provisioner": "admin"},
    }
    values_file = folder / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    admin = str(kube.admin_kubeconfig)
    helm(
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--values",
        str(values_file),
        "--kubeconfig",
        admin,
    )
    name = f"spark-dlq-operator-{namespace}"
    log = folder / "operator.log"
    process: subprocess.Popen[bytes] | None = None
    try:
        deployment = one(render(values, namespace=namespace, release=release), "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        token = core.create_namespaced_service_account_token(
            pod["serviceAccountName"], namespace, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        kubeconfig = token_kubeconfig(kube, folder / "operator.kubeconfig", token)
        env = {e["name"]: e["value"] for e in container["env"]}
        env["SPARK_DLQ_KUBECONFIG"] = "/etc/spark-dlq-test/kubeconfig"
        pod_context, container_context = pod["securityContext"], container["securityContext"]
        assert container_context["readOnlyRootFilesystem"] is True
        # The only writable folders are the pod's emptyDir volumes.
        empty_dirs = {volume["name"] for volume in pod["volumes"] if "emptyDir" in volume}
        writable = [mount["mountPath"] for mount in container["volumeMounts"] if mount["name"] in empty_dirs]
        user = f"{pod_context['runAsUser']}:{pod_context['runAsGroup']}"
        assert containers.configured_user(containers.image("operator")) == user
        argv = containers.run_argv(
            name,
            image_name=containers.image("operator"),
            command=container["args"],
            volumes={
                kubeconfig: "/etc/spark-dlq-test/kubeconfig",
                kube.pki / "ca.crt": str(kube.pki / "ca.crt"),
            },
            environment=env,
            user=user,
            read_only=True,
            tmpfs=writable,
        )
        assert container["command"] == ["dlq-operator"], "the image's entry point is dlq-operator"
        with log.open("wb") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=containers.podman_env()
            )
        wait_for(
            lambda: (
                "Initial authentication has finished" in log.read_text(errors="replace")
                or process.poll() is not None
            ),
            timeout=120,
            what="the operator container to start",
        )
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        yield namespace, str(log)
    finally:
        containers.remove(name)
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(60)
        helm("uninstall", release, "--namespace", namespace, "--kubeconfig", admin)
        core.delete_namespace(namespace)


def test_operator_image_reconciles_a_policy_as_the_chart_runs_it(
    image_operator: tuple[str, str],
    kube_api: Any,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
) -> None:
    namespace, log = image_operator
    cluster = Cluster(kube_api, namespace)
    source = make_topic("orders", partitions=2)
    cluster.create_policy(policy_document(namespace, "billing", source=source, bootstrap=bootstrap_servers))

    app = wait_for(lambda: cluster.application("billing"), timeout=60, what="the SparkApplication")
    assert cluster.config_map("billing-policy") is not None
    wait_for(lambda: topic_partitions(kafka_admin, f"{source}-billing-DLQ") == 2, what="the DLQ topic")
    wait_for(lambda: topic_partitions(kafka_admin, f"{source}-billing-RETRY") == 2, what="the retry topic")
    wait_for(
        lambda: (
            cluster.status("billing").get("configHash")
            == app["metadata"]["annotations"]["sparkdlq.io/config-hash"]
        ),
        what="the status",
    )
    assert cluster.condition("billing", "TopicsReady")["status"] == "True"
    text = Path(log).read_text(errors="replace")
    assert "Read-only file system" not in text, text[-2000:]
