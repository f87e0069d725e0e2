"""The local spark-operator runner plays the spark-operator's part against the real apiserver:
it runs SparkApplications with spark-submit and writes their state the same way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.local_spark_operator import GROUP, PLURAL, VERSION, LocalSparkOperator
from spark_dlq_devtools.paths import spark_application_crd
from tests.integration.crds import install_crds

APP = """
import pathlib, sys, time
config, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "fail":  # before a SparkContext: the restart policy is the runner's, not Spark's
    print("dlq-engine: stopped: failing on purpose", file=sys.stderr)
    sys.exit(3)
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
count = spark.range(10).count()
pathlib.Path(out).write_text(pathlib.Path(config).read_text().strip() + f" count={count}")
if mode == "serve":
    while True:
        time.sleep(0.5)
"""


@pytest.fixture
def runner(kube: ControlPlane, kube_api: Any, namespace: str, tmp_path: Path) -> Iterator[LocalSparkOperator]:
    install_crds(kube_api, [spark_application_crd()])
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "app.py").write_text(APP)
    operator = LocalSparkOperator(
        kubeconfig=str(kube.admin_kubeconfig),
        workdir=tmp_path / "runs",
        namespaces=[namespace],
        path_map={"/opt/app": str(tmp_path / "image")},
        master="local[1]",
        stop_grace=10,
    )
    operator.start()
    yield operator
    operator.stop()


def _app(name: str, mode: str, out: Path, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SparkApplication",
        "metadata": {"name": name},
        "spec": {
            "type": "Python",
            "mode": "cluster",
            "pythonVersion": "3",
            "sparkVersion": "4.0.0",
            "mainApplicationFile": "local:///opt/app/app.py",
            "arguments": ["/etc/app/config/greeting", str(out), mode],
            "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
            "driver": {
                "cores": 1,
                "memory": "512m",
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app/config"}],
            },
            "executor": {"instances": 1, "cores": 1, "memory": "512m"},
            **spec,
        },
    }


def _states(kube_api: Any, namespace: str, name: str, wanted: str, timeout: float = 120) -> list[str]:
    objects = client.CustomObjectsApi(kube_api)
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        state = ((app.get("status") or {}).get("applicationState") or {}).get("state", "")
        if state and (not seen or seen[-1] != state):
            seen.append(state)
        if state == wanted:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"{name}: states {seen}, never {wanted}")


def _config_map(kube_api: Any, namespace: str, name: str, text: str) -> None:
    client.CoreV1Api(kube_api).create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"{name}-config"), data={"greeting": text}),
    )


def test_an_application_runs_to_completion_with_its_mounted_config(
    runner: LocalSparkOperator, kube_api: Any, namespace: str, tmp_path: Path
) -> None:
    _config_map(kube_api, namespace, "hello", "hello from a configmap")
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _app("hello", "ok", tmp_path / "out.txt")
    )
    states = _states(kube_api, namespace, "hello", "COMPLETED")
    assert states[0] == "SUBMITTED"
    assert (tmp_path / "out.txt").read_text() == "hello from a configmap count=10"


def test_a_failing_application_is_retried_by_its_restart_policy(
    runner: LocalSparkOperator, kube_api: Any, namespace: str, tmp_path: Path
) -> None:
    _config_map(kube_api, namespace, "broken", "x")
    app = _app(
        "broken",
        "fail",
        tmp_path / "out.txt",
        restartPolicy={"type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1},
    )
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)
    _states(kube_api, namespace, "broken", "PENDING_RERUN")
    _states(kube_api, namespace, "broken", "SUBMITTED")
    _states(kube_api, namespace, "broken", "FAILED")
    # No third attempt, one retry only: two more passes over the drivers (the second began
    # after FAILED was read) submitted nothing.
    ticks = runner.ticks + 2
    deadline = time.monotonic() + 30
    while runner.ticks < ticks and time.monotonic() < deadline:
        time.sleep(0.1)
    assert runner.ticks >= ticks, "the runner's tick loop stopped"
    final = client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "broken"
    )
    assert final["status"]["applicationState"]["state"] == "FAILED"
    assert final["status"]["submissionAttempts"] == 2
    assert "dlq-engine: stopped: failing on purpose" in final["status"]["applicationState"]["errorMessage"]


def test_a_spec_change_resubmits_and_a_metadata_change_does_not(
    runner: LocalSparkOperator, kube_api: Any, namespace: str, tmp_path: Path
) -> None:
    objects = client.CustomObjectsApi(kube_api)
    _config_map(kube_api, namespace, "server", "v1")
    objects.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, _app("server", "serve", tmp_path / "out.txt")
    )
    _states(kube_api, namespace, "server", "RUNNING")
    first_pid = runner.drivers[(namespace, "server")].process.pid  # type: ignore[union-attr]

    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "server", {"metadata": {"labels": {"touched": "yes"}}}
    )
    deadline = time.monotonic() + 30
    while (
        runner.drivers[(namespace, "server")].labels.get("touched") != "yes" and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert runner.drivers[(namespace, "server")].labels == {"touched": "yes"}  # the change was acted on
    assert runner.drivers[(namespace, "server")].process.pid == first_pid  # type: ignore[union-attr]

    first_submission = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "server")[
        "status"
    ]["submissionID"]
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "server", {"spec": {"sparkConf": {"spark.app.generation": "2"}}}
    )
    # INVALIDATING and PENDING_RERUN pass quickly; what lasts is a new submission, running.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "server")["status"]
        if status["submissionID"] != first_submission and status["applicationState"]["state"] == "RUNNING":
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"no new running submission after the spec change: {status}")
    assert status["submissionAttempts"] == 1  # attempts restart with the new spec
    driver = runner.drivers[(namespace, "server")]
    assert driver.process is not None
    assert driver.process.pid != first_pid

    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "server")
    deadline = time.monotonic() + 30
    while (namespace, "server") in runner.drivers and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (namespace, "server") not in runner.drivers
    assert driver.process is None
