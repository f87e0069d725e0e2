"""The broker an engine test runs on, Kafka or Pulsar, behind the few calls such a test makes.

A test that proves the same behaviour on both brokers asks for the ``broker`` fixture
(``conftest.py``) and runs once on each, on the session's one Kafka and one Pulsar: it makes its
topics, produces, starts the engine and reads back through a ``BrokerUnderTest``, and compares
``tests.helpers.Record``s. A Pulsar message reads as such a record: its properties are the
headers, its partition index (-1 for a non-partitioned topic) the partition, and its message id,
packed as the engine packs it (``dlq_engine.model.pulsar_ids``), the offset, so that sorting by
``(partition, offset)`` is the order of each partition as on Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dlq_engine.model.pulsar_ids import pulsar_offset
from spark_dlq_devtools.pulsar import Message, PulsarBroker
from tests.helpers import Record, produce, read_all

BrokerKind = Literal["kafka", "pulsar"]
Records = Sequence[tuple[bytes | None, bytes | None]]


@dataclass(frozen=True)
class BrokerUnderTest:
    """One broker's topics, producer, reader and engine (the ``engine`` or ``pulsar_engine``
    fixture's ``start``)."""

    kind: BrokerKind
    make_topics: Callable[..., dict[str, str]]
    engine: Callable[..., Any]
    bootstrap_servers: str = ""
    pulsar: PulsarBroker | None = None

    def topics(self, partitions: int = 1) -> dict[str, str]:
        """Source, retry, dead-letter and output topics of ``partitions`` partitions (on Pulsar
        one partition is a non-partitioned topic)."""
        if self.pulsar is not None:
            return self.make_topics(partitions=partitions if partitions > 1 else 0)
        return self.make_topics(partitions=partitions)

    def produce(self, topic: str, records: Records, headers: Sequence[tuple[str, bytes]] = ()) -> None:
        if self.pulsar is None:
            produce(self.bootstrap_servers, topic, records, headers=list(headers))
            return
        properties = {name: value.decode() for name, value in headers}
        self.pulsar.produce(
            topic,
            [
                Message(key.decode() if key is not None else None, value or b"", properties)
                for key, value in records
            ],
        )

    def read_all(
        self, topic: str, *, expect: int | None = None, timeout: float = 60.0, settle: float = 0.0
    ) -> list[Record]:
        """As ``tests.helpers.read_all``: every record of the topic; with ``expect``, once there
        are that many (or after ``timeout``), ``settle`` seconds later."""
        if self.pulsar is None:
            return read_all(self.bootstrap_servers, topic, expect=expect, timeout=timeout, settle=settle)
        found = self.pulsar.read_all(topic)
        deadline = time.monotonic() + timeout
        while expect is not None and len(found) < expect and time.monotonic() < deadline:
            time.sleep(0.5)
            found = self.pulsar.read_all(topic)
        if expect is not None and settle:
            time.sleep(settle)
            found = self.pulsar.read_all(topic)
        return [record_of(message) for message in found]


def record_of(message: Message) -> Record:
    """A message a Pulsar reader read, as a Kafka consumer's record."""
    ledger, entry, partition, batch = (int(part) for part in message.message_id.split(":"))
    return Record(
        message.topic,
        partition,
        pulsar_offset(ledger, entry, batch),
        message.key.encode() if message.key is not None else None,
        message.value,
        [(name, value.encode()) for name, value in message.properties.items()],
    )
