"""A class-data-sharing archive of the local Spark driver's classes (JDK AppCDS).

A Spark driver spends most of a cold start loading and verifying the same classes from
PySpark's jars. A dynamic CDS archive (``-XX:ArchiveClassesAtExit``), made once by a short
training run of the same Spark, lets every later driver map them instead. Made by
``scripts/setup/spark_archive.sh`` into ``$SPARK_DLQ_CACHE/spark-cds/<key>.jsa``, keyed by the
Java runtime and the jars on Spark's class path; ``submit_env`` hands it to every local
``spark-submit`` (the test session's, ``dlq-engine run``'s, the stand-in spark-operator's) through
``SPARK_SUBMIT_OPTS``. The archive only changes how classes are loaded, never which: a JVM that
cannot use it (another JDK, another class path) says nothing and loads them as before.

    python -m spark_dlq_devtools.jvm_archive      # make the archive unless it is there
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from spark_dlq_devtools.paths import cache_dir

#: Silences the JVM's notice when it cannot use the archive (it then runs as without one).
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

#: The training run: a session configured as the engine's, a batch job, a streaming query with
#: state in RocksDB and Python in a foreachBatch, so their classes are in the archive too.
_TRAINING = """
import sys, time
from pyspark.sql import SparkSession, functions as F
from dlq_engine.job.session import REQUIRED_CONF
from spark_dlq_devtools.spark import TEST_CONF
builder = SparkSession.builder.master("local[1]")
for key, value in {**TEST_CONF, **REQUIRED_CONF}.items():
    if key != "spark.python.daemon.module":
        builder = builder.config(key, value)
spark = builder.getOrCreate()
spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().collect()
stream = spark.readStream.format("rate").option("rowsPerSecond", 20).load()
counts = stream.withWatermark("timestamp", "1 second").groupBy(F.window("timestamp", "1 second")).count()
seen = []
query = (
    counts.writeStream.outputMode("update")
    .option("checkpointLocation", sys.argv[1])
    .foreachBatch(lambda frame, batch: seen.append(frame.count()))
    .start()
)
deadline = time.monotonic() + 120
while len(seen) < 3 and time.monotonic() < deadline:
    time.sleep(0.5)
query.stop()
spark.stop()
"""


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def archive_key() -> str:
    """The Java runtime (its resolved path and size) and the paths, sizes and modification times
    of Spark's jars: what a JVM checks before it maps an archive."""
    java = shutil.which("java")
    digest = hashlib.sha256()
    if java is not None:
        real = Path(java).resolve()
        digest.update(f"{real}:{real.stat().st_size}\n".encode())
    for jar in sorted(_spark_jars().resolve().glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def archive_path() -> Path:
    return cache_dir() / "spark-cds" / f"{archive_key()}.jsa"


def submit_options() -> str:
    """The JVM options that make a driver use the archive; empty when there is none."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {_QUIET}" if path.is_file() else ""


def build() -> Path:
    """Make the archive by a training run, unless it is there."""
    from spark_dlq_devtools.spark import submit_env

    path = archive_path()
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    checkpoint = path.with_suffix(f".{os.getpid()}.checkpoint")
    env = submit_env()
    env["SPARK_SUBMIT_OPTS"] = f"-XX:ArchiveClassesAtExit={partial} {_QUIET}"
    try:
        subprocess.run(
            [sys.executable, "-c", _TRAINING, str(checkpoint)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=600,
        )
        if not partial.is_file():
            raise RuntimeError(f"the training run wrote no archive at {partial}")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(checkpoint, ignore_errors=True)
    return path


if __name__ == "__main__":
    print(build())
