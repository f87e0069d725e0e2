"""Why a message was dead-lettered (its ``dlq.reason``): the one list of reasons.

Routing writes them, the metrics count them, the redrive selects by them, ``kubectl dlq`` and
the dead-letter table show them, and the redrive CRD's enum is tested against this list, so a
new reason is added here and nowhere else.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

DeadLetterReason = Literal[
    "exhausted",
    "terminated",
    "non-retryable",
    "ordering-overflow",
    "too-large",
    "retry-timeout",
]
#: Every reason, in the order they are documented (docs/reference.md, ``dlq.reason``).
DEAD_LETTER_REASONS: Final[tuple[DeadLetterReason, ...]] = get_args(DeadLetterReason)

#: A transient failure with no redelivery left (``retry.maxRedeliverCount`` or its rule's).
EXHAUSTED: Final[DeadLetterReason] = "exhausted"
#: The processor raised ``Terminate``.
TERMINATED: Final[DeadLetterReason] = "terminated"
#: The error's class is listed in ``retry.nonRetryableErrors``.
NON_RETRYABLE: Final[DeadLetterReason] = "non-retryable"
#: ``source.ordering: key``: the message was held past a bound of ``spec.ordering``.
ORDERING_OVERFLOW: Final[DeadLetterReason] = "ordering-overflow"
#: The record could not be written to its topic as it was: larger than the producer's
#: ``max.request.size`` or the topic's ``max.message.bytes``, its headers included.
TOO_LARGE: Final[DeadLetterReason] = "too-large"
#: A retry would have been due after ``retry.maxRetryDuration`` (or its rule's) from the
#: message's first failure.
RETRY_TIMEOUT: Final[DeadLetterReason] = "retry-timeout"
