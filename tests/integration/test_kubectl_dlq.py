"""``kubectl dlq`` against the real broker (and, for ``--policy``, the real apiserver): dead letters
with the headers the engine writes, read back by the command as a user runs it: its ``main`` in
this process with the arguments, environment and standard streams it would have (``dlq``), and
where the process itself matters (the entry point, a terminal, kubectl's completion) in a process
of its own (``python -m spark_dlq_operator.kubectl_dlq``, what the ``kubectl-dlq`` entry point
runs)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from dlq_engine.model.reasons import DEAD_LETTER_REASONS
from dlq_engine.routing import headers as h
from dlq_engine.routing.headers import failure_headers
from spark_dlq_devtools.paths import REPO_ROOT, kubernetes_bin
from spark_dlq_devtools.processes import free_port
from spark_dlq_operator.kubectl_dlq import cli
from tests.conftest import unique
from tests.policy_builder import DELETE, policy_document

MINUTE = 60_000
#: The dead letters every test reads: (reason, error class, message), one after another.
KINDS = [
    ("exhausted", "ValueError", "amount must be positive"),
    ("terminated", "billing.errors.FraudError", "flagged by rules: card country differs from address " * 3),
    ("exhausted", "TimeoutError", "payment service timed out"),
    ("non-retryable", "KeyError", "'customer'"),
]
COUNT = 12
#: The value of order-5: not text.
BINARY = b"\x00\xff\x10binary\x01"
TRACE = (
    'Traceback (most recent call last):\n  File "billing/handlers.py", line 12, in process\nValueError: no'
)


def dlq(
    *args: str,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``kubectl dlq ARGS`` with ``env`` added to this environment and ``COLUMNS`` unset: its
    ``main`` in this process (a process of its own costs half a second of start-up per call), or
    with ``process`` as the entry point runs it; never a traceback."""
    if process:
        environ = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
        environ["PYTHONPATH"] = os.pathsep.join(
            str(path)
            for path in (REPO_ROOT / "spark_image", REPO_ROOT / "operator", REPO_ROOT / "devtools", REPO_ROOT)
        )
        environ.update(env or {})
        done = subprocess.run(
            [sys.executable, "-m", "spark_dlq_operator.kubectl_dlq", *args],
            capture_output=True,
            text=True,
            env=environ,
            input=input,
            timeout=timeout,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done
    out, err = io.StringIO(), io.StringIO()
    saved, stdin = dict(os.environ), sys.stdin
    os.environ.pop("COLUMNS", None)
    os.environ.update(env or {})
    try:
        sys.stdin = io.StringIO(input or "")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli.main(list(args))
            except SystemExit as exit:  # argparse's refusals and --help
                status = exit.code if isinstance(exit.code, int) else 1
    finally:
        sys.stdin = stdin
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["kubectl", "dlq", *args], status, out.getvalue(), err.getvalue())


def _one_error_line(done: subprocess.CompletedProcess[str], status: int, starts: str) -> str:
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(starts), done.stderr
    return done.stderr


def write_policy(path: Path, bootstrap: str, **overrides: Any) -> Path:
    document = policy_document({"spec.broker.bootstrapServers": bootstrap, **overrides})
    path.write_text(yaml.safe_dump(document))
    return path


def produce_letter(
    producer: Producer,
    topic: str,
    *,
    partition: int,
    key: bytes | None,
    value: bytes | None,
    failed_at: int,
    reason: str,
    error_class: str,
    message: str,
    timestamp: int | None = None,
) -> None:
    """One dead letter as the engine writes it: the ``dlq.*`` headers of a failed message, sent
    just after its failure time (the record's timestamp follows ``dlq.failed.at``)."""
    headers = failure_headers(
        origin={
            h.ORIGINAL_TOPIC: "orders",
            h.ORIGINAL_PARTITION: str(partition),
            h.ORIGINAL_OFFSET: str(100 + partition),
            h.FIRST_FAILURE_AT: str(failed_at - MINUTE),
        },
        attempt=4 if reason == "exhausted" else 1,
        error_class=error_class,
        error_message=message,
        stacktrace=TRACE,
        policy="payments/orders-billing",
        subscription="billing",
        failed_at=failed_at,
        reason=reason,
        static={"team": "payments"},
    )
    producer.produce(
        topic,
        key=key,
        value=value,
        headers=headers,
        partition=partition,
        timestamp=timestamp if timestamp is not None else failed_at + 50,
    )


@dataclass(frozen=True)
class DeadLetters:
    topic: str
    policy: Path
    bootstrap: str
    #: failed_at of order-i is base + i * 30 minutes; the last is 30 minutes ago.
    base: int


@pytest.fixture
def letters(bootstrap_servers: str, make_topic: Callable[..., str], tmp_path: Path) -> DeadLetters:
    """COUNT dead letters over the last six hours on three partitions: order-i failed at
    ``base + i * 30min`` with KINDS[i % 4], on partition i % 3."""
    topic = make_topic("orders-billing-DLQ", partitions=3)
    now = int(time.time() * 1000)
    base = now - COUNT * 30 * MINUTE
    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all"})
    for i in range(COUNT):
        reason, error_class, message = KINDS[i % 4]
        produce_letter(
            producer,
            topic,
            partition=i % 3,
            key=f"order-{i}".encode(),
            value=BINARY if i == 5 else json.dumps({"order": i, "amount": -i}).encode(),
            failed_at=base + i * 30 * MINUTE,
            reason=reason,
            error_class=error_class,
            message=message,
        )
    assert producer.flush(30) == 0
    policy = write_policy(tmp_path / "policy.yaml", bootstrap_servers, **{"spec.deadLetter.topic": topic})
    return DeadLetters(topic, policy, bootstrap_servers, base)


def keys(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [item["key"]["data"] for item in json.loads(done.stdout)["items"]]


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


# ---------------------------------------------------------------------------------------------
# stats


def test_stats_counts_by_reason_and_class(letters: DeadLetters) -> None:
    done = dlq("stats", "-f", str(letters.policy), "-o", "json", process=True)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["topic"] == letters.topic
    assert stats["total"] == COUNT
    assert stats["byReason"] == {"exhausted": 6, "non-retryable": 3, "terminated": 3}
    assert stats["byErrorClass"] == {
        "KeyError": 3,
        "TimeoutError": 3,
        "ValueError": 3,
        "billing.errors.FraudError": 3,
    }
    assert {"reason": "exhausted", "errorClass": "TimeoutError", "count": 3} in stats["byReasonAndErrorClass"]
    assert len(stats["byReasonAndErrorClass"]) == 4
    assert stats["oldest"] == _iso(letters.base)
    assert stats["newest"] == _iso(letters.base + 11 * 30 * MINUTE)

    table = dlq("stats", "-f", str(letters.policy))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[:3] == [f"TOPIC    {letters.topic}", "RANGE    all", "TOTAL    12"]
    assert "exhausted       6" in lines
    assert "terminated      billing.errors.FraudError   3" in lines


def test_stats_over_a_time_range(letters: DeadLetters) -> None:
    middle = _iso(letters.base + 6 * 30 * MINUTE)  # order-6's failure: --after includes it
    after = json.loads(dlq("stats", "-f", str(letters.policy), "--after", middle, "-o", "json").stdout)
    before = json.loads(dlq("stats", "-f", str(letters.policy), "--before", middle, "-o", "json").stdout)
    assert (after["total"], before["total"]) == (6, 6)
    assert after["oldest"] == middle
    assert before["newest"] == _iso(letters.base + 5 * 30 * MINUTE)
    recent = json.loads(dlq("stats", "-f", str(letters.policy), "--since", "2h15m", "-o", "json").stdout)
    assert recent["total"] == 4  # order-8 to order-11
    assert recent["byReason"] == {"exhausted": 2, "terminated": 1, "non-retryable": 1}


def test_reading_ends_while_the_topic_is_written(letters: DeadLetters) -> None:
    """The end offsets are taken at the start: a producer that never stops does not keep the
    command reading."""
    stop = threading.Event()
    sent = [0]

    def keep_writing() -> None:
        producer = Producer({"bootstrap.servers": letters.bootstrap, "linger.ms": 0})
        while not stop.is_set():
            produce_letter(
                producer,
                letters.topic,
                partition=sent[0] % 3,
                key=b"late",
                value=b"{}",
                failed_at=int(time.time() * 1000),
                reason="exhausted",
                error_class="ValueError",
                message="late",
            )
            producer.poll(0)
            sent[0] += 1
            time.sleep(0.005)
        producer.flush(30)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        while sent[0] < 50:
            time.sleep(0.05)
        done = dlq("stats", "-f", str(letters.policy), "-o", "json", timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["total"] >= COUNT + 1
        assert writer.is_alive()  # still writing when the command had ended
    finally:
        stop.set()
        writer.join(60)


# ---------------------------------------------------------------------------------------------
# ls


def test_ls_filters_by_reason_class_and_key(letters: DeadLetters) -> None:
    policy = str(letters.policy)
    assert keys(dlq("ls", "-f", policy, "--reason", "terminated", "-o", "json")) == [
        "order-1",
        "order-5",
        "order-9",
    ]
    assert keys(
        dlq("ls", "-f", policy, "--reason", "terminated", "--reason", "non-retryable", "-o", "json")
    ) == [f"order-{i}" for i in (1, 3, 5, 7, 9, 11)]
    assert keys(dlq("ls", "-f", policy, "--error-class", "FraudError", "-o", "json")) == [
        "order-1",
        "order-5",
        "order-9",
    ]
    assert keys(
        dlq("ls", "-f", policy, "--error-class", "ValueError", "--error-class", "TimeoutError", "-o", "json")
    ) == [f"order-{i}" for i in (0, 2, 4, 6, 8, 10)]
    assert keys(
        dlq("ls", "-f", policy, "--reason", "exhausted", "--error-class", "TimeoutError", "-o", "json")
    ) == [
        "order-2",
        "order-6",
        "order-10",
    ]
    assert keys(dlq("ls", "-f", policy, "--key", "order-7", "-o", "json")) == ["order-7"]


def test_ls_time_range_and_limit_newest_last(letters: DeadLetters) -> None:
    policy = str(letters.policy)
    assert keys(dlq("ls", "-f", policy, "-o", "json")) == [f"order-{i}" for i in range(COUNT)]
    assert keys(dlq("ls", "-f", policy, "--limit", "2", "-o", "json")) == ["order-10", "order-11"]
    assert keys(dlq("ls", "-f", policy, "--since", "2h15m", "--reason", "exhausted", "-o", "json")) == [
        "order-8",
        "order-10",
    ]
    after, before = _iso(letters.base + 3 * 30 * MINUTE), _iso(letters.base + 6 * 30 * MINUTE)
    assert keys(dlq("ls", "-f", policy, "--after", after, "--before", before, "-o", "json")) == [
        "order-3",
        "order-4",
        "order-5",
    ]
    assert keys(
        dlq("ls", "-f", policy, "--after", after, "--limit", "1", "--reason", "terminated", "-o", "json")
    ) == ["order-9"]


def test_ls_table_fits_the_terminal_and_wide_shows_all(letters: DeadLetters) -> None:
    done = dlq("ls", "-f", str(letters.policy), "--reason", "terminated", env={"COLUMNS": "140"})
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["TIME", "PARTITION/OFFSET", "KEY", "REASON", "CLASS", "MESSAGE"]
    assert len(rows) == 3
    assert all(len(line) <= 140 for line in rows)
    first = rows[0].split()
    assert first[0] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((letters.base + 30 * MINUTE) / 1000))
    assert first[1:5] == ["1/0", "order-1", "terminated", "billing.errors.FraudError"]
    assert rows[0].endswith("...")
    assert "flagged by rules: card country" in rows[0]

    wide = dlq("ls", "-f", str(letters.policy), "--reason", "terminated", "-o", "wide")
    header, *rows = wide.stdout.splitlines()
    assert header.split() == [
        "TIME",
        "PARTITION/OFFSET",
        "KEY",
        "REASON",
        "CLASS",
        "ATTEMPT",
        "ORIGINAL",
        "REDRIVES",
        "MESSAGE",
    ]
    assert rows[0].split()[5:8] == ["1", "orders/1/101", "0"]
    assert rows[0].endswith(KINDS[1][2].strip())


def test_ls_yaml_and_what_matched_nothing(letters: DeadLetters) -> None:
    done = dlq("ls", "-f", str(letters.policy), "--key", "order-4", "-o", "yaml")
    [item] = yaml.safe_load(done.stdout)["items"]
    assert item["failedAt"] == _iso(letters.base + 4 * 30 * MINUTE)
    assert (item["reason"], item["errorClass"], item["attempt"]) == ("exhausted", "ValueError", 4)
    assert item["original"] == "orders/1/101"
    assert "value" not in item
    assert {"name": "team", "encoding": "text", "data": "payments"} in item["headers"]

    nothing = dlq("ls", "-f", str(letters.policy), "--reason", "exausted")
    assert nothing.returncode == 0
    assert nothing.stdout == ""
    assert nothing.stderr.splitlines() == [
        "warning: --reason 'exausted' matches no dead letter in the range "
        "(seen: exhausted, non-retryable, terminated)",
        f"No dead letters found in {letters.topic}.",
    ]


def test_a_time_range_is_sought_not_scanned(
    bootstrap_servers: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The start of a range is found with offsets_for_times on the records' timestamps (a dead
    letter is written after it failed): a record whose timestamp is hours before the range is
    not read at all, whatever its headers say."""
    topic = make_topic("dlq-seek")
    now = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    common: dict[str, Any] = {
        "partition": 0,
        "value": b"{}",
        "reason": "exhausted",
        "error_class": "E",
        "message": "m",
    }
    produce_letter(
        producer, topic, key=b"skipped", failed_at=now - MINUTE, timestamp=now - 180 * MINUTE, **common
    )
    produce_letter(producer, topic, key=b"read", failed_at=now - MINUTE, **common)
    assert producer.flush(30) == 0
    policy = str(write_policy(tmp_path / "p.yaml", bootstrap_servers, **{"spec.deadLetter.topic": topic}))
    assert keys(dlq("ls", "-f", policy, "-o", "json")) == ["skipped", "read"]
    assert keys(dlq("ls", "-f", policy, "--since", "1h", "-o", "json")) == ["read"]


# ---------------------------------------------------------------------------------------------
# show


def _position(letters: DeadLetters, key: str) -> str:
    [item] = json.loads(dlq("ls", "-f", str(letters.policy), "--key", key, "-o", "json").stdout)["items"]
    return f"{item['partition']}/{item['offset']}"


def test_show_a_json_value(letters: DeadLetters) -> None:
    position = _position(letters, "order-4")
    assert position == "1/1"
    done = dlq("show", position, "-f", str(letters.policy))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert f"Topic:        {letters.topic}\nPosition:     1/1\n" in text
    assert "Key:          order-4\n" in text
    assert f"Failed at:    {_iso(letters.base + 4 * 30 * MINUTE)}\n" in text
    assert (
        "Reason:       exhausted\nError class:  ValueError\nAttempt:      4\nOriginal:     orders/1/101\n"
        in text
    )
    assert "Error message:\n  amount must be positive\n" in text
    assert "  dlq.policy:              payments/orders-billing\n" in text
    assert "  team:                    payments\n" in text
    size = len(json.dumps({"order": 4, "amount": -4}))
    assert f'Value (JSON, {size} bytes):\n  {{\n    "order": 4,\n    "amount": -4\n  }}\n' in text
    assert text.endswith("Stack trace:\n  " + TRACE.replace("\n", "\n  ") + "\n")

    document = json.loads(dlq("show", position, "-f", str(letters.policy), "-o", "json").stdout)
    assert document["value"] == {"encoding": "json", "data": {"order": 4, "amount": -4}}
    assert {"name": h.ERROR_STACKTRACE, "encoding": "text", "data": TRACE} in document["headers"]


def test_show_a_binary_value(letters: DeadLetters) -> None:
    position = _position(letters, "order-5")
    done = dlq("show", position, "-f", str(letters.policy))
    assert done.returncode == 0, done.stderr
    assert (
        "Value (binary, 10 bytes):\n  00000000  00 ff 10 62 69 6e 61 72 79 01" + " " * 18 + "  |...binary.|\n"
    ) in done.stdout
    document = yaml.safe_load(dlq("show", position, "-f", str(letters.policy), "-o", "yaml").stdout)
    assert document["value"] == {"encoding": "hex", "data": BINARY.hex()}


def test_show_refuses_positions_that_hold_no_record(letters: DeadLetters) -> None:
    policy = str(letters.policy)
    _one_error_line(
        dlq("show", "3/0", "-f", policy),
        2,
        f"error: partition 3 does not exist in '{letters.topic}' (partitions 0-2)",
    )
    _one_error_line(
        dlq("show", "0/4", "-f", policy),
        2,
        f"error: no record at 0/4: partition 0 of '{letters.topic}' has offsets 0-3",
    )
    _one_error_line(dlq("show", "0-4", "-f", policy), 2, "error: the position must be PARTITION/OFFSET")


def test_dead_letters_the_broker_deleted_are_counted_as_expired(letters: DeadLetters) -> None:
    """The broker deletes partition 0's first two dead letters (order-0 and order-3), as its
    retention would (Admin API DeleteRecords): counts, lists and shows say so."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": letters.bootstrap})
    for future in admin.delete_records([TopicPartition(letters.topic, 0, 2)], request_timeout=30).values():
        future.result(timeout=60)
    policy = str(letters.policy)

    stats = json.loads(dlq("stats", "-f", policy, "-o", "json").stdout)
    assert (stats["total"], stats["expired"]) == (COUNT - 2, 2)
    assert stats["expiredRanges"] == [{"partition": 0, "first": 0, "last": 1}]
    listed = dlq("ls", "-f", policy, "--reason", "exhausted")
    assert listed.returncode == 0, listed.stderr
    assert "order-0" not in listed.stdout
    assert listed.stderr == (
        f"warning: 2 dead letters of '{letters.topic}' expired before this read (the broker deleted them: "
        "the topic's retention, or a deleteRecords): 0/0-1\n"
    )
    _one_error_line(
        dlq("show", "0/1", "-f", policy),
        2,
        f"error: no record at 0/1: partition 0 of '{letters.topic}' has offsets 2-3 (the broker deleted "
        "those below 2: the topic's retention, or a deleteRecords)",
    )


# ---------------------------------------------------------------------------------------------
# Where the broker and the topic come from


def test_the_policys_default_dead_letter_topic(bootstrap_servers: str, tmp_path: Path) -> None:
    """A policy without spec.deadLetter.topic: ``<source>-<subscription>-DLQ``, from stdin too."""
    source = unique("orders")
    topic = f"{source}-billing-DLQ"
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    produce_letter(
        producer,
        topic,
        partition=0,
        key=b"k",
        value=b"v",
        failed_at=int(time.time() * 1000),
        reason="terminated",
        error_class="E",
        message="m",
    )
    assert producer.flush(30) == 0
    policy = write_policy(tmp_path / "policy.yaml", bootstrap_servers, **{"spec.source.topic": source})
    done = dlq("stats", "-f", str(policy), "-o", "json")
    assert (json.loads(done.stdout)["topic"], json.loads(done.stdout)["total"]) == (topic, 1)
    piped = dlq("stats", "-f", "-", "-o", "json", input=policy.read_text())
    assert json.loads(piped.stdout)["byReason"] == {"terminated": 1}


def test_the_broker_address_from_a_flag_or_a_client_file(letters: DeadLetters, tmp_path: Path) -> None:
    """The in-cluster address in the policy is not reachable from here; --bootstrap-servers or
    bootstrap.servers in --kafka-config says where the broker is."""
    unreachable = f"127.0.0.1:{free_port()}"
    policy = write_policy(tmp_path / "cluster.yaml", unreachable, **{"spec.deadLetter.topic": letters.topic})
    flag = dlq("stats", "-f", str(policy), "--bootstrap-servers", letters.bootstrap, "-o", "json")
    assert json.loads(flag.stdout)["total"] == COUNT
    client = tmp_path / "client.properties"
    client.write_text(
        f"# the broker as seen from this laptop\nbootstrap.servers={letters.bootstrap}\nclient.id=triage\n"
    )
    from_file = dlq("stats", "-f", str(policy), "--kafka-config", str(client), "-o", "json")
    assert json.loads(from_file.stdout)["total"] == COUNT


def test_an_unreachable_broker_is_one_line_and_status_1(letters: DeadLetters, tmp_path: Path) -> None:
    port = free_port()
    started = time.monotonic()
    done = dlq(
        "stats",
        "-f",
        str(letters.policy),
        "--bootstrap-servers",
        f"127.0.0.1:{port}",
        "--request-timeout",
        "2s",
    )
    assert time.monotonic() - started < 30
    line = _one_error_line(
        done, 1, f"error: cannot reach the Kafka broker at 127.0.0.1:{port} (--bootstrap-servers): "
    )
    assert "Connection refused" in line
    policy = write_policy(tmp_path / "cluster.yaml", f"127.0.0.1:{port}")
    line = _one_error_line(dlq("ls", "-f", str(policy), "--request-timeout", "2s"), 1, "error: cannot reach")
    assert (
        "(spec.broker.bootstrapServers of payments/orders-billing; --bootstrap-servers overrides it)" in line
    )


def test_a_missing_topic_is_status_1(bootstrap_servers: str, tmp_path: Path) -> None:
    missing = unique("no-such-dlq")
    policy = write_policy(tmp_path / "p.yaml", bootstrap_servers, **{"spec.deadLetter.topic": missing})
    _one_error_line(
        dlq("ls", "-f", str(policy)),
        1,
        f"error: the dead-letter topic '{missing}' does not exist on the Kafka broker at {bootstrap_servers}",
    )


@pytest.mark.parametrize(
    ("args", "starts"),
    [
        (["stats", "-f", "{policy}", "--since", "yesterday"], "error: --since: must be a duration"),
        (["ls", "-f", "{policy}", "--after", "last tuesday"], "error: --after: must be an ISO-8601 time"),
        (["ls", "-f", "{policy}", "--limit", "-3"], "error: argument --limit: must be at least 1"),
        (["ls", "-f", "{missing}"], "error: {missing}: (file): No such file or directory"),
        (
            ["ls", "-f", "{policy}", "--kafka-config", "{policy}"],
            "error: --kafka-config {policy}:1: expected key=value",
        ),
        (["ls", "-f", "{policy}", "--kafka-config", "{bad_client}"], "error: Kafka client settings: "),
        (["top", "-f", "{policy}"], "error: argument COMMAND: invalid choice: 'top'"),
        (
            ["stats", "--policy", "orders", "-f", "{policy}"],
            "error: give the policy as -f FILE or as --policy NAME",
        ),
    ],
)
def test_bad_arguments_are_one_line_and_status_2(
    args: list[str], starts: str, bootstrap_servers: str, tmp_path: Path
) -> None:
    names = {
        "policy": str(write_policy(tmp_path / "p.yaml", bootstrap_servers)),
        "missing": str(tmp_path / "missing.yaml"),
        "bad_client": str(tmp_path / "client.properties"),
    }
    Path(names["bad_client"]).write_text("no.such.property=1\n")
    _one_error_line(dlq(*(arg.format(**names) for arg in args)), 2, starts.format(**names))


# ---------------------------------------------------------------------------------------------
# --policy: the DeadLetterPolicy read from the cluster


def policy_in_cluster(letters: DeadLetters, kube_api: Any, namespace: str) -> dict[str, str]:
    """Create the letters' policy in ``namespace``; the environment a plugin runs in there (the
    test bed's kubectl first on the PATH, where a plugin finds it)."""
    from kubernetes import client

    document = policy_document(
        {
            "metadata.namespace": namespace,
            "spec.broker.bootstrapServers": letters.bootstrap,
            "spec.deadLetter.topic": letters.topic,
        }
    )
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        "sparkdlq.io", "v1alpha1", namespace, "deadletterpolicies", document
    )
    return {"PATH": os.pathsep.join([str(kubernetes_bin("kubectl").parent), os.environ.get("PATH", "")])}


@pytest.mark.usefixtures("dlp_crd")
def test_policy_read_from_the_cluster(
    letters: DeadLetters, kube_api: Any, kubeconfig: str, namespace: str
) -> None:
    path = policy_in_cluster(letters, kube_api, namespace)
    done = dlq(
        "ls",
        "--policy",
        "orders-billing",
        "-n",
        namespace,
        "--kubeconfig",
        kubeconfig,
        "--limit",
        "1",
        "-o",
        "json",
        env=path,
    )
    assert keys(done) == ["order-11"]

    # A policy that names no broker reads its class's, as the operator gives it (a class named
    # by spec.className: the cluster's other policies keep theirs).
    from kubernetes import client

    cls = unique("class")
    objects = client.CustomObjectsApi(kube_api)
    objects.create_cluster_custom_object(
        "sparkdlq.io",
        "v1alpha1",
        "deadletterpolicyclasses",
        {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterPolicyClass",
            "metadata": {"name": cls},
            "spec": {"brokers": [{"bootstrapServers": letters.bootstrap}]},
        },
    )
    try:
        document = policy_document(
            {
                "metadata.name": "orders-payouts",
                "metadata.namespace": namespace,
                "spec.broker": DELETE,
                "spec.className": cls,
                "spec.deadLetter.topic": letters.topic,
            }
        )
        objects.create_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", namespace, "deadletterpolicies", document
        )
        done = dlq(
            "ls", "--policy", "orders-payouts", "-n", namespace, "--kubeconfig", kubeconfig, "--limit", "1",
            "-o", "json", env=path,
        )  # fmt: skip
        assert keys(done) == ["order-11"]
    finally:
        objects.delete_cluster_custom_object("sparkdlq.io", "v1alpha1", "deadletterpolicyclasses", cls)
    _one_error_line(
        dlq("stats", "--policy", "orders-refunds", "-n", namespace, "--kubeconfig", kubeconfig, env=path),
        2,
        "error: kubectl get deadletterpolicy orders-refunds: Error from server (NotFound): "
        'deadletterpolicies.sparkdlq.io "orders-refunds" not found',
    )


# ---------------------------------------------------------------------------------------------
# redrive


def test_redrive_shows_what_would_move_and_writes_nothing(letters: DeadLetters) -> None:
    done = dlq("redrive", "-f", str(letters.policy), "--reason", "exhausted", "--error-class", "ValueError")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "Would redrive 3 of 12 dead letters of payments/orders-billing to orders-billing-RETRY "
        "(the policy's retry topic) (0 skipped: redriven 3 times already)"
    )
    assert "  by reason: exhausted=3" in lines
    assert "  by error class: ValueError=3" in lines
    assert "Nothing was written. Run again with --execute" in done.stderr


def test_redrive_yaml_is_the_redrive_the_model_accepts(letters: DeadLetters) -> None:
    done = dlq(
        "redrive",
        "-f",
        str(letters.policy),
        "--since",
        "2h",
        "--key",
        "order-11",
        "--to",
        "topic:parking",
        "--rate",
        "50",
        "--name",
        "fix-1",
        "--filter",
        "attempts > 1",
        "-o",
        "yaml",
    )
    assert done.returncode == 0, done.stderr
    from dlq_engine.model.redrive import parse_redrive

    redrive = parse_redrive(yaml.safe_load(done.stdout))
    assert (redrive.name, redrive.destination.type, redrive.destination.topic) == (
        "fix-1",
        "topic",
        "parking",
    )
    assert redrive.selection.keys == ("order-11",)
    assert redrive.selection.filter == "attempts > 1"
    assert redrive.selection.failed_after_ms is not None
    assert redrive.rate_per_second == 50


def test_redrive_refuses_a_bad_destination(letters: DeadLetters) -> None:
    _one_error_line(
        dlq("redrive", "-f", str(letters.policy), "--to", "elsewhere"),
        2,
        "error: --to: must be source, retry or topic:NAME, got 'elsewhere'",
    )


def test_redrive_execute_creates_the_redrive_in_the_cluster(
    letters: DeadLetters, kube_api: Any, kubeconfig: str, namespace: str, dlp_crd: str
) -> None:
    from kubernetes import client

    path = policy_in_cluster(letters, kube_api, namespace)
    done = dlq(
        "redrive",
        "--policy",
        "orders-billing",
        "-n",
        namespace,
        "--kubeconfig",
        kubeconfig,
        "--reason",
        "terminated",
        "--name",
        "fix-1",
        "--execute",
        env=path,
    )
    assert done.returncode == 0, done.stderr
    assert "deadletterredrive.sparkdlq.io/fix-1 created" in done.stdout
    created = client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        "sparkdlq.io", "v1alpha1", namespace, "deadletterredrives", "fix-1"
    )
    assert created["spec"]["selection"] == {"reasons": ["terminated"]}
    assert created["spec"]["destination"] == {"type": "source"}
    assert created["spec"]["maxRedrives"] == 3  # defaulted by the CRD as the model does


# ---------------------------------------------------------------------------------------------
# daily use: every policy at once, progress on a terminal, shell completion through kubectl


@pytest.mark.usefixtures("dlp_crd")
def test_stats_of_every_policy(
    letters: DeadLetters, kube_api: Any, kubeconfig: str, namespace: str, bootstrap_servers: str
) -> None:
    from kubernetes import client

    path = policy_in_cluster(letters, kube_api, namespace)
    gone = policy_document(
        {
            "metadata.namespace": namespace,
            "metadata.name": "orders-gone",
            "spec.broker.bootstrapServers": bootstrap_servers,
            "spec.deadLetter.topic": f"{letters.topic}-gone",
        }
    )
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        "sparkdlq.io", "v1alpha1", namespace, "deadletterpolicies", gone
    )
    connect = ("--kubeconfig", kubeconfig, "--bootstrap-servers", bootstrap_servers)

    # Every namespace: ours among whatever other tests left (their topics may be gone).
    everywhere = dlq("stats", "-A", *connect, "-o", "json", env=path)
    assert everywhere.returncode in (0, 1), everywhere.stderr
    rows = {(d["namespace"], d["policy"]): d for d in json.loads(everywhere.stdout)["items"]}
    assert rows[(namespace, "orders-billing")]["total"] == COUNT
    assert rows[(namespace, "orders-gone")]["total"] is None

    # One namespace: a row each, a warning for the one whose topic is gone, exit status 1.
    done = dlq("stats", "-A", "-n", namespace, *connect, env=path)
    assert done.returncode == 1
    header, *lines = done.stdout.splitlines()
    assert header.split() == ["NAMESPACE", "POLICY", "TOPIC", "DEAD", "LETTERS", "NEWEST", "TOP", "CLASS"]
    assert [line.split()[:4] for line in lines] == [
        [namespace, "orders-billing", letters.topic, str(COUNT)],
        [namespace, "orders-gone", f"{letters.topic}-gone", "?"],
    ]
    assert done.stderr.splitlines() == [
        f"warning: {namespace}/orders-gone: the dead-letter topic '{letters.topic}-gone' does not exist on "
        f"the Kafka broker at {bootstrap_servers}"
    ]
    _one_error_line(
        dlq("stats", "-A", "-f", str(letters.policy), env=path),
        2,
        "error: -A reads every policy of the cluster: give neither -f nor --policy",
    )


def test_a_long_scan_shows_progress_on_a_terminal_only(
    bootstrap_servers: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """LARGE_SCAN records or more: a line on stderr, rewritten in place, when stderr is a
    terminal (a pty here), cleared at the end; nothing when it is a pipe."""
    import pty

    from spark_dlq_operator.kubectl_dlq.progress import LARGE_SCAN

    topic = make_topic("big-DLQ", partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20})
    for i in range(LARGE_SCAN):
        producer.produce(topic, key=str(i).encode(), value=b"{}", partition=i % 2)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    policy = write_policy(tmp_path / "big.yaml", bootstrap_servers, **{"spec.deadLetter.topic": topic})

    primary, secondary = pty.openpty()
    try:
        environ = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                str(REPO_ROOT / p) for p in ("spark_image", "operator", "devtools", ".")
            ),
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "spark_dlq_operator.kubectl_dlq",
                "stats",
                "-f",
                str(policy),
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env=environ,
            timeout=120,
            check=False,
        )
        os.close(secondary)
        said = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(primary)
    assert done.returncode == 0
    assert json.loads(done.stdout)["total"] == LARGE_SCAN
    text = said.decode()
    assert f"reading {topic}: " in text
    assert f"{LARGE_SCAN:,} of {LARGE_SCAN:,} records (100%)" in text
    assert text.endswith("\r\x1b[K"), "the line is cleared at the end"

    piped = dlq("stats", "-f", str(policy), "-o", "json")
    assert piped.returncode == 0
    assert piped.stderr == ""


@pytest.mark.usefixtures("dlp_crd")
def test_shell_completion_through_kubectl(
    letters: DeadLetters, kube_api: Any, kubeconfig: str, namespace: str, tmp_path: Path
) -> None:
    """kubectl's own plugin completion (`kubectl __complete`, what its shell scripts call) runs
    kubectl_complete-dlq from the PATH: commands, flags, values, and policies from the cluster."""
    path = policy_in_cluster(letters, kube_api, namespace)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, function in (("kubectl-dlq", "main"), ("kubectl_complete-dlq", "complete")):
        shim = bin_dir / name
        shim.write_text(
            f"#!{sys.executable}\nimport sys\nfrom spark_dlq_operator.kubectl_dlq.plugin import {function}\nsys.exit({function}())\n"
        )
        shim.chmod(0o755)
    environ = {
        **os.environ,
        "PATH": os.pathsep.join([str(bin_dir), path["PATH"]]),
        "PYTHONPATH": os.pathsep.join(
            str(REPO_ROOT / p) for p in ("spark_image", "operator", "devtools", ".")
        ),
    }

    def complete(*words: str) -> list[str]:
        done = subprocess.run(
            [str(kubernetes_bin("kubectl")), "__complete", "dlq", *words],
            capture_output=True,
            text=True,
            env=environ,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    assert complete("") == ["ls", "redrive", "show", "stats", ":4"]
    assert complete("st") == ["stats", ":4"]
    assert complete("stats", "-o", "") == ["table", "json", "yaml", ":4"]
    assert "--all-namespaces" in complete("stats", "--a")
    assert complete("ls", "--reason", "") == [*DEAD_LETTER_REASONS, ":4"]
    assert complete("stats", "-f", "")[-1] == ":0", "file names for -f"
    assert complete("stats", "--kubeconfig", kubeconfig, "-n", namespace, "--policy", "") == [
        "orders-billing",
        ":4",
    ]
    version = subprocess.run(
        [str(kubernetes_bin("kubectl")), "dlq", "--version"],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    )
    assert version.stdout.startswith("kubectl dlq ")
