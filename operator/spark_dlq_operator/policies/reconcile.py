"""The reconcile: bring one policy's topics, ConfigMap and SparkApplication to what it says.

One idempotent, level-based function, called by kopf on create, update and resume, by the
periodic resync (drift repair), and when an owned SparkApplication is deleted. Steps, in order:
topics (``provisioning``) -> ConfigMap ``P-policy`` -> the Spark pods' identity -> SparkApplication
``P`` (``application``) -> status (``status_writer``). What it wants is rendered once, with its
configuration hash (``render.desired``). Nothing here knows kopf: problems are domain exceptions
(``services.TopicsNotReady``) that the handlers turn into kopf's retry errors.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dlq_engine.model import DeadLetterPolicy, PolicyError
from spark_dlq_operator import metrics, naming, render
from spark_dlq_operator.governance import PodFit
from spark_dlq_operator.kubeapi import CONFIG_MAPS, POLICIES
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.application import (
    JobResult,
    ensure_application,
    ensure_config_map,
    ensure_identity,
)
from spark_dlq_operator.policies.application_state import (
    JOB_RESTARTING,
    application_state,
    managed,
    policy_owner,
)
from spark_dlq_operator.policies.provisioning import (
    claim_topics,
    pinned_provisioner_matters,
    provision_topics,
    resolve_provisioner,
)
from spark_dlq_operator.policies.services import Known, Seen, Services, TopicsNotReady
from spark_dlq_operator.policies.status import Observation
from spark_dlq_operator.policies.status_writer import write_status
from spark_dlq_operator.policies.watcher import job_state
from spark_dlq_operator.reasons import STALE_JOB

logger = logging.getLogger(__name__)


async def reconcile(
    services: Services,
    policy: DeadLetterPolicy,
    *,
    owner: Owner,
    generation: int,
    trigger: str,
    fit: PodFit,
    seen: Seen | None = None,
) -> None:
    """Bring the policy's objects to its spec and write its status. ``policy`` and ``fit`` are
    the policy as its class lets it run (``governance.Governed``). Raises TopicsNotReady."""
    async with services.lock(owner.uid):
        if services.ended(owner.uid):
            # Read before its deletion began (a resync's list): its topics may be gone already.
            logger.info("reconcile of %s/%s skipped: it is being deleted", owner.namespace, owner.name)
            return
        with metrics.observe(trigger) as outcome:
            try:
                await _reconcile(services, policy, owner=owner, generation=generation, seen=seen, fit=fit)
            except TopicsNotReady as error:
                outcome.result, outcome.reason = "waiting", error.condition.reason
                raise
            outcome.result = "ok"


def _known_before(
    services: Services, policy: DeadLetterPolicy, seen: Seen | None
) -> tuple[Known | None, Known | None]:
    """What is known of the ConfigMap and the SparkApplication before the reconcile reads them.

    A resync's lists tell both. A policy kopf has just seen created has no objects yet, as a
    rule; the ConfigMap is still read when it may pin the provisioner, the SparkApplication
    when the policy is suspended (deleting needs to know whether there is one)."""
    if seen is None:
        return None, None
    if seen.listed:
        return Known(seen.config_map), Known(seen.application)
    if seen.created:
        config_map = None if pinned_provisioner_matters(services, policy) else Known(None)
        return config_map, None if policy.suspend else Known(None)
    return None, None


async def _reconcile(
    services: Services,
    policy: DeadLetterPolicy,
    *,
    owner: Owner,
    generation: int,
    seen: Seen | None,
    fit: PodFit,
) -> None:
    listed = seen is not None and seen.listed
    want = render.desired(policy, config=services.config, owner=owner, fit=fit)
    if (
        seen is not None
        and listed
        and await _listing_is_stale(services, policy, want, owner=owner, seen=seen)
    ):
        return
    body = seen.policy if seen is not None else await services.api.get(POLICIES, owner.namespace, owner.name)
    if body is None or body["metadata"].get("uid") != owner.uid:
        return
    await claim_topics(services, policy, want, owner=owner, generation=generation, body=body)
    known_config_map, known_application = _known_before(services, policy, seen)
    config_map = (
        known_config_map.obj
        if known_config_map is not None
        else await services.api.get(CONFIG_MAPS, policy.namespace, want.config_map["metadata"]["name"])
    )
    provisioner = await resolve_provisioner(services, policy, config_map) if policy.topics.create else None
    topics, owned = await provision_topics(
        services,
        policy,
        want,
        owner=owner,
        generation=generation,
        provisioner=provisioner,
        status=body.get("status"),
    )
    await ensure_config_map(
        services, render.pin_provisioner(want.config_map, provisioner), owner=owner, current=config_map
    )
    blocked = await ensure_identity(services, policy, owner=owner, seen=seen, fit=fit)
    job = (
        JobResult(blocked)
        if blocked is not None
        else await ensure_application(services, policy, want, owner=owner, known=known_application)
    )
    digest = want.config_hash

    def observe(old: Mapping[str, Any]) -> Observation:
        condition, restarted = job.condition, job.restarted
        old_job = next((c for c in old.get("conditions") or [] if c.get("type") == "JobRunning"), None)
        if condition is None and job.app is not None:
            if old.get("configHash") not in (None, "", digest):
                # A restart whose status write was lost (the operator stopped in between): the
                # application already carries the new hash, the status still the old one.
                condition, restarted = JOB_RESTARTING, True
            elif old_job is None or old_job.get("reason") in STALE_JOB:
                condition = job_state(services, job.app)[0]
        return Observation(
            generation=generation,
            topics=topics,
            job=condition,
            retry_topic=want.retry_topic,
            dead_letter_topic=want.dead_letter_topic,
            broker=want.broker,
            spark_application=want.application_name,
            config_hash=digest,
            restarted=restarted,
            ordering_off=policy.source.ordering != "key",
            breaker_off=policy.retry.breaker is None,
            owned_topics=owned,
        )

    written = await write_status(
        services, owner, observe, known=seen.policy if seen is not None else None, trust=listed
    )
    if written is not None and job.app is not None and job.condition is not None:
        # The JobRunning just written stands for the application's current state: the
        # SparkApplication watcher need not map that same state again (a read and a write).
        services.job_states[(policy.namespace, want.application_name)] = (
            *application_state(job.app),
            job.condition.reason,
        )


async def _listing_is_stale(
    services: Services, policy: DeadLetterPolicy, want: render.Desired, *, owner: Owner, seen: Seen
) -> bool:
    """Whether a resync's listed policy is older than the policy now, when the ConfigMap or the
    SparkApplication would be written from it. The lists are taken one after another and the
    policy may change in between (and kopf apply the change) before this reconcile holds the
    lock; written from the stale policy, they would roll the user's change back until the next
    round. Read only when a write is due (drift is rare); the next round repairs with the new one."""
    config_map, app = seen.config_map, seen.application
    due = config_map is None or config_map.get("data") != want.config_map["data"]
    if policy.suspend:
        due = due or (app is not None and managed(app))
    else:
        annotations = (app or {}).get("metadata", {}).get("annotations") or {}
        account = want.service_account
        due = (
            due
            or app is None
            or annotations.get(naming.CONFIG_HASH_ANNOTATION) != want.config_hash
            or ((app.get("spec") or {}).get("driver") or {}).get("serviceAccount") != account
        )
    if not due:
        return False
    current = await services.api.get(POLICIES, owner.namespace, owner.name)
    listed_version = seen.policy.get("metadata", {}).get("resourceVersion")
    if current is None or current["metadata"].get("resourceVersion") != listed_version:
        logger.info(
            "resync of %s/%s skipped: the policy changed since it was listed", owner.namespace, owner.name
        )
        return True
    return False


async def repair_deleted_application(services: Services, app: Mapping[str, Any]) -> None:
    """Someone deleted a SparkApplication the operator owns: reconcile its policy at once,
    which creates it again unless the policy is suspended, invalid or being deleted."""
    metadata = app.get("metadata") or {}
    services.job_states.pop((str(metadata.get("namespace")), str(metadata.get("name"))), None)
    services.resubmitted.pop((str(metadata.get("namespace")), str(metadata.get("name"))), None)
    owner = policy_owner(app)
    if owner is None:
        return
    body = await services.api.get(POLICIES, owner.namespace, owner.name)
    if body is None or body["metadata"].get("uid") != owner.uid or body["metadata"].get("deletionTimestamp"):
        return
    try:
        governed = await services.classes.govern(body)
    except PolicyError:
        return
    policy = governed.policy
    if policy.suspend:
        return
    await services.events.warn(
        owner,
        "SparkApplicationMissing",
        f"SparkApplication {naming.application_name(policy.name)} was deleted: creating it again",
    )
    try:
        await reconcile(
            services,
            policy,
            owner=owner,
            generation=int(body["metadata"].get("generation", 0)),
            trigger="drift",
            fit=governed.fit,
            seen=Seen(policy=body),
        )
    except TopicsNotReady as error:
        logger.info("policy %s/%s: %s", owner.namespace, owner.name, error)
