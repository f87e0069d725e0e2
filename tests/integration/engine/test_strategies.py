"""Dead-letter strategies (Conduit's topic / ignore / stop), the error window, the batch and
Arrow modes (on Kafka and Pulsar), source ordering, and restarts from the checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlq_engine.exits import EXIT_ERROR_WINDOW, EXIT_OK, EXIT_STOP_STRATEGY
from tests.helpers import produce, read_all
from tests.integration.engine.brokers import BrokerUnderTest


def test_ignore_strategy_counts_dead_letters_and_writes_none(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics()
    produce(bootstrap_servers, names["source"], [(b"a", b"terminate:x"), (b"b", b"ok:y")])
    running = engine(names, deadLetter={"strategy": "ignore"})
    running.wait_for(total=2)
    assert [r.value for r in read_all(bootstrap_servers, names["output"], expect=1, timeout=30)] == [b"Y"]
    assert running.stop() == EXIT_OK
    assert read_all(bootstrap_servers, names["dlq"]) == []
    assert running.run.totals.counts["ignored"] == 1


def test_stop_strategy_stops_without_committing_the_message(
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    names = topics()
    produce(bootstrap_servers, names["source"], [(b"a", b"ok:1"), (b"b", b"terminate:bad"), (b"c", b"ok:3")])
    checkpoint = tmp_path / "cp"
    stopped = engine(names, checkpoint=checkpoint, deadLetter={"strategy": "stop"})
    assert stopped.join(120) == EXIT_STOP_STRATEGY
    error = str(stopped.run.query.exception())
    assert f"message {names['source']}[0]@1 failed (terminated)" in error

    # Same checkpoint, strategy topic: the stopped message was not committed, so it comes again.
    resumed = engine(names, checkpoint=checkpoint, once=True)
    assert resumed.join(120) == EXIT_OK
    dead = read_all(bootstrap_servers, names["dlq"], expect=1, timeout=30)
    assert [(r.key, r.header("dlq.reason")) for r in dead] == [(b"b", "terminated")]


def test_error_window_stops_the_job_with_its_reason(
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    capfd: Any,
) -> None:
    names = topics()
    produce(bootstrap_servers, names["source"], [(f"{i}".encode(), b"terminate:x") for i in range(30)])
    running = engine(names, errorWindow={"size": 10, "threshold": 0.5})
    assert running.join(120) == EXIT_ERROR_WINDOW
    assert "error window: 100% of the last 10 messages failed (threshold 50%)" in capfd.readouterr().err


@pytest.mark.parametrize(
    ("mode", "entrypoint", "unwritable"),
    [
        ("batch", "process_batch", "dlq_engine.routing.outcomes.UnsupportedResult"),
        ("arrow", "process_arrow", "TypeError"),  # the Arrow processor fails that row itself
    ],
)
def test_batch_and_arrow_mode_route_like_message_mode(
    broker: BrokerUnderTest, mode: str, entrypoint: str, unwritable: str
) -> None:
    """Every outcome (output, acknowledged, recovered after a retry, exhausted, non-retryable,
    terminated), on Kafka and on Pulsar."""
    names = broker.topics()
    broker.produce(
        names["source"],
        [
            (b"a", b"ok:x"),
            (b"b", b"nonretry:k"),
            (b"c", b"flaky:1"),
            (b"d", b"badtype"),
            (b"e", b"ack"),
            (b"f", b"terminate:t"),
        ],
    )
    running = broker.engine(
        names,
        processor={"entrypoint": f"tests.processors.scripted:{entrypoint}", "mode": mode},
        retry={
            "maxRedeliverCount": 1,
            "nonRetryableErrors": ["KeyError"],
            "backoff": {"type": "fixed", "delay": "200ms"},
        },
    )
    output = broker.read_all(names["output"], expect=2, timeout=120)
    dead = broker.read_all(names["dlq"], expect=3, timeout=60)
    running.stop()
    assert sorted(r.value for r in output) == [b"X", b"recovered after 1"]
    reasons = {r.key: (r.header("dlq.reason"), r.header("dlq.error.class"), r.value) for r in dead}
    assert reasons == {
        b"b": ("non-retryable", "KeyError", b"nonretry:k"),
        b"d": ("exhausted", unwritable, b"badtype"),
        b"f": ("terminated", "dlq_engine.model.processor_api.Terminate", b"terminate:t"),
    }
    assert running.run.totals.counts["acked"] == 1


def test_first_delivery_dead_letters_keep_source_order(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics()
    produce(bootstrap_servers, names["source"], [(f"{i}".encode(), b"terminate:x") for i in range(200)])
    running = engine(names, once=True)
    assert running.join(120) == EXIT_OK
    dead = read_all(bootstrap_servers, names["dlq"], expect=200, timeout=30)
    assert [int(r.header("dlq.original.offset") or -1) for r in dead] == list(range(200))


def test_restart_from_checkpoint_neither_repeats_nor_skips(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any], tmp_path: Path
) -> None:
    names = topics(partitions=2)
    checkpoint = tmp_path / "cp"
    produce(bootstrap_servers, names["source"], [(f"a{i}".encode(), f"ok:a{i}".encode()) for i in range(50)])
    first = engine(names, checkpoint=checkpoint, once=True)
    assert first.join(120) == EXIT_OK
    produce(bootstrap_servers, names["source"], [(f"b{i}".encode(), f"ok:b{i}".encode()) for i in range(50)])
    second = engine(names, checkpoint=checkpoint, once=True)
    assert second.join(120) == EXIT_OK

    output = read_all(bootstrap_servers, names["output"])  # both stopped: read to the end
    assert sorted(r.value for r in output) == sorted(
        [f"A{i}".encode() for i in range(50)] + [f"B{i}".encode() for i in range(50)]
    )
    assert second.run.totals.counts["total"] == 50
