"""The whole flow: the real apiserver (with its garbage collector), Kafka and Spark, the
operator as its own process, and the local spark-operator runner running the engine with
spark-submit. One namespace for the e2e tier, watched by this tier's operator only."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.local_spark_operator import LocalSparkOperator
from spark_dlq_devtools.paths import REPO_ROOT, spark_application_crd, work_dir
from spark_dlq_devtools.processes import Service, free_port
from spark_dlq_operator.naming import application_name
from tests.conftest import unique
from tests.helpers import FAST_DRIVER_ENV, QUICK_LEASE_ENV
from tests.integration.crds import PROJECT_CRDS, install_crds


@pytest.fixture(scope="session")
def e2e_namespace(kube_api: Any) -> str:
    install_crds(kube_api, [*PROJECT_CRDS, spark_application_crd()])
    name = unique("e2e")
    client.CoreV1Api(kube_api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


@pytest.fixture(scope="session")
def e2e_workdir(e2e_namespace: str) -> Path:
    return work_dir(f"e2e-{os.getpid()}")


@pytest.fixture(scope="session")
def spark_operator(kube: ControlPlane, e2e_namespace: str, e2e_workdir: Path) -> Iterator[LocalSparkOperator]:
    runner = LocalSparkOperator(
        kubeconfig=str(kube.admin_kubeconfig),
        workdir=e2e_workdir / "spark-apps",
        namespaces=[e2e_namespace],
        path_map={"/opt/spark-dlq": str(REPO_ROOT / "spark_image")},
        python_path=[str(REPO_ROOT)],
        master="local[2]",
        stop_grace=30,
        service_account_tokens=True,
        driver_env={**FAST_DRIVER_ENV, **QUICK_LEASE_ENV},
    )
    runner.start()
    yield runner
    runner.stop()


@pytest.fixture(scope="session")
def operator_port() -> int:
    """The e2e operator's metrics port: tests that prove that something did not happen wait on
    its counters (``operator_counter``)."""
    return free_port()


def operator_counter(port: int, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` that carry ``labels``, on the operator's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


@pytest.fixture(scope="session")
def dlq_operator(
    kube: ControlPlane,
    kafka: Any,
    e2e_namespace: str,
    e2e_workdir: Path,
    spark_operator: LocalSparkOperator,
    operator_port: int,
) -> Iterator[Service]:
    operator = Service(
        "dlq-operator",
        [
            sys.executable,
            "-m",
            "spark_dlq_operator.cli",
            "run",
            "--namespace",
            e2e_namespace,
            "--provisioner",
            "admin",
            "--checkpoint-base",
            str(e2e_workdir / "checkpoints"),
            "--resync-interval",
            "5",
            "--metrics-port",
            str(operator_port),
        ],
        log=e2e_workdir / "operator.log",
        env={**os.environ, "KUBECONFIG": str(kube.admin_kubeconfig)},
    )
    operator.start()
    yield operator
    operator.stop()


class Policies:
    """Reads and changes DeadLetterPolicies in the e2e namespace."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.created: list[str] = []

    def create(self, document: dict[str, Any]) -> None:
        self.objects.create_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", self.namespace, "deadletterpolicies", document
        )
        self.created.append(document["metadata"]["name"])

    def get(self, name: str) -> dict[str, Any]:
        return dict(
            self.objects.get_namespaced_custom_object(
                "sparkdlq.io", "v1alpha1", self.namespace, "deadletterpolicies", name
            )
        )

    def patch(self, name: str, body: dict[str, Any]) -> None:
        self.objects.patch_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", self.namespace, "deadletterpolicies", name, body
        )

    def delete(self, name: str) -> None:
        self.objects.delete_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", self.namespace, "deadletterpolicies", name
        )

    def wait_status(
        self,
        name: str,
        check: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 240,
        what: str = "status",
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            status = dict(self.get(name).get("status") or {})
            if check(status):
                return status
            time.sleep(0.5)
        raise AssertionError(f"{name}: {what} not reached in {timeout:.0f}s; last status {status}")


@pytest.fixture
def policies(
    kube_api: Any, e2e_namespace: str, dlq_operator: Service, spark_operator: LocalSparkOperator
) -> Iterator[Policies]:
    """The e2e namespace's policies. Those a test leaves behind are deleted after it, and their
    drivers waited for: a running engine would take CPU from every later test of the session."""
    found = Policies(kube_api, e2e_namespace)
    yield found
    for name in found.created:
        with contextlib.suppress(client.ApiException):
            found.delete(name)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(
        (e2e_namespace, application_name(name)) in spark_operator.drivers for name in found.created
    ):
        time.sleep(0.5)
