"""The engine's Apache Pulsar connector, as the query uses it: a Spark DataSource V2 in Java
(``spark_image/jvm``, package ``io.sparkdlq.engine.pulsar``, on Pulsar's Java client; no Spark 4
Pulsar connector is published), named here by its class, and the options the engine gives it.

Reading: offsets in the checkpoint (each partition's ``[ledger, entry]``), every micro-batch at
most ``maxEntriesPerTrigger`` entries past where it starts, the first of each run included; the
durable subscription ``source.subscription`` acknowledged cumulatively only when a batch commits.
Writing: each task waits for every send's receipt before the batch can commit; the retry and
dead-letter topics unbatched, retry letters with Pulsar's delayed delivery at ``dlq.deliver.at``.
The rows have the Kafka source's columns, so everything between the sources and the sink is the
query it is on Kafka. docs/engine.md ("On Pulsar") has the whole story.
"""

from __future__ import annotations

import os
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession

from dlq_engine.job.preflight import PreflightError
from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.routing.headers import DELIVER_AT

#: The format the engine reads and writes Pulsar with: the connector's ``TableProvider``.
FORMAT = "io.sparkdlq.engine.pulsar.PulsarDataSource"
#: A class of Pulsar's Java client, which the connector runs on.
CLIENT_CLASS = "org.apache.pulsar.client.api.PulsarClient"


def broker_options(policy: DeadLetterPolicy, client_dir: str | None) -> dict[str, str]:
    """Where the broker is, and the folder of the client's settings when there is one
    (``dlq_engine.model.pulsar_client``): a path, never a secret, since Spark shows a source's
    options in its plans and UI."""
    options = {"serviceUrl": policy.broker.service_url}
    if client_dir and os.path.isdir(client_dir):
        options["clientDir"] = os.path.abspath(client_dir)
    return options


def read_options(
    policy: DeadLetterPolicy, topic: str, starting: str, limit: int, client_dir: str | None = None
) -> dict[str, str]:
    """The options of one topic's read: the durable subscription is the policy's
    ``source.subscription`` on the source and the retry topic alike (as the Java client's
    ``enableRetry`` consumer subscribes both); ``limit`` counts entries (a producer's batch is
    one entry), 0 for none."""
    return {
        **broker_options(policy, client_dir),
        "topic": topic,
        "subscription": policy.source.subscription,
        "startingOffsets": starting,
        "maxEntriesPerTrigger": str(limit),
    }


def write_options(policy: DeadLetterPolicy, client_dir: str | None = None) -> dict[str, str]:
    """The sink's options: retry letters and dead letters unbatched (a batched message goes to a
    dead-letter topic with its whole batch, apache/pulsar#5891), retry letters with Pulsar's
    delayed delivery at their ``dlq.deliver.at``."""
    return {
        **broker_options(policy, client_dir),
        "unbatchedTopics": f"{policy.retry_topic},{policy.dead_letter_topic}",
        "delayedTopics": policy.retry_topic,
        "deliverAtProperty": DELIVER_AT,
    }


def check_classpath(spark: SparkSession) -> None:
    """The connector and Pulsar's Java client are on the session's class path; else
    ``PreflightError`` naming the jars (py4j would otherwise hand back a package)."""
    for name, what in (
        (FORMAT, "the engine's jar (spark-dlq-engine.jar, built by scripts/setup/engine_jar.sh)"),
        (
            CLIENT_CLASS,
            "Pulsar's Java client (pulsar-client-original and its jars, fetched by scripts/setup/jars.sh)",
        ),
    ):
        found: Any = spark.sparkContext._jvm
        for part in name.split("."):
            found = getattr(found, part)
        if not isinstance(found, JavaClass):
            raise PreflightError(
                f"{name} is not on the Spark class path: spec.broker.type pulsar needs {what} in "
                "spark.jars (/opt/spark/jars in the image)"
            )
