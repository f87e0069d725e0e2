"""The policy's topics in a reconcile: the provisioner they use (the policy's choice, the
operator's, the one pinned on the ConfigMap, else Strimzi when served), the claim on its retry and
dead-letter topics, and TopicsReady from the provisioner's report.

A problem is written to the status at once and raised as ``TopicsNotReady`` (with its retry
delay); the topics the operator created are recorded in ``status.ownedTopics`` before anything
else can fail (``topic_ownership``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dlq_engine.model import DeadLetterPolicy
from spark_dlq_operator import naming, render, topic_claims, topic_ownership
from spark_dlq_operator.kubeapi import ApiError, Obj
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.services import Services, TopicsNotReady
from spark_dlq_operator.policies.status import ConditionState, Observation
from spark_dlq_operator.policies.status_writer import write_status
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topics import BrokerUnavailable, PulsarProvisioner


def pinned_provisioner_matters(services: Services, policy: DeadLetterPolicy) -> bool:
    """Whether the provisioner pinned on the ConfigMap could decide this policy's provisioner."""
    return (
        policy.topics.create
        and not policy.is_pulsar
        and policy.topics.provisioner == "auto"
        and services.config.provisioner == "auto"
    )


async def resolve_provisioner(services: Services, policy: DeadLetterPolicy, config_map: Obj | None) -> str:
    """pulsar for a Pulsar policy (its admin REST API is the one way). Else admin or strimzi:
    the policy's choice, else the operator's, else the one pinned on the ConfigMap at first
    provisioning, else strimzi when its KafkaTopic CRD is served."""
    if policy.is_pulsar:
        return PulsarProvisioner.name
    choice: str = policy.topics.provisioner
    if choice == "auto":
        choice = services.config.provisioner
    if choice != "auto":
        return choice
    annotations = (config_map or {}).get("metadata", {}).get("annotations") or {}
    pinned = annotations.get(naming.PROVISIONER_ANNOTATION)
    if pinned in ("admin", "strimzi"):
        return str(pinned)
    return "strimzi" if await services.strimzi.served() else "admin"


async def claim_topics(
    services: Services,
    policy: DeadLetterPolicy,
    want: render.Desired,
    *,
    owner: Owner,
    generation: int,
    body: Mapping[str, Any],
) -> None:
    """Refuse the policy (TopicInUse; nothing is created for it) when another policy keeps
    one of its retry and dead-letter topics (``topic_claims``)."""
    refused = services.claims.claim(topic_claims.claim_of(policy, body))
    if refused is None:
        return
    condition = ConditionState("False", Reason.TOPIC_IN_USE, refused.message)
    await _write_topics_problem(services, want, owner=owner, generation=generation, condition=condition)
    raise TopicsNotReady(condition, delay=services.config.topics_retry_delay, backoff=True)


async def provision_topics(
    services: Services,
    policy: DeadLetterPolicy,
    want: render.Desired,
    *,
    owner: Owner,
    generation: int,
    provisioner: str | None,
    status: Mapping[str, Any] | None,
) -> tuple[ConditionState, list[topic_ownership.OwnedTopic]]:
    """Provision the topics; TopicsReady, and the ``status.ownedTopics`` entries this found
    (written at once, before anything else can fail: ``topic_ownership``)."""
    config = services.config
    if provisioner is None:
        return ConditionState(
            "True",
            Reason.NOT_MANAGED,
            "spec.topics.create is false: the operator does not provision the topics",
        ), []
    owned = topic_ownership.owned_here(policy, status)
    try:
        report = await services.provisioners.of(policy, provisioner).ensure(policy, owner=owner, owned=owned)
    except BrokerUnavailable as error:
        condition = ConditionState("False", Reason.BROKER_UNAVAILABLE, str(error))
        await _write_topics_problem(services, want, owner=owner, generation=generation, condition=condition)
        raise TopicsNotReady(condition, delay=config.broker_retry_delay, backoff=True) from None
    except ApiError as error:  # a KafkaTopic refused: no such namespace, no RBAC there, ...
        condition = ConditionState("False", Reason.KAFKA_TOPIC_ERROR, str(error))
        await _write_topics_problem(services, want, owner=owner, generation=generation, condition=condition)
        raise TopicsNotReady(condition, delay=config.topics_retry_delay, backoff=True) from None
    for name in report.created:
        await services.events.info(owner, "TopicCreated", f"created topic {name!r} ({provisioner})")
    found = topic_ownership.entries(policy, report.owned)
    if any(entry["name"] not in owned for entry in found):
        services.claims.record_owned(
            f"{owner.namespace}/{owner.name}", ((entry["broker"], entry["name"]) for entry in found)
        )
        await write_status(services, owner, lambda _: Observation(owned_topics=found))
    message = report.message
    borrowed = topic_ownership.borrowed(policy, {*owned, *report.owned})
    if report.ready and policy.topics.delete_with_policy and borrowed:
        message += (
            "; kept when the policy is deleted (the operator did not create them for it): "
            + ", ".join(repr(name) for name in borrowed)
        )
    condition = ConditionState("True" if report.ready else "False", report.reason, message)
    if not report.ready:
        await _write_topics_problem(services, want, owner=owner, generation=generation, condition=condition)
        waiting = report.reason == Reason.WAITING_FOR_STRIMZI
        delay = config.strimzi_poll_delay if waiting else config.topics_retry_delay
        raise TopicsNotReady(condition, delay=delay, backoff=report.reason == Reason.STRIMZI_NOT_SERVED)
    return condition, found


async def _write_topics_problem(
    services: Services, want: render.Desired, *, owner: Owner, generation: int, condition: ConditionState
) -> None:
    await write_status(
        services,
        owner,
        lambda _: Observation(
            generation=generation,
            topics=condition,
            retry_topic=want.retry_topic,
            dead_letter_topic=want.dead_letter_topic,
            broker=want.broker,
            spark_application=want.application_name,
        ),
    )
