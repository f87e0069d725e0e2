"""Dead-letter strategies (``ignore``, ``stop``), ``retry.rules`` and the error window on a real
Pulsar broker, as ``test_strategies.py`` and ``test_retry_rules.py`` prove them on Kafka. Each
run checks as many of these as its outcome can show."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlq_engine.exits import EXIT_ERROR_WINDOW, EXIT_OK, EXIT_STOP_STRATEGY
from dlq_engine.routing.headers import pulsar_offset
from spark_dlq_devtools.pulsar import Message, PulsarBroker

#: RuntimeError (``fail``) gets no redelivery, ConnectionError (``flaky``) three with its own
#: backoff; the policy's own limit (one) and backoff (300 ms) are neither.
RULES = {
    "maxRedeliverCount": 1,
    "backoff": {"type": "fixed", "delay": "300ms"},
    "rules": [
        {"errors": ["RuntimeError"], "maxRedeliverCount": 0},
        {
            "errors": ["ConnectionError"],
            "maxRedeliverCount": 3,
            "backoff": {"type": "fixed", "delay": "100ms"},
        },
    ],
}


def test_ignore_strategy_and_retry_rules(
    pulsar: PulsarBroker, pulsar_topics: Callable[..., dict[str, str]], pulsar_engine: Callable[..., Any]
) -> None:
    names = pulsar_topics()
    pulsar.produce(
        names["source"],
        [
            Message("fail", b"fail:x"),
            Message("flaky", b"flaky:2"),
            Message("end", b"terminate:t"),
            Message("ok", b"ok:y"),
        ],
    )
    running = pulsar_engine(names, retry=RULES, deadLetter={"strategy": "ignore"})
    running.wait_for(output=2, ignored=2, timeout=120)
    assert running.stop() == EXIT_OK, running.describe()

    # flaky:2 needs two redeliveries: more than the policy's one, within its rule's three.
    assert sorted(m.value for m in pulsar.read_all(names["output"])) == [b"Y", b"recovered after 2"]
    # Ignored: fail (its rule allows no redelivery) and terminate; no dead letter written.
    assert running.run.totals.counts["ignored"] == 2
    assert pulsar.read_all(names["dlq"]) == []  # read to its end: none written
    retries = pulsar.read_all(names["retry"])
    assert sorted((m.key, m.properties["RECONSUMETIMES"], m.properties["dlq.rule"]) for m in retries) == [
        ("flaky", "1", "retry.rules[1]"),
        ("flaky", "2", "retry.rules[1]"),
    ]
    # The rule's backoff (fixed 100 ms), not the policy's (fixed 300 ms).
    assert {int(m.properties["DELAY_TIME"]) for m in retries} == {100}


def test_stop_strategy_stops_without_acknowledging_and_rules_name_the_dead_letter(
    pulsar: PulsarBroker,
    pulsar_topics: Callable[..., dict[str, str]],
    pulsar_engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    names = pulsar_topics()
    pulsar.produce(
        names["source"],
        [
            Message("a", b"ok:1"),
            Message("b", b"terminate:bad"),
            Message("z", b"fail:z"),
            Message("c", b"ok:3"),
        ],
    )
    checkpoint = tmp_path / "cp"
    stopped = pulsar_engine(names, checkpoint=checkpoint, retry=RULES, deadLetter={"strategy": "stop"})
    assert stopped.join(120) == EXIT_STOP_STRATEGY, stopped.describe()
    ledger, entry, _partition, batch = {m.key: m.message_id for m in pulsar.read_all(names["source"])}[
        "b"
    ].split(":")
    offset = pulsar_offset(int(ledger), int(entry), int(batch))
    assert f"message {names['source']}[-1]@{offset} failed (terminated)" in str(stopped.run.query.exception())
    assert pulsar.backlog(names["source"], "tests") >= 3, "the stopped message was acknowledged"

    # Same checkpoint, strategy topic: the stopped message comes again, and fail:z's dead letter
    # names the rule that allowed it no redelivery.
    resumed = pulsar_engine(names, checkpoint=checkpoint, once=True, retry=RULES)
    assert resumed.join(120) == EXIT_OK, resumed.describe()
    dead = pulsar.wait_for(names["dlq"], 2, timeout=30)
    assert sorted(
        (m.key, m.properties["dlq.reason"], m.properties.get("dlq.rule"), m.properties["dlq.attempt"])
        for m in dead
    ) == [("b", "terminated", None, "1"), ("z", "exhausted", "retry.rules[0]", "1")]
    assert pulsar.read_all(names["retry"]) == []  # read to its end: none written


def test_error_window_stops_the_job_with_its_reason(
    pulsar: PulsarBroker,
    pulsar_topics: Callable[..., dict[str, str]],
    pulsar_engine: Callable[..., Any],
    capfd: Any,
) -> None:
    names = pulsar_topics()
    pulsar.produce(names["source"], [Message(str(i), b"terminate:x") for i in range(12)])
    running = pulsar_engine(names, errorWindow={"size": 10, "threshold": 0.5})
    assert running.join(120) == EXIT_ERROR_WINDOW, running.describe()
    assert "error window: 100% of the last 10 messages failed (threshold 50%)" in capfd.readouterr().err
