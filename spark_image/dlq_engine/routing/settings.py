"""What a routing task needs from the policy, in one small picklable value.

The driver builds ``RoutingSettings`` once per query (``from_policy``, with the record limits
read when the query starts) and Spark ships it to every routing task. Its ``classifier`` is the
part routing decisions read (``routing.outcomes.decide``), built from it once; the rest names
what the failure headers carry (the policy, the subscription, the header profiles, the static
headers) and how the processor is called (mode, time limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import zip_longest

from dlq_engine.model.policy import (
    DEFAULT_HEADER_PROFILES,
    BackoffSpec,
    DeadLetterPolicy,
    DeadLetterStrategy,
    HeaderProfile,
    ProcessorMode,
)
from dlq_engine.routing.outcomes import Classifier, RuleLimits, frozen_names
from dlq_engine.routing.record_size import RecordLimits


@dataclass(frozen=True, slots=True)
class RoutingSettings:
    """What a worker needs from the policy, in a small picklable value."""

    retry_topic: str
    policy: str
    subscription: str
    max_redeliver: int
    backoff: BackoffSpec
    strategy: DeadLetterStrategy
    include_stack: bool
    has_output: bool
    mode: ProcessorMode
    non_retryable: frozenset[str] = field(default_factory=frozenset)
    #: ``retry.rules``: each rule's error classes, its redelivery limit, its backoff and its
    #: time budget (a rule given no backoff or budget has the policy's).
    rule_errors: tuple[frozenset[str], ...] = ()
    rule_limits: tuple[int, ...] = ()
    rule_backoffs: tuple[BackoffSpec, ...] = ()
    rule_budgets: tuple[int, ...] = ()
    #: ``retry.maxRetryDuration``; 0: none.
    budget_ms: int = 0
    static_headers: tuple[tuple[str, str], ...] = ()
    header_profiles: tuple[HeaderProfile, ...] = DEFAULT_HEADER_PROFILES
    timeout_ms: int = 0  # processor.timeout; 0: none
    #: A retry routed more than this after its ``dlq.deliver.at`` counts as released late.
    late_after_ms: int = 0
    #: ``source.ordering: key``, ``ordering.onDeadLetter: block``, ``ordering.onOverflow: stop``.
    ordered: bool = False
    block_on_dead_letter: bool = False
    stop_on_overflow: bool = False
    #: A policy on Pulsar: offsets are packed message ids, the Java client's properties are
    #: written beside ``dlq.*`` (the pulsar profile) and its letters' ``RECONSUMETIMES`` counted.
    pulsar: bool = False
    #: What each topic the policy writes accepts (read when the query starts: ``job.record_limits``).
    limits: RecordLimits = field(default_factory=RecordLimits)
    #: The policy has a dead-letter table: a too-large dead letter's value is handed on for it
    #: (``table_value``) when the topic gets a stub.
    table: bool = False
    #: The decisions' view of the above, built once (also after ``dataclasses.replace``).
    classifier: Classifier = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "classifier", self._classifier())

    def _classifier(self) -> Classifier:
        rules = tuple(
            RuleLimits(
                errors=errors,
                max_redeliver=limit if limit is not None else self.max_redeliver,
                backoff=backoff if backoff is not None else self.backoff,
                budget_ms=budget if budget is not None else self.budget_ms,
            )
            for errors, limit, backoff, budget in zip_longest(
                self.rule_errors, self.rule_limits, self.rule_backoffs, self.rule_budgets
            )
        )
        return Classifier(
            max_redeliver=self.max_redeliver,
            strategy=self.strategy,
            has_output=self.has_output,
            backoff=self.backoff,
            budget_ms=self.budget_ms,
            rules=tuple(rule for rule in rules if rule.errors is not None),
            non_retryable=self.non_retryable,
            include_stack=self.include_stack,
            ordered=self.ordered,
            block_on_dead_letter=self.block_on_dead_letter,
            stop_on_overflow=self.stop_on_overflow,
        )

    @classmethod
    def from_policy(cls, policy: DeadLetterPolicy, *, limits: RecordLimits | None = None) -> RoutingSettings:
        return cls(
            retry_topic=policy.retry_topic,
            policy=policy.qualified_name,
            subscription=policy.source.subscription,
            max_redeliver=policy.retry.max_redeliver_count,
            backoff=policy.retry.backoff,
            strategy=policy.dead_letter.strategy,
            include_stack=policy.dead_letter.include_stack_trace,
            has_output=bool(policy.output.topic),
            mode=policy.processor.mode,
            non_retryable=frozen_names(policy.retry.non_retryable_errors),
            rule_errors=tuple(frozen_names(rule.errors) for rule in policy.retry.rules),
            rule_limits=tuple(rule.max_redeliver_count for rule in policy.retry.rules),
            rule_backoffs=tuple(rule.backoff for rule in policy.retry.rules),
            rule_budgets=tuple(rule.max_retry_duration_ms for rule in policy.retry.rules),
            budget_ms=policy.retry.max_retry_duration_ms,
            static_headers=tuple(sorted(policy.dead_letter.headers.items())),
            header_profiles=_profiles(policy),
            timeout_ms=policy.processor.timeout_ms,
            late_after_ms=late_after_ms(policy.spark.trigger_ms),
            ordered=policy.source.ordering == "key",
            block_on_dead_letter=policy.ordering.on_dead_letter == "block",
            stop_on_overflow=policy.ordering.on_overflow == "stop",
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
