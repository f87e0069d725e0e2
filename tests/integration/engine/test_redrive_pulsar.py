"""``dlq-engine redrive`` of a Pulsar policy, on the session's (secured) Pulsar broker and Spark.

The dead letters are those of ``test_redrive`` (the engine's headers, as properties), written to a
partitioned dead-letter topic: the same selection, snapshot, dry run, loop guard, destinations and
resume after a kill as on Kafka, read by the connector's non-durable readers and written by its
sink, the retry topic's letters with Pulsar's delayed delivery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.job.redrive import Progress, Redrive
from dlq_engine.model.policy import DeadLetterPolicy, parse_policy
from dlq_engine.routing import headers as h
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_devtools.pulsar import Message, PulsarBroker, full_topic, quiet_logger
from spark_dlq_devtools.spark import spark_submit
from tests.helpers import pulsar_engine_policy
from tests.integration.engine.test_redrive import (
    BASE_MS,
    cli_env,
    dead_letter,
    redrive_of,
    standard_set,
)


def write(pulsar: PulsarBroker, topic: str, letters: list[dict[str, Any]]) -> None:
    """Dead letters as the engine writes them to Pulsar: the key the partition key, the headers
    properties."""
    pulsar.produce(
        topic,
        [
            Message(
                letter["key"].decode(),
                letter["value"],
                {name: value.decode() for name, value in letter["headers"]},
            )
            for letter in letters
        ],
    )


@pytest.fixture
def names(make_pulsar_topic: Callable[..., str]) -> dict[str, str]:
    return {
        "source": make_pulsar_topic("src"),
        "retry": make_pulsar_topic("retry", partitions=2),
        "dlq": make_pulsar_topic("dlq", partitions=2),
        "output": make_pulsar_topic("out"),
    }


@pytest.fixture
def policy(names: dict[str, str], pulsar: PulsarBroker) -> DeadLetterPolicy:
    return parse_policy(pulsar_engine_policy(names, pulsar))


def test_a_dry_run_writes_nothing_and_a_redrive_of_its_snapshot_to_source_is_routed_again(
    spark: Any,
    pulsar: PulsarBroker,
    policy: DeadLetterPolicy,
    names: dict[str, str],
    pulsar_engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """The dry run counts and writes nothing; the redrive records its snapshot (then is
    suspended, as ``spec.suspend`` does), dead letters arrive meanwhile, and resumed it sends only
    the snapshot's selected letters, attempts reset, to the retry topic; the policy's engine
    routes them to the output."""
    write(pulsar, names["dlq"], standard_set(lambda i: f"ok:order-{i}".encode()))
    redrive = redrive_of(selection={"reasons": ["exhausted"]})
    dry = Redrive(
        spark, policy, redrive_of(selection={"reasons": ["exhausted"]}, dryRun=True), checkpoint=None
    )
    found = dry.dry_run()
    assert (found["considered"], found["matched"], found["skippedMaxRedrives"]) == (12, 6, 1)
    assert (found["byReason"], found["expired"]) == ({"exhausted": 6}, 0)
    assert len(found["samples"]) == 5
    assert {sample["partition"] for sample in found["samples"]} <= {0, 1}
    assert pulsar.read_all(names["retry"], timeout=1) == []  # a dry run writes nothing

    suspended = Redrive(spark, policy, redrive, checkpoint=tmp_path)
    suspended.stop()
    assert suspended.run().state == "Cancelled"
    snapshot = Progress.load(tmp_path / "progress.json")
    assert snapshot is not None
    assert (snapshot.broker, snapshot.counts.considered, set(snapshot.snapshot)) == ("pulsar", 0, {0, 1})
    # Arrived after the snapshot: not this redrive's.
    write(
        pulsar, names["dlq"], [dead_letter(i, reason="exhausted", error_class="ValueError") for i in (20, 21)]
    )

    progress = Redrive(spark, policy, redrive, checkpoint=tmp_path).run()
    assert progress.state == "Succeeded"
    c = progress.counts
    assert (c.considered, c.matched, c.redriven, c.skipped_max_redrives, c.possible_duplicates) == (
        12,
        6,
        6,
        1,
        0,
    )
    summary = progress.summary()
    assert "toConsider" not in summary  # Pulsar's message ids do not count what lies between
    assert all(summary["partitions"][p]["next"] == summary["partitions"][p]["end"] for p in ("0", "1"))
    sent = pulsar.wait_for(names["retry"], 6, timeout=60)
    assert sorted(m.key or "" for m in sent) == [f"k{i}" for i in range(6)]
    for message in sent:
        assert message.properties[h.ATTEMPT] == "0"
        assert message.properties[h.REDRIVE_COUNT] == "1"
        assert message.properties[h.REDRIVE_NAME] == "tests/fix-1"
        assert message.properties[h.ORIGINAL_TOPIC] == "orders"
        assert message.properties[h.FIRST_FAILURE_AT] == str(BASE_MS - 30_000)
        assert h.ERROR_CLASS not in message.properties  # the old failure is not carried

    running = pulsar_engine(names)
    routed = pulsar.wait_for(names["output"], 6, timeout=120)
    running.stop()
    assert sorted(m.value for m in routed) == [f"ORDER-{i}".encode() for i in range(6)]


class _Later:
    """The redrive's clock ``ahead`` seconds in the future: its letters are due then."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead

    def time(self) -> float:
        return time.time() + self.ahead

    def monotonic(self) -> float:
        return time.monotonic()


def test_to_retry_with_delayed_delivery_never_early_and_to_a_topic_as_it_was(
    spark: Any,
    pulsar: PulsarBroker,
    policy: DeadLetterPolicy,
    names: dict[str, str],
    make_pulsar_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """A redrive to ``retry`` keeps the attempts and is sent with Pulsar's delayed delivery at its
    ``dlq.deliver.at``: a Shared subscription (as the Java client's retry consumer reads) gets it
    no earlier. A redrive to a ``topic`` writes the letters as they were, with the redrive's
    headers."""
    import pulsar as client_module

    write(pulsar, names["dlq"], standard_set())
    parking = make_pulsar_topic("parking")
    Redrive(
        spark,
        policy,
        redrive_of(selection={"reasons": ["terminated"]}, destination={"type": "topic", "topic": parking}),
        checkpoint=tmp_path / "a",
    ).run()
    parked = pulsar.wait_for(parking, 3, timeout=60)
    assert sorted(m.key or "" for m in parked) == ["k6", "k7", "k8"]
    assert all(h.ATTEMPT not in m.properties and m.properties[h.REDRIVE_COUNT] == "1" for m in parked)

    client = client_module.Client(pulsar.service_url, logger=quiet_logger())
    try:
        consumer = client.subscribe(
            full_topic(names["retry"]),
            "java-retry-consumer",
            consumer_type=client_module.ConsumerType.Shared,
            initial_position=client_module.InitialPosition.Earliest,
        )
        Redrive(
            spark,
            policy,
            redrive_of(selection={"keys": ["k2"]}, destination={"type": "retry"}),
            checkpoint=tmp_path / "b",
            clock=_Later(4.0),
        ).run()
        written = time.time()
        message = consumer.receive(timeout_millis=30_000)
        received = time.time()
    finally:
        client.close()
    properties = message.properties()
    assert (message.partition_key(), properties[h.ATTEMPT]) == ("k2", "3")  # where it left off
    due = int(properties[h.DELIVER_AT]) / 1000
    assert due > written  # due after the write: delivered at once, it would come early
    assert received >= due, (received, due)


def test_a_killed_redrive_resumes_losing_nothing_over_tls_with_a_limited_role(
    pulsar: PulsarBroker, names: dict[str, str], tmp_path: Path
) -> None:
    """SIGKILL of ``dlq-engine redrive`` mid-way, then the same command again, as a role that may
    only read the dead-letter topic and write the policy's topics, over TLS with a token: every
    selected dead letter is sent, duplicates come only from the chunk in flight and are counted.
    The second run is a driver as the spark-operator starts one (``spark-submit`` of the
    application file, the JVM the parent of Python): it exits once done, or its redrive would
    stay Running (the Pulsar client's threads kept such a driver's JVM alive)."""
    role = "redrive-resume"
    pulsar.grant(names["source"], role, ["consume"])
    pulsar.grant(names["dlq"], role, ["consume", "produce"])
    for topic in (names["retry"], names["output"]):
        pulsar.grant(topic, role, ["produce"])
    cert, key = pulsar.client_cert(role)
    client_dir = pulsar.client_dir(
        role, {"token": pulsar.token(role), "ca.crt": pulsar.ca, "tls.crt": cert, "tls.key": key}
    )
    write(
        pulsar,
        names["dlq"],
        [dead_letter(i, reason="exhausted", error_class="ValueError") for i in range(60)],
    )
    policy_file, redrive_file = tmp_path / "policy.yaml", tmp_path / "redrive.yaml"
    policy_file.write_text(yaml.safe_dump(pulsar_engine_policy(names, pulsar, tls=True)))
    redrive_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "sparkdlq.io/v1alpha1",
                "kind": "DeadLetterRedrive",
                "metadata": {"name": "fix-1", "namespace": "tests"},
                "spec": {"policyRef": {"name": "test-policy"}, "ratePerSecond": 20},
            }
        )
    )
    arguments = [
        "redrive",
        "-f",
        str(redrive_file),
        "--policy",
        str(policy_file),
        "--master",
        "local[1]",
        "--checkpoint",
        str(tmp_path / "cp"),
        "--status-file",
        str(tmp_path / "status.json"),
        "--pulsar-client-dir",
        str(client_dir),
    ]
    first = subprocess.Popen(
        [sys.executable, "-m", "dlq_engine.cli", *arguments],
        env=cli_env(),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    progress_file = tmp_path / "cp" / "progress.json"
    progress = None
    while time.monotonic() < deadline and first.poll() is None:
        progress = Progress.load(progress_file) if progress_file.exists() else None
        if progress is not None and progress.counts.redriven >= 20:
            break
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    _, err = first.communicate(timeout=30)
    assert progress is not None, err.decode()[-3000:]
    assert 20 <= progress.counts.redriven < 60, err.decode()[-3000:]
    assert not (tmp_path / "status.json").exists()

    env = cli_env()
    jars = env.pop("PYSPARK_SUBMIT_ARGS").split()[1]
    out, err = tmp_path / "driver.out", tmp_path / "driver.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        driver = subprocess.Popen(
            [
                str(spark_submit()),
                "--master",
                "local[1]",
                "--jars",
                jars,
                str(REPO_ROOT / "spark_image" / "dlq_engine_main.py"),
                *arguments,
            ],
            env=env,
            start_new_session=True,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and driver.poll() is None:
            if (tmp_path / "status.json").exists():
                break
            time.sleep(0.2)
        # The status is written before the session stops: a few seconds more, then the JVM ends.
        code = driver.wait(timeout=60)
    except subprocess.TimeoutExpired:
        dump = subprocess.run(["jstack", str(driver.pid)], capture_output=True, text=True, check=False)
        alive = [
            line.split('"')[1]
            for line in dump.stdout.splitlines()
            if line.startswith('"') and " prio=" in line and " daemon " not in line  # Java threads
        ]
        pytest.fail(f"the driver outlived its redrive; its threads that are no daemons: {alive}")
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert code == 0, err.read_text()[-3000:]
    status = json.loads((tmp_path / "status.json").read_text())
    assert (status["state"], status["matched"], status["redriven"], status["expired"]) == (
        "Succeeded",
        60,
        60,
        0,
    )
    assert sorted(status["partitions"]) == ["0", "1"]
    sent = pulsar.wait_for(names["retry"], 60, timeout=60)
    keys = [m.key for m in sent]
    assert set(keys) == {f"k{i}" for i in range(60)}
    assert len(keys) - 60 <= status["possibleDuplicates"]
    assert (
        f"dlq-engine: redrive tests/fix-1 succeeded: matched=60 redriven=60 to {names['retry']!r}"
        in out.read_text()
    )
