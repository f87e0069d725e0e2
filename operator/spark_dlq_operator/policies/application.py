"""Writing what runs a policy's job: its ConfigMap (``policy.yaml``), the Spark pods' identity
(``accounts``) and its SparkApplication, from the objects ``render.desired`` rendered.

The SparkApplication is replaced only when its configuration hash changed (the job restarts
from its checkpoint) or its identity moved, created when missing, and deleted while the policy
is suspended; an application another owner holds is a Conflict, never taken over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlq_engine.model import DeadLetterPolicy
from spark_dlq_operator import accounts, identity, naming, render
from spark_dlq_operator.governance import PodFit
from spark_dlq_operator.kubeapi import CONFIG_MAPS, SPARK_APPLICATIONS, ApiError, Obj
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.application_state import (
    JOB_RESTARTING,
    JOB_SUBMITTED,
    JOB_SUSPENDED,
    managed,
    policy_owner,
    unwatched,
)
from spark_dlq_operator.policies.services import Known, Seen, Services
from spark_dlq_operator.policies.status import ConditionState
from spark_dlq_operator.reasons import Reason


@dataclass(frozen=True, slots=True)
class JobResult:
    """What ensuring the SparkApplication did: the JobRunning to write (None: keep the
    watcher's), the application as it is now, and whether it was restarted."""

    condition: ConditionState | None
    app: Obj | None = None
    restarted: bool = False


async def ensure_config_map(services: Services, desired: Obj, *, owner: Owner, current: Obj | None) -> None:
    name = desired["metadata"]["name"]
    if current is None:
        current, created = await services.api.create(CONFIG_MAPS, desired)
        if created:
            await services.events.info(
                owner, "ConfigMapCreated", f"created ConfigMap {name} with the engine's policy"
            )
            return
    patch: dict[str, Any] = {}
    if current.get("data") != desired["data"]:
        patch["data"] = desired["data"]
    metadata = current.get("metadata") or {}
    wanted_meta: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        wanted = desired["metadata"].get(key) or {}
        if any((metadata.get(key) or {}).get(k) != v for k, v in wanted.items()):
            wanted_meta[key] = wanted
    if metadata.get("ownerReferences") != desired["metadata"]["ownerReferences"]:
        wanted_meta["ownerReferences"] = desired["metadata"]["ownerReferences"]
    if wanted_meta:
        patch["metadata"] = wanted_meta
    if patch:
        await services.api.patch(CONFIG_MAPS, owner.namespace, name, patch)
        await services.events.info(
            owner, "ConfigMapUpdated", f"updated ConfigMap {desired['metadata']['name']}"
        )


async def ensure_identity(
    services: Services,
    policy: DeadLetterPolicy,
    *,
    owner: Owner,
    seen: Seen | None,
    fit: PodFit,
) -> ConditionState | None:
    """The Spark pods' service account, Lease, Role and RoleBindings (``accounts.ensure``). A
    resync whose lists show the policy's Lease leaves them be: it repairs them when the Lease is
    gone; kopf's events (a change, the operator's start) see to every one of them."""
    if (
        seen is not None
        and seen.listed
        and seen.lease is not None
        and identity.conflict(seen.lease, owner, kind="Lease") is None
    ):
        return None
    return await accounts.ensure(
        services.api,
        services.events,
        policy_name=policy.name,
        owner=owner,
        fit=fit,
        config=services.config,
        created=seen is not None and seen.created,
    )


async def ensure_application(
    services: Services,
    policy: DeadLetterPolicy,
    want: render.Desired,
    *,
    owner: Owner,
    known: Known | None = None,
) -> JobResult:
    api = services.api
    name = want.application_name
    current = known.obj if known is not None else await api.get(SPARK_APPLICATIONS, policy.namespace, name)
    desired = want.application
    if policy.suspend or desired is None:  # desired: rendered for every policy not suspended
        if (
            current is not None
            and managed(current)
            and await api.delete(SPARK_APPLICATIONS, policy.namespace, name)
        ):
            await services.events.info(
                owner,
                "SparkApplicationDeleted",
                f"spec.suspend is true: deleted SparkApplication {name}; the "
                "ConfigMap, the topics and the checkpoint are kept",
            )
        return JobResult(JOB_SUSPENDED)
    submitted = unwatched(policy.namespace, services.config.spark_job_namespaces) or JOB_SUBMITTED
    if current is None:
        try:
            current, created = await api.create(SPARK_APPLICATIONS, desired)
        except ApiError as error:
            if error.status not in (400, 403, 422):
                raise
            return JobResult(_refused(name, error))
        if created:
            await services.events.info(
                owner,
                "SparkApplicationCreated",
                f"created SparkApplication {name} (config hash "
                f"{desired['metadata']['annotations'][naming.CONFIG_HASH_ANNOTATION]})",
            )
            return JobResult(submitted, app=current)
    controller = policy_owner(current)
    if controller is not None and controller.uid != owner.uid:
        return JobResult(
            ConditionState(
                "False",
                Reason.CONFLICT,
                f"SparkApplication {name} belongs to DeadLetterPolicy {controller.name}: rename one of them",
            )
        )
    if not managed(current):
        return JobResult(
            ConditionState(
                "False",
                Reason.CONFLICT,
                f"SparkApplication {name} exists and is not managed by spark-dlq: delete or rename it",
            )
        )
    digest = want.config_hash
    for _ in range(5):
        metadata = current["metadata"]
        old_digest = (metadata.get("annotations") or {}).get(naming.CONFIG_HASH_ANNOTATION)
        owned = any(ref.get("uid") == owner.uid for ref in metadata.get("ownerReferences") or [])
        moved = identity.moved(current, desired)
        if old_digest == digest and owned and moved is None:
            return JobResult(None, app=current)
        body = {k: v for k, v in current.items() if k != "status"}
        body["metadata"] = {
            **metadata,
            "labels": {**(metadata.get("labels") or {}), **desired["metadata"]["labels"]},
            "annotations": {**(metadata.get("annotations") or {}), **desired["metadata"]["annotations"]},
            "ownerReferences": desired["metadata"]["ownerReferences"],
        }
        body["spec"] = desired["spec"]
        try:
            current = await api.replace(SPARK_APPLICATIONS, body)
        except ApiError as error:
            if error.status in (400, 403, 422):
                return JobResult(_refused(name, error))
            if error.status != 409:
                raise
            fresh = await api.get(SPARK_APPLICATIONS, policy.namespace, name)
            if fresh is None:
                current, _ = await api.create(SPARK_APPLICATIONS, desired)
                return JobResult(submitted, app=current)
            current = fresh
            continue
        if old_digest == digest and moved is None:  # adopted, same configuration: nothing restarts
            return JobResult(None, app=current)
        why = (
            moved if old_digest == digest else f"the configuration hash changed from {old_digest} to {digest}"
        )
        await services.events.info(
            owner,
            "SparkApplicationRestarted",
            f"{why}: SparkApplication {name} is resubmitted and resumes from its checkpoint",
        )
        return JobResult(JOB_RESTARTING, app=current, restarted=True)
    raise ApiError(409, "Conflict", f"SparkApplication {policy.namespace}/{name} kept changing")


def _refused(name: str, error: ApiError) -> ConditionState:
    """JobRunning for a SparkApplication the API server (its schema, or the spark-operator's
    validating webhook) refused: nothing runs until the policy changes."""
    return ConditionState(
        "False", Reason.SPARK_APPLICATION_REFUSED, f"SparkApplication {name} was refused: {error}"
    )
