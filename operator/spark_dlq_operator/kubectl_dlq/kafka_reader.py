"""Reading a Kafka dead-letter topic without a trace: a consumer assigned its partitions, never
joining its group and never committing, from the offsets where the time range starts up to the
end offsets taken when it starts; what the broker no longer holds is noted as expired.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from dlq_engine.model.dead_letter import DeadLetter
from spark_dlq_operator.kubectl_dlq.errors import BadInput, Unreachable
from spark_dlq_operator.kubectl_dlq.expired import Span, expired_spans
from spark_dlq_operator.kubectl_dlq.target import Target
from spark_dlq_operator.kubectl_dlq.times import SEEK_MARGIN_MS, Window

#: The consumer's group id: required by librdkafka, never joined (partitions are assigned) and
#: never committed to, so a triage run leaves no trace on the cluster.
GROUP_ID: Final = "kubectl-dlq"


class KafkaReader:
    """A consumer on one dead-letter topic: assigned partitions, no group membership, no
    commits. ``timeout_ms`` bounds each request and each wait for the next record."""

    def __init__(self, target: Target, *, timeout_ms: int) -> None:
        self.target = target
        self.topic = target.topic
        self.timeout = timeout_ms / 1000
        self._errors: list[str] = []
        quiet = logging.getLogger("spark_dlq_operator.kubectl_dlq.librdkafka")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        settings: dict[str, Any] = {
            "client.id": GROUP_ID,
            **target.client,
            "group.id": GROUP_ID,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "error_cb": self._on_error,
            "logger": quiet,
        }
        try:
            self.consumer = Consumer(settings)
        except KafkaException as error:
            raise BadInput(f"Kafka client settings: {error.args[0].str()}") from None
        except (TypeError, ValueError) as error:
            raise BadInput(f"Kafka client settings: {error}") from None
        self._partitions: list[int] | None = None
        #: After ``read``: the offsets of each partition the broker no longer held (``expired_spans``).
        self.expired: dict[int, list[Span]] = {}

    def _on_error(self, error: KafkaError) -> None:
        if error.code() != KafkaError._ALL_BROKERS_DOWN:
            self._errors.append(str(error.str()))

    @property
    def broker(self) -> str:
        return f"the Kafka broker at {self.target.client.get('bootstrap.servers', '')}"

    def _unreachable(self, what: str, error: KafkaException | None = None) -> Unreachable:
        """``what`` names the broker (``self.broker``); the first error librdkafka reported
        (served by ``poll``) says why, e.g. ``Connection refused``."""
        self.consumer.poll(0)
        detail = self._errors[0] if self._errors else (error.args[0].str() if error else "no answer")
        return Unreachable(f"{what} ({self.target.broker_origin}): {detail}")

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> KafkaReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions(self) -> list[int]:
        if self._partitions is None:
            try:
                metadata = self.consumer.list_topics(self.topic, timeout=self.timeout)
            except KafkaException as error:
                raise self._unreachable(f"cannot reach {self.broker}", error) from None
            topic = metadata.topics.get(self.topic)
            if topic is None or topic.error is not None:
                code = topic.error.code() if topic is not None and topic.error is not None else None
                if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise Unreachable(f"the dead-letter topic {self.topic!r} does not exist on {self.broker}")
                said = topic.error.str() if topic is not None and topic.error is not None else "not listed"
                raise Unreachable(f"cannot read the dead-letter topic {self.topic!r}: {said}")
            self._partitions = sorted(topic.partitions)
        return self._partitions

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """partition -> (first offset kept, next offset to be written)."""
        marks = {}
        for partition in self.partitions():
            try:
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=self.timeout, cached=False
                )
            except KafkaException as error:
                raise self._unreachable(
                    f"cannot read the offsets of {self.topic!r} from {self.broker}", error
                ) from None
            marks[partition] = (int(low), int(high))
        return marks

    def starts(self, window: Window, marks: Mapping[int, tuple[int, int]]) -> dict[int, int]:
        """Where each partition's reading starts: its first offset, or the first record whose
        timestamp is within SEEK_MARGIN_MS of the window's start."""
        if window.after is None:
            return {p: low for p, (low, _) in marks.items()}
        wanted = [TopicPartition(self.topic, p, max(window.after - SEEK_MARGIN_MS, 0)) for p in marks]
        try:
            found = self.consumer.offsets_for_times(wanted, timeout=self.timeout)
        except KafkaException as error:
            raise self._unreachable(
                f"cannot look up offsets by time in {self.topic!r} on {self.broker}", error
            ) from None
        starts = {}
        for tp in found:
            low, high = marks[tp.partition]
            # -1: no record that late; start at the end, so nothing is read.
            starts[tp.partition] = high if tp.offset < 0 else max(int(tp.offset), low)
        return starts

    def read(
        self, window: Window, *, progress: Callable[[int, int], None] | None = None
    ) -> Iterator[DeadLetter]:
        """Every record from the window's start up to the end offsets taken now; ``progress``
        hears ``(records read, records to read)`` after each batch the consumer returns. Once
        read, ``expired`` holds what the broker no longer had."""
        marks = self.watermarks()
        ends = {p: high for p, (_, high) in marks.items()}
        starts = self.starts(window, marks)
        remaining = {p for p in ends if starts[p] < ends[p]}
        self.expired = expired_spans({p: low for p, (low, _) in marks.items()}, {})
        if not remaining:
            return
        jumps: dict[int, list[Span]] = {}
        expected = dict(starts)
        yield from self._records(starts, ends, set(remaining), expected, jumps, progress)
        for partition in sorted(remaining):  # a partition's last offsets, when none was read
            if expected[partition] < ends[partition]:
                jumps.setdefault(partition, []).append((expected[partition], ends[partition] - 1))
        if jumps:  # deleted while it was read, or transaction markers: the first kept offsets say
            lows = {p: low for p, (low, _) in self.watermarks().items()}
            self.expired = expired_spans(lows, jumps)

    def _records(
        self,
        starts: Mapping[int, int],
        ends: Mapping[int, int],
        remaining: set[int],
        expected: dict[int, int],
        jumps: dict[int, list[Span]],
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[DeadLetter]:
        """The records of ``[starts, ends)``; an offset read past the one ``expected`` next (the
        consumer goes on from the first kept offset when the next is gone) is noted in ``jumps``."""
        total = sum(ends[p] - starts[p] for p in remaining)
        done = 0
        self.consumer.assign([TopicPartition(self.topic, p, starts[p]) for p in sorted(remaining)])
        last_progress = time.monotonic()
        while remaining:
            batch = self.consumer.consume(500, timeout=0.5)
            if batch:
                last_progress = time.monotonic()
                done += len(batch)
                if progress is not None:
                    progress(min(done, total), total)
            elif time.monotonic() - last_progress > self.timeout:
                raise self._unreachable(
                    f"no records from {self.broker} for {self.timeout:g}s reading {self.topic!r} "
                    f"(partitions {', '.join(map(str, sorted(remaining)))})"
                )
            for message in batch:
                partition = message.partition()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(partition)
                        continue
                    raise Unreachable(f"reading {self.topic!r} partition {partition}: {error.str()}")
                letter = _letter(message)
                if partition not in remaining or letter.offset >= ends[partition]:
                    continue
                if letter.offset > expected[partition]:
                    jumps.setdefault(partition, []).append((expected[partition], letter.offset - 1))
                expected[partition] = letter.offset + 1
                if letter.offset >= ends[partition] - 1:
                    remaining.discard(partition)
                yield letter

    def fetch(self, partition: int, offset: int) -> DeadLetter:
        """The record at ``partition/offset``."""
        partitions = self.partitions()
        if partition not in partitions:
            raise BadInput(
                f"partition {partition} does not exist in {self.topic!r} (partitions 0-{max(partitions)})"
            )
        low, high = self.watermarks()[partition]
        if not low <= offset < high:
            kept = f"offsets {low}-{high - 1}" if high > low else "no records"
            gone = (
                f" (the broker deleted those below {low}: the topic's retention, or a deleteRecords)"
                if offset < low
                else ""
            )
            raise BadInput(
                f"no record at {partition}/{offset}: partition {partition} of {self.topic!r} has {kept}{gone}"
            )
        self.consumer.assign([TopicPartition(self.topic, partition, offset)])
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = self.consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                raise Unreachable(f"reading {self.topic!r} partition {partition}: {error.str()}")
            if message.offset() == offset:
                return _letter(message)
            break
        else:
            raise self._unreachable(
                f"no answer from {self.broker} reading {partition}/{offset} of {self.topic!r}"
            )
        raise BadInput(
            f"no record at {partition}/{offset} of {self.topic!r} (a transaction marker, or compacted away)"
        )


def _letter(message: Any) -> DeadLetter:
    kind, stamp = message.timestamp()
    return DeadLetter(
        partition=int(message.partition()),
        offset=int(message.offset()),
        timestamp=int(stamp) if kind != 0 and stamp >= 0 else None,  # 0: TIMESTAMP_NOT_AVAILABLE
        key=message.key(),
        value=message.value(),
        headers=tuple(message.headers() or ()),
    )
