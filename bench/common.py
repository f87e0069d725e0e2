"""What every benchmark shares: topics and test data on the real broker, the SparkSession,
timing from Spark's own progress reports, and the machine's description."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spark_dlq_devtools.kafka import create_topics as create_topics  # re-exported for the benchmarks
from spark_dlq_devtools.paths import REPO_ROOT, versions

RESULTS = REPO_ROOT / "bench" / "results"
VALUE_BYTES = 200
#: One small header per source message, as traced services have (it exercises the header path).
TRACE_HEADER = "trace"


def log(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def unique(prefix: str) -> str:
    return f"bench-{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------------------------
# Kafka


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def bucket(i: int) -> int:
    """A well-spread bucket 0..9999 for message ``i``: exact shares when n is a multiple of 10,000."""
    return (i * 7919) % 10_000


def source_value(i: int, filler: bytes) -> bytes:
    head = b"%04d|%09d|" % (bucket(i), i)
    return head + filler[: VALUE_BYTES - len(head)]


def fill_topic(bootstrap: str, topic: str, n: int) -> float:
    """Produce ``n`` messages of ``VALUE_BYTES`` bytes with a key and one header; returns the
    seconds it took."""
    from confluent_kafka import Producer

    filler = (
        b'{"order":"bench","amount":12.50,"currency":"EUR","items":["a","b","c"],"note":"'
        + b"x" * VALUE_BYTES
        + b'"}'
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    start = time.monotonic()
    header: list[tuple[str, str | bytes | None]] = [(TRACE_HEADER, uuid.uuid4().hex[:16].encode())]
    for i in range(n):
        while True:
            try:
                producer.produce(topic, key=b"k%d" % i, value=source_value(i, filler), headers=header)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} messages not delivered to {topic}")
    return time.monotonic() - start


def topic_size(bootstrap: str, topic: str) -> int:
    """Messages in ``topic`` (sum of high watermarks minus low watermarks)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("size")})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        total = 0
        for p in metadata.topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def read_values(
    bootstrap: str, topic: str, expect: int, timeout: float, stall: float | None = None
) -> list[bytes]:
    """Every value of ``topic`` from the beginning, waiting up to ``timeout`` s for ``expect``,
    or less if nothing new arrived for ``stall`` s."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        consumer.assign([TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        last_new = time.monotonic()
        while len(values) < expect and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is None:
                    value = message.value()
                    assert value is not None  # the topics read here have no tombstones
                    values.append(value)
                    last_new = time.monotonic()
            if stall is not None and time.monotonic() - last_new > stall:
                break
        return values
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------
# Spark


def spark_env() -> None:
    """Before the first SparkSession: the venv's Python and the Kafka jars, and this checkout
    on the workers' PYTHONPATH so they import ``bench.processors``."""
    from spark_dlq_devtools.spark import submit_env

    os.environ.update(submit_env())
    path = os.environ.get("PYTHONPATH", "")
    if str(REPO_ROOT) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), path) if p)


def bench_session(master: str, *, driver_memory: str = "1g", app: str = "spark-dlq-bench") -> Any:
    """A SparkSession configured as the engine configures its own (``dlq_engine.job.session``)."""
    from pyspark.sql import SparkSession

    from dlq_engine.job.session import DEFAULT_CONF, REQUIRED_CONF

    spark_env()
    builder = SparkSession.builder.master(master).appName(app)
    conf = {
        **DEFAULT_CONF,
        **REQUIRED_CONF,
        "spark.driver.memory": driver_memory,
        "spark.python.worker.reuse": "true",
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=warn",
    }
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def progress_epoch(progress: Any) -> float:
    """When a batch started (its progress ``timestamp``), as epoch seconds."""
    stamp = str(progress.timestamp).replace("Z", "+00:00")
    return dt.datetime.fromisoformat(stamp).timestamp()


def batch_end(progress: Any) -> float:
    """When a batch ended: its start plus its ``triggerExecution`` duration."""
    return progress_epoch(progress) + float(progress.durationMs.get("triggerExecution", 0)) / 1000.0


def progress_summary(progresses: Iterable[Any]) -> list[dict[str, Any]]:
    rows = []
    for p in progresses:
        rows.append(
            {
                "batch": int(p.batchId),
                "rows": int(p.numInputRows),
                "start": progress_epoch(p),
                "durationMs": dict(p.durationMs),
                # Summed over the stateful operators' tasks (the delay stage's state commits).
                "stateCommitMs": sum(int(op.commitTimeMs) for op in p.stateOperators),
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------
# The machine and the versions


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "loadavg": os.getloadavg(),
    }


def software_versions() -> dict[str, str]:
    import confluent_kafka
    import pyarrow
    import pyspark

    java = ""
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        java = (out.stderr or out.stdout).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    pinned = versions()
    return {
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "confluent-kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka-broker": pinned.get("KAFKA_VERSION", ""),
        "spark-kafka-connector": pinned.get("SPARK_VERSION", ""),
        "java": java,
    }


def write_json(directory: Path, name: str, data: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return path


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else 0.0
