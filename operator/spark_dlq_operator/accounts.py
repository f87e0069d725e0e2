"""The Spark pods' identity written to the cluster: the thin async side of ``identity``.

A policy's service account, Lease, Role and RoleBindings (``identity.manifests``) are written
before its SparkApplication, so its driver pod can be admitted (its service account exists)
and can report its heartbeat from its first second. Each object is created when absent, adopted
or repaired when it drifted (``identity.repair``), and never taken from someone else: an object
of the same name that another policy or nobody of spark-dlq controls stops the policy's job with
JobRunning ``Conflict``, and an object the API server refuses (the operator may not bind the
drivers' ClusterRole, say) with ``IdentityRefused``, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from spark_dlq_operator import identity
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.governance import PodFit
from spark_dlq_operator.kubeapi import (
    LEASES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    ApiError,
    KubeApi,
    ResourceType,
)
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.status import ConditionState
from spark_dlq_operator.reasons import Reason

_TYPES: Final[Mapping[str, ResourceType]] = {
    "ServiceAccount": SERVICE_ACCOUNTS,
    "Lease": LEASES,
    "Role": ROLES,
    "RoleBinding": ROLE_BINDINGS,
}


async def ensure(
    api: KubeApi,
    events: EventRecorder,
    *,
    policy_name: str,
    owner: Owner,
    fit: PodFit,
    config: OperatorConfig,
    created: bool = False,
) -> ConditionState | None:
    """Write the policy's identity objects; None when they are all in place, else the JobRunning
    that says which one is in the way. ``created``: the policy is new, so its objects are
    created without being read first (a create that finds one reads it then)."""
    made: list[str] = []
    desired_objects = identity.manifests(
        policy_name,
        namespace=owner.namespace,
        owner=owner,
        fit=fit,
        config=config,
    )
    for desired in desired_objects:
        kind, name = _TYPES[desired["kind"]], desired["metadata"]["name"]
        what = f"{desired['kind']} {name}"
        try:
            current = None if created else await api.get(kind, owner.namespace, name)
            if current is None:
                current, was_made = await api.create(kind, desired)
                if was_made:
                    made.append(what)
                    continue
            why = identity.conflict(current, owner, kind=desired["kind"]) or identity.rebind(current, desired)
            if why is not None:
                return ConditionState("False", Reason.CONFLICT, why)
            patch = identity.repair(current, desired)
            if patch is not None:
                await api.patch(kind, owner.namespace, name, patch)
        except ApiError as error:
            if error.status not in (400, 403, 422):
                raise
            return ConditionState(
                "False", Reason.IDENTITY_REFUSED, f"{what} for the Spark pods was refused: {error}"
            )
    if made:
        await events.info(owner, "IdentityCreated", f"created {', '.join(made)} for the Spark pods")
    return None
