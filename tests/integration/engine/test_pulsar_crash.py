"""A crash on Pulsar: the engine (``dlq-engine run -f``, its own process group) is killed with
SIGKILL while messages flow, and started again from its checkpoint; afterwards every message is
where it belongs (output, or the dead-letter topic with the right reason), none missing.
The processor and the audit are the Kafka crash run's (``spark_dlq_devtools.chaos``)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from spark_dlq_devtools.chaos import Audit, audit, kind_of, policy_document, start_engine
from spark_dlq_devtools.pulsar import Message, PulsarBroker

N = 3_000
FIRST = 300


def _produce_steadily(pulsar: PulsarBroker, topic: str, start: int, n: int, rate: float) -> threading.Thread:
    """``start .. n-1`` in chunks of 100 at ``rate`` messages per second, on a thread."""

    def run() -> None:
        for first in range(start, n, 100):
            pulsar.produce(
                topic, [Message(str(i), str(i).encode()) for i in range(first, min(first + 100, n))]
            )
            time.sleep(100 / rate)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _audit_now(pulsar: PulsarBroker, names: dict[str, str]) -> Audit:
    output = [(m.value, dict(m.properties)) for m in pulsar.read_all(names["output"])]
    dead = [(m.value, dict(m.properties)) for m in pulsar.read_all(names["dlq"])]
    return audit(N, output, dead)


def test_nothing_is_lost_when_the_engine_is_killed(
    pulsar: PulsarBroker, pulsar_topics: Callable[..., dict[str, str]], tmp_path: Path
) -> None:
    names = pulsar_topics(partitions=2)
    document = policy_document(names, "")
    document["spec"]["broker"] = {
        "type": "pulsar",
        "serviceUrl": pulsar.service_url,
        "adminUrl": pulsar.admin_url,
    }
    document["spec"]["source"]["maxOffsetsPerTrigger"] = 300
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(document))
    checkpoint = tmp_path / "cp"

    # A first run's first batch reads all there is (maxOffsetsPerTrigger bounds the later ones):
    # the rest arrives once the engine is running, so the kill lands mid-stream.
    pulsar.produce(names["source"], [Message(str(i), str(i).encode()) for i in range(FIRST)])
    engine = start_engine(policy, checkpoint, tmp_path / "engine-1.log")
    try:
        engine.wait_until(lambda: len(pulsar.read_all(names["output"])) > 0, timeout=240, what="output")
        producer = _produce_steadily(pulsar, names["source"], FIRST, N, rate=300.0)
        engine.wait_until(lambda: len(pulsar.read_all(names["output"])) > N // 3, timeout=240, what="output")
        time.sleep(random.Random(21).uniform(0.0, 1.0))
        written_at_kill = len(pulsar.read_all(names["output"]))
        engine.kill()
        engine = start_engine(policy, checkpoint, tmp_path / "engine-2.log")
        producer.join(120)
        deadline = time.monotonic() + 300
        result = _audit_now(pulsar, names)
        while result.missing and time.monotonic() < deadline:
            assert engine.alive(), engine.tail()
            time.sleep(2)
            result = _audit_now(pulsar, names)
    finally:
        engine.stop(timeout=30)

    print({"written_at_kill": written_at_kill, **result.as_dict()})
    assert 0 < written_at_kill < N
    # The killed batch and at most the one before it are read again (maxOffsetsPerTrigger 300).
    assert result.duplicates <= 2 * 300 + 100
    assert result.missing == []
    assert result.misplaced == []
    assert result.flaky_retried == sum(1 for i in range(N) if kind_of(i) == "flaky")
