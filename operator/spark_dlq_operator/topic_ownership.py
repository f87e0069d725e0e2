"""The topics the operator created for a policy (``status.ownedTopics``), and what deleting the
policy may therefore delete.

A policy author names its retry and dead-letter topics, and ``topics.deleteWithPolicy`` deletes
them with the operator's broker identity: without a record of who created a topic, a policy
naming another team's topic would have it deleted. So the operator writes down each topic it
creates, and deletes only what it wrote down. Decisions (docs/reference.md, "Topics owned, not
borrowed"):

- **Recorded only on creation.** An entry is written when this operator created the topic for
  this policy object: the Admin API's create succeeded, Pulsar's admin API created it (not a
  409), a KafkaTopic was created by the operator for a topic the cluster did not have. A create
  answered ``TOPIC_ALREADY_EXISTS`` or 409 is not ownership, nor is an existing topic.
- **The record is the object's.** ``status.ownedTopics`` lives in the status subresource, which
  policy authors cannot write; a policy deleted and created again under the same name is a new
  object (a new uid, an empty status): it owns nothing of its predecessor's.
- **Crash between create and record.** The entry is written right after the create, but the
  operator can stop in between. Kafka's Admin API keeps no creator and no creation time with a
  topic (confluent-kafka does not return the id a create assigned), so such a topic cannot be
  told from one someone else created in the same moment: it is kept, and the deletion event
  names it. Where the broker keeps a record of its own, ownership is recovered from it: a Pulsar
  topic is created with the property ``sparkdlq.io/policy-uid`` (set only at creation), a
  KafkaTopic with the annotation of the same name; a topic carrying this policy's uid was
  created for it.
- **Upgrade.** Policies reconciled by an operator before this record existed have none: their
  topics are kept when they are deleted (the safe default), and the deletion event says so.
- **Renamed topics.** An entry stays when the policy moves to another topic: the old topic is
  deleted with the policy, unless another policy uses it by then (it is kept, naming that
  policy) or it is on a broker the policy no longer names (kept: the operator's identity goes
  only to the policy's current broker).

Pure: the status in, entries and decisions out; ``reconcile`` does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict, TypeGuard, get_args

from dlq_engine.model import DeadLetterPolicy
from dlq_engine.model.topics import broker_topic_name

TopicKind = Literal["retry", "deadLetter"]
TOPIC_KINDS: Final = get_args(TopicKind)

#: Set on a Pulsar topic (a topic property) and a KafkaTopic (an annotation) the operator
#: created, naming the policy object it was created for.
POLICY_UID_KEY: Final = "sparkdlq.io/policy-uid"

#: The most entries ``status.ownedTopics`` keeps (the CRD's maxItems); beyond it the oldest
#: entries are dropped, and those topics are kept when the policy is deleted.
MAX_OWNED: Final = 64


class OwnedTopic(TypedDict):
    """One entry of ``status.ownedTopics``."""

    broker: str
    name: str
    kind: TopicKind


def broker_id(broker_type: str, address: str) -> str:
    """The broker as the record and the sharing index name it: the bootstrap servers sorted and
    lower-cased, or the Pulsar service URL lower-cased without a trailing slash. Two spellings
    of one address are one broker; two addresses of one cluster are not told apart (a class's
    broker list is what makes policies name a broker one way)."""
    if broker_type == "pulsar":
        return address.strip().lower().rstrip("/")
    return ",".join(sorted({part.strip().lower() for part in address.split(",") if part.strip()}))


def policy_broker(policy: DeadLetterPolicy) -> str:
    return broker_id(policy.broker.type, policy.broker.address)


def topic_kinds(policy: DeadLetterPolicy) -> dict[str, TopicKind]:
    """The policy's retry and dead-letter topics as its broker names them, and their kinds."""
    return {
        broker_topic_name(policy, policy.retry_topic): "retry",
        broker_topic_name(policy, policy.dead_letter_topic): "deadLetter",
    }


def recorded(status: Mapping[str, Any] | None) -> list[OwnedTopic]:
    """``status.ownedTopics``, leaving out malformed entries."""
    found: list[OwnedTopic] = []
    for item in (status or {}).get("ownedTopics") or []:
        if not isinstance(item, Mapping):
            continue
        broker, name, kind = item.get("broker"), item.get("name"), item.get("kind")
        if isinstance(broker, str) and isinstance(name, str) and name and _is_kind(kind):
            found.append(OwnedTopic(broker=broker, name=name, kind=kind))
    return found


def _is_kind(value: object) -> TypeGuard[TopicKind]:
    return value in TOPIC_KINDS


def owned_here(policy: DeadLetterPolicy, status: Mapping[str, Any] | None) -> frozenset[str]:
    """The names recorded on the policy's current broker."""
    broker = policy_broker(policy)
    return frozenset(entry["name"] for entry in recorded(status) if entry["broker"] == broker)


def entries(policy: DeadLetterPolicy, names: Iterable[str]) -> list[OwnedTopic]:
    """Entries for topics just created (or found created) for the policy; ``names`` as its
    broker names them (a name that is neither its retry nor its dead-letter topic is ignored)."""
    kinds = topic_kinds(policy)
    broker = policy_broker(policy)
    return [OwnedTopic(broker=broker, name=name, kind=kinds[name]) for name in names if name in kinds]


def merged(old: object, new: Sequence[OwnedTopic]) -> list[OwnedTopic]:
    """The record with ``new`` added (an entry once per broker and name; the newest
    ``MAX_OWNED``)."""
    result = recorded({"ownedTopics": old})
    seen = {(entry["broker"], entry["name"]) for entry in result}
    for entry in new:
        if (entry["broker"], entry["name"]) not in seen:
            seen.add((entry["broker"], entry["name"]))
            result.append(entry)
    return result[-MAX_OWNED:]


def borrowed(policy: DeadLetterPolicy, owned: Iterable[str]) -> list[str]:
    """The policy's topics the operator did not create for it (used as they are; kept when the
    policy is deleted)."""
    mine = set(owned)
    return [name for name in topic_kinds(policy) if name not in mine]


@dataclass(frozen=True, slots=True)
class Deletion:
    """What deleting a policy with ``deleteWithPolicy`` deletes (names as its broker names
    them) and what it keeps, each with why."""

    delete: tuple[str, ...]
    kept: tuple[tuple[str, str], ...]

    def kept_message(self) -> str:
        return "; ".join(f"topic {name!r} kept: {why}" for name, why in self.kept)


#: Why a topic of the policy that is not in its record is kept.
NOT_CREATED: Final = (
    "the operator did not create it for this policy (it existed before, was created before the "
    "operator recorded the topics it creates, or its creation was not recorded), so "
    "spec.topics.deleteWithPolicy does not delete it"
)


def deletion(
    policy: DeadLetterPolicy,
    status: Mapping[str, Any] | None,
    *,
    used_by: Callable[[str, str], str | None],
) -> Deletion:
    """What to delete: the recorded topics on the policy's broker that no other policy uses
    (``used_by(broker, name)``: that policy's ``namespace/name``, or None). Kept, with why: the
    policy's topics it did not create, recorded topics another policy uses, recorded topics
    on another broker."""
    broker = policy_broker(policy)
    delete: list[str] = []
    kept: list[tuple[str, str]] = []
    record = recorded(status)
    mine = {entry["name"] for entry in record if entry["broker"] == broker}
    for name in topic_kinds(policy):
        if name not in mine:
            kept.append((name, NOT_CREATED))
    for entry in record:
        name = entry["name"]
        if entry["broker"] != broker:
            kept.append((name, f"it is on broker {entry['broker']!r}, which the policy no longer names"))
            continue
        user = used_by(broker, name)
        if user is not None:
            kept.append((name, f"DeadLetterPolicy {user} uses it"))
        elif name not in delete:
            delete.append(name)
    return Deletion(tuple(delete), tuple(kept))
