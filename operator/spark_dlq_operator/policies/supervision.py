"""What the spark-operator does not catch, read from the driver's heartbeat and the driver pod:
a driver whose query makes no progress (EngineStalled), an application waiting for its driver pod
too long (DriverPending), the breaker's state (BreakerClosed) and the ordering stage's report
(``status.ordering``).

Pure: the heartbeat document is the engine's (``dlq_engine.model.heartbeat``); ``supervisor``
reads the Lease and the pod and writes what these functions return.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final

from dlq_engine.model.breaker import CLOSED, HALF_OPEN
from dlq_engine.model.heartbeat import Heartbeat, OrderingReport, time_of
from spark_dlq_operator.naming import HEARTBEAT_ANNOTATION
from spark_dlq_operator.policies.application_state import AppState, application_state
from spark_dlq_operator.policies.status import ConditionState
from spark_dlq_operator.reasons import Reason


def heartbeat_of(lease: Mapping[str, Any] | None) -> Heartbeat | None:
    """The heartbeat on a policy's Lease, None when there is none or it is unreadable."""
    annotations = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(HEARTBEAT_ANNOTATION)
    return Heartbeat.from_json(str(text)) if text else None


def ordering_status(app: Mapping[str, Any] | None, lease: Mapping[str, Any] | None) -> OrderingReport | None:
    """``status.ordering`` from the heartbeat of the application's current submission (one sent
    after it was submitted), None when there is none or it carries no ordering report."""
    beat = current_beat(app, lease)
    return beat.ordering if beat is not None else None


def current_beat(app: Mapping[str, Any] | None, lease: Mapping[str, Any] | None) -> Heartbeat | None:
    """The heartbeat of the application's current submission (one sent after it was
    submitted), None when there is none."""
    beat = heartbeat_of(lease)
    if app is None or beat is None:
        return None
    submitted = time_of((app.get("status") or {}).get("lastSubmissionAttemptTime"))
    if submitted is not None and beat.time < submitted:
        return None
    return beat


def breaker_condition(
    app: Mapping[str, Any] | None, lease: Mapping[str, Any] | None
) -> ConditionState | None:
    """``BreakerClosed`` from the breaker's report in the current submission's heartbeat (None
    when there is none): True while closed; False while open, saying since when, why and when it
    probes, and while half-open."""
    beat = current_beat(app, lease)
    report = beat.breaker if beat is not None else None
    if report is None:
        return None
    opened = f"opened {report['opens']} time{'s' if report['opens'] != 1 else ''} in this run"
    if report["state"] == CLOSED:
        last = f"; it last opened because {report['reason']} ({opened})" if report["opens"] else ""
        return ConditionState("True", Reason.BREAKER_CLOSED, "the breaker is closed" + last)
    if report["state"] == HALF_OPEN:
        return ConditionState(
            "False",
            Reason.BREAKER_HALF_OPEN,
            f"the breaker is half-open since {report['since']}: a few messages probe the processor's "
            f"downstream; it opened because {report['reason']} ({opened})",
        )
    return ConditionState(
        "False",
        Reason.BREAKER_OPEN,
        f"the breaker opened at {report['since']} because {report['reason']}: the engine reads no new "
        f"source message and holds its retries until it probes at {report['probeAt']} ({opened})",
    )


def engine_stalled(
    app: Mapping[str, Any], lease: Mapping[str, Any] | None, *, bound: float
) -> ConditionState | None:
    """JobRunning for a RUNNING application whose driver reports that its query made no progress
    for longer than ``bound`` seconds (dead, or stuck in a micro-batch), else None. Only a
    heartbeat of the current submission counts (one sent after it was submitted): a driver
    that never reported is not judged."""
    state, _, _ = application_state(app)
    beat = heartbeat_of(lease)
    submitted = time_of((app.get("status") or {}).get("lastSubmissionAttemptTime"))
    if state != AppState.RUNNING or beat is None or (submitted is not None and beat.time < submitted):
        return None
    idle = (beat.time - beat.last_progress).total_seconds()
    if idle <= bound:
        return None
    query = "active" if beat.query_active else "not active"
    return ConditionState(
        "False",
        Reason.ENGINE_STALLED,
        f"the driver reports no progress of its query ({query}) since "
        f"{beat.last_progress.strftime('%Y-%m-%dT%H:%M:%SZ')}, {idle:.0f}s before its heartbeat at "
        f"{beat.time.strftime('%Y-%m-%dT%H:%M:%SZ')} (bound {bound:.0f}s): the Spark application is "
        "resubmitted and resumes from its checkpoint",
    )


#: Application states in which a driver is on its way but not running yet. No state at all is
#: the spark-operator's silence, which ``unnoticed`` reports (NotPickedUp).
_WAITING: Final = frozenset({AppState.SUBMITTED, AppState.PENDING_RERUN})


def driver_pending(
    app: Mapping[str, Any], pod: Mapping[str, Any] | None, *, now: datetime.datetime, bound: float
) -> ConditionState | None:
    """JobRunning for an application stuck in submission (SUBMITTED, PENDING_RERUN) longer than
    ``bound`` seconds since its last submission (else its creation), naming why its driver pod
    waits (ImagePullBackOff, Unschedulable, ...); else None."""
    state, _, _ = application_state(app)
    if state not in _WAITING:
        return None
    status, metadata = app.get("status") or {}, app.get("metadata") or {}
    since = time_of(status.get("lastSubmissionAttemptTime")) or time_of(metadata.get("creationTimestamp"))
    if since is None or (now - since).total_seconds() <= bound:
        return None
    pod_name = (status.get("driverInfo") or {}).get("podName")
    if pod is None:
        why = f"driver pod {pod_name} does not exist" if pod_name else "no driver pod yet"
    else:
        why = f"driver pod {pod_name}: {pod_waiting_reason(pod)}"
    return ConditionState(
        "False",
        Reason.DRIVER_PENDING,
        f"the Spark application is in state {state} since "
        f"{since.strftime('%Y-%m-%dT%H:%M:%SZ')}, more than {bound:.0f}s: {why}",
    )


def pod_waiting_reason(pod: Mapping[str, Any]) -> str:
    """Why a pod is not running: a container's waiting reason and message, else an unmet pod
    condition (Unschedulable), else its phase."""
    status = pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
            message = waiting.get("message")
            return f"container {container.get('name')} is waiting: {waiting['reason']}" + (
                f": {message}" if message else ""
            )
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("reason"):
            message = condition.get("message")
            return f"{condition.get('type')} is False: {condition['reason']}" + (
                f": {message}" if message else ""
            )
    return f"phase {status.get('phase') or 'unknown'}"
