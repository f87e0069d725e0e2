"""The README's laptop runs, as written: a bare broker from ``spark-dlq-dev kafka`` (or
``spark-dlq-dev pulsar``), the exports of ``spark-dlq-dev env``, and ``dlq-engine run -f
examples/orders-billing.yaml --create-topics`` (``orders-billing-pulsar.yaml``): no operator, so
the engine creates the retry and dead-letter topics itself, and a second run finds them and goes
on (on Pulsar, runs after kills: test_pulsar_crash.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient, ConfigResource

from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_devtools.processes import free_port
from spark_dlq_devtools.pulsar import Message
from spark_dlq_devtools.pulsar import produce as produce_pulsar
from spark_dlq_devtools.pulsar import read_all as read_pulsar
from tests.helpers import QUICK_LEASE_ENV, engine_policy, produce, read_all

BIN = Path(sys.executable).parent
EXAMPLE = REPO_ROOT / "examples" / "orders-billing.yaml"
PULSAR_EXAMPLE = REPO_ROOT / "examples" / "orders-billing-pulsar.yaml"
PROCESSORS = REPO_ROOT / "examples" / "processors"


@contextlib.contextmanager
def _dev_broker(kind: str, *options: str) -> Iterator[list[str]]:
    """``spark-dlq-dev <kind>`` as the README starts it, with the example's two team topics, until
    it says it serves: the lines it printed until then."""
    broker = subprocess.Popen(
        [str(BIN / "spark-dlq-dev"), kind, *options, "--topic", "orders:3", "--topic", "orders-billed:3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert broker.stdout is not None
        lines = []
        for line in broker.stdout:
            lines.append(line)
            if line.startswith(f"{kind}: "):
                break
        assert "topic 'orders': 3 partitions\n" in lines, "".join(lines)
        yield lines
    finally:
        broker.terminate()
        broker.wait(60)


@pytest.fixture(scope="module")
def bare_broker() -> Iterator[str]:
    """``spark-dlq-dev kafka``: its bootstrap servers."""
    port = free_port()
    with _dev_broker("kafka", "--port", str(port)) as lines:
        assert lines[-1].startswith(f"kafka: 127.0.0.1:{port}"), "".join(lines)
        yield f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def bare_pulsar() -> Iterator[tuple[str, str]]:
    """``spark-dlq-dev pulsar``: its service and admin URLs."""
    port, web_port = free_port(), free_port()
    with _dev_broker("pulsar", "--port", str(port), "--web-port", str(web_port)) as lines:
        assert lines[-1].startswith(
            f"pulsar: pulsar://127.0.0.1:{port}, admin http://127.0.0.1:{web_port}"
        ), "".join(lines)
        yield f"pulsar://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}"


def _readme_env(pythonpath: Path) -> dict[str, str]:
    """The environment after ``eval "$(spark-dlq-dev env)"`` and ``PYTHONPATH=<pythonpath>``."""
    printed = subprocess.run(
        [str(BIN / "spark-dlq-dev"), "env"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    env = dict(os.environ)
    for line in printed.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = shlex.split(value)[0]
    # A PYTHONPATH of the caller's (a worktree's own code, as the test session runs it) stays
    # behind the README's.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), os.environ.get("PYTHONPATH")) if p)
    # One run at a time on a checkpoint: its claim is read back after 0.2 s, not 2 s.
    env.update(QUICK_LEASE_ENV)
    return env


def _command(policy: Path, checkpoint: Path, *extra: str) -> list[str]:
    return [
        str(BIN / "dlq-engine"),
        "run",
        "-f",
        str(policy),
        "--master",
        "local[2]",
        "--checkpoint",
        str(checkpoint),
        *extra,
    ]


def _run(
    policy: Path, checkpoint: Path, *extra: str, pythonpath: Path = REPO_ROOT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(policy, checkpoint, *extra),
        capture_output=True,
        text=True,
        env=_readme_env(pythonpath),
        cwd=REPO_ROOT,
        timeout=300,
    )


def test_the_example_runs_on_a_bare_broker_and_creates_its_topics(bare_broker: str, tmp_path: Path) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"]["broker"]["bootstrapServers"] = bare_broker
    policy = tmp_path / "orders-billing.yaml"
    policy.write_text(yaml.safe_dump(document, sort_keys=False))
    orders = [(b"1", json.dumps({"id": 1, "amount": 10}).encode()), (b"2", b"not json")]
    orders += [(b"3", json.dumps({"id": 3, "kind": "fraud"}).encode())]
    produce(bare_broker, "orders", orders)

    done = _run(policy, tmp_path / "cp", "--create-topics", "--once", pythonpath=PROCESSORS)

    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("dlq-engine:")]
    assert said == [
        # Retry letters kept a week past the example's longest backoff (30 s), dead letters kept.
        "dlq-engine: created topic 'orders-billing-RETRY' (3 partitions, the broker's default "
        "replication factor, retention.ms=604830000)",
        "dlq-engine: created topic 'orders-billing-DLQ' (3 partitions, the broker's default "
        "replication factor, retention.ms=-1)",
        "dlq-engine: processed=3 output=1 acked=0 retried=0 dead=2 ignored=0 redelivered=0",
    ]
    admin = AdminClient({"bootstrap.servers": bare_broker})
    topics = admin.list_topics(timeout=10).topics
    assert {
        name: len(topics[name].partitions) for name in ("orders-billing-RETRY", "orders-billing-DLQ")
    } == {
        "orders-billing-RETRY": 3,
        "orders-billing-DLQ": 3,
    }
    billed = read_all(bare_broker, "orders-billed", expect=1, timeout=20)
    assert [json.loads(r.value)["id"] for r in billed] == [1]
    dead = read_all(bare_broker, "orders-billing-DLQ", expect=2, timeout=20)
    assert sorted(r.key for r in dead) == [b"2", b"3"]

    # A second run finds the topics and leaves them as they are.
    again = _run(policy, tmp_path / "cp", "--create-topics", "--once", pythonpath=PROCESSORS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "dlq-engine: topic 'orders-billing-RETRY' exists, left as it is" in again.stdout
    assert "dlq-engine: topic 'orders-billing-DLQ' exists, left as it is" in again.stdout


def test_created_topics_follow_spec_topics(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    """Partitions, replication factor and configs from ``spec.topics``, as the operator's."""
    names = {"source": make_topic("s", partitions=2), "retry": "", "dlq": "", "output": make_topic("o")}
    names["retry"], names["dlq"] = f"{names['source']}-r", f"{names['source']}-d"
    topics = {"partitions": 4, "replicationFactor": 1, "retryConfig": {"retention.ms": "3600000"}}
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(engine_policy(names, bootstrap_servers, topics=topics)))

    done = _run(policy, tmp_path / "cp", "--create-topics", "--once")

    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        f"dlq-engine: created topic {names['retry']!r} (4 partitions, replication factor 1, "
        "retention.ms=3600000)" in done.stdout
    )
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    listed = admin.list_topics(timeout=10).topics
    assert len(listed[names["retry"]].partitions) == len(listed[names["dlq"]].partitions) == 4
    resource = ConfigResource(ConfigResource.Type.TOPIC, names["retry"])
    config = admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["retention.ms"].value == "3600000"
    # A dead-letter topic is kept until someone deletes its letters (model/topics.py).
    assert (
        f"dlq-engine: created topic {names['dlq']!r} (4 partitions, replication factor 1, retention.ms=-1)"
        in (done.stdout)
    )


def test_without_a_source_nor_partitions_nothing_is_created(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    names = {"source": f"missing-{free_port()}", "retry": "", "dlq": "", "output": make_topic("o")}
    names["retry"], names["dlq"] = f"{names['source']}-r", f"{names['source']}-d"
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(engine_policy(names, bootstrap_servers)))

    done = _run(policy, tmp_path / "cp", "--create-topics")

    assert done.returncode == 1
    assert (
        f"dlq-engine: cannot create the retry and dead-letter topics: the source topic "
        f"{names['source']!r} does not exist on {bootstrap_servers} and spec.topics.partitions is 0"
    ) in done.stderr
    listed = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(timeout=10).topics
    assert names["retry"] not in listed
    assert names["dlq"] not in listed


def _order(key: str, **order: object) -> Message:
    return Message(key, json.dumps(order).encode())


def test_the_pulsar_example_runs_on_a_bare_broker_and_creates_its_topics(
    bare_pulsar: tuple[str, str], tmp_path: Path
) -> None:
    """The README's Pulsar command. A run after a kill, which finds the topics and goes on, is
    the crash run's: test_pulsar_crash.py starts every run with --create-topics."""
    service_url, admin_url = bare_pulsar
    document = yaml.safe_load(PULSAR_EXAMPLE.read_text())
    document["spec"]["broker"].update(serviceUrl=service_url, adminUrl=admin_url)
    policy = tmp_path / "orders-billing-pulsar.yaml"
    policy.write_text(yaml.safe_dump(document, sort_keys=False))
    retry, dlq = (f"persistent://public/default/orders-billing-{kind}" for kind in ("RETRY", "DLQ"))
    produce_pulsar(
        service_url,
        "orders",
        [_order("1", id=1, amount=10), Message("2", b"not json"), _order("3", id=3, kind="fraud")],
    )

    done = _run(policy, tmp_path / "cp", "--create-topics", "--once", pythonpath=PROCESSORS)

    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("dlq-engine:")]
    assert said == [
        f"dlq-engine: created topic '{retry}' (3 partitions)",
        f"dlq-engine: created topic '{dlq}' (3 partitions)",
        f"dlq-engine: created subscription 'billing' on '{retry}'",
        f"dlq-engine: created subscription 'spark-dlq-keep' on '{dlq}'",
        "dlq-engine: processed=3 output=1 acked=0 retried=0 dead=2 ignored=0 redelivered=0",
    ]
    billed = {json.loads(m.value)["id"] for m in read_pulsar(service_url, "orders-billed")}
    assert billed == {1}
    dead = read_pulsar(service_url, dlq)
    assert sorted({m.key for m in dead}) == ["2", "3"]
