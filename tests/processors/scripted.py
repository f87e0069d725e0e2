"""A processor for engine tests, scripted by the message value:

``ok:<text>`` -> returns ``<text>`` upper-cased; ``ack`` -> None; ``flaky:<n>`` -> fails with
ConnectionError while attempt < n; ``fail`` -> always RuntimeError; ``terminate`` ->
Terminate; ``nonretry`` -> KeyError (a LookupError); ``retry:<delay>`` -> Retry(delay) on the
first attempt, then ok; ``dict`` -> a dict result; ``badtype`` -> returns an int; ``timed:<n>`` -> fails while attempt < n, then returns when
it ran and the ``dlq.deliver.at`` it carried; ``broken-until:<path>`` -> ValueError until the
file ``<path>`` exists (a processor fixed while its dead letters wait), then ok.
"""

from __future__ import annotations

import os
import time
from typing import Any

from dlq_engine import Message, Retry, Terminate


def process(message: Message) -> Any:
    text = (message.value or b"").decode()
    command, _, argument = text.partition(":")
    if command == "ok":
        return argument.upper()
    if command == "ack":
        return None
    if command == "flaky":
        if message.attempt < int(argument):
            raise ConnectionError(f"flaky attempt {message.attempt}")
        return f"recovered after {message.attempt}"
    if command == "fail":
        raise RuntimeError(f"always fails: {argument}")
    if command == "terminate":
        raise Terminate(f"terminated: {argument}")
    if command == "nonretry":
        raise KeyError(argument)
    if command == "retry":
        if message.attempt == 0:
            raise Retry("asked to wait", delay=argument)
        return f"waited {argument}"
    if command == "dict":
        return {"value": argument, "attempt": message.attempt}
    if command == "badtype":
        return 42
    if command == "timed":
        # Fails until attempt <n>, then reports when it ran and when it was due.
        if message.attempt < int(argument):
            raise ConnectionError(f"timed attempt {message.attempt}")
        due = message.headers.get("dlq.deliver.at", b"0").decode()
        return {"attempt": message.attempt, "ran_at": int(time.time() * 1000), "due": int(due)}
    if command == "broken-until":
        if not os.path.exists(argument):
            raise ValueError(f"not fixed yet: {argument}")
        return f"fixed after {message.attempt}"
    raise ValueError(f"unknown command {command!r}")


def process_batch(messages: list[Message]) -> list[object]:
    out: list[object] = []
    for m in messages:
        try:
            out.append(process(m))
        except Exception as error:  # noqa: BLE001 - returned, not raised, in batch mode
            out.append(error)
    return out


def process_arrow(batch: Any) -> Any:
    """``mode: arrow``: ``process`` on each row of the Arrow batch; its exceptions by row, and a
    result that is not bytes, str or None fails its row with a TypeError."""
    import pyarrow as pa

    rows = batch.to_pylist()
    values: list[bytes | None] = []
    errors: dict[int, BaseException] = {}
    for i, row in enumerate(rows):
        headers = {h["key"]: h["value"] or b"" for h in reversed(row["headers"] or [])}
        message = Message(
            row["key"],
            row["value"],
            headers,
            row["topic"],
            row["partition"],
            row["offset"],
            row["timestamp"],
            row["attempt"],
        )
        try:
            result = process(message)
        except Exception as error:  # noqa: BLE001 - handed back by row in arrow mode
            errors[i] = error
            result = None
        if isinstance(result, str):
            result = result.encode()
        elif result is not None and not isinstance(result, bytes):
            errors[i] = TypeError(f"cannot write a {type(result).__name__}")
            result = None
        values.append(result)
    return pa.array(values, pa.binary()), errors
