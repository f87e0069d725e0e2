"""The ``admin`` provisioner: missing topics created through the Kafka Admin API (confluent-kafka,
whose blocking calls run in a thread), an existing one never changed (fewer partitions than wanted
is drift, reported), deletion of the topics it is told to delete.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.cimpl import NewTopic

from dlq_engine.model import DeadLetterPolicy
from dlq_engine.model.topics import (
    CLEANUP_POLICY,
    RETENTION_MS,
    TopicWant,
    retention_shortfall,
    wanted_topics,
)
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topics.report import (
    BrokerUnavailable,
    Credentials,
    TopicsReport,
    ready_report,
    source_missing_report,
)

T = TypeVar("T")

#: librdkafka errors that mean "cannot talk to the cluster", as opposed to a refusal.
_UNREACHABLE: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)


class AdminProvisioner:
    """Creates missing topics through the Kafka Admin API; deletes the ones it is told to.

    The operator's identity on a broker is ``extra_config`` (operator-wide) overlaid with the
    ``credentials`` a call passes for that broker (a class's operator Secret); one client per
    broker and identity. ``client_factory`` builds a client from its librdkafka settings."""

    name: Final = "admin"

    def __init__(
        self,
        *,
        timeout: float,
        extra_config: Mapping[str, str] | None = None,
        client_factory: Callable[[dict[str, Any]], Any] = AdminClient,
    ) -> None:
        self._timeout = timeout
        self._extra = dict(extra_config or {})
        self._factory = client_factory
        self._clients: dict[tuple[str, tuple[tuple[str, str], ...]], AdminClient] = {}

    def close(self) -> None:
        """Drop the clients (librdkafka closes a client when it is garbage-collected)."""
        self._clients.clear()

    def _client(self, bootstrap_servers: str, credentials: Credentials = None) -> AdminClient:
        key = (bootstrap_servers, tuple(sorted((credentials or {}).items())))
        client = self._clients.get(key)
        if client is None:
            conf: dict[str, Any] = {
                "bootstrap.servers": bootstrap_servers,
                "client.id": "spark-dlq-operator",
                "socket.connection.setup.timeout.ms": int(self._timeout * 1000),
                "logger": logging.getLogger(f"{__name__}.librdkafka"),
                **self._extra,
                **(credentials or {}),
            }
            client = self._clients[key] = self._factory(conf)
        return client

    async def _run(self, admin: AdminClient, call: Callable[[], T]) -> T:
        """Run a blocking client call in a thread, then serve the client's queued logs."""
        try:
            return await asyncio.get_running_loop().run_in_executor(None, call)
        finally:
            admin.poll(0)

    async def existing(self, policy: DeadLetterPolicy, *, credentials: Credentials = None) -> dict[str, int]:
        """Every topic of the policy's cluster (that the operator may describe) and its
        partition count."""
        admin = self._client(policy.broker.bootstrap_servers, credentials)
        try:
            metadata = await self._run(admin, lambda: admin.list_topics(timeout=self._timeout))
        except KafkaException as error:
            raise BrokerUnavailable(
                f"the Kafka cluster at {policy.broker.bootstrap_servers} did not answer: {_describe(error)}"
            ) from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

    async def ensure(self, policy: DeadLetterPolicy, *, credentials: Credentials = None) -> TopicsReport:
        """Create the missing topics; ``owned`` is what this call created (an existing topic,
        and a create answered TOPIC_ALREADY_EXISTS, are someone's, maybe this policy's)."""
        partitions = await self.existing(policy, credentials=credentials)
        source_partitions = partitions.get(policy.source.topic)
        if not policy.topics.partitions and source_partitions is None:
            return source_missing_report(policy.source.topic)
        wants = wanted_topics(policy, source_partitions=source_partitions)
        missing = [w for w in wants if w.name not in partitions]
        created: list[str] = []
        problems: list[str] = []
        if missing:
            admin = self._client(policy.broker.bootstrap_servers, credentials)
            new = [
                NewTopic(
                    w.name,
                    num_partitions=w.partitions or -1,
                    replication_factor=w.replication_factor,
                    config=dict(w.config),
                )
                for w in missing
            ]
            futures = admin.create_topics(new, request_timeout=self._timeout, operation_timeout=self._timeout)
            for name, future in futures.items():
                try:
                    await self._run(admin, lambda f=future: f.result(timeout=self._timeout * 2))  # type: ignore[misc]
                    created.append(name)
                except KafkaException as error:
                    code = _code(error)
                    if code == KafkaError.TOPIC_ALREADY_EXISTS:
                        continue
                    if code in _UNREACHABLE:
                        raise BrokerUnavailable(f"creating topic {name!r}: {_describe(error)}") from None
                    problems.append(f"creating topic {name!r} failed: {_describe(error)}")
                except TimeoutError:
                    raise BrokerUnavailable(f"creating topic {name!r} timed out") from None
        if problems:
            return TopicsReport(
                False, Reason.CREATE_FAILED, "; ".join(problems), created=tuple(created), owned=tuple(created)
            )
        drift = tuple(
            f"topic {w.name!r} has {partitions[w.name]} partitions, {w.partitions} wanted "
            "(the operator never changes an existing topic's partitions)"
            for w in wants
            if w.name in partitions and w.partitions and partitions[w.name] < w.partitions
        )
        short = await self._short_retention(policy, wants, created=created, credentials=credentials)
        return ready_report(
            f"topics {wants[0].name!r} and {wants[1].name!r} exist",
            created=created,
            owned=created,
            drift=drift,
            short_retention=short,
        )

    async def _short_retention(
        self,
        policy: DeadLetterPolicy,
        wants: Sequence[TopicWant],
        *,
        created: Sequence[str],
        credentials: Credentials,
    ) -> list[str]:
        """``retention_shortfall`` of each topic: of the configs it was created with, or, for a
        topic that existed, of the retention the broker describes (its own or the broker's
        default). Never changes a topic. A broker that does not answer raises BrokerUnavailable."""
        found = {w.name: dict(w.config) for w in wants if w.name in created}
        existing = [w.name for w in wants if w.name not in created]
        if existing:
            admin = self._client(policy.broker.bootstrap_servers, credentials)
            futures = admin.describe_configs(
                [ConfigResource(ConfigResource.Type.TOPIC, name) for name in existing],
                request_timeout=self._timeout,
            )
            for resource, future in futures.items():
                try:
                    entries = await self._run(admin, lambda f=future: f.result(timeout=self._timeout * 2))  # type: ignore[misc]
                except KafkaException as error:
                    if _code(error) in _UNREACHABLE:
                        raise BrokerUnavailable(
                            f"describing topic {resource.name!r}: {_describe(error)}"
                        ) from None
                    continue  # not allowed to describe it (or gone): nothing is known
                except TimeoutError:
                    raise BrokerUnavailable(f"describing topic {resource.name!r} timed out") from None
                found[resource.name] = {
                    key: entries[key].value for key in (RETENTION_MS, CLEANUP_POLICY) if key in entries
                }
        return [problem for w in wants if (problem := retention_shortfall(w, found.get(w.name, {})))]

    async def delete(
        self, policy: DeadLetterPolicy, names: Sequence[str], *, credentials: Credentials = None
    ) -> list[str]:
        """Delete the topics ``names`` on the policy's cluster (the ones the operator created for
        it: ``topic_ownership.deletion``); the names that were deleted."""
        if not names:
            return []
        admin = self._client(policy.broker.bootstrap_servers, credentials)
        try:
            futures = admin.delete_topics(
                list(names), request_timeout=self._timeout, operation_timeout=self._timeout
            )
        except KafkaException as error:
            raise BrokerUnavailable(_describe(error)) from None
        deleted: list[str] = []
        for name, future in futures.items():
            try:
                await self._run(admin, lambda f=future: f.result(timeout=self._timeout * 2))  # type: ignore[misc]
                deleted.append(name)
            except KafkaException as error:
                code = _code(error)
                if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise BrokerUnavailable(f"deleting topic {name!r}: {_describe(error)}") from None
            except TimeoutError:
                raise BrokerUnavailable(f"deleting topic {name!r} timed out") from None
        return deleted


def _code(error: KafkaException) -> int | None:
    if error.args and isinstance(error.args[0], KafkaError):
        return int(error.args[0].code())
    return None


def _describe(error: KafkaException) -> str:
    if error.args and isinstance(error.args[0], KafkaError):
        return str(error.args[0].str())
    return str(error)
