"""The operator with a Pulsar policy, against a real kube-apiserver and a real standalone Pulsar.

What docs/reference.md section 2 promises for ``spec.broker.type: pulsar``: the retry and
dead-letter topics created through Pulsar's admin REST API, partitioned like the source; the
engine's subscription on the retry topic and a subscription on the dead-letter topic that keeps
every dead letter from Pulsar's retention; the status naming the topics fully; an admin API that
does not answer or refuses reported in TopicsReady, retried and recovered; topics deleted with
the policy only when asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from dlq_engine.model import config_hash, parse_policy
from dlq_engine.model.policy import PULSAR_KEEP_SUBSCRIPTION
from spark_dlq_devtools.processes import free_port
from spark_dlq_devtools.pulsar import AdminError, PulsarBroker, full_topic
from tests import policy_builder
from tests.integration.operator.conftest import Cluster, RunningOperator, wait_for


def pulsar_policy(
    namespace: str, name: str, *, source: str, pulsar: PulsarBroker, admin_url: str = "", **spec: Any
) -> dict[str, Any]:
    """A Pulsar policy for ``source``, with spec sections given as keyword arguments."""
    where = {
        "metadata.namespace": namespace,
        "metadata.name": name,
        "spec.source.topic": source,
        "spec.broker": {
            "type": "pulsar",
            "serviceUrl": pulsar.service_url,
            "adminUrl": admin_url or pulsar.admin_url,
        },
    }
    return policy_builder.policy_document(where, **spec)


def partitions(pulsar: PulsarBroker, topic: str) -> int | None:
    """The topic's partitions (0: not partitioned), None when it does not exist."""
    try:
        return int(
            pulsar.admin("GET", f"/admin/v2/{full_topic(topic).replace('://', '/')}/partitions")["partitions"]
        )
    except AdminError as error:
        if error.status == 404:
            return None
        raise


def test_pulsar_policy_gets_topics_partitioned_like_the_source_and_durable_subscriptions(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
) -> None:
    source = make_pulsar_topic("orders", partitions=3)
    retry, dead = f"{source}-billing-RETRY", f"{source}-billing-DLQ"
    cluster.create_policy(pulsar_policy(namespace, "billing", source=source, pulsar=pulsar))

    app = wait_for(lambda: cluster.application("billing"), timeout=60, what="the SparkApplication")
    assert (partitions(pulsar, retry), partitions(pulsar, dead)) == (3, 3)
    # The engine's own subscription on the retry topic; one nothing reads through on the DLQ.
    assert pulsar.subscriptions(retry) == ["billing"]
    assert pulsar.subscriptions(dead) == [PULSAR_KEEP_SUBSCRIPTION]

    policy = parse_policy(cluster.policy("billing"))
    digest = config_hash(policy)
    wait_for(lambda: cluster.status("billing").get("configHash") == digest, what="the status")
    status = cluster.status("billing")
    assert status["retryTopic"] == f"persistent://public/default/{retry}"
    assert status["deadLetterTopic"] == f"persistent://public/default/{dead}"
    topics = cluster.condition("billing", "TopicsReady")
    assert (topics["status"], topics["reason"]) == ("True", "TopicsReady")
    assert PULSAR_KEEP_SUBSCRIPTION in topics["message"]

    # The engine reads the Pulsar broker from its policy.yaml; no Kafka client secret is mounted.
    engine = yaml.safe_load(cluster.config_map("billing-policy").data["policy.yaml"])
    assert engine["spec"]["broker"] == {
        "type": "pulsar",
        "serviceUrl": pulsar.service_url,
        "adminUrl": pulsar.admin_url,
    }
    assert app["metadata"]["annotations"]["sparkdlq.io/config-hash"] == digest
    volumes = app["spec"]["driver"]["template"]["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["policy"]

    # Dead letters written to the DLQ are held by the subscription until a person removes them.
    pulsar.produce(dead, [(f"k{i}", b"dead letter") for i in range(7)])
    assert pulsar.backlog(dead, PULSAR_KEEP_SUBSCRIPTION) == 7

    wait_for(lambda: {"TopicCreated"} <= cluster.event_reasons("billing"), what="the events")
    created = sorted(e.message for e in cluster.events("billing") if e.reason == "TopicCreated")
    assert created == [
        f"created topic 'persistent://public/default/{dead}' (pulsar)",
        f"created topic 'persistent://public/default/{retry}' (pulsar)",
    ]


def test_an_existing_pulsar_topic_is_used_as_it_is_and_a_non_partitioned_source_gives_non_partitioned_topics(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
) -> None:
    """A dead-letter topic that exists is used as it is: the operator adds no subscription to it
    (one that never acknowledges would keep whatever its owner writes there)."""
    source = make_pulsar_topic("orders")
    dead = pulsar.create_topic(f"{source}-billing-DLQ")
    cluster.create_policy(pulsar_policy(namespace, "billing", source=source, pulsar=pulsar))

    wait_for(lambda: cluster.application("billing"), timeout=60, what="the SparkApplication")
    assert (partitions(pulsar, f"{source}-billing-RETRY"), partitions(pulsar, dead)) == (0, 0)
    assert pulsar.subscriptions(dead) == []
    # The status is written after the SparkApplication: wait for it.
    topics = wait_for(lambda: cluster.condition("billing", "TopicsReady").get("message"), what="TopicsReady")
    assert topics.endswith(
        f"no subscription on {full_topic(dead)!r}: the operator did not create it for this policy"
    )
    created = [e.message for e in cluster.events("billing") if e.reason == "TopicCreated"]
    assert created == [f"created topic 'persistent://public/default/{source}-billing-RETRY' (pulsar)"]


def test_pulsar_topic_with_other_partitions_is_reported_as_drift_not_changed(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
) -> None:
    source = make_pulsar_topic("orders", partitions=2)
    retry = pulsar.create_topic(f"{source}-billing-RETRY")
    cluster.create_policy(pulsar_policy(namespace, "billing", source=source, pulsar=pulsar))

    wait_for(
        lambda: "drift" in cluster.condition("billing", "TopicsReady").get("message", ""), what="the drift"
    )
    message = cluster.condition("billing", "TopicsReady")["message"]
    assert (
        f"'persistent://public/default/{retry}' has no partitions (non-partitioned), 2 partitions wanted"
        in (message)
    )
    assert partitions(pulsar, retry) == 0


def test_pulsar_admin_api_unreachable_is_reported_retried_and_recovered(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
) -> None:
    source = make_pulsar_topic("orders")
    closed = f"http://127.0.0.1:{free_port()}"
    cluster.create_policy(pulsar_policy(namespace, "billing", source=source, pulsar=pulsar, admin_url=closed))

    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("reason") == "BrokerUnavailable",
        what="TopicsReady BrokerUnavailable",
    )
    topics = cluster.condition("billing", "TopicsReady")
    assert topics["status"] == "False"
    assert f"Pulsar's admin API at {closed} (spec.broker.adminUrl) did not answer" in topics["message"]
    assert cluster.status("billing")["phase"] == "Provisioning"
    assert cluster.application("billing") is None
    assert operator.alive()

    cluster.patch_policy("billing", {"spec": {"broker": {"adminUrl": pulsar.admin_url}}})
    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("status") == "True",
        timeout=60,
        what="TopicsReady after the admin URL is fixed",
    )
    assert partitions(pulsar, f"{source}-billing-DLQ") == 0
    wait_for(lambda: cluster.application("billing"), what="the SparkApplication")


def test_pulsar_admin_api_refusal_is_reported(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
) -> None:
    source = make_pulsar_topic("orders")
    cluster.create_policy(
        pulsar_policy(
            namespace, "billing", source=source, pulsar=pulsar, deadLetter={"topic": "no-tenant/no-ns/dead"}
        )
    )

    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("reason") == "CreateFailed",
        what="TopicsReady CreateFailed",
    )
    message = cluster.condition("billing", "TopicsReady")["message"]
    assert "'persistent://no-tenant/no-ns/dead': its tenant or namespace does not exist" in message
    assert cluster.application("billing") is None
    assert operator.alive()


def test_pulsar_source_missing_is_reported(
    operator: RunningOperator, cluster: Cluster, namespace: str, pulsar: PulsarBroker
) -> None:
    cluster.create_policy(pulsar_policy(namespace, "billing", source="absent-orders", pulsar=pulsar))

    wait_for(
        lambda: cluster.condition("billing", "TopicsReady").get("reason") == "SourceTopicMissing",
        what="TopicsReady SourceTopicMissing",
    )
    assert (
        "'persistent://public/default/absent-orders' does not exist"
        in (cluster.condition("billing", "TopicsReady")["message"])
    )


def test_deleting_a_pulsar_policy_deletes_only_the_topics_it_created_and_only_when_asked(
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
) -> None:
    """As on Kafka: an existing topic named as dead-letter topic is used without the operator's
    never-acknowledging subscription and kept; another policy's dead-letter topic, even named
    fully qualified, is refused."""
    source = make_pulsar_topic("orders", partitions=2)
    ledger = make_pulsar_topic("ledger", partitions=2)  # another team's topic
    cluster.create_policy(pulsar_policy(namespace, "kept", source=source, pulsar=pulsar))
    cluster.create_policy(
        pulsar_policy(
            namespace,
            "gone",
            source=source,
            pulsar=pulsar,
            retry={"topic": f"{source}-gone-RETRY"},
            deadLetter={"topic": ledger},
            topics={"deleteWithPolicy": True},
        )
    )
    wait_for(lambda: cluster.application("kept") and cluster.application("gone"), what="both applications")
    assert partitions(pulsar, f"{source}-gone-RETRY") == 2
    assert pulsar.subscriptions(f"{source}-gone-RETRY") == ["billing"]
    assert pulsar.subscriptions(ledger) == []  # no spark-dlq-keep on a topic it did not create
    assert [t["name"] for t in cluster.status("gone")["ownedTopics"]] == [full_topic(f"{source}-gone-RETRY")]

    cluster.create_policy(
        pulsar_policy(
            namespace,
            "sharer",
            source=source,
            pulsar=pulsar,
            retry={"topic": f"{source}-sharer-RETRY"},
            deadLetter={"topic": full_topic(f"{source}-billing-DLQ")},
        )
    )
    refused = wait_for(
        lambda: (c := cluster.condition("sharer", "TopicsReady")).get("reason") == "TopicInUse" and c,
        what="TopicsReady TopicInUse",
    )
    assert refused["message"].startswith(
        f"spec.deadLetter.topic: topic {full_topic(f'{source}-billing-DLQ')!r} on broker "
        f"{pulsar.service_url.lower()!r} is the dead-letter topic of DeadLetterPolicy {namespace}/kept"
    )
    assert partitions(pulsar, f"{source}-sharer-RETRY") is None

    cluster.delete_policy("kept")
    cluster.delete_policy("gone")
    wait_for(lambda: cluster.policy("gone") is None, what="the policy with deleteWithPolicy to go")
    assert partitions(pulsar, f"{source}-gone-RETRY") is None
    assert partitions(pulsar, ledger) == 2
    assert "TopicsKept" in cluster.event_reasons("gone")
    assert partitions(pulsar, f"{source}-billing-DLQ") == 2
    assert pulsar.subscriptions(f"{source}-billing-DLQ") == [PULSAR_KEEP_SUBSCRIPTION]
