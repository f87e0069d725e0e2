"""The reconcile: bring one policy's topics, ConfigMap and SparkApplication to what it says.

One idempotent, level-based function, called by kopf on create, update and resume, by the
periodic resync (drift repair), and when an owned SparkApplication is deleted. Steps, in order:
topics (Admin API or Strimzi) -> ConfigMap ``P-policy`` -> the Spark pods' identity (``accounts``)
-> SparkApplication ``P`` -> status.
The SparkApplication is written only when the configuration hash changed (then the job restarts
from its checkpoint and ``restartCount`` goes up) or when it is missing; ``suspend`` deletes it
and keeps everything else. Status is written through the status subresource with a
read-modify-write guarded by ``resourceVersion``, so the reconcile and the SparkApplication
watcher never overwrite each other's conditions. Invalid specs are reported here too.

Nothing here knows kopf: problems are domain exceptions (``TopicsNotReady``,
``CleanupPending``) that the handlers turn into kopf's retry errors.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dlq_engine.model import DeadLetterPolicy, Issue, PolicyError, config_hash
from dlq_engine.model.topics import broker_topic_name
from spark_dlq_operator import accounts, identity, metrics, render, topic_claims, topic_ownership
from spark_dlq_operator.classes import ClassCatalog, CredentialsUnavailable
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.governance import PodFit
from spark_dlq_operator.kubeapi import (
    CONFIG_MAPS,
    PODS,
    POLICIES,
    SPARK_APPLICATIONS,
    ApiError,
    KubeApi,
    Obj,
)
from spark_dlq_operator.policy_class import ClassRefusal
from spark_dlq_operator.reasons import BreakerReason, Reason, TopicsReason
from spark_dlq_operator.render import ConditionState, Observation, Owner
from spark_dlq_operator.topic_claims import TopicClaims
from spark_dlq_operator.topics import (
    AdminProvisioner,
    BrokerUnavailable,
    PulsarProvisioner,
    StrimziNotServed,
    StrimziProvisioner,
)

logger = logging.getLogger(__name__)

#: Condition reasons worth a Warning event when a condition turns to them.
_WARNING_REASONS: Final = frozenset(
    {
        "BrokerUnavailable",
        "SourceTopicMissing",
        "CreateFailed",
        "StrimziClusterMissing",
        "Conflict",
        "Failed",
        *Reason,
        "KafkaTopicError",
        "StrimziNotServed",
        "SparkApplicationRefused",
        "NamespaceNotWatched",
        "NotPickedUp",
        "EngineStalled",
        "DriverPending",
        Reason.IDENTITY_REFUSED,
        topic_claims.TOPIC_IN_USE,
    }
)


class TopicsNotReady(Exception):
    """Provisioning could not finish; the status says why. Retry after ``delay`` seconds
    (growing with each retry when ``backoff``)."""

    def __init__(self, condition: ConditionState, *, delay: float, backoff: bool = False) -> None:
        self.condition = condition
        self.delay = delay
        self.backoff = backoff
        super().__init__(f"{condition.reason}: {condition.message}")


class CleanupPending(Exception):
    """Deleting the topics failed for now; retry after ``delay`` seconds."""

    def __init__(self, message: str, *, delay: float) -> None:
        self.delay = delay
        super().__init__(message)


@dataclass
class Services:
    """The clients and state a reconcile uses, built once at operator start-up."""

    config: OperatorConfig
    api: KubeApi
    events: EventRecorder
    admin: AdminProvisioner
    strimzi: StrimziProvisioner
    #: For policies with broker type pulsar (no client is opened until one is provisioned).
    pulsar: PulsarProvisioner = field(default_factory=lambda: PulsarProvisioner(timeout=10.0))
    #: Which policy uses which retry and dead-letter topic (``topic_claims``).
    claims: TopicClaims = field(default_factory=TopicClaims)
    #: One lock per policy (by uid): kopf's handlers, the resync and the SparkApplication
    #: watcher never reconcile the same policy at once. Unused locks are collected.
    _locks: weakref.WeakValueDictionary[str, asyncio.Lock] = field(
        default_factory=weakref.WeakValueDictionary
    )
    #: The last SparkApplication state (and the JobRunning reason it gave) mapped onto each
    #: policy, by (namespace, name) of the application.
    job_states: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    #: The DeadLetterPolicyClasses (built from ``api`` and ``config`` when not given).
    class_catalog: ClassCatalog | None = None

    #: Follow-up checks of SparkApplications, by (namespace, name): one pending at a time.
    _timers: dict[tuple[str, str], asyncio.Task[None]] = field(default_factory=dict)
    #: The submission the operator last resubmitted (failed, or its engine stalled), by
    #: (namespace, name) of the application: not again until the spark-operator has submitted a
    #: new one (the application's events in between still show the old one).
    resubmitted: dict[tuple[str, str], str] = field(default_factory=dict)

    def check_later(
        self, app: Mapping[str, Any], delay: float, check: Callable[[Obj], Awaitable[None]]
    ) -> None:
        """In ``delay`` seconds, read ``app`` again and run ``check`` on it (replacing a check
        already pending for it)."""
        metadata = app.get("metadata") or {}
        key = (str(metadata.get("namespace")), str(metadata.get("name")))
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending.cancel()

        async def later() -> None:
            await asyncio.sleep(delay)
            try:
                fresh = await self.api.get(SPARK_APPLICATIONS, *key)
                if fresh is not None:
                    await check(fresh)
            except (ApiError, OSError) as error:  # the next event or resync catches up
                logger.warning("follow-up of SparkApplication %s/%s failed: %s", *key, error)
            finally:
                if self._timers.get(key) is task:
                    del self._timers[key]

        task = asyncio.get_running_loop().create_task(later(), name=f"follow-up {key[0]}/{key[1]}")
        self._timers[key] = task

    @property
    def classes(self) -> ClassCatalog:
        if self.class_catalog is None:
            self.class_catalog = ClassCatalog(self.api, self.config)
        return self.class_catalog

    def lock(self, uid: str) -> asyncio.Lock:
        lock = self._locks.get(uid)
        if lock is None:
            lock = self._locks[uid] = asyncio.Lock()
        return lock

    async def close(self) -> None:
        for task in self._timers.values():
            task.cancel()
        self._timers.clear()
        self.admin.close()
        await self.pulsar.close()
        await self.events.close()
        await self.api.close()


def owner_of(body: Mapping[str, Any]) -> Owner:
    metadata = body["metadata"]
    return Owner(name=metadata["name"], namespace=metadata["namespace"], uid=metadata["uid"])


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- status ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Known:
    """An object as the caller already knows it: ``obj`` None means known to be absent. Where
    a ``Known | None`` is expected, None means not known: read it."""

    obj: Obj | None


@dataclass(frozen=True, slots=True)
class Seen:
    """What the caller already read, to save the reconcile a few reads. ``policy`` is the policy
    as last seen; ``listed`` means all four come from a resync's lists (``config_map``,
    ``application`` and ``lease`` None: absent then). Every write still carries a ``resourceVersion`` or
    tolerates a 409, so something that changed since costs a retry, never a wrong write."""

    policy: Mapping[str, Any]
    listed: bool = False
    config_map: Obj | None = None
    application: Obj | None = None
    #: The policy's Lease (its driver's heartbeat), as a resync listed it.
    lease: Obj | None = None
    #: kopf saw the policy created just now: its ConfigMap and SparkApplication are created
    #: without being read first (a create that finds one reads it then).
    created: bool = False


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
        config_map = None if _pinned_provisioner_matters(services, policy) else Known(None)
        return config_map, None if policy.suspend else Known(None)
    return None, None


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
        new = render.next_status(old, observe(old), now=now())
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
    """Post an event for each condition that turned into a problem, or into Ready."""
    before = {c.get("type"): c for c in old.get("conditions") or []}
    for condition in new.get("conditions") or []:
        previous = before.get(condition["type"]) or {}
        key = ("status", "reason", "message")
        if all(previous.get(k) == condition.get(k) for k in key):
            continue
        reason, message = condition.get("reason", ""), condition.get("message", "")
        if condition["type"] == "BreakerClosed":
            await _announce_breaker(services, owner, previous, condition)
        elif condition["status"] == "False" and reason in _WARNING_REASONS:
            await services.events.warn(owner, reason, message)
        elif condition["type"] == "TopicsReady" and (
            "drift:" in message or reason == TopicsReason.SHORT_RETENTION
        ):
            if "drift:" in message:
                await services.events.warn(owner, "TopicPartitionsDrift", message)
            if reason == TopicsReason.SHORT_RETENTION:
                await services.events.warn(owner, "TopicRetentionShort", message)
        elif (
            condition["type"] == "Ready"
            and condition["status"] == "True"
            and previous.get("status") != "True"
        ):
            await services.events.info(owner, "Ready", message)


async def _announce_breaker(
    services: Services, owner: Owner, previous: Mapping[str, Any], condition: Mapping[str, Any]
) -> None:
    """A Warning event when the breaker opens, a Normal one when it closes again; none while it
    goes between open and half-open (its condition's message says which, and when)."""
    if condition["status"] == previous.get("status"):
        return
    if condition["status"] == "False" and condition.get("reason") == BreakerReason.OPEN:
        await services.events.warn(owner, BreakerReason.OPEN, condition.get("message", ""))
    elif condition["status"] == "True" and previous.get("status") == "False":
        await services.events.info(owner, "BreakerClosed", condition.get("message", ""))


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


# --- the reconcile -----------------------------------------------------------------------------


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
        with metrics.observe(trigger) as outcome:
            try:
                await _reconcile(services, policy, owner=owner, generation=generation, seen=seen, fit=fit)
            except TopicsNotReady as error:
                outcome.result, outcome.reason = "waiting", error.condition.reason
                raise
            outcome.result = "ok"


@dataclass(frozen=True, slots=True)
class _Job:
    """What ensuring the SparkApplication did: the JobRunning to write (None: keep the
    watcher's), the application as it is now, and whether it was restarted."""

    condition: ConditionState | None
    app: Obj | None = None
    restarted: bool = False


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
    if (
        seen is not None
        and listed
        and await _listing_is_stale(services, policy, owner=owner, seen=seen, fit=fit)
    ):
        return
    body = seen.policy if seen is not None else await services.api.get(POLICIES, owner.namespace, owner.name)
    if body is None or body["metadata"].get("uid") != owner.uid:
        return
    await _claim_topics(services, policy, owner=owner, generation=generation, body=body)
    known_config_map, known_application = _known_before(services, policy, seen)
    config_map = (
        known_config_map.obj
        if known_config_map is not None
        else await services.api.get(CONFIG_MAPS, policy.namespace, render.config_map_name(policy.name))
    )
    provisioner = await resolve_provisioner(services, policy, config_map) if policy.topics.create else None
    topics, owned = await _provision_topics(
        services,
        policy,
        owner=owner,
        generation=generation,
        provisioner=provisioner,
        status=body.get("status"),
    )
    await _ensure_config_map(services, policy, owner=owner, current=config_map, provisioner=provisioner)
    blocked = await _ensure_identity(services, policy, owner=owner, seen=seen, fit=fit)
    job = (
        _Job(blocked)
        if blocked is not None
        else await _ensure_application(services, policy, owner=owner, known=known_application, fit=fit)
    )
    digest = config_hash(policy)

    def observe(old: Mapping[str, Any]) -> Observation:
        condition, restarted = job.condition, job.restarted
        old_job = next((c for c in old.get("conditions") or [] if c.get("type") == "JobRunning"), None)
        if condition is None and job.app is not None:
            if old.get("configHash") not in (None, "", digest):
                # A restart whose status write was lost (the operator stopped in between): the
                # application already carries the new hash, the status still the old one.
                condition, restarted = render.JOB_RESTARTING, True
            elif old_job is None or old_job.get("reason") in (
                "Suspended",
                "Conflict",
                "SparkApplicationRefused",
                "Submitted",
                "NamespaceNotWatched",
            ):
                condition = job_state(services, job.app)[0]
        return Observation(
            generation=generation,
            topics=topics,
            job=condition,
            retry_topic=broker_topic_name(policy, policy.retry_topic),
            dead_letter_topic=broker_topic_name(policy, policy.dead_letter_topic),
            spark_application=render.application_name(policy.name),
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
        services.job_states[(policy.namespace, render.application_name(policy.name))] = (
            *render.application_state(job.app),
            job.condition.reason,
        )


async def _listing_is_stale(
    services: Services, policy: DeadLetterPolicy, *, owner: Owner, seen: Seen, fit: PodFit
) -> bool:
    """Whether a resync's listed policy is older than the policy now, when the ConfigMap or the
    SparkApplication would be written from it. The lists are taken one after another and the
    policy may change in between (and kopf apply the change) before this reconcile holds the
    lock; written from the stale policy, they would roll the user's change back until the next
    round. Read only when a write is due (drift is rare); the next round repairs with the new one."""
    desired = render.config_map(policy, config=services.config, owner=owner)
    config_map, app = seen.config_map, seen.application
    due = config_map is None or config_map.get("data") != desired["data"]
    if policy.suspend:
        due = due or (app is not None and _managed(app))
    else:
        annotations = (app or {}).get("metadata", {}).get("annotations") or {}
        account = render.spark_service_account(policy.name, fit, services.config)
        due = (
            due
            or app is None
            or annotations.get(render.CONFIG_HASH_ANNOTATION) != config_hash(policy)
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


def _pinned_provisioner_matters(services: Services, policy: DeadLetterPolicy) -> bool:
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
    pinned = annotations.get(render.PROVISIONER_ANNOTATION)
    if pinned in ("admin", "strimzi"):
        return str(pinned)
    return "strimzi" if await services.strimzi.served() else "admin"


def admin_credentials(services: Services, policy: DeadLetterPolicy) -> Mapping[str, str]:
    """The operator's own settings for the policy's broker (librdkafka's, or the Pulsar
    client's): what its class names for it, none for a broker no class lists. Raises BrokerUnavailable when they cannot be read
    (the condition names the Secret)."""
    try:
        return services.classes.admin_config(policy)
    except CredentialsUnavailable as error:
        raise BrokerUnavailable(str(error)) from None


async def _claim_topics(
    services: Services, policy: DeadLetterPolicy, *, owner: Owner, generation: int, body: Mapping[str, Any]
) -> None:
    """Refuse the policy (TopicInUse; nothing is created for it) when another policy keeps
    one of its retry and dead-letter topics (``topic_claims``)."""
    refused = services.claims.claim(topic_claims.claim_of(policy, body))
    if refused is None:
        return
    condition = ConditionState("False", topic_claims.TOPIC_IN_USE, refused.message)
    await _write_topics_problem(services, policy, owner=owner, generation=generation, condition=condition)
    raise TopicsNotReady(condition, delay=services.config.topics_retry_delay, backoff=True)


async def _provision_topics(
    services: Services,
    policy: DeadLetterPolicy,
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
            "True", "NotManaged", "spec.topics.create is false: the operator does not provision the topics"
        ), []
    owned = topic_ownership.owned_here(policy, status)
    try:
        if provisioner == "strimzi":
            report = await services.strimzi.ensure(
                policy,
                owner=owner,
                owned=owned,
                on_cluster=lambda: services.admin.existing(
                    policy, credentials=admin_credentials(services, policy)
                ),
            )
        elif provisioner == PulsarProvisioner.name:
            report = await services.pulsar.ensure(
                policy, owner=owner, owned=owned, credentials=admin_credentials(services, policy)
            )
        else:
            report = await services.admin.ensure(policy, credentials=admin_credentials(services, policy))
    except BrokerUnavailable as error:
        condition = ConditionState("False", "BrokerUnavailable", str(error))
        await _write_topics_problem(services, policy, owner=owner, generation=generation, condition=condition)
        raise TopicsNotReady(condition, delay=config.broker_retry_delay, backoff=True) from None
    except ApiError as error:  # a KafkaTopic refused: no such namespace, no RBAC there, ...
        condition = ConditionState("False", "KafkaTopicError", str(error))
        await _write_topics_problem(services, policy, owner=owner, generation=generation, condition=condition)
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
        await _write_topics_problem(services, policy, owner=owner, generation=generation, condition=condition)
        waiting = report.reason == "WaitingForStrimzi"
        delay = config.strimzi_poll_delay if waiting else config.topics_retry_delay
        raise TopicsNotReady(condition, delay=delay, backoff=report.reason == "StrimziNotServed")
    return condition, found


async def _write_topics_problem(
    services: Services, policy: DeadLetterPolicy, *, owner: Owner, generation: int, condition: ConditionState
) -> None:
    await write_status(
        services,
        owner,
        lambda _: Observation(
            generation=generation,
            topics=condition,
            retry_topic=broker_topic_name(policy, policy.retry_topic),
            dead_letter_topic=broker_topic_name(policy, policy.dead_letter_topic),
            spark_application=render.application_name(policy.name),
        ),
    )


async def _ensure_config_map(
    services: Services,
    policy: DeadLetterPolicy,
    *,
    owner: Owner,
    current: Obj | None,
    provisioner: str | None,
) -> None:
    desired = render.config_map(policy, config=services.config, owner=owner, provisioner=provisioner)
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
        await services.api.patch(CONFIG_MAPS, policy.namespace, desired["metadata"]["name"], patch)
        await services.events.info(
            owner, "ConfigMapUpdated", f"updated ConfigMap {desired['metadata']['name']}"
        )


async def _ensure_identity(
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


def _managed(app: Obj) -> bool:
    labels = (app.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(render.MANAGED_BY_LABEL) == render.MANAGED_BY)


async def _ensure_application(
    services: Services, policy: DeadLetterPolicy, *, owner: Owner, fit: PodFit, known: Known | None = None
) -> _Job:
    api = services.api
    name = render.application_name(policy.name)
    current = known.obj if known is not None else await api.get(SPARK_APPLICATIONS, policy.namespace, name)
    if policy.suspend:
        if (
            current is not None
            and _managed(current)
            and await api.delete(SPARK_APPLICATIONS, policy.namespace, name)
        ):
            await services.events.info(
                owner,
                "SparkApplicationDeleted",
                f"spec.suspend is true: deleted SparkApplication {name}; the "
                "ConfigMap, the topics and the checkpoint are kept",
            )
        return _Job(render.JOB_SUSPENDED)
    desired = render.spark_application(policy, config=services.config, owner=owner, fit=fit)
    submitted = (
        render.unwatched(policy.namespace, services.config.spark_job_namespaces) or render.JOB_SUBMITTED
    )
    if current is None:
        try:
            current, created = await api.create(SPARK_APPLICATIONS, desired)
        except ApiError as error:
            if error.status not in (400, 403, 422):
                raise
            return _Job(_refused(name, error))
        if created:
            await services.events.info(
                owner,
                "SparkApplicationCreated",
                f"created SparkApplication {name} (config hash "
                f"{desired['metadata']['annotations'][render.CONFIG_HASH_ANNOTATION]})",
            )
            return _Job(submitted, app=current)
    controller = policy_owner(current)
    if controller is not None and controller.uid != owner.uid:
        return _Job(
            ConditionState(
                "False",
                "Conflict",
                f"SparkApplication {name} belongs to DeadLetterPolicy {controller.name}: rename one of them",
            )
        )
    if not _managed(current):
        return _Job(
            ConditionState(
                "False",
                "Conflict",
                f"SparkApplication {name} exists and is not managed by spark-dlq: delete or rename it",
            )
        )
    digest = desired["metadata"]["annotations"][render.CONFIG_HASH_ANNOTATION]
    for _ in range(5):
        metadata = current["metadata"]
        old_digest = (metadata.get("annotations") or {}).get(render.CONFIG_HASH_ANNOTATION)
        owned = any(ref.get("uid") == owner.uid for ref in metadata.get("ownerReferences") or [])
        moved = identity.moved(current, desired)
        if old_digest == digest and owned and moved is None:
            return _Job(None, app=current)
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
                return _Job(_refused(name, error))
            if error.status != 409:
                raise
            fresh = await api.get(SPARK_APPLICATIONS, policy.namespace, name)
            if fresh is None:
                current, _ = await api.create(SPARK_APPLICATIONS, desired)
                return _Job(submitted, app=current)
            current = fresh
            continue
        if old_digest == digest and moved is None:  # adopted, same configuration: nothing restarts
            return _Job(None, app=current)
        why = (
            moved if old_digest == digest else f"the configuration hash changed from {old_digest} to {digest}"
        )
        await services.events.info(
            owner,
            "SparkApplicationRestarted",
            f"{why}: SparkApplication {name} is resubmitted and resumes from its checkpoint",
        )
        return _Job(render.JOB_RESTARTING, app=current, restarted=True)
    raise ApiError(409, "Conflict", f"SparkApplication {policy.namespace}/{name} kept changing")


def _refused(name: str, error: ApiError) -> ConditionState:
    """JobRunning for a SparkApplication the API server (its schema, or the spark-operator's
    validating webhook) refused: nothing runs until the policy changes."""
    return ConditionState("False", "SparkApplicationRefused", f"SparkApplication {name} was refused: {error}")


# --- the SparkApplication watcher --------------------------------------------------------------


def policy_owner(app: Mapping[str, Any]) -> Owner | None:
    """The policy that controls a SparkApplication, from its owner reference."""
    metadata = app.get("metadata") or {}
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("kind") == "DeadLetterPolicy" and ref.get("controller"):
            return Owner(name=ref["name"], namespace=metadata["namespace"], uid=ref["uid"])
    return None


def job_state(services: Services, app: Mapping[str, Any]) -> tuple[ConditionState, tuple[str, ...]]:
    """The JobRunning a SparkApplication stands for now, and what it was computed from (the
    watcher maps it again only when that changes): its state, else the hint that the
    spark-operator has not picked it up (declared not to watch its namespace, or silent)."""
    condition = render.job_condition(app)
    state = render.application_state(app)
    if not state[0]:
        metadata = app.get("metadata") or {}
        config = services.config
        hint = render.unwatched(
            str(metadata.get("namespace")), config.spark_job_namespaces
        ) or render.unnoticed(
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
        if current.get("reason") == "Suspended":  # the application is on its way out
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
    due = render.resubmit_due(app, cap=config.restart_backoff_cap, now=now)
    if due is not None and due <= 0:
        await _resubmit(services, app, owner=owner)
        return
    if due is None and not render.application_state(app)[0]:
        created = render.time_of((app.get("metadata") or {}).get("creationTimestamp"))
        if created is not None:
            due = config.spark_operator_timeout - (now - created).total_seconds()
            due = due if due > 0 else None
    if due is not None:
        logger.info(
            "SparkApplication %s/%s (%s): looked at again in %.1fs",
            (app.get("metadata") or {}).get("namespace"),
            (app.get("metadata") or {}).get("name"),
            render.application_state(app)[0] or "no state",
            due + 0.5,
        )
        services.check_later(app, due + 0.5, lambda fresh: update_job_status(services, fresh))


async def _resubmit_once(services: Services, app: Mapping[str, Any]) -> bool:
    """Resubmit ``app`` unless its submission was resubmitted already; True when this call did.

    The submission is claimed before the patch is sent: the patch's own watch event, a timer or
    a resync round that sees the same submission while the patch is on its way must not
    resubmit it a second time. A refused patch gives the claim back."""
    metadata = app.get("metadata") or {}
    key = (str(metadata.get("namespace")), str(metadata.get("name")))
    submission = render.application_state(app)[1]
    previous = services.resubmitted.get(key)
    if previous == submission:  # done; the spark-operator is on it
        logger.info("SparkApplication %s/%s: submission %s was resubmitted already", *key, submission)
        return False
    services.resubmitted[key] = submission
    patch = {**render.resubmission(app), "metadata": {"resourceVersion": metadata.get("resourceVersion")}}
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


async def _resubmit(services: Services, app: Mapping[str, Any], *, owner: Owner) -> None:
    metadata, status = app.get("metadata") or {}, app.get("status") or {}
    if not await _resubmit_once(services, app):
        return
    state = render.application_state(app)[0]
    if state == "FAILED":
        count = int(render.resubmission(app)["spec"]["driver"]["annotations"][render.RESUBMIT_ANNOTATION])
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


# --- the supervisor ----------------------------------------------------------------------------


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
    if app is None or not _managed(app):
        return
    controller = policy_owner(app)
    if controller is None or controller.uid != owner.uid:
        return
    status = (policy or {}).get("status") or {}
    ordering = render.ordering_status(app, lease)
    if ordering == status.get("ordering"):
        ordering = None
    breaker = render.breaker_condition(app, lease)
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
    due = render.resubmit_due(app, cap=config.restart_backoff_cap, now=now)
    if due is not None and due <= 0:
        # The application's own events and timers resubmit it on time; this round is the net
        # under a missed one (the resourceVersion guards against a stale listing).
        await _resubmit(services, app, owner=owner)
        return
    stalled = (
        render.engine_stalled(app, lease, bound=config.stall_timeout) if config.stall_timeout > 0 else None
    )
    if stalled is not None:
        if not await _resubmit_once(services, app):  # resubmitted already, or moved on: next round
            return
        async with services.lock(owner.uid):
            await write_status(
                services,
                owner,
                lambda _: Observation(job=stalled, restarted=True, restart_reason="EngineStalled"),
            )
        return
    if render.driver_pending(app, None, now=now, bound=config.pending_timeout) is None:
        return
    pod_name = ((app.get("status") or {}).get("driverInfo") or {}).get("podName")
    pod = await services.api.get(PODS, key[0], str(pod_name)) if pod_name else None
    pending = render.driver_pending(app, pod, now=now, bound=config.pending_timeout)
    if pending is None:
        return

    def observe(old: Mapping[str, Any]) -> Observation:
        current: Mapping[str, Any] = next(
            (c for c in old.get("conditions") or [] if c.get("type") == "JobRunning"), {}
        )
        if current.get("reason") in ("Suspended", "Conflict", "SparkApplicationRefused"):
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
        f"SparkApplication {render.application_name(policy.name)} was deleted: creating it again",
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


# --- deletion ----------------------------------------------------------------------------------


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
                CONFIG_MAPS, policy.namespace, render.config_map_name(policy.name)
            )
            provisioner = await resolve_provisioner(services, policy, config_map)
            if provisioner == "strimzi":
                deleted = await services.strimzi.delete(policy, plan.delete, owner=owner)
            elif provisioner == PulsarProvisioner.name:
                deleted = await services.pulsar.delete(
                    policy, plan.delete, credentials=admin_credentials(services, policy)
                )
            else:
                deleted = await services.admin.delete(
                    policy, plan.delete, credentials=admin_credentials(services, policy)
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
