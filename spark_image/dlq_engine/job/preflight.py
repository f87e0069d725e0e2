"""Checks before the query starts: the engine's jar is on the class path, the broker answers
and every topic the policy names exists.

Spark's Kafka source waits forever on a missing topic and buries an unreachable broker in JVM
noise; a clear sentence up front is kinder. The check uses the Kafka admin client that ships
with the connector, through the session's JVM, so the engine needs no second Kafka client.
"""

from __future__ import annotations

import re
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession

from dlq_engine.model.policy import DeadLetterPolicy

TIMEOUT_MS = 15_000

#: Client property names whose values are secrets: never echoed in a message.
_SECRET_KEY = re.compile(r"password|jaas|secret|token|credential|key", re.IGNORECASE)
_QUOTED = re.compile(r'=\s*"([^"]{4,})"')


class PreflightError(RuntimeError):
    pass


def engine_class(spark: SparkSession, name: str) -> Any:
    """A class of the engine's jar (``spark_image/jvm``), through the session's JVM; a clear
    error if the jar is not on the class path (py4j would otherwise hand back a package)."""
    found: Any = spark.sparkContext._jvm
    for part in name.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):
        raise PreflightError(
            f"{name} is not on the Spark class path: add the engine's jar (spark-dlq-engine.jar, "
            f"built by scripts/setup/engine_jar.sh; /opt/spark/jars in the image) to spark.jars"
        )
    return found


def check_topics(spark: SparkSession, policy: DeadLetterPolicy, client: dict[str, str] | None = None) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    props = jvm.java.util.Properties()
    for key, value in (client or {}).items():
        props.put(key, value)
    props.put("bootstrap.servers", policy.broker.bootstrap_servers)
    props.put("request.timeout.ms", str(TIMEOUT_MS))
    props.put("default.api.timeout.ms", str(TIMEOUT_MS))
    try:
        admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
    except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
        keys = ", ".join(sorted(client or {})) or "none"
        raise PreflightError(
            f"cannot create a Kafka client from the client properties ({keys}): "
            f"{redact(root_cause(error), client)}"
        ) from None
    try:
        try:
            names = set(
                admin.listTopics().names().get(TIMEOUT_MS, jvm.java.util.concurrent.TimeUnit.MILLISECONDS)
            )
        except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
            raise PreflightError(
                f"cannot reach the broker at {policy.broker.bootstrap_servers} "
                f"(spec.broker.bootstrapServers) within {TIMEOUT_MS // 1000}s: "
                f"{redact(root_cause(error), client)[:300]}"
            ) from None
    finally:
        admin.close()
    needed = [("spec.source.topic", policy.source.topic), ("retry topic", policy.retry_topic)]
    if policy.dead_letter.strategy == "topic":
        needed.append(("dead-letter topic", policy.dead_letter_topic))
    if policy.output.topic:
        needed.append(("spec.output.topic", policy.output.topic))
    missing = [f"{what} {topic!r}" for what, topic in needed if topic not in names]
    if missing:
        raise PreflightError(
            f"missing on {policy.broker.bootstrap_servers}: {', '.join(missing)} "
            "(the operator creates retry and dead-letter topics; run it, or create them)"
        )


def root_cause(error: BaseException) -> str:
    """``Class: message`` of the innermost Java cause of a py4j error, else the first line."""
    java = getattr(error, "java_exception", None)
    try:
        while java is not None and java.getCause() is not None:
            java = java.getCause()
        if java is not None:
            message = (str(java.getMessage() or "").strip().splitlines() or [""])[0]
            return f"{java.getClass().getSimpleName()}: {message}"
    except Exception:  # noqa: BLE001 - the JVM side is gone: fall back to the Python text
        pass
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def redact(text: str, client: dict[str, str] | None) -> str:
    """``text`` with the values of secret client properties (and the quoted parts of them, such
    as a JAAS ``password="..."``) replaced by ``[redacted]``."""
    for key, value in (client or {}).items():
        if not _SECRET_KEY.search(key) or not value:
            continue
        for secret in sorted({value, *_QUOTED.findall(value)}, key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
    return text
