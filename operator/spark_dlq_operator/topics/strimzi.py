"""The ``strimzi`` provisioner: one ``KafkaTopic`` per topic in the Kafka cluster's namespace,
waited on until Strimzi's topic operator reports it Ready; created only for a topic no other
KafkaTopic names and the cluster does not have.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final

from dlq_engine.model import DeadLetterPolicy
from dlq_engine.model.topics import (
    TopicWant,
    retention_shortfall,
    wanted_topics,
)
from spark_dlq_operator import naming, render
from spark_dlq_operator.kubeapi import ApiError, KubeApi, Obj, ResourceType, kafka_topics
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topic_ownership import POLICY_UID_KEY
from spark_dlq_operator.topics.report import TopicsReport, ready_report


class StrimziNotServed(Exception):
    """The cluster serves no KafkaTopic version the operator can write (no Strimzi, or one too
    old or too new): nothing can be created or deleted through Strimzi until it does."""

    def __init__(self) -> None:
        versions = " or ".join(f"{naming.STRIMZI_GROUP}/{v}" for v in naming.STRIMZI_VERSIONS)
        super().__init__(
            f"the cluster serves no KafkaTopic ({versions}): install Strimzi's KafkaTopic CRD, or "
            "set spec.topics.provisioner to admin"
        )


class StrimziProvisioner:
    """Writes KafkaTopic objects for Strimzi's topic operator and reads their Ready condition,
    in the newest KafkaTopic version the cluster serves (discovery, looked up again after
    ``ttl`` seconds or when a KafkaTopic call finds the resource gone)."""

    name: Final = "strimzi"

    def __init__(self, api: KubeApi, *, ttl: float = 60.0) -> None:
        self._api = api
        self._ttl = ttl
        self._version: tuple[str | None, float] | None = None

    async def version(self) -> str | None:
        """``v1`` when served, else ``v1beta2`` when served, else None."""
        now = time.monotonic()
        if self._version is not None and now - self._version[1] < self._ttl:
            return self._version[0]
        found: str | None = None
        for version in naming.STRIMZI_VERSIONS:
            if naming.STRIMZI_PLURAL in await self._api.served_resources(naming.STRIMZI_GROUP, version):
                found = version
                break
        self._version = (found, now)
        return found

    async def served(self) -> bool:
        """Whether the cluster serves a KafkaTopic version the operator writes (for ``auto``)."""
        return await self.version() is not None

    async def _kind(self) -> ResourceType:
        version = await self.version()
        if version is None:
            raise StrimziNotServed()
        return kafka_topics(version)

    def _forget_version(self, error: ApiError) -> None:
        """A 404 from a KafkaTopic collection may mean the version went away (Strimzi upgraded):
        discovery is asked again on the next call."""
        if error.status == 404:
            self._version = None

    async def ensure(
        self,
        policy: DeadLetterPolicy,
        *,
        owner: naming.Owner,
        on_cluster: Callable[[], Awaitable[Collection[str]]],
        owned: Collection[str] = (),
    ) -> TopicsReport:
        """Write the policy's KafkaTopics. ``owned``: the topics recorded as created for the
        policy; ``on_cluster``: the topics the Kafka cluster has (asked only before a KafkaTopic
        would be created for a topic not in ``owned``)."""
        if not policy.topics.strimzi.cluster:
            return TopicsReport(
                False,
                Reason.STRIMZI_CLUSTER_MISSING,
                "topics are provisioned through Strimzi: spec.topics.strimzi.cluster "
                "must name the Kafka cluster",
            )
        try:
            kind = await self._kind()
        except StrimziNotServed as error:
            return TopicsReport(False, Reason.STRIMZI_NOT_SERVED, str(error))
        try:
            return await self._ensure(policy, owner=owner, kind=kind, on_cluster=on_cluster, owned=owned)
        except ApiError as error:
            self._forget_version(error)
            raise

    async def _ensure(
        self,
        policy: DeadLetterPolicy,
        *,
        owner: naming.Owner,
        kind: ResourceType,
        on_cluster: Callable[[], Awaitable[Collection[str]]],
        owned: Collection[str],
    ) -> TopicsReport:
        namespace = render.strimzi_namespace(policy)
        listed: list[Obj] | None = None
        source_partitions = None
        if not policy.topics.partitions:
            listed = await self._api.list(kind, namespace)
            source_partitions = _partitions_of(listed, policy.source.topic)
        in_cluster: Collection[str] | None = None
        created: list[str] = []
        mine: list[str] = []
        waiting: list[str] = []
        notes: list[str] = []
        short: list[str] = []
        for want in wanted_topics(policy, source_partitions=source_partitions):
            name = naming.kafka_topic_name(want.name)
            current = await self._api.get(kind, namespace, name)
            if current is None:
                if listed is None:
                    listed = await self._api.list(kind, namespace)
                other = _naming(listed, want.name)
                if other is not None:
                    current = other
                else:
                    if want.name not in owned:
                        if in_cluster is None:
                            in_cluster = await on_cluster()
                        if want.name in in_cluster:
                            notes.append(
                                f"topic {want.name!r} exists in the Kafka cluster without a KafkaTopic and is "
                                "used as it is (a KafkaTopic would take it over)"
                            )
                            continue
                    desired = self._desired(policy, want, owner=owner, kind=kind, mine=True)
                    current, made = await self._api.create(kind, desired)
                    if made:
                        created.append(want.name)
            kafka_topic_name = current["metadata"]["name"]
            if (current.get("spec") or {}).get("topicName", kafka_topic_name) != want.name:
                return TopicsReport(
                    False,
                    Reason.CONFLICT,
                    f"KafkaTopic {namespace}/{kafka_topic_name} exists for another "
                    f"topic ({current['spec'].get('topicName')!r})",
                    created=tuple(created),
                    owned=tuple(mine),
                )
            ours = _ours(current, policy)
            creator = _creator(current)
            if ours and creator == owner.uid:
                mine.append(want.name)
            if ours and creator in (None, owner.uid):
                desired = self._desired(policy, want, owner=owner, kind=kind, mine=want.name in mine)
                patch = _kafka_topic_patch(current, desired)
                if patch:
                    current = await self._api.patch(kind, namespace, kafka_topic_name, patch)
            elif ours:
                notes.append(
                    f"KafkaTopic {namespace}/{kafka_topic_name} was created for an earlier policy of this name "
                    "and is used as it is"
                )
            else:
                notes.append(
                    f"KafkaTopic {namespace}/{kafka_topic_name} is managed outside spark-dlq and used as it is"
                )
            # Strimzi applies a KafkaTopic's spec.config; one that names no retention.ms takes the
            # broker's default, which only the Admin API could read.
            config = (current.get("spec") or {}).get("config") or {}
            if problem := retention_shortfall(want, {k: str(v) for k, v in config.items()}):
                short.append(f"KafkaTopic {namespace}/{kafka_topic_name}: {problem}")
            ready, why = render.strimzi_ready(current)
            if not ready:
                waiting.append(f"KafkaTopic {namespace}/{kafka_topic_name}: {why}")
        if waiting:
            return TopicsReport(
                False,
                Reason.WAITING_FOR_STRIMZI,
                "; ".join(waiting),
                created=tuple(created),
                owned=tuple(mine),
            )
        message = "; ".join(["Strimzi reports the KafkaTopics Ready", *notes])
        if not policy.topics.partitions and source_partitions is None:
            message += "; the source topic has no KafkaTopic here, so the broker's default partitions apply"
        return ready_report(message, created=created, owned=mine, short_retention=short)

    @staticmethod
    def _desired(
        policy: DeadLetterPolicy, want: TopicWant, *, owner: naming.Owner, kind: ResourceType, mine: bool
    ) -> Obj:
        """The KafkaTopic as the operator writes it; an owner reference (garbage collection
        deletes the topic with the policy) only on one it created for this policy."""
        namespace = render.strimzi_namespace(policy)
        collect = mine and namespace == policy.namespace and policy.topics.delete_with_policy
        return render.kafka_topic(
            policy, want, owner=owner if collect else None, uid=owner.uid, version=kind.version
        )

    async def delete(
        self, policy: DeadLetterPolicy, names: Sequence[str], *, owner: naming.Owner
    ) -> list[str]:
        """Delete the KafkaTopics of the topics ``names`` (Strimzi then deletes the topics), each
        only when it is this policy's (its labels and its creator's uid); the topics whose
        KafkaTopic was deleted. Raises StrimziNotServed when no KafkaTopic version is served:
        then nothing is known about the topics, and they must not be reported gone."""
        kind = await self._kind()
        namespace = render.strimzi_namespace(policy)
        deleted: list[str] = []
        try:
            for topic in names:
                name = naming.kafka_topic_name(topic)
                current = await self._api.get(kind, namespace, name)
                if (
                    current is not None
                    and _ours(current, policy)
                    and _creator(current) == owner.uid
                    and (current.get("spec") or {}).get("topicName", name) == topic
                    and await self._api.delete(kind, namespace, name)
                ):
                    deleted.append(topic)
        except ApiError as error:
            self._forget_version(error)
            raise
        return deleted


def _partitions_of(kafka_topics: Sequence[Obj], topic: str) -> int | None:
    """The partitions a KafkaTopic of ``topic`` asks for, if one does."""
    found = _naming(kafka_topics, topic)
    spec = (found or {}).get("spec") or {}
    return int(spec["partitions"]) if spec.get("partitions") else None


def _naming(kafka_topics: Sequence[Obj], topic: str) -> Obj | None:
    """The KafkaTopic whose topic is ``topic`` (its ``spec.topicName``, else its name)."""
    for item in kafka_topics:
        spec = item.get("spec") or {}
        if spec.get("topicName", item["metadata"]["name"]) == topic:
            return item
    return None


def _ours(kafka_topic: Obj, policy: DeadLetterPolicy) -> bool:
    """Labelled as this policy's (by namespace and name: any incarnation of it)."""
    found = (kafka_topic.get("metadata") or {}).get("labels") or {}
    return found.get(naming.POLICY_LABEL) == naming.label_value(policy.name) and found.get(
        naming.POLICY_NAMESPACE_LABEL
    ) == naming.label_value(policy.namespace)


def _creator(kafka_topic: Obj) -> str | None:
    """The uid of the policy the operator created the KafkaTopic for (None: created before the
    operator recorded it, or not by the operator)."""
    annotations = (kafka_topic.get("metadata") or {}).get("annotations") or {}
    uid = annotations.get(POLICY_UID_KEY)
    return str(uid) if uid else None


def _kafka_topic_patch(current: Obj, desired: Obj) -> dict[str, Any]:
    """The merge patch that brings our KafkaTopic to ``desired``: labels, owners, replicas and
    configs as rendered, partitions never lower than they are. Empty when nothing differs."""
    patch: dict[str, Any] = {}
    meta, want_meta = current.get("metadata") or {}, desired["metadata"]
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in want_meta["labels"].items()):
        patch.setdefault("metadata", {})["labels"] = want_meta["labels"]
    if (meta.get("ownerReferences") or None) != want_meta.get("ownerReferences"):
        patch.setdefault("metadata", {})["ownerReferences"] = want_meta.get("ownerReferences")
    spec, want_spec = current.get("spec") or {}, desired["spec"]
    spec_patch: dict[str, Any] = {}
    if want_spec.get("partitions") and int(spec.get("partitions") or 0) < want_spec["partitions"]:
        spec_patch["partitions"] = want_spec["partitions"]
    if want_spec.get("replicas") and spec.get("replicas") != want_spec["replicas"]:
        spec_patch["replicas"] = want_spec["replicas"]
    config = spec.get("config") or {}
    if {k: str(v) for k, v in config.items()} != want_spec["config"]:
        spec_patch["config"] = {**{k: None for k in config}, **want_spec["config"]}
    if spec_patch:
        patch["spec"] = spec_patch
    return patch
