"""The ``dlq.*`` headers written on retry and dead-letter records (docs/reference.md, section 3),
and the same facts under other tools' names and encodings (``deadLetter.headerProfiles``).

A record keeps its original headers; every ``dlq.*`` header from an earlier attempt is
replaced, never appended, so a record does not grow as it goes round the retry topic. The
``dlq.original.*`` and ``dlq.first.failure.at`` headers are carried over from the first
failure, so they always name where the message was first read. The same holds for the headers
of every listed profile (``OWNED``): they are written from the ``dlq.*`` facts, never read.
"""

# ruff: noqa: F405 - the header names come from the model by the star imports below

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Final

# The header names, where a reader finds each fact and Pulsar's packed message ids are the
# model's (kubectl dlq reads them too); the engine's modules use them from here, as ``h.NAME``,
# beside what this module builds from them.
from dlq_engine.model.headers import *  # noqa: F403
from dlq_engine.model.policy import HeaderProfile, pulsar_topic
from dlq_engine.model.pulsar_ids import *  # noqa: F403
from dlq_engine.model.reasons import DeadLetterReason
from dlq_engine.routing.record_size import Header, shrink

#: Carried from the first failure to every later retry and dead letter (the redrive headers
#: too, so a redriven message that fails again still says how often it was redriven).
CARRIED: Final = (
    ORIGINAL_TOPIC,
    ORIGINAL_PARTITION,
    ORIGINAL_OFFSET,
    ORIGINAL_TIMESTAMP,
    FIRST_FAILURE_AT,
    REDRIVE_COUNT,
    REDRIVE_NAME,
    REDRIVE_AT,
)

#: The header names each profile writes, as prefixes (spring, connect) or exact names (pulsar):
#: a listed profile's headers from an earlier attempt are dropped before the new ones are written.
OWNED_PREFIXES: Final[Mapping[HeaderProfile, tuple[str, ...]]] = {
    "spark-dlq": (PREFIX,),
    "spring": ("kafka_dlt-", "retry_topic-"),
    "connect": (CONNECT_PREFIX,),
    "pulsar": (),
}
OWNED_NAMES: Final[Mapping[HeaderProfile, tuple[str, ...]]] = {
    "spark-dlq": (),
    "spring": (),
    "connect": (),
    "pulsar": (
        PULSAR_REAL_TOPIC,
        PULSAR_ORIGIN_MESSAGE_ID,
        PULSAR_ORIGIN_MESSAGE_ID_NEW,
        PULSAR_RECONSUME_TIMES,
        PULSAR_DELAY_TIME,
        PULSAR_RETRY_TOPIC,
    ),
}


def pulsar_real_topic(topic: str, partition: int) -> str:
    """The Java client's ``Message.getTopicName()`` (``REAL_TOPIC``) of a message read from a
    policy's ``topic``: the full name, of the partition if any. A name that is already a
    partition's full name (a Java client's ``REAL_TOPIC``) stays as it is."""
    if topic.startswith("persistent://") and "-partition-" in topic:
        return topic
    name = pulsar_topic(topic).full_name
    return f"{name}-partition-{partition}" if partition >= 0 else name


def owned(profiles: Sequence[HeaderProfile]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The prefixes and exact names of the headers the listed profiles write."""
    prefixes = tuple(p for profile in profiles for p in OWNED_PREFIXES[profile])
    names = tuple(n for profile in profiles for n in OWNED_NAMES[profile])
    return prefixes, names


def java_big_integer(value: int) -> bytes:
    """``BigInteger.valueOf(value).toByteArray()``: minimal big-endian two's complement."""
    return value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True)


#: Error messages are bounded so one failure cannot make a record too large for the broker.
MAX_MESSAGE_CHARS: Final = 2_000
#: All the headers one failure adds (every profile's, the static dead-letter headers included)
#: take at most this many bytes: the stack traces, then the messages, give way (``bounded``).
#: Three profiles with an 8,000-character trace and a 2,000-character message each fit.
MAX_FAILURE_HEADER_BYTES: Final = 32 * 1024
#: The texts ``bounded`` may cut: stack traces keep their end, messages their start.
CUT_KEEPING_END: Final = frozenset(
    {ERROR_STACKTRACE, SPRING_EXCEPTION_STACKTRACE, CONNECT_EXCEPTION_STACKTRACE}
)
CUT_KEEPING_START: Final = frozenset({ERROR_MESSAGE, SPRING_EXCEPTION_MESSAGE, CONNECT_EXCEPTION_MESSAGE})


def bounded(headers: Sequence[Header], budget: int) -> list[Header] | None:
    """``headers`` within ``budget`` bytes (``record_size.headers_size``), the failure's stack
    traces and messages cut evenly where needed, each cut one marked; None when they cannot
    fit even so."""
    return shrink(headers, budget, keep_end=CUT_KEEPING_END, keep_start=CUT_KEEPING_START)


def failure_headers(
    *,
    origin: Mapping[str, str],
    attempt: int,
    error_class: str,
    error_message: str,
    stacktrace: str | None,
    policy: str,
    subscription: str,
    failed_at: int,
    deliver_at: int | None = None,
    reason: DeadLetterReason | None = None,
    static: Mapping[str, str] | None = None,
    rule: str | None = None,
    profiles: Sequence[HeaderProfile] = ("spark-dlq",),
    retry_topic: str = "",
    pulsar_ids: bool = False,
) -> list[tuple[str, bytes]]:
    """The ``dlq.*`` headers (and static dead-letter headers) for one failed message, then
    those of each other listed profile, in the list's order. A retry record is one with a
    ``deliver_at``.

    ``origin`` holds the carried headers (``CARRIED``) as they should be written. All of them
    take at most ``MAX_FAILURE_HEADER_BYTES`` (``bounded``). With
    ``pulsar_ids`` (a policy on Pulsar) the origin's offset is a packed Pulsar message id
    (``pulsar_offset``): the pulsar profile writes ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID`` as the
    Java client does, the full topic name and ``ledger:entry:partition[:batch]``.
    """
    values: list[tuple[str, str]] = [(name, origin[name]) for name in CARRIED if name in origin]
    values += [
        (ATTEMPT, str(attempt)),
        (ERROR_CLASS, error_class),
        (ERROR_MESSAGE, error_message[:MAX_MESSAGE_CHARS]),
        (POLICY, policy),
        (SUBSCRIPTION, subscription),
        (FAILED_AT, str(failed_at)),
    ]
    if stacktrace:
        values.append((ERROR_STACKTRACE, stacktrace))
    if deliver_at is not None:
        values.append((DELIVER_AT, str(deliver_at)))
    if reason is not None:
        values.append((REASON, reason))
    if rule is not None:
        values.append((RULE, rule))
    for key, value in sorted((static or {}).items()):
        values.append((key, value))
    written = [(k, v.encode("utf-8", "replace")) for k, v in values]
    message = error_message[:MAX_MESSAGE_CHARS]
    for profile in profiles:
        if profile == "spring":
            written += _spring(origin, attempt, error_class, message, stacktrace, subscription, deliver_at)
        elif profile == "connect":
            written += _utf8(
                (CONNECT_TOPIC, origin[ORIGINAL_TOPIC]),
                (CONNECT_PARTITION, origin[ORIGINAL_PARTITION]),
                (CONNECT_OFFSET, origin[ORIGINAL_OFFSET]),
                (CONNECT_CONNECTOR_NAME, policy),
                (CONNECT_EXCEPTION_CLASS, error_class),
                (CONNECT_EXCEPTION_MESSAGE, message),
                *([(CONNECT_EXCEPTION_STACKTRACE, stacktrace)] if stacktrace else []),
            )
        elif profile == "pulsar":
            real_topic, message_id = (
                origin[ORIGINAL_TOPIC],
                f"{origin[ORIGINAL_PARTITION]}:{origin[ORIGINAL_OFFSET]}",
            )
            if pulsar_ids:
                partition, offset = _int(origin[ORIGINAL_PARTITION], 32), _int(origin[ORIGINAL_OFFSET])
                real_topic = pulsar_real_topic(real_topic, partition)
                message_id = pulsar_message_id(partition, offset)
            written += _utf8(
                (PULSAR_REAL_TOPIC, real_topic),
                (PULSAR_ORIGIN_MESSAGE_ID, message_id),
                (PULSAR_ORIGIN_MESSAGE_ID_NEW, message_id),
                (PULSAR_RECONSUME_TIMES, str(attempt)),
                *(
                    [
                        (PULSAR_DELAY_TIME, str(max(deliver_at - failed_at, 0))),
                        (PULSAR_RETRY_TOPIC, retry_topic),
                    ]
                    if deliver_at is not None
                    else []
                ),
            )
    cut = bounded(written, MAX_FAILURE_HEADER_BYTES)
    return written if cut is None else [(name, value or b"") for name, value in cut]


def _utf8(*pairs: tuple[str, str]) -> list[tuple[str, bytes]]:
    return [(k, v.encode("utf-8", "replace")) for k, v in pairs]


def _spring(
    origin: Mapping[str, str],
    attempt: int,
    error_class: str,
    message: str,
    stacktrace: str | None,
    subscription: str,
    deliver_at: int | None,
) -> list[tuple[str, bytes]]:
    """Spring's dead-letter headers, binary where Spring writes them binary (``_int``)."""
    timestamp = _int(origin.get(ORIGINAL_TIMESTAMP))
    written = [
        *_utf8((SPRING_ORIGINAL_TOPIC, origin[ORIGINAL_TOPIC])),
        (SPRING_ORIGINAL_PARTITION, struct.pack(">i", _int(origin[ORIGINAL_PARTITION], 32))),
        (SPRING_ORIGINAL_OFFSET, struct.pack(">q", _int(origin[ORIGINAL_OFFSET]))),
        (SPRING_ORIGINAL_TIMESTAMP, struct.pack(">q", timestamp)),
        *_utf8(
            (SPRING_ORIGINAL_CONSUMER_GROUP, subscription),
            (SPRING_EXCEPTION_FQCN, error_class),
            (SPRING_EXCEPTION_MESSAGE, message),
            *([(SPRING_EXCEPTION_STACKTRACE, stacktrace)] if stacktrace else []),
        ),
    ]
    if deliver_at is not None:
        written += [
            (SPRING_RETRY_ATTEMPTS, struct.pack(">i", min(attempt, 2**31 - 1))),
            (SPRING_RETRY_BACKOFF_TIMESTAMP, java_big_integer(deliver_at)),
            (SPRING_RETRY_ORIGINAL_TIMESTAMP, java_big_integer(timestamp)),
        ]
    return written


def _int(text: str | None, bits: int = 64) -> int:
    """A carried decimal header as a signed ``bits``-bit int; 0 when absent, unreadable or out
    of range (a forged header must not fail the record: its ``dlq.*`` twin keeps the text)."""
    try:
        value = int(text or "0")
    except ValueError:
        return 0
    return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else 0
