"""The benchmark's peers beside the engine: Spring Kafka and Kafka Connect, each in its own JVM
(built by ``scripts/setup/java_programs.sh`` from ``bench/peers/<name>``), on the bench's broker, with
the benchmark processor's failure mix (``bench.processors.MIXES``).

- ``spring``: a ``@KafkaListener`` with ``@RetryableTopic``: a fixed back-off of ``backoff_ms``
  through one retry topic, ``max_redeliver + 1`` deliveries in all, the poison exception
  excluded from retries (straight to the dead-letter topic), one consumer thread per partition;
  successes are sent to the output topic (the send is not awaited before the offset commit,
  as a listener is usually written).
- ``connect``: a standalone worker of connect-runtime running a sink connector that publishes
  to the output topic (waiting for every send before each offset commit), with a transform that
  fails: a retriable exception once for a transient message (retried in place by
  ``errors.retry.timeout``, the back-off capped at ``errors.retry.delay.max.ms``), a data error
  for a poison one, which ``errors.tolerance=all`` sends to the dead-letter queue with the
  context headers.

A run is timed from the moment the peer reports its first source partition assigned (so its
JVM's start is left out, as the SparkSession's is for the engine) to the moment the output and
dead-letter topics hold every expected message; Spring Kafka also reports when the last
source message had its first delivery (``first_pass_seconds``). The peer's CPU time is sampled
over the same span. Then both topics are read back and every message is accounted for.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from bench.common import bucket, create_topics, log, unique
from bench.memory import CpuSampler
from bench.processors import MIXES
from spark_dlq_devtools.paths import java_classpath

PEERS = ("spring", "connect")
#: Every peer the benchmark can run: the two above, and Spring Kafka with its error handler's
#: ``seekAfterError`` off (Spring's default is on: after a failed record it seeks the partition
#: back and fetches the rest of the poll's records again).
ALL_PEERS = ("spring", "spring-no-seek", "connect")
JVM_OPTIONS = ("-Xmx1g", "-XX:+UseG1GC")
#: What each peer's dead-letter records must carry (the failure's class, in its own header).
DLT_HEADER = {
    "spring": "kafka_exception-fqcn",
    "spring-no-seek": "kafka_exception-fqcn",
    "connect": "__connect.errors.exception.class.name",
}


class Meter(Protocol):
    """CPU seconds of the other processes (the broker, ...) between ``mark`` and ``since_mark``."""

    def mark(self) -> None: ...

    def since_mark(self) -> dict[str, float]: ...


@dataclass
class PeerProcess:
    """A peer's JVM: its stdout lines ``ASSIGNED <ms>`` and ``FIRST_PASS <ms>`` are collected,
    its stderr goes to ``log_path``."""

    command: list[str]
    log_path: Path
    assigned: float | None = None
    first_pass: float | None = None
    process: subprocess.Popen[str] | None = None
    _log: TextIO | None = None
    _reader: threading.Thread | None = None
    lines: list[str] = field(default_factory=list)

    def start(self) -> int:
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=self._log, text=True, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self.process.pid

    def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            word, _, rest = line.strip().partition(" ")
            if word == "ASSIGNED" and self.assigned is None:
                self.assigned = int(rest.split()[0]) / 1000.0
            elif word == "FIRST_PASS" and self.first_pass is None:
                self.first_pass = int(rest) / 1000.0
            else:
                self.lines.append(line)

    def check_alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            tail = self.log_path.read_text()[-3000:]
            raise RuntimeError(
                f"the peer exited with status {self.process.returncode}; its log ends:\n{tail}"
            )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(30)
        if self._reader is not None:
            self._reader.join(10)
        if self._log is not None:
            self._log.close()


def _java() -> str:
    return shutil.which("java") or "java"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spring_command(
    bootstrap: str,
    *,
    source: str,
    output: str,
    run: str,
    partitions: int,
    mix: str,
    n: int,
    max_redeliver: int,
    backoff_ms: int,
    seek_after_error: bool = True,
) -> list[str]:
    transient, poison = MIXES[mix]
    args = {
        "bootstrap": bootstrap,
        "source": source,
        "output": output,
        "run": run,
        "partitions": partitions,
        "attempts": max_redeliver + 1,
        "backoff-ms": backoff_ms,
        "transient": transient,
        "poison": poison,
        "n": n,
        "seek-after-error": str(seek_after_error).lower(),
    }
    return [
        _java(), *JVM_OPTIONS, "-cp", java_classpath("spring"),
        "io.sparkdlq.bench.peers.spring.SpringPeer",
        *(f"{k}={v}" for k, v in args.items()),
    ]  # fmt: skip


def connect_files(
    workdir: Path,
    bootstrap: str,
    *,
    source: str,
    output: str,
    dlq: str,
    run: str,
    partitions: int,
    mix: str,
    backoff_ms: int,
    retry_timeout_ms: int,
) -> list[Path]:
    """The standalone worker's properties and the connector's."""
    transient, poison = MIXES[mix]
    converter = "org.apache.kafka.connect.converters.ByteArrayConverter"
    worker = {
        "bootstrap.servers": bootstrap,
        "key.converter": converter,
        "value.converter": converter,
        "header.converter": converter,
        "offset.storage.file.filename": str(workdir / f"{run}.offsets"),
        "offset.flush.interval.ms": 1000,
        "listeners": f"http://127.0.0.1:{_free_port()}",
        "plugin.discovery": "only_scan",
    }
    connector = {
        "name": f"bench-connect-{run}",
        "connector.class": "io.sparkdlq.bench.peers.connect.TopicSink",
        "tasks.max": partitions,
        "topics": source,
        "output.topic": output,
        "output.bootstrap.servers": bootstrap,
        "transforms": "process",
        "transforms.process.type": "io.sparkdlq.bench.peers.connect.FailingProcessor",
        "transforms.process.transient": transient,
        "transforms.process.poison": poison,
        "errors.tolerance": "all",
        "errors.retry.timeout": retry_timeout_ms,
        "errors.retry.delay.max.ms": backoff_ms,
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": 1,
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.log.enable": "false",
    }
    paths = []
    for kind, props in (("worker", worker), ("connector", connector)):
        path = workdir / f"{run}.{kind}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        paths.append(path)
    return paths


def expected(n: int, mix: str) -> tuple[set[int], set[int]]:
    """The source indexes that must reach the output topic, and those that must be dead."""
    transient, poison = MIXES[mix]
    dead = {i for i in range(n) if transient <= bucket(i) < poison}
    return set(range(n)) - dead, dead


def _read(bootstrap: str, topic: str, header: str | None = None) -> tuple[list[int], int]:
    """Every record of ``topic``: the source index of each, and how many carry ``header``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("peer-reader"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = [TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions]
        total = sum(consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions)
        consumer.assign(partitions)
        indexes: list[int] = []
        with_header = 0
        deadline = time.monotonic() + 300
        while len(indexes) < total:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(indexes)} of {total} records of {topic}")
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is not None:
                    continue
                value = m.value() or b""
                indexes.append(int(value[5:14]))
                if header is not None and any(pair[0] == header for pair in m.headers() or []):
                    with_header += 1
        return indexes, with_header
    finally:
        consumer.close()


def account(bootstrap: str, *, output: str, dlq: str, n: int, mix: str, dlt_header: str) -> dict[str, Any]:
    """Every source message accounted for: in the output or the dead-letter topic as it should
    be, duplicates and misses counted."""
    want_out, want_dead = expected(n, mix)
    out, _ = _read(bootstrap, output)
    dead, with_header = _read(bootstrap, dlq, dlt_header)
    got_out, got_dead = set(out), set(dead)
    return {
        "output": len(out),
        "dead": len(dead),
        "output_duplicates": len(out) - len(got_out),
        "dead_duplicates": len(dead) - len(got_dead),
        "missing_output": len(want_out - got_out),
        "missing_dead": len(want_dead - got_dead),
        "wrong_output": len(got_out - want_out),
        "wrong_dead": len(got_dead - want_dead),
        "dead_with_error_header": with_header,
        "correct": got_out == want_out and got_dead == want_dead and with_header == len(dead),
    }


class _Sizes:
    """The output and dead-letter topics' sizes (high watermarks; the topics are new)."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("peer-sizes")})
        self.topics = topics

    def total(self) -> int:
        from confluent_kafka import TopicPartition

        total = 0
        for topic in self.topics:
            metadata = self.consumer.list_topics(topic, timeout=10)
            if topic not in metadata.topics or metadata.topics[topic].error is not None:
                continue  # not created yet (the peer creates its dead-letter topic)
            for p in metadata.topics[topic].partitions:
                total += self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        return total

    def close(self) -> None:
        self.consumer.close()


def peer_run(
    name: str,
    bootstrap: str,
    source: str,
    n: int,
    *,
    partitions: int,
    mix: str,
    workdir: Path,
    max_redeliver: int = 2,
    backoff_ms: int = 200,
    timeout: float = 1800.0,
    meter: Meter | None = None,
) -> dict[str, Any]:
    """One run of peer ``name`` over the ``n`` messages of ``source``: seconds, rate, the CPU
    seconds of the peer (and of ``meter``'s processes) over the timed span, and the routing's
    accounting."""
    if name not in ALL_PEERS:
        raise ValueError(f"unknown peer {name!r}; known: {', '.join(ALL_PEERS)}")
    workdir.mkdir(parents=True, exist_ok=True)
    run = unique(name).removeprefix("bench-")
    output = unique(f"{name}-out")
    if name.startswith("spring"):
        dlq = f"{source}-dlt-{run}"
        create_topics(bootstrap, [output], partitions)
        command = spring_command(
            bootstrap, source=source, output=output, run=run, partitions=partitions, mix=mix, n=n,
            max_redeliver=max_redeliver, backoff_ms=backoff_ms, seek_after_error=name != "spring-no-seek",
        )  # fmt: skip
    else:
        dlq = unique("connect-dlq")
        create_topics(bootstrap, [output, dlq], partitions)
        files = connect_files(
            workdir, bootstrap, source=source, output=output, dlq=dlq, run=run, partitions=partitions,
            mix=mix, backoff_ms=backoff_ms, retry_timeout_ms=max(60_000, 10 * backoff_ms),
        )  # fmt: skip
        command = [
            _java(), *JVM_OPTIONS, "-cp", java_classpath("connect"),
            "org.apache.kafka.connect.cli.ConnectStandalone", *map(str, files),
        ]  # fmt: skip
    want_out, want_dead = expected(n, mix)
    goal = len(want_out) + len(want_dead)
    peer = PeerProcess(command, workdir / f"{run}.log")
    sizes = _Sizes(bootstrap, [output, dlq])
    cpu: CpuSampler | None = None
    try:
        launched = time.monotonic()
        pid = peer.start()
        cpu = CpuSampler({name: pid})
        assign_deadline = time.monotonic() + 120
        while peer.assigned is None:
            peer.check_alive()
            if time.monotonic() > assign_deadline:
                raise TimeoutError(f"{name}: no source partition assigned in 120s")
            time.sleep(0.05)
        log(f"{name} peer: a source partition assigned {time.monotonic() - launched:.1f}s after launch")
        cpu.mark()
        if meter is not None:
            meter.mark()
        deadline = time.monotonic() + timeout
        while (routed := sizes.total()) < goal:
            peer.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: {routed} of {goal} messages routed in {timeout:.0f}s")
            time.sleep(0.1)
        end = time.time()
        used = {**(meter.since_mark() if meter is not None else {}), **cpu.since_mark()}
    finally:
        sizes.close()
        if cpu is not None:
            cpu.stop()
        stopping = time.monotonic()
        peer.stop()
        log(f"{name} peer: stopped in {time.monotonic() - stopping:.1f}s")
    start = peer.assigned
    seconds = end - start
    first_pass = (peer.first_pass - start) if peer.first_pass is not None else None
    routing = account(bootstrap, output=output, dlq=dlq, n=n, mix=mix, dlt_header=DLT_HEADER[name])
    log(f"{name} peer: {n} in {seconds:.2f}s (first pass {first_pass}), routing {routing}")
    return {
        "seconds": seconds,
        "first_pass_seconds": first_pass,
        "rate": n / seconds if seconds > 0 else 0.0,
        "cpu_seconds": used,
        "counts": routing,
        "topics": {"output": output, "dlq": dlq},
    }
