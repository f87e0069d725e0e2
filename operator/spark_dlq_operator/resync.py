"""The periodic resync: every policy is reconciled again on a slow clock, to repair drift.

kopf reacts to changes of a policy, but drift happens elsewhere: someone deletes a topic or the
ConfigMap. A kopf timer would do, but kopf puts a finalizer on every object that has one, and a
policy must carry a finalizer only when its deletion has work to do (docs/reference.md: deletion never
blocks on an absent operator otherwise). So the resync is a task of its own, started at
operator start-up and cancelled at clean-up, which lists the watched policies every
``resync_interval`` seconds and runs the same reconcile under the same per-policy lock. A round
lists the policies, ConfigMaps, SparkApplications and Leases once per namespace, so its cost on the API
server does not grow with one read per object.

With a named kopf peering, only the active replica resyncs: the peering object is read and the
rule kopf applies is mirrored (paused while a live peer has a higher priority, or another the
same priority).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from dlq_engine.model import PolicyError
from spark_dlq_operator import metrics, naming
from spark_dlq_operator.kubeapi import (
    CLUSTER_KOPF_PEERINGS,
    CONFIG_MAPS,
    KOPF_PEERINGS,
    LEASES,
    POLICIES,
    SPARK_APPLICATIONS,
    ApiError,
    Obj,
)
from spark_dlq_operator.policies.reconcile import reconcile
from spark_dlq_operator.policies.services import Seen, Services, TopicsNotReady, owner_of
from spark_dlq_operator.policies.status_writer import report_refused
from spark_dlq_operator.policies.supervisor import supervise

logger = logging.getLogger(__name__)


class Resync:
    """Reconciles every watched policy every ``config.resync_interval`` seconds."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self.rounds = 0

    async def run_forever(self) -> None:
        interval = self._services.config.resync_interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception:  # logged; one failed round must not end the resync for good
                logger.exception("resync round failed")

    def _scopes(self) -> list[str | None]:
        config = self._services.config
        return [None] if config.all_namespaces else list(config.namespaces)

    async def index_topics(self) -> None:
        """Fill the topic index (``topic_claims``) from a listing of every watched policy, before
        the first reconcile: which policy keeps a topic must not depend on which policy kopf
        happens to resume first. A failed listing is logged; the first round fills it then."""
        claims = self._services.claims
        listed_at = claims.now()
        try:
            bodies: list[Obj] = []
            for scope in self._scopes():
                bodies.extend(await self._services.api.list(POLICIES, scope))
        except (ApiError, OSError) as error:
            logger.warning("could not list the policies to index their topics: %s", error)
            return
        claims.rebuild(bodies, listed_at=listed_at, parse=self._services.classes.effective_policy)

    async def round(self, *, which: Callable[[Obj], bool] | None = None) -> int:
        """One pass over all policies (``which``: reconcile only those it selects, without
        listing the classes again); how many were reconciled."""
        services = self._services
        if services.config.peering and not await self._active():
            await self.index_topics()  # a standby takes over with an index of now
            return 0
        if which is None:
            await services.classes.refresh()
        # Three lists per namespace instead of three reads per policy.
        selector = f"{naming.MANAGED_BY_LABEL}={naming.MANAGED_BY}"
        bodies: list[Obj] = []
        config_maps: dict[tuple[str, str], Obj] = {}
        applications: dict[tuple[str, str], Obj] = {}
        leases: dict[tuple[str, str], Obj] = {}
        listed_at = services.claims.now()
        for scope in self._scopes():
            bodies.extend(await services.api.list(POLICIES, scope))
            config_maps.update(_by_key(await services.api.list(CONFIG_MAPS, scope, label_selector=selector)))
            applications.update(
                _by_key(await services.api.list(SPARK_APPLICATIONS, scope, label_selector=selector))
            )
            leases.update(_by_key(await services.api.list(LEASES, scope, label_selector=selector)))
        services.claims.rebuild(bodies, listed_at=listed_at, parse=services.classes.effective_policy)
        limit = asyncio.Semaphore(max(1, services.config.resync_concurrency))
        if which is None:
            metrics.POLICY_STATES.keep_only(
                metrics.policy_label(b["metadata"]["namespace"], b["metadata"]["name"]) for b in bodies
            )
        else:
            bodies = [b for b in bodies if which(b)]
        metrics.RESYNC_PENDING.set(len(bodies))

        async def one(body: Obj) -> bool:
            metadata = body["metadata"]
            seen = Seen(
                policy=body,
                listed=True,
                config_map=config_maps.get((metadata["namespace"], naming.config_map_name(metadata["name"]))),
                application=applications.get(
                    (metadata["namespace"], naming.application_name(metadata["name"]))
                ),
                lease=leases.get((metadata["namespace"], naming.lease_name(metadata["name"]))),
            )
            async with limit:
                try:
                    done = await self._reconcile(body, seen)
                    if done:
                        await self._supervise(body, seen)
                    return done
                finally:
                    metrics.RESYNC_PENDING.dec()

        done = await asyncio.gather(*(one(body) for body in bodies))
        if which is None:
            self.rounds += 1
            metrics.RESYNC_ROUNDS.inc()
        return sum(done)

    async def class_changed(self, event: str, obj: Mapping[str, Any]) -> int:
        """A DeadLetterPolicyClass watch event (``DELETED`` or another): reconcile the policies
        the class governs (those naming it, and those naming none when it is or was the default,
        or when the built-in class starts or stops governing them); how many were reconciled. A
        policy waiting for a class that did not exist is among them."""
        classes = self._services.classes
        name = str((obj.get("metadata") or {}).get("name"))
        was_default, had_classes = name in classes.default_names(), bool(classes.classes)
        changed = classes.remove(name) if event == "DELETED" else classes.update(obj)
        if not changed:
            return 0
        default = was_default or name in classes.default_names() or had_classes != bool(classes.classes)

        def governed_by_it(policy: Obj) -> bool:
            named = (policy.get("spec") or {}).get("className")
            return named == name or (not named and default)

        return await self.round(which=governed_by_it)

    async def _reconcile(self, body: Obj, seen: Seen) -> bool:
        metadata = body["metadata"]
        if metadata.get("deletionTimestamp"):
            return False
        owner = owner_of(body)
        generation = int(metadata.get("generation", 0))
        try:
            governed = await self._services.classes.govern(body)
        except PolicyError as error:
            await report_refused(self._services, owner, generation=generation, error=error, trigger="resync")
            return False
        except Exception:  # logged; one policy's failure must not stop the others
            logger.exception("resync of %s/%s failed", owner.namespace, owner.name)
            return False
        try:
            await reconcile(
                self._services,
                governed.policy,
                owner=owner,
                generation=generation,
                trigger="resync",
                seen=seen,
                fit=governed.fit,
            )
        except TopicsNotReady as error:
            logger.info("resync of %s/%s: %s", owner.namespace, owner.name, error)
            return False
        except Exception:  # logged; one policy's failure must not stop the others
            logger.exception("resync of %s/%s failed", owner.namespace, owner.name)
            return False
        return True

    async def _supervise(self, body: Obj, seen: Seen) -> None:
        owner = owner_of(body)
        try:
            await supervise(self._services, owner=owner, app=seen.application, lease=seen.lease, policy=body)
        except Exception:  # logged; the next round looks again
            logger.exception("supervising %s/%s failed", owner.namespace, owner.name)

    async def _active(self) -> bool:
        services = self._services
        name = services.config.peering
        assert name is not None
        if services.config.all_namespaces:
            objects = [await services.api.get(CLUSTER_KOPF_PEERINGS, None, name)]
        else:
            objects = [await services.api.get(KOPF_PEERINGS, ns, name) for ns in services.config.namespaces]
        return all(
            o is not None and peering_allows(o.get("status") or {}, priority=services.config.priority)
            for o in objects
        )


def _by_key(items: list[Obj]) -> dict[tuple[str, str], Obj]:
    return {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in items}


def peering_allows(peers: Mapping[str, Any], *, priority: int, now: datetime.datetime | None = None) -> bool:
    """kopf's rule from a peering object's status (peer id -> priority, lastseen, lifetime):
    this replica works unless a live peer has a higher priority or more than one (this replica
    and another) has its own."""
    now = now or datetime.datetime.now(datetime.UTC)
    same = 0
    for info in peers.values():
        if not isinstance(info, Mapping):
            continue
        try:
            seen = datetime.datetime.fromisoformat(str(info["lastseen"]))
        except (KeyError, ValueError):
            continue
        if seen.tzinfo is None:
            seen = seen.replace(tzinfo=datetime.UTC)
        if seen + datetime.timedelta(seconds=int(info.get("lifetime", 60))) <= now:
            continue
        peer_priority = int(info.get("priority", 0))
        if peer_priority > priority:
            return False
        same += peer_priority == priority
    return same <= 1
