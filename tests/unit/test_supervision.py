"""The driver's heartbeat read by the supervisor (``policies.supervision``): a stalled engine, a
driver pending too long, the ordering stage's report and the breaker's condition, each only
from the current submission's heartbeat."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from spark_dlq_operator import naming
from spark_dlq_operator.policies.status import ConditionState
from spark_dlq_operator.policies.supervision import (
    breaker_condition,
    driver_pending,
    engine_stalled,
    ordering_status,
)
from spark_dlq_operator.reasons import Reason

NOW = datetime.datetime(2026, 11, 24, 12, 0, 0, tzinfo=datetime.UTC)


def _at(seconds_ago: float) -> str:
    return (NOW - datetime.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def running_app(*, submitted_ago: float, state: str = "RUNNING") -> dict[str, Any]:
    return {
        "metadata": {"name": "a", "namespace": "n", "creationTimestamp": _at(submitted_ago + 60)},
        "status": {
            "applicationState": {"state": state},
            "submissionID": "s1",
            "lastSubmissionAttemptTime": _at(submitted_ago),
            "driverInfo": {"podName": "a-driver"},
        },
    }


def beat(*, at_ago: float, progress_ago: float, active: bool = True) -> dict[str, Any]:
    document = {
        "time": _at(at_ago),
        "queryActive": active,
        "lastProgressTime": _at(progress_ago),
        "batchId": 7,
    }
    return {"metadata": {"annotations": {naming.HEARTBEAT_ANNOTATION: json.dumps(document)}}}


@pytest.mark.parametrize(
    ("app", "config_map", "reason"),
    [
        pytest.param(running_app(submitted_ago=900), beat(at_ago=5, progress_ago=20), None, id="progressing"),
        pytest.param(
            running_app(submitted_ago=900), beat(at_ago=5, progress_ago=400), "EngineStalled", id="stalled"
        ),
        pytest.param(
            running_app(submitted_ago=900),
            beat(at_ago=5, progress_ago=400, active=False),
            "EngineStalled",
            id="query-dead",
        ),
        pytest.param(
            running_app(submitted_ago=100), beat(at_ago=200, progress_ago=900), None, id="previous-driver"
        ),
        pytest.param(running_app(submitted_ago=900), None, None, id="never-reported"),
        pytest.param(
            running_app(submitted_ago=900, state="SUBMITTED"),
            beat(at_ago=5, progress_ago=400),
            None,
            id="not-running",
        ),
        pytest.param(
            running_app(submitted_ago=900),
            {"metadata": {"annotations": {naming.HEARTBEAT_ANNOTATION: "{not json"}}},
            None,
            id="unreadable",
        ),
    ],
)
def test_engine_stalled_judges_only_this_submissions_heartbeat(
    app: dict[str, Any], config_map: dict[str, Any] | None, reason: str | None
) -> None:
    found = engine_stalled(app, config_map, bound=300)
    assert (found.reason if found else None) == reason
    if found is not None:
        assert "(bound 300s)" in found.message


def test_a_stalled_message_names_the_last_progress_and_the_query_state() -> None:
    found = engine_stalled(
        running_app(submitted_ago=900), beat(at_ago=5, progress_ago=400, active=False), bound=300
    )
    assert found is not None
    assert found.message.startswith(
        f"the driver reports no progress of its query (not active) since {_at(400)}"
    )
    assert "395s before its heartbeat" in found.message


IMAGE_PULL_POD = {
    "status": {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "spark-kubernetes-driver",
                "state": {
                    "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x:1"'}
                },
            }
        ],
    }
}
UNSCHEDULABLE_POD = {
    "status": {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
        ],
    }
}


@pytest.mark.parametrize(
    ("app", "pod", "expected"),
    [
        pytest.param(
            running_app(submitted_ago=400, state="SUBMITTED"),
            IMAGE_PULL_POD,
            'driver pod a-driver: container spark-kubernetes-driver is waiting: ImagePullBackOff: Back-off pulling image "x:1"',
            id="image-pull",
        ),
        pytest.param(
            running_app(submitted_ago=400, state="PENDING_RERUN"),
            UNSCHEDULABLE_POD,
            "driver pod a-driver: PodScheduled is False: Unschedulable: 0/3 nodes",
            id="unschedulable",
        ),
        pytest.param(
            running_app(submitted_ago=400, state="SUBMITTED"),
            None,
            "driver pod a-driver does not exist",
            id="no-pod",
        ),
        pytest.param(
            running_app(submitted_ago=100, state="SUBMITTED"), IMAGE_PULL_POD, None, id="within-bound"
        ),
        pytest.param(running_app(submitted_ago=400), IMAGE_PULL_POD, None, id="running"),
    ],
)
def test_driver_pending_names_the_pods_reason(
    app: dict[str, Any], pod: dict[str, Any] | None, expected: str | None
) -> None:
    found = driver_pending(app, pod, now=NOW, bound=300)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert found.reason == "DriverPending"
    state = app["status"]["applicationState"]["state"]
    assert (
        found.message
        == f"the Spark application is in state {state} since {_at(400)}, more than 300s: {expected}"
    )


def test_no_state_at_all_is_left_to_the_not_picked_up_hint() -> None:
    app = running_app(submitted_ago=400, state="")
    assert driver_pending(app, None, now=NOW, bound=300) is None


def ordering_beat(*, at_ago: float, ordering: object) -> dict[str, Any]:
    config_map = beat(at_ago=at_ago, progress_ago=at_ago)
    annotations = config_map["metadata"]["annotations"]
    document = json.loads(annotations[naming.HEARTBEAT_ANNOTATION])
    annotations[naming.HEARTBEAT_ANNOTATION] = json.dumps({**document, "ordering": ordering})
    return config_map


HELD = {"heldMessages": 12, "blockedKeys": 2, "blockedKeySample": ["order-7", "order-9"]}


@pytest.mark.parametrize(
    ("app", "config_map", "expected"),
    [
        pytest.param(
            running_app(submitted_ago=900), ordering_beat(at_ago=5, ordering=HELD), HELD, id="reported"
        ),
        pytest.param(
            running_app(submitted_ago=900), beat(at_ago=5, progress_ago=5), None, id="no-ordering-report"
        ),
        pytest.param(
            running_app(submitted_ago=60),
            ordering_beat(at_ago=90, ordering=HELD),
            None,
            id="previous-submission",
        ),
        pytest.param(None, ordering_beat(at_ago=5, ordering=HELD), None, id="no-application"),
        pytest.param(
            running_app(submitted_ago=900),
            ordering_beat(at_ago=5, ordering={**HELD, "heldMessages": -1}),
            None,
            id="negative-count",
        ),
        pytest.param(
            running_app(submitted_ago=900),
            ordering_beat(at_ago=5, ordering={**HELD, "blockedKeySample": [7]}),
            None,
            id="key-not-text",
        ),
        pytest.param(
            running_app(submitted_ago=900),
            ordering_beat(
                at_ago=5, ordering={**HELD, "blockedKeySample": [f"k{i}" + "x" * 200 for i in range(12)]}
            ),
            {**HELD, "blockedKeySample": [f"k{i}" + "x" * 98 for i in range(10)]},
            id="sample-bounded",
        ),
    ],
)
def test_ordering_status_comes_from_this_submissions_heartbeat(
    app: dict[str, Any] | None, config_map: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    assert ordering_status(app, config_map) == expected


def breaker_beat(*, at_ago: float, breaker: object) -> dict[str, Any]:
    config_map = beat(at_ago=at_ago, progress_ago=at_ago)
    annotations = config_map["metadata"]["annotations"]
    document = json.loads(annotations[naming.HEARTBEAT_ANNOTATION])
    annotations[naming.HEARTBEAT_ANNOTATION] = json.dumps({**document, "breaker": breaker})
    return config_map


WHY = "18 of the last 20 processor calls failed transiently (ConnectionRefusedError)"
OPEN_REPORT = {
    "state": "open",
    "since": "2026-11-24T11:58:00Z",
    "reason": WHY,
    "opens": 1,
    "probeAt": "2026-11-24T11:58:30Z",
}


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        pytest.param(
            OPEN_REPORT,
            ConditionState(
                "False",
                Reason.BREAKER_OPEN,
                f"the breaker opened at 2026-11-24T11:58:00Z because {WHY}: the engine reads no new source "
                "message and holds its retries until it probes at 2026-11-24T11:58:30Z (opened 1 time in this run)",
            ),
            id="open",
        ),
        pytest.param(
            {**OPEN_REPORT, "state": "half-open", "since": "2026-11-24T11:58:30Z", "probeAt": "", "opens": 2},
            ConditionState(
                "False",
                Reason.BREAKER_HALF_OPEN,
                "the breaker is half-open since 2026-11-24T11:58:30Z: a few messages probe the processor's "
                f"downstream; it opened because {WHY} (opened 2 times in this run)",
            ),
            id="half-open",
        ),
        pytest.param(
            {**OPEN_REPORT, "state": "closed", "probeAt": "", "opens": 3},
            ConditionState(
                "True",
                Reason.BREAKER_CLOSED,
                f"the breaker is closed; it last opened because {WHY} (opened 3 times in this run)",
            ),
            id="closed-after-opening",
        ),
        pytest.param(
            {"state": "closed", "since": "2026-11-24T11:00:00Z", "reason": "", "opens": 0, "probeAt": ""},
            ConditionState("True", Reason.BREAKER_CLOSED, "the breaker is closed"),
            id="never-opened",
        ),
        pytest.param({**OPEN_REPORT, "state": "ajar"}, None, id="unknown-state"),
        pytest.param({**OPEN_REPORT, "opens": -1}, None, id="negative-count"),
        pytest.param({**OPEN_REPORT, "since": "yesterday"}, None, id="bad-time"),
        pytest.param({**OPEN_REPORT, "reason": 7}, None, id="reason-not-text"),
        pytest.param("open", None, id="not-a-mapping"),
        pytest.param(None, None, id="no-breaker"),
    ],
)
def test_breaker_condition_comes_from_this_submissions_heartbeat(
    report: object, expected: ConditionState | None
) -> None:
    app = running_app(submitted_ago=900)
    assert breaker_condition(app, breaker_beat(at_ago=5, breaker=report)) == expected


def test_breaker_condition_ignores_an_earlier_submissions_heartbeat() -> None:
    app = running_app(submitted_ago=60)
    assert breaker_condition(app, breaker_beat(at_ago=90, breaker=OPEN_REPORT)) is None
    assert breaker_condition(None, breaker_beat(at_ago=5, breaker=OPEN_REPORT)) is None


def test_breaker_reason_is_bounded() -> None:
    app = running_app(submitted_ago=900)
    found = breaker_condition(app, breaker_beat(at_ago=5, breaker={**OPEN_REPORT, "reason": "x" * 5000}))
    assert found is not None
    assert found.message.count("x") == 1000
