"""Crashes on Pulsar: the engine (``dlq-engine run -f``, its own process group) is killed with
SIGKILL three times while it drains a backlog and more messages arrive, and started again from
its checkpoint each time; afterwards every message is where it belongs (output, or the
dead-letter topic with the right reason), none missing, each key's messages in the output in
their source order (``source.ordering: key``, as ``test_ordering.py`` proves it on Kafka), and
the duplicates are bounded by the batches in flight at the kills, not the backlog: every
micro-batch reads at most ``maxOffsetsPerTrigger`` entries, the first of each run included.
Most messages carry one of a few keys (ordered behind their key's retries); those of every
other hundred carry none (routed unordered, their retries held by the delay stage).
The three killed runs are started with ``--create-topics``, as on a laptop: the first creates
the retry and dead-letter topics partitioned like the source, the others find them and go on;
every run reaches the broker over TLS with a token (``--pulsar-client-dir``). The run after the
last kill, which drains the rest, is the test session's Spark on the same checkpoint (all a
restart needs), not a fourth driver. The processor and the audit are the Kafka crash run's
(``spark_dlq_devtools.chaos``)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from spark_dlq_devtools.chaos import Audit, audit, kind_of, policy_document, start_engine
from spark_dlq_devtools.processes import QUICK_JIT
from spark_dlq_devtools.pulsar import SUPERUSER, Message, PulsarBroker
from tests.conftest import unique

BACKLOG = 1_900
#: The backlog, and a few more messages that arrive while the engine drains it.
N = BACKLOG + 100
KILLS = 3
#: Entries per micro-batch; the producer here does not batch, so one entry is one message.
LIMIT = 100
CREATE = "--create-topics"
#: The keys of the keyed messages (a flaky or failing message holds its key's later ones). With
#: 28 the retried messages (``kind_of``) spread so that a key waits behind at most two retries in
#: turn (three keys wait behind two flaky messages, two behind a message retried twice): the
#: drain's retry rounds run side by side, not four or five after one another on one key.
KEYS = 28


def key_of(number: int) -> str | None:
    """None for the numbers of odd hundreds (100-199, 300-399, ...), else one of ``KEYS`` keys."""
    return None if (number // 100) % 2 else f"k{number % KEYS}"


def message(number: int) -> Message:
    return Message(key_of(number), str(number).encode())


def _produce_steadily(pulsar: PulsarBroker, topic: str, start: int, n: int, rate: float) -> threading.Thread:
    """``start .. n-1`` in chunks of 100 at ``rate`` messages per second, on a thread."""

    def run() -> None:
        for first in range(start, n, 100):
            pulsar.produce(topic, [message(i) for i in range(first, min(first + 100, n))])
            time.sleep(100 / rate)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def published(pulsar: PulsarBroker, topic: str, partitions: int) -> int:
    """Messages written to ``topic`` so far, the broker's count (its partitions' ``msgInCounter``):
    a fact to wait on that costs no read of the topic beside the engine on two cores."""
    return sum(int(pulsar.stats(f"{topic}-partition-{i}")["msgInCounter"]) for i in range(partitions))


def _audit_now(pulsar: PulsarBroker, names: dict[str, str]) -> Audit:
    output = [(m.value, dict(m.properties)) for m in pulsar.read_all(names["output"])]
    dead = [(m.value, dict(m.properties)) for m in pulsar.read_all(names["dlq"])]
    return audit(N, output, dead)


def key_order(pulsar: PulsarBroker, topic: str) -> dict[str, list[int]]:
    """Per key, the numbers in the output's order, each at its first occurrence (a replayed
    batch writes some again). A key's messages are in one partition, read in its order."""
    order: dict[str, list[int]] = {}
    for found in pulsar.read_all(topic):
        if found.key is not None:
            number = int(found.value.split(b"|")[0])
            if number not in order.setdefault(found.key, []):
                order[found.key].append(number)
    return order


def test_three_kills_during_a_backlog_lose_nothing_keep_key_order_and_replay_only_batches_in_flight(
    pulsar: PulsarBroker,
    make_pulsar_topic: Callable[..., str],
    pulsar_engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    names = {
        "source": make_pulsar_topic("src", partitions=2),
        "output": make_pulsar_topic("out", partitions=2),
        "retry": unique("retry"),  # made by the first run's --create-topics
        "dlq": unique("dlq"),
    }
    document = policy_document(names, "")
    # Over TLS with a token (the superuser's: --create-topics makes topics), as a secured
    # cluster is reached from a laptop: --pulsar-client-dir is a broker.secretRef's files.
    document["spec"]["broker"] = {
        "type": "pulsar",
        "serviceUrl": pulsar.service_url_tls,
        "adminUrl": pulsar.admin_url_tls,
    }
    client = pulsar.client_dir("crash", {"token": pulsar.token(SUPERUSER), "ca.crt": pulsar.ca})
    create = (CREATE, "--pulsar-client-dir", str(client))
    document["spec"]["source"].update(maxOffsetsPerTrigger=LIMIT, ordering="key")
    # A key waits behind each of its retries in turn: a short delay keeps the drain quick.
    document["spec"]["retry"]["backoff"]["delay"] = "500ms"
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(document))
    checkpoint = tmp_path / "cp"
    pulsar.produce(names["source"], [message(i) for i in range(BACKLOG)])

    def written() -> int:
        return published(pulsar, names["output"], partitions=2)

    written_at_kills: list[int] = []
    pick = random.Random(21)
    engine = start_engine(policy, checkpoint, tmp_path / "engine-0.log", *create, java_options=QUICK_JIT)
    producer: threading.Thread | None = None
    try:
        for kill in range(KILLS):
            # Killed once the run has committed a batch of its own (so the kill lands in the
            # drain, between batches or in one), while more is still to come.
            before = written()
            engine.wait_until(
                lambda before=before: written() >= before + LIMIT // 2,
                timeout=240,
                what=f"output past {before}",
            )
            if producer is None:
                producer = _produce_steadily(pulsar, names["source"], BACKLOG, N, rate=50.0)
            time.sleep(pick.uniform(0.0, 1.0))
            written_at_kills.append(written())
            engine.kill()
            if kill < KILLS - 1:
                log = tmp_path / f"engine-{kill + 1}.log"
                engine = start_engine(policy, checkpoint, log, *create, java_options=QUICK_JIT)
    finally:
        engine.stop(timeout=30)
    # The last run drains the rest without a limit (quicker): the batch the kill left
    # uncommitted is replayed with the ends it was planned with all the same.
    del document["spec"]["source"]["maxOffsetsPerTrigger"]
    last = pulsar_engine(names, checkpoint=checkpoint, client_dir=client, document=document)
    assert producer is not None
    producer.join(120)
    # The topics are read (the audit) once the output and the dead-letter topic hold as many
    # messages as were produced, each of which needs one.
    deadline = time.monotonic() + 300
    while True:
        assert last.status is None, last.describe()
        routed = written() + published(pulsar, names["dlq"], partitions=2)
        if routed >= N:
            result = _audit_now(pulsar, names)
            if not result.missing:
                break
        if time.monotonic() > deadline:
            result = _audit_now(pulsar, names)
            break
        time.sleep(0.5)
    last.stop()

    print({"written_at_kills": written_at_kills, **result.as_dict()})
    retry, dlq = (f"persistent://public/default/{names[role]}" for role in ("retry", "dlq"))
    logs = [(tmp_path / f"engine-{run}.log").read_text() for run in range(KILLS)]
    assert f"dlq-engine: created topic '{retry}' (2 partitions)" in logs[0], logs[0][-3000:]
    assert f"dlq-engine: created topic '{dlq}' (2 partitions)" in logs[0]
    for log in logs[1:]:
        assert f"dlq-engine: topic '{retry}' exists, left as it is" in log, log[-3000:]
        assert f"dlq-engine: subscription 'spark-dlq-keep' on '{dlq}' exists, left as it is" in log
    assert written_at_kills[-1] < BACKLOG, "the kills did not land in the backlog"
    assert result.missing == []
    assert result.misplaced == []
    assert result.flaky_retried == sum(1 for i in range(N) if kind_of(i) == "flaky")
    expected: dict[str, list[int]] = {}
    for i in range(N):
        key = key_of(i)
        if key is not None and kind_of(i) in ("ok", "flaky"):
            expected.setdefault(key, []).append(i)
    order = key_order(pulsar, names["output"])
    assert sorted(order) == sorted(expected)
    for key, numbers in expected.items():
        assert order[key] == numbers, key
    # A kill replays what its run had written and not committed: the source's batch and the retry
    # topic's, each at most LIMIT entries (with a Python data source the first batch of each run
    # read the whole backlog, and three kills wrote it again: 1,900 duplicates of 1,900).
    assert result.duplicates <= KILLS * 2 * LIMIT, result.duplicates
