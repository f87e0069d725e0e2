"""The executors' Python workers, started before the first batch needs them.

On Kubernetes a restarted driver gets new executor pods, and the first routing task on one starts
PySpark's worker daemon there, forks a Python worker and imports the engine and the processor in
it: seconds of the first batch after every restart (docs/cluster-e2e.md). The executor registers
while the driver still runs its checks and takes its checkpoint lease (the session does not wait
for it: ``spark.scheduler.minRegisteredResourcesRatio`` 0), and sits idle until the query starts.
``start`` fills that wait: in a thread of its own it runs one small job, a task per executor
through the Arrow Python path routing takes (``mapInArrow``), importing what routing imports and
loading the processor, so that the first batch finds a worker ready (Spark keeps a finished
worker for the next task, ``spark.python.worker.reuse``). A local master has no executor to warm:
its tasks run in the driver's own process, whose workers the first batch starts as before.

A warm-up never stops the engine: one that fails, or runs on when the query starts, leaves the
first batch as cold as it was.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from dlq_engine.model.policy import DeadLetterPolicy

log = logging.getLogger("dlq_engine.warm_up")

#: Masters whose executors are processes of their own, started cold with the driver.
_EXECUTOR_MASTERS = ("k8s://",)


def warms(master: str) -> bool:
    """Whether a session on ``master`` has executors worth warming."""
    return master.startswith(_EXECUTOR_MASTERS)


def warm_task(entrypoint: str) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The warm-up's task: imports what a routing task imports and loads the processor, in the
    Python worker it runs in, and passes its rows through."""

    def warm(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dlq_engine.job.breaker import for_this_task  # noqa: F401
        from dlq_engine.job.delay import release_when_due  # noqa: F401
        from dlq_engine.job.processors import load_processor
        from dlq_engine.processing.batches import route_batches  # noqa: F401

        load_processor(entrypoint)
        yield from batches

    return warm


def run(spark: SparkSession, policy: DeadLetterPolicy) -> None:
    """One task per executor through ``warm_task``, waiting for them to register."""
    tasks = policy.spark.executor.instances
    spark.sparkContext.setJobDescription("dlq-engine: warming the executors' Python workers")
    frame = spark.range(0, tasks, numPartitions=tasks)
    frame.mapInArrow(warm_task(policy.processor.entrypoint), frame.schema).collect()


def start(spark: SparkSession, policy: DeadLetterPolicy) -> threading.Thread | None:
    """Warm the executors in the background when the session has any (``warms``)."""
    if not warms(spark.sparkContext.master or ""):
        return None

    def warm() -> None:
        try:
            run(spark, policy)
        except Exception as error:  # noqa: BLE001 - only the first batch's start is at stake
            log.warning("warming the executors failed (the first batch starts them): %s", error)

    thread = threading.Thread(target=warm, name="dlq-engine-warm-up", daemon=True)
    thread.start()
    return thread
