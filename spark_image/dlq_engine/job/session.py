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
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}
#: Defaults a policy's sparkConf may override. The shuffle partitions are the delay stage's
#: tasks: each costs a stateful Python task in every micro-batch, empty or not (about 0.5 s of
#: CPU measured here), so the default is small; raise it for heavy retry traffic on many
#: executors. The first checkpoint fixes the number (Spark ignores later changes).
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
