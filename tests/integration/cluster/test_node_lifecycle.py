"""The node's own life: stop leaves nothing on the machine, and a start after a crash sweeps
what the dead node left. Both restart the session's node; its pods come back."""

from __future__ import annotations

import os

from spark_dlq_devtools.node import Node
from tests.integration.cluster.conftest import apply, probe, probe_pod, wait_ready


def _pod_processes() -> set[int]:
    return {pid for pid in _all_pids() if _in_pod_cgroup(pid)}


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _in_pod_cgroup(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cgroup") as cgroups:
            return any(":/spark-dlq/" in line for line in cgroups)
    except OSError:
        return False


def test_stop_leaves_nothing_behind_and_pods_come_back_after_start(node: Node, pod_namespace: str) -> None:
    apply(node, probe_pod("survivor", pod_namespace))
    wait_ready(node, pod_namespace, "survivor")
    assert node.leftovers(), "a running node shows its processes, mounts, bridge and chains"

    node.stop()
    assert node.leftovers() == []

    node.start(lock_timeout=60)
    wait_ready(node, pod_namespace, "survivor")
    assert probe(node, pod_namespace, "survivor", "hostname", within=120).strip() == "survivor"


def test_start_after_a_crash_sweeps_the_dead_nodes_pods(node: Node, pod_namespace: str) -> None:
    apply(node, probe_pod("orphan", pod_namespace))
    wait_ready(node, pod_namespace, "orphan")
    before = _pod_processes()
    assert before, "the pod's processes run in the node's cgroups"

    node.kill()
    assert before <= _pod_processes(), "a crash leaves the pods running"

    node.start(lock_timeout=60)
    assert not before & _pod_processes(), "the dead node's pods were swept"
    wait_ready(node, pod_namespace, "orphan")
    assert probe(node, pod_namespace, "orphan", "hostname", within=120).strip() == "orphan"
