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

Before a run reads anything, the broker must take the client as the policy's Secret
(``spec.broker.secretRef``, ``dlq_engine.model.pulsar_client``) configures it: its keys are known,
a ``pulsar+ssl://`` broker's certificate is trusted (checked by a TLS handshake here, which names
the certificate problem at once; the Java client would retry until its timeout), the broker
accepts the credentials, and the client may produce to the retry, dead-letter and output topics
(a producer is made on each and closed: nothing is sent). Each refusal is a ``PulsarAccessError``
whose ``kind`` says which of these failed, with one line naming the field and the problem.
"""

from __future__ import annotations

import enum
import json
import os
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from dlq_engine.job.preflight import PreflightError
from dlq_engine.model import pulsar_client
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


class Refusal(enum.StrEnum):
    """Why the broker would not let the engine run (``PulsarAccessError.kind``)."""

    #: The Secret's keys are not a Pulsar client's, or do not go together.
    SETTINGS = "settings"
    #: The broker's certificate is not trusted (ca.crt), or the handshake failed.
    CERTIFICATE = "certificate"
    #: The broker refused the credentials (a wrong or expired token, an unknown certificate).
    CREDENTIALS = "credentials"
    #: The credentials are good, a permission is missing (produce on a topic, lookup).
    PERMISSION = "permission"


class PulsarAccessError(PreflightError):
    def __init__(self, kind: Refusal, message: str) -> None:
        super().__init__(message)
        self.kind = kind


#: Java exceptions (simple names, anywhere in the cause chain) and what they mean here.
_JAVA_REFUSALS: Final = (
    ("AuthenticationException", Refusal.CREDENTIALS),
    ("AuthorizationException", Refusal.PERMISSION),
    ("SSLHandshakeException", Refusal.CERTIFICATE),
    ("CertificateException", Refusal.CERTIFICATE),
)


def client_files(client_dir: str | None) -> list[str]:
    """The keys of the mounted Secret (its files; Kubernetes' hidden ``..data`` links skipped)."""
    if not client_dir or not os.path.isdir(client_dir):
        return []
    return sorted(
        name
        for name in os.listdir(client_dir)
        if not name.startswith(".") and os.path.isfile(os.path.join(client_dir, name))
    )


def _secret_field(client_dir: str | None) -> str:
    return f"spec.broker.secretRef (mounted at {client_dir})" if client_dir else "spec.broker.secretRef"


def check_client(policy: DeadLetterPolicy, client_dir: str | None) -> None:
    """The client's settings are a Pulsar client's, and a ``pulsar+ssl://`` broker's
    certificate is trusted; else ``PulsarAccessError``."""
    keys = client_files(client_dir)
    wrong = pulsar_client.problems(keys)
    if wrong:
        raise PulsarAccessError(Refusal.SETTINGS, f"{_secret_field(client_dir)}: {'; '.join(wrong)}")
    url = policy.broker.service_url
    if not url.startswith("pulsar+ssl://"):
        return
    host, port = _first_host(url, 6651)
    context = tls_context({key: os.path.join(str(client_dir), key) for key in keys})
    try:
        with (
            socket.create_connection((host, port), timeout=TIMEOUT_MS / 1000) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            pass
    except ssl.SSLCertVerificationError as error:
        trusted = (
            f"the certificates of {pulsar_client.CA} in {_secret_field(client_dir)}"
            if pulsar_client.CA in keys
            else f"the system's certificates ({_secret_field(client_dir)} has no {pulsar_client.CA})"
        )
        raise PulsarAccessError(
            Refusal.CERTIFICATE,
            f"the Pulsar broker's certificate at {host}:{port} (spec.broker.serviceUrl) is not trusted "
            f"by {trusted}: {error.verify_message or error.reason}",
        ) from None
    except ssl.SSLError as error:
        raise PulsarAccessError(
            Refusal.CERTIFICATE,
            f"TLS with the Pulsar broker at {host}:{port} (spec.broker.serviceUrl) failed: {error}",
        ) from None
    except OSError as error:
        raise PreflightError(
            f"cannot reach the Pulsar broker at {url} (spec.broker.serviceUrl): {error}"
        ) from None


def tls_context(files: Mapping[str, str]) -> ssl.SSLContext:
    """A client's TLS context from the settings' files (key -> path): the CA bundle to trust
    (else the system's), the client certificate when there is one; host names verified."""
    context = ssl.create_default_context(cafile=files.get(pulsar_client.CA))
    if pulsar_client.CERT in files and pulsar_client.KEY in files:
        context.load_cert_chain(files[pulsar_client.CERT], files[pulsar_client.KEY])
    return context


def _first_host(url: str, default_port: int) -> tuple[str, int]:
    first = url.split("://", 1)[1].rstrip("/").split(",")[0]
    parsed = urllib.parse.urlsplit(f"//{first}")
    return parsed.hostname or first, parsed.port or default_port


def _java_refusal(error: Py4JJavaError) -> Refusal | None:
    cause: Any = error.java_exception
    while cause is not None:
        name = str(cause.getClass().getSimpleName())
        for java, refusal in _JAVA_REFUSALS:
            if name.endswith(java):
                return refusal
        cause = cause.getCause()
    return None


def check_topics(spark: SparkSession, policy: DeadLetterPolicy, client_dir: str | None = None) -> None:
    """Every topic the policy names exists on the Pulsar cluster, the client's settings
    (``client_dir``) are taken, and the engine may produce to the topics it writes; else
    ``PreflightError`` naming the missing topics in full, the broker that does not answer, or
    (``PulsarAccessError``) what the broker refused."""
    check_client(policy, client_dir)
    url = policy.broker.service_url
    directory = os.path.abspath(client_dir) if client_dir and client_files(client_dir) else ""
    full = {pulsar_topic(name).full_name: path for path, name in _names(policy)}
    lookup: Any = spark.sparkContext._jvm
    for part in TOPICS_CLASS.split("."):
        lookup = getattr(lookup, part)
    # The produce check first: a role without any permission on a topic may not even look it up.
    written = [name for name, path in full.items() if path != "spec.source.topic"]
    try:
        refused = [str(line) for line in lookup.unwritable(url, directory, written, TIMEOUT_MS)]
        missing = (
            [] if refused else [str(name) for name in lookup.missing(url, directory, list(full), TIMEOUT_MS)]
        )
    except Py4JJavaError as error:
        raise _refused(error, url, client_dir) from None
    if refused:
        named = []
        for line in refused:
            topic, why = line.split(": ", 1)
            named.append(f"{topic} ({full[topic]}): {why}")
        raise PulsarAccessError(
            Refusal.PERMISSION,
            f"the Pulsar client ({_secret_field(client_dir)}) may not produce to {'; '.join(named)} "
            "(the engine's role needs produce on the retry, dead-letter and output topics)",
        )
    if missing:
        raise PreflightError(
            f"topics missing on {url}: {', '.join(f'{name} ({full[name]})' for name in missing)} (the "
            "operator creates the retry and dead-letter topics; run with --create-topics to create them here)"
        )


def _refused(error: Py4JJavaError, url: str, client_dir: str | None) -> PreflightError:
    message = str(error.java_exception.getMessage())
    refusal = _java_refusal(error)
    if refusal is Refusal.CREDENTIALS:
        return PulsarAccessError(
            refusal,
            f"the Pulsar broker at {url} refused the client's credentials ({_secret_field(client_dir)}): {message}",
        )
    if refusal is not None:
        return PulsarAccessError(refusal, f"the Pulsar broker at {url} refused the client: {message}")
    return PreflightError(f"cannot reach the Pulsar broker at {url} (spec.broker.serviceUrl): {message}")


class _Admin:
    """Pulsar's admin REST API at ``spec.broker.adminUrl``, with the client's token and TLS
    settings (``client_dir``): each call's JSON answer, None for a 404 or a 409 (``found`` says
    which)."""

    def __init__(self, base: str, client_dir: str | None = None) -> None:
        self.base = base.rstrip("/")
        keys = client_files(client_dir)
        wrong = pulsar_client.problems(keys)
        if wrong:
            raise PulsarAccessError(Refusal.SETTINGS, f"{_secret_field(client_dir)}: {'; '.join(wrong)}")
        if pulsar_client.authentication(keys) == "oauth2":
            raise PulsarAccessError(
                Refusal.SETTINGS,
                f"--create-topics takes a token or a client certificate for the admin REST API, not the "
                f"OAuth2 credentials of {_secret_field(client_dir)} (the operator creates topics with OAuth2)",
            )
        files = {key: os.path.join(str(client_dir), key) for key in keys}
        self._headers = {"Content-Type": "application/json"}
        if pulsar_client.TOKEN in files:
            with open(files[pulsar_client.TOKEN], encoding="utf-8") as handle:
                self._headers["Authorization"] = f"Bearer {handle.read().strip()}"
        self._context = tls_context(files) if self.base.startswith("https://") else None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.base}/admin/v2/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            # Pulsar answers 415 to a PUT without a JSON content type, even one with no body.
            headers=self._headers,
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_MS / 1000, context=self._context) as answer:
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


def create_topics(policy: DeadLetterPolicy, client_dir: str | None = None) -> list[str]:
    """Create the retry and dead-letter topics that are missing, partitioned like the source
    (``wanted_topics``), and the durable subscriptions the operator would
    (``pulsar_subscriptions``), through the admin REST API. One line per topic and subscription;
    what exists is left as it is."""
    if not policy.broker.admin_url:
        raise PreflightError("--create-topics on Pulsar needs spec.broker.adminUrl (the admin REST API)")
    admin = _Admin(policy.broker.admin_url, client_dir)
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
