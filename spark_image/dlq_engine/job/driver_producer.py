"""A Kafka producer on the driver's JVM, for a record the driver writes itself.

Every routed record goes through Spark's Kafka sink, written by the executors. The one record the
driver needs on a topic before its query starts (a restart's wake record, ``pipeline.wake``) is
sent with the connector's own client on the driver instead: a Spark job for it waits for an
executor to register and then holds the task slot the query's first batch needs, which after a
driver was killed is the slowest part of coming back (docs/cluster-e2e.md). The record's
partition and offset come back, so the driver knows which batch read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import SparkSession

from dlq_engine.job.preflight import TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class Written:
    """Where a record was written."""

    topic: str
    partition: int
    offset: int


def send(
    spark: SparkSession,
    settings: Mapping[str, str],
    *,
    topic: str,
    key: bytes,
    value: bytes,
    headers: Sequence[tuple[str, bytes]] = (),
) -> Written:
    """Write one record with a producer made from ``settings`` (Kafka client properties, the
    bootstrap servers among them), wait for the broker's acknowledgement, close the producer."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    props = jvm.java.util.Properties()
    for name, setting in settings.items():
        props.put(name, setting)
    props.put("client.id", "spark-dlq-driver")
    props.put("max.block.ms", str(TIMEOUT_MS))
    props.put("request.timeout.ms", str(TIMEOUT_MS))
    props.put("delivery.timeout.ms", str(TIMEOUT_MS * 2))
    serializer = jvm.org.apache.kafka.common.serialization.ByteArraySerializer
    producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(props, serializer(), serializer())
    try:
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord(topic, key, value)
        for name, data in headers:
            record.headers().add(name, data)
        unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        metadata = producer.send(record).get(TIMEOUT_MS * 2, unit)
        return Written(topic, int(metadata.partition()), int(metadata.offset()))
    finally:
        producer.close()
