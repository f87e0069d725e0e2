"""The headers a failed, parked or redelivered record is read by and written with.

A record read from the retry topic carries its story in ``dlq.*`` headers (or, from the Pulsar
Java client, ``RECONSUMETIMES``, ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID``): how often it failed,
when it was due, where it was first read and when it first failed. These functions read that
story and write the next chapter: the failure headers of a retry letter or dead letter, the
``dlq.control: park`` headers of a record held behind its key, and the source position the
ordering stage names a key's message by. Plain values in, plain values out.
"""

from __future__ import annotations

from typing import Final

from dlq_engine.model.processor_api import Message
from dlq_engine.routing import headers as h
from dlq_engine.routing.outcomes import MAX_DELIVER_AT, Decision, Failure, Route
from dlq_engine.routing.record_size import Header
from dlq_engine.routing.settings import RoutingSettings

#: An attempt count read from a header is clamped to this: a forged huge number must neither
#: overflow nor make the arithmetic misbehave; it still means "exhausted".
MAX_ATTEMPT_HEADER: Final = 1_000_000


def failure_headers(
    message: Message,
    retry_headers: list[Header] | None,
    failure: Failure,
    decision: Decision,
    failures: int,
    settings: RoutingSettings,
    now: int,
) -> list[tuple[str, bytes]]:
    """The ``dlq.*`` headers (and every listed profile's) a failed message leaves with, to the
    retry topic (due at ``decision.deliver_at``) or the dead letters. ``message`` gives where it
    was read; ``retry_headers`` are its headers when it came from the retry topic: the origin
    and first failure it carries are kept."""
    origin = {}
    if retry_headers is not None:
        for name in h.CARRIED:
            carried = h.first_header(retry_headers, name)
            if carried is not None:
                origin[name] = text(carried)
        if settings.pulsar and h.ORIGINAL_TOPIC not in origin:
            origin.update(java_origin(retry_headers))
    origin.setdefault(h.ORIGINAL_TOPIC, message.topic)
    origin.setdefault(h.ORIGINAL_PARTITION, str(message.partition))
    origin.setdefault(h.ORIGINAL_OFFSET, str(message.offset))
    origin.setdefault(h.ORIGINAL_TIMESTAMP, str(message.timestamp))
    origin.setdefault(h.FIRST_FAILURE_AT, str(now))
    deliver_at = decision.deliver_at
    assert (deliver_at is not None) == (decision.route is Route.RETRY), "a retry, and only a retry, is due"
    return h.failure_headers(
        origin=origin,
        attempt=failures,
        error_class=failure.error_class,
        error_message=failure.error_message,
        stacktrace=failure.stacktrace,
        policy=settings.policy,
        subscription=settings.subscription,
        failed_at=now,
        deliver_at=deliver_at,
        reason=decision.reason,
        static=dict(settings.static_headers) if decision.route is not Route.RETRY else None,
        rule=f"retry.rules[{failure.rule}]" if failure.rule >= 0 else None,
        profiles=settings.header_profiles,
        retry_topic=settings.retry_topic,
        pulsar_ids=settings.pulsar,
    )


def parked_headers(message: Message, retry_headers: list[Header] | None) -> list[tuple[str, bytes]]:
    """``dlq.control: park`` and the record's source position (``dlq.original.*``)."""
    origin: dict[str, str] = {}
    if retry_headers is not None:
        for name in (h.ORIGINAL_TOPIC, h.ORIGINAL_PARTITION, h.ORIGINAL_OFFSET, h.ORIGINAL_TIMESTAMP):
            carried = h.first_header(retry_headers, name)
            if carried is not None:
                origin[name] = text(carried)
    origin.setdefault(h.ORIGINAL_TOPIC, message.topic)
    origin.setdefault(h.ORIGINAL_PARTITION, str(message.partition))
    origin.setdefault(h.ORIGINAL_OFFSET, str(message.offset))
    origin.setdefault(h.ORIGINAL_TIMESTAMP, str(message.timestamp))
    return [(h.CONTROL, h.CONTROL_PARK.encode()), *((k, v.encode()) for k, v in origin.items())]


def position(message: Message, retry_headers: list[Header] | None) -> tuple[str, str]:
    """A message's source position as the ordering stage names it: the ``dlq.original.*``
    partition and offset a retry record carries, else its own."""
    partition, offset = str(message.partition), str(message.offset)
    if retry_headers is not None:
        carried_partition = h.first_header(retry_headers, h.ORIGINAL_PARTITION)
        carried_offset = h.first_header(retry_headers, h.ORIGINAL_OFFSET)
        if carried_partition is not None and carried_offset is not None:
            text_partition, text_offset = text(carried_partition), text(carried_offset)
            if text_partition.lstrip("-").isdigit() and text_offset.lstrip("-").isdigit():
                partition, offset = text_partition, text_offset
    return partition, offset


def java_origin(headers: list[Header]) -> dict[str, str]:
    """Where a retry letter of the Pulsar Java client (``reconsumeLater``) was first read:
    its ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID``; empty when it has none."""
    topic = h.first_header(headers, h.PULSAR_REAL_TOPIC)
    if topic is None:
        return {}
    origin = {h.ORIGINAL_TOPIC: text(topic)}
    for name in (h.PULSAR_ORIGIN_MESSAGE_ID_NEW, h.PULSAR_ORIGIN_MESSAGE_ID):
        parsed = h.parse_pulsar_message_id(text(h.first_header(headers, name)))
        if parsed is not None:
            origin[h.ORIGINAL_PARTITION], origin[h.ORIGINAL_OFFSET] = str(parsed[0]), str(parsed[1])
            break
    return origin


def attempt(headers: list[Header] | None) -> int:
    """Failed attempts so far: ``dlq.attempt``, else the Pulsar Java client's
    ``RECONSUMETIMES`` (its ``reconsumeLater`` counts the same way); 0 when neither is there."""
    raw = h.first_header(headers, h.ATTEMPT)
    if raw is None:
        raw = h.first_header(headers, h.PULSAR_RECONSUME_TIMES)
    try:
        value = int(text(raw))
    except ValueError:
        return 0
    return min(max(value, 0), MAX_ATTEMPT_HEADER)


def lateness(headers: list[Header] | None, now: int) -> int | None:
    """How late a retry is, from its ``dlq.deliver.at``; None when that is unreadable or out of
    range (the lateness column is an int64, and a forged header must not overflow it)."""
    try:
        due = int(text(h.first_header(headers, h.DELIVER_AT)))
    except ValueError:
        return None
    if not 0 <= due <= MAX_DELIVER_AT:
        return None
    return now - due


def text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", "replace")
