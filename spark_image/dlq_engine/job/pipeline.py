"""The streaming query: source and retry topics in, output, retry and dead-letter topics out.

    source topic ─────────────────────────────┐
                                               ├─ mapInArrow(release_when_due, route_batches)
    retry topic ── hold_until_due (state) ─────┘    ─ observe ─ Kafka sink
                                                   (processor called once per message)

One query, one checkpoint: a micro-batch's source and retry offsets, and the delay state,
are committed only after the Kafka sink has every record of that batch acknowledged
(``acks=all``). A failed write fails the batch, which is then replayed on restart, so nothing
is lost and duplicates are possible (at-least-once). No record passes through the driver.

With a dead-letter table (``spec.deadLetter.table``) the sink is ``foreachBatch``: the routed
batch is persisted (the processor runs once per micro-batch, however many actions follow),
its Kafka records are written with the batch Kafka writer (the same producer settings), then
its dead letters are appended to the table (``dead_letter_table``); the batch commits only
after both. Without one, the streaming Kafka sink as it always was.

On Pulsar (``spec.broker.type: pulsar``) the topics are read and written through the engine's
own connector (``pulsar_connector``: a Spark data source in Java; checkpointed message-id
offsets, the durable subscription acknowledged on commit, retry and dead-letter topics written
unbatched) with the same columns, so everything between the sources and the sink is the same
query.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.query import StreamingQuery

from dlq_engine.failures import Ending, EngineError, Failure
from dlq_engine.job import breaker, dead_letter_table, driver_producer, pulsar_connector, record_limits
from dlq_engine.job.delay import (
    DELIVER_AT_COLUMN,
    RECORD_COLUMNS,
    hold_until_due,
    lookahead,
)
from dlq_engine.job.driver_producer import Written
from dlq_engine.job.ordering import ordered_records
from dlq_engine.job.processors import load_processor
from dlq_engine.model.policy import DeadLetterPolicy, DeadLetterTable
from dlq_engine.processing.batches import output_schema, route_batches
from dlq_engine.routing import stats as routing_stats
from dlq_engine.routing.headers import CONTROL, CONTROL_WAKE
from dlq_engine.routing.outcomes import Route
from dlq_engine.routing.record_size import PRODUCER_MAX_REQUEST_SIZE
from dlq_engine.routing.settings import RoutingSettings

#: Name of the observed metrics in query progress (``observedMetrics``).
METRICS = "dlq"
#: The observed metric that collects the routing tasks' summaries (``routing.stats``).
STATS = "stats"
#: Dead letters (written or ignored) by ``dlq.reason``: count name -> reason.
DEAD_REASONS = routing_stats.DEAD_REASONS


@dataclass(frozen=True, slots=True)
class RunOptions:
    checkpoint: str
    once: bool = False  # stop after the batches that read and route nothing (see runner)
    query_name: str | None = None
    kafka_client_dir: str | None = None
    #: The Pulsar client's settings (``dlq_engine.model.pulsar_client``), one file each.
    pulsar_client_dir: str | None = None
    #: ``retry.breaker``: the gate the source topic is read through (``job.breaker``).
    breaker_gate: str | None = None


def client_properties(directory: str | None) -> dict[str, str]:
    """Kafka client properties from a mounted Secret: file name = property, content = value.
    Kubernetes' ``..data`` links and hidden files are skipped."""
    if not directory or not os.path.isdir(directory):
        return {}
    properties: dict[str, str] = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.startswith(".") or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            properties[name] = handle.read().strip()
    return properties


#: Kafka consumer settings of the engine's sources (a mounted client property overrides them).
#: ``fetch.max.wait.ms``: after the last poll of a task the consumer has already sent the next
#: fetch, which the broker holds at the end of the log for up to this long; the next
#: micro-batch's first poll on that partition waits for it. Kafka's default, 500 ms, was added
#: to every micro-batch here (twice: the retry stage, then the source tasks).
CONSUMER_DEFAULTS = {"kafka.fetch.max.wait.ms": "10"}


#: The Kafka producer settings of the sink, streaming or batch: every record acknowledged by all
#: in-sync replicas, no duplicates from the producer's own retries, records up to 8 MiB (routing
#: dead-letters a larger one before the sink: ``processing.oversize``).
SINK_OPTIONS = {
    "kafka.acks": "all",
    "kafka.enable.idempotence": "true",
    "kafka.max.request.size": str(PRODUCER_MAX_REQUEST_SIZE),
}
#: The key of the wake control record (see ``wake``).
WAKE_KEY = b"spark-dlq-wake"
#: How long a micro-batch of the table sink waits for ``start`` to hand over the query's id.
QUERY_ID_TIMEOUT_S = 60.0


def kafka_options(policy: DeadLetterPolicy, options: RunOptions | None = None) -> dict[str, str]:
    directory = options.kafka_client_dir if options is not None else None
    extra = {f"kafka.{k}": v for k, v in client_properties(directory).items()}
    return {**extra, "kafka.bootstrap.servers": policy.broker.bootstrap_servers}


def read_topic(
    spark: SparkSession,
    policy: DeadLetterPolicy,
    options: RunOptions,
    topic: str,
    starting: str,
    *,
    limited: bool = True,
    gate: str | None = None,
) -> DataFrame:
    limit = policy.source.max_offsets_per_trigger if limited else 0
    if policy.is_pulsar:
        return (
            spark.readStream.format(pulsar_connector.FORMAT)
            .options(
                **pulsar_connector.read_options(policy, topic, starting, limit, options.pulsar_client_dir)
            )
            .load()
            .select(*RECORD_COLUMNS)
        )
    source_format, gated = breaker.source_options("kafka", gate)
    reader = spark.readStream.format(source_format).options(**gated, **CONSUMER_DEFAULTS)
    if limit:
        reader = reader.option("maxOffsetsPerTrigger", str(limit))
    return (
        reader.options(**kafka_options(policy, options))
        .option("subscribe", topic)
        .option("startingOffsets", starting)
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
        .option("groupIdPrefix", f"spark-dlq-{policy.source.subscription}")
        .load()
        .select(*RECORD_COLUMNS)
    )


def routed(spark: SparkSession, policy: DeadLetterPolicy, options: RunOptions) -> DataFrame:
    """Source and due retries, each routed by the processor: ``route``, then ``key``,
    ``value`` and ``headers`` to write, the dead-letter ``reason`` and ``lateness_ms``
    (see ``output_schema``)."""
    source = read_topic(
        spark, policy, options, policy.source.topic, policy.source.starting_offsets, gate=options.breaker_gate
    )
    if policy.source.ordering == "key":
        retry_topic = read_topic(spark, policy, options, policy.retry_topic, "earliest", limited=False)
        records = ordered_records(source, retry_topic, policy.ordering, lookahead(policy.spark.trigger_ms))
    else:
        source = source.withColumn(DELIVER_AT_COLUMN, F.lit(None).cast("bigint"))
        retries = hold_until_due(
            read_topic(spark, policy, options, policy.retry_topic, "earliest"),
            lookahead(policy.spark.trigger_ms),
        )
        records = source.unionByName(retries)

    limits = record_limits.read(spark, policy, client_properties(options.kafka_client_dir))
    settings = RoutingSettings.from_policy(policy, limits=limits)
    entrypoint = policy.processor.entrypoint
    # The schema of the Arrow batches routing reads; only the output's shape follows from it.
    arrow_in = to_arrow_schema(records.schema, timezone="UTC")
    out_schema = from_arrow_schema(output_schema(arrow_in, table=settings.table))

    def route(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dlq_engine.job.breaker import for_this_task
        from dlq_engine.job.delay import release_when_due as due_only
        from dlq_engine.job.processors import load_processor as load

        yield from route_batches(due_only(batches), for_this_task(settings), load(entrypoint))

    return records.mapInArrow(route, out_schema)


def observed(frame: DataFrame) -> DataFrame:
    """The routing tasks' summaries (``routing.stats``: one per Arrow batch, on its first row),
    visible in each batch's progress; the driver reads them with ``stats.observed_row``. The
    counts per route and reason are in the summaries, counted in Python where the routes are
    decided: an aggregate per count here was evaluated on every row in the JVM."""
    return frame.observe(METRICS, F.collect_list(F.col(STATS)).alias(STATS))


def sink_records(frame: DataFrame, policy: DeadLetterPolicy) -> DataFrame:
    """The Kafka sink's columns: the topic by route; key, value and headers as routing wrote
    them. Acknowledged and ignored records are not written."""
    route = F.col("route")
    topic = (
        F.when(route == int(Route.OUTPUT), F.lit(policy.output.topic or None))
        .when(route.isin(int(Route.RETRY), int(Route.PARKED), int(Route.CONTROL)), F.lit(policy.retry_topic))
        .when(route == int(Route.DEAD), F.lit(policy.dead_letter_topic))
    )
    return frame.where(topic.isNotNull()).select(topic.alias("topic"), "key", "value", "headers")


def sink_write_error(what: str, error: BaseException) -> EngineError:
    """A write of the table sink failed (the Kafka records or the dead-letter table): the batch
    fails with ``Ending.SINK_WRITE``, its line naming what failed and the Java exception, then
    the whole error (the metrics read the Kafka client's exception and topic from it)."""
    text = str(error)
    return EngineError(Failure(Ending.SINK_WRITE, f"{what} failed: {_java_summary(text)}"), text)


def _java_summary(text: str) -> str:
    """The exception a py4j error carries (``: org.apache...Exception: message``), else the
    error's first line."""
    found = re.search(r"^: (\S+(?:Exception|Error)\b.*)$", text, re.MULTILINE)
    if found:
        return found.group(1).strip()[:500]
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:500]


class _QueryId:
    """The streaming query's id, handed from ``start`` to the micro-batches: the first batch can
    begin before ``DataStreamWriter.start`` has returned the query."""

    def __init__(self) -> None:
        self._value = ""
        self._known = threading.Event()

    def set(self, value: str) -> None:
        self._value = value
        self._known.set()

    def get(self) -> str:
        if not self._known.wait(QUERY_ID_TIMEOUT_S):
            raise RuntimeError(f"the streaming query's id was not known after {QUERY_ID_TIMEOUT_S:.0f}s")
        return self._value


def batch_sink(
    policy: DeadLetterPolicy, options: RunOptions, table: DeadLetterTable, query_id: Callable[[], str]
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function of a policy with a dead-letter table: the Kafka records,
    then the table's rows, of one routed micro-batch."""
    kafka = {**kafka_options(policy, options), **SINK_OPTIONS}

    sink_format, sink_options = (
        (pulsar_connector.FORMAT, pulsar_connector.write_options(policy, options.pulsar_client_dir))
        if policy.is_pulsar
        else ("kafka", kafka)
    )
    broker = "Pulsar" if policy.is_pulsar else "Kafka"

    def write(batch: DataFrame, batch_id: int) -> None:
        # Two actions follow: without the cache each would run the sources, the delay stage and
        # the processor again.
        batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            try:
                sink_records(batch, policy).write.format(sink_format).options(**sink_options).mode(
                    "append"
                ).save()
            except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
                raise sink_write_error(f"the {broker} write of micro-batch {batch_id}", error) from None
            try:
                dead_letter_table.append(batch, table, query_id=query_id(), batch_id=batch_id)
            except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
                raise sink_write_error(
                    f"the dead-letter table write of micro-batch {batch_id} ({table.format} at {table.path})",
                    error,
                ) from None
        finally:
            batch.unpersist()

    return write


def restarting(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the checkpoint holds a committed micro-batch (any filesystem Spark can use)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    commits = jvm.org.apache.hadoop.fs.Path(checkpoint, "commits")
    filesystem = commits.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return bool(filesystem.exists(commits)) and len(filesystem.listStatus(commits)) > 0


def wake(spark: SparkSession, policy: DeadLetterPolicy, options: RunOptions) -> Written | None:
    """Write one control record (``dlq.control: wake``) to the retry topic; on Kafka, where it
    was written (``metrics`` counts it out of the retries held).

    Spark runs a micro-batch without new data only when the previous batch of the same run asks
    for one, as the delay stage's processing-time timers do. Right after a restart there is no
    previous batch, so with an idle source the retries held in the checkpointed state would wait
    for the next message to arrive. The control record is new data: the first batch runs, and
    the timers fire from then on. The delay stage drops it.

    On Kafka the driver writes it itself (``driver_producer``, with the sink's producer
    settings): no Spark job waits for the executor, so the query starts while the executor is
    still coming up. On Pulsar it is a one-row write through the engine's connector."""
    headers = [(CONTROL, CONTROL_WAKE.encode())]
    if not policy.is_pulsar:
        settings = {**kafka_options(policy, options), **SINK_OPTIONS}
        return driver_producer.send(
            spark,
            {name.removeprefix("kafka."): value for name, value in settings.items()},
            topic=policy.retry_topic,
            key=WAKE_KEY,
            value=b"",
            headers=headers,
        )
    record = spark.createDataFrame(
        [(policy.retry_topic, WAKE_KEY, b"", headers)],
        "topic string, key binary, value binary, headers array<struct<key: string, value: binary>>",
    )
    connector = pulsar_connector.write_options(policy, options.pulsar_client_dir)
    record.write.format(pulsar_connector.FORMAT).options(**connector).mode("append").save()
    return None


def wake_if_restarting(spark: SparkSession, policy: DeadLetterPolicy, options: RunOptions) -> Written | None:
    """Before a restarted query starts: its wake record (``wake``), once the processor is known
    to load; None when the checkpoint holds no committed batch, or on Pulsar."""
    load_processor(policy.processor.entrypoint)  # fail before writing or consuming anything
    return wake(spark, policy, options) if restarting(spark, options.checkpoint) else None


def start(spark: SparkSession, policy: DeadLetterPolicy, options: RunOptions) -> StreamingQuery:
    load_processor(policy.processor.entrypoint)  # fail before consuming anything
    frame = observed(routed(spark, policy, options))
    table = policy.dead_letter.table
    query_id = _QueryId()
    if table is None and policy.is_pulsar:
        writer = (
            sink_records(frame, policy)
            .writeStream.format(pulsar_connector.FORMAT)
            .options(**pulsar_connector.write_options(policy, options.pulsar_client_dir))
        )
    elif table is None:
        writer = (
            sink_records(frame, policy)
            .writeStream.format("kafka")
            .options(**kafka_options(policy, options))
            .options(**SINK_OPTIONS)
        )
    else:
        writer = frame.writeStream.foreachBatch(batch_sink(policy, options, table, query_id.get))
    writer = (
        writer.option("checkpointLocation", options.checkpoint)
        .outputMode("append")
        .queryName(options.query_name or f"spark-dlq-{policy.namespace}-{policy.name}")
    )
    # --once uses the same trigger; the runner stops after the first empty batch (see runner).
    query = writer.trigger(processingTime=f"{policy.spark.trigger_ms} milliseconds").start()
    query_id.set(str(query.id))
    return query
