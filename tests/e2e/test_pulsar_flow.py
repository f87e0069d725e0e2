"""A Pulsar policy through the whole loop: applied to the apiserver, its topics and subscriptions
created by the operator through Pulsar's admin REST API, the engine run by the local
spark-operator runner on the real standalone Pulsar, every message routed with its metadata,
and the dead letters still held after the policy is deleted."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from kubernetes import client

from dlq_engine.model.policy import PULSAR_KEEP_SUBSCRIPTION
from spark_dlq_devtools.local_spark_operator import LocalSparkOperator
from spark_dlq_devtools.pulsar import Message, PulsarBroker
from tests.conftest import unique
from tests.e2e.conftest import Policies
from tests.e2e.test_flow import PREFIX_HEADERS, _wave, wait_accounted, wait_job_gone
from tests.integration.operator.test_pulsar import partitions


def _ledger(pulsar: PulsarBroker, output: str, dlq: str) -> tuple[collections.Counter[str], list[Message]]:
    out = pulsar.read_all(output, timeout=3)
    dead = pulsar.read_all(dlq, timeout=3)
    seen: collections.Counter[str] = collections.Counter(m.key for m in out if m.key is not None)
    seen.update(m.key for m in dead if m.key is not None)
    return seen, dead


def test_a_pulsar_policy_runs_through_the_operator(
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
    policies: Policies,
    kube_api: Any,
    e2e_namespace: str,
    spark_operator: LocalSparkOperator,
) -> None:
    source, output = make_pulsar_topic("orders", partitions=2), make_pulsar_topic("billed", partitions=2)
    name = unique("billing")
    policies.create(
        {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterPolicy",
            "metadata": {"name": name},
            "spec": {
                "source": {
                    "topic": f"persistent://public/default/{source}",
                    "subscription": "billing",
                    "startingOffsets": "earliest",
                },
                "broker": {"type": "pulsar", "serviceUrl": pulsar.service_url, "adminUrl": pulsar.admin_url},
                "processor": {"entrypoint": "tests.processors.scripted:process"},
                "output": {"topic": output},
                "retry": {
                    "maxRedeliverCount": 2,
                    "backoff": {"type": "fixed", "delay": "300ms"},
                    "nonRetryableErrors": ["KeyError"],
                },
                "deadLetter": {"headers": {"team": "payments"}},
                "spark": {"trigger": "500ms"},
            },
        }
    )

    # The operator made the topics on Pulsar, partitioned like the source, and named them fully.
    status = policies.wait_status(name, lambda s: s.get("phase") == "Running", what="phase Running")
    retry_topic, dlq_topic = f"{source}-billing-RETRY", f"{source}-billing-DLQ"
    assert (status["retryTopic"], status["deadLetterTopic"]) == (
        f"persistent://public/default/{retry_topic}",
        f"persistent://public/default/{dlq_topic}",
    )
    assert (partitions(pulsar, retry_topic), partitions(pulsar, dlq_topic)) == (2, 2)
    assert PULSAR_KEEP_SUBSCRIPTION in pulsar.subscriptions(dlq_topic)

    # Every message is routed on Pulsar; dead letters carry the contract's headers as properties.
    wave = [(key.decode(), value) for key, value in _wave("p", 60)]
    pulsar.produce(source, wave)
    keys = [k for k, _ in wave]
    _, dead = wait_accounted(lambda: _ledger(pulsar, output, dlq_topic), keys, timeout=300)
    assert {m.properties.get("dlq.reason") for m in dead} == {"exhausted", "terminated", "non-retryable"}
    for message in dead:
        assert all(message.properties.get(h) for h in PREFIX_HEADERS), message.properties
        assert message.properties["dlq.policy"] == f"{e2e_namespace}/{name}"
        assert message.properties["team"] == "payments"
    assert not [m for m in dead if m.value == b"flaky:2"]

    # Deleting the policy stops the job; the dead letters stay, held by the keep subscription.
    policies.delete(name)
    objects = client.CustomObjectsApi(kube_api)
    wait_job_gone(objects, e2e_namespace, name, spark_operator)
    assert pulsar.backlog(dlq_topic, PULSAR_KEEP_SUBSCRIPTION) == len(dead)
