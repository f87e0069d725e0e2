"""``dlq-engine redrive``: a policy's dead letters sent back, on the real broker and Spark.

Dead letters are written to a dead-letter topic with the headers the engine writes
(``failure_headers``), so each selection can be checked against a known set."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from pyspark.sql import functions as F

from dlq_engine.job.redrive import (
    KAFKA_SCHEMA,
    DeadLettersExpired,
    Progress,
    Redrive,
    RedriveInputError,
    check_filter,
    dead_letter_columns,
    selected,
)
from dlq_engine.job.spark_filter import spark_filter_problem
from dlq_engine.model.policy import DeadLetterPolicy, parse_policy
from dlq_engine.model.redrive import DEFAULT_MAX_REDRIVES, Selection, parse_redrive
from dlq_engine.model.redrive_filter import ALLOWED_FUNCTIONS, COLUMNS
from dlq_engine.routing import headers as h
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_devtools.spark import submit_env
from tests.filter_corpus import CASES, REFLECT, function
from tests.helpers import engine_policy, read_all

BASE_MS = 1_795_000_000_000  # the dead letters' dlq.failed.at: BASE_MS + i minutes


def dead_letter(
    i: int,
    *,
    reason: str,
    error_class: str,
    redriven: int = 0,
    team: str = "billing",
    value: bytes | None = None,
) -> dict[str, Any]:
    headers = h.failure_headers(
        origin={
            h.ORIGINAL_TOPIC: "orders",
            h.ORIGINAL_PARTITION: str(i % 2),
            h.ORIGINAL_OFFSET: str(1000 + i),
            h.ORIGINAL_TIMESTAMP: str(BASE_MS - 60_000),
            h.FIRST_FAILURE_AT: str(BASE_MS - 30_000),
        },
        attempt=3 if reason == "exhausted" else 1,
        error_class=error_class,
        error_message=f"order {i} failed",
        stacktrace="Traceback ...",
        policy="tests/test-policy",
        subscription="tests",
        failed_at=BASE_MS + i * 60_000,
        reason=reason,
    )
    headers = [("trace", f"t{i}".encode()), ("team", team.encode()), *headers]
    if redriven:
        headers.append((h.REDRIVE_COUNT, str(redriven).encode()))
    return {
        "key": f"k{i}".encode(),
        "value": json.dumps({"id": i}).encode() if value is None else value,
        "headers": headers,
    }


#: Twelve dead letters: exhausted ValueErrors (0-5), terminated (6-8), non-retryable
#: json errors (9-10), and one already redriven three times (11).
def standard_set(value: Callable[[int], bytes | None] = lambda i: None) -> list[dict[str, Any]]:
    letters = [dead_letter(i, reason="exhausted", error_class="ValueError", value=value(i)) for i in range(6)]
    letters += [
        dead_letter(i, reason="terminated", error_class="shop.Fraud", team="risk") for i in range(6, 9)
    ]
    letters += [
        dead_letter(i, reason="non-retryable", error_class="json.decoder.JSONDecodeError") for i in (9, 10)
    ]
    letters += [dead_letter(11, reason="exhausted", error_class="ValueError", redriven=3)]
    return letters


def write(bootstrap: str, topic: str, letters: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for letter in letters:
        producer.produce(topic, **letter)
    assert producer.flush(60) == 0


@pytest.fixture
def names(make_topic: Callable[..., str]) -> dict[str, str]:
    return {
        "source": make_topic("src"),
        "retry": make_topic("retry", partitions=2),
        "dlq": make_topic("dlq", partitions=2),
        "output": make_topic("out"),
    }


@pytest.fixture
def policy(names: dict[str, str], bootstrap_servers: str) -> DeadLetterPolicy:
    return parse_policy(engine_policy(names, bootstrap_servers))


def redrive_of(**spec: Any) -> Any:
    document = {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": "fix-1", "namespace": "tests"},
        "spec": {"policyRef": {"name": "test-policy"}, **spec},
    }
    return parse_redrive(document)


#: Selections of the standard set and how many each matches (never the one redriven 3 times).
SELECTIONS: dict[str, tuple[dict[str, Any], int]] = {
    "everything-but-the-guarded": ({}, 11),
    "reasons": ({"reasons": ["terminated", "non-retryable"]}, 5),
    "simple-class-name": ({"errorClasses": ["JSONDecodeError"]}, 2),
    "qualified-class-names": ({"errorClasses": ["shop.Fraud", "ValueError"]}, 9),
    "keys": ({"keys": ["k1", "k7", "k11"]}, 2),
    "headers": ({"headers": {"team": "risk"}}, 3),
    "time-range": ({"failedAfter": "2026-11-18T11:08:00Z", "failedBefore": "2026-11-18T11:11:00Z"}, 3),
    "sql-filter": ({"filter": "error_message LIKE '%order 1%' AND attempts = 1"}, 1),
    "combined": ({"reasons": ["exhausted"], "filter": "original_offset >= 1003"}, 3),
    "sql-filter-on-headers": ({"filter": "CAST(headers['team'] AS STRING) = 'risk' AND attempts < 3"}, 3),
}


def test_a_dry_run_and_each_selection(
    spark: Any, policy: DeadLetterPolicy, names: dict[str, str], bootstrap_servers: str
) -> None:
    """One dry run through the whole job; then every selection counted on the same dead letters
    in one Spark job (a dry run per selection took 3 s each)."""
    write(bootstrap_servers, names["dlq"], standard_set())
    selection, matched = SELECTIONS["reasons"]
    found = Redrive(spark, policy, redrive_of(selection=selection, dryRun=True), checkpoint=None).dry_run()

    assert found["considered"] == 12
    assert found["matched"] == matched
    assert found["byReason"] == {"terminated": 3, "non-retryable": 2}
    assert len(found["samples"]) == 5
    assert read_all(bootstrap_servers, names["retry"]) == []  # a dry run writes nothing

    records = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", names["dlq"])
        .option("includeHeaders", "true")
        .load()
    )
    frame = dead_letter_columns(records)
    guard = F.col("redrive_count") < F.lit(DEFAULT_MAX_REDRIVES)
    counts = []
    for name, (selection, _) in SELECTIONS.items():
        redrive = redrive_of(selection=selection)
        check_filter(spark, redrive)
        counts.append(F.sum((selected(frame, redrive) & guard).cast("int")).alias(name))
    [row] = frame.agg(*counts).collect()  # one Spark job for them all
    assert row.asDict() == {name: matched for name, (_, matched) in SELECTIONS.items()}


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        # In the filter language, but Spark's analysis refuses it: a map is not a number.
        pytest.param("headers > 1", r"^spec.selection.filter: .*DATATYPE_MISMATCH", id="analysis"),
        # Outside it, given to the engine as a model the parser never saw.
        pytest.param(REFLECT, f"^spec.selection.filter: {re.escape(function('reflect'))}$", id="reflect"),
    ],
)
def test_a_bad_filter_is_refused_before_anything_is_read(
    spark: Any, policy: DeadLetterPolicy, text: str, refused: str
) -> None:
    spark.conf.set("spark.sql.runSQLOnFiles", "true")  # as a policy's sparkConf may have it
    unchecked = dataclasses.replace(redrive_of(dryRun=True), selection=Selection(filter=text))
    job = Redrive(spark, policy, unchecked, checkpoint=None)
    assert spark.conf.get("spark.sql.runSQLOnFiles") == "false"  # the redrive's session reads no file
    with pytest.raises(RedriveInputError, match=refused):
        job.dry_run()


def test_spark_s_parser_agrees_with_the_model_on_the_corpus(spark: Any) -> None:
    """Each filter of tests/filter_corpus.py through Spark's parser and the walk of its tree;
    the allowed ones analyse against the dead-letter columns, whose names are the model's, and
    every allowed function is one of Spark's own."""
    disagreements = {}
    for name, case in CASES.items():
        found = spark_filter_problem(spark, case.text)
        expected = {
            "same": found == case.problem,
            "refuses": found is not None,
            "allows": found is None,
        }[case.spark]
        if not expected:
            disagreements[name] = (case.spark, case.problem, found)
    assert not disagreements, disagreements

    frame = dead_letter_columns(spark.createDataFrame([], KAFKA_SCHEMA))
    assert tuple(frame.columns) == COLUMNS
    allowed = [F.expr(case.text) for case in CASES.values() if case.problem is None]
    assert len(frame.select(*allowed).schema) == len(allowed)  # analysis raises here
    system = {row.function for row in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}
    assert not ALLOWED_FUNCTIONS - system, sorted(ALLOWED_FUNCTIONS - system)


def _written_by(profile: str, *, keep_ours: bool = False) -> list[tuple[str, bytes | None]]:
    """A failure's headers as ``profile`` writes them (Spring's binary numbers, Connect's text),
    without the ``dlq.*`` ones unless ``keep_ours``."""
    written = h.failure_headers(
        origin={h.ORIGINAL_TOPIC: "orders", h.ORIGINAL_PARTITION: "2", h.ORIGINAL_OFFSET: "4096"},
        attempt=3,
        error_class="billing.errors.FraudError",
        error_message="flagged",
        stacktrace="Traceback ...",
        policy="payments/orders",
        subscription="billing",
        failed_at=BASE_MS,
        reason="exhausted",
        profiles=("spark-dlq", profile) if profile != "spark-dlq" else ("spark-dlq",),
    )
    return [(k, v) for k, v in written if keep_ours or not k.startswith(h.PREFIX)]


def test_the_redrive_and_kubectl_dlq_decode_a_dead_letter_alike(spark: Any) -> None:
    """The redrive's columns (Spark) and kubectl dlq's ``DeadLetter`` (Python) read the same facts
    from the same headers: ours, Spring's, Connect's, Kafka Streams', a share group's, forged ones."""
    from dlq_engine.model.dead_letter import DeadLetter

    header_sets = [
        [*_written_by("spark-dlq", keep_ours=True), (h.REDRIVE_COUNT, b"2")],
        _written_by("spring"),
        _written_by("connect"),
        [(h.STREAMS_TOPIC, b"orders"), (h.STREAMS_PARTITION, b"1"), (h.STREAMS_OFFSET, b"7"),
         (h.STREAMS_EXCEPTION, b"org.apache.kafka.common.errors.SerializationException")],
        [(h.SHARE_GROUP_TOPIC, b"orders"), (h.SHARE_GROUP_PARTITION, b"0"), (h.SHARE_GROUP_OFFSET, b"9"),
         (h.SHARE_GROUP_DELIVERY_COUNT, b"5"), (h.SHARE_GROUP_MESSAGE, b"delivery count reached")],
        [(h.ATTEMPT, b"x"), (h.ORIGINAL_TOPIC, b"orders"), (h.ORIGINAL_PARTITION, b"\xff"),
         (h.FAILED_AT, b"soon"), (h.REDRIVE_COUNT, None), (h.REASON, "é".encode())],
    ]  # fmt: skip
    rows = [(b"k", b"v", "dlq", 0, i, None, 0, headers) for i, headers in enumerate(header_sets)]
    frame = dead_letter_columns(spark.createDataFrame(rows, KAFKA_SCHEMA))
    facts = "original_topic original_partition original_offset error_class error_message stacktrace reason attempts failed_at_ms redrive_count"
    found = [tuple(row) for row in frame.orderBy("offset").select(*facts.split()).collect()]
    expected = []
    for i, headers in enumerate(header_sets):
        letter = DeadLetter(0, i, None, b"k", b"v", tuple(headers))
        topic, partition, offset = (letter.original or "//").split("/")
        expected.append((
            topic or None, None if partition in ("", "?") else int(partition),
            None if offset in ("", "?") else int(offset), letter.error_class, letter.error_message,
            letter.stacktrace, letter.reason, letter.attempt or 0, letter.failed_at, letter.redrive_count or 0,
        ))  # fmt: skip
    assert found == expected


def test_redrive_to_source_resets_attempts_keeps_origin_and_guards_loops(
    spark: Any, policy: DeadLetterPolicy, names: dict[str, str], bootstrap_servers: str, tmp_path: Path
) -> None:
    write(bootstrap_servers, names["dlq"], standard_set())
    before = int(time.time() * 1000)
    progress = Redrive(
        spark, policy, redrive_of(selection={"reasons": ["exhausted"]}), checkpoint=tmp_path
    ).run()

    assert progress.state == "Succeeded"
    assert (progress.counts.matched, progress.counts.redriven, progress.counts.skipped_max_redrives) == (
        6,
        6,
        1,
    )
    assert progress.counts.possible_duplicates == 0
    sent = read_all(bootstrap_servers, names["retry"])
    assert sorted(r.key for r in sent) == [f"k{i}".encode() for i in range(6)]
    for record in sent:
        assert record.header(h.ATTEMPT) == "0"
        assert int(record.header(h.DELIVER_AT) or 0) >= before
        assert record.header(h.REDRIVE_COUNT) == "1"
        assert record.header(h.REDRIVE_NAME) == "tests/fix-1"
        assert record.header(h.ORIGINAL_TOPIC) == "orders"
        assert record.header(h.FIRST_FAILURE_AT) == str(BASE_MS - 30_000)
        assert record.header("trace") is not None
        assert record.header(h.ERROR_CLASS) is None  # the old failure is not carried
        assert record.header(h.REASON) is None
    assert json.loads(sent[0].value or b"") == {"id": int((sent[0].key or b"k0")[1:])}
    summary = progress.summary()
    assert summary["toConsider"] == summary["considered"] == 12


def test_redrive_to_a_topic_and_to_retry(
    spark: Any,
    policy: DeadLetterPolicy,
    names: dict[str, str],
    bootstrap_servers: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    write(bootstrap_servers, names["dlq"], standard_set())
    parking = make_topic("parking")
    Redrive(
        spark,
        policy,
        redrive_of(selection={"reasons": ["terminated"]}, destination={"type": "topic", "topic": parking}),
        checkpoint=tmp_path / "a",
    ).run()
    parked = read_all(bootstrap_servers, parking)
    assert len(parked) == 3
    assert all(r.header(h.ATTEMPT) is None and r.header(h.REDRIVE_COUNT) == "1" for r in parked)

    Redrive(
        spark,
        policy,
        redrive_of(selection={"keys": ["k2"]}, destination={"type": "retry"}),
        checkpoint=tmp_path / "b",
    ).run()
    [retried] = read_all(bootstrap_servers, names["retry"])
    assert retried.header(h.ATTEMPT) == "3"  # the retry stage, where it left off


def test_only_the_snapshot_is_redriven_and_the_rate_holds(
    spark: Any, policy: DeadLetterPolicy, names: dict[str, str], bootstrap_servers: str, tmp_path: Path
) -> None:
    """Dead letters that arrive while a redrive runs are not picked up by it."""
    first = [dead_letter(i, reason="exhausted", error_class="ValueError") for i in range(40)]
    write(bootstrap_servers, names["dlq"], first)
    job = Redrive(spark, policy, redrive_of(ratePerSecond=20), checkpoint=tmp_path)
    result: list[Progress] = []
    runner = threading.Thread(target=lambda: result.append(job.run()))
    started = time.monotonic()
    runner.start()
    deadline = time.monotonic() + 60
    while not (tmp_path / "progress.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the snapshot is recorded before the first chunk is read
    write(
        bootstrap_servers,
        names["dlq"],
        [dead_letter(i, reason="exhausted", error_class="ValueError") for i in range(100, 130)],
    )
    runner.join(180)
    took = time.monotonic() - started

    [progress] = result
    assert progress.counts.redriven == 40
    assert len(read_all(bootstrap_servers, names["retry"])) == 40
    assert took >= 40 / 20 * 0.9  # 40 messages at 20 per second: not faster (bench/redrive.py measures it)


def test_cancel_stops_after_the_chunk_and_a_rerun_resumes(
    spark: Any, policy: DeadLetterPolicy, names: dict[str, str], bootstrap_servers: str, tmp_path: Path
) -> None:
    write(
        bootstrap_servers,
        names["dlq"],
        [dead_letter(i, reason="exhausted", error_class="ValueError") for i in range(60)],
    )
    redrive = redrive_of(ratePerSecond=10)
    job = Redrive(spark, policy, redrive, checkpoint=tmp_path)
    result: list[Progress] = []
    runner = threading.Thread(target=lambda: result.append(job.run()))
    runner.start()
    # Cancelled once its first chunk is on the topic: at 10 per second the rest takes seconds.
    assert read_all(bootstrap_servers, names["retry"], expect=1, timeout=120)
    job.stop()
    runner.join(60)
    [cancelled] = result
    assert cancelled.state == "Cancelled"
    assert 0 < cancelled.counts.redriven < 60
    assert Progress.load(tmp_path / "progress.json") == cancelled

    resumed = Redrive(spark, policy, redrive, checkpoint=tmp_path).run()
    assert resumed.state == "Succeeded"
    assert resumed.counts.redriven == 60
    assert len(read_all(bootstrap_servers, names["retry"])) == 60


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """The broker deletes the records of ``topic`` below ``before`` (partition -> offset), as
    retention does: the partitions' earliest offsets move up (Admin API DeleteRecords)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = [TopicPartition(topic, partition, offset) for partition, offset in before.items()]
    for future in admin.delete_records(wanted, request_timeout=30).values():
        future.result(timeout=60)


@pytest.mark.parametrize("fail_on_gaps", [False, True], ids=["counted", "failOnGaps"])
def test_dead_letters_that_expire_before_they_are_read_are_counted_or_stop_it(
    spark: Any,
    policy: DeadLetterPolicy,
    names: dict[str, str],
    bootstrap_servers: str,
    tmp_path: Path,
    fail_on_gaps: bool,
) -> None:
    """A redrive records its snapshot, is suspended before it reads anything (a real path: spec.
    suspend, then resumed); meanwhile the broker deletes the first dead letters of partition 0.
    Resumed, it counts them as expired and redrives the rest, or, with failOnGaps, stops before
    writing anything, naming the topic, the partition and the offsets; resubmitted, it fails the
    same way at once."""
    write(bootstrap_servers, names["dlq"], standard_set())  # 12 letters, partitions by key
    redrive = redrive_of(
        selection={"reasons": ["exhausted", "terminated", "non-retryable"]}, failOnGaps=fail_on_gaps
    )
    suspended = Redrive(spark, policy, redrive, checkpoint=tmp_path)
    suspended.stop()
    assert suspended.run().state == "Cancelled"
    snapshot = Progress.load(tmp_path / "progress.json")
    assert snapshot is not None
    assert snapshot.counts.considered == 0
    in_zero = snapshot.snapshot[0]
    assert in_zero >= 3
    delete_records(bootstrap_servers, names["dlq"], {0: 3})

    resumed = Redrive(spark, policy, redrive, checkpoint=tmp_path)
    gap = f"topic {names['dlq']!r} partition 0 offsets 0-2 (3 dead letters)"
    if fail_on_gaps:
        with pytest.raises(DeadLettersExpired, match=re.escape(gap)) as failed:
            resumed.run()
        assert failed.value.reason == "DeadLettersExpired"
        stopped = Progress.load(tmp_path / "progress.json")
        assert stopped is not None
        assert (stopped.state, stopped.counts.redriven, stopped.next) == ("Failed", 0, snapshot.next)
        assert read_all(bootstrap_servers, names["retry"]) == []  # nothing written
        with pytest.raises(DeadLettersExpired, match=re.escape(gap)):  # a resubmitted driver
            Redrive(spark, policy, redrive, checkpoint=tmp_path).run()
        return
    progress = resumed.run()
    assert progress.state == "Succeeded"
    assert (progress.counts.expired, progress.expired) == (3, {0: 3})
    assert progress.counts.considered == 12 - 3
    summary = progress.summary()
    assert summary["expired"] == 3
    assert summary["partitions"]["0"] == {"next": in_zero, "end": in_zero, "expired": 3}
    assert "expired" not in summary["partitions"]["1"]
    # 12 minus the one already redriven three times minus the three gone.
    assert len(read_all(bootstrap_servers, names["retry"])) == progress.counts.redriven


def cli_env() -> dict[str, str]:
    env = submit_env()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return env


def test_a_killed_redrive_loses_nothing_and_counts_its_duplicates(
    names: dict[str, str], bootstrap_servers: str, tmp_path: Path
) -> None:
    """SIGKILL of the redrive process mid-way, then the same command again: every selected dead
    letter is sent, duplicates come only from the chunk in flight, and are counted."""
    write(
        bootstrap_servers,
        names["dlq"],
        [dead_letter(i, reason="exhausted", error_class="ValueError") for i in range(80)],
    )
    policy_file, redrive_file = tmp_path / "policy.yaml", tmp_path / "redrive.yaml"
    policy_file.write_text(yaml.safe_dump(engine_policy(names, bootstrap_servers)))
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
    command = [
        sys.executable,
        "-m",
        "dlq_engine.cli",
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
    ]
    first = subprocess.Popen(
        command, env=cli_env(), start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    progress_file = tmp_path / "cp" / "progress.json"
    while time.monotonic() < deadline:
        progress = Progress.load(progress_file) if progress_file.exists() else None
        if progress is not None and progress.counts.redriven >= 20:
            break
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(30)
    assert not (tmp_path / "status.json").exists()

    done = subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "Succeeded"
    assert status["matched"] == status["redriven"] == 80
    assert status["expired"] == 0  # nothing deleted by the broker meanwhile
    sent = read_all(bootstrap_servers, names["retry"])
    keys = [r.key for r in sent]
    assert set(keys) == {f"k{i}".encode() for i in range(80)}
    assert len(keys) - 80 <= status["possibleDuplicates"]
    assert "dlq-engine: redrive tests/fix-1 succeeded: matched=80 redriven=80" in done.stdout


def test_the_cli_dry_run_and_its_refusals(
    names: dict[str, str], bootstrap_servers: str, tmp_path: Path
) -> None:
    write(bootstrap_servers, names["dlq"], standard_set())
    policy_file, redrive_file = tmp_path / "policy.yaml", tmp_path / "redrive.yaml"
    policy_file.write_text(yaml.safe_dump(engine_policy(names, bootstrap_servers)))
    document = {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": "fix-1", "namespace": "tests"},
        "spec": {
            "policyRef": {"name": "test-policy"},
            "dryRun": True,
            "selection": {"reasons": ["terminated"]},
        },
    }
    redrive_file.write_text(yaml.safe_dump(document))
    base = [
        sys.executable,
        "-m",
        "dlq_engine.cli",
        "redrive",
        "--policy",
        str(policy_file),
        "--master",
        "local[1]",
    ]

    done = subprocess.run(
        [*base, "-f", str(redrive_file)], env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[:3] == [
        f"dlq-engine: dry run of redrive tests/fix-1: 3 of 12 dead letters would be sent to {names['retry']!r} "
        "(0 skipped: redriven 3 times already)",
        "  by reason: terminated=3",
        "  by error class: shop.Fraud=3",
    ]

    document["spec"]["selection"] = {"reasons": ["exploded"]}
    document["spec"]["ratePerSecond"] = -1
    redrive_file.write_text(yaml.safe_dump(document))
    bad = subprocess.run(
        [*base, "-f", str(redrive_file)], env=cli_env(), capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2
    assert (
        "spec.selection.reasons: must each be one of exhausted, terminated, non-retryable, "
        "ordering-overflow, too-large, retry-timeout, got 'exploded'" in bad.stderr
    )
    assert "spec.ratePerSecond: must be 0 (no limit) or more, got -1.0" in bad.stderr

    document["spec"] = {"policyRef": {"name": "another"}}
    redrive_file.write_text(yaml.safe_dump(document))
    other = subprocess.run(
        [*base, "-f", str(redrive_file)], env=cli_env(), capture_output=True, text=True, timeout=300
    )
    assert other.returncode == 2
    assert (
        "dlq-engine: spec.policyRef.name is 'another', but the policy given is 'test-policy'" in other.stderr
    )
