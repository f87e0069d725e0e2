"""The DeadLetterRedrive CRD in a real kube-apiserver, as kubectl users meet it: its spec cannot
change once it started (CEL), its conditions behave as a batch/v1 Job's under `kubectl wait`
(written by the operator's own status builder), and `kubectl explain` has text for it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from spark_dlq_devtools.paths import kubernetes_bin
from spark_dlq_operator import redrive_render as rr

GROUP, VERSION, PLURAL = "sparkdlq.io", "v1alpha1", "deadletterredrives"

pytestmark = pytest.mark.usefixtures("dlp_crd")


def redrive(namespace: str, name: str = "fix-1") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"policyRef": {"name": "orders-billing"}, "selection": {"reasons": ["exhausted"]}},
    }


def objects(api: Any) -> Any:
    return client.CustomObjectsApi(api)


def write_status(api: Any, namespace: str, name: str, phase: str, reason: str, message: str) -> None:
    """The status the operator writes for ``phase`` (redrive_render.next_status)."""
    current = objects(api).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    status = rr.next_status(
        current.get("status") or {},
        generation=current["metadata"]["generation"],
        phase=phase,
        reason=reason,
        message=message,
        now="2026-11-26T10:00:00Z",
    )
    objects(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}
    )


def patch_spec(api: Any, namespace: str, name: str, spec: dict[str, Any]) -> None:
    objects(api).patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, {"spec": spec})


def kubectl(kubeconfig: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubernetes_bin("kubectl")), "--kubeconfig", kubeconfig, "--cache-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_spec_is_immutable_once_started_except_suspend(kube_api: Any, namespace: str) -> None:
    objects(kube_api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, redrive(namespace))
    patch_spec(kube_api, namespace, "fix-1", {"ratePerSecond": 10})  # Pending: still editable
    write_status(kube_api, namespace, "fix-1", "Pending", "PolicyNotFound", "no policy yet")
    patch_spec(kube_api, namespace, "fix-1", {"maxRedrives": 5})
    write_status(
        kube_api, namespace, "fix-1", "Running", "Submitted", "SparkApplication fix-1-redrive created"
    )

    for change in (
        {"ratePerSecond": 20},
        {"selection": {"reasons": ["terminated"]}},
        {"destination": {"type": "retry"}},
        {"dryRun": True},
        {"policyRef": {"name": "other"}},
    ):
        with pytest.raises(ApiException) as refused:
            patch_spec(kube_api, namespace, "fix-1", change)
        assert refused.value.status == 422, change
        assert "create a new DeadLetterRedrive" in str(refused.value.body), change
        assert "spec" in str(refused.value.body)

    patch_spec(kube_api, namespace, "fix-1", {"suspend": True})  # cancelling stays possible
    stored = objects(kube_api).get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "fix-1")
    assert (stored["spec"]["ratePerSecond"], stored["spec"]["maxRedrives"], stored["spec"]["suspend"]) == (
        10,
        5,
        True,
    )


@pytest.mark.parametrize(
    ("phase", "reason", "done", "not_done"),
    [
        pytest.param("Succeeded", "Completed", "Complete", "Failed", id="succeeded"),
        pytest.param("Failed", "SparkApplicationFailed", "Failed", "Complete", id="failed"),
        pytest.param("Cancelled", "Suspended", "Failed", "Complete", id="cancelled"),
    ],
)
def test_kubectl_wait_reads_the_conditions_as_a_job_s(
    kube_api: Any,
    kubeconfig: str,
    namespace: str,
    tmp_path: Path,
    phase: str,
    reason: str,
    done: str,
    not_done: str,
) -> None:
    objects(kube_api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, redrive(namespace))
    write_status(kube_api, namespace, "fix-1", "Running", "Submitted", "created")
    write_status(kube_api, namespace, "fix-1", phase, reason, f"the redrive ended {phase}")

    waited = kubectl(
        kubeconfig, tmp_path, "wait", f"--for=condition={done}", "dlr/fix-1", "-n", namespace, "--timeout=10s"
    )
    assert waited.returncode == 0, waited.stderr
    never = kubectl(
        kubeconfig,
        tmp_path,
        "wait",
        f"--for=condition={not_done}",
        "dlr/fix-1",
        "-n",
        namespace,
        "--timeout=1s",
    )
    assert never.returncode != 0
    assert "timed out" in never.stderr


def test_kubectl_explain_has_text_for_the_redrive(kubeconfig: str, tmp_path: Path) -> None:
    said = kubectl(kubeconfig, tmp_path, "explain", "deadletterredrives.status.conditions")
    assert said.returncode == 0, said.stderr
    assert "Complete True only when the redrive succeeded" in " ".join(said.stdout.split())
