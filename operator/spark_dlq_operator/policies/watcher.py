"""The SparkApplication watcher: each event of an application the operator owns is mapped onto
its policy's JobRunning, once per change of state, and what must happen later is scheduled: the
operator's own resubmission of a failed application (the spark-operator's wait has no cap), the
"not picked up" hint for an application left without a state.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from dlq_engine.model.heartbeat import time_of
from spark_dlq_operator import naming
from spark_dlq_operator.kubeapi import SPARK_APPLICATIONS, ApiError
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.application_state import (
    AppState,
    application_state,
    job_condition,
    policy_owner,
    resubmission,
    resubmit_due,
    unnoticed,
    unwatched,
)
from spark_dlq_operator.policies.services import Services
from spark_dlq_operator.policies.status import ConditionState, Observation
from spark_dlq_operator.policies.status_writer import write_status
from spark_dlq_operator.reasons import Reason

logger = logging.getLogger(__name__)


def job_state(services: Services, app: Mapping[str, Any]) -> tuple[ConditionState, tuple[str, ...]]:
    """The JobRunning a SparkApplication stands for now, and what it was computed from (the
    watcher maps it again only when that changes): its state, else the hint that the
    spark-operator has not picked it up (declared not to watch its namespace, or silent)."""
    condition = job_condition(app)
    state = application_state(app)
    if not state[0]:
        metadata = app.get("metadata") or {}
        config = services.config
        hint = unwatched(str(metadata.get("namespace")), config.spark_job_namespaces) or unnoticed(
            app, now=datetime.datetime.now(datetime.UTC), timeout=config.spark_operator_timeout
        )
        condition = hint or condition
    return condition, (*state, condition.reason)


async def update_job_status(services: Services, app: Mapping[str, Any]) -> None:
    """Map a SparkApplication's state onto its policy's JobRunning (and so Ready and phase),
    once per change of state (a resubmission is a change: its submission id is new), and see
    to what must happen later: the operator's own resubmission when the spark-operator's wait
    would pass the cap, the "not picked up" hint when a new application stays without state."""
    metadata = app.get("metadata") or {}
    key = (str(metadata.get("namespace")), str(metadata.get("name")))
    owner = policy_owner(app)
    if owner is None:
        return
    await _follow_up(services, app, owner=owner)
    condition, state = job_state(services, app)
    if services.job_states.get(key) == state:
        return

    def observe(old: Mapping[str, Any]) -> Observation:
        current: Mapping[str, Any] = next(
            (c for c in old.get("conditions") or [] if c.get("type") == "JobRunning"), {}
        )
        if current.get("reason") == Reason.SUSPENDED:  # the application is on its way out
            return Observation()
        return Observation(job=condition)

    async with services.lock(owner.uid):
        if services.job_states.get(key) == state:  # a reconcile wrote it while we waited
            return
        await write_status(services, owner, observe)
        services.job_states[key] = state


async def _follow_up(services: Services, app: Mapping[str, Any], *, owner: Owner) -> None:
    """Resubmit a failed application whose next submission the spark-operator would put off past
    the cap, or check again when that is due; check a state-less new application again when
    the spark-operator's silence would become a hint."""
    config = services.config
    now = datetime.datetime.now(datetime.UTC)
    due = resubmit_due(app, cap=config.restart_backoff_cap, now=now)
    if due is not None and due <= 0:
        await resubmit(services, app, owner=owner)
        return
    if due is None and not application_state(app)[0]:
        created = time_of((app.get("metadata") or {}).get("creationTimestamp"))
        if created is not None:
            due = config.spark_operator_timeout - (now - created).total_seconds()
            due = due if due > 0 else None
    if due is not None:
        logger.info(
            "SparkApplication %s/%s (%s): looked at again in %.1fs",
            (app.get("metadata") or {}).get("namespace"),
            (app.get("metadata") or {}).get("name"),
            application_state(app)[0] or "no state",
            due + 0.5,
        )
        services.check_later(app, due + 0.5, lambda fresh: update_job_status(services, fresh))


async def resubmit_once(services: Services, app: Mapping[str, Any]) -> bool:
    """Resubmit ``app`` unless its submission was resubmitted already; True when this call did.

    The submission is claimed before the patch is sent: the patch's own watch event, a timer or
    a resync round that sees the same submission while the patch is on its way must not
    resubmit it a second time. A refused patch gives the claim back."""
    metadata = app.get("metadata") or {}
    key = (str(metadata.get("namespace")), str(metadata.get("name")))
    submission = application_state(app)[1]
    previous = services.resubmitted.get(key)
    if previous == submission:  # done; the spark-operator is on it
        logger.info("SparkApplication %s/%s: submission %s was resubmitted already", *key, submission)
        return False
    services.resubmitted[key] = submission
    patch = {**resubmission(app), "metadata": {"resourceVersion": metadata.get("resourceVersion")}}
    try:
        await services.api.patch(SPARK_APPLICATIONS, *key, patch)
    except BaseException as error:
        if previous is None:
            services.resubmitted.pop(key, None)
        else:
            services.resubmitted[key] = previous
        if isinstance(error, ApiError) and error.status in (404, 409):  # gone, or moved on
            logger.info("SparkApplication %s/%s: not resubmitted: %s", *key, error)
            return False
        raise
    logger.info(
        "SparkApplication %s/%s: submission %s resubmitted (%s)",
        *key,
        submission,
        patch["spec"]["driver"]["annotations"],
    )
    return True


async def resubmit(services: Services, app: Mapping[str, Any], *, owner: Owner) -> None:
    metadata, status = app.get("metadata") or {}, app.get("status") or {}
    if not await resubmit_once(services, app):
        return
    state = application_state(app)[0]
    if state == AppState.FAILED:
        count = int(resubmission(app)["spec"]["driver"]["annotations"][naming.RESUBMIT_ANNOTATION])
        why = (
            f"SparkApplication {metadata['name']} FAILED, which the spark-operator does not retry: "
            f"resubmitted (resubmission {count}; the next waits twice as long, at most "
            f"{services.config.restart_backoff_cap:.0f}s)"
        )
    else:
        why = (
            f"SparkApplication {metadata['name']} failed ({state}) after "
            f"{status.get('submissionAttempts')} submissions over its life, and the spark-operator "
            f"would wait longer than {services.config.restart_backoff_cap:.0f}s to submit it again: "
            "resubmitted now"
        )
    await services.events.info(owner, "SparkApplicationResubmitted", why)
