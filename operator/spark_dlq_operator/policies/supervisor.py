"""The supervisor: once per resync round, for each policy's application as listed, what the
spark-operator does not catch (``supervision``): a failed application due for resubmission, a
driver whose heartbeat reports no progress (resubmitted), an application stuck without a running
driver, and the driver's ordering and breaker reports written to the status.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from spark_dlq_operator.kubeapi import PODS, Obj
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.application_state import managed, policy_owner, resubmit_due
from spark_dlq_operator.policies.services import Services
from spark_dlq_operator.policies.status import ConditionState, Observation
from spark_dlq_operator.policies.status_writer import write_status
from spark_dlq_operator.policies.supervision import (
    breaker_condition,
    driver_pending,
    engine_stalled,
    ordering_status,
)
from spark_dlq_operator.policies.watcher import resubmit, resubmit_once
from spark_dlq_operator.reasons import DECIDED_JOB, RestartReason


async def supervise(
    services: Services,
    *,
    owner: Owner,
    app: Obj | None,
    lease: Obj | None,
    policy: Mapping[str, Any] | None = None,
) -> None:
    """What the spark-operator does not catch, looked at once per resync round for a policy's
    application (as listed in that round), and what the driver reports: ``status.ordering``
    from its heartbeat (``policy``: the policy as listed, to skip a write that changes nothing);
    a failed application due for resubmission (as its
    watcher would have done), a RUNNING driver whose heartbeat (on ``lease``)
    reports no progress for ``stall_timeout`` is resubmitted, with JobRunning EngineStalled and
    a Warning event; an application stuck without a running driver for ``pending_timeout`` gets
    JobRunning DriverPending naming its driver pod's reason, and a Warning event."""
    if app is None or not managed(app):
        return
    controller = policy_owner(app)
    if controller is None or controller.uid != owner.uid:
        return
    status = (policy or {}).get("status") or {}
    ordering = ordering_status(app, lease)
    if ordering == status.get("ordering"):
        ordering = None
    breaker = breaker_condition(app, lease)
    if breaker is not None and _shown(status, "BreakerClosed", breaker):
        breaker = None
    if ordering is not None or breaker is not None:
        async with services.lock(owner.uid):
            await write_status(
                services, owner, lambda _: Observation(ordering=ordering, breaker=breaker), known=policy
            )
    config = services.config
    metadata = app.get("metadata") or {}
    key = (str(metadata.get("namespace")), str(metadata.get("name")))
    now = datetime.datetime.now(datetime.UTC)
    due = resubmit_due(app, cap=config.restart_backoff_cap, now=now)
    if due is not None and due <= 0:
        # The application's own events and timers resubmit it on time; this round is the net
        # under a missed one (the resourceVersion guards against a stale listing).
        await resubmit(services, app, owner=owner)
        return
    stalled = engine_stalled(app, lease, bound=config.stall_timeout) if config.stall_timeout > 0 else None
    if stalled is not None:
        if not await resubmit_once(services, app):  # resubmitted already, or moved on: next round
            return
        async with services.lock(owner.uid):
            await write_status(
                services,
                owner,
                lambda _: Observation(
                    job=stalled, restarted=True, restart_reason=RestartReason.ENGINE_STALLED
                ),
            )
        return
    if driver_pending(app, None, now=now, bound=config.pending_timeout) is None:
        return
    pod_name = ((app.get("status") or {}).get("driverInfo") or {}).get("podName")
    pod = await services.api.get(PODS, key[0], str(pod_name)) if pod_name else None
    pending = driver_pending(app, pod, now=now, bound=config.pending_timeout)
    if pending is None:
        return

    def observe(old: Mapping[str, Any]) -> Observation:
        current: Mapping[str, Any] = next(
            (c for c in old.get("conditions") or [] if c.get("type") == "JobRunning"), {}
        )
        if current.get("reason") in DECIDED_JOB:
            return Observation()
        return Observation(job=pending)

    async with services.lock(owner.uid):
        await write_status(services, owner, observe)


def _shown(status: Mapping[str, Any], kind: str, state: ConditionState) -> bool:
    """Whether ``status`` already has condition ``kind`` as ``state`` says."""
    shown: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})
    return (shown.get("status"), shown.get("reason"), shown.get("message")) == (
        state.status,
        state.reason,
        state.message,
    )
