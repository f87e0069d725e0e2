"""The operator across faults: the apiserver restarted while it runs, the operator process
killed (SIGKILL) in the middle of reconciling.

The session's apiserver is restarted in place (same etcd, same port, ``ControlPlane.
restart_apiserver``): the operator's watches and clients lose their connections and must come
back by themselves. A policy created after the restart reconciles, the one reconciled before is
left as it was, and nothing is created twice. (The other faults are in test_operator.py: a
broker that is unreachable and then reachable, the operator stopped mid-reconcile.)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from dlq_engine.model import config_hash, parse_policy
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.processes import Service
from tests.integration.operator.conftest import Cluster, RunningOperator, policy_document, wait_for


def test_operator_reconnects_after_an_apiserver_restart(
    kube: ControlPlane,
    operator: RunningOperator,
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> None:
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "before", source=source, bootstrap=bootstrap_servers))
    first = wait_for(lambda: cluster.application("before"), what="the first SparkApplication")
    wait_for(lambda: cluster.status("before").get("configHash"), what="the first status")

    started = time.monotonic()
    kube.restart_apiserver()
    restart_seconds = time.monotonic() - started

    cluster.create_policy(
        policy_document(
            namespace,
            "after",
            source=source,
            bootstrap=bootstrap_servers,
            retry={"topic": f"{source}-after-RETRY"},
            deadLetter={"topic": f"{source}-after-DLQ"},
        )
    )
    digest = config_hash(parse_policy(cluster.policy("after")))
    wait_for(
        lambda: cluster.status("after").get("configHash") == digest,
        timeout=90,
        what=f"the policy created after the restart (which took {restart_seconds:.0f}s) to reconcile",
    )
    assert cluster.condition("after", "TopicsReady")["status"] == "True"
    wait_for(
        lambda: {"ConfigMapCreated", "SparkApplicationCreated"} <= cluster.event_reasons("after"),
        what="the events of the new policy",
    )
    # The SparkApplication watch is back too: a state change reaches the new policy's status.
    cluster.set_application_state("after", "RUNNING")
    wait_for(lambda: cluster.status("after").get("phase") == "Running", timeout=60, what="phase Running")

    assert operator.alive()
    assert cluster.application("before")["metadata"]["uid"] == first["metadata"]["uid"]
    assert sorted(a["metadata"]["name"] for a in cluster.applications()) == ["after", "before"]
    config_maps = cluster.core.list_namespaced_config_map(
        namespace, label_selector="app.kubernetes.io/managed-by=spark-dlq-operator"
    ).items
    assert sorted(c.metadata.name for c in config_maps) == ["after-policy", "before-policy"]
    assert cluster.status("before")["restartCount"] == 0


def test_operator_killed_mid_reconcile_converges_without_duplicates(
    kube: ControlPlane,
    cluster: Cluster,
    namespace: str,
    spark_crd: str,
    tmp_path: Path,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> None:
    """The real ``dlq-operator run`` process, SIGKILLed (with its whole process group) as soon as
    it has written the first object of 50 new policies (enough that it cannot finish them all between two polls); a second process finishes the work."""
    source = make_topic("orders")
    names = [f"p{i:02d}" for i in range(50)]
    for name in names:  # each with topics of its own: a retry or dead-letter topic is one policy's
        cluster.create_policy(
            policy_document(
                namespace, name, source=source, bootstrap=bootstrap_servers, source_subscription=name
            )
        )
    argv = [
        str(Path(sys.executable).parent / "dlq-operator"),
        "run",
        "--namespace",
        namespace,
        "--kubeconfig",
        str(kube.admin_kubeconfig),
        "--provisioner",
        "admin",
        "--metrics-port",
        "0",
        "--resync-interval",
        "2",
        "--spark-image",
        "registry.test/spark-dlq:test",
    ]

    def written() -> list[str]:
        return [n for n in names if cluster.status(n).get("configHash")]

    first = Service("dlq-operator", argv, log=tmp_path / "first.log")
    first.start()
    try:
        first.wait_until(
            lambda: cluster.config_map(f"{names[0]}-policy") is not None or len(cluster.applications()) > 0,
            timeout=60,
            what="its first object",
        )
    finally:
        first.kill()
    done_at_kill = written()
    assert len(done_at_kill) < len(names), "the operator finished before the kill: nothing was interrupted"
    apps_at_kill = {a["metadata"]["name"] for a in cluster.applications()}

    second = Service("dlq-operator", argv, log=tmp_path / "second.log")
    second.start()
    try:
        digests = {n: config_hash(parse_policy(cluster.policy(n))) for n in names}
        second.wait_until(
            lambda: all(cluster.status(n).get("configHash") == digests[n] for n in names),
            timeout=120,
            what="every policy's status",
        )
        # No duplicates: one SparkApplication and one ConfigMap per policy, each at the policy's hash.
        apps = cluster.applications()
        assert sorted(a["metadata"]["name"] for a in apps) == names
        assert all(
            a["metadata"]["annotations"]["sparkdlq.io/config-hash"] == digests[a["metadata"]["name"]]
            for a in apps
        )
        config_maps = cluster.core.list_namespaced_config_map(
            namespace, label_selector="app.kubernetes.io/managed-by=spark-dlq-operator"
        ).items
        assert sorted(c.metadata.name for c in config_maps) == [f"{n}-policy" for n in names]
        for name in names:
            assert cluster.condition(name, "TopicsReady")["status"] == "True", name
            assert cluster.status(name)["restartCount"] == 0, name
        # The events say what each policy got. (One the killed process created may lack its event:
        # the kill can fall between the write and the event; the second process finds it there.)
        second.wait_until(
            lambda: all(
                "SparkApplicationCreated" in cluster.event_reasons(n) for n in names if n not in apps_at_kill
            ),
            timeout=30,
            what="a SparkApplicationCreated event for every policy",
        )
        assert second.alive()
    finally:
        second.stop()
