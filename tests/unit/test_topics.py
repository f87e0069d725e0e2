"""Topics owned, not borrowed, through the reconcile and the deletion on an in-memory API server
and in-memory brokers (``fake_kube``, ``fake_brokers``): what is recorded as created, what
deleting a policy deletes and keeps, a topic another policy keeps, and the edge cases a real
broker only reaches under a race or a crash. The same attacks against the real broker and API
server are in ``tests/integration/operator``."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from dlq_engine.model import parse_policy
from spark_dlq_operator import naming
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.kubeapi import ApiError
from spark_dlq_operator.policies.cleanup import clean_up
from spark_dlq_operator.policies.reconcile import reconcile
from spark_dlq_operator.policies.services import Services, TopicsNotReady, owner_of
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.resync import Resync
from spark_dlq_operator.topics import AdminProvisioner, StrimziProvisioner
from tests.policy_builder import policy_document
from tests.unit.fake_brokers import FakeKafka, FakePulsar
from tests.unit.fake_kube import FakeKube

NAMESPACE = "payments"
POLICIES, APPS, CONFIG_MAPS, EVENTS = "deadletterpolicies", "sparkapplications", "configmaps", "events"
KAFKA_TOPICS = "kafkatopics"
KAFKA = "kafka.kafka:9092"
RETRY, DLQ = "orders-billing-RETRY", "orders-billing-DLQ"
PULSAR = {"type": "pulsar", "serviceUrl": "pulsar://pulsar:6650", "adminUrl": "http://pulsar:8080"}


class Bed:
    """A fake API server, a fake Kafka cluster and a fake Pulsar, with the operator's services."""

    def __init__(self) -> None:
        self.api = FakeKube()
        self.kafka = FakeKafka(topics={"orders": 2})
        self.pulsar = FakePulsar()
        self.pulsar.make("persistent/public/default/orders", 2)
        self.services = Services(
            config=OperatorConfig(namespaces=(NAMESPACE,)),
            api=self.api,
            events=EventRecorder(self.api, instance="test"),
            admin=AdminProvisioner(timeout=1.0, client_factory=self.kafka.client),
            strimzi=StrimziProvisioner(self.api),
            pulsar=self.pulsar,
        )

    def add(self, name: str = "billing", *, created: str = "2026-11-20T00:00:00Z", **overrides: Any) -> str:
        document = policy_document(
            {
                "metadata.name": name,
                "metadata.namespace": NAMESPACE,
                "spec.topics.deleteWithPolicy": True,
                **overrides,
            }
        )
        document["metadata"]["creationTimestamp"] = created
        self.api.put(POLICIES, document)
        return name

    def body(self, name: str = "billing") -> dict[str, Any]:
        found = self.api.stored(POLICIES, NAMESPACE, name)
        assert found is not None
        return found

    def reconcile(self, name: str = "billing") -> None:
        body = self.body(name)

        async def governed_reconcile() -> None:
            governed = await self.services.classes.govern(body)
            await reconcile(
                self.services,
                governed.policy,
                owner=owner_of(body),
                generation=body["metadata"]["generation"],
                trigger="test",
                fit=governed.fit,
            )

        self.run(governed_reconcile())

    def delete(self, name: str = "billing") -> None:
        """What the finalizer does, then the object is gone."""
        body = self.body(name)
        self.run(
            clean_up(
                self.services,
                parse_policy(body),
                owner=owner_of(body),
                deleting_since=datetime.datetime.now(datetime.UTC),
                status=body.get("status"),
            )
        )
        self.services.claims.release(f"{NAMESPACE}/{name}", uid=body["metadata"]["uid"])
        del self.api.objects[(POLICIES, NAMESPACE, name)]

    def run(self, call: Any) -> None:
        async def both() -> None:
            try:
                await call
            finally:
                await self.services.events.close()

        asyncio.run(both())

    def status(self, name: str = "billing") -> dict[str, Any]:
        return dict(self.body(name).get("status") or {})

    def condition(self, kind: str, name: str = "billing") -> dict[str, Any]:
        return next(c for c in self.status(name)["conditions"] if c["type"] == kind)

    def events(self, reason: str) -> list[str]:
        return [e["message"] for e in self.api.of(EVENTS) if e["reason"] == reason]


@pytest.fixture
def bed() -> Bed:
    return Bed()


def owned(name: str, kind: str, broker: str = KAFKA) -> dict[str, str]:
    return {"broker": broker, "name": name, "kind": kind}


# ---------------------------------------------------------------------------------------------
# Kafka's Admin API


def test_topics_the_operator_created_are_recorded_and_deleted_with_the_policy(bed: Bed) -> None:
    bed.add()
    bed.reconcile()

    assert bed.status()["ownedTopics"] == [owned(RETRY, "retry"), owned(DLQ, "deadLetter")]
    assert bed.condition("TopicsReady")["message"] == f"topics {RETRY!r} and {DLQ!r} exist"
    bed.delete()
    assert bed.kafka.deleted == [RETRY, DLQ]
    assert bed.events("TopicsDeleted") == [
        f"deleted topics {[RETRY, DLQ]} with the policy (spec.topics.deleteWithPolicy)"
    ]
    assert bed.events("TopicsKept") == []


def test_an_existing_topic_named_as_dead_letter_topic_is_used_and_kept(bed: Bed) -> None:
    """Issue 26: a policy names another team's topic as its dead-letter topic, with
    deleteWithPolicy; it runs, and deleting it deletes only what the operator created."""
    bed.kafka.topics["ledger"] = 6
    bed.add(**{"spec.deadLetter.topic": "ledger"})
    bed.reconcile()

    topics = bed.condition("TopicsReady")
    assert topics["status"] == "True"
    assert topics["message"].endswith(
        "; kept when the policy is deleted (the operator did not create them for it): 'ledger'"
    )
    assert bed.api.stored(APPS, NAMESPACE, "billing") is not None
    assert bed.status()["ownedTopics"] == [owned(RETRY, "retry")]
    assert bed.kafka.configs.get("ledger") is None  # never touched

    bed.delete()
    assert bed.kafka.deleted == [RETRY]
    assert bed.kafka.topics["ledger"] == 6
    [kept] = bed.events("TopicsKept")
    assert kept.startswith("topic 'ledger' kept: the operator did not create it for this policy")


def test_a_create_answered_already_exists_is_not_ownership(bed: Bed) -> None:
    """Someone creates the dead-letter topic between the operator's listing and its create."""
    bed.add()
    bed.kafka.before_create.append(lambda: bed.kafka.topics.update({DLQ: 1}))
    bed.reconcile()

    assert bed.status()["ownedTopics"] == [owned(RETRY, "retry")]
    assert bed.kafka.created == [RETRY]


def test_a_crash_between_create_and_record_keeps_the_topic(bed: Bed) -> None:
    """The create succeeded, the record was not written: Kafka cannot tell who created the
    topic, so it is kept rather than risk deleting someone else's."""
    bed.add()
    bed.api.fail("PATCH", POLICIES, 500)  # the ownership write, right after the create
    with pytest.raises(ApiError):
        bed.reconcile()
    assert bed.kafka.created == [RETRY, DLQ]
    assert "ownedTopics" not in bed.status()

    bed.reconcile()  # the operator again: the topics exist
    assert "ownedTopics" not in bed.status()
    bed.delete()
    assert bed.kafka.deleted == []
    assert [m.split(" kept:")[0] for m in bed.events("TopicsKept")[0].split("; topic ")] == [
        f"topic {RETRY!r}",
        f"{DLQ!r}",
    ]


def test_a_policy_created_again_under_its_name_owns_nothing_of_its_predecessors(bed: Bed) -> None:
    bed.add()
    bed.reconcile()
    old_uid = bed.body()["metadata"]["uid"]
    bed.services.claims.release(f"{NAMESPACE}/billing")
    del bed.api.objects[(POLICIES, NAMESPACE, "billing")]  # deleted without its topics...
    bed.add()  # ...and applied again: a new object
    assert bed.body()["metadata"]["uid"] != old_uid
    bed.reconcile()

    assert "ownedTopics" not in bed.status()
    bed.delete()
    assert bed.kafka.deleted == []


def test_the_operators_identity_is_per_broker(bed: Bed) -> None:
    """Credentials given for one broker build a client of their own, over the operator-wide
    settings; a call without them gets a client without them."""
    admin = AdminProvisioner(timeout=1.0, extra_config={"client.rack": "r1"}, client_factory=bed.kafka.client)
    policy = parse_policy(policy_document())
    secret = {"security.protocol": "SASL_SSL", "sasl.username": "op"}

    async def calls() -> None:
        await admin.existing(policy, credentials=secret)
        await admin.existing(policy, credentials=dict(secret))
        await admin.existing(policy)

    asyncio.run(calls())
    first, second = bed.kafka.clients
    assert (first["sasl.username"], first["client.rack"], first["bootstrap.servers"]) == ("op", "r1", KAFKA)
    assert "sasl.username" not in second


# ---------------------------------------------------------------------------------------------
# A topic another policy keeps


def test_a_dead_letter_topic_of_another_policy_is_refused_and_nothing_is_created(bed: Bed) -> None:
    bed.add("billing")
    bed.add(
        "refunds",
        created="2026-11-21T00:00:00Z",
        **{"spec.source.subscription": "refunds", "spec.deadLetter.topic": DLQ},
    )
    bed.reconcile("billing")
    created = list(bed.kafka.created)

    with pytest.raises(TopicsNotReady):
        bed.reconcile("refunds")
    topics = bed.condition("TopicsReady", "refunds")
    assert (topics["status"], topics["reason"]) == ("False", "TopicInUse")
    assert topics["message"] == (
        f"spec.deadLetter.topic: topic {DLQ!r} on broker {KAFKA!r} is the dead-letter topic of "
        "DeadLetterPolicy payments/billing, which keeps it (the operator created it for that policy): a retry or "
        "dead-letter topic belongs to one policy; name another"
    )
    assert bed.status("refunds")["phase"] == "Provisioning"
    assert bed.kafka.created == created  # not even its own retry topic
    assert bed.api.stored(APPS, NAMESPACE, "refunds") is None
    assert bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name("refunds")) is None
    assert set(bed.events("TopicInUse")) == {topics["message"]}  # a Warning event

    bed.delete("billing")  # its topics go with it; the other policy gets its turn
    bed.reconcile("refunds")
    assert bed.condition("TopicsReady", "refunds")["status"] == "True"
    assert bed.status("refunds")["ownedTopics"] == [
        owned("orders-refunds-RETRY", "retry"),
        owned(DLQ, "deadLetter"),
    ]


def test_a_recorded_topic_another_policy_now_uses_is_kept(bed: Bed) -> None:
    bed.add("billing")
    bed.reconcile("billing")
    bed.api.edit(
        POLICIES,
        NAMESPACE,
        "billing",
        lambda o: o["spec"].setdefault("deadLetter", {}).update(topic="billing-dlq-v2"),
    )
    bed.reconcile("billing")  # moved away from its first dead-letter topic
    bed.add(
        "refunds",
        created="2026-11-21T00:00:00Z",
        **{"spec.source.subscription": "refunds", "spec.deadLetter.topic": DLQ},
    )
    bed.reconcile("refunds")

    bed.delete("billing")
    assert bed.kafka.deleted == [RETRY, "billing-dlq-v2"]
    assert f"topic {DLQ!r} kept: DeadLetterPolicy payments/refunds uses it" in bed.events("TopicsKept")[0]


# ---------------------------------------------------------------------------------------------
# Pulsar


def full(name: str) -> str:
    return f"persistent://public/default/{name}"


def test_pulsar_topics_are_created_with_the_policys_uid_and_subscribed_only_when_created(bed: Bed) -> None:
    bed.pulsar.make("persistent/public/default/ledger", 2)
    bed.add(**{"spec.broker": PULSAR, "spec.deadLetter.topic": "ledger"})
    bed.reconcile()

    uid = bed.body()["metadata"]["uid"]
    retry = bed.pulsar.topics[f"persistent/public/default/{RETRY}"]
    assert (retry.partitions, retry.properties, retry.subscriptions) == (
        2,
        {"sparkdlq.io/policy-uid": uid},
        ["billing"],
    )
    assert bed.pulsar.topics["persistent/public/default/ledger"].subscriptions == []  # no spark-dlq-keep
    assert bed.status()["ownedTopics"] == [owned(full(RETRY), "retry", broker="pulsar://pulsar:6650")]
    message = bed.condition("TopicsReady")["message"]
    assert f"no subscription on {full('ledger')!r}: the operator did not create it for this policy" in message

    bed.delete()
    assert set(bed.pulsar.topics) == {"persistent/public/default/orders", "persistent/public/default/ledger"}


def test_pulsar_ownership_lost_in_a_crash_is_found_on_the_topic(bed: Bed) -> None:
    bed.add(**{"spec.broker": PULSAR, "spec.source.topic": "orders"})
    bed.api.fail("PATCH", POLICIES, 500)  # the ownership write fails: the operator "stopped"
    with pytest.raises(ApiError):
        bed.reconcile()
    assert "ownedTopics" not in bed.status()
    bed.pulsar.topics[f"persistent/public/default/{DLQ}"].subscriptions.clear()  # deleted by hand since

    bed.reconcile()
    assert bed.status()["ownedTopics"] == [
        owned(full(RETRY), "retry", broker="pulsar://pulsar:6650"),
        owned(full(DLQ), "deadLetter", broker="pulsar://pulsar:6650"),
    ]
    assert bed.pulsar.topics[f"persistent/public/default/{DLQ}"].subscriptions == ["spark-dlq-keep"]


def test_a_pulsar_topic_created_for_another_policy_object_is_not_owned(bed: Bed) -> None:
    bed.pulsar.make(f"persistent/public/default/{DLQ}", 2, **{"sparkdlq.io/policy-uid": "a-deleted-policy"})
    bed.add(**{"spec.broker": PULSAR})
    bed.reconcile()
    assert bed.status()["ownedTopics"] == [owned(full(RETRY), "retry", broker="pulsar://pulsar:6650")]
    assert bed.pulsar.topics[f"persistent/public/default/{DLQ}"].subscriptions == []


# ---------------------------------------------------------------------------------------------
# Strimzi


def strimzi_bed(bed: Bed) -> None:
    bed.api.served["kafka.strimzi.io/v1"] = ["kafkatopics"]


def kafka_topic(
    name: str, *, topic: str | None = None, labels: dict[str, str] | None = None, **annotations: str
) -> dict[str, Any]:
    return {
        "apiVersion": "kafka.strimzi.io/v1",
        "kind": "KafkaTopic",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels or {},
            "annotations": annotations,
        },
        "spec": {"topicName": topic or name, "partitions": 1, "config": {"retention.ms": "1"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


STRIMZI = {
    "spec.topics.provisioner": "strimzi",
    "spec.topics.strimzi": {"cluster": "my-cluster"},
    "spec.topics.partitions": 2,
}


def test_strimzi_kafka_topics_carry_the_policys_uid_and_only_owned_ones_its_owner_reference(bed: Bed) -> None:
    strimzi_bed(bed)
    bed.add(**STRIMZI)
    with pytest.raises(TopicsNotReady):
        bed.reconcile()  # waiting for Strimzi
    uid = bed.body()["metadata"]["uid"]
    made = bed.api.of(KAFKA_TOPICS)
    assert [t["metadata"]["annotations"] for t in made] == [{"sparkdlq.io/policy-uid": uid}] * 2
    assert all(t["metadata"]["ownerReferences"][0]["uid"] == uid for t in made)
    assert bed.status()["ownedTopics"] == [owned(RETRY, "retry"), owned(DLQ, "deadLetter")]


def test_no_kafka_topic_for_a_topic_another_kafka_topic_or_the_cluster_has(bed: Bed) -> None:
    """A KafkaTopic takes over the topic it names: the operator creates none for a topic that
    another KafkaTopic names (under another name) or that the cluster has without one."""
    strimzi_bed(bed)
    bed.api.put(KAFKA_TOPICS, kafka_topic("team-b-retry", topic=RETRY))
    bed.kafka.topics[DLQ] = 3
    bed.add(**STRIMZI)
    bed.reconcile()

    assert [t["metadata"]["name"] for t in bed.api.of(KAFKA_TOPICS)] == ["team-b-retry"]
    assert bed.api.stored(KAFKA_TOPICS, NAMESPACE, "team-b-retry") == {
        **kafka_topic("team-b-retry", topic=RETRY),
        "metadata": bed.api.stored(KAFKA_TOPICS, NAMESPACE, "team-b-retry")["metadata"],  # type: ignore[index]
    }
    message = bed.condition("TopicsReady")["message"]
    assert f"KafkaTopic {NAMESPACE}/team-b-retry is managed outside spark-dlq and used as it is" in message
    assert f"topic {DLQ!r} exists in the Kafka cluster without a KafkaTopic and is used as it is" in message
    assert "ownedTopics" not in bed.status()
    bed.delete()
    assert [t["metadata"]["name"] for t in bed.api.of(KAFKA_TOPICS)] == ["team-b-retry"]


def test_a_kafka_topic_of_the_same_name_not_labelled_as_the_policys_is_neither_patched_nor_deleted(
    bed: Bed,
) -> None:
    strimzi_bed(bed)
    foreign = bed.api.put(KAFKA_TOPICS, kafka_topic(RETRY.lower(), topic=RETRY))
    bed.api.put(KAFKA_TOPICS, kafka_topic(naming.kafka_topic_name(DLQ), topic=DLQ))
    bed.add(**STRIMZI)
    bed.reconcile()
    bed.delete()
    assert bed.api.stored(KAFKA_TOPICS, NAMESPACE, RETRY.lower())["spec"] == foreign["spec"]  # type: ignore[index]
    assert len(bed.api.of(KAFKA_TOPICS)) == 2


def test_a_kafka_topic_of_an_earlier_policy_of_the_name_is_used_not_adopted(bed: Bed) -> None:
    """Labelled as this policy's (namespace and name) but created for another object: not
    patched, not given an owner reference, not deleted. One from before the uid annotation
    (an upgrade) is patched as before, but never owned."""
    strimzi_bed(bed)
    labels = {
        **naming.labels("billing"),
        naming.POLICY_NAMESPACE_LABEL: NAMESPACE,
        naming.STRIMZI_CLUSTER_LABEL: "my-cluster",
    }
    earlier = bed.api.put(
        KAFKA_TOPICS,
        kafka_topic(
            naming.kafka_topic_name(RETRY), topic=RETRY, labels=labels, **{"sparkdlq.io/policy-uid": "old"}
        ),
    )
    upgraded = kafka_topic(naming.kafka_topic_name(DLQ), topic=DLQ, labels=labels)
    upgraded["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterPolicy",
            "name": "billing",
            "uid": "x",
            "controller": True,
        }
    ]
    bed.api.put(KAFKA_TOPICS, upgraded)
    bed.add(**STRIMZI)
    bed.reconcile()

    assert bed.api.stored(KAFKA_TOPICS, NAMESPACE, naming.kafka_topic_name(RETRY))["spec"] == earlier["spec"]  # type: ignore[index]
    dlq = bed.api.stored(KAFKA_TOPICS, NAMESPACE, naming.kafka_topic_name(DLQ))
    assert dlq is not None
    assert dlq["spec"]["partitions"] == 2
    assert "ownerReferences" not in dlq["metadata"]
    assert (
        "was created for an earlier policy of this name and is used as it is"
        in bed.condition("TopicsReady")["message"]
    )
    assert "ownedTopics" not in bed.status()
    bed.delete()
    assert len(bed.api.of(KAFKA_TOPICS)) == 2


def test_strimzi_ownership_lost_in_a_crash_is_found_on_the_kafka_topic(bed: Bed) -> None:
    strimzi_bed(bed)
    bed.add(**STRIMZI)
    bed.api.fail("PATCH", POLICIES, 500)
    with pytest.raises(ApiError):
        bed.reconcile()
    for item in bed.api.of(KAFKA_TOPICS):
        bed.api.edit(
            KAFKA_TOPICS,
            NAMESPACE,
            item["metadata"]["name"],
            lambda o: o.update(status={"conditions": [{"type": "Ready", "status": "True"}]}),
        )
    bed.kafka.topics.update({RETRY: 2, DLQ: 2})  # Strimzi created them
    bed.reconcile()
    assert bed.status()["ownedTopics"] == [owned(RETRY, "retry"), owned(DLQ, "deadLetter")]
    bed.delete()
    assert bed.api.of(KAFKA_TOPICS) == []


def test_the_start_up_listing_lets_the_older_policy_keep_its_topic_whoever_is_first(bed: Bed) -> None:
    """kopf resumes policies in no set order: the index is filled from a listing before."""
    bed.add("billing")
    bed.add(
        "refunds",
        created="2026-11-21T00:00:00Z",
        **{"spec.source.subscription": "refunds", "spec.retry.topic": RETRY},
    )
    asyncio.run(Resync(bed.services).index_topics())

    with pytest.raises(TopicsNotReady):
        bed.reconcile("refunds")  # first, but the younger
    assert bed.condition("TopicsReady", "refunds")["message"].startswith(
        f"spec.retry.topic: topic {RETRY!r} on broker {KAFKA!r} is the retry topic of DeadLetterPolicy "
        "payments/billing, which keeps it (that policy is older)"
    )
    bed.reconcile("billing")
    assert bed.kafka.created == [RETRY, DLQ]


def test_the_operator_s_credentials_go_to_its_class_s_broker_only() -> None:
    """issue 26 item 2: the admin client for a policy's broker carries the credentials the
    policy's class names for that broker, and a broker no class lists gets none."""
    import base64

    bed = Bed()
    bed.services.class_catalog = None  # a catalog on this bed's config, with the operator's namespace
    bed.services.config = OperatorConfig(namespaces=(NAMESPACE,), operator_namespace="spark-dlq")
    secret = base64.b64encode(b"security.protocol=SASL_PLAINTEXT\nsasl.username=operator\n").decode()
    bed.api.put(
        "secrets",
        {"metadata": {"name": "op-kafka", "namespace": "spark-dlq"}, "data": {"client.properties": secret}},
    )
    bed.api.put(
        "deadletterpolicyclasses",
        {
            "metadata": {"name": "listed", "annotations": {"sparkdlq.io/is-default-class": "true"}},
            "spec": {"brokers": [{"bootstrapServers": KAFKA, "operatorSecretRef": {"name": "op-kafka"}}]},
        },
    )
    bed.api.put("deadletterpolicyclasses", {"metadata": {"name": "any"}, "spec": {}})
    bed.add("billing")
    bed.add("elsewhere", **{"spec.className": "any", "spec.broker.bootstrapServers": "other:9092"})
    bed.reconcile("billing")
    bed.reconcile("elsewhere")

    by_broker = {c["bootstrap.servers"]: c for c in bed.kafka.clients}
    assert by_broker[KAFKA]["sasl.username"] == "operator"
    assert by_broker[KAFKA]["security.protocol"] == "SASL_PLAINTEXT"
    assert "sasl.username" not in by_broker["other:9092"]


def test_retention_comes_from_the_policy_then_its_class_then_the_model(bed: Bed) -> None:
    """issue 27 item 2 under the class model: the class's ``spec.defaults.topics`` configs are
    merged key by key under the policy's, and the model's retention fills what neither names."""
    bed.api.put(
        "deadletterpolicyclasses",
        {
            "metadata": {"name": "keep-30d", "annotations": {"sparkdlq.io/is-default-class": "true"}},
            "spec": {
                "defaults": {
                    "topics": {
                        "deadLetterConfig": {"retention.ms": str(30 * 86_400_000)},
                        "retryConfig": {"segment.ms": "60000"},
                    }
                }
            },
        },
    )
    bed.add("billing")
    bed.add(
        "refunds",
        **{"spec.source.subscription": "refunds", "spec.topics.deadLetterConfig": {"retention.ms": "-1"}},
    )
    bed.reconcile("billing")
    bed.reconcile("refunds")
    assert bed.kafka.configs[DLQ] == {"retention.ms": str(30 * 86_400_000)}  # the class's
    assert bed.kafka.configs[RETRY] == {"retention.ms": str(600_000 + 7 * 86_400_000), "segment.ms": "60000"}
    assert bed.kafka.configs["orders-refunds-DLQ"] == {"retention.ms": "-1"}  # the policy's
    assert bed.condition("TopicsReady")["reason"] == "TopicsReady"  # a retention its class chose


def test_an_existing_topic_that_deletes_dead_letters_is_reported_not_changed(bed: Bed) -> None:
    bed.kafka.topics[DLQ] = 2  # made by someone else, with the broker's week
    bed.add()
    bed.reconcile()
    topics = bed.condition("TopicsReady")
    assert (topics["status"], topics["reason"]) == ("True", Reason.SHORT_RETENTION)
    assert (
        f"; short retention: topic {DLQ!r} has retention.ms=604800000 (7d): its dead letters are deleted "
        "after 7d, they must be kept until someone deletes them;"
    ) in topics["message"]
    assert bed.events("TopicRetentionShort") == [topics["message"]]
    assert DLQ not in bed.kafka.configs  # never altered
