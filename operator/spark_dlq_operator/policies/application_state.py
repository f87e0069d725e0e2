"""What a SparkApplication's state means for its policy: JobRunning from the spark-operator's
``status.applicationState``, the hints when the spark-operator does not pick an application up,
and when a failed application is due for the operator's own resubmission.

Pure functions of the application object as the API server returns it; ``watcher`` and
``supervisor`` act on them.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from dlq_engine.model.heartbeat import time_of
from spark_dlq_operator import naming
from spark_dlq_operator.naming import RESUBMIT_ANNOTATION, Owner
from spark_dlq_operator.policies.status import ConditionState, ConditionStatus
from spark_dlq_operator.reasons import Reason


class AppState(StrEnum):
    """The spark-operator v2's application states (``ApplicationState*`` in its api/v1beta2).

    Under the Always restart policy a failing driver or a failed submission is resubmitted, so
    FAILING and SUBMISSION_FAILED are on the way back, not the end; FAILED is the end (reached
    only under another restart policy, e.g. a SparkApplication edited by hand). UNKNOWN is the
    driver pod's phase Unknown (its node lost): the job may still run."""

    NEW = ""
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    SUBMISSION_FAILED = "SUBMISSION_FAILED"
    PENDING_RERUN = "PENDING_RERUN"
    INVALIDATING = "INVALIDATING"
    SUCCEEDING = "SUCCEEDING"
    FAILING = "FAILING"
    SUSPENDING = "SUSPENDING"
    SUSPENDED = "SUSPENDED"
    RESUMING = "RESUMING"
    UNKNOWN = "UNKNOWN"


_SUBMITTED_JOB: Final = ("False", Reason.SUBMITTED, "the Spark application is submitted (state {state})")
_RESTARTING_JOB: Final = (
    "False",
    Reason.RESTARTING,
    "the Spark application is restarting (state {state}){error}",
)
#: JobRunning for each state: its status, reason and message (``{state}``: the state, ``{error}``:
#: the spark-operator's error message, if any). A state not listed is Unknown.
_JOB: Final[Mapping[str, tuple[ConditionStatus, Reason, str]]] = {
    AppState.RUNNING: ("True", Reason.RUNNING, "the Spark application is running"),
    AppState.NEW: _SUBMITTED_JOB,
    AppState.SUBMITTED: _SUBMITTED_JOB,
    AppState.PENDING_RERUN: _RESTARTING_JOB,
    AppState.INVALIDATING: _RESTARTING_JOB,
    AppState.SUCCEEDING: _RESTARTING_JOB,
    AppState.FAILING: _RESTARTING_JOB,
    AppState.SUBMISSION_FAILED: _RESTARTING_JOB,
    AppState.SUSPENDING: _RESTARTING_JOB,
    AppState.RESUMING: _RESTARTING_JOB,
    AppState.SUSPENDED: (
        "False",
        Reason.SUSPENDED,
        "the SparkApplication is suspended (its spec.suspend, not the policy's)",
    ),
    AppState.FAILED: ("False", Reason.FAILED, "the Spark application failed (state {state}){error}"),
    AppState.COMPLETED: (
        "False",
        Reason.COMPLETED,
        "the Spark application completed; a streaming job should not stop by itself",
    ),
    AppState.UNKNOWN: (
        "Unknown",
        Reason.DRIVER_UNKNOWN,
        "the driver pod's state is unknown (its node may be unreachable)",
    ),
}
_UNKNOWN_JOB: Final = ("Unknown", Reason.UNKNOWN, "the Spark application is in state {state}")


def application_state(app: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(state, submissionID, errorMessage)`` of a SparkApplication: what changes when the
    spark-operator moves it along (a resubmission changes the submission id)."""
    status = app.get("status") or {}
    state = status.get("applicationState") or {}
    return (
        str(state.get("state") or ""),
        str(status.get("submissionID") or ""),
        str(state.get("errorMessage") or ""),
    )


def job_condition(app: Mapping[str, Any]) -> ConditionState:
    """JobRunning from the spark-operator's ``status.applicationState`` (``_JOB``)."""
    state, _, error = application_state(app)
    status, reason, message = _JOB.get(state, _UNKNOWN_JOB)
    return ConditionState(
        status, reason, message.format(state=state or "none yet", error=f": {error}" if error else "")
    )


def unwatched(namespace: str, watched: Sequence[str]) -> ConditionState | None:
    """JobRunning when the spark-operator is declared to watch other namespaces only."""
    if not watched or namespace in watched or "" in watched:
        return None
    return ConditionState(
        "False",
        Reason.NAMESPACE_NOT_WATCHED,
        f"the spark-operator watches {', '.join(sorted(watched))}, not {namespace}: no job starts "
        f"here until {namespace} is one of its job namespaces (its chart's spark.jobNamespaces)",
    )


def unnoticed(app: Mapping[str, Any], *, now: datetime.datetime, timeout: float) -> ConditionState | None:
    """JobRunning for a SparkApplication the spark-operator has not picked up ``timeout``
    seconds after it was created (no state at all), else None."""
    state, _, _ = application_state(app)
    created = time_of((app.get("metadata") or {}).get("creationTimestamp"))
    if state or created is None or (now - created).total_seconds() < timeout:
        return None
    metadata = app.get("metadata") or {}
    return ConditionState(
        "False",
        Reason.NOT_PICKED_UP,
        f"SparkApplication {metadata.get('name')} has no state {timeout:.0f}s after it was created: "
        f"the spark-operator may not watch namespace {metadata.get('namespace')} (its chart's "
        "spark.jobNamespaces), or may not be running",
    )


def resubmit_due(app: Mapping[str, Any], *, cap: float, now: datetime.datetime) -> float | None:
    """Seconds until the operator should resubmit a failed application itself, or None when the
    spark-operator resubmits it within ``cap`` seconds of its last submission (or it is not
    failing). The spark-operator waits its retry interval times the submissions so far, over the
    application's life (``TimeUntilNextRetryDue``), so the wait has no bound of its own.

    FAILED is final for the spark-operator (a restart policy other than the operator's ``Always``,
    or a spark-operator that gave up): the operator resubmits it after its retry interval
    doubled for each of the operator's own resubmissions so far (``RESUBMIT_ANNOTATION``), at
    most ``cap`` seconds, from when it ended."""
    status = app.get("status") or {}
    state, _, _ = application_state(app)
    policy = (app.get("spec") or {}).get("restartPolicy") or {}
    if state == AppState.FAILED:
        driver = (app.get("spec") or {}).get("driver") or {}
        resubmitted = int((driver.get("annotations") or {}).get(RESUBMIT_ANNOTATION) or 0)
        base = float(policy.get("onFailureRetryInterval") or 10)
        wait = min(cap, base * 2.0 ** min(resubmitted, 30))
        ended = time_of(status.get("terminationTime")) or time_of(status.get("lastSubmissionAttemptTime"))
        if ended is None:
            return 0.0
        return max(0.0, wait - (now - ended).total_seconds())
    if state == AppState.FAILING:
        interval = policy.get("onFailureRetryInterval")
    elif state == AppState.SUBMISSION_FAILED:
        interval = policy.get("onSubmissionFailureRetryInterval")
    else:
        return None
    attempts = int(status.get("submissionAttempts") or 0)
    last = time_of(status.get("lastSubmissionAttemptTime"))
    if interval is None or last is None or attempts <= 0 or float(interval) * attempts <= cap:
        return None
    return max(0.0, cap - (now - last).total_seconds())


def resubmission(app: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that makes the spark-operator resubmit ``app`` now: a new value of
    ``RESUBMIT_ANNOTATION`` in its driver's annotations, a spec change, so it invalidates the
    run, resets its counters and submits again."""
    driver = (app.get("spec") or {}).get("driver") or {}
    count = int((driver.get("annotations") or {}).get(RESUBMIT_ANNOTATION) or 0)
    return {"spec": {"driver": {"annotations": {RESUBMIT_ANNOTATION: str(count + 1)}}}}


JOB_SUSPENDED: Final = ConditionState("False", Reason.SUSPENDED, "spec.suspend is true: the job is stopped")


#: JobRunning right after the operator creates the SparkApplication: what the application's own
#: first event (no state yet) maps to, so that event finds nothing to write.
JOB_SUBMITTED: Final = job_condition({})


JOB_RESTARTING: Final = ConditionState(
    "False", Reason.RESTARTING, "the configuration changed: the Spark application is resubmitted"
)


def policy_owner(app: Mapping[str, Any]) -> Owner | None:
    """The policy that controls a SparkApplication, from its owner reference."""
    metadata = app.get("metadata") or {}
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == "DeadLetterPolicy" and ref.get("controller"):
            return Owner(name=ref["name"], namespace=metadata["namespace"], uid=ref["uid"])
    return None


def managed(app: Mapping[str, Any]) -> bool:
    labels = (app.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(naming.MANAGED_BY_LABEL) == naming.MANAGED_BY)
