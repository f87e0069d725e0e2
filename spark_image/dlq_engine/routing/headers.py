"""The ``dlq.*`` headers written on retry and dead-letter records (docs/reference.md, section 3),
and the same facts under other tools' names and encodings (``deadLetter.headerProfiles``).

A record keeps its original headers; every ``dlq.*`` header from an earlier attempt is
replaced, never appended, so a record does not grow as it goes round the retry topic. The
``dlq.original.*`` and ``dlq.first.failure.at`` headers are carried over from the first
failure, so they always name where the message was first read. The same holds for the headers
of every listed profile (``OWNED``): they are written from the ``dlq.*`` facts, never read.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Final

from dlq_engine.model.policy import HeaderProfile, pulsar_topic
from dlq_engine.routing.record_size import Header, shrink

PREFIX: Final = "dlq."
ORIGINAL_TOPIC: Final = "dlq.original.topic"
ORIGINAL_PARTITION: Final = "dlq.original.partition"
ORIGINAL_OFFSET: Final = "dlq.original.offset"
ORIGINAL_TIMESTAMP: Final = "dlq.original.timestamp"
ATTEMPT: Final = "dlq.attempt"
DELIVER_AT: Final = "dlq.deliver.at"
ERROR_CLASS: Final = "dlq.error.class"
ERROR_MESSAGE: Final = "dlq.error.message"
ERROR_STACKTRACE: Final = "dlq.error.stacktrace"
REASON: Final = "dlq.reason"
POLICY: Final = "dlq.policy"
SUBSCRIPTION: Final = "dlq.subscription"
FIRST_FAILURE_AT: Final = "dlq.first.failure.at"
FAILED_AT: Final = "dlq.failed.at"
#: The ``retry.rules`` entry that applied to the failure (``retry.rules[0]``); absent when
#: none matched and the policy's own limit and backoff applied.
RULE: Final = "dlq.rule"
#: On a dead letter with ``dlq.reason: too-large``: the bytes the record would have taken as it
#: was meant to be written (``record_size``), the limit it exceeded and the topic it was meant
#: for (``spec.output.topic``, the retry or the dead-letter topic).
RECORD_SIZE: Final = "dlq.record.size"
RECORD_LIMIT: Final = "dlq.record.limit"
RECORD_DESTINATION: Final = "dlq.record.destination"
#: On a too-large dead letter written as a stub (its value did not fit the dead-letter topic):
#: ``true``, the value's size and SHA-256 digest (``sha256:<hex>``); the value itself is in the
#: dead-letter table where the policy has one. A key over ``STUB_MAX_KEY_BYTES`` is left out
#: the same way (``dlq.key.*``); the record's own headers are left out, and counted in
#: ``dlq.headers.omitted``, when they would not fit the stub.
VALUE_OMITTED: Final = "dlq.value.omitted"
VALUE_SIZE: Final = "dlq.value.size"
VALUE_DIGEST: Final = "dlq.value.digest"
KEY_OMITTED: Final = "dlq.key.omitted"
KEY_SIZE: Final = "dlq.key.size"
KEY_DIGEST: Final = "dlq.key.digest"
HEADERS_OMITTED: Final = "dlq.headers.omitted"
#: Written by a redrive (``DeadLetterRedrive``) on each message it sends back: how many times
#: this message has been redriven, by which redrive, and when.
REDRIVE_COUNT: Final = "dlq.redrive.count"
REDRIVE_NAME: Final = "dlq.redrive.name"
REDRIVE_AT: Final = "dlq.redrive.at"
#: A control record of the retry topic, never handed to the processor. ``wake``: written once
#: when a job starts from a checkpoint with a committed micro-batch, so that its first batch runs
#: (job/pipeline.py ``wake``). With ``source.ordering: key``: ``park`` (a later message of a key
#: whose message went to retry, written unprocessed, with its ``dlq.original.*`` position, to be
#: held behind it), ``release`` and ``block`` (the message at
#: ``dlq.original.partition``/``offset`` of the record's key succeeded or was dead-lettered: its
#: key goes on, or stays held under ``onDeadLetter: block``).
CONTROL: Final = "dlq.control"
CONTROL_WAKE: Final = "wake"
CONTROL_PARK: Final = "park"
CONTROL_RELEASE: Final = "release"
CONTROL_BLOCK: Final = "block"

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

#: Spring for Apache Kafka: ``KafkaHeaders.DLT_*`` (written by its DeadLetterPublishingRecoverer)
#: and ``RetryTopicHeaders.DEFAULT_HEADER_*`` (its non-blocking retry topics). Partition and
#: attempts are 4-byte big-endian ints, offset and timestamp 8-byte big-endian longs, the
#: backoff and original timestamps ``BigInteger.toByteArray()`` (minimal two's complement).
SPRING_ORIGINAL_TOPIC: Final = "kafka_dlt-original-topic"
SPRING_ORIGINAL_PARTITION: Final = "kafka_dlt-original-partition"
SPRING_ORIGINAL_OFFSET: Final = "kafka_dlt-original-offset"
SPRING_ORIGINAL_TIMESTAMP: Final = "kafka_dlt-original-timestamp"
SPRING_ORIGINAL_CONSUMER_GROUP: Final = "kafka_dlt-original-consumer-group"
SPRING_EXCEPTION_FQCN: Final = "kafka_dlt-exception-fqcn"
#: Read, never written: Spring's listener container hands the recoverer its
#: ListenerExecutionFailedException, so the fqcn above names that wrapper and this one the
#: listener's own error.
SPRING_EXCEPTION_CAUSE_FQCN: Final = "kafka_dlt-exception-cause-fqcn"
SPRING_EXCEPTION_MESSAGE: Final = "kafka_dlt-exception-message"
SPRING_EXCEPTION_STACKTRACE: Final = "kafka_dlt-exception-stacktrace"
SPRING_RETRY_ATTEMPTS: Final = "retry_topic-attempts"
SPRING_RETRY_BACKOFF_TIMESTAMP: Final = "retry_topic-backoff-timestamp"
SPRING_RETRY_ORIGINAL_TIMESTAMP: Final = "retry_topic-original-timestamp"
#: Kafka Connect: ``DeadLetterQueueReporter.ERROR_HEADER_*`` under its ``__connect.errors``
#: prefix, every value a UTF-8 string (partition and offset in decimal).
CONNECT_PREFIX: Final = "__connect.errors."
CONNECT_TOPIC: Final = "__connect.errors.topic"
CONNECT_PARTITION: Final = "__connect.errors.partition"
CONNECT_OFFSET: Final = "__connect.errors.offset"
CONNECT_CONNECTOR_NAME: Final = "__connect.errors.connector.name"
CONNECT_EXCEPTION_CLASS: Final = "__connect.errors.exception.class.name"
CONNECT_EXCEPTION_MESSAGE: Final = "__connect.errors.exception.message"
CONNECT_EXCEPTION_STACKTRACE: Final = "__connect.errors.exception.stacktrace"
#: Kafka Streams (KIP-1034, since Kafka 4.2): ``ExceptionHandlerUtils.HEADER_ERRORS_*``, written
#: by its exception handlers on the records they send to ``errors.dead.letter.queue.topic.name``
#: beside the failed record's own headers; UTF-8 strings (partition and offset in decimal). Read,
#: never written.
STREAMS_PREFIX: Final = "__streams.errors."
STREAMS_EXCEPTION: Final = "__streams.errors.exception"
STREAMS_MESSAGE: Final = "__streams.errors.message"
STREAMS_STACKTRACE: Final = "__streams.errors.stacktrace"
STREAMS_TOPIC: Final = "__streams.errors.topic"
STREAMS_PARTITION: Final = "__streams.errors.partition"
STREAMS_OFFSET: Final = "__streams.errors.offset"
#: Share groups' dead-letter queues (KIP-1191, brokers from Kafka 4.4): the broker's
#: ``ShareGroupDLQRecordHelper.HEADER_DLQ_ERRORS_*`` on each record it copies to a group's
#: dead-letter topic; UTF-8 strings (partition, offset and delivery count in decimal). No
#: exception: ``message`` says why (rejected by a consumer, or its delivery count reached the
#: group's limit). Read, never written.
SHARE_GROUP_PREFIX: Final = "__dlq.errors."
SHARE_GROUP_TOPIC: Final = "__dlq.errors.topic"
SHARE_GROUP_PARTITION: Final = "__dlq.errors.partition"
SHARE_GROUP_OFFSET: Final = "__dlq.errors.offset"
SHARE_GROUP_GROUP: Final = "__dlq.errors.group"
SHARE_GROUP_DELIVERY_COUNT: Final = "__dlq.errors.delivery.count"
SHARE_GROUP_MESSAGE: Final = "__dlq.errors.message"
#: Apache Pulsar's Java client: ``RetryMessageUtil`` property names (the misspelt
#: ``ORIGIN_MESSAGE_IDY_TIME`` is its ``SYSTEM_PROPERTY_ORIGIN_MESSAGE_ID``, which its dead
#: letters carry beside ``PROPERTY_ORIGIN_MESSAGE_ID``, the one the C++ and Python clients
#: write), UTF-8 strings. The origin message id is ``<partition>:<offset>``.
PULSAR_REAL_TOPIC: Final = "REAL_TOPIC"
PULSAR_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_IDY_TIME"
PULSAR_ORIGIN_MESSAGE_ID_NEW: Final = "ORIGIN_MESSAGE_ID"
PULSAR_RECONSUME_TIMES: Final = "RECONSUMETIMES"
PULSAR_DELAY_TIME: Final = "DELAY_TIME"
PULSAR_RETRY_TOPIC: Final = "RETRY_TOPIC"

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


def pulsar_message_id(partition: int, offset: int) -> str:
    """The Java client's ``MessageId.toString()`` of a packed ``offset``:
    ``ledger:entry:partition``, with ``:batch`` for a message of a batch (index above 0)."""
    batch = offset & (2**PULSAR_BATCH_BITS - 1)
    entry = (offset >> PULSAR_BATCH_BITS) & (2**PULSAR_ENTRY_BITS - 1)
    ledger = offset >> (PULSAR_ENTRY_BITS + PULSAR_BATCH_BITS)
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


#: Where a reader of dead letters (the redrive, the triage CLI) finds each fact, tried in this
#: order: ours, then Spring's DeadLetterPublishingRecoverer's, Kafka Connect's
#: DeadLetterQueueReporter's, Kafka Streams' exception handlers' and a share group's broker's,
#: so that it reads their dead-letter topics too. A number source is (name, width): width 0 for
#: decimal text, 4 or 8 for Spring's big-endian binary.
READ_ORIGINAL_TOPIC: Final = (
    ORIGINAL_TOPIC,
    SPRING_ORIGINAL_TOPIC,
    CONNECT_TOPIC,
    STREAMS_TOPIC,
    SHARE_GROUP_TOPIC,
)
READ_ORIGINAL_PARTITION: Final = (
    (ORIGINAL_PARTITION, 0),
    (SPRING_ORIGINAL_PARTITION, 4),
    (CONNECT_PARTITION, 0),
    (STREAMS_PARTITION, 0),
    (SHARE_GROUP_PARTITION, 0),
)
READ_ORIGINAL_OFFSET: Final = (
    (ORIGINAL_OFFSET, 0),
    (SPRING_ORIGINAL_OFFSET, 8),
    (CONNECT_OFFSET, 0),
    (STREAMS_OFFSET, 0),
    (SHARE_GROUP_OFFSET, 0),
)
READ_ORIGINAL_TIMESTAMP: Final = ((ORIGINAL_TIMESTAMP, 0), (SPRING_ORIGINAL_TIMESTAMP, 8))
READ_ERROR_CLASS: Final = (
    ERROR_CLASS,
    SPRING_EXCEPTION_CAUSE_FQCN,
    SPRING_EXCEPTION_FQCN,
    CONNECT_EXCEPTION_CLASS,
    STREAMS_EXCEPTION,
)
READ_ERROR_MESSAGE: Final = (
    ERROR_MESSAGE,
    SPRING_EXCEPTION_MESSAGE,
    CONNECT_EXCEPTION_MESSAGE,
    STREAMS_MESSAGE,
    SHARE_GROUP_MESSAGE,
)
READ_ERROR_STACKTRACE: Final = (
    ERROR_STACKTRACE,
    SPRING_EXCEPTION_STACKTRACE,
    CONNECT_EXCEPTION_STACKTRACE,
    STREAMS_STACKTRACE,
)
#: Failed attempts: ours, or how often a share group delivered the record.
READ_ATTEMPT: Final = ((ATTEMPT, 0), (SHARE_GROUP_DELIVERY_COUNT, 0))
#: Who consumed the message: our subscription, Spring's consumer group, a share group.
READ_SUBSCRIPTION: Final = (SUBSCRIPTION, SPRING_ORIGINAL_CONSUMER_GROUP, SHARE_GROUP_GROUP)


def read_text(headers: Sequence[tuple[str, bytes | None]], names: Sequence[str]) -> str | None:
    """The first of ``names`` present (its first value), as text; None when none is."""
    for name in names:
        value = first_header(list(headers), name)
        if value is not None:
            return value.decode("utf-8", "replace")
    return None


def read_number(
    headers: Sequence[tuple[str, bytes | None]], sources: Sequence[tuple[str, int]]
) -> int | None:
    """The first of ``sources`` present and readable, as an int (``READ_ORIGINAL_OFFSET``)."""
    for name, width in sources:
        value = first_header(list(headers), name)
        if value is None:
            continue
        if width:
            if len(value) == width:
                return int.from_bytes(value, "big", signed=True)
            continue
        try:
            return int(value.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            continue
    return None


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


def first_header(headers: list[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    """The first value of header ``name`` (Kafka allows repeated keys; the first wins)."""
    for key, value in headers or ():
        if key == name:
            return value
    return None


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
    reason: str | None = None,
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
