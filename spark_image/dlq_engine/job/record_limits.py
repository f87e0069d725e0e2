"""What each topic a policy writes accepts, read once when the query starts.

Routing dead-letters a record too large for its topic instead of letting the sink fail the
whole micro-batch (``processing.oversize``); for that it needs each topic's limit. On Kafka that
is the topic's ``max.message.bytes`` (the broker's ``message.max.bytes`` unless the topic sets
its own), read with the Admin API's DescribeConfigs, which reports the value in force whichever
of the two sets it, and the sink producer's ``max.request.size`` above it. It is read when the
query starts, not per batch: a limit lowered while the job runs is known from the next start (a
batch refused meanwhile fails and is replayed then, as before), and no batch pays a request.

DescribeConfigs needs the ``DESCRIBE_CONFIGS`` ACL on the topic, which the engine's principal
may lack. Then, and if the broker does not answer, the limit of the retry and dead-letter topics
is the ``max.message.bytes`` the policy gives them (``spec.topics.retryConfig`` /
``deadLetterConfig``: the operator created them so), else Kafka's default (1 MiB), and a warning
names the ACL to grant: assuming too small a limit turns a few large records into dead letters,
assuming too large a one would stall the pipeline again.

On Pulsar the limit is Pulsar's default ``maxMessageSize`` (5 MiB), not read from the broker:
the client has no call for it.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from pyspark.sql import SparkSession

from dlq_engine.job.preflight import TIMEOUT_MS, admin_client, root_cause
from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.routing.record_size import PRODUCER_LIMIT, PRODUCER_MAX_REQUEST_SIZE, Limit, RecordLimits

log = logging.getLogger("dlq_engine.record_limits")

#: Kafka's default ``message.max.bytes`` (and so a topic's ``max.message.bytes``).
KAFKA_DEFAULT_MAX_MESSAGE_BYTES: Final = 1_048_588
#: Pulsar's default ``maxMessageSize``.
PULSAR_DEFAULT_MAX_MESSAGE_SIZE: Final = 5 * 1024 * 1024
TOPIC_CONFIG: Final = "max.message.bytes"


def read(spark: SparkSession, policy: DeadLetterPolicy, client: dict[str, str] | None) -> RecordLimits:
    """The limits of the policy's output, retry and dead-letter topics."""
    if policy.is_pulsar:
        pulsar = Limit(PULSAR_DEFAULT_MAX_MESSAGE_SIZE, "maxMessageSize of Pulsar (its default)")
        return RecordLimits(
            output=_on(pulsar, policy.output.topic),
            retry=_on(pulsar, policy.retry_topic),
            dead_letter=_on(pulsar, policy.dead_letter_topic),
        )
    topics = [t for t in (policy.output.topic, policy.retry_topic, policy.dead_letter_topic) if t]
    try:
        configured = _describe(spark, policy, client, topics)
    except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
        log.warning(
            "cannot read max.message.bytes of %s (%s): grant the engine's principal DESCRIBE_CONFIGS on "
            "them; until then the retry and dead-letter topics are taken to accept what "
            "spec.topics gives them, else %d bytes, and the output topic %d bytes",
            ", ".join(repr(t) for t in topics),
            root_cause(error),
            KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
            KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
        )
        configured = {
            policy.output.topic: KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
            policy.retry_topic: _given(policy.topics.retry_config),
            policy.dead_letter_topic: _given(policy.topics.dead_letter_config),
        }
    return RecordLimits(
        output=_limit(policy.output.topic, configured),
        retry=_limit(policy.retry_topic, configured),
        dead_letter=_limit(policy.dead_letter_topic, configured),
    )


def _describe(
    spark: SparkSession, policy: DeadLetterPolicy, client: dict[str, str] | None, topics: list[str]
) -> dict[str, int]:
    """Each topic's ``max.message.bytes`` in force, from the broker."""
    jvm: Any = spark.sparkContext._jvm
    resource = jvm.org.apache.kafka.common.config.ConfigResource
    topic_type = getattr(jvm.org.apache.kafka.common.config, "ConfigResource$Type").TOPIC
    resources = jvm.java.util.ArrayList()
    for topic in topics:
        resources.add(resource(topic_type, topic))
    with admin_client(spark, policy, client) as admin:
        described = (
            admin.describeConfigs(resources)
            .all()
            .get(TIMEOUT_MS, jvm.java.util.concurrent.TimeUnit.MILLISECONDS)
        )
        return {
            topic: int(described.get(resource(topic_type, topic)).get(TOPIC_CONFIG).value())
            for topic in topics
        }


def _given(config: dict[str, str] | Any) -> int:
    raw = config.get(TOPIC_CONFIG)
    return int(raw) if raw is not None and str(raw).isdigit() else KAFKA_DEFAULT_MAX_MESSAGE_BYTES


def _limit(topic: str, configured: dict[str, int]) -> Limit:
    if not topic:
        return PRODUCER_LIMIT
    value = configured.get(topic, KAFKA_DEFAULT_MAX_MESSAGE_BYTES)
    if value >= PRODUCER_MAX_REQUEST_SIZE:
        return _on(PRODUCER_LIMIT, topic)
    return Limit(value, f"max.message.bytes of topic {topic!r}", topic)


def _on(limit: Limit, topic: str) -> Limit:
    return Limit(limit.bytes, limit.source, topic)
