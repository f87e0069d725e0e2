"""Deleting a policy: the topics the operator created for it (``status.ownedTopics``) that no other
policy uses are deleted through its provisioner when ``spec.topics.deleteWithPolicy`` asks; the
others are kept and named in a Warning event. A deletion that keeps failing gives up after
``finalizer_timeout``, so a policy's deletion never blocks forever.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from dlq_engine.model import DeadLetterPolicy
from spark_dlq_operator import naming, topic_ownership
from spark_dlq_operator.kubeapi import CONFIG_MAPS, ApiError
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.provisioning import resolve_provisioner
from spark_dlq_operator.policies.services import CleanupPending, Services
from spark_dlq_operator.topics import BrokerUnavailable, StrimziNotServed

logger = logging.getLogger(__name__)


def needs_cleanup(spec: Mapping[str, Any]) -> bool:
    """Whether deleting the policy has work to do (and so a finalizer): only when the operator
    provisions the topics and ``deleteWithPolicy`` asks for them to go."""
    topics = spec.get("topics") or {}
    return bool(topics.get("create", True) and topics.get("deleteWithPolicy", False))


async def clean_up(
    services: Services,
    policy: DeadLetterPolicy,
    *,
    owner: Owner,
    deleting_since: datetime.datetime,
    status: Mapping[str, Any] | None = None,
) -> None:
    """Delete the topics the operator created for the policy (its ``status``'s record) that no
    other policy uses; the others are kept, named in a Warning event ``TopicsKept`` with why
    (``topic_ownership.deletion``). Raises CleanupPending while it may still succeed; after
    ``finalizer_timeout`` it gives up with a Warning event, so deletion never blocks forever."""
    config = services.config
    key = f"{owner.namespace}/{owner.name}"
    plan = topic_ownership.deletion(
        policy, status, used_by=lambda broker, name: services.claims.user_of((broker, name), besides=key)
    )
    elapsed = (datetime.datetime.now(datetime.UTC) - deleting_since).total_seconds()
    names = " and ".join(repr(name) for name in plan.delete)
    if plan.delete and elapsed >= config.finalizer_timeout:
        await services.events.warn(
            owner,
            "CleanupAbandoned",
            f"gave up deleting topics {names} after {config.finalizer_timeout:.0f}s; "
            "they are kept and must be deleted by hand",
        )
        await _report_kept(services, owner, plan)
        return
    deleted: list[str] = []
    if plan.delete:
        try:
            config_map = await services.api.get(
                CONFIG_MAPS, policy.namespace, naming.config_map_name(policy.name)
            )
            provisioner = await resolve_provisioner(services, policy, config_map)
            deleted = await services.provisioners.of(policy, provisioner).delete(
                policy, plan.delete, owner=owner
            )
        except (BrokerUnavailable, StrimziNotServed, ApiError, OSError) as error:
            delay = max(1.0, min(config.broker_retry_delay, config.finalizer_timeout - elapsed))
            raise CleanupPending(f"deleting topics {names}: {error}", delay=delay) from None
        message = (
            f"deleted topics {deleted} with the policy (spec.topics.deleteWithPolicy)"
            if deleted
            else f"topics {names} were already gone"
        )
        await services.events.info(owner, "TopicsDeleted", message)
    await _report_kept(services, owner, plan)


async def _report_kept(services: Services, owner: Owner, plan: topic_ownership.Deletion) -> None:
    if plan.kept:
        message = plan.kept_message()
        logger.warning("policy %s/%s deleted: %s", owner.namespace, owner.name, message)
        await services.events.warn(owner, "TopicsKept", message)
