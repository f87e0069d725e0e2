"""A processor for the bad-input tests, scripted by the record's ``do`` header (so that the key
and value can be anything, null included):

``describe`` -> a dict of what it saw (key and value as hex or None, attempt, headers);
``echo`` -> the value as it is; ``decode`` -> the value decoded as UTF-8, upper-cased (fails on a
null or non-UTF-8 value); ``fail`` -> RuntimeError; ``int``, ``set``, ``datetime``,
``surrogate`` -> a result that cannot be published; ``list`` -> a JSON array; ``hang`` -> never
returns (looping in Python); ``block`` -> never returns, blocked in C code (it first appends its
Python worker's pid to the file named by the ``pids`` header); ``bad-str`` -> an exception whose
``__str__`` raises; ``huge-message`` -> an exception with a 1 MB message; ``exit`` ->
``sys.exit(3)``; ``interrupt`` -> KeyboardInterrupt.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from typing import Any

from dlq_engine import Message


class BadStr(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def process(message: Message) -> Any:
    action = message.headers.get("do", b"").decode()
    if action == "describe":
        return {
            "key": _hex(message.key),
            "value": _hex(message.value),
            "attempt": message.attempt,
            "headers": {k: _hex(v) for k, v in message.headers.items()},
        }
    if action == "echo":
        return message.value
    if action == "decode":
        return message.value.decode("utf-8").upper()  # type: ignore[union-attr]
    if action == "fail":
        raise RuntimeError(f"always fails (attempt {message.attempt})")
    if action == "int":
        return 42
    if action == "set":
        return {1, 2}
    if action == "list":
        return [1, "two"]
    if action == "datetime":
        return {"at": datetime.datetime(2026, 1, 2, 3, 4, 5)}
    if action == "surrogate":
        return "bad \udcff text"
    if action == "hang":
        while True:
            time.sleep(0.05)
    if action == "block":
        with open(message.headers["pids"], "a", encoding="utf-8") as pids:
            pids.write(f"{os.getpid()}\n")
        threading.Event().wait()  # a lock acquired in C, never released: no exception reaches it
    if action == "bad-str":
        raise BadStr()
    if action == "huge-message":
        raise ValueError("x" * 1_000_000)
    if action == "exit":
        sys.exit(3)
    if action == "interrupt":
        raise KeyboardInterrupt
    raise ValueError(f"unknown action {action!r}")
