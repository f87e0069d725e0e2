"""What became of one processor call, and what that means for the message: every routing
decision of the engine, in one place.

``result_or_failure`` calls the processor and turns whatever happens into a ``Result``: the
encoded result to publish (bytes), None to acknowledge, or a ``Failure`` of one of four kinds
(transient, terminated, non-retryable, past an ordering bound). ``decide`` then applies the
policy, as a ``Classifier`` built once from it, to every result and returns the whole
``Decision``: publish or acknowledge a success; retry a failure while redeliveries remain, due
when its ``Retry(delay=...)`` or backoff (its rule's, else the policy's) says and within its
time budget (else ``retry-timeout``); dead-letter otherwise (PIP-22), straight away for
``Terminate`` (PIP-367), for exception classes listed in ``nonRetryableErrors`` (matched on
the class or any base class, by simple or qualified name, as Spring Kafka's not-retryable
exceptions are) and for a record the ordering stage let go past a bound. A dead letter is
written, only counted (``ignore``) or stops the pipeline (``stop``, ``ordering.onOverflow:
stop``); under ``source.ordering: key`` a decision says whether the key's later messages are
held back (``holds_key``).
"""

from __future__ import annotations

import enum
import json
import random
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np

from dlq_engine.model.policy import BackoffSpec, DeadLetterPolicy, DeadLetterStrategy, RetryRule
from dlq_engine.model.processor_api import Message, Retry, Terminate
from dlq_engine.model.reasons import (
    EXHAUSTED,
    NON_RETRYABLE,
    ORDERING_OVERFLOW,
    RETRY_TIMEOUT,
    TERMINATED,
    DeadLetterReason,
)
from dlq_engine.routing import retry_budget
from dlq_engine.routing.backoff import delay_ms
from dlq_engine.routing.headers import MAX_MESSAGE_CHARS
from dlq_engine.routing.record_size import Header

#: Stack traces are cut to this many characters (the end is kept: it names the raise site).
MAX_STACK_CHARS: Final = 8_000


class Verdict(enum.IntEnum):
    """How a processor call failed."""

    TRANSIENT = 0  # retry with backoff
    TERMINATED = 1  # Terminate: dead-letter now
    NON_RETRYABLE = 2  # a listed exception class: dead-letter now
    #: ``source.ordering: key``: the ordering stage let the record go past a bound (its note is
    #: the error message); dead-letter with reason ``ordering-overflow``, never processed.
    OVERFLOW = 3


class Route(enum.IntEnum):
    OUTPUT = 0
    ACK = 1
    RETRY = 2
    DEAD = 3
    IGNORED = 4  # dead, but the strategy is ignore: logged and counted
    #: ``source.ordering: key`` only, both written to the retry topic: a later message of a key
    #: whose message went to retry in the same task, unprocessed (``dlq.control: park``); a
    #: control record naming a key's message that is done (``dlq.control: release | block``).
    PARKED = 5
    CONTROL = 6


@dataclass(frozen=True, slots=True)
class Failure:
    """A processor call that failed, with the error as the failure headers carry it."""

    kind: Verdict
    error_class: str = ""
    error_message: str = ""
    stacktrace: str | None = None
    delay_ms: int | None = None  # Retry(delay=...)
    #: The index of the ``retry.rules`` entry the error matched; -1: none (the policy's own).
    rule: int = -1


#: What one processor call came to: the encoded result to publish, None to acknowledge, or
#: the failure. A success is not wrapped in an object: most calls succeed.
Result = bytes | Failure | None


class UnsupportedResult(TypeError):
    """The processor returned something that cannot be published."""


def encode_result(result: object) -> bytes | None:
    """bytes as they are, str as UTF-8, dict/list as JSON; None means acknowledge.

    Anything else, a str that is not valid Unicode (lone surrogates) and a dict or list that is
    not JSON (an object JSON cannot hold, a key that is not a string or number, a cycle, NaN or
    infinity) raise ``UnsupportedResult`` naming the problem: nothing is published that the
    output topic's readers could not parse.
    """
    if result is None:
        return None
    if isinstance(result, bytes | bytearray | memoryview):
        return bytes(result)
    if isinstance(result, str):
        try:
            return result.encode("utf-8")
        except UnicodeEncodeError as error:
            raise UnsupportedResult(
                f"processor returned a str that is not valid Unicode text: {error}"
            ) from None
    if isinstance(result, dict | list):
        try:
            text = json.dumps(result, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError, RecursionError) as error:
            raise UnsupportedResult(
                f"processor returned a {type(result).__name__} that is not JSON: {_safe_str(error)}"
            ) from None
        return text.encode("ascii")  # json.dumps escapes everything else (ensure_ascii)
    raise UnsupportedResult(f"processor returned {type(result).__name__}; return bytes, str, dict or None")


def classify(
    error: BaseException,
    non_retryable: frozenset[str],
    *,
    with_stack: bool,
    rules: tuple[frozenset[str], ...] = (),
) -> Failure:
    """Turn an exception raised for one message into its failure; ``rules`` are the error
    classes of each ``retry.rules`` entry, the first that names the class or a base wins."""
    delay_ms: int | None = None
    rule = -1
    if isinstance(error, Terminate):
        kind = Verdict.TERMINATED
    elif isinstance(error, Retry):
        kind, delay_ms = Verdict.TRANSIENT, error.delay_ms
    elif non_retryable and _names(type(error)) & non_retryable:
        kind = Verdict.NON_RETRYABLE
    else:
        kind = Verdict.TRANSIENT
        if rules:
            names = _names(type(error))
            rule = next((i for i, classes in enumerate(rules) if names & classes), -1)
    cls = type(error)
    return Failure(
        rule=rule,
        kind=kind,
        error_class=f"{cls.__module__}.{cls.__qualname__}"
        if cls.__module__ != "builtins"
        else cls.__qualname__,
        error_message=bounded_message(_safe_str(error)),
        stacktrace=_stack(error) if with_stack else None,
        delay_ms=delay_ms,
    )


def result_or_failure(
    process: Callable[[Message], Any],
    message: Message,
    non_retryable: frozenset[str],
    *,
    with_stack: bool,
    rules: tuple[frozenset[str], ...] = (),
) -> Result:
    """Call the processor on one message; never raises.

    Every ``BaseException`` the processor raises is a failure of that message, ``SystemExit``
    and ``KeyboardInterrupt`` included: a processor calling ``sys.exit()`` must not end the
    Python worker and fail the whole batch. (Spark stops its Python workers with SIGKILL, never
    through an exception, so nothing the engine needs is swallowed.)"""
    try:
        result = process(message)
        if type(result) is bytes:  # the common case; encode_result would return it as it is
            return result
        return encode_result(result)
    except BaseException as error:  # noqa: BLE001 - every failure of the team's code is routed
        return classify(error, non_retryable, with_stack=with_stack, rules=rules)


def item_result_or_failure(
    item: object, non_retryable: frozenset[str], *, with_stack: bool, rules: tuple[frozenset[str], ...] = ()
) -> Result:
    """The result of one element of a batch processor's answer (a result or an exception)."""
    if type(item) is bytes:
        return item
    if isinstance(item, BaseException):
        return classify(item, non_retryable, with_stack=with_stack, rules=rules)
    try:
        return encode_result(item)
    except Exception as error:  # noqa: BLE001 - an unpublishable item fails its message only
        return classify(error, non_retryable, with_stack=False)


#: ``dlq.deliver.at`` is written no later than this (9999-12-31T23:59:59.999Z): a huge explicit
#: ``Retry(delay=...)`` still means "much later" but stays a number the delay stage can hold.
MAX_DELIVER_AT: Final = 253_402_300_799_999

#: The error class of a record past an ordering bound (``Verdict.OVERFLOW``).
OVERFLOW_ERROR: Final = "OrderingOverflow"


class StopRule(enum.Enum):
    """The policy rule by which a dead letter stops the pipeline instead of being written."""

    STRATEGY = "strategy stop"  # deadLetter.strategy: stop
    ON_OVERFLOW = "ordering.onOverflow stop"


@dataclass(frozen=True, slots=True)
class Decision:
    """Where a message goes, with everything that follows from it."""

    route: Route
    reason: DeadLetterReason | None = None  # for dead letters (written or ignored) only
    #: A retry's ``dlq.deliver.at`` (epoch ms); None for every other route.
    deliver_at: int | None = None
    #: A dead letter the pipeline stops on instead of writing it, and the rule that says so.
    stop: StopRule | None = None
    #: ``source.ordering: key``: the key's later messages are parked behind this one.
    holds_key: bool = False


PUBLISH: Final = Decision(Route.OUTPUT)
ACKNOWLEDGE: Final = Decision(Route.ACK)
PARKED: Final = Decision(Route.PARKED)


@dataclass(frozen=True, slots=True)
class RuleLimits:
    """One ``retry.rules`` entry as ``decide`` reads it."""

    errors: frozenset[str]
    max_redeliver: int
    backoff: BackoffSpec
    budget_ms: int

    @classmethod
    def of(cls, rule: RetryRule) -> RuleLimits:
        """The parsed rule (its limit, backoff and budget already the policy's where it gave none)."""
        return cls(
            frozen_names(rule.errors), rule.max_redeliver_count, rule.backoff, rule.max_retry_duration_ms
        )


@dataclass(frozen=True, slots=True)
class Classifier:
    """The policy as routing decisions read it, built once per query (``from_policy``, kept in
    ``RoutingSettings.classifier``)."""

    max_redeliver: int
    strategy: DeadLetterStrategy
    has_output: bool
    backoff: BackoffSpec = field(default_factory=BackoffSpec)
    #: ``retry.maxRetryDuration``; 0: none.
    budget_ms: int = 0
    rules: tuple[RuleLimits, ...] = ()
    non_retryable: frozenset[str] = frozenset()
    include_stack: bool = False
    #: ``source.ordering: key``, ``ordering.onDeadLetter: block``, ``ordering.onOverflow: stop``.
    ordered: bool = False
    block_on_dead_letter: bool = False
    stop_on_overflow: bool = False
    #: Each rule's error classes, as ``classify`` matches them.
    rule_errors: tuple[frozenset[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rule_errors", tuple(rule.errors for rule in self.rules))

    @classmethod
    def from_policy(cls, policy: DeadLetterPolicy) -> Classifier:
        retry = policy.retry
        return cls(
            max_redeliver=retry.max_redeliver_count,
            strategy=policy.dead_letter.strategy,
            has_output=bool(policy.output.topic),
            backoff=retry.backoff,
            budget_ms=retry.max_retry_duration_ms,
            rules=tuple(RuleLimits.of(rule) for rule in retry.rules),
            non_retryable=frozen_names(retry.non_retryable_errors),
            include_stack=policy.dead_letter.include_stack_trace,
            ordered=policy.source.ordering == "key",
            block_on_dead_letter=policy.ordering.on_dead_letter == "block",
            stop_on_overflow=policy.ordering.on_overflow == "stop",
        )

    def with_redelivery_limit(self, limit: int) -> Classifier:
        """The same policy with ``limit`` as the policy's and every rule's redelivery limit."""
        rules = tuple(replace(rule, max_redeliver=limit) for rule in self.rules)
        return replace(self, max_redeliver=limit, rules=rules)

    @property
    def success(self) -> Decision:
        """A success with a result: published to the output topic, else acknowledged."""
        return PUBLISH if self.has_output else ACKNOWLEDGE

    def failure(self, error: BaseException, *, with_stack: bool | None = None) -> Failure:
        """``error`` raised for one message, classified under this policy."""
        stack = self.include_stack if with_stack is None else with_stack
        return classify(error, self.non_retryable, with_stack=stack, rules=self.rule_errors)


def decide(
    result: Result,
    failures: int,
    classifier: Classifier,
    *,
    now: int = 0,
    rand: Callable[[], float] = random.random,
    retry_headers: Sequence[Header] | None = None,
) -> Decision:
    """Where the message goes. ``failures`` counts this call's failure too (attempt + 1);
    ``now`` is when it is routed (epoch ms), ``rand`` the jitter's uniform draw, and
    ``retry_headers`` the headers of a record read from the retry topic (its time budget
    started at its first failure), None for a source record."""
    if type(result) is not Failure:
        return ACKNOWLEDGE if result is None else classifier.success
    kind = result.kind
    if kind is Verdict.TRANSIENT:
        rule = classifier.rules[result.rule] if result.rule >= 0 else None
        if failures <= (rule.max_redeliver if rule is not None else classifier.max_redeliver):
            return _retry(result, failures, rule, classifier, now, rand, retry_headers)
        reason: DeadLetterReason = EXHAUSTED
    elif kind is Verdict.TERMINATED:
        reason = TERMINATED
    elif kind is Verdict.OVERFLOW:
        reason = ORDERING_OVERFLOW
    else:
        reason = NON_RETRYABLE
    return dead_letter(reason, classifier)


def dead_letter(reason: DeadLetterReason, classifier: Classifier) -> Decision:
    """A dead letter for ``reason``: written, or only logged and counted under the ``ignore``
    strategy, or the pipeline stops on it (``stop``, and ``ordering.onOverflow: stop`` for a
    record past an ordering bound). Under ``ordering.onDeadLetter: block`` it holds its key,
    unless it is such a record (the bound is what let it go)."""
    overflow = reason == ORDERING_OVERFLOW
    if overflow and classifier.stop_on_overflow:
        stop: StopRule | None = StopRule.ON_OVERFLOW
    else:
        stop = StopRule.STRATEGY if classifier.strategy == "stop" else None
    return Decision(
        Route.IGNORED if classifier.strategy == "ignore" else Route.DEAD,
        reason,
        stop=stop,
        holds_key=classifier.ordered and classifier.block_on_dead_letter and not overflow,
    )


def _retry(
    failure: Failure,
    failures: int,
    rule: RuleLimits | None,
    classifier: Classifier,
    now: int,
    rand: Callable[[], float],
    retry_headers: Sequence[Header] | None,
) -> Decision:
    """A failure with redeliveries left: due after the processor's ``Retry(delay=...)``, else
    the backoff of its rule or the policy; past its time budget (``retry.maxRetryDuration``,
    its rule's) a ``retry-timeout`` dead letter instead."""
    backoff = rule.backoff if rule is not None else classifier.backoff
    wait = failure.delay_ms if failure.delay_ms is not None else delay_ms(backoff, failures, rand())
    due = min(now + wait, MAX_DELIVER_AT)
    budget = rule.budget_ms if rule is not None else classifier.budget_ms
    if budget > 0 and not retry_budget.allows(retry_budget.started_at(retry_headers, now), due, budget):
        return dead_letter(RETRY_TIMEOUT, classifier)
    return Decision(Route.RETRY, deliver_at=due, holds_key=classifier.ordered)


def success_routes(published: np.ndarray, classifier: Classifier) -> np.ndarray:
    """``decide`` for a batch of successes at once (``published[i]``: row i has a result, else
    it is acknowledged), as ``Route`` values."""
    return np.where(published, classifier.success.route, Route.ACK).astype(np.int8)


def overflow(note: str) -> Failure:
    """A record the ordering stage let go past a bound, with its note."""
    return Failure(Verdict.OVERFLOW, OVERFLOW_ERROR, note)


def _names(cls: type) -> set[str]:
    names: set[str] = set()
    for base in cls.__mro__:
        names.add(base.__qualname__)
        names.add(f"{base.__module__}.{base.__qualname__}")
    return names


#: What ``bounded_message`` appends to a message it cut.
TRUNCATED: Final = "...(truncated from {} chars)"


def bounded_message(text: str) -> str:
    """``text``, or its start and a marker naming its length, within ``MAX_MESSAGE_CHARS``."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    marker = TRUNCATED.format(len(text))
    return text[: MAX_MESSAGE_CHARS - len(marker)] + marker


def _safe_str(error: BaseException) -> str:
    try:
        return str(error)
    except BaseException as inner:  # noqa: BLE001 - a broken __str__ must not lose the message
        return f"<unprintable {type(error).__name__}: str() raised {type(inner).__name__}>"


def _stack(error: BaseException) -> str:
    try:
        text = _stack_from_cache(error)
        if text is None:
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    except BaseException:  # noqa: BLE001 - formatting must not lose the message
        text = f"<stack trace unavailable for {type(error).__name__}>"
    if len(text) > MAX_STACK_CHARS:
        text = "...(truncated)...\n" + text[-MAX_STACK_CHARS:]
    return text


#: Formatted frames of a traceback, by the code positions it passes through. Formatting frames
#: (reading source lines, placing the ``^^^`` markers) costs far more than routing a message, and
#: a processor fails at the same few places again and again: the text is the same each time, so
#: it is formatted once. Bounded: cleared when full.
_FRAMES: dict[tuple[tuple[Any, int, int], ...], str | None] = {}
_FRAMES_MAX = 256
_TRACEBACK_HEADER = "Traceback (most recent call last):\n"


def _stack_from_cache(error: BaseException) -> str | None:
    """``format_exception``'s text from cached frames, or None when the slow way must be taken:
    no traceback, a chained exception (cause or context), or an exception group."""
    tb = error.__traceback__
    if (
        tb is None
        or error.__cause__ is not None
        or isinstance(error, BaseExceptionGroup)
        or (error.__context__ is not None and not error.__suppress_context__)
    ):
        return None
    positions = []
    while tb is not None:
        positions.append((tb.tb_frame.f_code, tb.tb_lineno, tb.tb_lasti))
        tb = tb.tb_next
    key = tuple(positions)
    if key in _FRAMES:
        frames = _FRAMES.get(key)  # (an abandoned call's thread may clear the cache meanwhile)
        if frames is None:
            return None  # this traceback does not format as header + frames + exception
        return _TRACEBACK_HEADER + frames + _exception_only(error)
    # First time here: format the usual way, and keep the frames only if the whole text is
    # exactly header + frames + exception (as it is for an unchained exception).
    exc = traceback.TracebackException(type(error), error, error.__traceback__)
    text = "".join(exc.format())
    frames = "".join(exc.stack.format())
    only = "".join(traceback.format_exception_only(type(error), error))
    if len(_FRAMES) >= _FRAMES_MAX:
        _FRAMES.clear()
    exact = text == _TRACEBACK_HEADER + frames + only
    _FRAMES[key] = frames if exact else None
    return _TRACEBACK_HEADER + frames + _exception_only(error) if exact else text


def _exception_only(error: BaseException) -> str:
    """The trace's last part ("ValueError: ..." and any notes), cut to half of
    ``MAX_STACK_CHARS`` so that a huge message leaves room for the frames above it."""
    only = "".join(traceback.format_exception_only(type(error), error))
    limit = MAX_STACK_CHARS // 2
    if len(only) <= limit:
        return only
    marker = TRUNCATED.format(len(only)) + "\n"
    return only[: limit - len(marker)] + marker


def frozen_names(names: Iterable[str]) -> frozenset[str]:
    return frozenset(n.strip() for n in names if n.strip())
