"""One record of a dead-letter topic and the facts a reader decodes from it.

``kubectl dlq`` lists, counts and shows dead letters one record at a time; the redrive job reads
the same facts as Spark columns (``job/redrive.py``, ``dead_letter_columns``). Both find each
fact under the header names of ``model.headers`` (``READ_*``: ours first, then Spring's, Kafka
Connect's, Kafka Streams' or a share group's), decoded as ``read_text`` and ``read_number`` do;
a test checks the two readers agree (tests/integration/engine/test_redrive.py). A Pulsar dead
letter is the same record: its properties are its headers, its position the partition index
(-1: a non-partitioned topic) and the message id packed into an offset (``model.pulsar_ids``).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlq_engine.model import headers as h

#: A record's headers as read: Kafka allows a name more than once and a header without a value.
Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record of the dead-letter topic. ``timestamp`` is the record's time (ms): Kafka's
    record timestamp, Pulsar's publish time."""

    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    def header(self, name: str) -> bytes | None:
        return h.first_header(list(self.headers), name)

    @property
    def position(self) -> str:
        return f"{self.partition}/{self.offset}"

    @property
    def failed_at(self) -> int | None:
        """``dlq.failed.at``; the record's timestamp when the header is missing or unreadable."""
        failed = h.read_number(self.headers, ((h.FAILED_AT, 0),))
        return failed if failed is not None else self.timestamp

    @property
    def reason(self) -> str | None:
        return h.read_text(self.headers, (h.REASON,))

    @property
    def error_class(self) -> str | None:
        """``dlq.error.class``, or Spring's, Kafka Connect's or Kafka Streams' (h.READ_ERROR_CLASS)."""
        return h.read_text(self.headers, h.READ_ERROR_CLASS)

    @property
    def error_message(self) -> str | None:
        return h.read_text(self.headers, h.READ_ERROR_MESSAGE)

    @property
    def stacktrace(self) -> str | None:
        return h.read_text(self.headers, h.READ_ERROR_STACKTRACE)

    @property
    def attempt(self) -> int | None:
        """``dlq.attempt``, or a share group's delivery count (h.READ_ATTEMPT)."""
        return h.read_number(self.headers, h.READ_ATTEMPT)

    @property
    def redrive_count(self) -> int | None:
        return h.read_number(self.headers, ((h.REDRIVE_COUNT, 0),))

    @property
    def original(self) -> str | None:
        """``topic/partition/offset`` where the message was first read: from the ``dlq.original.*``
        headers, or Spring's, Kafka Connect's, Kafka Streams' or a share group's
        (``h.READ_ORIGINAL_*``)."""
        topic = h.read_text(self.headers, h.READ_ORIGINAL_TOPIC)
        if topic is None:
            return None
        partition = h.read_number(self.headers, h.READ_ORIGINAL_PARTITION)
        offset = h.read_number(self.headers, h.READ_ORIGINAL_OFFSET)
        return f"{topic}/{'?' if partition is None else partition}/{'?' if offset is None else offset}"

    def summary(self) -> DeadLetter:
        """The same dead letter without its value, to keep many in memory."""
        return DeadLetter(self.partition, self.offset, self.timestamp, self.key, None, self.headers)
