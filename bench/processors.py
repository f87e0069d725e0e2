"""The benchmark processors, imported by name on Spark's Python workers (``bench.processors``).

Every source message's value starts with a four-digit bucket (0..9999, see ``bench.data``), so
one topic serves every failure mix: the entrypoint decides which buckets fail.

- ``transient``: fails on the first delivery (``ConnectionError``), succeeds on the retry;
- ``poison``: always fails (``RuntimeError``), so it is retried until exhausted, then dead.

The processing itself is trivial: the value is returned as the result (published to the output
topic). ``mode: batch`` variants take the list of messages and return one result or exception
per message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dlq_engine import Message

#: failure mix name -> (buckets below this are transient, buckets below this are poison)
MIXES: dict[str, tuple[int, int]] = {
    "0%": (0, 0),
    "1%+0.1%": (100, 110),
    "10%": (1000, 1000),
}
MIX_SUFFIX = {"0%": "clean", "1%+0.1%": "mix1", "10%": "mix10"}


class Poison(RuntimeError):
    pass


def _bucket(value: bytes | None) -> int:
    return int(value[:4]) if value else 0


def _message_processor(transient: int, poison: int) -> Callable[[Message], bytes | None]:
    if transient == 0 and poison == 0:

        def clean(message: Message) -> bytes | None:
            return message.value

        return clean

    def process(message: Message) -> bytes | None:
        value = message.value
        bucket = _bucket(value)
        if bucket < transient:
            if message.attempt == 0:
                raise ConnectionError("transient failure")
        elif bucket < poison:
            raise Poison("poison message")
        return value

    return process


def _batch_processor(transient: int, poison: int) -> Callable[[list[Message]], list[object]]:
    if transient == 0 and poison == 0:

        def clean(messages: list[Message]) -> list[object]:
            return [m.value for m in messages]

        return clean

    def process(messages: list[Message]) -> list[object]:
        out: list[object] = []
        append = out.append
        for m in messages:
            value = m.value
            bucket = _bucket(value)
            if bucket < transient:
                append(ConnectionError("transient failure") if m.attempt == 0 else value)
            elif bucket < poison:
                append(Poison("poison message"))
            else:
                append(value)
        return out

    return process


def _arrow_processor(transient: int, poison: int) -> Callable[[pa.RecordBatch], object]:
    """``mode: arrow``: the same decisions, taken on whole columns."""
    if transient == 0 and poison == 0:

        def clean(batch: pa.RecordBatch) -> pa.Array:
            return batch.column("value")

        return clean

    def process(batch: pa.RecordBatch) -> tuple[pa.Array, dict[int, BaseException]]:
        values = batch.column("value")
        heads = pc.cast(pc.binary_slice(values, 0, 4), pa.string())
        buckets = pc.cast(pc.fill_null(heads, "0"), pa.int32()).to_numpy(zero_copy_only=False)
        first = batch.column("attempt").to_numpy(zero_copy_only=False) == 0
        errors: dict[int, BaseException] = {}
        for i in np.flatnonzero((buckets < transient) & first).tolist():
            errors[i] = ConnectionError("transient failure")
        for i in np.flatnonzero((buckets >= transient) & (buckets < poison)).tolist():
            errors[i] = Poison("poison message")
        return values, errors

    return process


process_clean = _message_processor(*MIXES["0%"])
process_mix1 = _message_processor(*MIXES["1%+0.1%"])
process_mix10 = _message_processor(*MIXES["10%"])
batch_clean = _batch_processor(*MIXES["0%"])
batch_mix1 = _batch_processor(*MIXES["1%+0.1%"])
batch_mix10 = _batch_processor(*MIXES["10%"])
arrow_clean = _arrow_processor(*MIXES["0%"])
arrow_mix1 = _arrow_processor(*MIXES["1%+0.1%"])
arrow_mix10 = _arrow_processor(*MIXES["10%"])


def entrypoint(mode: str, mix: str) -> str:
    prefix = {"batch": "batch", "arrow": "arrow"}.get(mode, "process")
    return f"bench.processors:{prefix}_{MIX_SUFFIX[mix]}"


def timed(message: Message) -> dict[str, object]:
    """Retry precision: the value is ``<failures>|...``; fails while the attempt is below it,
    then reports when it ran (epoch ms, float), the ``dlq.deliver.at`` it carried and whether
    it was a warm-up message (``<failures>|w...``)."""
    now = time.time() * 1000.0
    value = message.value or b"1|"
    failures = int(value.split(b"|", 1)[0])
    if message.attempt < failures:
        raise ConnectionError(f"timed attempt {message.attempt}")
    due = int(message.headers.get("dlq.deliver.at", b"0") or b"0")
    return {"ran_at": now, "due": due, "attempt": message.attempt, "warm_up": value[2:3] == b"w"}


def decode_timed(value: bytes) -> dict[str, float]:
    data = json.loads(value)
    return {
        "ran_at": float(data["ran_at"]),
        "due": float(data["due"]),
        "attempt": float(data["attempt"]),
        "warm_up": float(bool(data.get("warm_up"))),
    }
