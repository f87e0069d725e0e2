"""An example processor for the demo and the README: orders as JSON.

- ``{"id": 1, "amount": 10}`` -> billed: a result published to the output topic
- ``"kind": "flaky"``    -> fails with ConnectionError on the first two attempts, then succeeds
- ``"kind": "poison"``   -> always fails with ValueError (retried until exhausted)
- ``"kind": "fraud"``    -> Terminate: straight to the dead letters
- ``"kind": "ignore"``   -> None: acknowledged, nothing published
- not JSON             -> json.JSONDecodeError, listed as non-retryable in the example policy
"""

from __future__ import annotations

import json
from typing import Any

from dlq_engine import Message, Terminate


def process(message: Message) -> dict[str, Any] | None:
    order = json.loads(message.value or b"")
    kind = order.get("kind", "normal")
    if kind == "flaky" and message.attempt < 2:
        raise ConnectionError(f"billing service unavailable (attempt {message.attempt})")
    if kind == "poison":
        raise ValueError(f"order {order.get('id')} has no customer")
    if kind == "fraud":
        raise Terminate(f"order {order.get('id')} flagged as fraud")
    if kind == "ignore":
        return None
    return {"id": order.get("id"), "billed": order.get("amount", 0), "attempt": message.attempt}


def process_v2(message: Message) -> dict[str, Any] | None:
    """Version 2, the fix for the poison orders: an order without a customer is billed to the
    walk-in account instead of failing. (The demo deploys it, then redrives the dead letters.)"""
    order = json.loads(message.value or b"")
    if order.get("kind") == "poison":
        return {
            "id": order.get("id"),
            "billed": order.get("amount", 0),
            "customer": "walk-in",
            "attempt": message.attempt,
        }
    return process(message)


def process_batch(messages: list[Message]) -> list[object]:
    """The same rules for ``mode: batch``: one result or exception per message."""
    results: list[object] = []
    for message in messages:
        try:
            results.append(process(message))
        except Exception as error:  # noqa: BLE001 - returned, not raised, in batch mode
            results.append(error)
    return results
