"""The Argo CD health checks (deploy/argocd), computed by Argo CD's own code.

``devtools/argocd-health`` hands deploy/argocd/argocd-cm-patch.yaml to Argo CD's settings parser
and computes each object's health with gitops-engine's ``GetResourceHealth`` and Argo CD's Lua
environment, as Argo CD's application controller does. The policies' statuses are built by the
operator's own status code (``spark_dlq_operator.render.next_status``), so the check reads
exactly what the operator writes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from spark_dlq_devtools.paths import REPO_ROOT, argocd_health_bin
from spark_dlq_operator.policies.application_state import (
    JOB_RESTARTING,
    JOB_SUBMITTED,
    JOB_SUSPENDED,
    job_condition,
)
from spark_dlq_operator.policies.status import ConditionState, Observation, next_status

ARGOCD = REPO_ROOT / "deploy" / "argocd"
HEALTH = ARGOCD / "health.lua"
APPLICATION_HEALTH = ARGOCD / "application-health.lua"
CM_PATCH = ARGOCD / "argocd-cm-patch.yaml"
NOW = "2026-11-22T01:00:00Z"

TOPICS_READY = ConditionState("True", "Created", "created topics orders-billing-RETRY, orders-billing-DLQ")
BROKER_DOWN = ConditionState("False", "BrokerUnavailable", "no broker answered at kafka:9092")


class ArgoCD:
    """One argocd-health process for the module: an object in, Argo CD's health out."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [str(argocd_health_bin()), str(CM_PATCH)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def health(self, obj: Mapping[str, Any]) -> dict[str, str]:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(json.dumps(obj) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        assert line, f"argocd-health exited with {self._process.wait()}"
        result: dict[str, str] = json.loads(line)
        assert "error" not in result, f"Argo CD reported an error: {result['error']}"
        return result

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)


@pytest.fixture(scope="module")
def argocd() -> Iterator[ArgoCD]:
    runner = ArgoCD()
    try:
        yield runner
    finally:
        runner.close()


def policy(generation: int = 1, *observations: Observation) -> dict[str, Any]:
    """A DeadLetterPolicy whose status went through ``observations``."""
    obj: dict[str, Any] = {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": "orders-billing", "namespace": "payments", "generation": generation},
        "spec": {"source": {"topic": "orders", "subscription": "billing"}},
    }
    if observations:
        status: dict[str, Any] = {}
        for observation in observations:
            status = next_status(status, observation, now=NOW)
        obj["status"] = status
    return obj


def application(state: str, error: str = "") -> dict[str, Any]:
    return {"status": {"applicationState": {"state": state, "errorMessage": error}, "submissionID": "s1"}}


@pytest.fixture
def health(argocd: ArgoCD) -> Any:
    """Argo CD's ``(status, message)`` for an object."""

    def compute(obj: Mapping[str, Any]) -> tuple[str, str]:
        result = argocd.health(obj)
        return result.get("status", ""), result.get("message", "")

    return compute


def test_argocd_applies_the_check_to_policies_only(health: Any) -> None:
    """The override is keyed to sparkdlq.io/DeadLetterPolicy: another kind keeps Argo CD's own
    verdict (a ConfigMap has no health check at all)."""
    assert health({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}) == ("", "")


def test_no_status_is_progressing(health: Any) -> None:
    status, message = health(policy())
    assert status == "Progressing"
    assert "operator" in message


def test_older_observed_generation_is_progressing_even_when_ready(health: Any) -> None:
    obj = policy(3, Observation(generation=2, topics=TOPICS_READY, job=job_condition(application("RUNNING"))))
    assert obj["status"]["phase"] == "Running"
    status, message = health(obj)
    assert status == "Progressing"
    assert "generation 3" in message


def test_missing_observed_generation_is_progressing(health: Any) -> None:
    obj = policy(1)
    obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert health(obj)[0] == "Progressing"


def test_ready_is_healthy(health: Any) -> None:
    obj = policy(
        2,
        Observation(generation=2, topics=TOPICS_READY),
        Observation(job=job_condition(application("RUNNING"))),
    )
    assert obj["status"]["phase"] == "Running"
    status, message = health(obj)
    assert status == "Healthy"
    assert "running" in message


@pytest.mark.parametrize(
    ("observation", "words"),
    [
        pytest.param(
            Observation(generation=1, invalid=["spec.retry.backoff.jitter: must be at most 1"]),
            ["InvalidSpec", "spec.retry.backoff.jitter"],
            id="invalid",
        ),
        pytest.param(
            Observation(
                generation=1,
                topics=TOPICS_READY,
                job=job_condition(application("FAILED", "driver OOMKilled")),
            ),
            ["Failed", "driver OOMKilled"],
            id="job-failed",
        ),
        pytest.param(
            Observation(generation=1, topics=TOPICS_READY, job=job_condition(application("COMPLETED"))),
            ["Completed"],
            id="job-completed",
        ),
    ],
)
def test_failed_or_invalid_is_degraded(observation: Observation, words: list[str], health: Any) -> None:
    obj = policy(1, observation)
    assert obj["status"]["phase"] in ("Failed", "Invalid")
    status, message = health(obj)
    assert status == "Degraded"
    for word in words:
        assert word in message


def test_invalid_after_running_is_degraded(health: Any) -> None:
    obj = policy(
        2,
        Observation(generation=1, topics=TOPICS_READY, job=job_condition(application("RUNNING"))),
        Observation(generation=2, invalid=["spec.source.topic: required"]),
    )
    assert health(obj)[0] == "Degraded"


def test_suspended_is_suspended(health: Any) -> None:
    obj = policy(4, Observation(generation=4, topics=TOPICS_READY, job=JOB_SUSPENDED))
    assert obj["status"]["phase"] == "Suspended"
    status, message = health(obj)
    assert status == "Suspended"
    assert "suspend" in message


@pytest.mark.parametrize(
    ("observation", "phase", "reason"),
    [
        pytest.param(
            Observation(generation=1, topics=BROKER_DOWN),
            "Provisioning",
            "BrokerUnavailable",
            id="provisioning",
        ),
        pytest.param(
            Observation(generation=1, topics=TOPICS_READY, job=JOB_SUBMITTED),
            "Pending",
            "Submitted",
            id="submitted",
        ),
        pytest.param(
            Observation(generation=1, topics=TOPICS_READY, job=JOB_RESTARTING, restarted=True),
            "Restarting",
            "Restarting",
            id="restarting",
        ),
    ],
)
def test_everything_else_is_progressing(
    observation: Observation, phase: str, reason: str, health: Any
) -> None:
    obj = policy(1, observation)
    assert obj["status"]["phase"] == phase
    status, message = health(obj)
    assert status == "Progressing"
    assert message.startswith(reason + ":")


def test_argocd_cm_patch_carries_the_scripts() -> None:
    patch = yaml.safe_load((ARGOCD / "argocd-cm-patch.yaml").read_text())
    data = patch["data"]
    assert data["resource.customizations.health.sparkdlq.io_DeadLetterPolicy"] == HEALTH.read_text(), (
        "deploy/argocd/argocd-cm-patch.yaml drifted from health.lua"
    )
    assert data["resource.customizations.health.argoproj.io_Application"] == APPLICATION_HEALTH.read_text()


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param({"status": {"health": {"status": "Healthy"}}}, "Healthy", id="healthy"),
        pytest.param(
            {"status": {"health": {"status": "Degraded", "message": "x"}}}, "Degraded", id="degraded"
        ),
        pytest.param({"status": {}}, "Progressing", id="no-health-yet"),
        pytest.param({}, "Progressing", id="no-status"),
    ],
)
def test_application_health_follows_argocds_own(obj: dict[str, Any], expected: str, health: Any) -> None:
    application = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "child"}}
    assert health({**application, **obj})[0] == expected


def test_install_instructions_name_the_argocd_cm_key() -> None:
    readme = (ARGOCD / "README.md").read_text()
    assert "resource.customizations.health.sparkdlq.io_DeadLetterPolicy" in readme
    assert "argocd-cm" in readme


# --- DeadLetterRedrive ---------------------------------------------------------------------------

REDRIVE_HEALTH = ARGOCD / "redrive-health.lua"


def redrive(*moves: tuple[str, str, str], driver: dict[str, Any] | None = None) -> dict[str, Any]:
    """A DeadLetterRedrive whose status went through ``moves`` (phase, reason, message), as the
    operator writes it (``redrive_render.next_status``)."""
    from spark_dlq_operator import redrive_render

    obj: dict[str, Any] = {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": "fix-1", "namespace": "payments", "generation": 1},
        "spec": {"policyRef": {"name": "orders-billing"}},
    }
    status: dict[str, Any] = {}
    for i, (phase, reason, message) in enumerate(moves):
        last = i == len(moves) - 1
        status = redrive_render.next_status(
            status,
            generation=1,
            phase=phase,
            reason=reason,
            message=message,
            driver=driver if last else None,
            now=NOW,
        )
    if moves:
        obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("moves", "expected", "words"),
    [
        pytest.param((), "Progressing", "Waiting for the spark-dlq operator", id="new"),
        pytest.param(
            (("Pending", "AnotherRedriveRunning", "redrive fix-0 of policy orders-billing is running"),),
            "Progressing",
            "AnotherRedriveRunning: redrive fix-0",
            id="pending",
        ),
        pytest.param(
            (("Running", "Submitted", "created"), ("Running", "Running", "the redrive is running")),
            "Progressing",
            "Running: the redrive is running",
            id="running",
        ),
        pytest.param(
            (("Running", "Running", "r"), ("Succeeded", "Completed", "the redrive finished")),
            "Healthy",
            "Redriven 7 of 7 matched dead letters",
            id="succeeded",
        ),
        pytest.param(
            (("Running", "Running", "r"), ("Failed", "SparkApplicationFailed", "state FAILED: no broker")),
            "Degraded",
            "SparkApplicationFailed: state FAILED: no broker",
            id="failed",
        ),
        pytest.param(
            (("Running", "Running", "r"), ("Cancelled", "Suspended", "spec.suspend is true")),
            "Suspended",
            "Suspended: spec.suspend is true",
            id="cancelled",
        ),
    ],
)
def test_redrive_health(
    moves: tuple[tuple[str, str, str], ...], expected: str, words: str, health: Any
) -> None:
    status, message = health(redrive(*moves, driver={"matched": 7, "redriven": 7}))
    assert status == expected
    assert words in message


def test_argocd_cm_patch_carries_the_redrive_script() -> None:
    data = yaml.safe_load(CM_PATCH.read_text())["data"]
    assert data["resource.customizations.health.sparkdlq.io_DeadLetterRedrive"] == REDRIVE_HEALTH.read_text()
