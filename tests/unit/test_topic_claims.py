"""The index of which policy uses which retry and dead-letter topic (``topic_claims``): who keeps
a topic, what the others are told, and how the index follows listings and deletions."""

from __future__ import annotations

from typing import Any

import pytest

from dlq_engine.model import parse_policy
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topic_claims import TopicClaims, claim_of
from tests.policy_builder import policy_document

KAFKA = "kafka.kafka:9092"


def body(
    name: str,
    *,
    namespace: str = "payments",
    created: str = "2026-11-20T00:00:00Z",
    uid: str = "",
    generation: int = 1,
    status: dict[str, Any] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    document = policy_document(
        {
            "metadata.name": name,
            "metadata.namespace": namespace,
            "metadata.uid": uid or f"uid-{namespace}-{name}",
            "metadata.generation": generation,
            "metadata.creationTimestamp": created,
            **overrides,
        }
    )
    if status is not None:
        document["status"] = status
    return document


def claim(index: TopicClaims, document: dict[str, Any]) -> Any:
    return index.claim(claim_of(parse_policy(document), document))


def running_on(retry: str, dlq: str, *, reason: str = "TopicsReady", **extra: Any) -> dict[str, Any]:
    return {
        "retryTopic": retry,
        "deadLetterTopic": dlq,
        "conditions": [{"type": "TopicsReady", "status": "True", "reason": reason}],
        **extra,
    }


def test_the_older_policy_keeps_a_shared_dead_letter_topic() -> None:
    """Listed together (at start-up, or each resync), neither running on it yet: the older
    one keeps the topic, whichever is reconciled first."""
    older = body("billing", created="2026-11-20T00:00:00Z")
    newer = body(
        "refunds",
        namespace="shop",
        created="2026-11-21T00:00:00Z",
        **{"spec.deadLetter.topic": "orders-billing-DLQ", "spec.retry.topic": "refunds-retry"},
    )
    for first, second in ((older, newer), (newer, older)):
        index = TopicClaims()
        index.rebuild([first, second])
        refused = claim(index, newer)
        assert claim(index, older) is None
        assert index.refusal("shop/refunds") is not None
    assert refused is not None
    assert refused.message == (
        "spec.deadLetter.topic: topic 'orders-billing-DLQ' on broker 'kafka.kafka:9092' is the "
        "dead-letter topic of DeadLetterPolicy payments/billing, which keeps it (that policy is "
        "older): a retry or dead-letter topic belongs to one policy; name another"
    )
    assert Reason.TOPIC_IN_USE == "TopicInUse"


def test_a_policy_that_got_a_topic_keeps_it_against_an_older_one_that_names_it_later() -> None:
    """An older policy edited to name a topic a newer one already uses is the one refused."""
    index = TopicClaims()
    assert claim(index, body("refunds", created="2026-11-21T00:00:00Z")) is None
    refused = claim(index, body("billing", namespace="a-team", created="2026-11-01T00:00:00Z"))
    assert refused is not None
    assert refused.other == "payments/refunds"
    assert "(that policy already uses it)" in refused.message


def test_a_retry_topic_that_is_anothers_dead_letter_topic_is_refused() -> None:
    index = TopicClaims()
    assert claim(index, body("billing")) is None
    refused = claim(
        index,
        body(
            "refunds",
            created="2026-11-21T00:00:00Z",
            **{"spec.retry.topic": "orders-billing-DLQ", "spec.deadLetter.topic": "r-dlq"},
        ),
    )
    assert refused is not None
    assert refused.message.startswith(
        "spec.retry.topic: topic 'orders-billing-DLQ' on broker 'kafka.kafka:9092' is the dead-letter topic of "
        "DeadLetterPolicy payments/billing"
    )


def test_same_age_goes_by_namespace_and_name() -> None:
    index = TopicClaims()
    index.rebuild([body("a", namespace="z-team"), body("b")])
    refused = claim(index, body("a", namespace="z-team"))
    assert refused is not None
    assert refused.other == "payments/b"
    assert "created at the same time and comes first by namespace/name" in refused.message


def test_the_creator_keeps_its_topic_against_an_older_policy() -> None:
    """An older policy edited to name a topic a newer one created is refused, not the creator."""
    index = TopicClaims()
    creator = body(
        "refunds",
        created="2026-11-21T00:00:00Z",
        status={"ownedTopics": [{"broker": KAFKA, "name": "orders-billing-DLQ", "kind": "deadLetter"}]},
        **{"spec.retry.topic": "r-retry"},
    )
    claim(index, creator)
    refused = claim(index, body("billing", created="2026-11-01T00:00:00Z"))
    assert refused is not None
    assert refused.other == "payments/refunds"
    assert "(the operator created it for that policy)" in refused.message


def test_the_policy_already_using_a_topic_keeps_it_against_an_older_one() -> None:
    index = TopicClaims()
    using = body(
        "refunds",
        created="2026-11-21T00:00:00Z",
        status=running_on("r-retry", "orders-billing-DLQ"),
        **{"spec.retry.topic": "r-retry"},
    )
    claim(index, using)
    refused = claim(index, body("billing", created="2026-11-01T00:00:00Z"))
    assert refused is not None
    assert "(that policy already uses it)" in refused.message


def test_a_refused_policy_does_not_count_as_using_the_topic() -> None:
    index = TopicClaims()
    refused_before = body(
        "refunds",
        created="2026-11-21T00:00:00Z",
        status=running_on("x", "orders-billing-DLQ", reason=Reason.TOPIC_IN_USE),
        **{"spec.retry.topic": "x"},
    )
    claim(index, body("billing"))
    assert claim(index, refused_before) is not None


def test_two_policies_sharing_before_the_check_existed_leave_it_to_the_older() -> None:
    """An upgrade: both statuses say they run on the topic; the older keeps it."""
    index = TopicClaims()
    shared = running_on("orders-billing-RETRY", "orders-billing-DLQ")
    index.rebuild([body("b", created="2026-11-21T00:00:00Z", status=shared), body("a", status=shared)])
    assert index.refusal("payments/a") is None
    refused = index.refusal("payments/b")
    assert refused is not None
    assert refused.kind == "retry"
    assert refused.other == "payments/a"


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"spec.broker.bootstrapServers": "other-kafka:9092"}, id="another-broker"),
        pytest.param({"spec.source.subscription": "refunds"}, id="other-names"),
    ],
)
def test_no_conflict_on_another_broker_or_other_names(other: dict[str, Any]) -> None:
    index = TopicClaims()
    claim(index, body("billing"))
    assert claim(index, body("refunds", **other)) is None


def test_the_same_broker_spelt_otherwise_is_the_same_broker() -> None:
    index = TopicClaims()
    claim(index, body("billing", **{"spec.broker.bootstrapServers": "b:9092,a:9092"}))
    assert (
        claim(
            index,
            body(
                "refunds",
                created="2026-11-21T00:00:00Z",
                **{"spec.broker.bootstrapServers": "A:9092, b:9092"},
            ),
        )
        is not None
    )


def test_pulsar_short_and_full_names_are_one_topic() -> None:
    broker = {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"}
    index = TopicClaims()
    claim(index, body("billing", **{"spec.broker": broker}))
    refused = claim(
        index,
        body(
            "refunds",
            created="2026-11-21T00:00:00Z",
            **{
                "spec.broker": broker,
                "spec.deadLetter.topic": "persistent://public/default/orders-billing-DLQ",
                "spec.retry.topic": "r",
            },
        ),
    )
    assert refused is not None
    assert "topic 'persistent://public/default/orders-billing-DLQ'" in refused.message


def test_a_deleted_or_moved_policy_frees_its_topics() -> None:
    index = TopicClaims()
    older = body("billing")
    newer = body("refunds", created="2026-11-21T00:00:00Z")
    claim(index, older)
    assert claim(index, newer) is not None
    index.release("payments/billing", uid="another-object")  # not the indexed object: nothing
    assert index.refusal("payments/refunds") is not None
    index.release("payments/billing", uid=older["metadata"]["uid"])
    assert index.refusal("payments/refunds") is None

    claim(index, older)  # back, but it moves to other topics
    moved = body("billing", generation=2, **{"spec.source.subscription": "billing-v2"})
    assert claim(index, moved) is None
    assert index.refusal("payments/refunds") is None
    assert index.user_of((KAFKA, "orders-billing-DLQ"), besides="payments/billing") is None  # refused
    assert claim(index, newer) is None  # its next reconcile: the topics are free
    assert index.user_of((KAFKA, "orders-billing-DLQ"), besides="payments/billing") == "payments/refunds"
    assert index.user_of((KAFKA, "orders-billing-DLQ"), besides="payments/refunds") is None


def test_a_rebuild_drops_unlisted_policies_and_keeps_what_this_process_knows_newer() -> None:
    index = TopicClaims()
    claim(index, body("gone"))
    newer_here = body("billing", generation=3, **{"spec.source.subscription": "v3"})
    claim(index, newer_here)
    index.rebuild([body("billing", generation=2)])  # a listing from before the change
    assert len(index) == 1
    assert index.user_of((KAFKA, "orders-v3-DLQ"), besides="x") == "payments/billing"
    assert index.user_of((KAFKA, "orders-billing-DLQ"), besides="x") is None


def test_a_policy_whose_spec_no_longer_parses_keeps_the_topics_its_job_runs_on() -> None:
    index = TopicClaims()
    invalid = body(
        "billing",
        status=running_on("orders-billing-RETRY", "orders-billing-DLQ"),
        **{"spec.retry.backoff.delay": "soon"},
    )
    index.rebuild([invalid, body("refunds", created="2026-11-21T00:00:00Z")])
    refused = index.refusal("payments/refunds")
    assert refused is not None
    assert refused.other == "payments/billing"


def test_owned_topics_learnt_here_count_before_the_status_says_so() -> None:
    index = TopicClaims()
    document = body("refunds", created="2026-11-21T00:00:00Z")
    claim(index, document)
    index.record_owned("payments/refunds", [(KAFKA, "orders-billing-DLQ")])
    claim(index, document)  # the status read again, still without the record
    refused = claim(index, body("billing", created="2026-11-01T00:00:00Z"))
    assert refused is not None
    assert refused.other == "payments/refunds"


def test_a_rebuild_from_a_listing_older_than_a_claim_or_a_deletion_keeps_what_came_after() -> None:
    """The resync lists, then rebuilds: a policy created or deleted in between is as the
    reconcile and the deletion left it, not as the listing saw it."""
    index = TopicClaims()
    gone = body("gone", **{"spec.source.subscription": "gone"})
    claim(index, gone)
    listed_at = index.now()
    new = body("new", created="2026-11-21T00:00:00Z")
    claim(index, new)  # created after the listing
    index.release("payments/gone")  # deleted after the listing
    index.rebuild([gone], listed_at=listed_at)
    assert index.user_of((KAFKA, "orders-billing-DLQ"), besides="x") == "payments/new"
    assert index.user_of((KAFKA, "orders-gone-DLQ"), besides="x") is None
