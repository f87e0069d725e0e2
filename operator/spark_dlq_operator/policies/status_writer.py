"""Writing a policy's status: a read-modify-write through the status subresource guarded by
``resourceVersion``, so the reconcile, the watcher and the supervisor never overwrite each other's
conditions; and the events the change announces (``announcements``).

``report_invalid`` and ``report_refused`` write the status of a policy the model or its class
refuses (phase Invalid; nothing is created for it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dlq_engine.model import Issue, PolicyError
from spark_dlq_operator import metrics
from spark_dlq_operator.kubeapi import POLICIES, ApiError
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.announcements import announcements
from spark_dlq_operator.policies.services import Services, now
from spark_dlq_operator.policies.status import Observation, next_status
from spark_dlq_operator.policy_class import ClassRefusal
from spark_dlq_operator.reasons import Reason


async def write_status(
    services: Services,
    owner: Owner,
    observe: Callable[[Mapping[str, Any]], Observation],
    *,
    known: Mapping[str, Any] | None = None,
    trust: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Read the policy, apply ``observe(old status)``, write the result through the status
    subresource unless nothing changed; ``(old, new)``, or None when the policy is gone.

    ``known`` is the policy as the caller last saw it: the first attempt writes on top of it
    without a read (the ``resourceVersion`` precondition catches a stale one); "no change" is
    believed only after a fresh read, or when the caller ``trust``s ``known`` as one."""
    for _ in range(10):
        current: Mapping[str, Any] | None = known
        fresh = current is None or trust
        known = None
        if current is None:
            current = await services.api.get(POLICIES, owner.namespace, owner.name)
        if current is None or current["metadata"].get("uid") != owner.uid:
            metrics.policy_gone(owner.namespace, owner.name)
            return None
        old = dict(current.get("status") or {})
        new = next_status(old, observe(old), now=now())
        if new == old:
            if fresh:
                metrics.status_written(owner.namespace, owner.name, old, new)
                return old, new
            continue
        # A merge patch keeps what it does not name: a field the new status drops is named null.
        gone = dict.fromkeys(old.keys() - new.keys())
        patch = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "status": {**gone, **new},
        }
        try:
            await services.api.patch(POLICIES, owner.namespace, owner.name, patch, subresource="status")
        except ApiError as error:
            if error.status == 409:
                continue
            if error.status == 404:
                metrics.policy_gone(owner.namespace, owner.name)
                return None
            raise
        metrics.status_written(owner.namespace, owner.name, old, new)
        await _announce(services, owner, old, new)
        return old, new
    raise ApiError(409, "Conflict", f"status of {owner.namespace}/{owner.name} kept changing")


async def _announce(services: Services, owner: Owner, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Post the events the change announces (``announcements``: one table by condition type)."""
    for event in announcements(old, new):
        await services.events.post(owner, event.type, event.reason, event.message)


async def report_invalid(
    services: Services,
    owner: Owner,
    *,
    generation: int,
    issues: Sequence[Issue],
    trigger: str,
    reason: Reason = Reason.INVALID_SPEC,
) -> None:
    """Phase Invalid and Ready False (``reason``: InvalidSpec, or why the policy's class refuses
    it) naming every problem. Nothing is created for it; a running job is left running with its
    last valid configuration."""
    with metrics.observe(trigger) as outcome:
        outcome.result, outcome.reason = "invalid", reason
        lines = [str(issue) for issue in issues]
        async with services.lock(owner.uid):
            await write_status(
                services,
                owner,
                lambda _: Observation(generation=generation, invalid=lines, invalid_reason=reason),
            )


async def report_refused(
    services: Services, owner: Owner, *, generation: int, error: PolicyError, trigger: str
) -> None:
    """``report_invalid`` for a policy ``governance.govern`` (or the model) refused."""
    reason = error.reason if isinstance(error, ClassRefusal) else Reason.INVALID_SPEC
    await report_invalid(
        services, owner, generation=generation, issues=error.issues, trigger=trigger, reason=reason
    )
