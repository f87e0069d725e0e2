"""The dead-letter table (``spec.deadLetter.table``) on the real broker and Spark, both formats.

The table is written in the same micro-batch as the Kafka records, after them: it holds exactly
the dead letters of the dead-letter topic; a failed table write fails the batch (nothing of it
committed) and a restart writes its rows once; a batch replayed after its table write (a crash
before the commit) adds no row twice; and the topics see what they see without a table. On
Pulsar the same table holds the same dead letters with Pulsar's positions, once across a replay.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer
from pyspark.sql import functions as F

from dlq_engine.exits import EXIT_FAILED, EXIT_OK
from dlq_engine.job.dead_letter_table import COLUMNS, PARTITION_COLUMNS
from dlq_engine.model.pulsar_ids import pulsar_offset
from spark_dlq_devtools.chaos import start_engine
from spark_dlq_devtools.pulsar import Message, PulsarBroker
from tests.helpers import DELTA_TEST_CONF, Record, engine_policy, produce, read_all
from tests.processors.recording import CALLS_HEADER

FORMATS = [pytest.param("delta", id="delta"), pytest.param("parquet", id="parquet")]
#: The dead-letter topic's limit in the first test, and a dead letter that does not fit it: the
#: topic gets a stub, the table the value.
DEAD_LETTER_LIMIT = 1024 * 1024
TOO_LARGE = b"terminate:" + b"x" * (DEAD_LETTER_LIMIT + 50_000)
RECORDING = {"entrypoint": "tests.processors.recording:process"}
#: Timestamp columns, read back as epoch milliseconds to compare with the headers.
TIMES = ("original_timestamp", "first_failure_at", "failed_at")


def table_spec(tmp_path: Path, kind: str) -> dict[str, str]:
    return {"format": kind, "path": str(tmp_path / f"dead-letters-{kind}")}


def table_rows(spark: Any, table: dict[str, str]) -> list[dict[str, Any]]:
    frame = spark.read.format(table["format"]).load(table["path"])
    millis = [F.unix_millis(F.col(name)).alias(f"{name}_ms") for name in TIMES]
    rows = [row.asDict(recursive=True) for row in frame.select("*", *millis).collect()]
    for row in rows:  # binary columns come back as bytearray
        row["key"], row["value"] = bytes(row["key"]), bytes(row["value"])
        row["headers"] = {k: bytes(v) for k, v in row["headers"].items()}
    return rows


def header_map(record: Record) -> dict[str, bytes]:
    """The record's own headers (not ``dlq.*``), the first value of a repeated key."""
    result: dict[str, bytes] = {}
    for key, value in record.headers:
        if not key.startswith("dlq."):
            result.setdefault(key, value)
    return result


def committed(checkpoint: Path, log: str) -> list[int]:
    """The batch ids in the checkpoint's ``commits`` or ``offsets`` log."""
    folder = checkpoint / log
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def forget_commit(checkpoint: Path, batch: int) -> None:
    """Make the checkpoint what a crash after ``batch``'s table write and before Spark's commit
    leaves: ``batch`` planned, not committed, nothing after it."""
    for log in ("commits", "offsets"):
        for later in committed(checkpoint, log):
            if later > batch or (log == "commits" and later == batch):
                for name in (str(later), f".{later}.crc"):
                    (checkpoint / log / name).unlink(missing_ok=True)
    assert committed(checkpoint, "offsets")[-1] == batch


def delta_rows(table: dict[str, str]) -> int:
    """Rows appended to a Delta table, from its log alone (no Spark job beside the engine's)."""
    total = 0
    for path in (Path(table["path"]) / "_delta_log").glob("*.json"):
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info is not None:
                total += int(info["operationMetrics"]["numOutputRows"])
    return total


def calls(path: Path) -> collections.Counter[str]:
    """How often the processor was called for each ``key:attempt``."""
    return collections.Counter(path.read_text().split())


@pytest.mark.parametrize("kind", FORMATS)
def test_the_table_holds_exactly_the_dead_letters_of_the_topic(
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    make_topic: Callable[..., str],
    engine: Callable[..., Any],
    tmp_path: Path,
    kind: str,
) -> None:
    names = topics(partitions=2)
    names["dlq"] = make_topic("dlq", partitions=2, config={"max.message.bytes": str(DEAD_LETTER_LIMIT)})
    table = table_spec(tmp_path, kind)
    calls_file = tmp_path / "calls"
    own = [(CALLS_HEADER, str(calls_file).encode()), ("team", b"billing"), ("team", b"second")]
    produce(
        bootstrap_servers,
        names["source"],
        [
            (b"ok-1", b"ok:a"),
            (b"ack-1", b"ack"),
            (b"flaky-1", b"flaky:1"),
            (b"fail-1", b"fail:z"),
            (b"nonretry-1", b"nonretry:k"),
            *((b"term-%d" % i, b"terminate:%d" % i) for i in range(10)),
        ],
        headers=own,
    )
    # Too large for the dead-letter topic (the source topic takes 2 MiB, the broker's default here).
    producer = Producer({"bootstrap.servers": bootstrap_servers, "message.max.bytes": 2 * 1024 * 1024})
    producer.produce(names["source"], key=b"big-1", value=TOO_LARGE, headers=own)
    assert producer.flush(30) == 0
    # A redriven message (on the retry topic, due now) that fails for good again.
    produce(
        bootstrap_servers,
        names["retry"],
        [(b"redriven-1", b"terminate:again")],
        headers=[(CALLS_HEADER, str(calls_file).encode()), ("dlq.redrive.count", b"2")],
    )

    running = engine(
        names,
        processor=RECORDING,
        retry={"nonRetryableErrors": ["LookupError"]},
        deadLetter={"table": table},
    )
    # 17 messages, 3 redeliveries (fail-1 twice, flaky-1 once).
    running.wait_for(total=20, dead=14)
    query_id = str(running.run.query.id)
    assert running.stop() == EXIT_OK

    dead = read_all(bootstrap_servers, names["dlq"])  # stopped: read to the end
    rows = table_rows(spark, table)
    by_key = {row["key"]: row for row in rows}
    assert len(rows) == len(by_key) == len(dead) == 14
    assert sorted(by_key) == sorted(r.key for r in dead)
    for record in dead:
        row = by_key[record.key]
        assert row["value"] == (record.value if record.key != b"big-1" else TOO_LARGE)
        assert row["reason"] == record.header("dlq.reason")
        assert row["error_class"] == record.header("dlq.error.class")
        assert row["error_message"] == record.header("dlq.error.message")
        assert row["stacktrace"] == record.header("dlq.error.stacktrace")
        assert row["original_topic"] == record.header("dlq.original.topic")
        assert row["original_partition"] == int(record.header("dlq.original.partition") or "")
        assert row["original_offset"] == int(record.header("dlq.original.offset") or "")
        assert row["original_timestamp_ms"] == int(record.header("dlq.original.timestamp") or "")
        assert row["attempts"] == int(record.header("dlq.attempt") or "")
        assert row["first_failure_at_ms"] == int(record.header("dlq.first.failure.at") or "")
        assert row["failed_at_ms"] == int(record.header("dlq.failed.at") or "")
        assert row["policy"] == record.header("dlq.policy") == "tests/test-policy"
        assert row["subscription"] == record.header("dlq.subscription") == "tests"
        assert row["headers"] == header_map(record)
        assert row["query_id"] == query_id
        assert row["batch_id"] >= 0
    assert by_key[b"term-0"]["headers"] == {CALLS_HEADER: str(calls_file).encode(), "team": b"billing"}
    assert {key: row["reason"] for key, row in by_key.items() if not key.startswith(b"term-")} == {
        b"fail-1": "exhausted",
        b"nonretry-1": "non-retryable",
        b"redriven-1": "terminated",
        b"big-1": "too-large",
    }
    [stub] = [record for record in dead if record.key == b"big-1"]
    assert stub.value is None
    assert stub.header("dlq.value.size") == str(len(TOO_LARGE))
    assert by_key[b"big-1"]["error_class"] == "dlq_engine.model.processor_api.Terminate"
    assert (by_key[b"fail-1"]["attempts"], by_key[b"fail-1"]["error_class"]) == (3, "RuntimeError")
    assert by_key[b"nonretry-1"]["error_class"] == "KeyError"
    assert by_key[b"redriven-1"]["redrive_count"] == 2
    assert {row["redrive_count"] for key, row in by_key.items() if key != b"redriven-1"} == {0}
    assert {row["original_partition"] for row in rows if row["key"].startswith(b"term-")} == {0, 1}

    frame = spark.read.format(kind).load(table["path"])
    types = [(field.name, field.dataType.simpleString()) for field in frame.schema]
    if kind == "delta":
        assert types == list(COLUMNS)
    else:
        # The partition folders come last, their types inferred by the reader.
        assert types[: -len(PARTITION_COLUMNS)] == list(COLUMNS[: -len(PARTITION_COLUMNS)])
        assert [name for name, _ in types[-len(PARTITION_COLUMNS) :]] == list(PARTITION_COLUMNS)

    # The processor saw each message once per attempt: the persisted batch was not recomputed for
    # the table's write. And the observed metrics of every batch reached the runner.
    seen = calls(calls_file)
    assert set(seen.values()) == {1}, seen
    assert len(seen) == 20
    counts = running.run.totals.counts
    assert {name: counts[name] for name in ("total", "output", "acked", "retried", "dead", "ignored")} == {
        "total": 20,
        "output": 2,
        "acked": 1,
        "retried": 3,
        "dead": 14,
        "ignored": 0,
    }
    assert (
        counts["dead_exhausted"],
        counts["dead_terminated"],
        counts["dead_non_retryable"],
        counts["dead_too_large"],
    ) == (1, 11, 1, 1)
    assert running.run.totals.max_lateness_ms is not None  # the redeliveries' lateness was observed


@pytest.mark.parametrize("kind", FORMATS)
def test_a_failed_table_write_fails_the_batch_and_a_restart_writes_it_once(
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    names = topics()
    table = table_spec(tmp_path, kind)
    blocker = Path(table["path"])
    blocker.write_text("a file where the table's folder should be\n")
    checkpoint = tmp_path / "cp"
    produce(bootstrap_servers, names["source"], [(b"a", b"ok:1"), (b"b", b"ok:2")])

    first = engine(names, checkpoint=checkpoint, deadLetter={"table": table})
    # Batches without dead letters do not touch the table: they commit.
    first.wait_for(total=2)
    doomed = [(b"dead-%d" % i, b"terminate:%d" % i) for i in range(5)]
    produce(bootstrap_servers, names["source"], [*doomed, (b"c", b"ok:3")])
    assert first.join(180) == EXIT_FAILED, first.describe()
    # One line says what failed, where, and the file system's or Delta's own reason.
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dlq-engine:")]
    reason = {
        "delta": "org.apache.spark.sql.delta.DeltaIOException: [DELTA_CANNOT_CREATE_LOG_PATH] Cannot create",
        "parquet": "org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory",
    }[kind]
    assert line.startswith(
        f"dlq-engine: the query failed: the dead-letter table write of micro-batch "
        f"{committed(checkpoint, 'offsets')[-1]} ({kind} at {table['path']}) failed: {reason}"
    ), line
    # The failed batch was never committed: planned (its offsets logged), not in the commit log,
    # not counted.
    assert first.run.totals.counts["total"] == 2
    failed = committed(checkpoint, "offsets")[-1]
    assert committed(checkpoint, "commits")[-1] == failed - 1
    assert blocker.is_file()

    blocker.unlink()
    second = engine(names, checkpoint=checkpoint, once=True, deadLetter={"table": table})
    assert second.join(180) == EXIT_OK, second.describe()
    rows = table_rows(spark, table)
    assert sorted(row["key"] for row in rows) == [key for key, _ in doomed]
    assert {row["batch_id"] for row in rows} == {failed}  # the replayed batch, under its own id
    # The topic, at-least-once as always: the failed batch had written its Kafka records before
    # the table refused its rows, and the replay wrote them again.
    dead = read_all(bootstrap_servers, names["dlq"])
    assert collections.Counter(r.key for r in dead) == {key: 2 for key, _ in doomed}
    output = read_all(bootstrap_servers, names["output"])
    assert {r.value for r in output} == {b"1", b"2", b"3"}


@pytest.mark.parametrize("kind", FORMATS)
def test_a_batch_replayed_after_its_table_write_adds_no_row_twice(
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
    kind: str,
) -> None:
    """A crash after the table write and before Spark's commit (SIGKILL, a lost driver), made
    exact: the batch's entry in the commit log is removed, so the restart replays it."""
    names = topics()
    table = table_spec(tmp_path, kind)
    checkpoint = tmp_path / "cp"
    doomed = [(b"dead-%d" % i, b"terminate:%d" % i) for i in range(6)]
    produce(bootstrap_servers, names["source"], doomed)

    first = engine(names, checkpoint=checkpoint, deadLetter={"table": table})
    first.wait_for(dead=6)
    assert first.stop() == EXIT_OK
    [batch] = {row["batch_id"] for row in table_rows(spark, table)}
    forget_commit(checkpoint, batch)

    second = engine(names, checkpoint=checkpoint, once=True, deadLetter={"table": table})
    assert second.join(180) == EXIT_OK, second.describe()
    assert second.run.totals.counts["dead"] == 6  # the batch was routed again ...
    dead = read_all(bootstrap_servers, names["dlq"])
    assert collections.Counter(r.key for r in dead) == {key: 2 for key, _ in doomed}  # ... and written again
    rows = table_rows(spark, table)
    assert sorted(row["key"] for row in rows) == [key for key, _ in doomed]  # but its rows once
    if kind == "delta":
        # Delta skipped the replayed write (txnAppId/txnVersion): one commit made the table.
        history = spark.read.json(f"{table['path']}/_delta_log/*.json").where("commitInfo IS NOT NULL")
        assert history.count() == 1


def test_on_pulsar_the_table_holds_the_topics_dead_letters_once_across_a_replay(
    spark: Any,
    pulsar: PulsarBroker,
    pulsar_topics: Callable[..., dict[str, str]],
    pulsar_engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """On Pulsar (``test_the_table_holds_exactly_...`` and ``test_a_batch_replayed_...`` on
    Kafka): a row per dead letter of the topic, its columns the letter's properties, the
    original position Pulsar's (partition index, packed message id, publish time); then the
    last batch with dead letters, a retry's, is replayed from its planned offsets and its
    delay-stage state, and writes its letters to the topic again but no row twice."""
    names = pulsar_topics(partitions=2)
    table = table_spec(tmp_path, "delta")
    checkpoint = tmp_path / "cp"
    team = {"team": "billing"}
    pulsar.produce(
        names["source"],
        [
            Message("ok-1", b"ok:a", team),
            Message("fail-1", b"fail:z", team),
            Message("nonretry-1", b"nonretry:k", team),
            *(Message(f"term-{i}", f"terminate:{i}".encode(), team) for i in range(6)),
        ],
    )
    # A redriven message (on the retry topic, due now) that fails for good again.
    pulsar.produce(names["retry"], [Message("redriven-1", b"terminate:again", {"dlq.redrive.count": "2"})])
    spec: dict[str, Any] = {"retry": {"nonRetryableErrors": ["LookupError"]}, "deadLetter": {"table": table}}
    running = pulsar_engine(names, checkpoint=checkpoint, **spec)
    # 10 messages, 2 redeliveries (fail-1's); 9 dead letters.
    running.wait_for(total=12, dead=9)
    query_id = str(running.run.query.id)
    assert running.stop() == EXIT_OK

    dead = pulsar.read_all(names["dlq"])
    source = {m.key: m for m in pulsar.read_all(names["source"])}
    rows = table_rows(spark, table)
    by_key = {row["key"]: row for row in rows}
    assert len(rows) == len(by_key) == len(dead) == 9
    for letter in dead:
        props = letter.properties
        row = by_key[(letter.key or "").encode()]
        assert row["value"] == letter.value
        assert (row["reason"], row["error_class"], row["error_message"], row["stacktrace"]) == (
            props["dlq.reason"],
            props["dlq.error.class"],
            props["dlq.error.message"],
            props.get("dlq.error.stacktrace"),
        )
        assert (row["original_topic"], row["original_partition"], row["original_offset"]) == (
            props["dlq.original.topic"],
            int(props["dlq.original.partition"]),
            int(props["dlq.original.offset"]),
        )
        assert row["original_timestamp_ms"] == int(props["dlq.original.timestamp"])
        assert row["attempts"] == int(props["dlq.attempt"]) == int(props["RECONSUMETIMES"])
        assert row["failed_at_ms"] == int(props["dlq.failed.at"])
        assert row["first_failure_at_ms"] == int(props["dlq.first.failure.at"])
        # The message's own properties and the Java client's (REAL_TOPIC, ORIGIN_MESSAGE_ID, ...).
        assert row["headers"] == {k: v.encode() for k, v in props.items() if not k.startswith("dlq.")}
        assert row["query_id"] == query_id
        original = source.get(letter.key)
        if original is not None:
            ledger, entry, partition, batch = (int(part) for part in original.message_id.split(":"))
            assert (row["original_partition"], row["original_offset"], row["original_timestamp_ms"]) == (
                partition,
                pulsar_offset(ledger, entry, batch),
                original.publish_ms,
            )
            assert row["original_topic"] == names["source"]
            assert row["headers"]["team"] == b"billing"
    assert {key: row["reason"] for key, row in by_key.items() if not key.startswith(b"term-")} == {
        b"fail-1": "exhausted",
        b"nonretry-1": "non-retryable",
        b"redriven-1": "terminated",
    }
    assert by_key[b"redriven-1"]["redrive_count"] == 2

    # The last batch with dead letters (fail-1's, released by the delay stage) is replayed.
    batches = sorted({row["batch_id"] for row in rows})
    replayed = {row["key"].decode() for row in rows if row["batch_id"] == batches[-1]}
    assert "fail-1" in replayed
    forget_commit(checkpoint, batches[-1])
    second = pulsar_engine(names, checkpoint=checkpoint, once=True, **spec)
    assert second.join(180) == EXIT_OK, second.describe()
    assert second.run.totals.counts["dead"] == len(replayed)  # the batch was routed again ...
    again = collections.Counter(m.key for m in pulsar.read_all(names["dlq"]))
    assert again == {key.decode(): 1 + (key.decode() in replayed) for key in by_key}  # ... and written again
    assert sorted(row["key"] for row in table_rows(spark, table)) == sorted(by_key)  # but its rows once
    history = spark.read.json(f"{table['path']}/_delta_log/*.json").where("commitInfo IS NOT NULL")
    assert history.count() == len(batches)  # one Delta commit per batch with dead letters


def test_a_killed_engine_leaves_each_dead_letter_once_in_the_table(
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """SIGKILL (``dlq-engine run`` as a user runs it, its whole process group) right after a
    Delta commit of the table: at that moment the batch's Spark commit is a few milliseconds
    away, so the kill lands before it or just after, and the restart replays that batch or not.
    Either way the table ends with each dead letter exactly once. The restart runs on the test
    session's Spark (the checkpoint and the table are all it needs), not a second driver."""
    names = topics()
    table = table_spec(tmp_path, "delta")
    log = Path(table["path"]) / "_delta_log"
    policy = tmp_path / "policy.yaml"
    spec: dict[str, Any] = {
        "source": {"maxOffsetsPerTrigger": 30},
        "deadLetter": {"table": table},
        "spark": {"sparkConf": DELTA_TEST_CONF},  # the test session's Delta settings, in its driver
    }
    document = engine_policy(names, bootstrap_servers, **spec)
    policy.write_text(yaml.safe_dump(document))
    doomed = [(b"dead-%03d" % i, b"terminate:%d" % i) for i in range(120)]
    produce(bootstrap_servers, names["source"], doomed)

    first = start_engine(policy, tmp_path / "cp", tmp_path / "engine-1.log")
    try:
        first.wait_until(lambda: (log / f"{1:020d}.json").exists(), timeout=180, what="a second table commit")
    finally:
        first.kill()
    assert 0 < delta_rows(table) < len(doomed)

    # The restart without the limit: the batch the kill left uncommitted is replayed with the
    # ends it was planned with all the same, the rest is one batch.
    second = engine(names, checkpoint=tmp_path / "cp", once=True, deadLetter={"table": table})
    assert second.join(240) == EXIT_OK, second.describe()
    assert delta_rows(table) >= len(doomed)
    rows = table_rows(spark, table)
    assert sorted(row["key"] for row in rows) == [key for key, _ in doomed]
    dead = read_all(bootstrap_servers, names["dlq"])
    assert {r.key for r in dead} == {key for key, _ in doomed}  # at least once on the topic


def test_a_stop_while_a_table_batch_runs_is_a_clean_stop(
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """SIGTERM (or --once) stops the query while the foreachBatch sink waits for a Spark job: the
    interruption comes back wrapped in the Python error, and is still a clean stop (exit 0)."""
    names = topics()
    table = table_spec(tmp_path, "delta")
    checkpoint = tmp_path / "cp"
    calls_file = tmp_path / "calls"
    produce(
        bootstrap_servers,
        names["source"],
        [(b"slow-1", b"slow:30"), (b"dead-1", b"terminate:x")],
        headers=[(CALLS_HEADER, str(calls_file).encode())],
    )
    first = engine(names, checkpoint=checkpoint, processor=RECORDING, deadLetter={"table": table})
    deadline = time.monotonic() + 120
    while not (calls_file.exists() and "slow-1:0" in calls_file.read_text()):
        assert time.monotonic() < deadline, first.describe()
        time.sleep(0.2)
    began = time.monotonic()
    assert first.stop() == EXIT_OK, first.describe()
    assert time.monotonic() - began < 25  # the batch was interrupted, not waited for
    assert first.run.totals.counts["total"] == 0  # and not committed

    second = engine(names, checkpoint=checkpoint, once=True, processor=RECORDING, deadLetter={"table": table})
    assert second.join(180) == EXIT_OK, second.describe()
    assert [row["key"] for row in table_rows(spark, table)] == [b"dead-1"]
    assert {r.value for r in read_all(bootstrap_servers, names["output"])} == {b"slept"}


#: Headers whose values do not depend on when or from which topic a message was routed.
STABLE_HEADERS = (
    "dlq.original.partition",
    "dlq.original.offset",
    "dlq.attempt",
    "dlq.error.class",
    "dlq.error.message",
    "dlq.reason",
    "dlq.policy",
    "dlq.subscription",
    "team",
)


def routed_records(bootstrap: str, topic: str, expect: int) -> list[tuple[Any, ...]]:
    """What the stopped engine wrote to ``topic``: ``expect`` records."""
    records = read_all(bootstrap, topic)
    assert len(records) == expect, records
    return sorted(
        (r.partition, r.key, r.value, tuple((name, r.header(name)) for name in STABLE_HEADERS))
        for r in records
    )


def test_the_topics_see_the_same_with_and_without_a_table(
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    engine: Callable[..., Any],
    tmp_path: Path,
) -> None:
    messages = [
        (b"ok-1", b"ok:a"),
        (b"ack-1", b"ack"),
        (b"flaky-1", b"flaky:1"),
        (b"fail-1", b"fail:z"),
        (b"nonretry-1", b"nonretry:k"),
        (b"dict-1", b"dict:d"),
        (b"term-1", b"terminate:t"),
        (b"badtype-1", b"badtype"),
    ]
    seen: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
    for label, dead_letter in (("without", {}), ("with", {"table": table_spec(tmp_path, "delta")})):
        names = topics(partitions=2)
        for partition in (0, 1):
            produce(
                bootstrap_servers, names["source"], messages, headers=[("team", b"x")], partition=partition
            )
        running = engine(
            names,
            checkpoint=tmp_path / f"cp-{label}",
            retry={"nonRetryableErrors": ["LookupError"]},
            deadLetter=dead_letter,
        )
        # Per partition: 8 messages and 5 redeliveries (flaky once, fail and badtype twice); 3
        # results, 5 retries, 4 dead letters (fail, nonretry, term, badtype).
        running.wait_for(total=26, dead=8)
        assert running.stop() == EXIT_OK
        seen[label] = {
            "output": routed_records(bootstrap_servers, names["output"], 6),
            "retry": routed_records(bootstrap_servers, names["retry"], 10),
            "dlq": routed_records(bootstrap_servers, names["dlq"], 8),
        }
    assert seen["with"] == seen["without"]
    assert [len(seen["with"][topic]) for topic in ("output", "retry", "dlq")] == [6, 10, 8]
