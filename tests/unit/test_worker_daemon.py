"""The engine's Python worker daemon lets a worker go when an abandoned call still runs in it:
it reads Spark's final "reuse me?" (``END_OF_STREAM``) as something else, so that PySpark's own
worker answers "do not reuse me" and exits after its task. The whole exchange with a real
Spark worker is tested in tests/integration/engine/test_bad_input.py (``never-returns``)."""

from __future__ import annotations

import io
import struct
import threading

from dlq_engine.job import worker_daemon
from dlq_engine.processing.time_limit import abandoned_threads, map_with_limit
from tests.unit.test_time_limit import wait_until

END_OF_STREAM = struct.pack("!i", -4)


def test_a_worker_without_abandoned_calls_reads_its_input_as_it_is() -> None:
    assert wait_until(lambda: abandoned_threads() == 0)
    stream = worker_daemon._TaskInput(io.BytesIO(b"abcd" + END_OF_STREAM))
    assert stream.read(4) == b"abcd"
    assert stream.read(4) == END_OF_STREAM
    assert stream.read(4) == b""


def test_a_worker_holding_an_abandoned_call_reads_the_end_of_stream_as_a_refusal() -> None:
    release = threading.Event()
    map_with_limit(lambda _: release.wait(), [None], timeout_ms=50)
    try:
        data = END_OF_STREAM * 3
        stream = worker_daemon._TaskInput(io.BytesIO(data))
        assert stream.read(4) == struct.pack("!i", 0)  # PySpark answers END_OF_DATA_SECTION and exits
        assert stream.read(8) == END_OF_STREAM * 2  # only the 4-byte word is read otherwise
        assert stream.getvalue() == data  # everything else passes through to the stream
    finally:
        release.set()
    assert wait_until(lambda: abandoned_threads() == 0)
