"""Which policy uses which retry and dead-letter topic: the operator's in-memory index, which
refuses a second policy on a topic (TopicsReady False, reason ``Reason.TOPIC_IN_USE``).

Two policies on one retry topic each read the other's retries as their own and run them through
the wrong processor; on one dead-letter topic, one team's dead letters (payloads, stack traces)
land with another's, and a redrive of one sends the other's back. Nothing in Kafka or Pulsar
stops it when both engines may write there, so the operator does.

Rules:
- A topic is one broker (``topic_ownership.broker_id``) and one name as that broker names it
  (on Pulsar ``orders`` is ``persistent://public/default/orders``). Retry and dead-letter
  topics share one space: a policy's retry topic that is another's dead-letter topic is refused
  like two dead-letter topics.
- Of the policies that name a topic, the one that keeps it: the one that created it (its
  ``status.ownedTopics``), else one that already uses it (its status names it and its
  TopicsReady is not ``TopicInUse``), else the oldest by ``creationTimestamp``, then by
  ``namespace/name``. An older policy edited to name a topic a newer one runs on is refused;
  two policies that shared a topic before this check existed keep it with the older one.
- The others get ``TopicInUse`` naming it; nothing is created for them (a job of theirs that
  already runs is left as it is, as for an invalid spec). When it goes or moves away, the next
  reconcile of a refused policy (kopf's retry, or the resync) takes the topic.
- Source and output topics are not indexed. Reading another policy's retry topic as a source,
  or writing output into it, goes through the engine's own broker credentials (the policy's
  Secret), which the broker's ACLs govern as for any client: the operator lends no identity
  there. What the operator does with its own identity is on retry and dead-letter topics
  (create, subscribe, delete), and that is what the index and ``status.ownedTopics`` guard.
- The index holds the policies this operator watches. It is filled from a listing at start-up,
  updated by every reconcile (before anything is created), rebuilt from each resync round's
  listing, and a deleted policy is dropped at once.

Pure: no I/O; the reconcile, the resync and the handlers feed it.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from dlq_engine.model import DeadLetterPolicy, PolicyError, parse_policy
from dlq_engine.model.heartbeat import time_of
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.topic_ownership import (
    TopicKind,
    broker_id,
    policy_broker,
    recorded,
    topic_kinds,
)

Topic = tuple[str, str]  # (broker, name as the broker names it)

_FIELDS: Final[Mapping[TopicKind, str]] = {"retry": "spec.retry.topic", "deadLetter": "spec.deadLetter.topic"}
_KIND_NAMES: Final[Mapping[TopicKind, str]] = {"retry": "retry", "deadLetter": "dead-letter"}
_STATUS_TOPICS: Final[tuple[tuple[str, TopicKind], ...]] = (
    ("retryTopic", "retry"),
    ("deadLetterTopic", "deadLetter"),
)
_NEVER: Final = datetime.datetime.max.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class Claim:
    """One policy's retry and dead-letter topics, and what its status says about them."""

    policy: str  # namespace/name
    uid: str
    generation: int
    created: datetime.datetime | None
    topics: Mapping[Topic, TopicKind]
    #: Topics its status records as created for it.
    owned: frozenset[Topic] = frozenset()
    #: Topics it already uses (its status names them, and no TopicInUse).
    using: frozenset[Topic] = frozenset()

    def rank(self, topic: Topic) -> tuple[bool, bool, datetime.datetime, str]:
        """Lowest keeps the topic."""
        return (topic not in self.owned, topic not in self.using, self.created or _NEVER, self.policy)


@dataclass(frozen=True, slots=True)
class TopicInUse:
    """Why a policy may not use one of its topics: another policy keeps it."""

    kind: TopicKind
    topic: Topic
    other: str
    other_kind: TopicKind
    because: str

    @property
    def message(self) -> str:
        broker, name = self.topic
        return (
            f"{_FIELDS[self.kind]}: topic {name!r} on broker {broker!r} is the "
            f"{_KIND_NAMES[self.other_kind]} topic of DeadLetterPolicy {self.other}, which keeps it "
            f"({self.because}): a retry or dead-letter topic belongs to one policy; name another"
        )


def _key(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def _status_facts(
    body: Mapping[str, Any], broker: str, kinds: Mapping[str, TopicKind]
) -> tuple[frozenset[Topic], frozenset[Topic]]:
    """What the status says: the topics recorded as created, and those it already uses."""
    status = body.get("status") or {}
    owned = frozenset((entry["broker"], entry["name"]) for entry in recorded(status))
    topics_ready = next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == "TopicsReady"
        ),
        None,
    )
    using: set[Topic] = set()
    if topics_ready is not None and topics_ready.get("reason") != Reason.TOPIC_IN_USE:
        for key in ("retryTopic", "deadLetterTopic"):
            name = status.get(key)
            if isinstance(name, str) and name in kinds:
                using.add((broker, name))
    return owned, frozenset(using)


def _claim(body: Mapping[str, Any], broker: str, kinds: Mapping[str, TopicKind]) -> Claim:
    metadata = body.get("metadata") or {}
    owned, using = _status_facts(body, broker, kinds)
    return Claim(
        policy=_key(body),
        uid=str(metadata.get("uid", "")),
        generation=int(metadata.get("generation") or 0),
        created=time_of(metadata.get("creationTimestamp")),
        topics={(broker, name): kind for name, kind in kinds.items()},
        owned=owned,
        using=using,
    )


def claim_of(policy: DeadLetterPolicy, body: Mapping[str, Any]) -> Claim:
    """The claim of a parsed policy; ``body`` gives its identity, age and status."""
    return _claim(body, policy_broker(policy), topic_kinds(policy))


def _claim_from_status(body: Mapping[str, Any]) -> Claim | None:
    """A policy whose spec does not parse still holds the topics its status names, when it
    got that far: its job, if any, runs on them."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    broker_spec = spec.get("broker")
    if not isinstance(broker_spec, Mapping):
        return None
    broker_type = str(broker_spec.get("type") or "kafka")
    address = broker_spec.get("serviceUrl" if broker_type == "pulsar" else "bootstrapServers")
    kinds = {
        status[key]: kind for key, kind in _STATUS_TOPICS if isinstance(status.get(key), str) and status[key]
    }
    if not isinstance(address, str) or not address or not kinds:
        return None
    return _claim(body, broker_id(broker_type, address), kinds)


@dataclass
class TopicClaims:
    """The index: every watched policy's claim, and who names each topic."""

    _claims: dict[str, Claim] = field(default_factory=dict)
    _by_topic: dict[Topic, set[str]] = field(default_factory=dict)
    #: When each policy was last claimed or released (``now``): a listing taken before that
    #: does not undo it.
    _touched: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def now() -> float:
        return time.monotonic()

    def __len__(self) -> int:
        return len(self._claims)

    def _put(self, claim: Claim) -> None:
        self._drop(claim.policy)
        self._claims[claim.policy] = claim
        for topic in claim.topics:
            self._by_topic.setdefault(topic, set()).add(claim.policy)

    def _drop(self, policy: str) -> None:
        old = self._claims.pop(policy, None)
        if old is None:
            return
        for topic in old.topics:
            users = self._by_topic.get(topic)
            if users is not None:
                users.discard(policy)
                if not users:
                    del self._by_topic[topic]

    def claim(self, claim: Claim) -> TopicInUse | None:
        """Record ``claim`` (replacing the policy's earlier one) and say whether another policy
        keeps one of its topics; None: the policy may use them all, and from now on it counts
        as using them."""
        previous = self._claims.get(claim.policy)
        if previous is not None and previous.uid == claim.uid:
            # What this process learnt since the status was read still holds.
            claim = replace(
                claim,
                owned=claim.owned | previous.owned,
                using=claim.using | (previous.using & claim.topics.keys()),
            )
        self._put(claim)
        self._touched[claim.policy] = self.now()
        refused = self.refusal(claim.policy)
        if refused is None:
            self._claims[claim.policy] = replace(claim, using=frozenset(claim.topics))
        return refused

    def refusal(self, policy: str) -> TopicInUse | None:
        """The first of the policy's topics (retry, then dead-letter) another policy keeps."""
        claim = self._claims.get(policy)
        if claim is None:
            return None
        for topic, kind in sorted(claim.topics.items(), key=lambda item: item[1] != "retry"):
            keeper = min(
                (self._claims[p] for p in self._by_topic.get(topic, ())),
                key=lambda c: c.rank(topic),
            )
            if keeper.policy != policy:
                return TopicInUse(
                    kind, topic, keeper.policy, keeper.topics[topic], _because(keeper, claim, topic)
                )
        return None

    def record_owned(self, policy: str, topics: Iterable[Topic]) -> None:
        """The operator created (or found created) these topics for the policy."""
        claim = self._claims.get(policy)
        if claim is not None:
            self._claims[policy] = replace(claim, owned=claim.owned | frozenset(topics))

    def user_of(self, topic: Topic, *, besides: str) -> str | None:
        """A policy other than ``besides`` that uses the topic (one that was refused it does
        not: it waits for it)."""
        others = [
            c for p in self._by_topic.get(topic, ()) if p != besides and topic in (c := self._claims[p]).using
        ]
        return min(others, key=lambda c: c.rank(topic)).policy if others else None

    def release(self, policy: str, *, uid: str | None = None) -> None:
        """The policy was deleted (``uid``: only when that object is the one indexed)."""
        claim = self._claims.get(policy)
        if claim is not None and (uid is None or claim.uid == uid):
            self._drop(policy)
            self._touched[policy] = self.now()

    def rebuild(
        self,
        bodies: Iterable[Mapping[str, Any]],
        *,
        listed_at: float | None = None,
        parse: Callable[[Mapping[str, Any]], DeadLetterPolicy] = parse_policy,
    ) -> None:
        """Replace the index with the policies listed (at ``listed_at``, by ``now``): a listed
        policy's claim from its spec and status (an entry this process holds for a newer
        generation stays, as does one for a policy whose spec no longer parses: its job runs on
        those topics), the policies not listed dropped. A policy claimed or released after the
        listing stays as that left it. ``parse``: a policy as it runs (the operator's: as its
        class governs it, broker and topics settled)."""
        since = listed_at if listed_at is not None else self.now()
        later = {key for key, at in self._touched.items() if at > since}
        fresh: dict[str, Claim] = {key: self._claims[key] for key in later if key in self._claims}
        for body in bodies:
            key = _key(body)
            if key in later:
                continue
            held = self._claims.get(key)
            try:
                claim: Claim | None = claim_of(parse(body), body)
            except PolicyError:
                claim = None
            if claim is None:
                claim = held if held is not None else _claim_from_status(body)
            elif held is not None and held.uid == claim.uid:
                if held.generation > claim.generation:
                    claim = held
                else:
                    claim = replace(
                        claim,
                        owned=claim.owned | held.owned,
                        using=claim.using | (held.using & claim.topics.keys()),
                    )
            if claim is not None:
                fresh[key] = claim
        self._claims.clear()
        self._by_topic.clear()
        self._touched = {key: at for key, at in self._touched.items() if key in later}
        for claim in fresh.values():
            self._put(claim)


def _because(keeper: Claim, refused: Claim, topic: Topic) -> str:
    if topic in keeper.owned:
        return "the operator created it for that policy"
    if topic in keeper.using:
        return "that policy already uses it"
    if keeper.created is not None and (refused.created is None or keeper.created < refused.created):
        return "that policy is older"
    return "that policy was created at the same time and comes first by namespace/name"
