"""What a processor call becomes (results, acks, failures) and where the message goes."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pytest

from dlq_engine import Message, Retry, Terminate
from dlq_engine.model.policy import BackoffSpec
from dlq_engine.routing.headers import MAX_MESSAGE_CHARS
from dlq_engine.routing.outcomes import (
    ACKNOWLEDGE,
    MAX_STACK_CHARS,
    PUBLISH,
    Classifier,
    Decision,
    Failure,
    Result,
    Route,
    RuleLimits,
    StopRule,
    UnsupportedResult,
    Verdict,
    classify,
    decide,
    encode_result,
    item_result_or_failure,
    overflow,
    result_or_failure,
    success_routes,
)

MESSAGE = Message(key=b"k", value=b"v")
NOW = 1_800_000_000_000


def failure_of(process: Any) -> Failure:
    """The failure a call of ``process`` on MESSAGE comes to (it must fail)."""
    result = result_or_failure(process, MESSAGE, frozenset(), with_stack=True)
    assert isinstance(result, Failure)
    return result


def item_failure(item: object) -> Failure:
    result = item_result_or_failure(item, frozenset(), with_stack=False)
    assert isinstance(result, Failure)
    return result


class BillingError(Exception):
    pass


class CardDeclined(BillingError):
    pass


@pytest.mark.parametrize(
    ("result", "encoded"),
    [
        pytest.param(b"raw", b"raw", id="bytes"),
        pytest.param(bytearray(b"ba"), b"ba", id="bytearray"),
        pytest.param("héllo", "héllo".encode(), id="str-utf8"),
        pytest.param({"b": 1, "a": [1, 2]}, b'{"b":1,"a":[1,2]}', id="dict-json"),
        pytest.param(None, None, id="none-acks"),
    ],
)
def test_results_are_encoded_for_the_output_topic(result: Any, encoded: bytes | None) -> None:
    assert encode_result(result) == encoded


def test_an_unsupported_result_type_is_a_failure_naming_the_type() -> None:
    outcome = failure_of(lambda m: 42)
    assert outcome.kind is Verdict.TRANSIENT
    assert outcome.error_class == "dlq_engine.routing.outcomes.UnsupportedResult"
    assert outcome.error_message == "processor returned int; return bytes, str, dict or None"


def test_terminate_retry_and_listed_errors_are_classified() -> None:
    assert failure_of(lambda m: (_ for _ in ()).throw(Terminate("no"))).kind is Verdict.TERMINATED
    retry = classify(Retry(delay="30s"), frozenset(), with_stack=False)
    assert (retry.kind, retry.delay_ms) == (Verdict.TRANSIENT, 30_000)
    assert (
        classify(CardDeclined("x"), frozenset({"BillingError"}), with_stack=False).kind
        is Verdict.NON_RETRYABLE
    )
    qualified = f"{__name__}.BillingError"
    assert classify(CardDeclined("x"), frozenset({qualified}), with_stack=False).kind is Verdict.NON_RETRYABLE
    assert classify(CardDeclined("x"), frozenset({"KeyError"}), with_stack=False).kind is Verdict.TRANSIENT


def test_builtin_errors_are_named_without_module_and_others_with_it() -> None:
    assert classify(KeyError("k"), frozenset(), with_stack=False).error_class == "KeyError"
    assert (
        classify(CardDeclined("x"), frozenset(), with_stack=False).error_class == f"{__name__}.CardDeclined"
    )


def test_an_exception_whose_str_raises_is_still_routed() -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise RuntimeError("boom")

    outcome = classify(Nasty(), frozenset(), with_stack=True)
    assert outcome.error_message == "<unprintable Nasty: str() raised RuntimeError>"
    assert outcome.kind is Verdict.TRANSIENT


def test_stack_traces_are_bounded_and_keep_the_raise_site() -> None:
    error: BaseException | None = None
    for level in range(200):  # a long chain of causes: a trace far over the bound
        try:
            raise ValueError(f"level {level}") from error
        except ValueError as raised:
            error = raised
    assert error is not None
    outcome = classify(error, frozenset(), with_stack=True)
    assert outcome.stacktrace is not None
    assert len(outcome.stacktrace) == MAX_STACK_CHARS + len("...(truncated)...\n")
    assert outcome.stacktrace.startswith("...(truncated)...")
    assert outcome.stacktrace.rstrip().endswith("ValueError: level 199")


def test_batch_items_may_be_results_or_exceptions() -> None:
    assert item_result_or_failure("ok", frozenset(), with_stack=False) == b"ok"
    assert item_result_or_failure(None, frozenset(), with_stack=False) is None
    assert item_failure(Terminate("t")).kind is Verdict.TERMINATED
    assert item_failure(object()).kind is Verdict.TRANSIENT


def test_a_success_is_its_encoded_result() -> None:
    assert result_or_failure(lambda m: {"id": 1}, MESSAGE, frozenset(), with_stack=False) == b'{"id":1}'
    assert result_or_failure(lambda m: None, MESSAGE, frozenset(), with_stack=False) is None


@pytest.mark.parametrize(
    ("result", "failures", "strategy", "has_output", "expected"),
    [
        pytest.param(b"r", 1, "topic", True, PUBLISH, id="result-out"),
        pytest.param(b"r", 1, "topic", False, ACKNOWLEDGE, id="result-no-output-topic"),
        pytest.param(None, 1, "topic", True, ACKNOWLEDGE, id="ack"),
        pytest.param(b"r", 9, "topic", True, PUBLISH, id="a-late-success-is-published"),
        pytest.param(
            Failure(Verdict.TRANSIENT),
            1,
            "topic",
            True,
            Decision(Route.RETRY, deliver_at=NOW + 1000),
            id="first-failure-retries",
        ),
        pytest.param(
            Failure(Verdict.TRANSIENT),
            3,
            "topic",
            True,
            Decision(Route.RETRY, deliver_at=NOW + 4000),
            id="last-redelivery-backs-off-exponentially",
        ),
        pytest.param(
            Failure(Verdict.TRANSIENT), 4, "topic", True, Decision(Route.DEAD, "exhausted"), id="exhausted"
        ),
        pytest.param(
            Failure(Verdict.TERMINATED), 1, "topic", True, Decision(Route.DEAD, "terminated"), id="terminated"
        ),
        pytest.param(
            Failure(Verdict.NON_RETRYABLE),
            1,
            "topic",
            True,
            Decision(Route.DEAD, "non-retryable"),
            id="non-retryable",
        ),
        pytest.param(
            Failure(Verdict.TERMINATED), 1, "ignore", True, Decision(Route.IGNORED, "terminated"), id="ignore"
        ),
        pytest.param(
            Failure(Verdict.TRANSIENT),
            4,
            "stop",
            True,
            Decision(Route.DEAD, "exhausted", stop=StopRule.STRATEGY),
            id="stop-stops-on-a-dead-letter",
        ),
    ],
)
def test_decide(result: Result, failures: int, strategy: Any, has_output: bool, expected: Decision) -> None:
    classifier = Classifier(max_redeliver=3, strategy=strategy, has_output=has_output)
    assert decide(result, failures, classifier, now=NOW) == expected


def test_zero_redeliveries_dead_letters_the_first_failure() -> None:
    classifier = Classifier(max_redeliver=0, strategy="topic", has_output=True)
    assert decide(Failure(Verdict.TRANSIENT), 1, classifier) == Decision(Route.DEAD, "exhausted")


@pytest.mark.parametrize(
    ("result", "message"),
    [
        pytest.param(42, "processor returned int; return bytes, str, dict or None", id="int"),
        pytest.param({1, 2}, "processor returned set; return bytes, str, dict or None", id="set"),
        pytest.param(
            {"when": datetime.date(2026, 1, 2)},
            "processor returned a dict that is not JSON: Object of type date is not JSON serializable",
            id="dict-with-an-object",
        ),
        pytest.param(
            {(1, 2): "x"},
            "processor returned a dict that is not JSON: keys must be str, int, "
            "float, bool or None, not tuple",
            id="dict-with-a-tuple-key",
        ),
        pytest.param(
            {"x": float("nan")},
            "processor returned a dict that is not JSON: Out of range float values are not JSON compliant",
            id="dict-with-nan",
        ),
        pytest.param(
            "\udcff",
            "processor returned a str that is not valid Unicode text: 'utf-8' codec can't "
            "encode character '\\udcff' in position 0: surrogates not allowed",
            id="lone-surrogate",
        ),
    ],
)
def test_unpublishable_results_are_failures_naming_the_problem(result: Any, message: str) -> None:
    outcome = failure_of(lambda m: result)
    assert (outcome.kind, outcome.error_class, outcome.error_message) == (
        Verdict.TRANSIENT,
        "dlq_engine.routing.outcomes.UnsupportedResult",
        message,
    )
    # The same item in a batch processor's answer fails that message, and nothing is raised.
    assert item_failure(result).error_message == message


def test_a_cyclic_dict_is_not_json() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(UnsupportedResult, match="not JSON: Circular reference detected"):
        encode_result(cyclic)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(SystemExit(3), id="sys-exit"),
        pytest.param(KeyboardInterrupt(), id="keyboard-interrupt"),
        pytest.param(GeneratorExit(), id="generator-exit"),
    ],
)
def test_base_exceptions_from_the_processor_are_failures_of_that_message(error: BaseException) -> None:
    def raise_it(m: Message) -> None:
        raise error

    outcome = failure_of(raise_it)
    assert (outcome.kind, outcome.error_class) == (Verdict.TRANSIENT, type(error).__name__)
    assert outcome.stacktrace is not None
    assert "in raise_it" in outcome.stacktrace


def test_an_exception_whose_str_raises_a_base_exception_is_still_routed() -> None:
    class Nastier(Exception):
        def __str__(self) -> str:
            raise SystemExit("from __str__")

    outcome = classify(Nastier(), frozenset(), with_stack=True)
    assert outcome.error_message == "<unprintable Nastier: str() raised SystemExit>"
    assert outcome.stacktrace is not None
    assert "Nastier: <exception str() failed>" in outcome.stacktrace


def test_a_huge_error_message_is_cut_with_a_marker_and_the_trace_keeps_its_frames() -> None:
    def huge(m: Message) -> None:
        raise ValueError("x" * 5_000_000)

    outcome = failure_of(huge)
    assert len(outcome.error_message) == MAX_MESSAGE_CHARS
    assert outcome.error_message.endswith("...(truncated from 5000000 chars)")
    assert outcome.error_message.startswith("xxxx")
    assert outcome.stacktrace is not None
    assert len(outcome.stacktrace) <= MAX_STACK_CHARS
    assert "in huge" in outcome.stacktrace
    assert outcome.stacktrace.endswith("...(truncated from 5000013 chars)\n")  # "ValueError: ...\n"


@pytest.mark.parametrize("has_output", [True, False])
def test_success_routes_are_decide_for_every_success(has_output: bool) -> None:
    classifier = Classifier(max_redeliver=2, strategy="topic", has_output=has_output)
    results: list[Result] = [b"r", None, b"", None]
    published = np.array([r is not None for r in results])
    assert success_routes(published, classifier).tolist() == [decide(r, 1, classifier).route for r in results]


def test_a_retry_is_due_after_its_rules_backoff_or_the_processors_delay() -> None:
    rule = RuleLimits(frozenset({"TimeoutError"}), 5, BackoffSpec(type="fixed", delay_ms=7000), 0)
    classifier = Classifier(max_redeliver=1, strategy="topic", has_output=True, rules=(rule,))
    assert decide(Failure(Verdict.TRANSIENT, rule=0), 4, classifier, now=NOW).deliver_at == NOW + 7000
    assert decide(Failure(Verdict.TRANSIENT), 2, classifier).route is Route.DEAD  # the policy's limit
    asked = Failure(Verdict.TRANSIENT, delay_ms=30_000)
    assert decide(asked, 1, classifier, now=NOW).deliver_at == NOW + 30_000


def test_a_retry_past_its_time_budget_is_a_retry_timeout_dead_letter() -> None:
    classifier = Classifier(
        max_redeliver=9,
        strategy="topic",
        has_output=True,
        backoff=BackoffSpec("fixed", 60_000),
        budget_ms=90_000,
    )
    first_failed: list[tuple[str, bytes | None]] = [("dlq.first.failure.at", str(NOW - 60_000).encode())]
    assert decide(Failure(Verdict.TRANSIENT), 2, classifier, now=NOW, retry_headers=first_failed) == Decision(
        Route.DEAD, "retry-timeout"
    )
    assert decide(Failure(Verdict.TRANSIENT), 1, classifier, now=NOW).deliver_at == NOW + 60_000


@pytest.mark.parametrize(
    ("block", "result", "failures", "holds"),
    [
        pytest.param(False, Failure(Verdict.TRANSIENT), 1, True, id="retry-holds"),
        pytest.param(False, Failure(Verdict.TERMINATED), 1, False, id="skip-dead-letter-releases"),
        pytest.param(True, Failure(Verdict.TERMINATED), 1, True, id="block-dead-letter-holds"),
        pytest.param(True, Failure(Verdict.TRANSIENT), 9, True, id="block-exhausted-holds"),
        pytest.param(True, overflow("maxHeldPerKey 7"), 1, False, id="block-overflow-does-not-hold"),
        pytest.param(True, b"r", 1, False, id="success-never-holds"),
    ],
)
def test_holds_key_only_under_key_ordering(block: bool, result: Result, failures: int, holds: bool) -> None:
    ordered = Classifier(
        max_redeliver=2, strategy="topic", has_output=True, ordered=True, block_on_dead_letter=block
    )
    assert decide(result, failures, ordered).holds_key is holds
    unordered = Classifier(max_redeliver=2, strategy="topic", has_output=True, block_on_dead_letter=block)
    assert decide(result, failures, unordered).holds_key is False


@pytest.mark.parametrize(
    ("strategy", "stop_on_overflow", "expected"),
    [
        pytest.param("topic", False, Decision(Route.DEAD, "ordering-overflow"), id="dead-letter"),
        pytest.param("ignore", False, Decision(Route.IGNORED, "ordering-overflow"), id="ignored"),
        pytest.param(
            "topic",
            True,
            Decision(Route.DEAD, "ordering-overflow", stop=StopRule.ON_OVERFLOW),
            id="on-overflow-stop",
        ),
        pytest.param(
            "stop",
            False,
            Decision(Route.DEAD, "ordering-overflow", stop=StopRule.STRATEGY),
            id="strategy-stop",
        ),
    ],
)
def test_a_record_past_an_ordering_bound(strategy: Any, stop_on_overflow: bool, expected: Decision) -> None:
    classifier = Classifier(
        max_redeliver=2, strategy=strategy, has_output=True, ordered=True, stop_on_overflow=stop_on_overflow
    )
    assert decide(overflow("maxHeldPerKey 7"), 1, classifier) == expected
