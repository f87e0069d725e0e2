"""A policy's status as data: its four conditions, its phase, and the status after what one
reconcile (or one SparkApplication event) learnt.

Pure: ``next_status`` takes the old status and an ``Observation`` and returns the new one (a
condition keeps its lastTransitionTime while its status does not change; Ready is derived from
TopicsReady and JobRunning; the phase from the conditions, through ``reasons``). ``status_writer``
writes what this returns.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict, get_args

from dlq_engine.model.heartbeat import OrderingReport
from spark_dlq_operator import topic_ownership
from spark_dlq_operator.reasons import INVALID, JOB_PHASE, Phase, Reason, RestartReason, reason_of
from spark_dlq_operator.topic_ownership import OwnedTopic

ConditionStatus = Literal["True", "False", "Unknown"]


ConditionType = Literal["Ready", "TopicsReady", "JobRunning", "BreakerClosed"]


#: The conditions in the order ``status.conditions`` lists them.
CONDITION_TYPES: Final[tuple[ConditionType, ...]] = get_args(ConditionType)


#: The CRD's bounds on a condition's reason and message.
_REASON_MAX: Final = 1024


_MESSAGE_MAX: Final = 32768


class Condition(TypedDict, total=False):
    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


@dataclass(frozen=True, slots=True)
class ConditionState:
    status: ConditionStatus
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Observation:
    """What one reconcile (or one SparkApplication event) learnt; None leaves a field as is."""

    generation: int | None = None
    #: Set when the spec failed the model's validation, or its class refused it: the problems,
    #: one per line, and the reason.
    invalid: Sequence[str] | None = None
    invalid_reason: Reason = Reason.INVALID_SPEC
    topics: ConditionState | None = None
    job: ConditionState | None = None
    retry_topic: str | None = None
    dead_letter_topic: str | None = None
    #: ``status.broker``: the broker the job uses (the class's when the spec names none).
    broker: Mapping[str, Any] | None = None
    spark_application: str | None = None
    config_hash: str | None = None
    restarted: bool = False
    #: Why the job was restarted.
    restart_reason: RestartReason = RestartReason.CONFIG_CHANGED
    #: ``status.ordering`` as the driver's heartbeat reports it; ``ordering_off``: the policy
    #: does not order by key (any ``status.ordering`` goes).
    ordering: OrderingReport | None = None
    ordering_off: bool = False
    #: ``BreakerClosed`` as the driver's heartbeat reports it; ``breaker_off``: the policy has no
    #: breaker (the condition goes).
    breaker: ConditionState | None = None
    breaker_off: bool = False
    #: Topics the operator created for the policy: added to ``status.ownedTopics``.
    owned_topics: Sequence[OwnedTopic] = ()


def next_status(old: Mapping[str, Any], observation: Observation, *, now: str) -> dict[str, Any]:
    """The policy's status after ``observation``. A condition keeps its lastTransitionTime while
    its status does not change. ``now`` is an RFC 3339 time."""
    status = copy.deepcopy(dict(old))
    generation = (
        observation.generation if observation.generation is not None else status.get("observedGeneration")
    )
    conditions: dict[str, Condition] = {}
    for item in status.get("conditions") or []:
        if isinstance(item, Mapping) and item.get("type"):
            conditions[str(item["type"])] = Condition(**item)  # type: ignore[typeddict-item]

    def put(kind: ConditionType, state: ConditionState) -> None:
        previous = conditions.get(kind)
        since = (
            previous.get("lastTransitionTime", now)
            if previous is not None and previous.get("status") == state.status
            else now
        )
        condition: Condition = {
            "type": kind,
            "status": state.status,
            "reason": state.reason[:_REASON_MAX],
            "message": state.message[:_MESSAGE_MAX],
            "lastTransitionTime": since,
        }
        if generation is not None:
            condition["observedGeneration"] = int(generation)
        conditions[kind] = condition

    if observation.topics is not None:
        put("TopicsReady", observation.topics)
    if observation.job is not None:
        put("JobRunning", observation.job)
    if observation.breaker is not None:
        put("BreakerClosed", observation.breaker)
    elif observation.breaker_off:
        conditions.pop("BreakerClosed", None)
    still_invalid = observation.generation is None and conditions.get("Ready", {}).get("reason") in INVALID
    if observation.invalid is not None:
        put("Ready", ConditionState("False", observation.invalid_reason, "\n".join(observation.invalid)))
    elif not still_invalid:
        put("Ready", _ready(conditions))

    status["conditions"] = [conditions[kind] for kind in CONDITION_TYPES if kind in conditions]
    status["phase"] = phase(conditions)
    if generation is not None:
        status["observedGeneration"] = int(generation)
    for key, value in (
        ("retryTopic", observation.retry_topic),
        ("deadLetterTopic", observation.dead_letter_topic),
        ("sparkApplication", observation.spark_application),
        ("configHash", observation.config_hash),
    ):
        if value is not None:
            status[key] = value
    if observation.broker is not None:
        status["broker"] = dict(observation.broker)
    if observation.owned_topics:
        status["ownedTopics"] = topic_ownership.merged(status.get("ownedTopics"), observation.owned_topics)
    if observation.ordering is not None:
        status["ordering"] = dict(observation.ordering)
    elif observation.ordering_off:
        status.pop("ordering", None)
    status.setdefault("restartCount", 0)
    if observation.restarted:
        status["restartCount"] = int(status["restartCount"]) + 1
        status["lastRestartTime"] = now
        status["lastRestartReason"] = observation.restart_reason
    return status


def _ready(conditions: Mapping[str, Condition]) -> ConditionState:
    """Ready = TopicsReady and JobRunning; otherwise the first one that is not, with its reason."""
    for kind in ("TopicsReady", "JobRunning"):
        condition = conditions.get(kind)
        if condition is None:
            return ConditionState("Unknown", Reason.PENDING, f"{kind} is not known yet")
        if condition.get("status") != "True":
            reason = reason_of(condition.get("reason"), Reason.PENDING)
            return ConditionState("False", reason, condition.get("message", ""))
    return ConditionState("True", Reason.READY, "the topics are ready and the Spark application is running")


def phase(conditions: Mapping[str, Condition]) -> Phase:
    """The one-word summary of the conditions shown by ``kubectl get dlp``."""
    ready = conditions.get("Ready", {})
    topics = conditions.get("TopicsReady", {})
    job = conditions.get("JobRunning", {})
    if ready.get("reason") in INVALID:
        return Phase.INVALID
    if job.get("reason") == Reason.SUSPENDED:
        return Phase.SUSPENDED
    if topics.get("status") != "True":
        return Phase.PROVISIONING
    if job.get("status") == "True":
        return Phase.RUNNING
    return JOB_PHASE.get(reason_of(job.get("reason"), Reason.PENDING), Phase.PENDING)
