"""``dlq-engine redrive``: send a policy's dead letters back, as a Spark batch job.

The dead letters considered are those on the dead-letter topic when the redrive first started:
the topic's end positions then are the snapshot, kept in the progress file, so dead letters that
arrive while it runs (a redrive sent too early fails again) are never picked up by it. The
snapshot is read in chunks of positions (``redrive_topics``: offsets on Kafka, entries on Pulsar);
each chunk is read with the broker's batch source, its dead letters typed into columns
(``COLUMNS``), selected, checked against the loop guard, and the chosen ones written with the
broker's batch sink. The progress file is written after each chunk's write: a crash repeats at
most the chunk in flight (at-least-once), and the messages it wrote again are counted as
possible duplicates. The rate limit is kept between writes: after a chunk writes ``w`` messages,
the next write waits until ``w / ratePerSecond`` seconds have passed.

On Kafka the broker may delete dead letters of the snapshot before the redrive reads them
(retention, a deleteRecords): Spark's Kafka source, reading with ``failOnDataLoss`` false, skips
them without a word. So each chunk compares the partitions' earliest offsets, before and after it
is read, with the offsets it expected: what was gone is counted (``expired``, per partition and in
all), or, with ``spec.failOnGaps``, stops the redrive before the chunk is written, naming the gap.
Pulsar's message ids leave no gap to count, so ``spec.failOnGaps`` is refused there.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dlq_engine.job.dead_letter_table import (
    first_number,
    first_text,
    header_number,
    header_text,
    header_time,
    own_headers,
)
from dlq_engine.job.redrive_topics import RedriveTopic, RedriveTopicError, destination_topic, redrive_topic
from dlq_engine.job.spark_filter import spark_filter_problem
from dlq_engine.model import headers as h
from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.model.redrive import (
    EXPIRED_REASON,
    DeadLetterRedrive,
    Gap,
    describe_gaps,
    gaps,
    policy_problem,
)
from dlq_engine.model.redrive_filter import filter_problem
from dlq_engine.routing.outcomes import MAX_DELIVER_AT

#: What a redrive's session must have, whatever the policy's sparkConf says: Spark SQL never
#: reads a file a query names (``parquet.`/path```). A filter cannot name one anyway (no
#: subqueries); this is the second wall.
SESSION_CONF: Final = {"spark.sql.runSQLOnFiles": "false"}
#: How many matched dead letters a dry run shows.
SAMPLES = 5
#: Offsets read per chunk when there is no rate limit, and the bounds of an adaptive chunk.
UNLIMITED_CHUNK = 200_000
MIN_CHUNK, MAX_CHUNK = 10, 1_000_000
#: With a rate limit a chunk aims at this many seconds of writes: long enough that Spark's cost
#: per chunk (a job to read, count and write) fits in it, short enough to keep bursts small.
CHUNK_SECONDS = 2.0


class RedriveError(RuntimeError):
    """A redrive that cannot run: the line to print."""


class RedriveInputError(RedriveError):
    """A redrive that cannot run as written (the files or flags given): nothing was read."""


class DeadLettersExpired(RedriveError):
    """``spec.failOnGaps``: dead letters of the snapshot were gone before they were read."""

    reason = EXPIRED_REASON


def dead_letter_columns(records: DataFrame) -> DataFrame:
    """Kafka records of a dead-letter topic (``includeHeaders``) as typed dead-letter columns:
    where the dead letter is, where the message came from, why it failed; the same names and
    types as the dead-letter table's (``dead_letter_table.COLUMNS``), so one SQL filter serves
    both. ``headers`` is the map of the message's own headers (no ``dlq.*``; of a repeated
    name, the first). Origin, error, attempts and subscription are read from Spring's, Kafka
    Connect's, Kafka Streams' or a share group's dead-letter headers where the ``dlq.*`` ones are
    absent (``model.headers.READ_*``), so a redrive reads their dead-letter topics too."""
    return records.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp"),
        F.col("key"),
        F.col("value"),
        own_headers().alias("headers"),
        F.col("headers").alias("kafka_headers"),
        first_text(h.READ_ORIGINAL_TOPIC).alias("original_topic"),
        first_number(h.READ_ORIGINAL_PARTITION, "int").alias("original_partition"),
        first_number(h.READ_ORIGINAL_OFFSET, "bigint").alias("original_offset"),
        _time(first_number(h.READ_ORIGINAL_TIMESTAMP, "bigint")).alias("original_timestamp"),
        first_text(h.READ_ERROR_CLASS).alias("error_class"),
        first_text(h.READ_ERROR_MESSAGE).alias("error_message"),
        first_text(h.READ_ERROR_STACKTRACE).alias("stacktrace"),
        header_text(h.REASON).alias("reason"),
        F.coalesce(first_number(h.READ_ATTEMPT, "int"), F.lit(0)).alias("attempts"),
        header_time(h.FIRST_FAILURE_AT).alias("first_failure_at"),
        header_time(h.FAILED_AT).alias("failed_at"),
        header_number(h.FAILED_AT, "bigint").alias("failed_at_ms"),
        header_text(h.POLICY).alias("policy"),
        first_text(h.READ_SUBSCRIPTION).alias("subscription"),
        F.coalesce(header_number(h.REDRIVE_COUNT, "int"), F.lit(0)).alias("redrive_count"),
    )


def _time(millis: Column) -> Column:
    """Epoch milliseconds as a timestamp, as ``header_time`` does for one header."""
    return F.when(millis.between(0, MAX_DELIVER_AT), F.timestamp_millis(millis))


def selected(frame: DataFrame, redrive: DeadLetterRedrive) -> Column:
    """Whether a dead letter is selected: every condition of ``spec.selection`` holds, and it is
    not a stub (``dlq.value.omitted``: a too-large record whose value is not on the topic)."""
    s = redrive.selection
    condition = header_text(h.VALUE_OMITTED, "kafka_headers").isNull()
    if s.failed_after_ms is not None:
        condition &= F.col("failed_at_ms") >= F.lit(s.failed_after_ms)
    if s.failed_before_ms is not None:
        condition &= F.col("failed_at_ms") < F.lit(s.failed_before_ms)
    if s.reasons:
        condition &= F.col("reason").isin(list(s.reasons))
    if s.error_classes:
        simple = F.substring_index(F.col("error_class"), ".", -1)
        condition &= F.col("error_class").isin(list(s.error_classes)) | simple.isin(list(s.error_classes))
    if s.keys:
        condition &= F.col("key").isin([F.lit(k.encode()) for k in s.keys])
    for name, value in sorted(s.headers.items()):
        condition &= F.try_element_at(F.col("headers"), F.lit(name)).cast("string") == F.lit(value)
    if s.filter:
        condition &= F.expr(s.filter)
    return F.coalesce(condition, F.lit(False))


def check_filter(spark: SparkSession, redrive: DeadLetterRedrive) -> None:
    """Check ``selection.filter`` before anything is read: in the filter language, by the
    model's parser and in the tree Spark's parser makes of it (``spark_filter``), then
    analysed against the dead-letter columns."""
    text = redrive.selection.filter
    if not text:
        return
    problem = filter_problem(text) or spark_filter_problem(spark, text)
    if problem is not None:
        raise RedriveInputError(f"spec.selection.filter: {problem}")
    empty = spark.createDataFrame([], KAFKA_SCHEMA)
    try:
        frame = dead_letter_columns(empty)
        frame.where(selected(frame, redrive)).schema  # noqa: B018 - analysis raises here
    except (AnalysisException, ParseException) as error:
        first = str(error).strip().splitlines()[0]
        raise RedriveInputError(f"spec.selection.filter: {first}") from None


#: What Spark's Kafka batch source reads, with headers.
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)


def outgoing(
    frame: DataFrame, redrive: DeadLetterRedrive, policy: DeadLetterPolicy, now_ms: int
) -> DataFrame:
    """The records a redrive writes for the selected dead letters: their own key, value and
    headers, the carried origin, and the redrive's provenance; for ``source`` and ``retry`` the
    retry headers that make the policy's engine pick them up at once (``source``: attempt 0)."""
    destination = redrive.destination
    topic = destination_topic(policy, destination.type, destination.topic)
    own = F.filter(F.col("kafka_headers"), lambda entry: ~entry["key"].startswith(h.PREFIX))

    def pair(name: str, value: Column) -> Column:
        return F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))

    # The origin as read (from Spring's or Connect's headers when the dlq.* ones are absent).
    carried = [
        pair(h.ORIGINAL_TOPIC, F.col("original_topic")),
        pair(h.ORIGINAL_PARTITION, F.col("original_partition").cast("string")),
        pair(h.ORIGINAL_OFFSET, F.col("original_offset").cast("string")),
        pair(
            h.ORIGINAL_TIMESTAMP,
            first_number(h.READ_ORIGINAL_TIMESTAMP, "bigint", "kafka_headers").cast("string"),
        ),
    ]
    added = [
        pair(h.REDRIVE_COUNT, (F.col("redrive_count") + 1).cast("string")),
        pair(h.REDRIVE_NAME, F.lit(redrive.qualified_name)),
        pair(h.REDRIVE_AT, F.lit(str(now_ms))),
    ]
    if destination.type != "topic":
        attempt = F.lit("0") if destination.type == "source" else F.col("attempts").cast("string")
        added += [
            pair(h.FIRST_FAILURE_AT, header_text(h.FIRST_FAILURE_AT, "kafka_headers")),
            pair(h.ATTEMPT, attempt),
            pair(h.DELIVER_AT, F.lit(str(now_ms))),
        ]
    extra = F.filter(F.array(*carried, *added), lambda entry: entry["value"].isNotNull())
    # Read back from the DLQ topic's own records: the dead letters' header column.
    return frame.select(
        F.lit(topic).alias("topic"), F.col("key"), F.col("value"), F.concat(own, extra).alias("headers")
    )


@dataclass
class Counts:
    considered: int = 0
    matched: int = 0
    redriven: int = 0
    skipped_max_redrives: int = 0
    possible_duplicates: int = 0
    #: Offsets of the snapshot the broker had deleted before they were read (``gaps``).
    expired: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    by_error_class: dict[str, int] = field(default_factory=dict)


#: The broker a progress file's positions are of.
Broker = Literal["kafka", "pulsar"]


@dataclass
class Progress:
    """What a redrive has done, written after every chunk (``--checkpoint``/progress.json).
    Positions as ``redrive_topics`` says: on Kafka offsets (``next`` the next to read, ``snapshot``
    the end, exclusive), on Pulsar packed message ids of entries (``next`` the last read,
    ``snapshot`` the last to read, inclusive; -1 before the first)."""

    redrive: str
    started_at_ms: int
    #: The dead-letter topic's end when the redrive started: partition -> position.
    snapshot: dict[int, int]
    #: Where each partition's reading started (Kafka: its earliest offset when the redrive started).
    first: dict[int, int]
    #: Where each partition's reading goes on.
    next: dict[int, int]
    counts: Counts = field(default_factory=Counts)
    #: The end offsets of the chunk being written, until its write is done.
    in_flight: dict[int, int] | None = None
    state: str = "Running"  # Running, Succeeded, Cancelled, Failed
    #: Per partition, the offsets that expired before they were read (only those with some).
    expired: dict[int, int] = field(default_factory=dict)
    #: Why it failed (state Failed): the gap that ``spec.failOnGaps`` stopped at.
    failure: str = ""
    broker: Broker = "kafka"

    @property
    def remaining(self) -> int:
        return sum(self.snapshot[p] - self.next[p] for p in self.snapshot)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self), sort_keys=True))
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: Path) -> Progress | None:
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        return cls(
            redrive=raw["redrive"],
            started_at_ms=raw["started_at_ms"],
            snapshot={int(p): o for p, o in raw["snapshot"].items()},
            first={int(p): o for p, o in raw["first"].items()},
            next={int(p): o for p, o in raw["next"].items()},
            counts=Counts(**raw["counts"]),
            in_flight={int(p): o for p, o in raw["in_flight"].items()}
            if raw["in_flight"] is not None
            else None,
            state=raw["state"],
            expired={int(p): n for p, n in raw.get("expired", {}).items()},
            failure=raw.get("failure", ""),
            broker="pulsar" if raw.get("broker") == "pulsar" else "kafka",
        )

    def summary(self) -> dict[str, Any]:
        """The status a caller reports: counts, per-partition progress, state; ``toConsider``
        only on Kafka (Pulsar's message ids say nothing of how many messages lie between)."""
        c = self.counts
        to_consider = {"toConsider": sum(self.snapshot[p] - self.first[p] for p in self.snapshot)}
        return {
            "state": self.state,
            "matched": c.matched,
            "redriven": c.redriven,
            "skipped": {"maxRedrives": c.skipped_max_redrives},
            "possibleDuplicates": c.possible_duplicates,
            "expired": c.expired,
            "considered": c.considered,
            **(to_consider if self.broker == "kafka" else {}),
            "partitions": {
                str(p): {
                    "next": self.next[p],
                    "end": self.snapshot[p],
                    **({"expired": self.expired[p]} if self.expired.get(p) else {}),
                }
                for p in sorted(self.snapshot)
            },
        }

    def expire(self, found: Sequence[Gap]) -> None:
        """Count ``found`` (``gaps``) as expired."""
        for gap in found:
            self.counts.expired += gap.missing
            self.expired[gap.partition] = self.expired.get(gap.partition, 0) + gap.missing


class Redrive:
    """One redrive run. ``stop()`` (SIGTERM) ends it after the chunk being written."""

    def __init__(
        self,
        spark: SparkSession,
        policy: DeadLetterPolicy,
        redrive: DeadLetterRedrive,
        *,
        checkpoint: Path | None,
        kafka_client_dir: str | None = None,
        pulsar_client_dir: str | None = None,
        clock: Any = time,
    ) -> None:
        if problem := policy_problem(redrive, policy):
            raise RedriveInputError(problem)
        if not redrive.dry_run and checkpoint is None:
            raise RedriveInputError("a redrive that writes needs --checkpoint (where its progress is kept)")
        for key, value in SESSION_CONF.items():
            spark.conf.set(key, value)
        self.spark, self.policy, self.redrive = spark, policy, redrive
        self.progress_path = checkpoint / "progress.json" if checkpoint is not None else None
        self.topic: RedriveTopic = redrive_topic(
            spark, policy, kafka_client_dir=kafka_client_dir, pulsar_client_dir=pulsar_client_dir
        )
        self.broker: Broker = "pulsar" if policy.is_pulsar else "kafka"
        self.clock = clock
        self._stop = threading.Event()
        self._chunk_size = self._first_chunk()
        self._next_write_at = 0.0

    def stop(self) -> None:
        self._stop.set()

    def _snapshot(self) -> tuple[dict[int, int], dict[int, int]]:
        try:
            return self.topic.snapshot()
        except RedriveTopicError as error:
            raise RedriveError(str(error)) from None

    def _gaps_while_read(
        self, frame: DataFrame, start: Mapping[int, int], end: Mapping[int, int]
    ) -> list[Gap]:
        """The offsets of ``[start, end)`` deleted while ``frame`` (their records) was read: those
        below a partition's earliest offset now that ``frame`` does not hold. None on Pulsar, whose
        message ids leave no gap to count."""
        if not self.topic.contiguous:
            return []
        earliest = self.topic.earliest(sorted(end))
        moved = {p: min(earliest[p], end[p]) for p in end if earliest.get(p, 0) > start.get(p, end[p])}
        if not moved:
            return []
        below = F.lit(False)
        for partition, bound in moved.items():
            below |= (F.col("partition") == partition) & (F.col("offset") < bound)
        read = {
            int(r["partition"]): int(r["count"])
            for r in frame.where(below).groupBy("partition").count().collect()
        }
        return gaps(start, {p: end[p] for p in moved}, earliest, read)

    def _check_gaps(self, progress: Progress | None, found: Sequence[Gap]) -> None:
        """Count the gaps found, or, with ``spec.failOnGaps``, stop naming them."""
        if not found:
            return
        where = describe_gaps(self.policy.dead_letter_topic, found)
        if self.redrive.fail_on_gaps:
            message = (
                f"spec.failOnGaps: dead letters expired before the redrive read them: {where}; the "
                "broker deleted them (the topic's retention, or a deleteRecords)"
            )
            if progress is not None and self.progress_path is not None:
                progress.state, progress.failure = "Failed", message
                progress.in_flight = None
                progress.save(self.progress_path)
            raise DeadLettersExpired(message)
        if progress is not None:
            progress.expire(found)

    def dry_run(self) -> dict[str, Any]:
        """Counts by reason and error class of what would be redriven, and a few samples."""
        check_filter(self.spark, self.redrive)
        with self.topic.open():
            return self._dry_run()

    def _dry_run(self) -> dict[str, Any]:
        earliest, end = self._snapshot()
        if all(end[p] <= earliest[p] for p in end):
            return {
                "considered": 0,
                "matched": 0,
                "skippedMaxRedrives": 0,
                "expired": 0,
                "byReason": {},
                "byErrorClass": {},
                "samples": [],
            }
        frame = dead_letter_columns(self.topic.read(earliest, end))
        frame = frame.withColumn("selected", selected(frame, self.redrive)).cache()
        try:
            counts = self._tally(frame)
            found = self._gaps_while_read(frame, earliest, end)
            self._check_gaps(None, found)
            guard = F.col("redrive_count") < F.lit(self.redrive.max_redrives)
            samples = (
                frame.where(F.col("selected") & guard)
                .orderBy("partition", "offset")
                .select("partition", "offset", "key", "reason", "error_class", "error_message", "failed_at")
                .limit(SAMPLES)
                .collect()
            )
        finally:
            frame.unpersist()
        return {
            "considered": counts.considered,
            "matched": counts.matched,
            "skippedMaxRedrives": counts.skipped_max_redrives,
            "expired": sum(gap.missing for gap in found),
            "byReason": counts.by_reason,
            "byErrorClass": counts.by_error_class,
            "samples": [
                {
                    "partition": r["partition"],
                    "offset": r["offset"],
                    "key": None if r["key"] is None else bytes(r["key"]).decode("utf-8", "replace"),
                    "reason": r["reason"],
                    "errorClass": r["error_class"],
                    "message": r["error_message"],
                    "failedAt": r["failed_at"].isoformat() if r["failed_at"] is not None else None,
                }
                for r in samples
            ],
        }

    def _tally(self, frame: DataFrame) -> Counts:
        """Counts of one chunk: considered, matched (selected and within the loop guard), the
        loop guard's skips, and the matched by reason and by error class."""
        guard = F.col("redrive_count") >= F.lit(self.redrive.max_redrives)
        rows = frame.groupBy("selected", guard.alias("guarded"), "reason", "error_class").count().collect()
        counts = Counts()
        for row in rows:
            n = int(row["count"])
            counts.considered += n
            if not row["selected"]:
                continue
            if row["guarded"]:
                counts.skipped_max_redrives += n
                continue
            counts.matched += n
            reason, error_class = row["reason"] or "", row["error_class"] or ""
            counts.by_reason[reason] = counts.by_reason.get(reason, 0) + n
            counts.by_error_class[error_class] = counts.by_error_class.get(error_class, 0) + n
        return counts

    def run(self) -> Progress:
        """Redrive every selected dead letter of the snapshot; resumes from the progress file.
        Raises DeadLettersExpired (``spec.failOnGaps``), also when resumed after it."""
        assert self.progress_path is not None
        check_filter(self.spark, self.redrive)
        progress = Progress.load(self.progress_path)
        if progress is not None and progress.redrive != self.redrive.qualified_name:
            raise RedriveInputError(
                f"{self.progress_path} holds the progress of redrive {progress.redrive!r}, not "
                f"{self.redrive.qualified_name!r}: give this redrive its own --checkpoint"
            )
        if progress is not None and progress.broker != self.broker:
            raise RedriveInputError(
                f"{self.progress_path} holds the progress of a redrive on {progress.broker}, but the policy is "
                f"on {self.broker} (spec.broker.type): give this redrive its own --checkpoint"
            )
        if progress is not None and progress.state == "Failed":
            raise DeadLettersExpired(progress.failure)  # a resubmitted driver fails as the first did
        with self.topic.open():
            return self._run(progress)

    def _run(self, progress: Progress | None) -> Progress:
        assert self.progress_path is not None
        if progress is None:
            first, end = self._snapshot()
            progress = Progress(
                redrive=self.redrive.qualified_name,
                started_at_ms=int(self.clock.time() * 1000),
                snapshot=dict(end),
                first=dict(first),
                next=dict(first),
                broker=self.broker,
            )
            progress.save(self.progress_path)
        self._chunk_size = self._first_chunk()
        self._next_write_at = self.clock.monotonic()
        for start, end in self._chunks(progress):
            if self._stop.is_set():
                progress.state = "Cancelled"
                break
            repeat = progress.in_flight is not None
            progress.in_flight = dict(end)
            progress.save(self.progress_path)
            done = self._chunk(progress, start, end, repeat=repeat)
            if done is None:  # stopped while waiting for the rate: this chunk was not written
                progress.in_flight = dict(end) if repeat else None
                progress.state = "Cancelled"
                break
            written, took = done
            progress.next.update(end)
            progress.in_flight = None
            progress.save(self.progress_path)
            self._chunk_size = self._next_chunk(self._chunk_size, written, took)
        else:
            progress.state = "Succeeded"
            # A run lasts at least its messages over the rate, from its first write.
            self._stop.wait(max(0.0, self._next_write_at - self.clock.monotonic()))
        progress.save(self.progress_path)
        return progress

    def _first_chunk(self) -> int:
        rate = self.redrive.rate_per_second
        return max(MIN_CHUNK, int(rate * CHUNK_SECONDS)) if rate > 0 else UNLIMITED_CHUNK

    def _next_chunk(self, chunk: int, written: int, took: float) -> int:
        """With a rate, aim each chunk at ``CHUNK_SECONDS`` of writes: grow it while few of its
        dead letters are selected, or while Spark's work on it takes most of its time (the rate
        would fall short); shrink it when its writes came as a burst of many seconds' worth."""
        rate = self.redrive.rate_per_second
        if rate <= 0:
            return chunk
        budget = written / rate
        if written < rate * CHUNK_SECONDS / 2 or took > 0.8 * budget:
            return min(MAX_CHUNK, chunk * 2)
        if budget > CHUNK_SECONDS * 4:
            return max(MIN_CHUNK, chunk // 2)
        return chunk

    def _chunks(self, progress: Progress) -> Iterator[tuple[dict[int, int], dict[int, int]]]:
        """Ranges of at most ``_chunk_size`` offsets or entries in all (read as each is taken),
        from each partition's next position towards its snapshot end; a chunk in flight at a
        crash comes first, as it was."""
        if progress.in_flight is not None:
            yield dict(progress.next), dict(progress.in_flight)
        while progress.remaining > 0:
            open_partitions = [
                p for p in sorted(progress.snapshot) if progress.next[p] < progress.snapshot[p]
            ]
            start = {p: progress.next[p] for p in open_partitions}
            ends = {p: progress.snapshot[p] for p in open_partitions}
            yield start, self.topic.chunk_end(start, ends, self._chunk_size)

    def _chunk(
        self, progress: Progress, start: Mapping[int, int], end: Mapping[int, int], *, repeat: bool
    ) -> tuple[int, float] | None:
        """Read, count and write one chunk; ``(written, seconds of Spark work)``, or None when
        stopped while waiting to write. With a rate, a chunk's write waits until the previous
        chunk's messages are spread over their share of time (writes ``w`` messages, then no
        write for ``w / rate`` seconds); the next chunk is read and counted meanwhile."""
        if all(end[p] <= start.get(p, end[p]) for p in end):
            return 0, 0.0
        began = self.clock.monotonic()
        waited = 0.0
        start = {p: start.get(p, end[p]) for p in end}
        if self.topic.contiguous:
            # What the broker deleted before this chunk is read is not read at all.
            earliest = self.topic.earliest(sorted(end))
            self._check_gaps(progress, gaps(start, end, earliest))
            start = {p: max(start[p], earliest.get(p, 0)) for p in end}
        if all(end[p] <= start[p] for p in end):
            return 0, self.clock.monotonic() - began
        frame = dead_letter_columns(self.topic.read(start, end))
        frame = frame.withColumn("selected", selected(frame, self.redrive)).cache()
        try:
            counts = self._tally(frame)
            self._check_gaps(progress, self._gaps_while_read(frame, start, end))
            if counts.matched and not self.redrive.dry_run:
                rate = self.redrive.rate_per_second
                if rate > 0:
                    waited = max(0.0, self._next_write_at - self.clock.monotonic())
                    if self._stop.wait(waited):
                        return None
                    self._next_write_at = self.clock.monotonic() + counts.matched / rate
                guard = F.col("redrive_count") < F.lit(self.redrive.max_redrives)
                now_ms = int(self.clock.time() * 1000)
                records = outgoing(frame.where(F.col("selected") & guard), self.redrive, self.policy, now_ms)
                self.topic.write(records)
        finally:
            frame.unpersist()
        total = progress.counts
        total.considered += counts.considered
        total.matched += counts.matched
        total.redriven += counts.matched
        total.skipped_max_redrives += counts.skipped_max_redrives
        if repeat:
            total.possible_duplicates += counts.matched
        for key, n in counts.by_reason.items():
            total.by_reason[key] = total.by_reason.get(key, 0) + n
        for key, n in counts.by_error_class.items():
            total.by_error_class[key] = total.by_error_class.get(key, 0) + n
        return counts.matched, self.clock.monotonic() - began - waited


def install_sigterm(run: Redrive) -> None:
    signal.signal(signal.SIGTERM, lambda *_: run.stop())
    signal.signal(signal.SIGINT, lambda *_: run.stop())
