"""``DeadLetterRedrive``: which dead letters of a policy to send back, where, and how fast.

Pure Python, like the policy model: the operator validates and renders with it, the engine's
``dlq-engine redrive`` runs it. A redrive is bounded when it starts: only the dead letters that
exist then (the dead-letter topic's end offsets, recorded) are considered.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from dlq_engine.model.field_reader import _Fields, _kind
from dlq_engine.model.policy import API_VERSION, DeadLetterPolicy, Issue, PolicyError, topic_name_problem
from dlq_engine.model.reasons import DEAD_LETTER_REASONS
from dlq_engine.model.redrive_filter import filter_problem

REDRIVE_KIND: Final = "DeadLetterRedrive"

#: Where redriven messages go. ``source``: back through the policy's processor with attempts
#: reset (written to the policy's retry topic, which only that policy reads, due at once; not to
#: the source topic, which every consumer group of it would read again). ``retry``: into the
#: retry stage keeping their attempt count. ``topic``: to ``destination.topic``, as they were.
DestinationType = Literal["source", "retry", "topic"]
DESTINATION_TYPES: Final[tuple[DestinationType, ...]] = get_args(DestinationType)

#: The reasons a dead letter can carry (``dlq.reason``).
REASONS: Final = DEAD_LETTER_REASONS
DEFAULT_MAX_REDRIVES: Final = 3
#: The reason a redrive with ``failOnGaps`` fails with (its status and its Complete condition):
#: dead letters of its snapshot were deleted by the broker (retention, a deleteRecords) before it
#: read them. The driver's final status names it; the operator writes it.
EXPIRED_REASON: Final = "DeadLettersExpired"


@dataclass(frozen=True, slots=True)
class Selection:
    """Which dead letters: every condition given must hold (an empty selection takes all)."""

    #: Epoch milliseconds of ``dlq.failed.at``: at or after / before. None: no bound.
    failed_after_ms: int | None = None
    failed_before_ms: int | None = None
    reasons: tuple[str, ...] = ()
    error_classes: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    #: A Spark SQL boolean expression over the dead-letter columns, in the language
    #: ``redrive_filter`` allows (docs/reference.md, section 6).
    filter: str = ""


@dataclass(frozen=True, slots=True)
class Destination:
    type: DestinationType = "source"
    topic: str = ""


@dataclass(frozen=True, slots=True)
class DeadLetterRedrive:
    name: str
    namespace: str
    policy: str
    selection: Selection = field(default_factory=Selection)
    destination: Destination = field(default_factory=Destination)
    #: Messages written per second at most; 0: as fast as it goes.
    rate_per_second: float = 0.0
    dry_run: bool = False
    #: A dead letter already redriven this many times is skipped and counted, never sent again.
    max_redrives: int = DEFAULT_MAX_REDRIVES
    suspend: bool = False
    #: Stop (Failed, naming the gap) when dead letters of the snapshot expired before they were
    #: read, instead of counting them (``expired``) and going on.
    fail_on_gaps: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_redrive(document: object) -> DeadLetterRedrive:
    """Parse a whole DeadLetterRedrive object. Raises PolicyError naming every problem."""
    issues: list[Issue] = []
    if not isinstance(document, Mapping):
        raise PolicyError([Issue("(document)", f"must be a mapping, got {_kind(document)}")])
    if document.get("apiVersion") != API_VERSION:
        issues.append(Issue("apiVersion", f"must be {API_VERSION}, got {document.get('apiVersion')!r}"))
    if document.get("kind") != REDRIVE_KIND:
        issues.append(Issue("kind", f"must be {REDRIVE_KIND}, got {document.get('kind')!r}"))
    metadata = document.get("metadata")
    name, namespace = "", "default"
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        issues.append(Issue("metadata.name", "is required"))
    else:
        name, namespace = metadata["name"], str(metadata.get("namespace") or "default")
    if document.get("spec") is None:
        issues.append(Issue("spec", "is required"))
    spec = _Fields(document.get("spec"), "spec", issues)

    policy_ref = spec.child("policyRef")
    policy = policy_ref.string("name")
    policy_ref.done()

    s = spec.child("selection")
    after, before = _time(s, "failedAfter"), _time(s, "failedBefore")
    if after is not None and before is not None and after >= before:
        s.fail(s.at("failedBefore"), "must be later than selection.failedAfter")
    reasons = s.string_list("reasons")
    for reason in reasons:
        if reason not in REASONS:
            s.fail(s.at("reasons"), f"must each be one of {', '.join(REASONS)}, got {reason!r}")
    selection = Selection(
        failed_after_ms=after,
        failed_before_ms=before,
        reasons=reasons,
        error_classes=s.string_list("errorClasses"),
        keys=s.string_list("keys"),
        headers=s.string_map("headers"),
        filter=s.string("filter", ""),
    )
    if selection.filter and (problem := filter_problem(selection.filter)):
        s.fail(s.at("filter"), problem)
    s.done()

    d = spec.child("destination")
    destination = Destination(type=d.choice("type", DESTINATION_TYPES, "source"), topic=d.string("topic", ""))
    if destination.type == "topic":
        if not destination.topic:
            d.fail(d.at("topic"), "is required when destination.type is topic")
        elif problem := topic_name_problem(destination.topic):
            d.fail(d.at("topic"), problem)
    elif destination.topic:
        d.fail(d.at("topic"), f"is only for destination.type topic, not {destination.type}")
    d.done()

    rate = spec.number("ratePerSecond", 0.0)
    if rate < 0:
        spec.fail(spec.at("ratePerSecond"), f"must be 0 (no limit) or more, got {rate}")
    redrive = DeadLetterRedrive(
        name=name,
        namespace=namespace,
        policy=policy,
        selection=selection,
        destination=destination,
        rate_per_second=max(rate, 0.0),
        dry_run=spec.boolean("dryRun", False),
        max_redrives=spec.integer("maxRedrives", DEFAULT_MAX_REDRIVES, minimum=1),
        suspend=spec.boolean("suspend", False),
        fail_on_gaps=spec.boolean("failOnGaps", False),
    )
    spec.done()
    if issues:
        raise PolicyError(issues)
    return redrive


def policy_problem(redrive: DeadLetterRedrive, policy: DeadLetterPolicy) -> str | None:
    """Why ``redrive`` cannot run for ``policy`` (not the one it names, or asking what its broker
    cannot do: the field and the rule), or None. The operator fails such a redrive at once; the
    job refuses it before its Spark session starts."""
    if redrive.policy != policy.name:
        return f"spec.policyRef.name is {redrive.policy!r}, but the policy given is {policy.name!r}"
    if redrive.namespace != policy.namespace:
        return f"the redrive is in namespace {redrive.namespace!r}, the policy in {policy.namespace!r}"
    if redrive.fail_on_gaps and policy.is_pulsar:
        return (
            "spec.failOnGaps: must be false for a policy on Pulsar (spec.broker.type pulsar): Pulsar's "
            "message ids are not contiguous, so a redrive cannot tell which dead letters the broker "
            "deleted (the operator's spark-dlq-keep subscription keeps them from retention)"
        )
    return None


def _time(f: _Fields, key: str) -> int | None:
    """An RFC 3339 time (``2026-11-25T10:00:00Z``) as epoch milliseconds."""
    raw = f.string(key, "")
    if not raw:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        f.fail(f.at(key), f"must be an RFC 3339 time such as 2026-11-25T10:00:00Z, got {raw!r}")
        return None
    if parsed.tzinfo is None:
        f.fail(f.at(key), f"must name its time zone (e.g. a trailing Z for UTC), got {raw!r}")
        return None
    return int(parsed.timestamp() * 1000)


def redrive_to_document(redrive: DeadLetterRedrive) -> dict[str, Any]:
    """The redrive as a normalised document (defaults written out), for ``dlq-engine check``
    and the ConfigMap the operator mounts."""
    s = redrive.selection
    selection: dict[str, Any] = {}
    if s.failed_after_ms is not None:
        selection["failedAfter"] = rfc3339(s.failed_after_ms)
    if s.failed_before_ms is not None:
        selection["failedBefore"] = rfc3339(s.failed_before_ms)
    for key, value in (("reasons", s.reasons), ("errorClasses", s.error_classes), ("keys", s.keys)):
        if value:
            selection[key] = list(value)
    if s.headers:
        selection["headers"] = dict(s.headers)
    if s.filter:
        selection["filter"] = s.filter
    destination: dict[str, Any] = {"type": redrive.destination.type}
    if redrive.destination.topic:
        destination["topic"] = redrive.destination.topic
    return {
        "apiVersion": API_VERSION,
        "kind": REDRIVE_KIND,
        "metadata": {"name": redrive.name, "namespace": redrive.namespace},
        "spec": {
            "policyRef": {"name": redrive.policy},
            "selection": selection,
            "destination": destination,
            "ratePerSecond": redrive.rate_per_second,
            "dryRun": redrive.dry_run,
            "maxRedrives": redrive.max_redrives,
            "suspend": redrive.suspend,
            "failOnGaps": redrive.fail_on_gaps,
        },
    }


def rfc3339(ms: int) -> str:
    """Epoch milliseconds as an RFC 3339 UTC time with milliseconds (``...T10:00:00.000Z``)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Gap:
    """Offsets ``first``..``last`` of a partition that the redrive expected and the broker no
    longer had when it read them: ``missing`` of them (all, unless records of the range were read
    before the rest was deleted)."""

    partition: int
    first: int
    last: int
    missing: int


def gaps(
    start: Mapping[int, int],
    end: Mapping[int, int],
    earliest: Mapping[int, int],
    read_below: Mapping[int, int] | None = None,
) -> list[Gap]:
    """The offsets of ``[start, end)`` (per partition) below a partition's ``earliest`` offset
    that were not read (``read_below``: how many records below it were read; none if absent)."""
    found = []
    for partition in sorted(end):
        first, bound = start.get(partition, end[partition]), min(earliest.get(partition, 0), end[partition])
        missing = bound - first - (read_below or {}).get(partition, 0)
        if bound > first and missing > 0:
            found.append(Gap(partition, first, bound - 1, missing))
    return found


def describe_gaps(topic: str, found: Sequence[Gap], *, most: int = 10) -> str:
    """``topic 'x' partition 0 offsets 3-7 (5 dead letters), ...`` for a message (the first
    ``most`` gaps: a pod's termination message holds 4 KiB)."""
    parts = []
    for gap in found[:most]:
        span = f"offset {gap.first}" if gap.first == gap.last else f"offsets {gap.first}-{gap.last}"
        parts.append(
            f"partition {gap.partition} {span} ({gap.missing} dead letter{'s' * (gap.missing != 1)})"
        )
    if len(found) > most:
        parts.append(
            f"and {len(found) - most} more gaps ({sum(g.missing for g in found[most:])} dead letters)"
        )
    return f"topic {topic!r} " + ", ".join(parts)
