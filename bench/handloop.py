"""The baselines outside Spark, in one Python process with confluent-kafka.

``hand_loop`` is what teams write today: a consumer group on the source and retry topics, poll
a batch, call the processor per message, produce the result to the output topic or the failed
message (with retry or dead-letter headers) to the retry or DLQ topic, then flush the producer
and commit the offsets, so nothing is lost (at-least-once). A retry record that is not due yet
pauses its partition and seeks back to it until it is (the pause/seek pattern of Spring Kafka's
back-off listener), so waiting retries neither block the source nor spin.

``raw_copy`` copies a topic with no processing at all: the client's and broker's ceiling.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any, cast

from dlq_engine import Message, Retry, Terminate

PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "queue.buffering.max.messages": 1_000_000,
}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _header(headers: list[tuple[str, bytes]], name: str) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def _encode(result: Any) -> bytes | None:
    if result is None or isinstance(result, bytes):
        return result
    if isinstance(result, str):
        return result.encode()
    import json

    return json.dumps(result).encode()


def hand_loop(
    bootstrap: str,
    *,
    source: str,
    retry: str,
    dlq: str,
    output: str,
    n: int,
    process: Callable[[Message], Any],
    max_redeliver: int = 2,
    backoff_ms: int = 200,
    batch: int = 500,
    timeout: float = 900.0,
    policy: str = "bench/hand-loop",
) -> dict[str, Any]:
    """Route until ``n`` source messages are processed; returns counts and timings."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    group = f"hand-loop-{source}-{int(time.time() * 1000)}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    counts = {"source": 0, "output": 0, "retried": 0, "dead": 0, "redelivered": 0}
    paused: dict[tuple[str, int], float] = {}
    start = time.time()
    deadline = time.monotonic() + timeout
    consumer.subscribe([source, retry])
    try:
        while counts["source"] < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"hand loop: {counts} after {timeout:.0f}s")
            now = _now_ms()
            due = [tp for tp, at in paused.items() if at <= now]
            if due:
                consumer.resume([TopicPartition(t, p) for t, p in due])
                for tp in due:
                    del paused[tp]
            messages = consumer.consume(num_messages=batch, timeout=0.2)
            if not messages:
                continue
            for m in messages:
                if m.error() is not None:
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                # A record without an error has its position.
                assert topic is not None
                assert partition is not None
                assert offset is not None
                if (topic, partition) in paused:
                    continue  # after a seek back: this partition waits
                raw_headers = m.headers() or []
                # A consumed record's headers are (name, value) pairs; the stubs allow any produce() form.
                pairs = cast("list[tuple[str, bytes]]", raw_headers)
                attempt = 0
                if topic == retry:
                    deliver_at = int(_header(pairs, "dlq.deliver.at") or b"0")
                    if deliver_at > _now_ms():
                        consumer.pause([TopicPartition(topic, partition)])
                        consumer.seek(TopicPartition(topic, partition, offset))
                        paused[(topic, partition)] = deliver_at
                        continue
                    attempt = int(_header(pairs, "dlq.attempt") or b"0")
                    counts["redelivered"] += 1
                headers = dict(pairs)
                message = Message(
                    key=m.key(),
                    value=m.value(),
                    headers=headers,
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    timestamp=m.timestamp()[1],
                    attempt=attempt,
                )
                try:
                    result = _encode(process(message))
                    if result is not None:
                        producer.produce(output, key=m.key(), value=result, headers=raw_headers)
                        counts["output"] += 1
                except Exception as error:  # noqa: BLE001 - every processor failure is routed
                    failures = attempt + 1
                    kept: list[tuple[str, str | bytes | None]] = [
                        (k, v) for k, v in pairs if not k.startswith("dlq.")
                    ]
                    first = {k: v for k, v in pairs if k.startswith("dlq.original.")}
                    now_ms = _now_ms()
                    extra: list[tuple[str, str | bytes | None]] = [
                        ("dlq.original.topic", first.get("dlq.original.topic", topic.encode())),
                        ("dlq.original.partition", first.get("dlq.original.partition", b"%d" % partition)),
                        ("dlq.original.offset", first.get("dlq.original.offset", b"%d" % offset)),
                        ("dlq.attempt", b"%d" % failures),
                        ("dlq.error.class", type(error).__name__.encode()),
                        ("dlq.error.message", str(error)[:2000].encode()),
                        ("dlq.error.stacktrace", traceback.format_exc()[-8000:].encode()),
                        ("dlq.policy", policy.encode()),
                        ("dlq.failed.at", b"%d" % now_ms),
                    ]
                    if isinstance(error, Retry) and error.delay_ms is not None:
                        wait = error.delay_ms
                    else:
                        wait = backoff_ms
                    if not isinstance(error, Terminate) and failures <= max_redeliver:
                        extra.append(("dlq.deliver.at", b"%d" % (now_ms + wait)))
                        producer.produce(retry, key=m.key(), value=m.value(), headers=kept + extra)
                        counts["retried"] += 1
                    else:
                        reason = b"terminated" if isinstance(error, Terminate) else b"exhausted"
                        extra.append(("dlq.reason", reason))
                        producer.produce(dlq, key=m.key(), value=m.value(), headers=kept + extra)
                        counts["dead"] += 1
                producer.poll(0)
                consumer.store_offsets(message=m)
                if topic == source:
                    counts["source"] += 1
            # At-least-once: the writes are acknowledged before the offsets are committed.
            if producer.flush(60) != 0:
                raise RuntimeError("hand loop: the producer could not flush")
            try:
                consumer.commit(asynchronous=False)
            except Exception as error:  # nothing stored yet (only paused retries in the batch)
                if "NO_OFFSET" not in str(error):
                    raise
        end = time.time()
    finally:
        consumer.close()
    return {"seconds": end - start, "counts": counts}


def raw_copy(
    bootstrap: str, *, source: str, target: str, n: int, batch: int = 10_000, timeout: float = 900.0
) -> dict[str, Any]:
    """Copy ``n`` messages (key, value, headers) from ``source`` to ``target``; no processing."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-copy-{target}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    start = time.time()
    deadline = time.monotonic() + timeout
    copied = 0
    try:
        metadata = consumer.list_topics(source, timeout=10)
        consumer.assign([TopicPartition(source, p, 0) for p in metadata.topics[source].partitions])
        while copied < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"raw copy: {copied} of {n} after {timeout:.0f}s")
            for m in consumer.consume(num_messages=batch, timeout=0.2):
                if m.error() is not None:
                    continue
                while True:
                    try:
                        producer.produce(target, key=m.key(), value=m.value(), headers=m.headers())
                        break
                    except BufferError:
                        producer.poll(0.05)
                copied += 1
            producer.poll(0)
        if producer.flush(120) != 0:
            raise RuntimeError("raw copy: the producer could not flush")
        consumer.commit(asynchronous=False)
        end = time.time()
    finally:
        consumer.close()
    return {"seconds": end - start, "counts": {"copied": copied}}
