"""The topics a policy needs (``model/topics.py``): their names and partitions, their retention,
and when an existing topic's retention is too short for what it holds."""

from __future__ import annotations

from typing import Any

import pytest

from dlq_engine.model.policy import parse_policy
from dlq_engine.model.topics import (
    DEAD_LETTER_RETENTION_MS,
    RETRY_RETENTION_MARGIN_MS,
    PulsarSubscriptionWant,
    broker_topic_name,
    longest_retry_wait_ms,
    pulsar_subscriptions,
    retention_shortfall,
    wanted_topics,
)
from tests.policy_builder import policy_document

pytestmark = pytest.mark.unit

DAY = 86_400_000


def policy(overrides: dict[str, Any] | None = None) -> Any:
    return parse_policy(policy_document(overrides or {}))


def test_a_dead_letter_topic_keeps_its_letters_until_someone_deletes_them() -> None:
    retry, dead = wanted_topics(policy(), source_partitions=3)
    assert dead.config["retention.ms"] == str(DEAD_LETTER_RETENTION_MS) == "-1"
    assert dead.keeps_ms == -1
    # The default backoff is exponential with maxDelay 10m: a week past it.
    assert retry.config["retention.ms"] == str(600_000 + RETRY_RETENTION_MARGIN_MS)
    assert retry.keeps_ms == 600_000
    assert (retry.partitions, dead.partitions) == (3, 3)


def test_the_policys_topic_configs_win() -> None:
    retry, dead = wanted_topics(
        policy(
            {
                "spec.topics.retryConfig": {"retention.ms": "3600000", "segment.ms": "60000"},
                "spec.topics.deadLetterConfig": {"retention.ms": str(30 * DAY)},
            }
        ),
        source_partitions=1,
    )
    assert retry.config == {"retention.ms": "3600000", "segment.ms": "60000"}
    assert dead.config == {"retention.ms": str(30 * DAY)}
    # A dead-letter retention the policy names is what its dead letters need.
    assert dead.keeps_ms == 30 * DAY


def test_pulsar_topics_get_no_kafka_retention() -> None:
    p = policy(
        {
            "spec.broker": {
                "type": "pulsar",
                "serviceUrl": "pulsar://pulsar:6650",
                "adminUrl": "http://pulsar:8080",
            },
        }
    )
    for want in wanted_topics(p, source_partitions=None):
        assert dict(want.config) == {}
        assert want.keeps_ms is None


@pytest.mark.parametrize(
    ("retry", "longest"),
    [
        pytest.param({}, 600_000, id="default-exponential-is-its-max-delay"),
        pytest.param({"backoff": {"type": "fixed", "delay": "2h"}}, 7_200_000, id="fixed"),
        pytest.param(
            {"backoff": {"type": "fixed", "delay": "10s", "jitter": 0.5}}, 15_000, id="fixed-jitter"
        ),
        pytest.param(
            {"backoff": {"type": "levels", "levels": ["1s", "1h", "5m"], "jitter": 0.1}},
            3_960_000,
            id="levels-largest-with-jitter",
        ),
        pytest.param(
            {
                "backoff": {"type": "fixed", "delay": "1s"},
                "rules": [
                    {"errors": ["TimeoutError"], "backoff": {"type": "exponential", "maxDelay": "6h"}},
                    {"errors": ["KeyError"], "maxRedeliverCount": 1},
                ],
            },
            21_600_000,
            id="a-rule-waits-longest",
        ),
    ],
)
def test_the_longest_retry_wait(retry: dict[str, Any], longest: int) -> None:
    p = policy({"spec.retry": retry})
    assert longest_retry_wait_ms(p.retry) == longest
    retry_topic, _ = wanted_topics(p, source_partitions=1)
    assert retry_topic.config["retention.ms"] == str(longest + RETRY_RETENTION_MARGIN_MS)


@pytest.mark.parametrize(
    ("topic", "configs", "problem"),
    [
        pytest.param(
            "dead",
            {"retention.ms": "604800000", "cleanup.policy": "delete"},
            "topic 'orders-billing-DLQ' has retention.ms=604800000 (7d): its dead letters are deleted "
            "after 7d, they must be kept until someone deletes them",
            id="dead-letters-with-the-brokers-week",
        ),
        pytest.param("dead", {"retention.ms": "-1"}, None, id="dead-letters-kept"),
        pytest.param(
            "dead", {"retention.ms": "1000", "cleanup.policy": "compact"}, None, id="compacted-not-aged"
        ),
        pytest.param("dead", {"retention.ms": "1000", "cleanup.policy": "compact,delete"}, "", id="both"),
        pytest.param(
            "retry",
            {"retention.ms": "60000"},
            "topic 'orders-billing-RETRY' has retention.ms=60000 (1m): its retry letters are deleted "
            "after 1m, they must be kept 10m",
            id="retry-shorter-than-max-delay",
        ),
        pytest.param("retry", {"retention.ms": "600000"}, None, id="retry-as-long-as-max-delay"),
        pytest.param("retry", {}, None, id="nothing-described"),
    ],
)
def test_a_retention_too_short_for_what_the_topic_holds(
    topic: str, configs: dict[str, str], problem: str | None
) -> None:
    retry, dead = wanted_topics(policy(), source_partitions=1)
    found = retention_shortfall(dead if topic == "dead" else retry, configs)
    if problem == "":
        assert found is not None
    else:
        assert found == problem


def test_a_policy_may_choose_a_shorter_dead_letter_retention() -> None:
    _, dead = wanted_topics(
        policy({"spec.topics.deadLetterConfig": {"retention.ms": "86400000"}}), source_partitions=1
    )
    assert retention_shortfall(dead, dead.config) is None
    assert retention_shortfall(dead, {"retention.ms": "3600000"}) is not None


def test_a_retry_retention_the_policy_names_is_checked_too() -> None:
    retry, _ = wanted_topics(
        policy({"spec.topics.retryConfig": {"retention.ms": "1000"}}), source_partitions=1
    )
    assert retention_shortfall(retry, retry.config) is not None


# --- names and partitions ----------------------------------------------------------------------

PULSAR = {
    "type": "pulsar",
    "serviceUrl": "pulsar://pulsar.pulsar:6650",
    "adminUrl": "http://pulsar.pulsar:8080",
}


def test_wanted_topics_follow_the_source_partitions() -> None:
    p = policy({"spec.topics.retryConfig": {"retention.ms": "1000"}, "spec.topics.replicationFactor": 3})
    retry, dlq = wanted_topics(p, source_partitions=6)
    assert (retry.name, retry.partitions, retry.replication_factor) == ("orders-billing-RETRY", 6, 3)
    assert retry.config == {"retention.ms": "1000"}
    assert (dlq.name, dlq.partitions, dlq.replication_factor) == ("orders-billing-DLQ", 6, 3)
    assert dlq.config == {"retention.ms": "-1"}  # tests/unit/test_topics.py: the retention defaults


def test_pulsar_topics_subscriptions_and_status_names() -> None:
    p = policy({"spec.broker": PULSAR, "spec.source.topic": "shop/orders/orders"})
    retry, dlq = wanted_topics(p, source_partitions=0)
    assert (retry.name, retry.partitions, dlq.name) == (
        "shop/orders/orders-billing-RETRY",
        0,
        "shop/orders/orders-billing-DLQ",
    )
    assert pulsar_subscriptions(p) == (
        PulsarSubscriptionWant("shop/orders/orders-billing-RETRY", "billing"),
        PulsarSubscriptionWant("shop/orders/orders-billing-DLQ", "spark-dlq-keep"),
    )
    assert broker_topic_name(p, p.dead_letter_topic) == "persistent://shop/orders/orders-billing-DLQ"
    assert broker_topic_name(policy(), "orders-billing-DLQ") == "orders-billing-DLQ"


def test_wanted_topics_partitions_from_the_policy_win() -> None:
    retry, dlq = wanted_topics(policy({"spec.topics.partitions": 2}), source_partitions=6)
    assert (retry.partitions, dlq.partitions) == (2, 2)
