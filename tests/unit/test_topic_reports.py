"""What the Kafka provisioners of ``topics.py`` report, called directly on an in-memory Kafka
and API server: a missing source, drift, a refused or unanswered create, a broker that cannot
describe or delete, and Strimzi's missing cluster, missing CRD, name conflict, and readiness;
the merge patch that brings a KafkaTopic to what the operator wants. Ownership and sharing,
through the reconcile, are in ``test_topics.py``."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from dlq_engine.model import DeadLetterPolicy
from spark_dlq_operator import naming
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topics import (
    AdminProvisioner,
    BrokerUnavailable,
    StrimziProvisioner,
    TopicsReport,
)
from spark_dlq_operator.topics.strimzi import _kafka_topic_patch
from tests.policy_builder import policy
from tests.unit.fake_brokers import FakeKafka
from tests.unit.fake_kube import FakeKube

T = TypeVar("T")
RETRY, DLQ = "orders-billing-RETRY", "orders-billing-DLQ"
OWNER = naming.Owner(name="orders-billing", namespace="payments", uid="uid-1")
KAFKA_TOPICS = "kafkatopics"


def run(call: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(call)


def _failed(code: int) -> concurrent.futures.Future[object]:
    future: concurrent.futures.Future[object] = concurrent.futures.Future()
    future.set_exception(KafkaException(KafkaError(code)))
    return future


class Kafka(FakeKafka):
    """``FakeKafka`` whose calls fail on cue: ``errors[(call, topic)]`` is the error code that
    call answers for the topic; ``errors[(call, "")]`` fails the whole call."""

    def __init__(self, topics: dict[str, int], errors: dict[tuple[str, str], int] | None = None) -> None:
        super().__init__(topics=topics)
        self.errors = errors or {}

    def _whole(self, call: str) -> None:
        if (call, "") in self.errors:
            raise KafkaException(KafkaError(self.errors[(call, "")]))

    def list_topics(self, timeout: float) -> Any:
        self._whole("list")
        return super().list_topics(timeout)

    def create_topics(self, new: Sequence[Any], **kwargs: Any) -> Any:
        failing = [t for t in new if ("create", t.topic) in self.errors]
        futures = super().create_topics([t for t in new if t not in failing], **kwargs)
        return {**futures, **{t.topic: _failed(self.errors[("create", t.topic)]) for t in failing}}

    def describe_configs(self, resources: Sequence[Any], **kwargs: Any) -> Any:
        failing = [r for r in resources if ("describe", r.name) in self.errors]
        futures = super().describe_configs([r for r in resources if r not in failing], **kwargs)
        return {**futures, **{r: _failed(self.errors[("describe", r.name)]) for r in failing}}

    def delete_topics(self, names: Sequence[str], **kwargs: Any) -> Any:
        self._whole("delete")
        failing = [n for n in names if ("delete", n) in self.errors]
        futures = super().delete_topics([n for n in names if n not in failing], **kwargs)
        return {**futures, **{n: _failed(self.errors[("delete", n)]) for n in failing}}


def ensure(kafka: Kafka, the_policy: DeadLetterPolicy | None = None) -> TopicsReport:
    admin = AdminProvisioner(timeout=1.0, client_factory=kafka.client)
    return run(admin.ensure(the_policy or policy()))


# ---------------------------------------------------------------------------------------------
# The Admin API


def test_without_the_source_and_without_partitions_nothing_is_created() -> None:
    kafka = Kafka(topics={})
    report = ensure(kafka)
    assert (report.ready, report.reason) == (False, Reason.SOURCE_TOPIC_MISSING)
    assert "'orders' does not exist" in report.message
    assert kafka.created == []


def test_with_partitions_the_topics_are_created_without_the_source() -> None:
    kafka = Kafka(topics={})
    report = ensure(kafka, policy({"spec.topics.partitions": 4}))
    assert (report.ready, report.reason, report.created) == (True, Reason.TOPICS_READY, (RETRY, DLQ))
    assert (kafka.topics[RETRY], kafka.topics[DLQ]) == (4, 4)


def test_fewer_partitions_than_wanted_is_drift_reported_not_fixed() -> None:
    kafka = Kafka(topics={"orders": 6, RETRY: 2, DLQ: 6})
    kafka.configs[RETRY] = {"retention.ms": "-1"}
    kafka.configs[DLQ] = {"retention.ms": "-1"}
    report = ensure(kafka)
    assert (report.ready, report.reason, report.created, report.owned) == (True, Reason.TOPICS_READY, (), ())
    assert report.drift == (
        f"topic {RETRY!r} has 2 partitions, 6 wanted (the operator never changes an existing topic's partitions)",
    )
    assert "; drift: " in report.message
    assert kafka.topics[RETRY] == 2


def test_a_refused_create_fails_the_report_and_keeps_what_was_created() -> None:
    kafka = Kafka(topics={"orders": 2}, errors={("create", DLQ): KafkaError.POLICY_VIOLATION})
    report = ensure(kafka)
    assert (report.ready, report.reason) == (False, Reason.CREATE_FAILED)
    assert report.message.startswith(f"creating topic {DLQ!r} failed: ")
    assert (report.created, report.owned) == ((RETRY,), (RETRY,))


def test_a_create_someone_else_won_is_success_without_ownership() -> None:
    kafka = Kafka(topics={"orders": 2}, errors={("create", DLQ): KafkaError.TOPIC_ALREADY_EXISTS})
    report = ensure(kafka)
    assert (report.ready, report.created, report.owned) == (True, (RETRY,), (RETRY,))


@pytest.mark.parametrize(
    ("errors", "names"),
    [
        pytest.param(
            {("list", ""): KafkaError._TRANSPORT}, "the Kafka cluster at kafka.kafka:9092", id="list"
        ),
        pytest.param({("create", DLQ): KafkaError._TIMED_OUT}, f"creating topic {DLQ!r}", id="create"),
    ],
)
def test_a_broker_that_does_not_answer_is_unavailable(errors: dict[tuple[str, str], int], names: str) -> None:
    with pytest.raises(BrokerUnavailable, match=names):
        ensure(Kafka(topics={"orders": 2}, errors=errors))


def existing(errors: dict[tuple[str, str], int] | None = None) -> Kafka:
    """Both topics exist; the retry topic keeps its records for ever, the dead-letter topic has
    the broker's default (7 days)."""
    kafka = Kafka(topics={"orders": 2, RETRY: 2, DLQ: 2}, errors=errors)
    kafka.configs[RETRY] = {"retention.ms": "-1"}
    return kafka


def test_retention_is_read_where_allowed_and_an_unanswered_describe_is_unavailable() -> None:
    report = ensure(existing())
    assert report.reason == Reason.SHORT_RETENTION
    assert [finding.split(" has ")[0] for finding in report.short_retention] == [f"topic {DLQ!r}"]

    # Not allowed to describe it: nothing is known of it, nothing is reported.
    report = ensure(existing({("describe", DLQ): KafkaError.TOPIC_AUTHORIZATION_FAILED}))
    assert (report.ready, report.reason, report.short_retention) == (True, Reason.TOPICS_READY, ())

    with pytest.raises(BrokerUnavailable, match=f"describing topic {DLQ!r}"):
        ensure(existing({("describe", DLQ): KafkaError._TRANSPORT}))


def test_deleting_skips_what_is_gone_and_a_broker_that_does_not_answer_is_unavailable() -> None:
    kafka = Kafka(topics={"orders": 2, RETRY: 2})
    admin = AdminProvisioner(timeout=1.0, client_factory=kafka.client)
    assert run(admin.delete(policy(), [RETRY, DLQ])) == [RETRY]
    assert run(admin.delete(policy(), [])) == []

    kafka = Kafka(topics={"orders": 2, DLQ: 2}, errors={("delete", DLQ): KafkaError._TRANSPORT})
    admin = AdminProvisioner(timeout=1.0, client_factory=kafka.client)
    with pytest.raises(BrokerUnavailable, match=f"deleting topic {DLQ!r}"):
        run(admin.delete(policy(), [DLQ]))
    assert DLQ in kafka.topics


def test_one_client_per_broker_and_identity() -> None:
    kafka = Kafka(topics={"orders": 2})
    admin = AdminProvisioner(timeout=1.0, extra_config={"client.rack": "a"}, client_factory=kafka.client)
    run(admin.existing(policy()))
    run(admin.existing(policy()))
    run(admin.existing(policy(), credentials={"sasl.username": "op"}))
    run(admin.existing(policy({"spec.broker.bootstrapServers": "other:9092"})))
    assert [(c["bootstrap.servers"], c.get("sasl.username"), c["client.rack"]) for c in kafka.clients] == [
        ("kafka.kafka:9092", None, "a"),
        ("kafka.kafka:9092", "op", "a"),
        ("other:9092", None, "a"),
    ]


# ---------------------------------------------------------------------------------------------
# Strimzi

STRIMZI = {
    "spec.topics.provisioner": "strimzi",
    "spec.topics.strimzi": {"cluster": "my-cluster", "namespace": "kafka"},
    "spec.topics.partitions": 2,
}


def strimzi(api: FakeKube, the_policy: DeadLetterPolicy, *, on_cluster: Sequence[str] = ()) -> TopicsReport:
    async def cluster_topics() -> Sequence[str]:
        return on_cluster

    provisioner = StrimziProvisioner(api)
    return run(provisioner.ensure(the_policy, owner=OWNER, on_cluster=cluster_topics))


@pytest.fixture
def api() -> FakeKube:
    found = FakeKube()
    found.served["kafka.strimzi.io/v1"] = [KAFKA_TOPICS]
    return found


def ready(api: FakeKube, name: str) -> None:
    def mark(kafka_topic: dict[str, Any]) -> None:
        kafka_topic["status"] = {
            "observedGeneration": kafka_topic["metadata"]["generation"],
            "conditions": [{"type": "Ready", "status": "True"}],
        }

    api.edit(KAFKA_TOPICS, "kafka", naming.kafka_topic_name(name), mark)


def test_strimzi_chosen_for_a_policy_left_to_auto_needs_the_cluster_named(api: FakeKube) -> None:
    # The model asks for the cluster only when the policy itself names strimzi.
    report = strimzi(api, policy({"spec.topics.partitions": 2}))
    assert (report.ready, report.reason) == (False, Reason.STRIMZI_CLUSTER_MISSING)
    assert "spec.topics.strimzi.cluster" in report.message


def test_strimzi_not_served_is_reported(api: FakeKube) -> None:
    api.served.clear()
    report = strimzi(api, policy(STRIMZI))
    assert (report.ready, report.reason) == (False, Reason.STRIMZI_NOT_SERVED)
    assert api.of(KAFKA_TOPICS) == []


def test_kafka_topics_wait_for_strimzi_then_are_ready(api: FakeKube) -> None:
    report = strimzi(api, policy(STRIMZI))
    assert (report.ready, report.reason, report.created) == (False, Reason.WAITING_FOR_STRIMZI, (RETRY, DLQ))
    assert "Strimzi has not reported on it yet" in report.message
    ready(api, RETRY)
    report = strimzi(api, policy(STRIMZI), on_cluster=[RETRY, DLQ])
    assert (report.ready, report.reason, report.created) == (False, Reason.WAITING_FOR_STRIMZI, ())
    assert naming.kafka_topic_name(RETRY) not in report.message
    ready(api, DLQ)
    report = strimzi(api, policy(STRIMZI), on_cluster=[RETRY, DLQ])
    assert (report.ready, report.reason) == (True, Reason.TOPICS_READY)
    assert report.message == "Strimzi reports the KafkaTopics Ready"


def test_a_kafka_topic_of_the_name_for_another_topic_is_a_conflict(api: FakeKube) -> None:
    api.put(
        KAFKA_TOPICS,
        {
            "apiVersion": "kafka.strimzi.io/v1",
            "kind": "KafkaTopic",
            "metadata": {"name": naming.kafka_topic_name(RETRY), "namespace": "kafka"},
            "spec": {"topicName": "something-else", "partitions": 1},
        },
    )
    report = strimzi(api, policy(STRIMZI))
    assert (report.ready, report.reason) == (False, Reason.CONFLICT)
    assert "exists for another topic ('something-else')" in report.message
    assert len(api.of(KAFKA_TOPICS)) == 1


@pytest.mark.parametrize(
    ("current_spec", "patch"),
    [
        pytest.param({"partitions": 3, "replicas": 2, "config": {"a": "1"}}, {}, id="as-wanted"),
        pytest.param({"partitions": 5, "replicas": 2, "config": {"a": "1"}}, {}, id="more-partitions-kept"),
        pytest.param(
            {"partitions": 1, "replicas": 2, "config": {"a": "1"}}, {"spec": {"partitions": 3}}, id="raised"
        ),
        pytest.param(
            {"partitions": 3, "replicas": 1, "config": {"a": 1, "b": "2"}},
            {"spec": {"replicas": 2, "config": {"a": "1", "b": None}}},
            id="replicas-and-a-config-removed",
        ),
    ],
)
def test_the_kafka_topic_patch(current_spec: dict[str, Any], patch: dict[str, Any]) -> None:
    labels = {"app.kubernetes.io/managed-by": "spark-dlq-operator"}
    desired = {
        "metadata": {"labels": labels},
        "spec": {"partitions": 3, "replicas": 2, "config": {"a": "1"}},
    }
    current = {"metadata": {"labels": {**labels, "team": "x"}}, "spec": current_spec}
    assert _kafka_topic_patch(current, desired) == patch
    unlabelled = {"metadata": {}, "spec": current_spec}
    assert _kafka_topic_patch(unlabelled, desired)["metadata"] == {"labels": labels}
