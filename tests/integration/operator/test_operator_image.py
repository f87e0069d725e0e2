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
from confluent_kafka.admin import AdminClient

from spark_dlq_devtools import containers
from spark_dlq_devtools.kube import ControlPlane
from tests.integration.operator.conftest import Cluster, policy_document, topic_partitions, wait_for
from tests.integration.operator.test_rbac import CONTAINER_CA, installed_chart, token_kubeconfig


@pytest.fixture
def image_operator(kube: ControlPlane, kube_api: Any, spark_crd: str) -> Iterator[tuple[str, str]]:
    """``(namespace, log path)`` of the operator container, running until the test ends."""
    with installed_chart(kube, kube_api, "image-op") as chart:
        pod, container = chart.pod, chart.container
        name = f"spark-dlq-operator-{chart.namespace}"
        log = chart.folder / "operator.log"
        process: subprocess.Popen[bytes] | None = None
        try:
            env = {e["name"]: e["value"] for e in container["env"]}
            env["SPARK_DLQ_KUBECONFIG"] = "/etc/spark-dlq-test/kubeconfig"
            pod_context, container_context = pod["securityContext"], container["securityContext"]
            assert container_context["readOnlyRootFilesystem"] is True
            # The only writable folders are the pod's emptyDir volumes.
            empty_dirs = {volume["name"] for volume in pod["volumes"] if "emptyDir" in volume}
            writable = [m["mountPath"] for m in container["volumeMounts"] if m["name"] in empty_dirs]
            user = f"{pod_context['runAsUser']}:{pod_context['runAsGroup']}"
            assert containers.configured_user(containers.image("operator")) == user
            argv = containers.run_argv(
                name,
                image_name=containers.image("operator"),
                command=container["args"],
                volumes={
                    token_kubeconfig(
                        kube, chart.folder / "container.kubeconfig", chart.token, ca=CONTAINER_CA
                    ): "/etc/spark-dlq-test/kubeconfig",
                    kube.pki / "ca.crt": CONTAINER_CA,
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
            yield chart.namespace, str(log)
        finally:
            containers.remove(name)
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(60)


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
