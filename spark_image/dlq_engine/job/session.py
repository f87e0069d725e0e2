"""The SparkSession the engine runs in.

On Kubernetes the spark-operator's ``spark-submit`` has already made the session's
configuration (image, resources, ``spark.jars`` baked into the image); locally the CLI's
``--master`` and ``PYSPARK_SUBMIT_ARGS`` do. What the engine itself requires is set here:
the RocksDB state store for the delay stage (with changelog checkpointing), Delta Lake's
extension and catalog when the dead-letter table is a Delta table, and the policy's
``sparkConf``.
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
    # A state commit writes the batch's changes (a changelog file) instead of a snapshot of the
    # whole store; snapshots are made in the background. The commit sits between two batches'
    # routing, where every millisecond is retry lateness: it took about half the time
    # (bench/notes/11-retry-precision.md). Spark reads older snapshot-only checkpoints with it.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # PySpark's daemon without the ~100 ms per task of re-reading pyspark.zip (worker_daemon).
    "spark.python.daemon.module": "dlq_engine.job.worker_daemon",
}
#: Delta Lake's SQL extension and catalog, for a dead-letter table of format delta. Delta 4.0
#: refuses even a path-based write without them (DELTA_CONFIGURE_SPARK_SESSION_WITH_EXTENSION_AND_
#: CATALOG), and both are static: they must be set before the session starts. Only a policy with
#: a Delta table gets them, so every other policy's session is what it was.
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
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
    # On Kubernetes Spark's default (0.8) holds the session's start until the executors have
    # registered (up to 30 s): the engine's checks, its checkpoint lease and its query's start
    # then wait for an executor pod they do not need. At 0 they run while the executor starts;
    # the first batch's tasks wait for it.
    "spark.scheduler.minRegisteredResourcesRatio": "0",
}


#: Comma-separated lists: the engine's entries are added to a policy's own.
_LIST_CONF = ("spark.sql.extensions",)


def required_conf(policy: DeadLetterPolicy) -> dict[str, str]:
    """What the engine requires of the session for this policy (over the policy's sparkConf)."""
    table = policy.dead_letter.table
    if table is None or table.format != "delta":
        return dict(REQUIRED_CONF)
    return {**REQUIRED_CONF, **DELTA_CONF}


def session_conf(policy: DeadLetterPolicy) -> dict[str, str]:
    """The session's configuration: defaults, the policy's sparkConf, what the engine requires."""
    conf = {**DEFAULT_CONF, **policy.spark.spark_conf}
    for key, value in required_conf(policy).items():
        own = [item.strip() for item in conf.get(key, "").split(",") if item.strip()]
        if key in _LIST_CONF and own:
            conf[key] = ",".join([*own, *([value] if value not in own else [])])
        else:
            conf[key] = value
    return conf


def build_session(policy: DeadLetterPolicy, *, master: str | None = None) -> SparkSession:
    builder = SparkSession.builder.appName(f"spark-dlq-{policy.namespace}-{policy.name}")
    if master:
        builder = builder.master(master)
    for key, value in session_conf(policy).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
