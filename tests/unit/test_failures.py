"""The engine's endings (``dlq_engine.failures``): the record an ``EngineError`` carries back
to the driver as text, read back whole from inside the errors Spark wraps it in, and the exit
status and stderr line of each kind."""

from __future__ import annotations

import pytest

from dlq_engine import exits
from dlq_engine.failures import Ending, EngineError, Failure, decode, encode

CARRIED = [kind for kind in Ending if kind.carried]


def spark_wrapped(error: EngineError) -> str:
    """As a worker's error reaches the driver: a Python traceback inside a ``PythonException``
    inside the ``StreamingQueryException``, then the query's description."""
    return (
        "[STREAM_FAILED] Query [id = 1f, runId = 2e] terminated with exception: Job aborted due to "
        "stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0: "
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/opt/dlq_engine/processing/batches.py", line 360, in _failure_headers\n'
        "    raise _stopped(decision, message, failure)\n"
        f"dlq_engine.failures.EngineError: {error}\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException\n"
        "\n=== Streaming Query ===\nIdentifier: [id = 1f, runId = 2e]\n"
    )


@pytest.mark.parametrize("kind", CARRIED)
def test_a_carried_failure_round_trips_through_spark_s_wrapping(kind: Ending) -> None:
    failure = Failure(kind, "strategy stop: message orders[1]@3 failed (terminated): Terminate: bad: x")
    error = EngineError(failure, "the underlying error\nits second line")
    assert str(error).splitlines()[0] == encode(failure)
    assert decode(str(error)) == failure
    assert decode(spark_wrapped(error)) == failure
    assert decode(str(EngineError.of(kind, "first line\nsecond line"))) == Failure(kind, "first line")


def test_a_stop_wins_over_the_failed_write_that_carried_it() -> None:
    stop = EngineError(Failure(Ending.STOP_STRATEGY, "strategy stop: message t[0]@1 failed"))
    write = EngineError(
        Failure(Ending.SINK_WRITE, "the Kafka write of micro-batch 2 failed: x"), spark_wrapped(stop)
    )
    assert decode(str(write)) == stop.failure


def test_text_without_a_record_decodes_to_nothing() -> None:
    assert decode("org.apache.kafka.common.errors.TimeoutException: DLQ-STOPPED nothing") is None


def test_each_ending_has_its_exit_status_and_stderr_line() -> None:
    assert {kind: kind.exit_status for kind in Ending} == {
        Ending.STOP_STRATEGY: exits.EXIT_STOP_STRATEGY,
        Ending.SINK_WRITE: exits.EXIT_FAILED,
        Ending.ERROR_WINDOW: exits.EXIT_ERROR_WINDOW,
        Ending.LEASE_LOST: exits.EXIT_CHECKPOINT_LOCKED,
        Ending.QUERY_FAILED: exits.EXIT_FAILED,
    }
    assert (
        Failure(Ending.STOP_STRATEGY, "strategy stop: m").message
        == "dlq-engine: stopped: DLQ-STOP: strategy stop: m"
    )
    assert Failure(Ending.SINK_WRITE, "w failed: e").message == "dlq-engine: the query failed: w failed: e"
    assert Failure(Ending.ERROR_WINDOW, "50% failed").message == "dlq-engine: stopped: 50% failed"
    assert Failure(Ending.LEASE_LOST, "taken").message == "dlq-engine: stopped: taken"
    assert Failure(Ending.QUERY_FAILED, "boom").message == "dlq-engine: the query failed: boom"


def test_only_carried_one_line_failures_are_raised() -> None:
    with pytest.raises(ValueError, match="carried kind"):
        EngineError(Failure(Ending.ERROR_WINDOW, "x"))
    with pytest.raises(ValueError, match="one line"):
        EngineError(Failure(Ending.STOP_STRATEGY, "a\nb"))
