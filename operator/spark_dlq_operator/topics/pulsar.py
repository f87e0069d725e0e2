"""The ``pulsar`` provisioner: a Pulsar policy's topics through Pulsar's admin REST API, partitioned
like the source, with the durable subscriptions that keep what they hold from Pulsar's
retention; the admin calls authenticated with the broker's credentials (token, TLS, OAuth2).
"""

from __future__ import annotations

import json
import os
import ssl
import tempfile
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

import aiohttp

from dlq_engine.model import DeadLetterPolicy, pulsar_client
from dlq_engine.model.policy import pulsar_topic
from dlq_engine.model.topics import (
    PulsarSubscriptionWant,
    pulsar_subscriptions,
    wanted_topics,
)
from spark_dlq_operator import naming
from spark_dlq_operator.oauth2 import ClientCredentials, OAuth2Refused, OAuth2Unavailable
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topic_ownership import POLICY_UID_KEY
from spark_dlq_operator.topics.report import (
    BrokerUnavailable,
    Credentials,
    TopicsReport,
    ready_report,
    source_missing_report,
)


def _whose(credentials: Credentials) -> str:
    """Whose credentials an authentication or authorisation refusal is about (never their values)."""
    if not credentials:
        return (
            "the operator sent no credentials (give them in its class's "
            "spec.brokers[].operatorSecretRef, with admin rights on the namespace)"
        )
    return (
        "the broker refused the operator's credentials for it (its class's "
        f"spec.brokers[].operatorSecretRef: {', '.join(sorted(credentials))}): a role without admin "
        "rights on the namespace, or a token or certificate the broker does not accept"
    )


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
        if status in (401, 403):  # Pulsar answers 401 to a role it does not know or authorise
            raise _Refused(f"{call}: HTTP {status}: {reason}: {_whose(credentials)}")
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
            return source_missing_report(pulsar_topic(policy.source.topic).full_name)
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
