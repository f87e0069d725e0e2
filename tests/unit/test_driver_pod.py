"""A lease holder's pod, as the engine reads it from the API: gone, ended, running, or unknown."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from dlq_engine.job.driver_pod import DriverPods, PodRef, PodState, own_pod_name, pod_state
from dlq_engine.job.kube_api import ApiError
from spark_dlq_operator.kubeapi import ApiError as FakeApiError
from tests.unit.fake_kube import FakeKube

NAMESPACE, DRIVER = "payments", "orders-billing-driver"


class EngineView:
    """The fake API server as the engine's ``ServiceAccountApi.get`` sees it."""

    def __init__(self, fake: FakeKube) -> None:
        self.fake = fake

    def get(self, path: str) -> Mapping[str, Any] | None:
        try:
            return asyncio.run(self.fake._call("GET", path))
        except FakeApiError as error:
            if error.status == 404:
                return None
            raise ApiError(error.status, str(error)) from None


def driver_pod(fake: FakeKube, *, phase: str = "Running", **status: Any) -> PodRef:
    """A driver pod as the kubelet reports it; its reference."""
    pod = fake.put(
        "pods",
        {"metadata": {"name": DRIVER, "namespace": NAMESPACE}, "status": {"phase": phase, **status}},
    )
    return PodRef(NAMESPACE, DRIVER, pod["metadata"]["uid"])


TERMINATED = {"state": {"terminated": {"exitCode": 137, "reason": "Error"}}}


@pytest.mark.parametrize(
    ("pod", "state"),
    [
        pytest.param(None, PodState.GONE, id="no-pod"),
        pytest.param(
            {"metadata": {"uid": "other"}, "status": {"phase": "Running"}},
            PodState.GONE,
            id="same-name-new-pod",
        ),
        pytest.param({"metadata": {"uid": "u1"}, "status": {"phase": "Failed"}}, PodState.ENDED, id="failed"),
        pytest.param(
            {"metadata": {"uid": "u1"}, "status": {"phase": "Succeeded"}}, PodState.ENDED, id="succeeded"
        ),
        pytest.param(
            {"metadata": {"uid": "u1"}, "status": {"phase": "Running", "containerStatuses": [TERMINATED]}},
            PodState.ENDED,
            id="container-terminated",
        ),
        pytest.param(
            {"metadata": {"uid": "u1"}, "status": {"phase": "Running"}}, PodState.RUNNING, id="running"
        ),
        pytest.param(
            {
                "metadata": {"uid": "u1", "deletionTimestamp": "2026-11-26T00:00:00Z"},
                "status": {"phase": "Running"},
            },
            PodState.RUNNING,
            id="terminating",
        ),
        pytest.param(
            {"metadata": {"uid": "u1"}, "status": {"phase": "Unknown"}}, PodState.RUNNING, id="node-lost"
        ),
        pytest.param({"metadata": {"uid": "u1"}}, PodState.RUNNING, id="no-status-yet"),
    ],
)
def test_pod_state_from_what_the_api_answered(pod: Mapping[str, Any] | None, state: PodState) -> None:
    assert pod_state(pod, "u1") is state


def test_driver_pods_reads_the_pod_by_name_and_compares_uids() -> None:
    fake = FakeKube()
    pods = DriverPods(EngineView(fake))
    first = driver_pod(fake)
    assert pods.find(NAMESPACE, DRIVER) == first
    assert pods.state(first) is PodState.RUNNING
    # The spark-operator resubmits under the same name: the killed driver's pod is gone.
    del fake.objects[("pods", NAMESPACE, DRIVER)]
    assert pods.state(first) is PodState.GONE
    second = driver_pod(fake)
    assert second.uid != first.uid
    assert pods.state(first) is PodState.GONE
    assert pods.state(second) is PodState.RUNNING
    assert fake.calls[-1] == ("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{DRIVER}")


@pytest.mark.parametrize("status", [403, 500], ids=["refused", "failing"])
def test_an_api_that_does_not_answer_tells_nothing(status: int) -> None:
    fake = FakeKube()
    pods = DriverPods(EngineView(fake))
    pod = driver_pod(fake)
    del fake.objects[("pods", NAMESPACE, DRIVER)]
    fake.fail("GET", "pods", status, times=2)
    assert pods.state(pod) is PodState.UNKNOWN
    assert pods.find(NAMESPACE, DRIVER) is None


def test_a_pod_reference_round_trips_and_refuses_what_is_not_one() -> None:
    pod = PodRef(NAMESPACE, DRIVER, "u1")
    assert PodRef.parse(pod.document()) == pod
    for raw in (
        None,
        "pod",
        {"namespace": NAMESPACE, "name": DRIVER},
        {"namespace": 1, "name": "a", "uid": "u"},
    ):
        assert PodRef.parse(raw) is None


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        pytest.param(
            {
                "spark.master": "k8s://https://kubernetes.default.svc:443",
                "spark.kubernetes.driver.pod.name": DRIVER,
                "spark.kubernetes.namespace": NAMESPACE,
            },
            (NAMESPACE, DRIVER),
            id="driver-pod",
        ),
        pytest.param(
            {"spark.master": "local[2]", "spark.kubernetes.driver.pod.name": DRIVER}, None, id="local"
        ),
        pytest.param({"spark.master": "k8s://https://api:6443"}, None, id="no-pod-name"),
    ],
)
def test_own_pod_name_only_on_kubernetes(conf: dict[str, str], expected: tuple[str, str] | None) -> None:
    assert own_pod_name(conf) == expected
