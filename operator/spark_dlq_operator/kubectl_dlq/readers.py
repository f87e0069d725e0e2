"""What ``stats``, ``ls``, ``show`` and ``redrive`` read dead letters through, whatever the broker:
the one dispatch on the broker type (``open_reader``). Each reader reads the dead-letter topic
without a trace (no group joined, no offset committed, no subscription created or moved) up to the
end it had when the read started, and yields ``dlq_engine.model.dead_letter.DeadLetter``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Protocol

from dlq_engine.model.dead_letter import DeadLetter
from spark_dlq_operator.kubectl_dlq.expired import Span
from spark_dlq_operator.kubectl_dlq.kafka_reader import KafkaReader
from spark_dlq_operator.kubectl_dlq.target import Target
from spark_dlq_operator.kubectl_dlq.times import Window


class DeadLetterReader(Protocol):
    """One dead-letter topic, open until ``close`` (or the end of a ``with``)."""

    #: After ``read``: per partition, the offsets the broker no longer held (``expired``).
    expired: dict[int, list[Span]]

    def read(
        self, window: Window, *, progress: Callable[[int, int], None] | None = None
    ) -> Iterator[DeadLetter]: ...

    def fetch(self, partition: int, offset: int) -> DeadLetter: ...

    def close(self) -> None: ...

    def __enter__(self) -> DeadLetterReader: ...

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None: ...


def open_reader(target: Target, *, timeout_ms: int) -> DeadLetterReader:
    """A reader of ``target``'s topic on its broker; ``timeout_ms`` bounds each request and each
    wait for the next record."""
    if target.broker == "pulsar":
        # Imported here: its client is the pulsar extra's, which a Kafka user need not install.
        from spark_dlq_operator.kubectl_dlq.pulsar_reader import PulsarReader

        return PulsarReader(target, timeout_ms=timeout_ms)
    return KafkaReader(target, timeout_ms=timeout_ms)
