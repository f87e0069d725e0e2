"""In-memory brokers under the operator's own provisioners, for fast tests of topic ownership and
sharing (in the spirit of ``fake_kube``: only the last call is replaced).

``FakeKafka`` stands in for confluent-kafka's ``AdminClient`` (``AdminProvisioner``'s
``client_factory``): topics with partitions, ``TOPIC_ALREADY_EXISTS`` on a second create,
``UNKNOWN_TOPIC_OR_PART`` on deleting what is not there, a topic's retention as
``describe_configs`` reports it (its own configs over the broker's defaults), the settings each
client was built with, and a hook that runs just before a create is served (someone else getting there first).
``FakePulsar`` answers ``PulsarProvisioner``'s admin calls as Pulsar's REST API does for the
paths it uses: 404, 409, partitioned and non-partitioned topics with their properties, and
subscriptions.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigEntry, ConfigResource

from dlq_engine.model import DeadLetterPolicy
from spark_dlq_operator.topics.pulsar import _EXISTS, _NOT_FOUND, PulsarProvisioner, _Refused

#: What a broker describes for a topic that sets neither (Kafka's own defaults: a week).
BROKER_DEFAULTS: Final = {"retention.ms": "604800000", "cleanup.policy": "delete"}


@dataclass
class _Partitioned:
    partitions: dict[int, object]
    error: object = None


def _done(value: object = None, error: int | None = None) -> concurrent.futures.Future[object]:
    future: concurrent.futures.Future[object] = concurrent.futures.Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(KafkaError(error)))
    return future


@dataclass
class FakeKafka:
    """One Kafka cluster; ``client`` is the factory the provisioner builds its clients with."""

    topics: dict[str, int] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    clients: list[dict[str, Any]] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    before_create: list[Callable[[], None]] = field(default_factory=list)

    def client(self, conf: dict[str, Any]) -> FakeKafka:
        self.clients.append(dict(conf))
        return self

    # --- the AdminClient calls the provisioner makes ------------------------------------------

    def poll(self, timeout: float) -> int:
        return 0

    def list_topics(self, timeout: float) -> Any:
        class Metadata:
            topics = {name: _Partitioned(dict.fromkeys(range(n))) for name, n in self.topics.items()}

        return Metadata()

    def create_topics(self, new: Sequence[Any], **_: Any) -> dict[str, concurrent.futures.Future[object]]:
        while self.before_create:
            self.before_create.pop(0)()
        futures = {}
        for topic in new:
            if topic.topic in self.topics:
                futures[topic.topic] = _done(error=KafkaError.TOPIC_ALREADY_EXISTS)
                continue
            self.topics[topic.topic] = max(1, topic.num_partitions)
            self.configs[topic.topic] = dict(topic.config)
            self.created.append(topic.topic)
            futures[topic.topic] = _done()
        return futures

    def describe_configs(
        self, resources: Sequence[ConfigResource], **_: Any
    ) -> dict[ConfigResource, concurrent.futures.Future[object]]:
        futures = {}
        for resource in resources:
            if resource.name not in self.topics:
                futures[resource] = _done(error=KafkaError.UNKNOWN_TOPIC_OR_PART)
                continue
            configs = {**BROKER_DEFAULTS, **self.configs.get(resource.name, {})}
            futures[resource] = _done({k: ConfigEntry(k, v) for k, v in configs.items()})
        return futures

    def delete_topics(self, names: Sequence[str], **_: Any) -> dict[str, concurrent.futures.Future[object]]:
        futures = {}
        for name in names:
            if self.topics.pop(name, None) is None:
                futures[name] = _done(error=KafkaError.UNKNOWN_TOPIC_OR_PART)
            else:
                self.deleted.append(name)
                futures[name] = _done()
        return futures


@dataclass
class _PulsarTopic:
    partitions: int
    properties: dict[str, str]
    subscriptions: list[str] = field(default_factory=list)


class FakePulsar(PulsarProvisioner):
    """A Pulsar provisioner whose admin calls are served in memory. ``topics`` by REST path
    (``persistent/tenant/namespace/name``); namespaces that exist in ``namespaces``."""

    def __init__(self) -> None:
        super().__init__(timeout=1.0)
        self.topics: dict[str, _PulsarTopic] = {}
        self.namespaces = {"public/default"}
        self.calls: list[tuple[str, str]] = []
        #: The credentials of each call (the operator's own for the broker).
        self.credentials: list[Mapping[str, str] | None] = []

    def make(self, path: str, partitions: int = 0, **properties: str) -> None:
        """A topic made by someone else."""
        self.topics[path] = _PulsarTopic(partitions, dict(properties))

    async def _call(
        self,
        policy: DeadLetterPolicy,
        method: str,
        path: str,
        body: Any = None,
        *,
        credentials: Mapping[str, str] | None,
        content_type: str = "",
    ) -> Any:
        self.calls.append((method, path))
        self.credentials.append(credentials)
        json.dumps(body)  # what is sent must be JSON
        parts = path.split("?")[0].split("/")
        topic_path = "/".join(parts[:4])
        rest = parts[4:]
        found = self.topics.get(topic_path)
        if method == "GET" and rest == ["partitions"]:
            return _NOT_FOUND if found is None else {"partitions": found.partitions}
        if method == "GET" and rest == ["properties"]:
            return _NOT_FOUND if found is None else dict(found.properties)
        if method == "PUT" and rest in ([], ["partitions"]):
            if "/".join(parts[1:3]) not in self.namespaces:
                return _NOT_FOUND
            if found is not None:
                return _EXISTS
            if rest:
                assert content_type == "application/vnd.partitioned-topic-metadata+json", content_type
                self.topics[topic_path] = _PulsarTopic(body["partitions"], dict(body.get("properties") or {}))
            else:
                self.topics[topic_path] = _PulsarTopic(0, dict(body or {}))
            return None
        if method == "PUT" and rest[:1] == ["subscription"]:
            if found is None:
                return _NOT_FOUND
            if rest[1] in found.subscriptions:
                return _EXISTS
            found.subscriptions.append(rest[1])
            return None
        if method == "DELETE":
            if found is None:
                return _NOT_FOUND
            del self.topics[topic_path]
            return None
        raise _Refused(f"{method} {path}: not served by the fake")
