"""Spark settings for running the engine and tests locally.

PySpark comes from PyPI; the Kafka connector jars, Delta Lake's (the dead-letter table) and
Pulsar's Java client (the engine's Pulsar connector runs on it), not part of PySpark, come from
Maven Central through ``scripts/setup/jars.sh``, the engine's own jar (the delay stage and the
Pulsar connector, in Java) is compiled by ``scripts/setup/engine_jar.sh``; all are handed to Spark
with ``--jars``, so no job ever downloads anything when it starts. ``submit_env`` is the
environment a local ``spark-submit`` or a ``pyspark`` session needs: the venv's Python for the
workers, the jars in ``PYSPARK_SUBMIT_ARGS``, and the driver's class-data-sharing archive
(``spark_dlq_devtools.jvm_archive``) when set-up has made one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from spark_dlq_devtools.jvm_archive import submit_options
from spark_dlq_devtools.paths import engine_jar, spark_delta_jars, spark_kafka_jars, spark_pulsar_jars

#: A fast configuration for tests on two cores: no UI, few shuffle partitions, small heaps. The
#: test session adds what the engine itself requires (``dlq_engine.job.session.REQUIRED_CONF``).
TEST_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.minBatchesToRetain": "10",
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=warn",
    "spark.python.worker.reuse": "true",
}


def jars_argument() -> str:
    jars = [*spark_kafka_jars(), *spark_delta_jars(), *spark_pulsar_jars(), engine_jar()]
    return ",".join(str(p) for p in jars)


def submit_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a local Spark driver: the venv's Python, the Kafka connector, Delta Lake
    and Pulsar client jars and the engine's jar."""
    env = dict(os.environ if base is None else base)
    python = sys.executable
    env.setdefault("PYSPARK_PYTHON", python)
    env.setdefault("PYSPARK_DRIVER_PYTHON", python)
    env["PYSPARK_SUBMIT_ARGS"] = f"--jars {jars_argument()} pyspark-shell"
    archive = submit_options()
    own = env.get("SPARK_SUBMIT_OPTS", "")
    if archive and archive not in own:
        env["SPARK_SUBMIT_OPTS"] = f"{own} {archive}".strip()
    return env


def spark_submit() -> Path:
    """The ``spark-submit`` script that ships inside the pyspark package."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"
