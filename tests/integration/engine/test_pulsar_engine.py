"""The engine on a real Pulsar broker (``spec.broker.type: pulsar``): the same routing as on
Kafka, the Java client's properties beside ``dlq.*``, retries never early, attempts counted
from the Java client's ``RECONSUMETIMES``, and a dead-letter topic that refuses writes fails
the batch without losing anything. The session's broker is secured (token and TLS
authentication, authorization, TLS listeners); the routing run is a limited role's over TLS."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.exits import EXIT_FAILED
from dlq_engine.job import pulsar_topics as pulsar_topics_check
from dlq_engine.model import parse_policy
from spark_dlq_devtools.pulsar import Message, PulsarBroker, full_topic
from spark_dlq_operator.kubectl_dlq import cli as kubectl_dlq
from tests.helpers import pulsar_engine_policy


def limited_client(pulsar: PulsarBroker, names: dict[str, str], role: str, *, dlq: bool = True) -> Path:
    """A ``broker.secretRef`` folder for ``role`` over TLS (its token, the broker's CA), the role
    granted what the engine needs on the topics ``names`` (produce on the dead-letter topic only
    with ``dlq``)."""
    pulsar.grant(names["source"], role, ["consume"])
    pulsar.grant(names["retry"], role, ["consume", "produce"])
    pulsar.grant(names["output"], role, ["produce"])
    if dlq:
        pulsar.grant(names["dlq"], role, ["produce"])
    return pulsar.client_dir(role, {"token": pulsar.token(role), "ca.crt": pulsar.ca})


def test_every_outcome_reaches_its_topic_with_the_java_clients_properties(
    spark: Any,
    pulsar: PulsarBroker,
    pulsar_topics: Callable[..., dict[str, str]],
    pulsar_engine: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Over TLS, as a role that may do only what the engine needs (consume the source and the
    retry topic, produce to the retry, dead-letter and output topics): the preflight lets it run,
    and every message is routed."""
    names = pulsar_topics(partitions=2)
    client_dir = limited_client(pulsar, names, "engine-outcomes")
    values = ["ok:a", "ack", "flaky:1", "fail:x", "terminate:t", "nonretry:k", "dict:d"]
    pulsar.produce(
        names["source"], [Message(f"k{i}", v.encode(), {"trace": "t1"}) for i, v in enumerate(values)]
    )
    # Retries with exponential backoff, each checked against its due time by the processor.
    pulsar.produce(names["source"], [Message(f"t{i}", b"timed:2") for i in range(10)])
    # A retry letter as the Java client's reconsumeLater writes it (no dlq.* at all): two
    # failures so far, so one more makes three, past maxRedeliverCount 2.
    java_letter = {
        "RECONSUMETIMES": "2",
        "REAL_TOPIC": full_topic(names["source"]) + "-partition-1",
        "ORIGIN_MESSAGE_ID": "7:3:1",
        "ORIGIN_MESSAGE_IDY_TIME": "7:3:1",
        "DELAY_TIME": "100",
    }
    pulsar.produce(names["retry"], [Message("java", b"fail:java", java_letter)])
    policy = parse_policy(pulsar_engine_policy(names, pulsar, tls=True))
    pulsar_topics_check.check_topics(spark, policy, str(client_dir))  # lets it run
    running = pulsar_engine(
        names,
        client_dir=client_dir,
        tls=True,
        retry={
            "maxRedeliverCount": 2,
            "nonRetryableErrors": ["LookupError"],
            "backoff": {"type": "exponential", "delay": "1s", "multiplier": 2.0, "jitter": 0.2},
        },
    )
    output = pulsar.wait_for(names["output"], 13, timeout=180)
    dead = pulsar.wait_for(names["dlq"], 4, timeout=60)
    retries = pulsar.wait_for(names["retry"], 1 + 1 + 2 + 20, timeout=30)
    running.stop()

    plain = sorted(m.value for m in output if not m.value.startswith(b'{"attempt"'))
    assert plain == sorted([b"A", b"recovered after 1", b'{"value":"d","attempt":0}'])
    timed = [json.loads(m.value) for m in output if m.value.startswith(b'{"attempt"')]
    assert len(timed) == 10
    assert all(r["attempt"] == 2 and r["ran_at"] >= r["due"] > 0 for r in timed)

    by_reason = {(m.properties["dlq.reason"], m.key): m for m in dead}
    assert {reason for reason, _ in by_reason} == {"exhausted", "terminated", "non-retryable"}
    exhausted = by_reason[("exhausted", "k3")]
    assert exhausted.value == b"fail:x"
    props = exhausted.properties
    assert props["dlq.attempt"] == props["RECONSUMETIMES"] == "3"
    assert props["dlq.original.topic"] == names["source"]
    assert props["trace"] == "t1"
    assert props["REAL_TOPIC"] == f"{full_topic(names['source'])}-partition-{props['dlq.original.partition']}"
    source_ids = {m.value: m.message_id for m in pulsar.read_all(names["source"])}
    ledger, entry, partition, _batch = source_ids[b"fail:x"].split(":")
    assert props["ORIGIN_MESSAGE_ID"] == props["ORIGIN_MESSAGE_IDY_TIME"] == f"{ledger}:{entry}:{partition}"
    assert exhausted.message_id.endswith(":-1"), "dead letters are written unbatched"

    # kubectl dlq reads the engine's dead letters on Pulsar (the rest: test_kubectl_dlq_pulsar.py).
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(pulsar_engine_policy(names, pulsar)))
    assert kubectl_dlq.main(["stats", "-f", str(policy), "-o", "json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["byReason"] == dict(Counter(m.properties["dlq.reason"] for m in dead))
    assert kubectl_dlq.main(["ls", "-f", str(policy), "--key", "k3", "-o", "json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)["items"]
    assert (listed["reason"], listed["attempt"], listed["errorClass"]) == (
        "exhausted",
        3,
        props["dlq.error.class"],
    )
    original = f"{names['source']}/{props['dlq.original.partition']}/{props['dlq.original.offset']}"
    assert listed["original"] == original
    assert kubectl_dlq.main(["show", "-f", str(policy), f"{listed['partition']}/{listed['offset']}"]) == 0
    assert "Value (text, 6 bytes):" in capsys.readouterr().out.splitlines()

    # The Java client's letter: counted from RECONSUMETIMES, its origin kept.
    java = by_reason[("exhausted", "java")]
    assert java.properties["dlq.attempt"] == java.properties["RECONSUMETIMES"] == "3"
    assert java.properties["REAL_TOPIC"] == java_letter["REAL_TOPIC"]
    assert java.properties["ORIGIN_MESSAGE_ID"] == "7:3:1"

    # Retry letters: the Java client's properties, due after the backoff.
    ours = [m for m in retries if "dlq.attempt" in m.properties and m.key != "java"]
    for letter in ours:
        p = letter.properties
        assert p["RECONSUMETIMES"] == p["dlq.attempt"]
        assert int(p["DELAY_TIME"]) == int(p["dlq.deliver.at"]) - int(p["dlq.failed.at"])
        assert p["RETRY_TOPIC"] == names["retry"]
        assert letter.message_id.endswith(":-1"), "retry letters are written unbatched"
    timed_letters = [m for m in ours if m.key.startswith("t")]
    assert sorted(int(m.properties["dlq.attempt"]) for m in timed_letters) == [1] * 10 + [2] * 10
    for letter in timed_letters:
        expected = 1000 * 2 ** (int(letter.properties["dlq.attempt"]) - 1)
        assert 0.8 * expected <= int(letter.properties["DELAY_TIME"]) <= 1.2 * expected + 1


def test_a_dead_letter_topic_that_refuses_writes_fails_the_batch_and_loses_nothing(
    pulsar: PulsarBroker,
    pulsar_topics: Callable[..., dict[str, str]],
    pulsar_engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    names = pulsar_topics()
    checkpoint = tmp_path / "cp"
    pulsar.produce(names["source"], [Message("a", b"ok:1")])
    first = pulsar_engine(names, checkpoint=checkpoint)
    pulsar.wait_for(names["output"], 1, timeout=180)

    # The dead-letter topic goes away (auto-creation is off): the batch with dead letters fails.
    pulsar.delete_topic(names["dlq"])
    pulsar.produce(names["source"], [Message(f"d{i}", f"terminate:{i}".encode()) for i in range(5)])
    pulsar.produce(names["source"], [Message("b", b"ok:2")])
    assert first.join(180) == EXIT_FAILED, first.describe()
    assert pulsar.backlog(names["source"], "tests") >= 6
    assert len(pulsar.read_all(names["output"])) == 1, "the failed batch committed its output"

    pulsar.create_topic(names["dlq"])
    second = pulsar_engine(names, checkpoint=checkpoint)
    dead = pulsar.wait_for(names["dlq"], 5, timeout=180)
    output = pulsar.wait_for(names["output"], 2, timeout=60)
    second.stop()
    assert sorted(m.value for m in dead) == sorted(f"terminate:{i}".encode() for i in range(5))
    assert sorted(m.value for m in output) == [b"1", b"2"]
