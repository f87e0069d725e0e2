"""A Pulsar message id packed into one number, the ``offset`` the engine gives a Pulsar message.

The engine's columns (the processor's ``offset``, ``dlq.original.offset``, the dead-letter table)
hold a Kafka offset or, on Pulsar, a message id packed so that packed ids order as the message ids
do within a partition; ``kubectl dlq`` prints a Pulsar dead letter's position the same way.
Pure (docs/reference.md, "The engine on Pulsar").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

#: A Pulsar message id (ledger, entry, batch index) packed into the ``offset`` column's long:
#: ledger ids below 2**31, entry ids below 2**20 (Pulsar rolls a ledger over at 50,000 entries by
#: default), batch indexes below 2**12 (a producer batches at most 1,000 by default). Packed ids
#: order as the message ids do within a partition.
PULSAR_LEDGER_BITS: Final = 31
PULSAR_ENTRY_BITS: Final = 20
PULSAR_BATCH_BITS: Final = 12


def pulsar_offset(ledger: int, entry: int, batch: int) -> int:
    """The ``offset`` of a Pulsar message (``PULSAR_*_BITS``); a message id out of that range
    raises ``ValueError`` naming it."""
    batch = max(batch, 0)
    if not (
        0 <= ledger < 2**PULSAR_LEDGER_BITS
        and 0 <= entry < 2**PULSAR_ENTRY_BITS
        and batch < 2**PULSAR_BATCH_BITS
    ):
        raise ValueError(
            f"Pulsar message id {ledger}:{entry}:{batch} does not fit the engine's offsets (ledger below "
            f"2^{PULSAR_LEDGER_BITS}, entry below 2^{PULSAR_ENTRY_BITS}, batch index below 2^{PULSAR_BATCH_BITS})"
        )
    return (ledger << (PULSAR_ENTRY_BITS + PULSAR_BATCH_BITS)) | (entry << PULSAR_BATCH_BITS) | batch


def pulsar_id_parts(offset: int) -> tuple[int, int, int]:
    """``(ledger, entry, batch index)`` of a packed ``offset`` (batch index 0 for a message of no
    batch, as for a batch's first)."""
    batch = offset & (2**PULSAR_BATCH_BITS - 1)
    entry = (offset >> PULSAR_BATCH_BITS) & (2**PULSAR_ENTRY_BITS - 1)
    ledger = offset >> (PULSAR_ENTRY_BITS + PULSAR_BATCH_BITS)
    return ledger, entry, batch


def pulsar_message_id(partition: int, offset: int) -> str:
    """The Java client's ``MessageId.toString()`` of a packed ``offset``:
    ``ledger:entry:partition``, with ``:batch`` for a message of a batch (index above 0)."""
    ledger, entry, batch = pulsar_id_parts(offset)
    return f"{ledger}:{entry}:{partition}" + (f":{batch}" if batch else "")


def parse_pulsar_message_id(text: str) -> tuple[int, int] | None:
    """``(partition, offset)`` of a Java client's ``MessageId.toString()``
    (``ledger:entry:partition[:batch]``); None when it is not one or does not fit."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        return None
    try:
        ledger, entry, partition = int(parts[0]), int(parts[1]), int(parts[2])
        batch = int(parts[3]) if len(parts) == 4 else -1
        return partition, pulsar_offset(ledger, entry, batch)
    except ValueError:
        return None


#: An entry's position (``entry_position``) before a partition's first entry.
BEFORE_FIRST_ENTRY: Final = -1


def entry_position(ledger: int, entry: int) -> int:
    """The position of the entry ``[ledger, entry]`` (a producer's batch is one entry): its first
    message's packed ``offset``, batch index 0; ``BEFORE_FIRST_ENTRY`` for a negative entry (the
    connector's ``Position.BEFORE_ALL``, ``[-1, -1]``). Positions order as the entries do."""
    return BEFORE_FIRST_ENTRY if entry < 0 else pulsar_offset(ledger, entry, 0)


def entry_layout(full_name: str, positions: Mapping[int, int]) -> dict[str, list[int]]:
    """Positions by partition index as the connector writes offsets (``PulsarOffset``):
    ``{"<partition's topic name>": [ledger, entry]}``, the name ``full_name`` itself for index -1
    (a non-partitioned topic)."""
    layout = {}
    for partition, position in positions.items():
        name = full_name if partition < 0 else f"{full_name}-partition-{partition}"
        ledger, entry, _ = pulsar_id_parts(position) if position >= 0 else (-1, -1, 0)
        layout[name] = [ledger, entry]
    return layout


def entry_positions(layout: Mapping[str, Sequence[int]]) -> dict[int, int]:
    """``entry_layout`` read back: positions by partition index (-1: not partitioned)."""
    positions = {}
    for name, (ledger, entry) in layout.items():
        head, _, index = name.rpartition("-partition-")
        positions[int(index) if head and index.isdigit() else -1] = entry_position(ledger, entry)
    return positions
