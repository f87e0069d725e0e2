"""The operator's metrics from the statuses it writes, and its API errors by resource."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from spark_dlq_operator import metrics
from spark_dlq_operator.kubeapi import _resource


def status(
    phase: str, *, ready: bool = False, job: tuple[str, str] | None = None, restarts: int = 0
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if job is not None:
        conditions.append({"type": "JobRunning", "status": job[0], "reason": job[1]})
    return {"phase": phase, "conditions": conditions, "restartCount": restarts}


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def policy(request: pytest.FixtureRequest) -> Iterator[str]:
    name = request.node.name.replace("_", "-")[:40]
    yield name
    metrics.policy_gone("ns", name)


def test_phase_and_ready_follow_the_written_status(policy: str) -> None:
    label = f"ns/{policy}"
    metrics.status_written("ns", policy, {}, status("Provisioning"))
    metrics.status_written("ns", policy, status("Provisioning"), status("Running", ready=True))
    assert sample("spark_dlq_operator_policy_phase", policy=label, phase="Running") == 1
    assert sample("spark_dlq_operator_policy_phase", policy=label, phase="Provisioning") == 0
    assert sample("spark_dlq_operator_policy_ready", policy=label) == 1
    assert sample("spark_dlq_operator_phase_transitions_total", policy=label) == 1  # not its first phase
    assert sample("spark_dlq_operator_job_restarts_total", policy=label, cause="config") == 0
    assert sample("spark_dlq_operator_policies", phase="Running") >= 1
    metrics.policy_gone("ns", policy)
    assert REGISTRY.get_sample_value("spark_dlq_operator_policy_ready", {"policy": label}) is None
    assert REGISTRY.get_sample_value("spark_dlq_operator_phase_transitions_total", {"policy": label}) is None


def test_a_job_leaving_running_by_itself_is_a_failure_restart(policy: str) -> None:
    label = f"ns/{policy}"
    running = status("Running", ready=True, job=("True", "Running"))
    metrics.status_written("ns", policy, running, status("Failed", job=("False", "Failed")))
    metrics.status_written("ns", policy, status("Failed", job=("False", "Failed")), running)
    metrics.status_written("ns", policy, running, status("Restarting", job=("False", "Restarting")))
    assert sample("spark_dlq_operator_job_restarts_total", policy=label, cause="failure") == 2
    assert sample("spark_dlq_operator_job_restarts_total", policy=label, cause="config") == 0


def test_a_configuration_restart_is_counted_as_config(policy: str) -> None:
    label = f"ns/{policy}"
    running = status("Running", ready=True, job=("True", "Running"), restarts=1)
    metrics.status_written(
        "ns", policy, running, status("Restarting", job=("False", "Restarting"), restarts=2)
    )
    assert sample("spark_dlq_operator_job_restarts_total", policy=label, cause="config") == 1
    assert sample("spark_dlq_operator_job_restarts_total", policy=label, cause="failure") == 0


def test_policies_not_listed_by_a_resync_are_forgotten(policy: str) -> None:
    metrics.status_written("ns", policy, {}, status("Pending"))
    metrics.POLICY_STATES.keep_only([])
    assert REGISTRY.get_sample_value("spark_dlq_operator_policy_ready", {"policy": f"ns/{policy}"}) is None


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/namespaces/n/configmaps/x", "configmaps"),
        ("/api/v1/namespaces/n/events", "events"),
        ("/apis/sparkdlq.io/v1alpha1/namespaces/n/deadletterpolicies/p/status", "deadletterpolicies"),
        ("/apis/sparkdlq.io/v1alpha1/deadletterpolicies", "deadletterpolicies"),
        ("/api/v1/namespaces/n", "namespaces"),
        ("/apis/kafka.strimzi.io/v1beta2", "discovery"),
    ],
)
def test_api_errors_are_labelled_by_resource(path: str, resource: str) -> None:
    assert _resource(path) == resource


def test_a_stalled_engines_restart_is_counted_as_failure(policy: str) -> None:
    label = f"ns/{policy}"
    running = status("Running", ready=True, job=("True", "Running"), restarts=0)
    stalled = status("Pending", job=("False", "EngineStalled"), restarts=1)
    stalled["lastRestartReason"] = "EngineStalled"
    metrics.status_written("ns", policy, running, stalled)
    assert sample("spark_dlq_operator_job_restarts_total", policy=label, cause="failure") == 1
    assert sample("spark_dlq_operator_job_restarts_total", policy=label, cause="config") == 0
