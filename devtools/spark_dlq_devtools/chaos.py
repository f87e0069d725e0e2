"""Crash runs: the engine killed with SIGKILL again and again while messages flow, then an audit.

Used by the reliability test (``tests/integration/engine/test_crashes.py``, 3 kills) and the
soak (``bench/soak.py``, 20 kills and more messages). A run:

1. a producer thread writes ``n`` numbered messages to the source topic at a steady rate;
   each number's kind (ok, flaky, poison, exhausted) follows from the number (``kind_of``);
2. the engine runs as a user runs it (``python -m dlq_engine.cli run -f policy.yaml`` with local
   Spark, its own process group); the whole group (driver, JVM, Python workers) is killed with
   SIGKILL at a random moment - in turn 3-20 s after the start (start-up, recovery, first
   batch), 0-4 s after its first committed micro-batch, or just after the next batch has started
   writing (so a replay duplicates records) - then started again on the
   same checkpoint - as the spark-operator would resubmit it;
3. optionally the broker is restarted once while the engine runs, and the engine killed once it
   has written to the restarted broker;
4. after the last kill the engine runs until every message is accounted for, then SIGTERM (a
   caller may stop the producer at the last kill, and give the final run to an engine of its
   own: the test's runs on the test session's Spark);
5. the audit reads the output and dead-letter topics and checks every number: in the right
   place at least once, never missing; the extra copies are the duplicates.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import yaml

from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_devtools.processes import QUICK_JIT, Service
from spark_dlq_devtools.spark import submit_env

ENTRYPOINT = "spark_dlq_devtools.chaos:process"


def kind_of(number: int) -> str:
    """1% flaky (fails its first attempt), 0.1% poison (Terminate), 0.1% always failing."""
    if number % 1000 == 7:
        return "poison"
    if number % 1000 == 13:
        return "exhausted"
    if number % 100 == 3:
        return "flaky"
    return "ok"


def process(message: Any) -> str:
    """The crash run's processor: the value is ``<number>``; returns ``<number>|<attempt>``."""
    from dlq_engine import Terminate

    number = int(message.value)
    kind = kind_of(number)
    if kind == "poison":
        raise Terminate(f"poison {number}")
    if kind == "exhausted" or (kind == "flaky" and message.attempt == 0):
        raise ConnectionError(f"{kind} {number} attempt {message.attempt}")
    return f"{number}|{message.attempt}"


@dataclass
class Audit:
    produced: int
    output_records: int = 0
    dead_records: int = 0
    missing: list[int] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    duplicates: int = 0
    flaky_retried: int = 0

    @property
    def lost(self) -> int:
        return len(self.missing)

    def as_dict(self) -> dict[str, Any]:
        return {
            "produced": self.produced,
            "output_records": self.output_records,
            "dead_records": self.dead_records,
            "missing": len(self.missing),
            "missing_sample": self.missing[:20],
            "misplaced": self.misplaced[:20],
            "duplicates": self.duplicates,
            "flaky_retried": self.flaky_retried,
        }


def audit(
    n: int, output: list[tuple[bytes | None, dict[str, str]]], dead: list[tuple[bytes | None, dict[str, str]]]
) -> Audit:
    """Check where every number ended: ok and flaky in the output (flaky after one retry),
    poison (``terminated``) and always-failing (``exhausted``) in the dead-letter topic."""
    result = Audit(produced=n, output_records=len(output), dead_records=len(dead))
    seen: Counter[int] = Counter()
    for value, _headers in output:
        number_text, _, attempt = (value or b"").decode().partition("|")
        number = int(number_text)
        seen[number] += 1
        kind = kind_of(number)
        if kind not in ("ok", "flaky"):
            result.misplaced.append(f"{number} ({kind}) in output")
        elif kind == "flaky" and attempt != "1":
            result.misplaced.append(f"{number} (flaky) succeeded on attempt {attempt}")
        elif kind == "flaky" and seen[number] == 1:
            result.flaky_retried += 1
    expected_reason = {"poison": "terminated", "exhausted": "exhausted"}
    for value, headers in dead:
        number = int(value or b"-1")
        seen[number] += 1
        kind = kind_of(number)
        if headers.get("dlq.reason") != expected_reason.get(kind):
            result.misplaced.append(f"{number} ({kind}) dead-lettered as {headers.get('dlq.reason')}")
    result.missing = [i for i in range(n) if seen[i] == 0]
    result.duplicates = sum(count - 1 for count in seen.values() if count > 1)
    return result


class SteadyProducer(threading.Thread):
    """Writes ``0 .. n-1`` to ``topic`` at ``rate`` messages per second (acks=all), or fewer:
    ``finish()`` ends the run early, and ``sent`` says how many were written."""

    def __init__(self, bootstrap: str, topic: str, n: int, rate: float) -> None:
        super().__init__(daemon=True, name="steady-producer")
        self.bootstrap, self.topic, self.n, self.rate = bootstrap, topic, n, rate
        self.sent = 0
        self._finish = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Producer

        try:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 20,
                    "message.timeout.ms": 300_000,
                    # A node down is expected in fault runs: librdkafka's connection errors
                    # stay off stderr (delivery failures still fail the run).
                    "log_level": 0,
                }
            )
            start = time.monotonic()
            for i in range(self.n):
                if self._finish.is_set():
                    break
                ahead = start + i / self.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
                while True:
                    try:
                        producer.produce(self.topic, key=b"%d" % i, value=b"%d" % i)
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
                self.sent = i + 1
            if producer.flush(300) != 0:
                raise RuntimeError(f"could not deliver every message to {self.topic}")
        except BaseException as error:  # noqa: BLE001 - reported to the run through .error
            self.error = error

    def finish(self) -> None:
        """Write no further message (those written are delivered before the thread ends)."""
        self._finish.set()


def end_offsets(bootstrap: str, topics: list[str], attempts: int = 30) -> int:
    """The sum of the topics' high watermarks: grows whenever the engine writes. Retried while
    the broker is not ready (a new topic's leader, a restarting broker)."""
    from confluent_kafka import KafkaException

    for attempt in range(attempts):
        try:
            return _end_offsets(bootstrap, topics)
        except KafkaException:
            if attempt == attempts - 1:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def _end_offsets(bootstrap: str, topics: list[str]) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-dlq-chaos-watch", "log_level": 0})
    try:
        total = 0
        for topic in topics:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            for p in partitions:
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                total += high
        return total
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str) -> list[tuple[bytes | None, dict[str, str]]]:
    """Every record of ``topic`` (value and headers as text), read to its current end."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "spark-dlq-chaos-audit",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        remaining = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                remaining[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in remaining])
        records = []
        deadline = time.monotonic() + 300
        while remaining and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error() is not None:
                    continue
                # A consumed record's headers are (name, bytes) pairs; the stubs allow any produce() form.
                raw_headers = cast("list[tuple[str, bytes | None]]", message.headers() or [])
                headers = {k: (v or b"").decode("utf-8", "replace") for k, v in raw_headers}
                records.append((message.value(), headers))
                offset = message.offset()
                assert offset is not None  # a record without an error has its offset
                if offset + 1 >= remaining.get(message.partition(), 0):
                    remaining.pop(message.partition(), None)
        if remaining:
            raise TimeoutError(f"could not read {topic} to its end (left: {remaining})")
        return records
    finally:
        consumer.close()


def policy_document(names: dict[str, str], bootstrap: str, *, trigger: str = "500ms") -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": "chaos", "namespace": "reliability"},
        "spec": {
            # Bounded batches: a restart after a kill drains the backlog in steps, so the next
            # kill can land between batches as well as in one.
            "source": {
                "topic": names["source"],
                "subscription": "chaos",
                "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": 5000,
            },
            "broker": {"bootstrapServers": bootstrap},
            "processor": {"entrypoint": ENTRYPOINT},
            "output": {"topic": names["output"]},
            "retry": {
                "topic": names["retry"],
                "maxRedeliverCount": 2,
                "backoff": {"type": "fixed", "delay": "2s"},
            },
            "deadLetter": {"topic": names["dlq"], "strategy": "topic"},
            "spark": {"trigger": trigger},
        },
    }


def start_engine(
    policy: Path, checkpoint: Path, log: Path, *extra: str, java_options: Sequence[str] = ()
) -> Service:
    """The engine as a user runs it (``dlq-engine run -f``, local Spark, ``extra`` arguments such
    as ``--create-topics``), in its own process group; ``java_options`` for its driver's JVM
    (``QUICK_JIT`` for one that is killed within seconds)."""
    env = submit_env()
    if java_options:
        env["SPARK_SUBMIT_OPTS"] = " ".join([env.get("SPARK_SUBMIT_OPTS", ""), *java_options]).strip()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    service = Service(
        log.stem,
        [
            sys.executable,
            "-m",
            "dlq_engine.cli",
            "run",
            "-f",
            str(policy),
            "--master",
            "local[2]",
            "--checkpoint",
            str(checkpoint),
            # A killed engine's successor waits out its lease on the checkpoint: a short one
            # keeps the restarts of a crash run quick. One engine runs at a time here, so no two
            # claims race: a short settle before the claim is read back is enough.
            "--checkpoint-lease",
            "6",
            "--checkpoint-settle",
            "0.2",
            *extra,
        ],
        log=log,
        env=env,
    )
    service.start()
    return service


@dataclass
class Cycle:
    started: float
    killed_after_s: float
    written_before: int
    written_at_kill: int
    produced_at_kill: int
    exit_status: int | None  # set when the engine had already exited on its own


@dataclass
class CrashReport:
    kills: int
    cycles: list[Cycle]
    broker_restarts: int
    audit: Audit
    seconds: float
    engine_starts: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "kills": self.kills,
            "engine_starts": self.engine_starts,
            "broker_restarts": self.broker_restarts,
            "seconds": round(self.seconds, 1),
            "duplicates_per_crash": round(self.audit.duplicates / max(self.kills, 1), 1),
            "cycles": [c.__dict__ for c in self.cycles],
            **self.audit.as_dict(),
        }


class RunningEngine(Protocol):
    """What the run needs of an engine: whether it runs, and stopping it."""

    def alive(self) -> bool: ...

    def tail(self, lines: int = 30) -> str: ...

    def stop(self, timeout: float = 15.0) -> None: ...


class CrashRun:
    """One crash run against ``bootstrap``; ``names`` holds the source, retry, dlq and output
    topics (created by the caller). ``until_last_kill``: the producer writes at most ``n``
    messages and stops at the last kill (the audit counts what it sent); ``final_engine``
    starts the engine that drains the rest on the run's policy and checkpoint (default: another
    ``dlq-engine run``)."""

    def __init__(
        self,
        bootstrap: str,
        names: dict[str, str],
        workdir: Path,
        *,
        n: int,
        kills: int,
        rate: float,
        seed: int = 1,
        restart_broker: Callable[[], None] | None = None,
        until_last_kill: bool = False,
        final_engine: Callable[[dict[str, Any], Path], RunningEngine] | None = None,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    ) -> None:
        self.bootstrap, self.names, self.workdir = bootstrap, names, workdir
        self.n, self.kills, self.rate = n, kills, rate
        self.until_last_kill = until_last_kill
        self.final_engine = final_engine
        self.random = random.Random(seed)
        self.restart_broker = restart_broker
        self.log = log
        self.document = policy_document(names, bootstrap)
        self.policy = workdir / "policy.yaml"
        self.checkpoint = workdir / "checkpoint"
        self.starts = 0

    def _engine(self) -> Service:
        self.starts += 1
        return start_engine(
            self.policy, self.checkpoint, self.workdir / f"engine-{self.starts}.log", java_options=QUICK_JIT
        )

    def _committed(self) -> int:
        """The last committed micro-batch's id (the checkpoint's ``commits`` entries; Spark
        deletes old ones), -1 before the first."""
        commits = self.checkpoint / "commits"
        ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
        return max(ids, default=-1)

    def _written(self) -> int:
        return end_offsets(self.bootstrap, [self.names["output"], self.names["retry"], self.names["dlq"]])

    def _wait_for_writes(self, engine: Service, *, beyond: int, timeout: float) -> None:
        """Until the engine has written past ``beyond``, it exits, or ``timeout`` runs out."""
        waiting = time.monotonic()
        while self._written() <= beyond and engine.alive() and time.monotonic() - waiting < timeout:
            time.sleep(0.1)

    def run(self, *, settle_timeout: float = 600.0) -> CrashReport:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.policy.write_text(yaml.safe_dump(self.document))
        began = time.monotonic()
        producer = SteadyProducer(self.bootstrap, self.names["source"], self.n, self.rate)
        producer.start()
        cycles: list[Cycle] = []
        broker_restarts = 0
        killed = 0
        restart_at = self.kills // 2 if self.restart_broker is not None else -1
        while killed < self.kills:
            engine = self._engine()
            started = time.monotonic()
            before = self._written()
            committed = self._committed()
            mode = self.starts % 3
            if mode == 0:
                # Early, 3-20 s after the start: in the JVM's start-up, the recovery from the
                # checkpoint, or the first batch (a crash while recovering).
                time.sleep(self.random.uniform(3.0, 20.0))
            else:
                # After this incarnation's first committed micro-batch (the delay stage's timers
                # make the query run batches even when no message arrives) ...
                while self._committed() <= committed and engine.alive() and time.monotonic() - started < 300:
                    time.sleep(0.5)
                if mode == 2:
                    # ... and once the next batch has started writing: killed mid-write, so the
                    # replayed batch writes some records twice.
                    self._wait_for_writes(engine, beyond=self._written(), timeout=120)
                    time.sleep(self.random.uniform(0.0, 0.5))
            if killed == restart_at and self.restart_broker is not None:
                self.log("chaos: restarting the broker under the running engine")
                self.restart_broker()
                broker_restarts += 1
                # Killed once it has written to the restarted broker (it reconnected, and the
                # kill lands in a batch that writes).
                self._wait_for_writes(engine, beyond=self._written(), timeout=120)
                time.sleep(self.random.uniform(0.0, 0.5))
            if mode == 1:
                time.sleep(self.random.uniform(0.0, 4.0))
            at_kill = self._written()
            status = None
            if engine.alive():
                engine.kill()
                killed += 1
            else:
                status = engine.process.poll() if engine.process is not None else None
                self.log(f"chaos: the engine had exited by itself (status {status}):\n{engine.tail(5)}")
            engine.stop()
            cycles.append(
                Cycle(
                    started=round(started - began, 1),
                    killed_after_s=round(time.monotonic() - started, 1),
                    written_before=before,
                    written_at_kill=at_kill,
                    produced_at_kill=producer.sent,
                    exit_status=status,
                )
            )
            self.log(
                f"chaos: kill {killed}/{self.kills} after {cycles[-1].killed_after_s}s "
                f"(produced {producer.sent}/{self.n}, written {at_kill})"
            )
            if len(cycles) > 3 * self.kills:
                raise RuntimeError(f"the engine keeps exiting by itself:\n{engine.tail()}")
        if self.until_last_kill:
            producer.finish()
        producer.join(600)
        if producer.error is not None:
            raise RuntimeError(f"the producer failed: {producer.error}")
        self.n = producer.sent
        result = self._settle(settle_timeout)
        return CrashReport(
            kills=killed,
            cycles=cycles,
            broker_restarts=broker_restarts,
            audit=result,
            seconds=time.monotonic() - began,
            engine_starts=self.starts,
        )

    def _settle(self, timeout: float) -> Audit:
        """Run the engine without faults until every number is accounted for, then stop it.
        The topics are read (the audit) only once the output and the dead-letter topic hold as
        many records as were produced, each of which needs one."""
        if self.final_engine is None:
            engine: RunningEngine = self._engine()
        else:
            self.starts += 1
            engine = self.final_engine(self.document, self.checkpoint)
        deadline = time.monotonic() + timeout
        try:
            while True:
                time.sleep(0.5)
                if not engine.alive():
                    raise RuntimeError(f"the engine exited during the final drain:\n{engine.tail()}")
                routed = end_offsets(self.bootstrap, [self.names["output"], self.names["dlq"]])
                if routed < self.n and time.monotonic() < deadline:
                    continue
                result = audit(
                    self.n,
                    read_topic(self.bootstrap, self.names["output"]),
                    read_topic(self.bootstrap, self.names["dlq"]),
                )
                if not result.missing or time.monotonic() > deadline:
                    return result
        finally:
            engine.stop(timeout=60)
