"""The retry and dead-letter topics a policy needs, as data: the operator creates them through
the Admin API or Strimzi, ``dlq-engine run --create-topics`` through the connector's admin
client; both from this one description.

Kafka deletes records by age (``retention.ms``, commonly the broker's seven days) whether anyone
has read them or not. Dead letters wait for a person, for as long as that takes, so a Kafka
dead-letter topic is created with ``retention.ms=-1`` (never deleted by age); a retry letter
must outlive the longest wait the policy can give it, so a retry topic keeps records that long
plus ``RETRY_RETENTION_MARGIN_MS``. ``spec.topics.retryConfig``/``deadLetterConfig`` override
either. An existing topic is never changed: ``retention_shortfall`` names one that keeps its
records for less than they need, which the provisioners report (docs/reference.md, section 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from dlq_engine.model.durations import format_ms
from dlq_engine.model.policy import (
    PULSAR_KEEP_SUBSCRIPTION,
    BackoffSpec,
    DeadLetterPolicy,
    RetrySpec,
    pulsar_topic,
)

#: The Kafka topic configs that decide when the broker deletes a record by age.
RETENTION_MS: Final = "retention.ms"
CLEANUP_POLICY: Final = "cleanup.policy"
#: ``retention.ms`` of a Kafka dead-letter topic: no limit. A dead letter is kept until a person
#: redrives or deletes it; the broker's default (commonly 7 days) would delete the ones nobody
#: has looked at yet.
DEAD_LETTER_RETENTION_MS: Final = -1
#: A retry topic keeps a record this much longer than the longest wait the policy can give it:
#: the engine reads a retry letter at once and holds it in its checkpointed state until it is
#: due, so the topic needs it only until then; the margin covers a job that is suspended, down
#: or behind for up to a week (the broker's usual default) when a retry letter is written.
RETRY_RETENTION_MARGIN_MS: Final = 7 * 86_400_000


@dataclass(frozen=True, slots=True)
class TopicWant:
    """A topic the policy needs. ``partitions`` None: not known (the broker default applies).
    ``replication_factor`` -1: the broker's default."""

    name: str
    partitions: int | None
    replication_factor: int
    config: Mapping[str, str]
    #: How long the topic must keep a record (ms; -1: until someone deletes it); None: not
    #: checked (a Pulsar topic: its subscriptions keep what it holds).
    keeps_ms: int | None = None
    #: What the topic holds, for messages: ``dead letters`` or ``retry letters``.
    holds: str = "records"

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
    """The retry and dead-letter topics: ``topics.partitions``, else as many as the source; on
    Kafka with the retention each needs unless the policy's topic configs name one."""
    partitions = policy.topics.partitions or source_partitions
    rf = policy.topics.replication_factor
    retry_config, dead_letter_config = (
        dict(policy.topics.retry_config),
        dict(policy.topics.dead_letter_config),
    )
    if policy.is_pulsar:
        return (
            TopicWant(policy.retry_topic, partitions, rf, dict(sorted(retry_config.items()))),
            TopicWant(policy.dead_letter_topic, partitions, rf, dict(sorted(dead_letter_config.items()))),
        )
    retry_config.setdefault(RETENTION_MS, str(retry_retention_ms(policy.retry)))
    dead_letter_config.setdefault(RETENTION_MS, str(DEAD_LETTER_RETENTION_MS))
    # The dead-letter topic must keep what its config asks for: a policy that names a
    # retention.ms for it has chosen how long dead letters are kept.
    chosen = _retention(dead_letter_config.get(RETENTION_MS))
    return (
        TopicWant(
            policy.retry_topic,
            partitions,
            rf,
            dict(sorted(retry_config.items())),
            keeps_ms=longest_retry_wait_ms(policy.retry),
            holds="retry letters",
        ),
        TopicWant(
            policy.dead_letter_topic,
            partitions,
            rf,
            dict(sorted(dead_letter_config.items())),
            keeps_ms=DEAD_LETTER_RETENTION_MS if chosen is None else chosen,
            holds="dead letters",
        ),
    )


def longest_backoff_ms(backoff: BackoffSpec) -> int:
    """The longest wait ``backoff`` can give (routing/backoff.py): ``maxDelay`` for exponential
    (its cap, after jitter too), else the (largest) delay stretched by the most jitter can add."""
    if backoff.type == "exponential":
        return backoff.max_delay_ms
    base = max(backoff.levels_ms or (backoff.delay_ms,)) if backoff.type == "levels" else backoff.delay_ms
    return round(base * (1.0 + backoff.jitter))


def longest_retry_wait_ms(retry: RetrySpec) -> int:
    """The longest a retry letter of the policy waits before it is due: the longest backoff of
    ``retry.backoff`` and of every ``retry.rules`` entry. A processor's own ``Retry(delay=...)``
    is not bounded by the policy and not counted: the engine reads a retry letter as soon as it
    is written and keeps it in its checkpointed state until due, so only a job that is down
    longer than the retention loses one (docs/reference.md, section 2).

    This is the one place a bound on retries in time enters the topics' retention: a budget
    such as ``retry.maxRetryDuration`` (issue 27, item 4) that caps a retry's due time caps this
    with ``min(longest, budget)``; one that only dead-letters on the next read does not."""
    return max(longest_backoff_ms(b) for b in (retry.backoff, *(rule.backoff for rule in retry.rules)))


def retry_retention_ms(retry: RetrySpec) -> int:
    """``retention.ms`` of a Kafka retry topic the operator creates (``RETRY_RETENTION_MARGIN_MS``)."""
    return longest_retry_wait_ms(retry) + RETRY_RETENTION_MARGIN_MS


def _retention(text: str | None) -> int | None:
    """A ``retention.ms`` value as milliseconds (-1: no limit); None when absent or unreadable."""
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return None
    if value is None:
        return None
    return -1 if value < 0 else value


def _describe_retention(ms: int) -> str:
    return f"{RETENTION_MS}={ms} ({'no limit' if ms < 0 else format_ms(ms)})"


def retention_shortfall(want: TopicWant, configs: Mapping[str, str | None]) -> str | None:
    """Why ``want``'s topic, with these topic ``configs`` (as the broker describes them, or as
    they are written), may delete records it must keep; None when it keeps them long enough.
    A topic whose ``cleanup.policy`` does not include ``delete`` deletes nothing by age."""
    if want.keeps_ms is None:
        return None
    cleanup = configs.get(CLEANUP_POLICY) or "delete"
    if "delete" not in [part.strip() for part in cleanup.split(",")]:
        return None
    kept = _retention(configs.get(RETENTION_MS))
    if kept is None or kept < 0:
        return None
    if want.keeps_ms >= 0 and kept >= want.keeps_ms:
        return None
    needed = "kept until someone deletes them" if want.keeps_ms < 0 else f"kept {format_ms(want.keeps_ms)}"
    return (
        f"topic {want.name!r} has {_describe_retention(kept)}: its {want.holds} are deleted after "
        f"{format_ms(kept)}, they must be {needed}"
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
