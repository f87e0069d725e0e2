"""The SparkSession the engine runs in.

On Kubernetes the spark-operator's ``spark-submit`` has already made the session's
configuration (image, resources, ``spark.jars`` baked into the image); locally the CLI's
``--master`` and ``PYSPARK_SUBMIT_ARGS`` do. What the engine itself requires is set here:
the RocksDB state store for the delay stage, and the policy's ``sparkConf``.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from dlq_engine.model.policy import DeadLetterPolicy

REQUIRED_CONF = {
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    # On (Spark's default), every write to the state store first reads the key back to count
    # rows; for the delay stage's list state that read returns the whole list, so appending a
    # bucket of n retries cost O(n^2): 2,000 retries due in the same 100 ms held a micro-batch
    # for 20-40 s (bench/analysis.md). The row count is only a metric.
    "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # PySpark's daemon without the ~100 ms per task of re-reading pyspark.zip (worker_daemon).
    "spark.python.daemon.module": "dlq_engine.job.worker_daemon",
}
#: Defaults a policy's sparkConf may override. The shuffle partitions are the delay stage's
#: tasks: each is a stateful task and a routing task in every micro-batch, empty or not, so the
#: default is small; raise it for heavy retry traffic on many executors. The first checkpoint
#: fixes the number (Spark ignores later changes).
DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
}


def build_session(policy: DeadLetterPolicy, *, master: str | None = None) -> SparkSession:
    builder = SparkSession.builder.appName(f"spark-dlq-{policy.namespace}-{policy.name}")
    if master:
        builder = builder.master(master)
    for key, value in {**DEFAULT_CONF, **policy.spark.spark_conf, **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
