"""A processor for the ordering tests: the value is ``<key>:<seq>:<command>`` and a success
publishes ``<key>:<seq>`` (so the output topic says which message of which key it was).

``ok``; ``flaky<n>`` fails with ConnectionError while attempt < n; ``dead`` is dead-lettered at
once (Terminate).
"""

from __future__ import annotations

from dlq_engine import Message, Terminate


def process(message: Message) -> str:
    key, seq, command = (message.value or b"").decode().split(":")
    if command.startswith("flaky") and message.attempt < int(command[len("flaky") :]):
        raise ConnectionError(f"{key}:{seq} attempt {message.attempt}")
    if command == "dead":
        raise Terminate(f"{key}:{seq} is poison")
    return f"{key}:{seq}"
