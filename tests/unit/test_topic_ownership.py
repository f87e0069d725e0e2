"""status.ownedTopics and what deleting a policy deletes (``topic_ownership``): pure rules."""

from __future__ import annotations

from typing import Any

import pytest

from spark_dlq_operator.topic_ownership import (
    MAX_OWNED,
    NOT_CREATED,
    OwnedTopic,
    borrowed,
    broker_id,
    deletion,
    entries,
    merged,
    owned_here,
    recorded,
)
from tests.policy_builder import policy

KAFKA = "kafka.kafka:9092"
RETRY, DLQ = "orders-billing-RETRY", "orders-billing-DLQ"


def status_with(*owned: OwnedTopic) -> dict[str, Any]:
    return {"ownedTopics": [dict(o) for o in owned]}


def mine(name: str, kind: str = "deadLetter", broker: str = KAFKA) -> OwnedTopic:
    return OwnedTopic(broker=broker, name=name, kind=kind)  # type: ignore[typeddict-item]


def nobody(broker: str, name: str) -> str | None:
    return None


@pytest.mark.parametrize(
    ("broker_type", "address", "expected"),
    [
        pytest.param("kafka", "B:9092, a:9092", "a:9092,b:9092", id="kafka-sorted-lowercase"),
        pytest.param("kafka", "a:9092,a:9092,", "a:9092", id="kafka-duplicates"),
        pytest.param("pulsar", "Pulsar://P:6650/", "pulsar://p:6650", id="pulsar"),
    ],
)
def test_one_broker_spelt_two_ways_is_one_broker(broker_type: str, address: str, expected: str) -> None:
    assert broker_id(broker_type, address) == expected


def test_a_malformed_record_is_ignored_entry_by_entry() -> None:
    status = {
        "ownedTopics": [mine(DLQ), {"name": RETRY}, "x", {"broker": KAFKA, "name": RETRY, "kind": "source"}]
    }
    assert recorded(status) == [mine(DLQ)]
    assert recorded(None) == recorded({}) == []


def test_entries_name_the_kind_and_skip_foreign_names() -> None:
    p = policy()
    assert entries(p, [DLQ, "other", RETRY]) == [mine(DLQ), mine(RETRY, "retry")]


def test_pulsar_entries_use_full_names_and_the_service_url() -> None:
    p = policy(
        {"spec.broker": {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"}}
    )
    full = f"persistent://public/default/{DLQ}"
    assert entries(p, [full]) == [mine(full, broker="pulsar://p:6650")]


def test_merging_adds_each_topic_once_and_keeps_the_newest() -> None:
    assert merged([mine(DLQ)], [mine(DLQ), mine(RETRY, "retry")]) == [mine(DLQ), mine(RETRY, "retry")]
    many = [mine(f"t{i}") for i in range(MAX_OWNED)]
    assert merged(many, [mine("new")]) == [*many[1:], mine("new")]


def test_owned_here_is_the_record_on_the_current_broker() -> None:
    p = policy()
    status = status_with(mine(DLQ), mine(RETRY, "retry", broker="old:9092"))
    assert owned_here(p, status) == {DLQ}


def test_a_created_topic_is_deleted_a_borrowed_one_kept() -> None:
    """The attack of issue 26: a policy names an existing topic as its dead-letter topic."""
    p = policy({"spec.topics.deleteWithPolicy": True})
    plan = deletion(p, status_with(mine(RETRY, "retry")), used_by=nobody)
    assert plan.delete == (RETRY,)
    assert plan.kept == ((DLQ, NOT_CREATED),)
    assert f"topic {DLQ!r} kept: the operator did not create it for this policy" in plan.kept_message()
    assert borrowed(p, [RETRY]) == [DLQ]


def test_no_record_keeps_everything() -> None:
    """A policy from before the record (an upgrade), or recreated under its name (a new object)."""
    plan = deletion(policy(), {"phase": "Running", "retryTopic": RETRY}, used_by=nobody)
    assert plan.delete == ()
    assert [name for name, _ in plan.kept] == [RETRY, DLQ]


def test_a_renamed_topic_is_deleted_unless_another_policy_uses_it() -> None:
    p = policy({"spec.deadLetter.topic": "orders-dlq-v2"})
    status = status_with(mine(DLQ), mine("orders-dlq-v2"), mine("older-dlq"))

    def used_by(broker: str, name: str) -> str | None:
        return "payments/refunds" if name == "older-dlq" else None

    plan = deletion(p, status, used_by=used_by)
    assert plan.delete == (DLQ, "orders-dlq-v2")
    assert plan.kept == ((RETRY, NOT_CREATED), ("older-dlq", "DeadLetterPolicy payments/refunds uses it"))


def test_a_topic_on_a_broker_the_policy_no_longer_names_is_kept() -> None:
    plan = deletion(policy(), status_with(mine(DLQ, broker="old:9092")), used_by=nobody)
    assert plan.delete == ()
    assert (DLQ, "it is on broker 'old:9092', which the policy no longer names") in plan.kept
