"""Provisioning the retry and dead-letter topics: through the Kafka Admin API, Strimzi, or
Pulsar's admin REST API.

One provisioner per mode of docs/reference.md section 2, never two for one topic. ``admin``
creates missing topics with the Kafka Admin API (confluent-kafka, whose blocking calls run in a
thread) and never changes an existing one: fewer partitions than wanted is reported as drift,
not fixed. ``strimzi`` writes one ``KafkaTopic`` per topic in the Kafka cluster's namespace and
waits for Strimzi's topic operator to report it Ready. ``pulsar`` (a policy with broker type
pulsar) creates the topics through Pulsar's admin REST API, partitioned like the source, and
the durable subscriptions that keep what they hold from Pulsar's retention. All report a
``TopicsReport`` that the reconcile turns into the ``TopicsReady`` condition; an unreachable
broker is an exception, ``BrokerUnavailable``, so the reconcile can retry with backoff.

Topics are owned, not borrowed (``topic_ownership``): each report names the topics the
operator created for the policy (``owned``), and only those get what only an owner may do:
Pulsar's subscriptions, a KafkaTopic's spec and owner reference, deletion. A topic that exists
is used as it is. A KafkaTopic takes over a topic of its name that the cluster already has
(Strimzi's topic operator adopts it, puts the KafkaTopic's config on it and deletes it with
the KafkaTopic), so the ``strimzi`` provisioner creates one only for a topic that no other
KafkaTopic names and the cluster does not have (asked through the Admin API).

Retention is checked, never changed: a Kafka retry or dead-letter topic that deletes records
sooner than they are needed (``retention_shortfall``: the configs a topic was created with, the
retention the broker describes for one that existed, a KafkaTopic's ``spec.config``) leaves
TopicsReady True with reason ``ShortRetention`` naming it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import aiohttp
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.cimpl import NewTopic

from dlq_engine.model import DeadLetterPolicy, pulsar_client
from dlq_engine.model.policy import pulsar_topic
from dlq_engine.model.topics import (
    CLEANUP_POLICY,
    RETENTION_MS,
    PulsarSubscriptionWant,
    TopicWant,
    pulsar_subscriptions,
    retention_shortfall,
    wanted_topics,
)
from spark_dlq_operator import naming, render
from spark_dlq_operator.kubeapi import ApiError, KubeApi, Obj, ResourceType, kafka_topics
from spark_dlq_operator.oauth2 import ClientCredentials, OAuth2Refused, OAuth2Unavailable
from spark_dlq_operator.policies.announcements import DRIFT_MARK
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topic_ownership import POLICY_UID_KEY

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: librdkafka errors that mean "cannot talk to the cluster", as opposed to a refusal.
_UNREACHABLE: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)


class BrokerUnavailable(Exception):
    """The Kafka cluster, or Pulsar's admin API, did not answer (or answered that it cannot now)."""


@dataclass(frozen=True, slots=True)
class TopicsReport:
    """What provisioning found. ``ready`` False comes with a reason and a message."""

    ready: bool
    reason: Reason
    message: str
    created: tuple[str, ...] = ()
    #: Human-readable drift findings (an existing topic with fewer partitions than wanted).
    drift: tuple[str, ...] = field(default=())
    #: The topics the operator created for this policy, as far as this provisioning knows: the
    #: ones created now, and those the broker says were created for it (a Pulsar topic's
    #: property, a KafkaTopic's annotation). Named as the policy's broker names them.
    owned: tuple[str, ...] = ()
    #: Topics whose retention deletes records they must keep (``retention_shortfall``).
    short_retention: tuple[str, ...] = ()


def ready_report(
    message: str,
    *,
    created: Sequence[str],
    owned: Sequence[str],
    drift: Sequence[str] = (),
    short_retention: Sequence[str] = (),
) -> TopicsReport:
    """The report of topics that exist: reason ``TopicsReady``, or ``ShortRetention`` (the
    condition stays True: the job runs) with the findings added to the message."""
    if drift:
        message += f"; {DRIFT_MARK} " + "; ".join(drift)
    if short_retention:
        message += "; short retention: " + "; ".join(short_retention)
    return TopicsReport(
        True,
        Reason.SHORT_RETENTION if short_retention else Reason.TOPICS_READY,
        message,
        created=tuple(created),
        drift=tuple(drift),
        owned=tuple(owned),
        short_retention=tuple(short_retention),
    )


#: The operator's identity on one broker: librdkafka settings for its Kafka admin client, the
#: Pulsar client's keys (``dlq_engine.model.pulsar_client``) for Pulsar's admin API; None: no
#: settings of its own beyond the operator-wide ones.
Credentials = Mapping[str, str] | None


class AdminProvisioner:
    """Creates missing topics through the Kafka Admin API; deletes the ones it is told to.

    The operator's identity on a broker is ``extra_config`` (operator-wide) overlaid with the
    ``credentials`` a call passes for that broker (a class's operator Secret); one client per
    broker and identity. ``client_factory`` builds a client from its librdkafka settings."""

    name: Final = "admin"

    def __init__(
        self,
        *,
        timeout: float,
        extra_config: Mapping[str, str] | None = None,
        client_factory: Callable[[dict[str, Any]], Any] = AdminClient,
    ) -> None:
        self._timeout = timeout
        self._extra = dict(extra_config or {})
        self._factory = client_factory
        self._clients: dict[tuple[str, tuple[tuple[str, str], ...]], AdminClient] = {}

    def close(self) -> None:
        """Drop the clients (librdkafka closes a client when it is garbage-collected)."""
        self._clients.clear()

    def _client(self, bootstrap_servers: str, credentials: Credentials = None) -> AdminClient:
        key = (bootstrap_servers, tuple(sorted((credentials or {}).items())))
        client = self._clients.get(key)
        if client is None:
            conf: dict[str, Any] = {
                "bootstrap.servers": bootstrap_servers,
                "client.id": "spark-dlq-operator",
                "socket.connection.setup.timeout.ms": int(self._timeout * 1000),
                "logger": logging.getLogger(f"{__name__}.librdkafka"),
                **self._extra,
                **(credentials or {}),
            }
            client = self._clients[key] = self._factory(conf)
        return client

    async def _run(self, admin: AdminClient, call: Callable[[], T]) -> T:
        """Run a blocking client call in a thread, then serve the client's queued logs."""
        try:
            return await asyncio.get_running_loop().run_in_executor(None, call)
        finally:
            admin.poll(0)

    async def existing(self, policy: DeadLetterPolicy, *, credentials: Credentials = None) -> dict[str, int]:
        """Every topic of the policy's cluster (that the operator may describe) and its
        partition count."""
        admin = self._client(policy.broker.bootstrap_servers, credentials)
        try:
            metadata = await self._run(admin, lambda: admin.list_topics(timeout=self._timeout))
        except KafkaException as error:
            raise BrokerUnavailable(
                f"the Kafka cluster at {policy.broker.bootstrap_servers} did not answer: {_describe(error)}"
            ) from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

    async def ensure(self, policy: DeadLetterPolicy, *, credentials: Credentials = None) -> TopicsReport:
        """Create the missing topics; ``owned`` is what this call created (an existing topic,
        and a create answered TOPIC_ALREADY_EXISTS, are someone's, maybe this policy's)."""
        partitions = await self.existing(policy, credentials=credentials)
        source_partitions = partitions.get(policy.source.topic)
        if not policy.topics.partitions and source_partitions is None:
            return TopicsReport(
                False,
                Reason.SOURCE_TOPIC_MISSING,
                f"the source topic {policy.source.topic!r} does not exist, and "
                "spec.topics.partitions is 0 (as many partitions as the source)",
            )
        wants = wanted_topics(policy, source_partitions=source_partitions)
        missing = [w for w in wants if w.name not in partitions]
        created: list[str] = []
        problems: list[str] = []
        if missing:
            admin = self._client(policy.broker.bootstrap_servers, credentials)
            new = [
                NewTopic(
                    w.name,
                    num_partitions=w.partitions or -1,
                    replication_factor=w.replication_factor,
                    config=dict(w.config),
                )
                for w in missing
            ]
            futures = admin.create_topics(new, request_timeout=self._timeout, operation_timeout=self._timeout)
            for name, future in futures.items():
                try:
                    await self._run(admin, lambda f=future: f.result(timeout=self._timeout * 2))  # type: ignore[misc]
                    created.append(name)
                except KafkaException as error:
                    code = _code(error)
                    if code == KafkaError.TOPIC_ALREADY_EXISTS:
                        continue
                    if code in _UNREACHABLE:
                        raise BrokerUnavailable(f"creating topic {name!r}: {_describe(error)}") from None
                    problems.append(f"creating topic {name!r} failed: {_describe(error)}")
                except TimeoutError:
                    raise BrokerUnavailable(f"creating topic {name!r} timed out") from None
        if problems:
            return TopicsReport(
                False, Reason.CREATE_FAILED, "; ".join(problems), created=tuple(created), owned=tuple(created)
            )
        drift = tuple(
            f"topic {w.name!r} has {partitions[w.name]} partitions, {w.partitions} wanted "
            "(the operator never changes an existing topic's partitions)"
            for w in wants
            if w.name in partitions and w.partitions and partitions[w.name] < w.partitions
        )
        short = await self._short_retention(policy, wants, created=created, credentials=credentials)
        return ready_report(
            f"topics {wants[0].name!r} and {wants[1].name!r} exist",
            created=created,
            owned=created,
            drift=drift,
            short_retention=short,
        )

    async def _short_retention(
        self,
        policy: DeadLetterPolicy,
        wants: Sequence[TopicWant],
        *,
        created: Sequence[str],
        credentials: Credentials,
    ) -> list[str]:
        """``retention_shortfall`` of each topic: of the configs it was created with, or, for a
        topic that existed, of the retention the broker describes (its own or the broker's
        default). Never changes a topic. A broker that does not answer raises BrokerUnavailable."""
        found = {w.name: dict(w.config) for w in wants if w.name in created}
        existing = [w.name for w in wants if w.name not in created]
        if existing:
            admin = self._client(policy.broker.bootstrap_servers, credentials)
            futures = admin.describe_configs(
                [ConfigResource(ConfigResource.Type.TOPIC, name) for name in existing],
                request_timeout=self._timeout,
            )
            for resource, future in futures.items():
                try:
                    entries = await self._run(admin, lambda f=future: f.result(timeout=self._timeout * 2))  # type: ignore[misc]
                except KafkaException as error:
                    if _code(error) in _UNREACHABLE:
                        raise BrokerUnavailable(
                            f"describing topic {resource.name!r}: {_describe(error)}"
                        ) from None
                    continue  # not allowed to describe it (or gone): nothing is known
                except TimeoutError:
                    raise BrokerUnavailable(f"describing topic {resource.name!r} timed out") from None
                found[resource.name] = {
                    key: entries[key].value for key in (RETENTION_MS, CLEANUP_POLICY) if key in entries
                }
        return [problem for w in wants if (problem := retention_shortfall(w, found.get(w.name, {})))]

    async def delete(
        self, policy: DeadLetterPolicy, names: Sequence[str], *, credentials: Credentials = None
    ) -> list[str]:
        """Delete the topics ``names`` on the policy's cluster (the ones the operator created for
        it: ``topic_ownership.deletion``); the names that were deleted."""
        if not names:
            return []
        admin = self._client(policy.broker.bootstrap_servers, credentials)
        try:
            futures = admin.delete_topics(
                list(names), request_timeout=self._timeout, operation_timeout=self._timeout
            )
        except KafkaException as error:
            raise BrokerUnavailable(_describe(error)) from None
        deleted: list[str] = []
        for name, future in futures.items():
            try:
                await self._run(admin, lambda f=future: f.result(timeout=self._timeout * 2))  # type: ignore[misc]
                deleted.append(name)
            except KafkaException as error:
                code = _code(error)
                if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                raise BrokerUnavailable(f"deleting topic {name!r}: {_describe(error)}") from None
            except TimeoutError:
                raise BrokerUnavailable(f"deleting topic {name!r} timed out") from None
        return deleted


class _Refused(Exception):
    """Pulsar's admin API refused a call (4xx); the message names the call and the reason."""


#: Pulsar's name of the earliest message, as a subscription's start position.
_EARLIEST: Final = {"ledgerId": -1, "entryId": -1}
#: What ``PulsarProvisioner._call`` gives for a 404 (not there) and a 409 (already there).
_NOT_FOUND: Final = object()
_EXISTS: Final = object()
_JSON: Final = {"Content-Type": "application/json"}
#: The content type under which Pulsar's admin API takes a partitioned topic's partitions with
#: its properties (``PartitionedTopicMetadata``).
_PARTITIONED_METADATA: Final = "application/vnd.partitioned-topic-metadata+json"
#: The credentials' keys that make a TLS context.
_TLS_KEYS: Final = frozenset({pulsar_client.CA, pulsar_client.CERT, pulsar_client.KEY})


class PulsarProvisioner:
    """Creates a Pulsar policy's retry and dead-letter topics through the admin REST API, with
    as many partitions as the source (none when the source has none, or ``topics.partitions``),
    and, on the topics it created for the policy, the durable subscriptions of
    ``pulsar_subscriptions``. Never changes an existing topic: a partition count other than
    wanted is reported as drift. Creating what exists (409) is success, so a retried or
    repeated reconcile converges.

    A topic is created with the property ``sparkdlq.io/policy-uid`` (the policy's uid): a topic
    that carries it was created for that policy, even when the operator stopped before it
    recorded so. A topic without it is someone else's: no subscription is added to it (a
    subscription that never acknowledges would keep everything written to that topic)."""

    name: Final = "pulsar"

    def __init__(self, *, timeout: float) -> None:
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[tuple[tuple[str, str], ...], ssl.SSLContext] = {}
        self._oauth2 = ClientCredentials()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self,
        policy: DeadLetterPolicy,
        method: str,
        path: str,
        body: Any = None,
        *,
        credentials: Credentials,
        content_type: str = _JSON["Content-Type"],
    ) -> Any:
        """One admin call with the operator's ``credentials`` for the broker (a token, TLS
        settings; ``dlq_engine.model.pulsar_client``); its JSON answer (None when empty),
        ``_NOT_FOUND`` for a 404 and ``_EXISTS`` for a 409. Another 4xx raises ``_Refused``; no
        answer, or a 5xx (the broker cannot now: starting, no bookie), raises
        ``BrokerUnavailable``."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        base = policy.broker.admin_url.rstrip("/")
        url = f"{base}/admin/v2/{path}"
        call = f"{method} {url}"
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type}
        token = await self._token(credentials)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            # Pulsar answers 415 to a PUT without a JSON content type, even one with no body.
            async with self._session.request(
                method, url, data=data, headers=headers, ssl=self._tls(credentials)
            ) as answer:
                status, text, phrase = answer.status, await answer.text(), answer.reason or ""
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise BrokerUnavailable(
                f"Pulsar's admin API at {base} (spec.broker.adminUrl) did not answer {call}: "
                f"{_describe_http(error)}"
            ) from None
        if status == 404:
            return _NOT_FOUND
        if status == 409:
            return _EXISTS
        reason = _reason(text) or phrase or "no reason given"
        if status >= 500:
            raise BrokerUnavailable(f"{call}: HTTP {status} from Pulsar's admin API: {reason}")
        if status >= 400:
            raise _Refused(f"{call}: HTTP {status}: {reason}")
        return json.loads(text) if text.strip() else None

    async def _token(self, credentials: Credentials) -> str:
        """The bearer token of the credentials: theirs, or one their OAuth2 issuer gives."""
        settings = credentials or {}
        way = pulsar_client.authentication(list(settings))
        if way == "token":
            return settings[pulsar_client.TOKEN].strip()
        if way != "oauth2":
            return ""
        assert self._session is not None
        issuer = settings[pulsar_client.OAUTH2_ISSUER].strip()
        try:
            return await self._oauth2.token(self._session, settings)
        except OAuth2Refused as error:
            raise _Refused(f"OAuth2 ({pulsar_client.OAUTH2_ISSUER} {issuer}): {error}") from None
        except OAuth2Unavailable as error:
            raise BrokerUnavailable(str(error)) from None

    def _tls(self, credentials: Credentials) -> ssl.SSLContext | bool:
        """The TLS context of the credentials (their CA bundle, client certificate), else the
        default verification (True)."""
        files = {k: v for k, v in (credentials or {}).items() if k in _TLS_KEYS}
        if not files:
            return True
        key = tuple(sorted(files.items()))
        context = self._contexts.get(key)
        if context is None:
            context = self._contexts[key] = tls_context(files)
        return context

    async def _partitions(self, policy: DeadLetterPolicy, name: str, credentials: Credentials) -> int | None:
        """The topic's partitions (0: a non-partitioned topic), or None when it does not exist."""
        found = await self._call(
            policy, "GET", f"{pulsar_topic(name).rest_path}/partitions", credentials=credentials
        )
        return None if found is _NOT_FOUND else int(found.get("partitions", 0))

    async def _created_for(self, policy: DeadLetterPolicy, name: str, credentials: Credentials) -> str | None:
        """The uid of the policy the topic was created for (its property), or None."""
        found = await self._call(
            policy, "GET", f"{pulsar_topic(name).rest_path}/properties", credentials=credentials
        )
        if not isinstance(found, Mapping):
            return None
        uid = found.get(POLICY_UID_KEY)
        return str(uid) if uid else None

    async def _create(
        self, policy: DeadLetterPolicy, name: str, partitions: int, uid: str, credentials: Credentials
    ) -> bool:
        """Create the topic with the owner's property; False when it exists already."""
        topic = pulsar_topic(name)
        properties = {POLICY_UID_KEY: uid}
        if partitions:
            answer = await self._call(
                policy,
                "PUT",
                f"{topic.rest_path}/partitions",
                {"partitions": partitions, "properties": properties},
                credentials=credentials,
                content_type=_PARTITIONED_METADATA,
            )
        else:
            answer = await self._call(policy, "PUT", topic.rest_path, properties, credentials=credentials)
        if answer is _NOT_FOUND:  # the namespace (a topic's own 404 is "not found" too)
            raise _Refused(f"creating {topic.full_name!r}: its tenant or namespace does not exist")
        return answer is not _EXISTS

    async def ensure(
        self,
        policy: DeadLetterPolicy,
        *,
        owner: naming.Owner,
        owned: Collection[str] = (),
        credentials: Credentials = None,
    ) -> TopicsReport:
        """Create what is missing; ``owned``: the topics (full names) recorded as created for
        the policy; ``credentials``: the operator's own for the broker (its class's Secret)."""
        try:
            return await self._ensure(policy, owner=owner, owned=owned, credentials=credentials)
        except _Refused as error:
            return TopicsReport(False, Reason.CREATE_FAILED, f"Pulsar's admin API refused {error}")

    async def _ensure(
        self,
        policy: DeadLetterPolicy,
        *,
        owner: naming.Owner,
        owned: Collection[str],
        credentials: Credentials,
    ) -> TopicsReport:
        source_partitions = await self._partitions(policy, policy.source.topic, credentials)
        if not policy.topics.partitions and source_partitions is None:
            return TopicsReport(
                False,
                Reason.SOURCE_TOPIC_MISSING,
                f"the source topic {pulsar_topic(policy.source.topic).full_name!r} does not exist, "
                "and spec.topics.partitions is 0 (partitioned like the source)",
            )
        wants = wanted_topics(policy, source_partitions=source_partitions)
        created: list[str] = []
        mine: list[str] = []
        drift: list[str] = []
        for want in wants:
            topic = pulsar_topic(want.name)
            wanted = want.partitions or 0
            found = await self._partitions(policy, want.name, credentials)
            if found is None:
                if await self._create(policy, want.name, wanted, owner.uid, credentials):
                    created.append(topic.full_name)
                    mine.append(topic.full_name)
                found = await self._partitions(policy, want.name, credentials)
            if topic.full_name not in mine and (
                topic.full_name in owned
                or await self._created_for(policy, want.name, credentials) == owner.uid
            ):
                mine.append(topic.full_name)
            if found is not None and found != wanted:
                drift.append(
                    f"topic {topic.full_name!r} has {_pulsar_partitions(found)}, {_pulsar_partitions(wanted)} "
                    "wanted (the operator never changes an existing topic's partitions)"
                )
        subscribed = [s for s in pulsar_subscriptions(policy) if pulsar_topic(s.topic).full_name in mine]
        for sub in subscribed:
            await self._subscribe(policy, sub, credentials)
        names = " and ".join(repr(pulsar_topic(w.name).full_name) for w in wants)
        message = f"topics {names} exist"
        if subscribed:
            kept = ", ".join(f"{s.subscription!r} on {pulsar_topic(s.topic).full_name!r}" for s in subscribed)
            message += f"; durable subscriptions {kept}"
        others = [pulsar_topic(w.name).full_name for w in wants if pulsar_topic(w.name).full_name not in mine]
        if others:
            message += (
                "; no subscription on " + " and ".join(repr(n) for n in others) + ": the operator did not "
                "create it for this policy"
            )
        return ready_report(message, created=created, owned=mine, drift=drift)

    async def _subscribe(
        self, policy: DeadLetterPolicy, sub: PulsarSubscriptionWant, credentials: Credentials
    ) -> None:
        """A durable subscription from the earliest message; one that exists is left where it is."""
        topic = pulsar_topic(sub.topic)
        path = f"{topic.rest_path}/subscription/{sub.subscription}"
        if await self._call(policy, "PUT", path, _EARLIEST, credentials=credentials) is _NOT_FOUND:
            raise _Refused(f"subscribing {sub.subscription!r} to {topic.full_name!r}: the topic is gone")

    async def delete(
        self, policy: DeadLetterPolicy, names: Sequence[str], *, credentials: Credentials = None
    ) -> list[str]:
        """Delete the topics ``names`` (full names: the ones the operator created for the policy)
        with their subscriptions (``force``); the names that were deleted. A refusal is raised
        as ``BrokerUnavailable`` (retried)."""
        deleted: list[str] = []
        for name in names:
            topic = pulsar_topic(name)
            try:
                found = await self._partitions(policy, name, credentials)
                if found is None:
                    continue
                suffix = "/partitions" if found else ""
                path = f"{topic.rest_path}{suffix}?force=true"
                if await self._call(policy, "DELETE", path, credentials=credentials) is _NOT_FOUND:
                    continue
            except _Refused as error:
                raise BrokerUnavailable(f"deleting topic {topic.full_name!r}: {error}") from None
            deleted.append(topic.full_name)
        return deleted


def tls_context(files: Mapping[str, str]) -> ssl.SSLContext:
    """A TLS context from the Pulsar client's settings (PEM text by key): the CA bundle to trust
    (else the system's), the client certificate when there is one; host names verified. Python
    loads a certificate chain from files only: it is written to a private temporary folder and
    removed at once."""
    context = ssl.create_default_context(cadata=files.get(pulsar_client.CA))
    if pulsar_client.CERT in files and pulsar_client.KEY in files:
        with tempfile.TemporaryDirectory(prefix="spark-dlq-tls-") as folder:
            cert, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
            for path, text in ((cert, files[pulsar_client.CERT]), (key, files[pulsar_client.KEY])):
                with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w", encoding="utf-8") as handle:
                    handle.write(text)
            context.load_cert_chain(cert, key)
    return context


def _pulsar_partitions(count: int) -> str:
    return f"{count} partitions" if count else "no partitions (non-partitioned)"


def _reason(text: str) -> str:
    """Pulsar's ``{"reason": ...}``, else the answer's text (shortened); empty when none."""
    try:
        found = json.loads(text)
    except ValueError:
        return text.strip()[:300]
    if isinstance(found, dict) and found.get("reason"):
        return str(found["reason"])
    return text.strip()[:300]


def _describe_http(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__


class StrimziNotServed(Exception):
    """The cluster serves no KafkaTopic version the operator can write (no Strimzi, or one too
    old or too new): nothing can be created or deleted through Strimzi until it does."""

    def __init__(self) -> None:
        versions = " or ".join(f"{naming.STRIMZI_GROUP}/{v}" for v in naming.STRIMZI_VERSIONS)
        super().__init__(
            f"the cluster serves no KafkaTopic ({versions}): install Strimzi's KafkaTopic CRD, or "
            "set spec.topics.provisioner to admin"
        )


class StrimziProvisioner:
    """Writes KafkaTopic objects for Strimzi's topic operator and reads their Ready condition,
    in the newest KafkaTopic version the cluster serves (discovery, looked up again after
    ``ttl`` seconds or when a KafkaTopic call finds the resource gone)."""

    name: Final = "strimzi"

    def __init__(self, api: KubeApi, *, ttl: float = 60.0) -> None:
        self._api = api
        self._ttl = ttl
        self._version: tuple[str | None, float] | None = None

    async def version(self) -> str | None:
        """``v1`` when served, else ``v1beta2`` when served, else None."""
        now = time.monotonic()
        if self._version is not None and now - self._version[1] < self._ttl:
            return self._version[0]
        found: str | None = None
        for version in naming.STRIMZI_VERSIONS:
            if naming.STRIMZI_PLURAL in await self._api.served_resources(naming.STRIMZI_GROUP, version):
                found = version
                break
        self._version = (found, now)
        return found

    async def served(self) -> bool:
        """Whether the cluster serves a KafkaTopic version the operator writes (for ``auto``)."""
        return await self.version() is not None

    async def _kind(self) -> ResourceType:
        version = await self.version()
        if version is None:
            raise StrimziNotServed()
        return kafka_topics(version)

    def _forget_version(self, error: ApiError) -> None:
        """A 404 from a KafkaTopic collection may mean the version went away (Strimzi upgraded):
        discovery is asked again on the next call."""
        if error.status == 404:
            self._version = None

    async def ensure(
        self,
        policy: DeadLetterPolicy,
        *,
        owner: naming.Owner,
        on_cluster: Callable[[], Awaitable[Collection[str]]],
        owned: Collection[str] = (),
    ) -> TopicsReport:
        """Write the policy's KafkaTopics. ``owned``: the topics recorded as created for the
        policy; ``on_cluster``: the topics the Kafka cluster has (asked only before a KafkaTopic
        would be created for a topic not in ``owned``)."""
        if not policy.topics.strimzi.cluster:
            return TopicsReport(
                False,
                Reason.STRIMZI_CLUSTER_MISSING,
                "topics are provisioned through Strimzi: spec.topics.strimzi.cluster "
                "must name the Kafka cluster",
            )
        try:
            kind = await self._kind()
        except StrimziNotServed as error:
            return TopicsReport(False, Reason.STRIMZI_NOT_SERVED, str(error))
        try:
            return await self._ensure(policy, owner=owner, kind=kind, on_cluster=on_cluster, owned=owned)
        except ApiError as error:
            self._forget_version(error)
            raise

    async def _ensure(
        self,
        policy: DeadLetterPolicy,
        *,
        owner: naming.Owner,
        kind: ResourceType,
        on_cluster: Callable[[], Awaitable[Collection[str]]],
        owned: Collection[str],
    ) -> TopicsReport:
        namespace = render.strimzi_namespace(policy)
        listed: list[Obj] | None = None
        source_partitions = None
        if not policy.topics.partitions:
            listed = await self._api.list(kind, namespace)
            source_partitions = _partitions_of(listed, policy.source.topic)
        in_cluster: Collection[str] | None = None
        created: list[str] = []
        mine: list[str] = []
        waiting: list[str] = []
        notes: list[str] = []
        short: list[str] = []
        for want in wanted_topics(policy, source_partitions=source_partitions):
            name = naming.kafka_topic_name(want.name)
            current = await self._api.get(kind, namespace, name)
            if current is None:
                if listed is None:
                    listed = await self._api.list(kind, namespace)
                other = _naming(listed, want.name)
                if other is not None:
                    current = other
                else:
                    if want.name not in owned:
                        if in_cluster is None:
                            in_cluster = await on_cluster()
                        if want.name in in_cluster:
                            notes.append(
                                f"topic {want.name!r} exists in the Kafka cluster without a KafkaTopic and is "
                                "used as it is (a KafkaTopic would take it over)"
                            )
                            continue
                    desired = self._desired(policy, want, owner=owner, kind=kind, mine=True)
                    current, made = await self._api.create(kind, desired)
                    if made:
                        created.append(want.name)
            kafka_topic_name = current["metadata"]["name"]
            if (current.get("spec") or {}).get("topicName", kafka_topic_name) != want.name:
                return TopicsReport(
                    False,
                    Reason.CONFLICT,
                    f"KafkaTopic {namespace}/{kafka_topic_name} exists for another "
                    f"topic ({current['spec'].get('topicName')!r})",
                    created=tuple(created),
                    owned=tuple(mine),
                )
            ours = _ours(current, policy)
            creator = _creator(current)
            if ours and creator == owner.uid:
                mine.append(want.name)
            if ours and creator in (None, owner.uid):
                desired = self._desired(policy, want, owner=owner, kind=kind, mine=want.name in mine)
                patch = _kafka_topic_patch(current, desired)
                if patch:
                    current = await self._api.patch(kind, namespace, kafka_topic_name, patch)
            elif ours:
                notes.append(
                    f"KafkaTopic {namespace}/{kafka_topic_name} was created for an earlier policy of this name "
                    "and is used as it is"
                )
            else:
                notes.append(
                    f"KafkaTopic {namespace}/{kafka_topic_name} is managed outside spark-dlq and used as it is"
                )
            # Strimzi applies a KafkaTopic's spec.config; one that names no retention.ms takes the
            # broker's default, which only the Admin API could read.
            config = (current.get("spec") or {}).get("config") or {}
            if problem := retention_shortfall(want, {k: str(v) for k, v in config.items()}):
                short.append(f"KafkaTopic {namespace}/{kafka_topic_name}: {problem}")
            ready, why = render.strimzi_ready(current)
            if not ready:
                waiting.append(f"KafkaTopic {namespace}/{kafka_topic_name}: {why}")
        if waiting:
            return TopicsReport(
                False,
                Reason.WAITING_FOR_STRIMZI,
                "; ".join(waiting),
                created=tuple(created),
                owned=tuple(mine),
            )
        message = "; ".join(["Strimzi reports the KafkaTopics Ready", *notes])
        if not policy.topics.partitions and source_partitions is None:
            message += "; the source topic has no KafkaTopic here, so the broker's default partitions apply"
        return ready_report(message, created=created, owned=mine, short_retention=short)

    @staticmethod
    def _desired(
        policy: DeadLetterPolicy, want: TopicWant, *, owner: naming.Owner, kind: ResourceType, mine: bool
    ) -> Obj:
        """The KafkaTopic as the operator writes it; an owner reference (garbage collection
        deletes the topic with the policy) only on one it created for this policy."""
        namespace = render.strimzi_namespace(policy)
        collect = mine and namespace == policy.namespace and policy.topics.delete_with_policy
        return render.kafka_topic(
            policy, want, owner=owner if collect else None, uid=owner.uid, version=kind.version
        )

    async def delete(
        self, policy: DeadLetterPolicy, names: Sequence[str], *, owner: naming.Owner
    ) -> list[str]:
        """Delete the KafkaTopics of the topics ``names`` (Strimzi then deletes the topics), each
        only when it is this policy's (its labels and its creator's uid); the topics whose
        KafkaTopic was deleted. Raises StrimziNotServed when no KafkaTopic version is served:
        then nothing is known about the topics, and they must not be reported gone."""
        kind = await self._kind()
        namespace = render.strimzi_namespace(policy)
        deleted: list[str] = []
        try:
            for topic in names:
                name = naming.kafka_topic_name(topic)
                current = await self._api.get(kind, namespace, name)
                if (
                    current is not None
                    and _ours(current, policy)
                    and _creator(current) == owner.uid
                    and (current.get("spec") or {}).get("topicName", name) == topic
                    and await self._api.delete(kind, namespace, name)
                ):
                    deleted.append(topic)
        except ApiError as error:
            self._forget_version(error)
            raise
        return deleted


def _partitions_of(kafka_topics: Sequence[Obj], topic: str) -> int | None:
    """The partitions a KafkaTopic of ``topic`` asks for, if one does."""
    found = _naming(kafka_topics, topic)
    spec = (found or {}).get("spec") or {}
    return int(spec["partitions"]) if spec.get("partitions") else None


def _naming(kafka_topics: Sequence[Obj], topic: str) -> Obj | None:
    """The KafkaTopic whose topic is ``topic`` (its ``spec.topicName``, else its name)."""
    for item in kafka_topics:
        spec = item.get("spec") or {}
        if spec.get("topicName", item["metadata"]["name"]) == topic:
            return item
    return None


def _ours(kafka_topic: Obj, policy: DeadLetterPolicy) -> bool:
    """Labelled as this policy's (by namespace and name: any incarnation of it)."""
    found = (kafka_topic.get("metadata") or {}).get("labels") or {}
    return found.get(naming.POLICY_LABEL) == naming.label_value(policy.name) and found.get(
        naming.POLICY_NAMESPACE_LABEL
    ) == naming.label_value(policy.namespace)


def _creator(kafka_topic: Obj) -> str | None:
    """The uid of the policy the operator created the KafkaTopic for (None: created before the
    operator recorded it, or not by the operator)."""
    annotations = (kafka_topic.get("metadata") or {}).get("annotations") or {}
    uid = annotations.get(POLICY_UID_KEY)
    return str(uid) if uid else None


def _kafka_topic_patch(current: Obj, desired: Obj) -> dict[str, Any]:
    """The merge patch that brings our KafkaTopic to ``desired``: labels, owners, replicas and
    configs as rendered, partitions never lower than they are. Empty when nothing differs."""
    patch: dict[str, Any] = {}
    meta, want_meta = current.get("metadata") or {}, desired["metadata"]
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in want_meta["labels"].items()):
        patch.setdefault("metadata", {})["labels"] = want_meta["labels"]
    if (meta.get("ownerReferences") or None) != want_meta.get("ownerReferences"):
        patch.setdefault("metadata", {})["ownerReferences"] = want_meta.get("ownerReferences")
    spec, want_spec = current.get("spec") or {}, desired["spec"]
    spec_patch: dict[str, Any] = {}
    if want_spec.get("partitions") and int(spec.get("partitions") or 0) < want_spec["partitions"]:
        spec_patch["partitions"] = want_spec["partitions"]
    if want_spec.get("replicas") and spec.get("replicas") != want_spec["replicas"]:
        spec_patch["replicas"] = want_spec["replicas"]
    config = spec.get("config") or {}
    if {k: str(v) for k, v in config.items()} != want_spec["config"]:
        spec_patch["config"] = {**{k: None for k in config}, **want_spec["config"]}
    if spec_patch:
        patch["spec"] = spec_patch
    return patch


def _code(error: KafkaException) -> int | None:
    if error.args and isinstance(error.args[0], KafkaError):
        return int(error.args[0].code())
    return None


def _describe(error: KafkaException) -> str:
    if error.args and isinstance(error.args[0], KafkaError):
        return str(error.args[0].str())
    return str(error)
