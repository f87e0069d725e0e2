"""Where a redrive may write on Pulsar: an author's ``destination.topic`` stays in the tenant and
namespace of the policy's dead-letter topic (a red-team case on the pure rule)."""

from __future__ import annotations

import pytest

from dlq_engine.job.redrive_topics import destination_topic
from dlq_engine.model import parse_policy
from dlq_engine.model.policy_parser import topic_name_problem
from tests.policy_builder import policy_document

pytestmark = pytest.mark.unit

PULSAR = {
    "spec.broker": {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"},
    "spec.source.topic": "persistent://payments/shop/orders",
}


def test_a_pulsar_destination_topic_stays_in_the_dead_letter_topics_namespace() -> None:
    policy = parse_policy(policy_document(PULSAR))
    assert destination_topic(policy, "topic", "fixed-orders") == "persistent://payments/shop/fixed-orders"
    assert destination_topic(policy, "retry", "") == policy.retry_topic


@pytest.mark.parametrize("name", ["persistent://other/ns/orders", "other/ns/orders", "..", "a b"])
def test_a_destination_naming_another_place_is_refused(name: str) -> None:
    assert topic_name_problem(name) is not None
