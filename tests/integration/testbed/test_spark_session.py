"""The test bed's Spark reads from and writes to the real Kafka broker with the connector jars
from the cache, in a streaming query."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.integration.testbed.test_kafka_broker import _consume


def test_streaming_query_copies_a_topic_with_headers(
    spark: Any, bootstrap_servers: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source, sink = make_topic("spark-in", partitions=2), make_topic("spark-out")
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    for i in range(20):
        producer.produce(
            source, value=f"m{i}".encode(), key=str(i).encode(), headers=[("n", str(i).encode())]
        )
    assert producer.flush(30) == 0

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    query = (
        stream.selectExpr("key", "upper(cast(value as string)) as value", "headers")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
        assert query.exception() is None
    finally:
        query.stop()

    records = _consume(bootstrap_servers, sink, 20)
    assert sorted(r.value() for r in records) == sorted(f"M{i}".encode() for i in range(20))
    assert all(r.headers() == [("n", r.key())] for r in records)
