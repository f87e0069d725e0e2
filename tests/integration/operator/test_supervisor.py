"""The supervisor: what the spark-operator does not catch, on the real apiserver.

The test plays the spark-operator (the application's status), the kubelet (the driver pod's
status) and the engine (its heartbeat on the policy's Lease); the real engine's heartbeat,
run by the local spark-operator stand-in, is in test_supervisor_stand_in.py.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.operator.conftest import (
    SPARK,
    Cluster,
    RunningOperator,
    after_resync_rounds,
    policy_document,
    wait_for,
)

RESUBMIT = "sparkdlq.io/resubmission"


def _at(seconds_ago: float) -> str:
    when = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def play_spark_operator(cluster: Cluster, name: str, state: str, *, submission: str, **status: Any) -> None:
    cluster.objects.patch_namespaced_custom_object_status(
        *SPARK[:2],
        cluster.namespace,
        SPARK[2],
        name,
        {
            "status": {
                "applicationState": {"state": state},
                "submissionID": submission,
                "driverInfo": {"podName": f"{name}-driver"},
                **status,
            }
        },
    )


def resubmissions(cluster: Cluster, name: str) -> int:
    app = cluster.application(name) or {}
    return int(((app.get("spec") or {}).get("driver") or {}).get("annotations", {}).get(RESUBMIT) or 0)


def warnings(cluster: Cluster, name: str, reason: str) -> list[str]:
    return [e.message for e in cluster.events(name) if e.reason == reason and e.type == "Warning"]


@pytest.fixture
def billing(
    start_operator: Callable[..., RunningOperator],
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> Callable[..., None]:
    """Start the operator with ``config``, create the policy ``billing`` and wait for its
    SparkApplication."""

    def start(**config: Any) -> None:
        start_operator(**config)
        cluster.create_policy(
            policy_document(namespace, "billing", source=make_topic("o"), bootstrap=bootstrap_servers)
        )
        wait_for(lambda: cluster.application("billing"), what="the SparkApplication")

    return start


def test_a_running_driver_whose_query_stalled_is_resubmitted_once(
    billing: Callable[..., None],
    cluster: Cluster,
    namespace: str,
) -> None:
    billing(stall_timeout=20)
    play_spark_operator(cluster, "billing", "RUNNING", submission="1", lastSubmissionAttemptTime=_at(120))

    def heartbeat(progress_ago: float, *, active: bool = True) -> None:
        document = {
            "time": _at(0),
            "queryActive": active,
            "lastProgressTime": _at(progress_ago),
            "batchId": 4,
        }
        client.CoordinationV1Api(cluster.objects.api_client).patch_namespaced_lease(
            "billing-heartbeat",
            namespace,
            {"metadata": {"annotations": {"sparkdlq.io/heartbeat": json.dumps(document)}}},
        )

    # Progress 10 s ago, within the bound: resync rounds leave it alone.
    heartbeat(10)
    wait_for(lambda: cluster.status("billing").get("phase") == "Running", what="phase Running")
    after_resync_rounds()
    assert resubmissions(cluster, "billing") == 0

    heartbeat(60, active=False)
    wait_for(lambda: resubmissions(cluster, "billing") == 1, what="the resubmission")
    condition = wait_for(
        lambda: (c := cluster.condition("billing", "JobRunning")).get("reason") == "EngineStalled" and c,
        what="JobRunning EngineStalled",
    )
    assert condition["status"] == "False"
    assert "no progress of its query (not active)" in condition["message"]
    assert "(bound 20s)" in condition["message"]
    status = cluster.status("billing")
    assert (status["restartCount"], status["lastRestartReason"]) == (1, "EngineStalled")
    # One Warning per condition turned to it (JobRunning, and Ready, which takes its reason).
    events = wait_for(lambda: warnings(cluster, "billing", "EngineStalled"), what="the event")
    assert set(events) == {condition["message"]}
    # Not again while the spark-operator has not submitted anew (same submission, same beat).
    after_resync_rounds()
    assert resubmissions(cluster, "billing") == 1

    # The new driver runs and makes progress: JobRunning is Running again.
    play_spark_operator(cluster, "billing", "RUNNING", submission="2", lastSubmissionAttemptTime=_at(1))
    heartbeat(1)
    wait_for(lambda: cluster.status("billing").get("phase") == "Running", what="Running again")
    after_resync_rounds()
    assert resubmissions(cluster, "billing") == 1
    assert cluster.status("billing")["restartCount"] == 1


def test_an_application_stuck_in_submission_names_the_pods_reason(
    billing: Callable[..., None],
    cluster: Cluster,
    namespace: str,
) -> None:
    billing(pending_timeout=3)
    try:
        cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
    except ApiException as error:
        if error.status != 409:
            raise
    cluster.core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "billing-driver"},
            "spec": {
                "automountServiceAccountToken": False,
                "containers": [{"name": "spark-kubernetes-driver", "image": "registry.test/no-such:1"}],
            },
        },
    )
    waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "registry.test/no-such:1"'}
    cluster.core.patch_namespaced_pod_status(
        "billing-driver",
        namespace,
        client.V1Pod(
            status=client.V1PodStatus(
                phase="Pending",
                container_statuses=[
                    client.V1ContainerStatus(
                        name="spark-kubernetes-driver",
                        image="registry.test/no-such:1",
                        image_id="",
                        ready=False,
                        restart_count=0,
                        state=client.V1ContainerState(waiting=client.V1ContainerStateWaiting(**waiting)),
                    )
                ],
            )
        ),
    )
    submitted = _at(1)
    play_spark_operator(cluster, "billing", "SUBMITTED", submission="1", lastSubmissionAttemptTime=submitted)
    condition = wait_for(
        lambda: (c := cluster.condition("billing", "JobRunning")).get("reason") == "DriverPending" and c,
        what="JobRunning DriverPending",
    )
    assert condition["message"] == (
        f"the Spark application is in state SUBMITTED since {submitted}, more than 3s: driver pod "
        "billing-driver: container spark-kubernetes-driver is waiting: ImagePullBackOff: "
        'Back-off pulling image "registry.test/no-such:1"'
    )
    assert cluster.status("billing")["phase"] == "Pending"
    events = wait_for(lambda: warnings(cluster, "billing", "DriverPending"), what="the event")
    assert set(events) == {condition["message"]}

    # The image arrives: RUNNING replaces the condition.
    play_spark_operator(cluster, "billing", "RUNNING", submission="1", lastSubmissionAttemptTime=submitted)
    wait_for(lambda: cluster.condition("billing", "JobRunning").get("reason") == "Running", what="Running")


def test_a_failed_application_is_resubmitted_with_capped_exponential_backoff(
    billing: Callable[..., None],
    cluster: Cluster,
    namespace: str,
) -> None:
    # The restart policy's interval is 10 s: the first resubmission waits 10 s after the end,
    # the second 20 s capped to 12 s.
    billing(restart_backoff_cap=12)
    play_spark_operator(
        cluster,
        "billing",
        "FAILED",
        submission="1",
        lastSubmissionAttemptTime=_at(60),
        terminationTime=_at(30),
    )
    wait_for(lambda: resubmissions(cluster, "billing") == 1, what="the first resubmission")
    wait_for(lambda: "SparkApplicationResubmitted" in cluster.event_reasons("billing"), what="the event")

    ended = time.monotonic()
    play_spark_operator(
        cluster, "billing", "FAILED", submission="2", lastSubmissionAttemptTime=_at(5), terminationTime=_at(0)
    )
    try:
        wait_for(lambda: resubmissions(cluster, "billing") >= 2, timeout=40, what="the second resubmission")
    except AssertionError as error:
        raise AssertionError(f"{error}; the application now: {cluster.application('billing')}") from None
    assert resubmissions(cluster, "billing") == 2
    waited = time.monotonic() - ended
    assert 9 <= waited <= 20, waited
    messages = [e.message for e in cluster.events("billing") if e.reason == "SparkApplicationResubmitted"]
    assert any("FAILED, which the spark-operator does not retry" in m for m in messages), messages
