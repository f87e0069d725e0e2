"""A dead letter as the engine writes it, for the unit tests of its decoding and of ``kubectl dlq``."""

from __future__ import annotations

from dlq_engine.model import headers as h
from dlq_engine.model.dead_letter import DeadLetter
from dlq_engine.routing.headers import failure_headers

T0 = 1_795_600_000_000  # 2026-11-25T09:46:40Z


def letter(
    offset: int = 0,
    *,
    partition: int = 0,
    failed_at: int | None = T0,
    reason: str | None = "exhausted",
    error_class: str = "ValueError",
    message: str = "bad amount",
    key: bytes | None = b"order-1",
    value: bytes | None = b'{"id": 1}',
    timestamp: int | None = None,
    stacktrace: str | None = "Traceback (most recent call last):\nValueError: bad amount",
    extra: tuple[tuple[str, bytes | None], ...] = (),
) -> DeadLetter:
    headers = failure_headers(
        origin={h.ORIGINAL_TOPIC: "orders", h.ORIGINAL_PARTITION: "2", h.ORIGINAL_OFFSET: "17"},
        attempt=4,
        error_class=error_class,
        error_message=message,
        stacktrace=stacktrace,
        policy="payments/orders-billing",
        subscription="billing",
        failed_at=failed_at if failed_at is not None else 0,
        reason=reason,
        static={"team": "payments"},
    )
    if failed_at is None:
        headers = [(k, v) for k, v in headers if k != h.FAILED_AT]
    return DeadLetter(
        partition=partition,
        offset=offset,
        timestamp=timestamp if timestamp is not None else (failed_at or T0) + 5,
        key=key,
        value=value,
        headers=(*headers, *extra),
    )
