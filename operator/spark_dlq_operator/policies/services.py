"""The clients and state one operator process shares, built once at start-up (``handlers``)
and closed at clean-up: the Kubernetes API, the event recorder, the topic provisioners, the
topic claims, the per-policy locks, and what the SparkApplication watcher remembers.

Also the domain exceptions the reconcile raises (``TopicsNotReady``, ``CleanupPending``), which
the handlers turn into kopf's retry errors, and what a caller already knows of a policy's objects
(``Seen``, ``Known``), to save the reconcile a few reads.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dlq_engine.model import DeadLetterPolicy
from spark_dlq_operator.classes import ClassCatalog, CredentialsUnavailable
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.kubeapi import SPARK_APPLICATIONS, ApiError, KubeApi, Obj
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.policies.status import ConditionState
from spark_dlq_operator.provisioners import Provisioners
from spark_dlq_operator.topic_claims import TopicClaims
from spark_dlq_operator.topics import (
    AdminProvisioner,
    BrokerUnavailable,
    PulsarProvisioner,
    StrimziProvisioner,
)

logger = logging.getLogger(__name__)

#: How many deleted policies' uids ``Services`` remembers: more than a resync round can hold
#: from before their deletion.
ENDED_KEPT = 10_000


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
    #: Uids of policies being deleted or gone, oldest first (at most ``ENDED_KEPT``): a reconcile
    #: that began from an older read of one (a resync's list) must not create its topics again
    #: after their deletion.
    _ended: dict[str, None] = field(default_factory=dict)
    #: The last SparkApplication state (and the JobRunning reason it gave) mapped onto each
    #: policy, by (namespace, name) of the application.
    job_states: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    #: The DeadLetterPolicyClasses (built from ``api`` and ``config`` when not given).
    class_catalog: ClassCatalog | None = None
    #: ``admin``, ``strimzi`` and ``pulsar`` by broker and name (built from them when not given).
    provisioner_registry: Provisioners | None = None

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

    @property
    def provisioners(self) -> Provisioners:
        if self.provisioner_registry is None:
            self.provisioner_registry = Provisioners(
                admin=self.admin,
                strimzi=self.strimzi,
                pulsar=self.pulsar,
                credentials=lambda policy: admin_credentials(self, policy),
            )
        return self.provisioner_registry

    def lock(self, uid: str) -> asyncio.Lock:
        lock = self._locks.get(uid)
        if lock is None:
            lock = self._locks[uid] = asyncio.Lock()
        return lock

    def end(self, uid: str) -> None:
        """Mark the policy ``uid`` as being deleted (or gone): no reconcile of it runs after this."""
        self._ended[uid] = None
        while len(self._ended) > ENDED_KEPT:
            del self._ended[next(iter(self._ended))]

    def ended(self, uid: str) -> bool:
        return uid in self._ended

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


def admin_credentials(services: Services, policy: DeadLetterPolicy) -> Mapping[str, str]:
    """The operator's own settings for the policy's broker (librdkafka's, or the Pulsar
    client's): what its class names for it, none for a broker no class lists. Raises BrokerUnavailable when they cannot be read
    (the condition names the Secret)."""
    try:
        return services.classes.admin_config(policy)
    except CredentialsUnavailable as error:
        raise BrokerUnavailable(str(error)) from None


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
