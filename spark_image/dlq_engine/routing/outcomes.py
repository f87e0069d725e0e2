"""What became of one processor call, and what that means for the message.

``result_or_failure`` calls the processor and turns whatever happens into a ``Result``: the
encoded result to publish (bytes), None to acknowledge, or a ``Failure`` of one of three kinds
(transient, terminated, non-retryable). ``decide`` then applies the policy to every result:
publish or acknowledge a success, retry a failure while redeliveries remain,
dead-letter otherwise (PIP-22), straight to the dead letters for ``Terminate`` (PIP-367) and
for exception classes listed in ``nonRetryableErrors`` (matched on the class or any base
class, by simple or qualified name, as Spring Kafka's not-retryable exceptions are).
"""

from __future__ import annotations

import enum
import json
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from dlq_engine.model.processor_api import Message, Retry, Terminate
from dlq_engine.model.reasons import EXHAUSTED, NON_RETRYABLE, TERMINATED, DeadLetterReason
from dlq_engine.routing.headers import MAX_MESSAGE_CHARS

#: Stack traces are cut to this many characters (the end is kept: it names the raise site).
MAX_STACK_CHARS: Final = 8_000


class Verdict(enum.IntEnum):
    """How a processor call failed."""

    TRANSIENT = 0  # retry with backoff
    TERMINATED = 1  # Terminate: dead-letter now
    NON_RETRYABLE = 2  # a listed exception class: dead-letter now


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


@dataclass(frozen=True, slots=True)
class Decision:
    route: Route
    reason: DeadLetterReason | None = None  # for dead letters (written or ignored) only


@dataclass(frozen=True, slots=True)
class Rules:
    """What ``decide`` needs of the policy."""

    max_redeliver: int
    strategy: str  # deadLetter.strategy: topic | ignore | stop
    has_output: bool
    #: ``retry.rules[i].maxRedeliverCount``, for a failure that matched rule i.
    rule_limits: tuple[int, ...] = ()


PUBLISH: Final = Decision(Route.OUTPUT)
ACKNOWLEDGE: Final = Decision(Route.ACK)
RETRY: Final = Decision(Route.RETRY)


def decide(result: Result, failures: int, rules: Rules) -> Decision:
    """Where the message goes. ``failures`` counts this call's failure too (attempt + 1)."""
    if not isinstance(result, Failure):
        return PUBLISH if result is not None and rules.has_output else ACKNOWLEDGE
    if result.kind is Verdict.TRANSIENT:
        limit = rules.rule_limits[result.rule] if result.rule >= 0 else rules.max_redeliver
        if failures <= limit:
            return RETRY
        reason = EXHAUSTED
    elif result.kind is Verdict.TERMINATED:
        reason = TERMINATED
    else:
        reason = NON_RETRYABLE
    return dead_letter(reason, rules)


def dead_letter(reason: DeadLetterReason, rules: Rules) -> Decision:
    """A dead letter for ``reason``: written, or only logged and counted under the ``ignore``
    strategy (``stop`` is the caller's to apply: it needs the message)."""
    return Decision(Route.IGNORED if rules.strategy == "ignore" else Route.DEAD, reason)


def decide_all(results: Sequence[Result], attempts: Sequence[int], rules: Rules) -> list[Decision]:
    """``decide`` for each row of a batch (``attempts[i]``: row i's attempt). Every success of a
    batch has the same decision, so it is taken once, not per row."""
    success = PUBLISH if rules.has_output else ACKNOWLEDGE
    return [
        decide(result, attempt + 1, rules)
        if type(result) is Failure
        else (ACKNOWLEDGE if result is None else success)
        for result, attempt in zip(results, attempts, strict=True)
    ]


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
