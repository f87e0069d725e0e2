"""The operator across a fault of the Kubernetes API: the apiserver restarted while it runs.

The session's apiserver is restarted in place (same etcd, same port, ``ControlPlane.
restart_apiserver``): the operator's watches and clients lose their connections and must come
back by themselves. A policy created after the restart reconciles, the one reconciled before is
left as it was, and nothing is created twice. (The other faults are in test_operator.py: a
broker that is unreachable and then reachable, the operator stopped mid-reconcile.)
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dlq_engine.model import config_hash, parse_policy
from spark_dlq_devtools.kube import ControlPlane
from tests.integration.operator.conftest import Cluster, RunningOperator, policy_document, wait_for


def test_operator_reconnects_after_an_apiserver_restart(
        kube: ControlPlane, operator: RunningOperator, cluster: Cluster, namespace: str,
        make_topic: Callable[..., str], bootstrap_servers: str) -> None:
    source = make_topic("orders")
    cluster.create_policy(policy_document(namespace, "before", source=source, bootstrap=bootstrap_servers))
    first = wait_for(lambda: cluster.application("before"), what="the first SparkApplication")
    wait_for(lambda: cluster.status("before").get("configHash"), what="the first status")

    started = time.monotonic()
    kube.restart_apiserver()
    restart_seconds = time.monotonic() - started

    cluster.create_policy(policy_document(namespace, "after", source=source, bootstrap=bootstrap_servers,
                                          retry={"topic": f"{source}-after-RETRY"},
                                          deadLetter={"topic": f"{source}-after-DLQ"}))
    digest = config_hash(parse_policy(cluster.policy("after")))
    wait_for(lambda: cluster.status("after").get("configHash") == digest, timeout=90,
             what=f"the policy created after the restart (which took {restart_seconds:.0f}s) to reconcile")
    assert cluster.condition("after", "TopicsReady")["status"] == "True"
    wait_for(lambda: {"ConfigMapCreated", "SparkApplicationCreated"} <= cluster.event_reasons("after"),
             what="the events of the new policy")
    # The SparkApplication watch is back too: a state change reaches the new policy's status.
    cluster.set_application_state("after", "RUNNING")
    wait_for(lambda: cluster.status("after").get("phase") == "Running", timeout=60, what="phase Running")

    assert operator.alive()
    assert cluster.application("before")["metadata"]["uid"] == first["metadata"]["uid"]
    assert sorted(a["metadata"]["name"] for a in cluster.applications()) == ["after", "before"]
    config_maps = cluster.core.list_namespaced_config_map(
        namespace, label_selector="app.kubernetes.io/managed-by=spark-dlq-operator").items
    assert sorted(c.metadata.name for c in config_maps) == ["after-policy", "before-policy"]
    assert cluster.status("before")["restartCount"] == 0
