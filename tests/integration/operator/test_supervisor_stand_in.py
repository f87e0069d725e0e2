"""The supervisor with a real engine: the local spark-operator stand-in runs the driver.

The driver writes its heartbeat on the policy's Lease as a pod would, with a token of the
policy's own service account (the stand-in mounts it as a kubelet does) and the cluster's CA,
under the Role the operator made on that Lease alone; its processor hangs on the first call for a
message, so the query stops making progress while the driver process runs (as in
kubeflow/spark-operator#1309). The operator resubmits it; the stand-in stops the stuck driver
and submits a new one, which takes over the checkpoint's lease and routes the message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.local_spark_operator import LocalSparkOperator
from spark_dlq_devtools.paths import REPO_ROOT
from tests.helpers import FAST_DRIVER_ENV, QUICK_LEASE_ENV, produce, read_all
from tests.integration.operator.conftest import Cluster, RunningOperator, policy_document, wait_for

STALL_S = 20


@pytest.fixture
def stand_in(kube: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[LocalSparkOperator]:
    """The stand-in giving each driver a token of its SparkApplication's service account (the
    policy's own, which the operator made, allowed to write the policy's Lease alone)."""
    runner = LocalSparkOperator(
        kubeconfig=str(kube.admin_kubeconfig),
        workdir=tmp_path / "apps",
        namespaces=[namespace],
        path_map={"/opt/spark-dlq": str(REPO_ROOT / "spark_image")},
        python_path=[str(REPO_ROOT)],
        master="local[1]",
        stop_grace=30,
        service_account_tokens=True,
        # The stand-in stops a driver before it submits the next: no two race for a checkpoint.
        driver_env={**FAST_DRIVER_ENV, **QUICK_LEASE_ENV},
    )
    runner.start()
    yield runner
    runner.stop()


def test_a_driver_whose_query_hangs_is_restarted_and_the_message_routed(
    start_operator: Callable[..., RunningOperator],
    stand_in: LocalSparkOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    tmp_path: Path,
) -> None:
    start_operator(checkpoint_base=str(tmp_path / "checkpoints"), stall_timeout=STALL_S, provisioner="admin")
    source, output = make_topic("orders"), make_topic("billed")
    # The message waits in the fresh topic, read from its start: the driver's first batch takes
    # it, and the query makes no progress from its start on (no batch before the hang to wait for).
    calls = tmp_path / "calls"
    produce(bootstrap_servers, source, [(b"k", b"slow:3600")], headers=[("x-calls", str(calls).encode())])
    document = policy_document(
        namespace,
        "billing",
        source=source,
        bootstrap=bootstrap_servers,
        # No time limit (the default 30 s would turn the hang into a retry): this is the
        # hang the limit cannot catch, which only the supervisor's resubmission ends.
        processor={"entrypoint": "tests.processors.recording:process", "timeout": "0s"},
        output={"topic": output},
        spark={"trigger": "500ms"},
    )
    document["spec"]["source"]["startingOffsets"] = "earliest"
    cluster.create_policy(document)

    leases = client.CoordinationV1Api(cluster.objects.api_client)

    def heartbeat() -> dict[str, Any] | None:
        try:
            lease = leases.read_namespaced_lease("billing-heartbeat", namespace)
        except ApiException as failure:
            if failure.status == 404:  # not made yet: the operator makes it with the policy's identity
                return None
            raise
        text = (lease.metadata.annotations or {}).get("sparkdlq.io/heartbeat")
        return json.loads(text) if text else None

    first = wait_for(heartbeat, timeout=240, interval=0.5, what="the engine's first heartbeat")
    assert first["queryActive"] is True
    assert cluster.status("billing")["phase"] == "Running"
    wait_for(lambda: calls.exists() and calls.read_text(), timeout=120, what="the processor's first call")

    restarted = wait_for(
        lambda: (
            cluster.status("billing").get("lastRestartReason") == "EngineStalled"
            and cluster.status("billing")
        ),
        timeout=STALL_S + 60,
        interval=0.5,
        what="the stalled engine's restart",
    )
    assert restarted["restartCount"] == 1
    assert "EngineStalled" in cluster.event_reasons("billing")
    stalled = [e.message for e in cluster.events("billing") if e.reason == "EngineStalled"]
    assert all("no progress of its query (active)" in m for m in stalled), stalled

    # The new driver replays the batch; the processor's second call does not hang.
    [record] = read_all(bootstrap_servers, output, expect=1, timeout=240)
    assert record.value == b"slept"
    assert calls.read_text().splitlines() == ["k:0", "k:0"]
    wait_for(lambda: cluster.status("billing").get("phase") == "Running", timeout=60, what="Running again")
    assert cluster.status("billing")["restartCount"] == 1


def test_what_ordering_holds_reaches_the_policys_status_from_the_drivers_heartbeat(
    start_operator: Callable[..., RunningOperator],
    stand_in: LocalSparkOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    tmp_path: Path,
) -> None:
    start_operator(checkpoint_base=str(tmp_path / "checkpoints"), provisioner="admin")
    source, output = make_topic("orders"), make_topic("billed")
    # b's first message is dead-lettered and, under block, holds b's two later ones.
    produce(
        bootstrap_servers,
        source,
        [(b"b", b"b:0:dead"), (b"a", b"a:0:ok"), (b"b", b"b:1:ok"), (b"b", b"b:2:ok")],
    )
    document = policy_document(
        namespace,
        "billing",
        source=source,
        bootstrap=bootstrap_servers,
        processor={"entrypoint": "tests.processors.ordered:process"},
        output={"topic": output},
        spark={"trigger": "500ms"},
        ordering={"onDeadLetter": "block"},
    )
    document["spec"]["source"].update({"ordering": "key", "startingOffsets": "earliest"})
    cluster.create_policy(document)

    expected = {"heldMessages": 2, "blockedKeys": 1, "blockedKeySample": ["b"]}
    wait_for(
        lambda: cluster.status("billing").get("ordering") == expected,
        timeout=300,
        interval=0.5,
        what=f"status.ordering {expected}",
    )
    assert [r.value for r in read_all(bootstrap_servers, output, expect=1, timeout=30)] == [b"a:0"]
