"""The retry and dead-letter topics a policy needs, as data: the operator creates them through
the Admin API or Strimzi, ``dlq-engine run --create-topics`` through the connector's admin
client; both from this one description."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dlq_engine.model.policy import PULSAR_KEEP_SUBSCRIPTION, DeadLetterPolicy, pulsar_topic


@dataclass(frozen=True, slots=True)
class TopicWant:
    """A topic the policy needs. ``partitions`` None: not known (the broker default applies).
    ``replication_factor`` -1: the broker's default."""

    name: str
    partitions: int | None
    replication_factor: int
    config: Mapping[str, str]

    def describe(self) -> str:
        """``3 partitions, replication factor 1, retention.ms=...`` for a log line."""
        parts = [f"{self.partitions} partitions" if self.partitions else "the broker's default partitions"]
        parts.append(
            f"replication factor {self.replication_factor}"
            if self.replication_factor > 0
            else "the broker's default replication factor"
        )
        parts += [f"{key}={value}" for key, value in self.config.items()]
        return ", ".join(parts)


def broker_topic_name(policy: DeadLetterPolicy, name: str) -> str:
    """The topic's name as its broker knows it, for status and messages: on Pulsar the fully
    qualified ``persistent://tenant/namespace/name``, on Kafka the name itself."""
    return pulsar_topic(name).full_name if policy.is_pulsar else name


def wanted_topics(policy: DeadLetterPolicy, *, source_partitions: int | None) -> tuple[TopicWant, TopicWant]:
    """The retry and dead-letter topics: ``topics.partitions``, else as many as the source."""
    partitions = policy.topics.partitions or source_partitions
    rf = policy.topics.replication_factor
    return (
        TopicWant(policy.retry_topic, partitions, rf, dict(sorted(policy.topics.retry_config.items()))),
        TopicWant(
            policy.dead_letter_topic, partitions, rf, dict(sorted(policy.topics.dead_letter_config.items()))
        ),
    )


@dataclass(frozen=True, slots=True)
class PulsarSubscriptionWant:
    """A durable subscription the operator creates on a Pulsar topic, from its earliest message."""

    topic: str
    subscription: str


def pulsar_subscriptions(policy: DeadLetterPolicy) -> tuple[PulsarSubscriptionWant, ...]:
    """Pulsar deletes a message once every durable subscription has acknowledged it (and
    retention allows), and one written while a topic has no subscription at all. So the retry
    topic gets the engine's own subscription (``source.subscription``, as Pulsar's clients
    consume their retry letter topic) before the engine first writes to it, and the dead-letter
    topic one that nothing ever reads through: dead letters stay until a person deletes them."""
    return (
        PulsarSubscriptionWant(policy.retry_topic, policy.source.subscription),
        PulsarSubscriptionWant(policy.dead_letter_topic, PULSAR_KEEP_SUBSCRIPTION),
    )
