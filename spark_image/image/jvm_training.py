"""The training run of the image's class-data-sharing archive (JDK AppCDS).

A Spark JVM spends most of a cold start loading and verifying the same classes from the image's
jars: the driver before its session is up, an executor before it registers and again at its
first task. The image's build runs this program once under ``-XX:ArchiveClassesAtExit`` (a
local Spark, driver and executor in one JVM), so the archive holds what both load: the session
configured as the engine's, a batch job, the Kafka client (a consumer and a producer, built and
closed, never connected), the Kubernetes client's pod model (a pod written and read as JSON),
and a streaming query of the engine's
shape: records through the engine's delay stage (``io.sparkdlq.engine.DelayStage``: state in
RocksDB, processing-time timers) beside others, through Python with Arrow. The driver and
executor JVMs of the image then map these classes instead (``JDK_JAVA_OPTIONS`` in
``spark_image/Dockerfile``); a JVM whose class path does not start as this run's
(``class_path_jar.py``) says nothing and loads them as before.

    spark-submit --master 'local[1]' --driver-class-path CLASS_PATH_JAR jvm_training.py CHECKPOINT
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

#: The session's settings that decide which classes it loads: the engine's state store and Arrow
#: (``dlq_engine.job.session``; the image trains before the engine is installed, so that a change
#: to the engine's code does not make the archive anew).
CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
}
#: How long the streaming query may take to run its batches before the run gives up.
DEADLINE_S = 300
#: Batches the streaming query runs: the first, then some that fire the delay stage's timers.
BATCHES = 4


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


def _kubernetes_model(spark: SparkSession) -> None:
    """A pod of the Kubernetes client's model, written as JSON and read back, as a driver on
    Kubernetes does with its executors' pods (the client itself is not made here: its HTTP
    client's threads would keep the training's JVM from ending)."""
    jvm: Any = spark.sparkContext._jvm
    model = jvm.io.fabric8.kubernetes.api.model
    pod = (
        model.PodBuilder()
        .withNewMetadata()
        .withName("training")
        .endMetadata()
        .withNewSpec()
        .addNewContainer()
        .withName("spark")
        .withImage("spark-dlq")
        .addNewEnv()
        .withName("SPARK_ROLE")
        .withValue("executor")
        .endEnv()
        .endContainer()
        .endSpec()
        .build()
    )
    serialization = jvm.io.fabric8.kubernetes.client.utils.Serialization
    serialization.unmarshal(serialization.asJson(pod), model.Pod._java_lang_class)


def _identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def _engine_shaped(spark: SparkSession) -> DataFrame:
    """Records as the engine reads them, half through the delay stage (some held on a timer),
    all through Python with Arrow."""
    jvm: Any = spark.sparkContext._jvm
    rows = spark.readStream.format("rate").option("rowsPerSecond", 20).load()
    records = rows.select(
        F.col("value").cast("string").cast("binary").alias("key"),
        F.col("value").cast("string").cast("binary").alias("value"),
        F.array(F.struct(F.lit("dlq.attempt").alias("key"), F.lit(b"1").alias("value"))).alias("headers"),
        F.lit("training").alias("topic"),
        (F.col("value") % 2).cast("int").alias("partition"),
        F.col("value").alias("offset"),
        F.col("timestamp"),
    )
    due = records.withColumn("deliver_at", F.expr("unix_millis(timestamp) + (offset % 3) * 1000"))
    due = due.withColumn("due", (F.ceil(F.col("deliver_at") / 100) * 100).cast("bigint"))
    held = DataFrame(
        jvm.io.sparkdlq.engine.DelayStage.holdUntilDue(due._jdf, "due", "deliver_at", 1500), spark
    )
    source = records.withColumn("deliver_at", F.lit(None).cast("bigint"))
    both = source.unionByName(held.drop("due"))
    return both.mapInArrow(_identity, both.schema)


def main(checkpoint: str) -> None:
    builder = SparkSession.builder.appName("jvm-training")
    for key, value in CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    _kafka_clients(spark)
    _kubernetes_model(spark)
    seen: list[int] = []
    query = (
        _engine_shaped(spark)
        .writeStream.outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .foreachBatch(lambda frame, batch: seen.append(frame.count()))
        .start()
    )
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < BATCHES and query.isActive and time.monotonic() < deadline:
        time.sleep(0.5)
    failed = query.exception()
    query.stop()
    spark.stop()
    if len(seen) < BATCHES:
        raise SystemExit(f"the training query ran {len(seen)} batches in {DEADLINE_S}s: {failed}")


if __name__ == "__main__":
    main(sys.argv[1])
