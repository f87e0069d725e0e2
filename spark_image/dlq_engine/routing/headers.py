"""The ``dlq.*`` headers written on retry and dead-letter records (docs/reference.md, section 3).

A record keeps its original headers; every ``dlq.*`` header from an earlier attempt is
replaced, never appended, so a record does not grow as it goes round the retry topic. The
``dlq.original.*`` and ``dlq.first.failure.at`` headers are carried over from the first
failure, so they always name where the message was first read.
"""

from __future__ import annotations

from collections.abc import Mapping
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
#: Written by a redrive (``DeadLetterRedrive``) on each message it sends back: how many times
#: this message has been redriven, by which redrive, and when.
REDRIVE_COUNT: Final = "dlq.redrive.count"
REDRIVE_NAME: Final = "dlq.redrive.name"
REDRIVE_AT: Final = "dlq.redrive.at"
#: A control record of the retry topic, never handed to the processor. With
#: ``source.ordering: key``: ``park`` (a later message of a key whose message went to retry,
#: written unprocessed, with its ``dlq.original.*`` position, to be held behind it), ``release``
#: and ``block`` (the message at ``dlq.original.partition``/``offset`` of the record's key
#: succeeded or was dead-lettered: its key goes on, or stays held under ``onDeadLetter: block``).
CONTROL: Final = "dlq.control"
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

#: Error messages are bounded so one failure cannot make a record too large for the broker.
MAX_MESSAGE_CHARS: Final = 2_000


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
) -> list[tuple[str, bytes]]:
    """The ``dlq.*`` headers (and static dead-letter headers) for one failed message.

    ``origin`` holds the carried headers (``CARRIED``) as they should be written.
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
    return [(k, v.encode("utf-8", "replace")) for k, v in values]
