"""The supervisor with a real engine: the local spark-operator stand-in runs the driver.

The driver writes its heartbeat to the apiserver as a pod would, with a service-account token
(from the TokenRequest API) and the cluster's CA; its processor hangs on the first call for a
message, so the query stops making progress while the driver process runs (as in
kubeflow/spark-operator#1309). The operator resubmits it; the stand-in stops the stuck driver
and submits a new one, which takes over the checkpoint's lease and routes the message.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.local_spark_operator import LocalSparkOperator
from spark_dlq_devtools.paths import REPO_ROOT
from tests.helpers import FAST_DRIVER_ENV, produce, read_all
from tests.integration.operator.conftest import Cluster, RunningOperator, policy_document, wait_for

STALL_S = 20


@pytest.fixture
def service_account_dir(kube: ControlPlane, kube_api: Any, namespace: str, tmp_path: Path) -> Path:
    """What a driver pod has mounted: a token of the Spark driver's service account (allowed
    what the chart's Role for it allows on ConfigMaps), the cluster's CA and the namespace."""
    core, rbac = client.CoreV1Api(kube_api), client.RbacAuthorizationV1Api(kube_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "spark-driver"}})
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "spark-driver"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "spark-driver"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "spark-driver"},
            "subjects": [{"kind": "ServiceAccount", "name": "spark-driver", "namespace": namespace}],
        },
    )
    token = core.create_namespaced_service_account_token(
        "spark-driver", namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text(token)
    (folder / "namespace").write_text(namespace)
    shutil.copy(kube.pki / "ca.crt", folder / "ca.crt")
    return folder


@pytest.fixture
def stand_in(
    kube: ControlPlane, namespace: str, tmp_path: Path, service_account_dir: Path
) -> Iterator[LocalSparkOperator]:
    runner = LocalSparkOperator(
        kubeconfig=str(kube.admin_kubeconfig),
        workdir=tmp_path / "apps",
        namespaces=[namespace],
        path_map={"/opt/spark-dlq": str(REPO_ROOT / "spark_image")},
        python_path=[str(REPO_ROOT)],
        master="local[1]",
        stop_grace=30,
        driver_env={
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(kube.port),
            "SPARK_DLQ_SERVICEACCOUNT_DIR": str(service_account_dir),
            **FAST_DRIVER_ENV,
        },
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
    cluster.create_policy(
        policy_document(
            namespace,
            "billing",
            source=source,
            bootstrap=bootstrap_servers,
            processor={"entrypoint": "tests.processors.recording:process"},
            output={"topic": output},
            spark={"trigger": "500ms"},
        )
    )

    def heartbeat() -> dict[str, Any] | None:
        config_map = cluster.config_map("billing-policy")
        text = ((config_map.metadata.annotations or {}) if config_map else {}).get("sparkdlq.io/heartbeat")
        return json.loads(text) if text else None

    first = wait_for(heartbeat, timeout=240, interval=1, what="the engine's first heartbeat")
    assert first["queryActive"] is True
    assert cluster.status("billing")["phase"] == "Running"

    calls = tmp_path / "calls"
    produce(bootstrap_servers, source, [(b"k", b"slow:3600")], headers=[("x-calls", str(calls).encode())])
    wait_for(lambda: calls.exists() and calls.read_text(), timeout=120, what="the processor's first call")
    restarted = wait_for(
        lambda: (
            cluster.status("billing").get("lastRestartReason") == "EngineStalled"
            and cluster.status("billing")
        ),
        timeout=STALL_S + 60,
        interval=1,
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
        interval=1,
        what=f"status.ordering {expected}",
    )
    assert [r.value for r in read_all(bootstrap_servers, output, expect=1, timeout=30)] == [b"a:0"]
