"""``scripted.process``, recording every call: a message with the header ``x-calls`` (a file
path) appends ``<key>:<attempt>`` to that file before it is processed, so a test can count how
often the processor saw each message (from any Python worker: one short append per call).
``slow:<seconds>`` sleeps that long after recording the message's first call (a replay does not
sleep), then returns ``slept``."""

from __future__ import annotations

import time
from typing import Any

from dlq_engine import Message
from tests.processors import scripted

CALLS_HEADER = "x-calls"


def process(message: Message) -> Any:
    path = message.headers.get(CALLS_HEADER)
    first = True
    if path:
        key = (message.key or b"").decode()
        with open(path.decode(), "a+", encoding="utf-8") as calls:
            calls.seek(0)
            first = f"{key}:" not in calls.read()
            calls.write(f"{key}:{message.attempt}\n")
    command, _, argument = (message.value or b"").decode().partition(":")
    if command == "slow":
        if first:
            time.sleep(float(argument))
        return "slept"
    return scripted.process(message)
