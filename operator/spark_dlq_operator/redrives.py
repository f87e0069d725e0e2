"""Running ``DeadLetterRedrive`` objects: one SparkApplication each, one at a time per policy.

A redrive runs once, like a Kubernetes Job: Pending until its policy exists and no other
redrive of that policy runs, then Running while its SparkApplication does, then Succeeded,
Failed or Cancelled for good (``spec.suspend`` or deleting it cancels; the SparkApplication and
the ConfigMap belong to the redrive and go with it). The counts come from the driver's final
status, its termination message, which the kubelet keeps in the driver pod's status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dlq_engine.model import PolicyError
from dlq_engine.model.redrive import (
    EXPIRED_REASON,
    REDRIVE_KIND,
    DeadLetterRedrive,
    parse_redrive,
    policy_problem,
)
from spark_dlq_operator import redrive_render as rr
from spark_dlq_operator.kubeapi import (
    CONFIG_MAPS,
    PODS,
    POLICIES,
    REDRIVES,
    SPARK_APPLICATIONS,
    ApiError,
)
from spark_dlq_operator.policies.services import Services, now
from spark_dlq_operator.reasons import RedrivePhase, RedriveReason

logger = logging.getLogger(__name__)

#: Seconds before a Pending redrive looks again (its policy missing, or another one running).
PENDING_RECHECK = 15.0


async def reconcile_redrive(services: Services, body: Mapping[str, Any]) -> float | None:
    """Move a redrive along; the seconds after which to look again, or None (events will)."""
    owner = rr.owner(body)
    async with services.lock(owner.uid):
        return await _reconcile(services, body)


async def _reconcile(services: Services, body: Mapping[str, Any]) -> float | None:
    api = services.api
    owner = rr.owner(body)
    status = body.get("status") or {}
    if status.get("phase") in rr.FINAL_PHASES:
        return None
    try:
        redrive = parse_redrive(dict(body))
    except PolicyError as error:
        # Nothing runs for an invalid redrive: one that ran before the model refused its spec
        # (a filter outside the language, after an upgrade) is stopped.
        app_name = rr.application_name(owner.name)
        app = await api.get(SPARK_APPLICATIONS, owner.namespace, app_name)
        references = ((app or {}).get("metadata") or {}).get("ownerReferences") or []
        if any(ref.get("uid") == owner.uid for ref in references):
            await api.delete(SPARK_APPLICATIONS, owner.namespace, app_name)
        await _write(
            services,
            body,
            RedrivePhase.FAILED,
            RedriveReason.INVALID_SPEC,
            "; ".join(str(i) for i in error.issues),
        )
        return None
    name = rr.application_name(redrive.name)
    app = await api.get(SPARK_APPLICATIONS, redrive.namespace, name)
    if redrive.suspend:
        if app is not None:
            await api.delete(SPARK_APPLICATIONS, redrive.namespace, name)
        await _write(
            services,
            body,
            RedrivePhase.CANCELLED,
            RedriveReason.SUSPENDED,
            "spec.suspend is true: cancelled; its progress is kept",
        )
        await services.events.info(owner, "RedriveCancelled", f"spec.suspend is true: deleted {name}")
        return None
    if app is None:
        return await _start(services, body, redrive, name)
    phase, reason, message = rr.phase_of(app)
    driver = None
    if phase in rr.FINAL_PHASES:
        pod_name = ((app.get("status") or {}).get("driverInfo") or {}).get("podName")
        pod = await api.get(PODS, redrive.namespace, pod_name) if pod_name else None
        driver = rr.termination_status(pod)
        if driver is not None and driver.get("state") == "Failed":
            message = f"{message}: {driver.get('message', '')}"
            if driver.get("reason") == EXPIRED_REASON:  # spec.failOnGaps
                reason, message = EXPIRED_REASON, str(driver.get("message", ""))
        if driver is not None and driver.get("state") == "Cancelled":
            phase, reason, message = (
                RedrivePhase.CANCELLED,
                RedriveReason.STOPPED,
                "the redrive's driver was stopped",
            )
    await _write(services, body, phase, reason, message, driver=driver, app=name)
    if phase in rr.FINAL_PHASES and status.get("phase") not in rr.FINAL_PHASES:
        summary = ", ".join(
            f"{k}={driver[k]}"
            for k in ("matched", "redriven", "expired")
            if driver and driver.get(k) is not None
        )
        post = services.events.info if phase == RedrivePhase.SUCCEEDED else services.events.warn
        await post(owner, f"Redrive{phase}", f"{message}" + (f" ({summary})" if summary else ""))
    return None


async def _start(
    services: Services, body: Mapping[str, Any], redrive: DeadLetterRedrive, app_name: str
) -> float | None:
    api = services.api
    policy_name = redrive.policy
    owner = rr.owner(body)
    policy_body = await api.get(POLICIES, redrive.namespace, policy_name)
    if policy_body is None:
        await _write(
            services,
            body,
            RedrivePhase.PENDING,
            RedriveReason.POLICY_NOT_FOUND,
            f"DeadLetterPolicy {policy_name} does not exist in namespace {redrive.namespace}",
        )
        return PENDING_RECHECK
    try:
        # The redrive runs as its policy does: its class's image, pods' fit and storage.
        governed = await services.classes.govern(policy_body)
    except PolicyError as error:
        await _write(
            services,
            body,
            RedrivePhase.PENDING,
            RedriveReason.POLICY_INVALID,
            f"DeadLetterPolicy {policy_name} is invalid or refused by its class: {error}",
        )
        return PENDING_RECHECK
    policy = governed.policy
    problem = policy_problem(redrive, policy)
    if problem is not None:
        await _write(
            services,
            body,
            RedrivePhase.FAILED,
            RedriveReason.BROKER_NOT_SUPPORTED,
            f"DeadLetterPolicy {policy_name}: {problem}",
        )
        return None
    running = [
        other["metadata"]["name"]
        for other in await api.list(REDRIVES, redrive.namespace)
        if (other.get("spec") or {}).get("policyRef", {}).get("name") == policy_name
        and other["metadata"].get("uid") != owner.uid
        and (other.get("status") or {}).get("phase") == RedrivePhase.RUNNING
    ]
    if running:
        await _write(
            services,
            body,
            RedrivePhase.PENDING,
            RedriveReason.ANOTHER_REDRIVE_RUNNING,
            f"redrive {running[0]} of policy {policy_name} is running: one at a time per policy",
        )
        return PENDING_RECHECK
    await api.create(CONFIG_MAPS, rr.config_map(redrive, owner=owner))
    try:
        await api.create(
            SPARK_APPLICATIONS,
            rr.spark_application(redrive, policy, config=services.config, owner=owner, fit=governed.fit),
        )
    except ApiError as error:
        if error.status not in (400, 403, 422):
            raise
        await _write(
            services,
            body,
            RedrivePhase.FAILED,
            RedriveReason.SPARK_APPLICATION_REFUSED,
            f"SparkApplication {app_name} was refused: {error}",
        )
        return None
    await _write(
        services,
        body,
        RedrivePhase.RUNNING,
        RedriveReason.SUBMITTED,
        f"SparkApplication {app_name} created",
        app=app_name,
    )
    await services.events.info(owner, "RedriveStarted", f"created SparkApplication {app_name}")
    return None


async def _write(
    services: Services,
    body: Mapping[str, Any],
    phase: str,
    reason: str,
    message: str,
    *,
    driver: Mapping[str, Any] | None = None,
    app: str | None = None,
) -> None:
    metadata = body["metadata"]
    current = await services.api.get(REDRIVES, metadata["namespace"], metadata["name"])
    if current is None or current["metadata"].get("uid") != metadata.get("uid"):
        return
    old = current.get("status") or {}
    new = rr.next_status(
        old,
        generation=int(metadata.get("generation") or 0),
        phase=phase,
        reason=reason,
        message=message,
        driver=driver,
        now=now(),
    )
    if app is not None:
        new["sparkApplication"] = app
    if new == old:
        return
    patch = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]}, "status": new}
    try:
        await services.api.patch(
            REDRIVES, metadata["namespace"], metadata["name"], patch, subresource="status"
        )
    except ApiError as error:
        if error.status not in (404, 409):
            raise
        logger.info(
            "status of redrive %s/%s changed meanwhile: %s", metadata["namespace"], metadata["name"], error
        )


def redrive_of(app: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the redrive a SparkApplication belongs to, if it does."""
    metadata = app.get("metadata") or {}
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == REDRIVE_KIND and ref.get("controller"):
            return str(metadata.get("namespace")), str(ref.get("name"))
    return None


async def application_changed(services: Services, app: Mapping[str, Any]) -> None:
    """A redrive's SparkApplication moved: bring its redrive along."""
    found = redrive_of(app)
    if found is None:
        return
    body = await services.api.get(REDRIVES, *found)
    if body is not None:
        await reconcile_redrive(services, body)
