"""The names of the headers a dead letter carries, where a reader of dead letters finds each fact
among them, and how a header's value is decoded.

The engine writes the ``dlq.*`` headers (``routing.headers`` builds them; docs/reference.md,
section 3) and, per ``deadLetter.headerProfiles``, the same facts under Spring's, Kafka Connect's
and Pulsar's names. A reader (the redrive job's dead-letter columns, ``job/dead_letter_table.py``;
``kubectl dlq``, ``spark_dlq_operator.kubectl_dlq``) finds each fact under ours first, then under
the names other tools write (``READ_*``), so it reads their dead-letter topics too. Pure: this is
the one module both the engine and the operator's plugin import for the header contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

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


#: Where a reader of dead letters (the redrive, kubectl dlq) finds each fact, tried in this
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


def first_header(headers: list[tuple[str, bytes | None]] | None, name: str) -> bytes | None:
    """The first value of header ``name`` (Kafka allows repeated keys; the first wins)."""
    for key, value in headers or ():
        if key == name:
            return value
    return None
