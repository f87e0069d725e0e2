"""A Pulsar policy's topics before a run: every topic the policy names exists (asked through the
connector's Java client on the broker's service URL, so the engine needs no Python Pulsar
client), and, with ``dlq-engine run --create-topics`` where no operator runs (a laptop), the
retry and dead-letter topics and their subscriptions made through the admin REST API
(``spec.broker.adminUrl``) as the operator makes them.

Creating is idempotent, so a second run, or a restart after a kill, finds what the first made
and goes on: the namespace's topics are listed with the admin API that lists them (``GET
/admin/v2/persistent/<tenant>/<namespace>`` and its ``/partitioned``), a topic that exists is
left as it is, and a 409 (made meanwhile) counts as made. The retry and dead-letter topics get
the source's partitions (or ``topics.partitions``), as the operator gives them.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from dlq_engine.job.preflight import PreflightError
from dlq_engine.model.policy import DeadLetterPolicy, pulsar_topic
from dlq_engine.model.topics import pulsar_subscriptions, wanted_topics

#: How long the broker may take to answer a lookup or an admin call.
TIMEOUT_MS: Final = 15_000
#: Pulsar's name of the earliest message, as a subscription's start position.
EARLIEST: Final = {"ledgerId": -1, "entryId": -1}
#: The connector's class that looks topics up.
TOPICS_CLASS: Final = "io.sparkdlq.engine.pulsar.PulsarTopics"


def _names(policy: DeadLetterPolicy) -> list[tuple[str, str]]:
    named = [("spec.source.topic", policy.source.topic), ("spec.retry.topic", policy.retry_topic)]
    if policy.dead_letter.strategy == "topic":
        named.append(("spec.deadLetter.topic", policy.dead_letter_topic))
    if policy.output.topic:
        named.append(("spec.output.topic", policy.output.topic))
    return named


def check_topics(spark: SparkSession, policy: DeadLetterPolicy) -> None:
    """Every topic the policy names exists on the Pulsar cluster; else ``PreflightError`` naming
    the missing ones in full (or the broker that does not answer)."""
    url = policy.broker.service_url
    full = {pulsar_topic(name).full_name: path for path, name in _names(policy)}
    lookup: Any = spark.sparkContext._jvm
    for part in TOPICS_CLASS.split("."):
        lookup = getattr(lookup, part)
    try:
        missing = [str(name) for name in lookup.missing(url, list(full), TIMEOUT_MS)]
    except Py4JJavaError as error:
        raise PreflightError(
            f"cannot reach the Pulsar broker at {url} (spec.broker.serviceUrl): "
            f"{error.java_exception.getMessage()}"
        ) from None
    if missing:
        raise PreflightError(
            f"topics missing on {url}: {', '.join(f'{name} ({full[name]})' for name in missing)} (the "
            "operator creates the retry and dead-letter topics; run with --create-topics to create them here)"
        )


class _Admin:
    """Pulsar's admin REST API at ``spec.broker.adminUrl``: each call's JSON answer, None for a
    404 or a 409 (``found`` says which)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.base}/admin/v2/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            # Pulsar answers 415 to a PUT without a JSON content type, even one with no body.
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_MS / 1000) as answer:
                text = answer.read().decode()
                return answer.status, (json.loads(text) if text.strip() else None)
        except urllib.error.HTTPError as error:
            if error.code in (404, 409):
                return error.code, None
            reason = error.read().decode(errors="replace")
            raise PreflightError(
                f"{method} {self.base}/admin/v2/{path}: HTTP {error.code}: {_reason(reason)}"
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise PreflightError(
                f"cannot reach the Pulsar admin API at {self.base} (spec.broker.adminUrl): {error}"
            ) from None


def _reason(text: str) -> str:
    """The ``reason`` of Pulsar's JSON error answer, else the answer's text."""
    try:
        found = json.loads(text)
    except ValueError:
        return text.strip()
    return str(found.get("reason", text)) if isinstance(found, dict) else text.strip()


@dataclass(frozen=True, slots=True)
class _Namespace:
    """A namespace's persistent topics as its admin API lists them: the non-partitioned topics
    and the partitions of partitioned ones, and the partitioned topics by name."""

    topics: frozenset[str]
    partitioned: frozenset[str]


def create_topics(policy: DeadLetterPolicy) -> list[str]:
    """Create the retry and dead-letter topics that are missing, partitioned like the source
    (``wanted_topics``), and the durable subscriptions the operator would
    (``pulsar_subscriptions``), through the admin REST API. One line per topic and subscription;
    what exists is left as it is."""
    if not policy.broker.admin_url:
        raise PreflightError("--create-topics on Pulsar needs spec.broker.adminUrl (the admin REST API)")
    admin = _Admin(policy.broker.admin_url)
    namespaces: dict[str, _Namespace] = {}

    def partitions_of(name: str) -> int | None:
        """The topic's partitions (0: not partitioned), None when it does not exist."""
        topic = pulsar_topic(name)
        where = f"{topic.tenant}/{topic.namespace}"
        if where not in namespaces:
            status, listed = admin.call("GET", f"persistent/{where}")
            if status == 404:
                raise PreflightError(
                    f"the Pulsar namespace {where!r} does not exist (topic {topic.full_name!r})"
                )
            _, partitioned = admin.call("GET", f"persistent/{where}/partitioned")
            namespaces[where] = _Namespace(frozenset(listed or ()), frozenset(partitioned or ()))
        listed = namespaces[where]
        if topic.full_name in listed.partitioned:
            _, metadata = admin.call("GET", f"{topic.rest_path}/partitions")
            return int((metadata or {}).get("partitions", 0))
        return 0 if topic.full_name in listed.topics else None

    source = pulsar_topic(policy.source.topic).full_name
    source_partitions = partitions_of(policy.source.topic)
    if source_partitions is None and not policy.topics.partitions:
        raise PreflightError(
            f"cannot create the retry and dead-letter topics: the source topic {source!r} does not exist "
            f"on {admin.base} and spec.topics.partitions is 0"
        )
    report = []
    for want in wanted_topics(policy, source_partitions=source_partitions):
        topic = pulsar_topic(want.name)
        wanted = want.partitions or 0
        if partitions_of(want.name) is not None:
            report.append(f"topic {topic.full_name!r} exists, left as it is")
            continue
        if wanted:
            status, _ = admin.call("PUT", f"{topic.rest_path}/partitions", wanted)
        else:
            status, _ = admin.call("PUT", topic.rest_path)
        if status == 404:
            raise PreflightError(
                f"creating topic {topic.full_name!r}: its tenant or namespace does not exist"
            )
        if status == 409:  # made meanwhile (another run): there now, as wanted
            report.append(f"topic {topic.full_name!r} exists, left as it is")
        else:
            report.append(f"created topic {topic.full_name!r} ({_partitioned(wanted)})")
    for keep in pulsar_subscriptions(policy):
        topic = pulsar_topic(keep.topic)
        status, _ = admin.call("PUT", f"{topic.rest_path}/subscription/{keep.subscription}", EARLIEST)
        if status == 404:
            raise PreflightError(
                f"subscribing {keep.subscription!r} to {topic.full_name!r}: the topic is gone"
            )
        if status == 409:
            report.append(f"subscription {keep.subscription!r} on {topic.full_name!r} exists, left as it is")
        else:
            report.append(f"created subscription {keep.subscription!r} on {topic.full_name!r}")
    return report


def _partitioned(count: int) -> str:
    return f"{count} partitions" if count else "not partitioned"
