"""Header profiles (``deadLetter.headerProfiles``) against the real libraries: Spring for Apache
Kafka's and Kafka Connect's classes (Maven Central, run by the interop program that
``scripts/setup/java_programs.sh`` builds from ``tests/interop/java``) read the dead letters and retry
records the engine wrote, and write dead letters of their own that the redrive and kubectl dlq
read back; Pulsar's names are checked against its Java client's ``RetryMessageUtil`` and the
``pulsar-client`` wheel's native library. Kafka's own dead letters are written by Kafka Streams
(KIP-1034) on the test bed's broker and by a share group on a Kafka 4.4 broker (KIP-1191), with
the program built from ``tests/interop/kafka``, and read back the same way."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.exits import EXIT_OK
from dlq_engine.job.redrive import Redrive
from dlq_engine.model.policy import parse_policy
from dlq_engine.model.redrive import parse_redrive
from dlq_engine.routing import headers as h
from spark_dlq_devtools.kafka import KafkaBroker, create_topics
from spark_dlq_devtools.paths import java_classpath, versions
from tests.conftest import unique
from tests.helpers import engine_policy, produce, read_all
from tests.integration.test_kubectl_dlq import dlq

ALL_PROFILES = ["spark-dlq", "spring", "connect", "pulsar"]
#: What Spring's listener container hands its DeadLetterPublishingRecoverer (so the program does).
LISTENER_FAILED = "org.springframework.kafka.listener.ListenerExecutionFailedException"


def run_interop(*args: str) -> Any:
    """The interop program's JSON answer to ``args`` (tests/interop/java, Interop.java)."""
    done = subprocess.run(
        ["java", "-cp", java_classpath("interop"), "io.sparkdlq.interop.Interop", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def test_header_names_are_the_libraries_own_constants() -> None:
    names = run_interop("names")
    assert names["spring"] == {
        "DLT_ORIGINAL_TOPIC": h.SPRING_ORIGINAL_TOPIC,
        "DLT_ORIGINAL_PARTITION": h.SPRING_ORIGINAL_PARTITION,
        "DLT_ORIGINAL_OFFSET": h.SPRING_ORIGINAL_OFFSET,
        "DLT_ORIGINAL_TIMESTAMP": h.SPRING_ORIGINAL_TIMESTAMP,
        "DLT_ORIGINAL_CONSUMER_GROUP": h.SPRING_ORIGINAL_CONSUMER_GROUP,
        "DLT_EXCEPTION_FQCN": h.SPRING_EXCEPTION_FQCN,
        "DLT_EXCEPTION_CAUSE_FQCN": h.SPRING_EXCEPTION_CAUSE_FQCN,
        "DLT_EXCEPTION_MESSAGE": h.SPRING_EXCEPTION_MESSAGE,
        "DLT_EXCEPTION_STACKTRACE": h.SPRING_EXCEPTION_STACKTRACE,
        "DEFAULT_HEADER_ATTEMPTS": h.SPRING_RETRY_ATTEMPTS,
        "DEFAULT_HEADER_BACKOFF_TIMESTAMP": h.SPRING_RETRY_BACKOFF_TIMESTAMP,
        "DEFAULT_HEADER_ORIGINAL_TIMESTAMP": h.SPRING_RETRY_ORIGINAL_TIMESTAMP,
    }
    assert names["connect"] == {
        "ERROR_HEADER_ORIG_TOPIC": h.CONNECT_TOPIC,
        "ERROR_HEADER_ORIG_PARTITION": h.CONNECT_PARTITION,
        "ERROR_HEADER_ORIG_OFFSET": h.CONNECT_OFFSET,
        "ERROR_HEADER_CONNECTOR_NAME": h.CONNECT_CONNECTOR_NAME,
        "ERROR_HEADER_EXCEPTION": h.CONNECT_EXCEPTION_CLASS,
        "ERROR_HEADER_EXCEPTION_MESSAGE": h.CONNECT_EXCEPTION_MESSAGE,
        "ERROR_HEADER_EXCEPTION_STACK_TRACE": h.CONNECT_EXCEPTION_STACKTRACE,
    }
    assert names["pulsar"] == {
        "SYSTEM_PROPERTY_REAL_TOPIC": h.PULSAR_REAL_TOPIC,
        "SYSTEM_PROPERTY_ORIGIN_MESSAGE_ID": h.PULSAR_ORIGIN_MESSAGE_ID,
        "PROPERTY_ORIGIN_MESSAGE_ID": h.PULSAR_ORIGIN_MESSAGE_ID_NEW,
        "SYSTEM_PROPERTY_RECONSUMETIMES": h.PULSAR_RECONSUME_TIMES,
        "SYSTEM_PROPERTY_DELAY_TIME": h.PULSAR_DELAY_TIME,
        "SYSTEM_PROPERTY_RETRY_TOPIC": h.PULSAR_RETRY_TOPIC,
    }


def test_the_pulsar_python_client_writes_the_dead_letter_names_we_write() -> None:
    """The ``pulsar-client`` wheel exposes no ``RetryMessageUtil`` (its Python modules name none
    of these properties); its native library (the C++ client it wraps) holds the names its
    dead letters carry: ``REAL_TOPIC`` and ``ORIGIN_MESSAGE_ID``. It has no retry letters, so
    ``RECONSUMETIMES`` and the misspelt key are only the Java client's (checked above)."""
    files = metadata.files("pulsar-client") or []
    python = [f for f in files if f.suffix == ".py"]
    native = [f for f in files if ".so" in f.name and "libpulsar" in f.name]
    assert python, files
    assert native, files
    sources = "".join(Path(str(f.locate())).read_text() for f in python)
    assert "REAL_TOPIC" not in sources
    assert "RetryMessageUtil" not in sources
    library = Path(str(native[0].locate())).read_bytes()
    for name in (h.PULSAR_REAL_TOPIC, h.PULSAR_ORIGIN_MESSAGE_ID_NEW):
        assert name.encode() + b"\0" in library, name


def test_spring_reads_the_engine_s_dead_letters_and_retry_records(
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    make_topic: Callable[..., str],
) -> None:
    names = topics()
    produce(bootstrap_servers, names["source"], [(b"a", b"terminate:x"), (b"b", b"fail:y")])
    # The retry waits an hour: the run ends with one retry record and one dead letter.
    running = engine(
        names,
        once=True,
        deadLetter={"headerProfiles": ALL_PROFILES},
        retry={"maxRedeliverCount": 3, "backoff": {"type": "fixed", "delay": "1h"}},
    )
    assert running.join(180) == EXIT_OK, running.describe()
    (ours,) = read_all(bootstrap_servers, names["dlq"], expect=1)
    (retry,) = read_all(bootstrap_servers, names["retry"], expect=1)

    # Spring's conventions (KafkaHeaders names, binary partition/offset/timestamp) give our facts.
    (read,) = run_interop("spring-read", bootstrap_servers, names["dlq"], "1")
    assert (read["topic"], read["partition"], read["offset"]) == (names["source"], 0, 0)
    assert read["timestamp"] == int(ours.header(h.ORIGINAL_TIMESTAMP) or "")
    assert (read["group"], read["fqcn"]) == ("tests", ours.header(h.ERROR_CLASS))
    assert read["message"] == ours.header(h.ERROR_MESSAGE) == "terminated: x"
    (read_retry,) = run_interop("spring-read", bootstrap_servers, names["retry"], "1")
    assert (read_retry["offset"], read_retry["attempts"]) == (1, 1)
    assert read_retry["backoff_timestamp"] == int(retry.header(h.DELIVER_AT) or "")

    # A Spring listener failing on our dead letter: Spring's DeadLetterPublishingRecoverer keeps
    # our kafka_dlt-original-* headers as the original (it does not add its own) and replaces the
    # exception headers with its failure.
    again_topic = make_topic("spring-again")
    (again,) = run_interop(
        "spring-redeadletter", bootstrap_servers, names["dlq"], "1", again_topic, "spring-app"
    )
    assert (again["topic"], again["partition"], again["offset"], again["group"]) == (
        names["source"],
        0,
        0,
        "tests",
    )
    assert again["counts"][h.SPRING_ORIGINAL_TOPIC] == again["counts"][h.SPRING_ORIGINAL_OFFSET] == 1
    assert again["counts"][h.SPRING_EXCEPTION_FQCN] == 1
    assert (again["fqcn"], again["cause_fqcn"]) == (LISTENER_FAILED, "java.lang.IllegalStateException")

    # Spring's own dead letter of the same source records: the names we write are among its
    # own, each value as long as its (4-byte partition, 8-byte offset and timestamp).
    spring_topic = make_topic("spring-dlt")
    run_interop("spring-publish", bootstrap_servers, names["source"], "2", spring_topic, "spring-own")
    spring_own = {
        row["key"]: row for row in run_interop("spring-read", bootstrap_servers, spring_topic, "2")
    }["a"]
    ours_spring = {name: len(value) for name, value in ours.headers if name.startswith("kafka_dlt-")}
    missing = set(ours_spring) - set(spring_own["lengths"])
    assert not missing, f"names Spring does not write: {missing}"
    for name in (h.SPRING_ORIGINAL_PARTITION, h.SPRING_ORIGINAL_OFFSET, h.SPRING_ORIGINAL_TIMESTAMP):
        assert ours_spring[name] == spring_own["lengths"][name], name
    assert (spring_own["topic"], spring_own["offset"]) == (read["topic"], read["offset"])


def test_redrive_and_triage_read_spring_and_connect_dead_letter_topics(
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    names = topics()
    produce(bootstrap_servers, names["source"], [(b"k0", b"v0"), (b"k1", b"v1")])
    written = {"spring": make_topic("spring-dlt"), "connect": make_topic("connect-dlq")}
    run_interop("spring-publish", bootstrap_servers, names["source"], "2", written["spring"], "spring-app")
    run_interop("connect-publish", bootstrap_servers, names["source"], "2", written["connect"])
    expected = {
        # The class is the listener's error (Spring's cause-fqcn), the message the wrapper's.
        "spring": ("java.lang.IllegalStateException", "listener failed; spring listener failed at {}"),
        "connect": ("org.apache.kafka.connect.errors.DataException", "sink put failed at {}"),
    }
    for tool, topic in written.items():
        error_class, message = expected[tool]
        retry = make_topic(f"{tool}-retry")
        document = engine_policy({**names, "dlq": topic, "retry": retry}, bootstrap_servers)
        policy = parse_policy(document)

        # triage: origin and error from the tool's own headers.
        policy_file = tmp_path / f"{tool}.yaml"
        policy_file.write_text(yaml.safe_dump(document))
        done = dlq("ls", "-f", str(policy_file), "-o", "json")
        assert done.returncode == 0, done.stderr
        items = sorted(json.loads(done.stdout)["items"], key=lambda item: item["key"]["data"])
        assert [(i["original"], i["errorClass"], i["errorMessage"]) for i in items] == [
            (f"{names['source']}/0/{n}", error_class, message.format(n)) for n in (0, 1)
        ], tool
        stats = json.loads(dlq("stats", "-f", str(policy_file), "-o", "json").stdout)
        assert stats["byErrorClass"] == {error_class: 2}, tool

        # redrive: selected by the tool's error class, sent back with the origin it read.
        simple = error_class.rsplit(".", 1)[-1]
        redrive = parse_redrive(
            {
                "apiVersion": "sparkdlq.io/v1alpha1",
                "kind": "DeadLetterRedrive",
                "metadata": {"name": f"from-{tool}", "namespace": "tests"},
                "spec": {
                    "policyRef": {"name": "test-policy"},
                    "selection": {"errorClasses": [simple], "filter": "original_offset >= 0"},
                },
            }
        )
        progress = Redrive(spark, policy, redrive, checkpoint=tmp_path / tool).run()
        assert (progress.state, progress.counts.matched, progress.counts.redriven) == ("Succeeded", 2, 2), (
            tool
        )
        sent = sorted(read_all(bootstrap_servers, retry), key=lambda r: r.key or b"")
        assert [
            (
                r.key,
                r.value,
                r.header(h.ORIGINAL_TOPIC),
                r.header(h.ORIGINAL_PARTITION),
                r.header(h.ORIGINAL_OFFSET),
            )
            for r in sent
        ] == [(b"k0", b"v0", names["source"], "0", "0"), (b"k1", b"v1", names["source"], "0", "1")], tool
        if tool == "spring":  # Connect's dead letters carry no original timestamp
            assert all(r.header(h.ORIGINAL_TIMESTAMP) for r in sent)


@pytest.fixture(scope="module")
def share_group_broker() -> Iterator[str]:
    """A Kafka broker whose share groups have dead-letter queues (KIP-1191: 4.4, newer than the
    test bed's): its bootstrap servers. Started for the one test that needs it."""
    broker = KafkaBroker(
        name=f"kafka-share-dlq-{os.getpid()}",
        version=versions()["KAFKA_SHARE_GROUP_DLQ_VERSION"],
        heap="256m",
        log_level="WARN",
    )
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


def test_redrive_and_triage_read_kafka_streams_and_share_group_dead_letters(
    spark: Any,
    bootstrap_servers: str,
    share_group_broker: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    # Kafka Streams on the test bed's broker: String keys, Long values; "b" is no 8-byte long
    # (a deserialization error), "c" negative (a processing error); both go to its DLQ topic.
    clicks, streams_dlq, totals = make_topic("clicks"), make_topic("streams-dlq"), make_topic("totals")
    produce(
        bootstrap_servers,
        clicks,
        [
            (b"a", struct.pack(">q", 5)),
            (b"b", b"bad"),
            (b"c", struct.pack(">q", -7)),
            (b"d", struct.pack(">q", 1)),
        ],
        headers=[("trace", b"t-1")],
    )
    # A share group on the 4.4 broker: its consumer rejects two records, the broker copies them
    # (key and value: errors.deadletterqueue.copy.record.enable) to the group's DLQ topic.
    orders, share_dlq = unique("orders"), unique("dlq.orders")
    create_topics(share_group_broker, [orders], 1)
    produce(share_group_broker, orders, [(b"k0", b"v0"), (b"k1", b"v1")])

    # One JVM: the library's header names, the Streams application, the share consumer.
    done = run_kafka_interop(
        ["names"],
        ["streams", bootstrap_servers, clicks, streams_dlq, totals, "2"],
        ["share-reject", share_group_broker, orders, share_dlq, "workers", "2"],
    )
    assert done["names"] == {
        "HEADER_ERRORS_EXCEPTION_NAME": h.STREAMS_EXCEPTION,
        "HEADER_ERRORS_EXCEPTION_MESSAGE_NAME": h.STREAMS_MESSAGE,
        "HEADER_ERRORS_STACKTRACE_NAME": h.STREAMS_STACKTRACE,
        "HEADER_ERRORS_TOPIC_NAME": h.STREAMS_TOPIC,
        "HEADER_ERRORS_PARTITION_NAME": h.STREAMS_PARTITION,
        "HEADER_ERRORS_OFFSET_NAME": h.STREAMS_OFFSET,
        "ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG": "errors.dead.letter.queue.topic.name",
    }
    assert done["share-reject"] == {"rejected": 2, "deadLetters": 2}
    # The broker writes exactly the headers KIP-1191 documents (and the unit tests read).
    (first, _) = read_all(share_group_broker, share_dlq, expect=2)
    assert [name for name, _ in first.headers] == [
        h.SHARE_GROUP_TOPIC,
        h.SHARE_GROUP_PARTITION,
        h.SHARE_GROUP_OFFSET,
        h.SHARE_GROUP_GROUP,
        h.SHARE_GROUP_DELIVERY_COUNT,
        h.SHARE_GROUP_MESSAGE,
    ]

    # kubectl dlq: origin, error and attempts from each library's own headers.
    written = {"streams": (bootstrap_servers, streams_dlq), "share-group": (share_group_broker, share_dlq)}
    expected = {
        "streams": [
            ("b", f"{clicks}/0/1", "org.apache.kafka.common.errors.SerializationException",
             "Size of data received by LongDeserializer is not 8", None),
            ("c", f"{clicks}/0/2", "java.lang.IllegalArgumentException", "negative amount -7", None),
        ],
        "share-group": [
            ("k0", f"{orders}/0/0", None, "Offset rejected by client.", 1),
            ("k1", f"{orders}/0/1", None, "Offset rejected by client.", 1),
        ],
    }  # fmt: skip
    policies = {}
    for tool, (bootstrap, topic) in written.items():
        document = engine_policy(
            {"source": clicks, "retry": make_topic(f"{tool}-retry"), "dlq": topic, "output": totals},
            bootstrap,
        )
        policies[tool] = parse_policy(document)
        policy_file = tmp_path / f"{tool}.yaml"
        policy_file.write_text(yaml.safe_dump(document))
        listed = dlq("ls", "-f", str(policy_file), "-o", "json")
        assert listed.returncode == 0, listed.stderr
        items = sorted(json.loads(listed.stdout)["items"], key=lambda item: item["key"]["data"])
        assert [
            (i["key"]["data"], i["original"], i["errorClass"], i["errorMessage"], i["attempt"]) for i in items
        ] == expected[tool], tool
    shown = dlq("show", "-f", str(tmp_path / "streams.yaml"), "0/0")
    assert shown.returncode == 0, shown.stderr
    fields = dict(
        line.split(":", 1) for line in shown.stdout.splitlines() if line[:1].isupper() and ":" in line
    )
    assert fields["Original"].strip() == f"{clicks}/0/1", shown.stdout
    assert fields["Error class"].strip() == "org.apache.kafka.common.errors.SerializationException"
    assert "at org.apache.kafka.common.serialization.LongDeserializer" in shown.stdout  # the stack trace

    # The redrive (dry runs: the sending is the same for every family, test_redrive.py): each
    # selected by the columns the library's headers fill.
    selections = {
        "streams": {
            "errorClasses": ["IllegalArgumentException"],
            "filter": f"original_topic = '{clicks}' AND original_partition = 0 AND original_offset = 2 "
            "AND stacktrace LIKE 'java.lang.IllegalArgumentException: negative amount -7%'",
        },
        "share-group": {
            "filter": f"subscription = 'workers' AND attempts = 1 AND original_topic = '{orders}' "
            "AND original_offset = 1 AND error_message LIKE 'Offset rejected%'"
        },
    }
    samples = {"streams": [("c", "java.lang.IllegalArgumentException", "negative amount -7")], "share-group": [
        ("k1", None, "Offset rejected by client.")
    ]}  # fmt: skip
    for tool, selection in selections.items():
        redrive = parse_redrive(
            {
                "apiVersion": "sparkdlq.io/v1alpha1",
                "kind": "DeadLetterRedrive",
                "metadata": {"name": f"from-{tool}", "namespace": "tests"},
                "spec": {"policyRef": {"name": "test-policy"}, "dryRun": True, "selection": selection},
            }
        )
        found = Redrive(spark, policies[tool], redrive, checkpoint=None).dry_run()
        assert (found["considered"], found["matched"]) == (2, 1), tool
        assert [(s["key"], s["errorClass"], s["message"]) for s in found["samples"]] == samples[tool], tool


def run_kafka_interop(*commands: list[str]) -> Any:
    """The answers of the Kafka interop program (tests/interop/kafka) to ``commands``, run in one
    JVM: a mapping by command name."""
    args = [arg for command in commands for arg in ("--", *command)][1:]
    done = subprocess.run(
        ["java", "-cp", java_classpath("kafka-interop"), "io.sparkdlq.interop.KafkaDeadLetters", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)
