"""The retry and dead-letter topics a policy needs, as data: the operator creates them through
the Admin API or Strimzi, ``dlq-engine run --create-topics`` through the connector's admin
client; both from this one description."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dlq_engine.model.policy import DeadLetterPolicy


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
