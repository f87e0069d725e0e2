"""What a SparkApplication's state means for the policy (``policies.application_state``): the
JobRunning condition, when a failed application is due for resubmission, and the hints for an
application nobody picks up."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from spark_dlq_operator import naming
from spark_dlq_operator.policies.application_state import (
    application_state,
    job_condition,
    resubmission,
    resubmit_due,
    unnoticed,
    unwatched,
)


def app_in(state: str, error: str = "") -> dict[str, Any]:
    return {"status": {"applicationState": {"state": state, "errorMessage": error}, "submissionID": "s"}}


@pytest.mark.parametrize(
    ("state", "status", "reason"),
    [
        pytest.param("RUNNING", "True", "Running", id="running"),
        pytest.param("", "False", "Submitted", id="no-state"),
        pytest.param("SUBMITTED", "False", "Submitted", id="submitted"),
        pytest.param("PENDING_RERUN", "False", "Restarting", id="pending-rerun"),
        pytest.param("INVALIDATING", "False", "Restarting", id="invalidating"),
        pytest.param("SUCCEEDING", "False", "Restarting", id="succeeding"),
        pytest.param("FAILED", "False", "Failed", id="failed"),
        pytest.param("SUBMISSION_FAILED", "False", "Restarting", id="submission-failed-is-retried"),
        pytest.param("FAILING", "False", "Restarting", id="failing-is-retried"),
        pytest.param("SUSPENDING", "False", "Restarting", id="suspending"),
        pytest.param("RESUMING", "False", "Restarting", id="resuming"),
        pytest.param("SUSPENDED", "False", "Suspended", id="suspended-by-hand"),
        pytest.param("COMPLETED", "False", "Completed", id="completed"),
        pytest.param("UNKNOWN", "Unknown", "DriverUnknown", id="unknown-driver"),
    ],
)
def test_job_condition_maps_the_application_state(state: str, status: str, reason: str) -> None:
    condition = job_condition(app_in(state))
    assert (condition.status, condition.reason) == (status, reason)


def test_job_condition_carries_the_error_message() -> None:
    assert "driver OOM" in job_condition(app_in("FAILED", "driver OOM")).message
    assert "driver OOM" in job_condition(app_in("FAILING", "driver OOM")).message


NOW = datetime.datetime(2026, 11, 24, 12, 0, 0, tzinfo=datetime.UTC)


def failing(state: str, *, attempts: int, seconds_ago: float, interval: int = 10) -> dict[str, Any]:
    last = NOW - datetime.timedelta(seconds=seconds_ago)
    return {
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {
            "restartPolicy": {
                "type": "Always",
                "onFailureRetryInterval": interval,
                "onSubmissionFailureRetryInterval": interval,
            }
        },
        "status": {
            "applicationState": {"state": state},
            "submissionAttempts": attempts,
            "lastSubmissionAttemptTime": last.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }


def resubmitted(app: dict[str, Any], times: int) -> dict[str, Any]:
    app["spec"]["driver"] = {"annotations": {naming.RESUBMIT_ANNOTATION: str(times)}}
    return app


@pytest.mark.parametrize(
    ("app", "due"),
    [
        pytest.param(failing("FAILING", attempts=3, seconds_ago=5), None, id="spark-operator-within-cap"),
        pytest.param(failing("FAILING", attempts=31, seconds_ago=100), 200.0, id="past-cap-waits-for-cap"),
        pytest.param(failing("FAILING", attempts=31, seconds_ago=400), 0.0, id="past-cap-due-now"),
        pytest.param(failing("SUBMISSION_FAILED", attempts=40, seconds_ago=0), 300.0, id="submission-failed"),
        pytest.param(failing("RUNNING", attempts=99, seconds_ago=0), None, id="running"),
        pytest.param(failing("FAILED", attempts=99, seconds_ago=4), 6.0, id="failed-first-interval"),
        pytest.param(failing("FAILED", attempts=1, seconds_ago=400), 0.0, id="failed-due-now"),
        pytest.param(resubmitted(failing("FAILED", attempts=1, seconds_ago=0), 3), 80.0, id="failed-doubles"),
        pytest.param(resubmitted(failing("FAILED", attempts=1, seconds_ago=0), 9), 300.0, id="failed-capped"),
    ],
)
def test_resubmit_due_caps_the_spark_operators_growing_wait(app: dict[str, Any], due: float | None) -> None:
    assert resubmit_due(app, cap=300, now=NOW) == due


def test_resubmission_bumps_a_spec_annotation_outside_the_config_hash() -> None:
    app = {
        "spec": {"driver": {"annotations": {"sparkdlq.io/config-hash": "h", "sparkdlq.io/resubmission": "2"}}}
    }
    assert resubmission(app) == {"spec": {"driver": {"annotations": {"sparkdlq.io/resubmission": "3"}}}}
    assert resubmission({}) == {"spec": {"driver": {"annotations": {"sparkdlq.io/resubmission": "1"}}}}


def test_unwatched_namespace_is_named_when_the_job_namespaces_are_declared() -> None:
    assert unwatched("payments", ()) is None
    assert unwatched("payments", ("payments", "other")) is None
    assert unwatched("payments", ("",)) is None
    condition = unwatched("payments", ("spark-jobs",))
    assert condition is not None
    assert (condition.status, condition.reason) == ("False", "NamespaceNotWatched")
    assert "watches spark-jobs, not payments" in condition.message


def test_unnoticed_application_gets_a_hint_after_the_timeout() -> None:
    created = (NOW - datetime.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    app: dict[str, Any] = {"metadata": {"name": "a", "namespace": "payments", "creationTimestamp": created}}
    assert unnoticed(app, now=NOW, timeout=60) is None
    condition = unnoticed(app, now=NOW, timeout=20)
    assert condition is not None
    assert condition.reason == "NotPickedUp"
    assert "may not watch namespace payments" in condition.message
    app["status"] = {"applicationState": {"state": "SUBMITTED"}}
    assert unnoticed(app, now=NOW, timeout=20) is None


def test_application_state_includes_the_submission() -> None:
    assert application_state(app_in("RUNNING")) == ("RUNNING", "s", "")
