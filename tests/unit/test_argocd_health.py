"""The Argo CD health check (deploy/argocd/health.lua), run in Lua 5.1 as Argo CD runs it.

The policies' statuses are built by the operator's own status code
(``spark_dlq_operator.render.next_status``), so the check reads exactly what the operator writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_operator import render
from spark_dlq_operator.render import ConditionState, Observation

ARGOCD = REPO_ROOT / "deploy" / "argocd"
HEALTH = ARGOCD / "health.lua"
APPLICATION_HEALTH = ARGOCD / "application-health.lua"
NOW = "2026-11-22T01:00:00Z"

TOPICS_READY = ConditionState("True", "Created", "created topics orders-billing-RETRY, orders-billing-DLQ")
BROKER_DOWN = ConditionState("False", "BrokerUnavailable", "no broker answered at kafka:9092")


def run_lua(path: Path, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Run an Argo CD health script with ``obj`` as its global, as Argo CD does."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(dict(obj), recursive=True)
    result = lua.execute(path.read_text())
    return {str(k): v for k, v in result.items()}


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
            status = render.next_status(status, observation, now=NOW)
        obj["status"] = status
    return obj


def application(state: str, error: str = "") -> dict[str, Any]:
    return {"status": {"applicationState": {"state": state, "errorMessage": error}, "submissionID": "s1"}}


def health(obj: Mapping[str, Any]) -> tuple[str, str]:
    result = run_lua(HEALTH, obj)
    return str(result["status"]), str(result.get("message", ""))


def test_runs_as_lua_5_1() -> None:
    assert lua51.LuaRuntime().eval("_VERSION") == "Lua 5.1"


def test_no_status_is_progressing() -> None:
    status, message = health(policy())
    assert status == "Progressing"
    assert "operator" in message


def test_older_observed_generation_is_progressing_even_when_ready() -> None:
    obj = policy(
        3, Observation(generation=2, topics=TOPICS_READY, job=render.job_condition(application("RUNNING")))
    )
    assert obj["status"]["phase"] == "Running"
    status, message = health(obj)
    assert status == "Progressing"
    assert "generation 3" in message


def test_missing_observed_generation_is_progressing() -> None:
    obj = policy(1)
    obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert health(obj)[0] == "Progressing"


def test_ready_is_healthy() -> None:
    obj = policy(
        2,
        Observation(generation=2, topics=TOPICS_READY),
        Observation(job=render.job_condition(application("RUNNING"))),
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
                job=render.job_condition(application("FAILED", "driver OOMKilled")),
            ),
            ["Failed", "driver OOMKilled"],
            id="job-failed",
        ),
        pytest.param(
            Observation(
                generation=1, topics=TOPICS_READY, job=render.job_condition(application("COMPLETED"))
            ),
            ["Completed"],
            id="job-completed",
        ),
    ],
)
def test_failed_or_invalid_is_degraded(observation: Observation, words: list[str]) -> None:
    obj = policy(1, observation)
    assert obj["status"]["phase"] in ("Failed", "Invalid")
    status, message = health(obj)
    assert status == "Degraded"
    for word in words:
        assert word in message


def test_invalid_after_running_is_degraded() -> None:
    obj = policy(
        2,
        Observation(generation=1, topics=TOPICS_READY, job=render.job_condition(application("RUNNING"))),
        Observation(generation=2, invalid=["spec.source.topic: required"]),
    )
    assert health(obj)[0] == "Degraded"


def test_suspended_is_suspended() -> None:
    obj = policy(4, Observation(generation=4, topics=TOPICS_READY, job=render.JOB_SUSPENDED))
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
            Observation(generation=1, topics=TOPICS_READY, job=render.JOB_SUBMITTED),
            "Pending",
            "Submitted",
            id="submitted",
        ),
        pytest.param(
            Observation(generation=1, topics=TOPICS_READY, job=render.JOB_RESTARTING, restarted=True),
            "Restarting",
            "Restarting",
            id="restarting",
        ),
    ],
)
def test_everything_else_is_progressing(observation: Observation, phase: str, reason: str) -> None:
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
def test_application_health_follows_argocds_own(obj: dict[str, Any], expected: str) -> None:
    assert run_lua(APPLICATION_HEALTH, {"metadata": {"name": "child"}, **obj})["status"] == expected


def test_install_instructions_name_the_argocd_cm_key() -> None:
    readme = (ARGOCD / "README.md").read_text()
    assert "resource.customizations.health.sparkdlq.io_DeadLetterPolicy" in readme
    assert "argocd-cm" in readme
