"""What a routing task needs from the policy, in one small picklable value.

The driver builds ``RoutingSettings`` once per query (``from_policy``, with the record limits
read when the query starts) and Spark ships it to every routing task. Its ``classifier`` is the
policy as routing decisions read it (``routing.outcomes.decide``: limits, backoff, budgets,
rules, strategy, ordering), the one place those live; the other fields are what only writing
and calling need: what the failure headers carry (the policy, the subscription, the header
profiles, the static headers), how the processor is called (mode, time limit) and what each
topic accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlq_engine.model.policy import (
    DEFAULT_HEADER_PROFILES,
    DeadLetterPolicy,
    HeaderProfile,
    ProcessorMode,
)
from dlq_engine.routing.outcomes import Classifier
from dlq_engine.routing.record_size import RecordLimits


@dataclass(frozen=True, slots=True)
class RoutingSettings:
    """What a worker needs from the policy, in a small picklable value."""

    #: Every routing decision's view of the policy (built by ``Classifier.from_policy``).
    classifier: Classifier
    retry_topic: str
    policy: str
    subscription: str
    mode: ProcessorMode
    static_headers: tuple[tuple[str, str], ...] = ()
    header_profiles: tuple[HeaderProfile, ...] = DEFAULT_HEADER_PROFILES
    timeout_ms: int = 0  # processor.timeout; 0: none
    #: A retry routed more than this after its ``dlq.deliver.at`` counts as released late.
    late_after_ms: int = 0
    #: A policy on Pulsar: offsets are packed message ids, the Java client's properties are
    #: written beside ``dlq.*`` (the pulsar profile) and its letters' ``RECONSUMETIMES`` counted.
    pulsar: bool = False
    #: What each topic the policy writes accepts (read when the query starts: ``job.record_limits``).
    limits: RecordLimits = field(default_factory=RecordLimits)
    #: The policy has a dead-letter table: a too-large dead letter's value is handed on for it
    #: (``table_value``) when the topic gets a stub.
    table: bool = False

    @classmethod
    def from_policy(cls, policy: DeadLetterPolicy, *, limits: RecordLimits | None = None) -> RoutingSettings:
        return cls(
            classifier=Classifier.from_policy(policy),
            retry_topic=policy.retry_topic,
            policy=policy.qualified_name,
            subscription=policy.source.subscription,
            mode=policy.processor.mode,
            static_headers=tuple(sorted(policy.dead_letter.headers.items())),
            header_profiles=_profiles(policy),
            timeout_ms=policy.processor.timeout_ms,
            late_after_ms=late_after_ms(policy.spark.trigger_ms),
            pulsar=policy.is_pulsar,
            limits=limits or RecordLimits(),
            table=policy.dead_letter.table is not None,
        )


def _profiles(policy: DeadLetterPolicy) -> tuple[HeaderProfile, ...]:
    """The policy's header profiles; on Pulsar the pulsar profile always, so that the Java
    client's retry and dead-letter consumers read our letters."""
    listed = policy.dead_letter.header_profiles
    return listed if not policy.is_pulsar or "pulsar" in listed else (*listed, "pulsar")


def late_after_ms(trigger_ms: int) -> int:
    """When a retry counts as released late: more than one trigger interval and a second past
    its due time (a retry is routed in the first micro-batch that starts after it is due)."""
    return trigger_ms + 1000
