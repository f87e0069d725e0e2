"""Checks before the query starts: the engine's jar (and Delta Lake's, for a Delta dead-letter
table) is on the class path, the broker answers and every topic the policy names exists; and, on request, creating the retry and dead-letter
topics where no operator does (a laptop).

Spark's Kafka source waits forever on a missing topic and buries an unreachable broker in JVM
noise; a clear sentence up front is kinder. The check uses the Kafka admin client that ships
with the connector, through the session's JVM, so the engine needs no second Kafka client.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession

from dlq_engine.model.durations import format_ms
from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.model.topics import TopicWant, wanted_topics

#: How long a request to the broker may take before the broker counts as unreachable; a run's
#: ``--broker-timeout`` replaces it for its checks (``dlq-engine run``).
TIMEOUT_MS = 15_000

#: Client property names whose values are secrets: never echoed in a message.
_SECRET_KEY = re.compile(r"password|jaas|secret|token|credential|key", re.IGNORECASE)
_QUOTED = re.compile(r'=\s*"([^"]{4,})"')
_USERNAME = re.compile(r'username\s*=\s*"([^"]+)"')


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


#: A class of Delta Lake's jar, and the SQL extension the session needs for it (``job.session``).
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"


def check_table(spark: SparkSession, policy: DeadLetterPolicy) -> None:
    """For a dead-letter table of format delta: Delta Lake is on the class path and the session
    has its extension. Without them the first dead letter would fail the batch, deep in Spark."""
    table = policy.dead_letter.table
    if table is None or table.format != "delta":
        return
    found: Any = spark.sparkContext._jvm
    for part in DELTA_CATALOG.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):
        raise PreflightError(
            "spec.deadLetter.table.format is delta, but Delta Lake is not on the Spark class path: "
            "add io.delta:delta-spark_2.13 and io.delta:delta-storage to spark.jars (fetched by "
            "scripts/setup/jars.sh; /opt/spark/jars in the image)"
        )
    extensions = [e.strip() for e in (spark.conf.get("spark.sql.extensions", "") or "").split(",")]
    if DELTA_EXTENSION not in extensions:
        raise PreflightError(
            "spec.deadLetter.table.format is delta, but the Spark session was started without "
            f"Delta's SQL extension: set spark.sql.extensions={DELTA_EXTENSION} and "
            f"spark.sql.catalog.spark_catalog={DELTA_CATALOG} before the session starts"
        )


@contextmanager
def admin_client(
    spark: SparkSession,
    policy: DeadLetterPolicy,
    client: dict[str, str] | None,
    *,
    timeout_ms: int = TIMEOUT_MS,
) -> Iterator[Any]:
    """The connector's Kafka admin client for the policy's broker, closed on the way out."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    props = jvm.java.util.Properties()
    for key, value in (client or {}).items():
        props.put(key, value)
    props.put("bootstrap.servers", policy.broker.bootstrap_servers)
    props.put("request.timeout.ms", str(timeout_ms))
    props.put("default.api.timeout.ms", str(timeout_ms))
    try:
        admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
    except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
        keys = ", ".join(sorted(client or {})) or "none"
        raise PreflightError(
            f"cannot create a Kafka client from the client properties ({keys}): "
            f"{redact(root_cause(error), client)}"
        ) from None
    try:
        yield admin
    finally:
        admin.close()


def check_topics(
    spark: SparkSession,
    policy: DeadLetterPolicy,
    client: dict[str, str] | None = None,
    *,
    timeout_ms: int = TIMEOUT_MS,
) -> None:
    """The broker answers the engine's principal, every topic the policy names exists, and the
    principal may do what the engine will do: read the source and retry topics in its consumer
    groups, write the retry, dead-letter and output topics (Kafka reports each topic's and
    group's authorised operations to the principal itself, so no ACL-reading right is needed)."""
    with admin_client(spark, policy, client, timeout_ms=timeout_ms) as admin:
        _check(spark.sparkContext._jvm, admin, policy, client, timeout_ms)


def create_topics(
    spark: SparkSession,
    policy: DeadLetterPolicy,
    client: dict[str, str] | None = None,
    *,
    timeout_ms: int = TIMEOUT_MS,
) -> list[str]:
    """Create the policy's retry and dead-letter topics that are missing, as the operator would
    (``spec.topics``: partitions, else as many as the source; replication factor; configs).
    Returns one line per topic saying what was done. Existing topics are left as they are."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
    with admin_client(spark, policy, client, timeout_ms=timeout_ms) as admin:
        try:
            names = set(admin.listTopics().names().get(timeout_ms, unit))
        except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
            raise PreflightError(_connection_problem(policy, client, error, timeout_ms)) from None
        source_partitions = None
        if policy.source.topic in names:
            described = admin.describeTopics(jvm.java.util.List.of(policy.source.topic)).allTopicNames()
            source_partitions = int(
                described.get(timeout_ms, unit).get(policy.source.topic).partitions().size()
            )
        elif not policy.topics.partitions:
            raise PreflightError(
                f"cannot create the retry and dead-letter topics: the source topic "
                f"{policy.source.topic!r} does not exist on {policy.broker.bootstrap_servers} and "
                "spec.topics.partitions is 0 (as many partitions as the source)"
            )
        report = []
        for want in wanted_topics(policy, source_partitions=source_partitions):
            if want.name in names:
                report.append(f"topic {want.name!r} exists, left as it is")
                continue
            _create(jvm, admin, want, policy, client, timeout_ms)
            report.append(f"created topic {want.name!r} ({want.describe()})")
        return report


def _create(
    jvm: Any,
    admin: Any,
    want: TopicWant,
    policy: DeadLetterPolicy,
    client: dict[str, str] | None,
    timeout_ms: int,
) -> None:
    clients = jvm.org.apache.kafka.clients.admin
    assert want.partitions is not None
    if want.replication_factor > 0:
        topic = clients.NewTopic(want.name, want.partitions, want.replication_factor)
    else:
        topic = clients.NewTopic(
            want.name, jvm.java.util.Optional.of(want.partitions), jvm.java.util.Optional.empty()
        )
    configs = jvm.java.util.HashMap()
    for key, value in want.config.items():
        configs.put(key, value)
    topic.configs(configs)
    try:
        admin.createTopics(jvm.java.util.List.of(topic)).all().get(
            timeout_ms, jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        )
    except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
        cause = root_cause(error)
        if cause.startswith("TopicExistsException"):
            return  # created meanwhile, by the operator or another run
        if cause.startswith(("TopicAuthorizationException", "ClusterAuthorizationException")):
            raise PreflightError(
                f"Kafka principal {principal(client)} may not create topic {want.name!r}: grant it "
                "CREATE on the topic (or the cluster), or let the operator create the topics"
            ) from None
        raise PreflightError(
            f"creating topic {want.name!r} on {policy.broker.bootstrap_servers} failed: {redact(cause, client)}"
        ) from None


def _check(
    jvm: Any, admin: Any, policy: DeadLetterPolicy, client: dict[str, str] | None, timeout_ms: int
) -> None:
    unit = jvm.java.util.concurrent.TimeUnit.MILLISECONDS
    who = principal(client)
    try:
        names = set(admin.listTopics().names().get(timeout_ms, unit))
    except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
        raise PreflightError(_connection_problem(policy, client, error, timeout_ms)) from None
    # What each topic is for: (the field that names it, the operations the engine needs).
    needed: dict[str, tuple[str, set[str]]] = {}

    def need(topic: str, field: str, *operations: str) -> None:
        known_field, known = needed.get(topic, (field, set()))
        needed[topic] = (known_field, known | set(operations))

    need(policy.source.topic, "spec.source.topic", "DESCRIBE", "READ")
    need(policy.retry_topic, "retry topic", "DESCRIBE", "READ", "WRITE")
    if policy.dead_letter.strategy == "topic":
        need(policy.dead_letter_topic, "dead-letter topic", "DESCRIBE", "WRITE")
    if policy.output.topic:
        need(policy.output.topic, "spec.output.topic", "DESCRIBE", "WRITE")
    options = jvm.org.apache.kafka.clients.admin.DescribeTopicsOptions().includeAuthorizedOperations(True)
    topics = jvm.java.util.ArrayList()
    for topic in needed:
        topics.add(topic)
    futures = admin.describeTopics(topics, options).topicNameValues()
    missing, refused = [], []
    for topic, (field, operations) in needed.items():
        try:
            description = futures.get(topic).get(timeout_ms, unit)
        except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
            cause = root_cause(error)
            if cause.startswith("TopicAuthorizationException"):
                # READ and WRITE each imply DESCRIBE: name what the engine does with the topic.
                wanted = sorted(operations - {"DESCRIBE"}) or ["DESCRIBE"]
                refused.append(f"{', '.join(wanted)} on topic {topic!r} ({field})")
            elif cause.startswith("UnknownTopicOrPartitionException") or topic not in names:
                missing.append(f"{field} {topic!r}")
            else:
                raise PreflightError(
                    f"cannot describe topic {topic!r} ({field}): {redact(cause, client)}"
                ) from None
            continue
        allowed = _operations(description.authorizedOperations())
        lacking = sorted(operations - allowed) if allowed is not None else []
        if lacking:
            refused.append(f"{', '.join(lacking)} on topic {topic!r} ({field})")
    if missing:
        raise PreflightError(
            f"missing on {policy.broker.bootstrap_servers}: {', '.join(missing)} "
            "(the operator creates the retry and dead-letter topics; run it, or give dlq-engine run "
            "--create-topics)"
        )
    refused += _group_refusals(jvm, admin, policy, timeout_ms)
    if refused:
        raise PreflightError(
            f"Kafka principal {who} is not authorised for: {'; '.join(refused)}. "
            "Grant these ACLs to the principal of spec.broker.secretRef"
        )


def _group_refusals(jvm: Any, admin: Any, policy: DeadLetterPolicy, timeout_ms: int) -> list[str]:
    """The engine's Kafka sources join consumer groups named ``spark-dlq-<subscription>-...``:
    the principal needs READ on groups with that prefix."""
    prefix = f"spark-dlq-{policy.source.subscription}"
    probe = f"{prefix}-preflight"
    options = jvm.org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions().includeAuthorizedOperations(
        True
    )
    groups = jvm.java.util.ArrayList()
    groups.add(probe)
    try:
        description = (
            admin.describeConsumerGroups(groups, options)
            .describedGroups()
            .get(probe)
            .get(timeout_ms, jvm.java.util.concurrent.TimeUnit.MILLISECONDS)
        )
    except Exception as error:  # noqa: BLE001 - py4j wraps every Java exception
        if root_cause(error).startswith("GroupAuthorizationException"):
            return [f"READ on consumer groups prefixed {prefix!r} (spec.source.subscription)"]
        return []  # the group check is advisory: the query reports anything else itself
    allowed = _operations(description.authorizedOperations())
    if allowed is not None and "READ" not in allowed:
        return [f"READ on consumer groups prefixed {prefix!r} (spec.source.subscription)"]
    return []


def _operations(java_set: Any) -> set[str] | None:
    """A Java ``Set<AclOperation>`` as names; None when the broker did not say."""
    if java_set is None:
        return None
    names = {str(op.name()) for op in java_set}
    return names if "ALL" not in names else {"DESCRIBE", "READ", "WRITE", "CREATE", "ALL"}


def _connection_problem(
    policy: DeadLetterPolicy, client: dict[str, str] | None, error: BaseException, timeout_ms: int
) -> str:
    """Why the first request failed, in words that say what to fix."""
    servers = policy.broker.bootstrap_servers
    cause = redact(root_cause(error), client)
    chain = redact(cause_chain(error), client)
    if "SaslAuthenticationException" in chain:
        return (
            f"Kafka authentication failed for principal {principal(client)} at {servers}: "
            f"check the username and password in spec.broker.secretRef ({cause[:300]})"
        )
    if "SSLHandshakeException" in chain or "SslAuthenticationException" in chain:
        expired = "CertificateExpiredException" in chain or "validity check failed" in chain
        what = "the broker's TLS certificate has expired" if expired else "the TLS handshake failed"
        return (
            f"{what} at {servers}: check the broker's certificate and the trust store in "
            f"spec.broker.secretRef ({cause[:300]})"
        )
    return (
        f"cannot reach the broker at {servers} (spec.broker.bootstrapServers) within "
        f"{format_ms(timeout_ms)}: {cause[:300]}"
    )


def principal(client: dict[str, str] | None) -> str:
    """The Kafka principal the client settings authenticate as, as the broker names it."""
    jaas = (client or {}).get("sasl.jaas.config", "")
    match = _USERNAME.search(jaas)
    if match:
        return f"User:{match.group(1)}"
    protocol = (client or {}).get("security.protocol", "PLAINTEXT").upper()
    if protocol in ("SSL",):
        return "the TLS client certificate's subject"
    return "User:ANONYMOUS"


def cause_chain(error: BaseException) -> str:
    """Every Java cause of a py4j error as ``Class: message`` lines, outermost first."""
    java = getattr(error, "java_exception", None)
    lines = []
    try:
        while java is not None:
            lines.append(f"{java.getClass().getSimpleName()}: {java.getMessage()}")
            java = java.getCause()
    except Exception:  # noqa: BLE001 - the JVM side is gone: use what was read
        pass
    return "\n".join(lines) or str(error)


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
