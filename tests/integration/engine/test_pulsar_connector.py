"""The engine's Pulsar connector (``dlq_engine.job.pulsar_connector``: a Spark data source in Java,
``io.sparkdlq.engine.pulsar``) on a real standalone broker: a streaming query reads a topic and
writes another through it.

What the engine relies on: offsets kept in the checkpoint survive a restart (nothing read twice,
nothing skipped), the durable subscription exists under the policy's name and is acknowledged
only when a batch commits, a failed write leaves the subscription's backlog as it was, every
micro-batch (the first included) reads at most ``maxEntriesPerTrigger`` entries and moves on
across ledgers, keys and properties round-trip (a key that is not UTF-8 too), and the retry and
dead-letter topics are written without batching, retry letters with delayed delivery.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlq_engine.job.pulsar_connector import FORMAT, check_classpath
from dlq_engine.routing.headers import DELIVER_AT
from spark_dlq_devtools.paths import spark_pulsar_jars
from spark_dlq_devtools.pulsar import Message, PulsarBroker

ROWS = "topic string, key binary, value binary, headers array<struct<key: string, value: binary>>"


def _stream(spark: Any, pulsar: PulsarBroker, source: str, **read: str) -> Any:
    return (
        spark.readStream.format(FORMAT)
        .option("serviceUrl", pulsar.service_url)
        .option("topic", source)
        .option("subscription", "copier")
        .option("startingOffsets", "earliest")
        .options(**read)
        .load()
    )


def _copy(
    spark: Any, pulsar: PulsarBroker, source: str, target: str, checkpoint: Path, limit: int = 0, **write: str
) -> Any:
    frame = _stream(spark, pulsar, source, maxEntriesPerTrigger=str(limit))
    return (
        frame.selectExpr(f"'{target}' as topic", "key", "value", "headers")
        .writeStream.format(FORMAT)
        .option("serviceUrl", pulsar.service_url)
        .options(**write)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _sent(n: int, first: int = 0) -> list[Message]:
    return [Message(f"k{i}", f"v{i}".encode(), {"n": str(i), "text": "é"}) for i in range(first, first + n)]


def _run(spark: Any, pulsar: PulsarBroker, source: str, target: str, checkpoint: Path, **write: str) -> None:
    """Copy what is there, then one marker message in a batch of its own: Spark tells a source
    that a batch committed when it starts the next one, so after the marker's batch every
    message before it is acknowledged, and the subscription's backlog is the marker."""
    query = _copy(spark, pulsar, source, target, checkpoint, **write)
    try:
        query.processAllAvailable()
        pulsar.produce(source, [Message("marker", b"marker")])
        query.processAllAvailable()
    finally:
        query.stop()
    assert pulsar.backlog(source, "copier") == 1


def test_offsets_survive_a_restart_and_are_acknowledged_only_on_commit(
    spark: Any, pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_pulsar_topic("src", partitions=2)
    target = make_pulsar_topic("copy")
    checkpoint = tmp_path / "cp"
    pulsar.produce(source, _sent(30), batching=True)

    _run(spark, pulsar, source, target, checkpoint, unbatchedTopics=target)
    copied = [m for m in pulsar.read_all(target) if m.key != "marker"]
    assert sorted((m.key, m.value, dict(m.properties)) for m in copied) == sorted(
        (m.key, m.value, dict(m.properties)) for m in _sent(30)
    )
    assert all(m.message_id.endswith(":-1") for m in copied), "the unbatched topic got a batch"
    # The only durable subscription is the one named by the options (the executors' pooled
    # readers are non-durable).
    subscriptions = pulsar.stats(source + "-partition-0")["subscriptions"]
    assert [name for name, sub in subscriptions.items() if sub["isDurable"]] == ["copier"]

    # A restart from the checkpoint reads exactly what came since.
    pulsar.produce(source, _sent(20, first=30))
    _run(spark, pulsar, source, target, checkpoint, unbatchedTopics=target)
    values = [m.value for m in pulsar.read_all(target)]
    assert sorted(values) == sorted([m.value for m in _sent(50)] + [b"marker", b"marker"])

    # A batch whose write fails commits nothing: the subscription holds its messages, and the
    # next run, once the topic is back, writes them.
    pulsar.delete_topic(target)
    pulsar.produce(source, _sent(5, first=50))
    query = _copy(spark, pulsar, source, target, checkpoint)
    with pytest.raises(Exception, match="cannot create a producer"):
        query.awaitTermination(120)
    assert pulsar.backlog(source, "copier") >= 5
    pulsar.create_topic(target)
    _run(spark, pulsar, source, target, checkpoint)
    assert sorted(m.value for m in pulsar.read_all(target)) == sorted(
        [m.value for m in _sent(5, first=50)] + [b"marker"]
    )


def test_every_batch_is_limited_from_the_first_and_moves_on_across_ledgers(
    spark: Any, pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str], tmp_path: Path
) -> None:
    source, target = make_pulsar_topic("src"), make_pulsar_topic("copy")
    pulsar.produce(source, _sent(60))
    # Unloading the topic closes its ledger: the next messages are in a new one.
    pulsar.admin("PUT", f"/admin/v2/persistent/public/default/{source}/unload")
    pulsar.produce(source, _sent(60, first=60))
    assert len({m.message_id.split(":")[0] for m in pulsar.read_all(source)}) == 2, "one ledger"

    query = _copy(spark, pulsar, source, target, tmp_path / "cp", limit=25, unbatchedTopics=target)
    try:
        query.processAllAvailable()
        read = [int(p.numInputRows) for p in query.recentProgress if int(p.numInputRows)]
    finally:
        query.stop()
    assert max(read) <= 25, read
    assert sum(read) == 120
    assert sorted(m.value for m in pulsar.read_all(target)) == sorted(m.value for m in _sent(120))


def test_writer_batches_except_on_unbatched_topics_and_delays_retry_letters(
    spark: Any, pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str], tmp_path: Path
) -> None:
    batched, unbatched, delayed = (make_pulsar_topic(p) for p in ("out", "dlq", "retry"))
    due = int(time.time() * 1000) + 3_000
    rows = [
        (t, f"k{i}".encode(), f"v{i}".encode(), [(DELIVER_AT, str(due).encode())])
        for t in (batched, unbatched, delayed)
        for i in range(50)
    ]
    # Bytes that are not UTF-8: the key and the value come back as they were, a property value
    # (a string in Pulsar) with U+FFFD in place of the bad byte.
    rows.append((unbatched, b"\xff\x00k", b"\xfe\xff", [("bin", b"a\xffb")]))
    frame = spark.createDataFrame(rows, ROWS)
    # A Shared subscription sees delayed delivery (the engine's own readers ignore it).
    import pulsar as client_lib

    client = client_lib.Client(pulsar.service_url)
    try:
        shared = client.subscribe(delayed, "shared", consumer_type=client_lib.ConsumerType.Shared)
        (
            frame.repartition(1)
            .write.format(FORMAT)
            .mode("append")
            .option("serviceUrl", pulsar.service_url)
            .option("unbatchedTopics", f"{unbatched},{delayed}")
            .option("delayedTopics", delayed)
            .option("deliverAtProperty", DELIVER_AT)
            .save()
        )
        first = shared.receive(30_000)
        assert time.time() * 1000 >= due
        assert first.properties()[DELIVER_AT] == str(due)
    finally:
        client.close()
    assert any(not m.message_id.endswith(":-1") for m in pulsar.read_all(batched))
    assert all(m.message_id.endswith(":-1") for m in pulsar.read_all(unbatched))
    assert len(pulsar.read_all(delayed)) == 50

    query = (
        _stream(spark, pulsar, unbatched)
        .writeStream.format("memory")
        .queryName("pulsar_bytes")
        .option("checkpointLocation", str(tmp_path / "bytes"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    (binary,) = spark.sql("select key, value, headers from pulsar_bytes where value = x'feff'").collect()
    assert bytes(binary.key) == b"\xff\x00k"
    assert [(h.key, bytes(h.value)) for h in binary.headers] == [("bin", "a\ufffdb".encode())]


def test_the_client_jars_add_nothing_spark_ships(spark: Any) -> None:
    """One version of each library on the class path, Spark's: no jar of Pulsar's client
    duplicates one of PySpark's (scripts/setup/maven/spark-pulsar.pom.xml excludes them)."""
    import pyspark

    def artifact(jar: Path) -> str:
        found = re.match(r"^(.*?)-\d[^-]*(?:-.*)?\.jar$", jar.name)
        return found.group(1) if found else jar.name

    sparks = {artifact(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    ours = {artifact(jar) for jar in spark_pulsar_jars()}
    assert "pulsar-client-original" in ours
    assert ours & sparks == set()
    check_classpath(spark)
