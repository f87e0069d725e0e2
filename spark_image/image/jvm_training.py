"""The training run of the image's class-data-sharing archive (JDK AppCDS).

A Spark JVM spends most of a cold start loading and verifying the same classes from the image's
jars: the driver before its session is up, an executor before it registers and again at its
first task. The image's build runs this program once under ``-XX:ArchiveClassesAtExit`` (a
local Spark, driver and executor in one JVM), so the archive holds what both load: the session
configured as the engine's, a batch job, the Kafka client (a consumer and a producer, built and
closed, never connected), the engine's own classes, and a streaming query with RocksDB state and
Python through Arrow. The driver and executor JVMs of the image then map these classes instead
(``JDK_JAVA_OPTIONS`` in ``spark_image/Dockerfile``); a JVM whose class path does not match
the archive's says nothing and loads them as before.

    spark-submit --master 'local[1]' jvm_training.py CHECKPOINT     # in the image's build
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

#: The session's settings that decide which classes it loads: the engine's state store and Arrow
#: (``dlq_engine.job.session``; the image trains before the engine is installed, so that a change
#: to the engine's code does not make the archive anew).
CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
}
#: How long the streaming query may take to run its batches before the run gives up.
DEADLINE_S = 300


def _kafka_clients(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for client, serde in (
        ("org.apache.kafka.clients.consumer.KafkaConsumer", "ByteArrayDeserializer"),
        ("org.apache.kafka.clients.producer.KafkaProducer", "ByteArraySerializer"),
    ):
        properties = jvm.java.util.Properties()
        properties.setProperty("bootstrap.servers", "127.0.0.1:9")
        kind = "key.deserializer" if "Deserializer" in serde else "key.serializer"
        properties.setProperty(kind, f"org.apache.kafka.common.serialization.{serde}")
        properties.setProperty(kind.replace("key", "value"), f"org.apache.kafka.common.serialization.{serde}")
        instance = getattr(jvm, client)(properties)
        instance.close()
    jvm.org.apache.spark.sql.kafka010.KafkaSourceProvider()


def _identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def main(checkpoint: str) -> None:
    builder = SparkSession.builder.appName("jvm-training")
    for key, value in CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    _kafka_clients(spark)
    stream = spark.readStream.format("rate").option("rowsPerSecond", 20).load()
    counts = (
        stream.withWatermark("timestamp", "1 second")
        .groupBy(F.window("timestamp", "1 second"))
        .count()
        .mapInArrow(_identity, "window struct<start: timestamp, end: timestamp>, count long")
    )
    seen: list[int] = []
    query = (
        counts.writeStream.outputMode("update")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(lambda frame, batch: seen.append(frame.count()))
        .start()
    )
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    query.stop()
    spark.stop()
    if len(seen) < 3:
        raise SystemExit(f"the training query ran {len(seen)} batches in {DEADLINE_S}s")


if __name__ == "__main__":
    main(sys.argv[1])
