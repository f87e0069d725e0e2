"""A policy's status as data (``policies.status``): its conditions, their transition times, its
phase, and the reports the heartbeat adds."""

from __future__ import annotations

from typing import Any

import pytest

from spark_dlq_operator.policies.application_state import JOB_RESTARTING, JOB_SUBMITTED, JOB_SUSPENDED
from spark_dlq_operator.policies.status import ConditionState, Observation, next_status
from spark_dlq_operator.reasons import Reason
from tests.unit.test_supervision import HELD

NOW = "2026-11-22T01:00:00Z"
LATER = "2026-11-22T02:00:00Z"


TOPICS_OK = ConditionState("True", "TopicsReady", "ok")


def full(job: ConditionState, **kwargs: Any) -> Observation:
    return Observation(
        generation=2,
        topics=TOPICS_OK,
        job=job,
        retry_topic="r",
        dead_letter_topic="d",
        spark_application="orders-billing",
        config_hash="abc",
        **kwargs,
    )


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_next_status_from_nothing() -> None:
    broker = {"type": "kafka", "bootstrapServers": "kafka-a:9092"}
    status = next_status({}, full(JOB_SUBMITTED, broker=broker), now=NOW)
    assert status["broker"] == broker
    assert status["observedGeneration"] == 2
    assert status["phase"] == "Pending"
    names = ("retryTopic", "deadLetterTopic", "sparkApplication", "configHash")
    assert tuple(status[k] for k in names) == ("r", "d", "orders-billing", "abc")
    assert status["restartCount"] == 0
    assert "lastRestartTime" not in status
    assert [c["type"] for c in status["conditions"]] == ["Ready", "TopicsReady", "JobRunning"]
    for condition in status["conditions"]:
        assert condition["lastTransitionTime"] == NOW
        assert condition["observedGeneration"] == 2
    ready = conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Submitted")


def test_next_status_ready_when_topics_and_job_are() -> None:
    status = next_status({}, full(ConditionState("True", "Running", "up")), now=NOW)
    assert status["phase"] == "Running"
    ready = conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Ready")


def test_next_status_keeps_the_transition_time_of_an_unchanged_condition() -> None:
    first = next_status({}, full(JOB_SUBMITTED), now=NOW)
    second = next_status(first, full(ConditionState("True", "Running", "up")), now=LATER)
    assert conditions(second)["TopicsReady"]["lastTransitionTime"] == NOW
    assert conditions(second)["JobRunning"]["lastTransitionTime"] == LATER
    assert conditions(second)["Ready"]["lastTransitionTime"] == LATER


def test_next_status_counts_a_restart() -> None:
    first = next_status({}, full(JOB_SUBMITTED), now=NOW)
    second = next_status(first, full(JOB_RESTARTING, restarted=True), now=LATER)
    assert second["restartCount"] == 1
    assert second["lastRestartTime"] == LATER
    assert second["phase"] == "Restarting"


def test_next_status_invalid_names_the_fields() -> None:
    observation = Observation(generation=3, invalid=["spec.a: bad", "spec.b: worse"])
    status = next_status({}, observation, now=NOW)
    assert status["phase"] == "Invalid"
    ready = conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert ready["message"] == "spec.a: bad\nspec.b: worse"
    assert status["observedGeneration"] == 3


def test_next_status_an_application_event_does_not_clear_invalid() -> None:
    invalid = next_status({}, Observation(generation=3, invalid=["spec.a: bad"]), now=NOW)
    status = next_status(invalid, Observation(job=ConditionState("True", "Running", "up")), now=LATER)
    assert status["phase"] == "Invalid"
    assert conditions(status)["JobRunning"]["status"] == "True"


def test_next_status_a_valid_reconcile_clears_invalid() -> None:
    invalid = next_status({}, Observation(generation=3, invalid=["spec.a: bad"]), now=NOW)
    status = next_status(invalid, full(JOB_SUBMITTED), now=LATER)
    assert status["phase"] == "Pending"


def test_next_status_leaves_unobserved_fields_alone() -> None:
    before = next_status({}, full(JOB_SUBMITTED), now=NOW)
    after = next_status(before, Observation(), now=LATER)
    assert after == before


@pytest.mark.parametrize(
    ("topics", "job", "phase"),
    [
        pytest.param(TOPICS_OK, ConditionState("True", "Running", ""), "Running", id="running"),
        pytest.param(
            ConditionState("False", "BrokerUnavailable", ""), None, "Provisioning", id="provisioning"
        ),
        pytest.param(TOPICS_OK, JOB_SUSPENDED, "Suspended", id="suspended"),
        pytest.param(TOPICS_OK, JOB_RESTARTING, "Restarting", id="restarting"),
        pytest.param(TOPICS_OK, ConditionState("False", "Failed", ""), "Failed", id="failed"),
        pytest.param(TOPICS_OK, ConditionState("False", "Completed", ""), "Failed", id="completed"),
        pytest.param(TOPICS_OK, JOB_SUBMITTED, "Pending", id="pending"),
    ],
)
def test_phase(topics: ConditionState, job: ConditionState | None, phase: str) -> None:
    observation = Observation(generation=1, topics=topics, job=job)
    assert next_status({}, observation, now=NOW)["phase"] == phase


def test_next_status_takes_the_ordering_report_and_drops_it_when_ordering_is_off() -> None:
    status = next_status({}, full(JOB_SUBMITTED), now=NOW)
    held = next_status(status, Observation(ordering=HELD), now=NOW)  # type: ignore[arg-type]
    assert held["ordering"] == HELD
    assert next_status(held, Observation(), now=NOW)["ordering"] == HELD
    assert "ordering" not in next_status(held, Observation(ordering_off=True), now=NOW)


def test_next_status_puts_the_breaker_condition_last_and_drops_it_without_a_breaker() -> None:
    status = next_status({}, full(JOB_SUBMITTED), now=NOW)
    opened = ConditionState("False", Reason.BREAKER_OPEN, "the breaker opened at ...")
    with_breaker = next_status(status, Observation(breaker=opened), now=LATER)
    assert [c["type"] for c in with_breaker["conditions"]] == [
        "Ready",
        "TopicsReady",
        "JobRunning",
        "BreakerClosed",
    ]
    assert with_breaker["conditions"][-1]["lastTransitionTime"] == LATER
    # Ready is the topics and the job: an open breaker pauses the job, it does not make it unready.
    assert with_breaker["conditions"][0] == status["conditions"][0]
    half = ConditionState("False", Reason.BREAKER_HALF_OPEN, "the breaker is half-open ...")
    later = next_status(with_breaker, Observation(breaker=half), now="2026-11-22T03:00:00Z")
    assert later["conditions"][-1]["lastTransitionTime"] == LATER  # still False: since it opened
    assert next_status(later, Observation(), now=NOW)["conditions"] == later["conditions"]
    gone = next_status(later, Observation(breaker_off=True), now=NOW)
    assert [c["type"] for c in gone["conditions"]] == ["Ready", "TopicsReady", "JobRunning"]
