"""``retry.maxRetryDuration``: a retry due past the budget from the first failure (or the latest
redrive) is not made; the message is dead-lettered ``retry-timeout``. Pure, on an injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from dlq_engine import Message, Retry
from dlq_engine.model import engine_config, parse_policy, to_spec
from dlq_engine.processing.batches import route_batch
from dlq_engine.routing import headers as h
from dlq_engine.routing.outcomes import Route
from dlq_engine.routing.retry_budget import allows, started_at
from dlq_engine.routing.settings import RoutingSettings
from tests.policy_builder import issues, policy_document
from tests.unit.test_batches import KEYED, NOW, SETTINGS, batch, fail, settings_for

MINUTE = 60_000
BUDGET: dict[str, Any] = {"spec.retry.maxRedeliverCount": 100, "spec.retry.maxRetryDuration": "10m"}
BUDGETED = settings_for(BUDGET)


def retry_record(first_failure_ms: int, **extra: bytes) -> dict[str, Any]:
    headers = [(h.ATTEMPT, b"3"), (h.FIRST_FAILURE_AT, str(first_failure_ms).encode())]
    headers += [(name.replace("_", "."), value) for name, value in extra.items()]
    return {"topic": SETTINGS.retry_topic, "headers": headers}


def routed(
    rows: list[dict[str, Any]], settings: RoutingSettings, processor: Any = fail, now: int = NOW
) -> list[dict[str, Any]]:
    return route_batch(batch(rows), settings, processor, now_ms=lambda: now, rand=lambda: 0.5).to_pylist()


@pytest.mark.parametrize(
    ("headers", "started"),
    [
        pytest.param(None, NOW, id="source-record-now"),
        pytest.param([(h.FIRST_FAILURE_AT, b"100")], 100, id="first-failure"),
        pytest.param([(h.FIRST_FAILURE_AT, b"100"), (h.REDRIVE_AT, b"500")], 500, id="redriven-since"),
        pytest.param([(h.FIRST_FAILURE_AT, b"900"), (h.REDRIVE_AT, b"500")], 900, id="failed-after-redrive"),
        pytest.param([(h.FIRST_FAILURE_AT, b"abc")], NOW, id="unreadable-now"),
        pytest.param([(h.FIRST_FAILURE_AT, str(NOW + MINUTE).encode())], NOW, id="future-now"),
        pytest.param([], NOW, id="none-carried"),
    ],
)
def test_the_budget_starts_at_the_first_failure_or_the_latest_redrive(
    headers: list[tuple[str, bytes | None]] | None, started: int
) -> None:
    assert started_at(headers, NOW) == started


def test_a_retry_due_within_the_budget_is_allowed_and_none_past_it() -> None:
    assert allows(0, 10 * MINUTE, 10 * MINUTE)
    assert not allows(0, 10 * MINUTE + 1, 10 * MINUTE)
    assert allows(0, 10**12, 0)  # no budget


def test_a_retry_record_whose_next_retry_is_due_past_the_budget_is_dead_lettered() -> None:
    inside = retry_record(NOW - 10 * MINUTE + 1_000)  # backoff 1 s: due exactly at the budget
    outside = retry_record(NOW - 10 * MINUTE + 999)
    [kept] = routed([inside], BUDGETED)
    [late] = routed([outside], BUDGETED)
    assert (kept["route"], kept["reason"]) == (Route.RETRY, None)
    assert (late["route"], late["reason"]) == (Route.DEAD, "retry-timeout")
    dead = {entry["key"]: entry["value"] for entry in late["headers"]}
    assert dead[h.ATTEMPT] == b"4"  # whatever redeliveries remain (100 here)
    assert dead[h.REASON] == b"retry-timeout"
    assert h.DELIVER_AT not in dead
    assert dead[h.FIRST_FAILURE_AT] == str(NOW - 10 * MINUTE + 999).encode()


def test_a_first_failure_whose_backoff_exceeds_the_budget_is_dead_lettered_at_once() -> None:
    settings = settings_for({**BUDGET, "spec.retry.maxRetryDuration": "500ms"})  # the backoff is 1 s
    [row] = routed([{}], settings)
    assert (row["route"], row["reason"]) == (Route.DEAD, "retry-timeout")


def test_an_explicit_retry_delay_counts_against_the_budget_too() -> None:
    def later(message: Message) -> Any:
        raise Retry("not yet", delay="11m")

    [row] = routed([{}], BUDGETED, later)
    assert row["reason"] == "retry-timeout"


def test_a_redrive_starts_a_fresh_budget() -> None:
    redriven = retry_record(NOW - 60 * MINUTE, dlq_redrive_at=str(NOW - MINUTE).encode())
    [row] = routed([redriven], BUDGETED)
    assert row["route"] == Route.RETRY


def test_a_rule_s_budget_applies_to_its_errors_and_the_policy_s_to_the_rest() -> None:
    rule = {
        "errors": ["ConnectionError"],
        "backoff": {"type": "fixed", "delay": "1s"},
        "maxRetryDuration": "2m",
    }
    settings = settings_for({**BUDGET, "spec.retry.rules": [rule]})
    record = retry_record(NOW - 5 * MINUTE)
    [ruled] = routed([record], settings)  # ConnectionError: the rule's 2 minutes
    [other] = routed([record], settings, lambda m: (_ for _ in ()).throw(ValueError("x")))
    assert (ruled["route"], ruled["reason"]) == (Route.DEAD, "retry-timeout")
    assert other["route"] == Route.RETRY  # the policy's 10 minutes


@pytest.mark.parametrize("mode", ["message", "arrow"])
def test_ordered_and_arrow_paths_decide_the_same(mode: str) -> None:
    settings = settings_for({**BUDGET, **(KEYED if mode == "message" else {})}, mode=mode)
    rows = [{**retry_record(NOW - 20 * MINUTE), "key": b"a"}, {"key": b"a", "value": b"later", "offset": 5}]

    def processor(given: Any) -> Any:
        if mode == "arrow":
            import pyarrow as pa

            return pa.nulls(given.num_rows, pa.binary()), {0: ConnectionError("down")}
        if given.value == b"v":
            raise ConnectionError("down")
        return given.value

    out = routed(rows, settings, processor)
    assert (out[0]["route"], out[0]["reason"]) == (Route.DEAD, "retry-timeout")
    # Not held behind a retry that is not made: the key's next message is processed.
    assert out[1]["route"] in (Route.OUTPUT, Route.ACK)


def test_the_policy_field_and_its_rule_override_parse_and_write_back() -> None:
    document = policy_document(
        {
            "spec.retry.maxRetryDuration": "1h",
            "spec.retry.rules": [
                {"errors": ["TimeoutError"]},
                {"errors": ["ConnectionError"], "maxRetryDuration": "5m"},
                {"errors": ["OSError"], "maxRetryDuration": "0s"},
            ],
        }
    )
    policy = parse_policy(document)
    assert policy.retry.max_retry_duration_ms == 3_600_000
    assert [r.max_retry_duration_ms for r in policy.retry.rules] == [3_600_000, 300_000, 0]
    spec = to_spec(policy)["retry"]
    assert spec["maxRetryDuration"] == "1h"
    assert ["maxRetryDuration" in rule for rule in spec["rules"]] == [False, True, True]
    assert parse_policy({**document, "spec": {**document["spec"], "retry": spec}}) == policy
    settings = RoutingSettings.from_policy(policy)
    classifier = settings.classifier
    assert (classifier.budget_ms, [rule.budget_ms for rule in classifier.rules]) == (
        3_600_000,
        [3_600_000, 300_000, 0],
    )
    assert "maxRetryDuration" not in engine_config(parse_policy(policy_document({})))["spec"]["retry"]


def test_a_bad_budget_is_refused_naming_the_field() -> None:
    assert issues(policy_document({"spec.retry.maxRetryDuration": "soon"}))[0].startswith(
        "spec.retry.maxRetryDuration:"
    )
    assert issues(
        policy_document({"spec.retry.rules": [{"errors": ["E"], "maxRetryDuration": "5 parsecs"}]})
    )[0].startswith("spec.retry.rules[0].maxRetryDuration:")
