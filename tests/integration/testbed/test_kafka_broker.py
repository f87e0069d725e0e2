"""The test bed's Kafka is a real broker: topics, records with headers, consumer groups."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from spark_dlq_devtools.kafka import KafkaBroker


def _consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[object]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records = []
    try:
        import time

        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append(message)
    finally:
        consumer.close()
    return records


def test_broker_serves_metadata_in_kraft_mode(kafka: KafkaBroker) -> None:
    metadata = AdminClient({"bootstrap.servers": kafka.bootstrap_servers}).list_topics(timeout=10)
    assert list(metadata.brokers) == [1]
    assert kafka.bootstrap_servers.startswith("127.0.0.1:")


def test_records_keep_key_value_and_headers(bootstrap_servers: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("roundtrip", partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all"})
    for i in range(9):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            key=f"k{i}".encode(),
            headers=[("h", f"x{i}".encode()), ("h", b"dup")],
        )
    assert producer.flush(30) == 0

    records = _consume(bootstrap_servers, topic, 9)
    assert sorted(r.value() for r in records) == [f"v{i}".encode() for i in range(9)]
    by_key = {r.key(): r for r in records}
    assert by_key[b"k4"].headers() == [("h", b"x4"), ("h", b"dup")]
    assert {r.partition() for r in records} <= {0, 1, 2}


def test_unique_topics_do_not_collide(make_topic: Callable[..., str], bootstrap_servers: str) -> None:
    first, second = make_topic("same"), make_topic("same")
    assert first != second
    topics = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(timeout=10).topics
    assert first in topics
    assert second in topics
