"""Apache Pulsar's own Java client (the broker's version, from Maven Central) and the engine on
one retry topic, both ways: the Java client's ``enableRetry`` consumer reads the engine's retry
letters with the ``RECONSUMETIMES`` it would have written itself, and the engine counts the
attempts of a letter the Java client's ``reconsumeLater`` wrote, and keeps its origin."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

from spark_dlq_devtools.paths import java_classpath
from spark_dlq_devtools.pulsar import Message, PulsarBroker, full_topic


def run_java_consumer(
    pulsar: PulsarBroker, topic: str, retry: str, dlq: str, *, letters: int
) -> list[dict[str, Any]]:
    done = subprocess.run(
        [
            "java",
            "-Xmx128m",
            "-cp",
            java_classpath("pulsar-interop"),
            "io.sparkdlq.interop.PulsarRetry",
            pulsar.service_url,
            topic,
            "java-consumer",
            retry,
            dlq,
            "2",
            str(letters),
            "120",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_java_client_and_the_engine_read_each_others_retry_letters(
    pulsar: PulsarBroker,
    pulsar_topics: Callable[..., dict[str, str]],
    make_pulsar_topic: Callable[..., str],
    pulsar_engine: Callable[..., Any],
) -> None:
    names = pulsar_topics()
    java_source = make_pulsar_topic("java-src")
    pulsar.produce(names["source"], [Message("e", b"fail:e")])
    running = pulsar_engine(
        names, retry={"maxRedeliverCount": 2, "backoff": {"type": "fixed", "delay": "1s"}}
    )
    (engine_dead,) = pulsar.wait_for(names["dlq"], 1, timeout=180)
    (source_message,) = pulsar.read_all(names["source"])

    # The Java client: our two retry letters of "fail:e" from the retry topic, and its own
    # reconsumeLater of "fail:j", read from its source topic, into the same retry topic.
    pulsar.produce(java_source, [Message("j", b"fail:j")])
    seen = run_java_consumer(pulsar, java_source, names["retry"], names["dlq"], letters=2)
    ours = [line for line in seen if line["value"] == "fail:e"]
    assert sorted(line["properties"]["RECONSUMETIMES"] for line in ours) == ["1", "2"]
    ledger, entry, partition, _ = source_message.message_id.split(":")
    for line in ours:
        properties = line["properties"]
        assert properties["RECONSUMETIMES"] == properties["dlq.attempt"]
        assert properties["REAL_TOPIC"] == full_topic(names["source"])
        assert properties["ORIGIN_MESSAGE_ID"] == f"{ledger}:{entry}:{partition}"
        assert line["receivedAt"] >= int(properties["dlq.deliver.at"])
    assert next(line["action"] for line in seen if line["value"] == "fail:j") == "reconsumeLater"

    # The engine: the Java client's letter counts as attempt 1, so two more failures make 3,
    # past maxRedeliverCount 2; the origin is the Java client's REAL_TOPIC and message id.
    dead = pulsar.wait_for(names["dlq"], 2, timeout=120)
    running.stop()
    (java_dead,) = [m for m in dead if m.value == b"fail:j"]
    properties = java_dead.properties
    assert properties["dlq.reason"] == "exhausted"
    assert properties["dlq.attempt"] == properties["RECONSUMETIMES"] == "3"
    assert properties["REAL_TOPIC"] == properties["dlq.original.topic"] == full_topic(java_source)
    (java_message,) = pulsar.read_all(java_source)
    ledger, entry, partition, _ = java_message.message_id.split(":")
    assert properties["ORIGIN_MESSAGE_ID"] == f"{ledger}:{entry}:{partition}"
    java_letters = [
        m
        for m in pulsar.read_all(names["retry"])
        if m.value == b"fail:j" and "dlq.attempt" not in m.properties
    ]
    assert [m.properties["RECONSUMETIMES"] for m in java_letters] == ["1"]
    assert engine_dead.properties["dlq.attempt"] == "3"
