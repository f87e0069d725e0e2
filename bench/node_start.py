"""What the test bed's one-node cluster costs: start times, and CPU and memory at idle.

    python bench/node_start.py [--idle 60] [--out bench/results/node.json]

Starts a ControlPlane(workloads=True) and this machine as its node (spark_dlq_devtools.node),
and reports: the control plane's start, the node's start to Ready, the first pod's time from
``kubectl apply`` to Ready (scheduling, sandbox, CNI, container), a second pod's, then the CPU
seconds (utime + stime from ``/proc/<pid>/stat``) and resident memory of each process over
``--idle`` seconds with one idle pod. A benchmark, not a test: it prints figures and asserts
nothing; wall-clock start times vary with what else the machine runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_dlq_devtools.kube import ControlPlane  # noqa: E402
from spark_dlq_devtools.node import Node, probe_image  # noqa: E402
from spark_dlq_devtools.processes import Service  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def usage(services: dict[str, Service]) -> dict[str, tuple[float, float]]:
    """name -> (CPU seconds so far, RSS MiB) of each running service's main process."""
    result = {}
    for name, service in services.items():
        stat = Path(f"/proc/{service.pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{service.pid}/status").read_text()
        rss_kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
        result[name] = ((int(stat[11]) + int(stat[12])) / TICKS, rss_kib / 1024)
    return result


def start_pod(node: Node, name: str) -> float:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "probe", "image": probe_image(), "imagePullPolicy": "Never", "args": ["serve"]}
            ],
        },
    }
    started = time.monotonic()
    node.kubectl("apply", "-f", "-", input=json.dumps(pod))
    node.kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=120s", timeout=130)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle to measure (default 60)")
    parser.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args()
    plane = ControlPlane(name="bench-cluster", workloads=True)
    node = Node(plane)
    try:
        started = time.monotonic()
        plane.start()
        plane_s = time.monotonic() - started
        started = time.monotonic()
        node.start()
        node_s = time.monotonic() - started
        first_pod_s = start_pod(node, "first")
        second_pod_s = start_pod(node, "second")
        node.kubectl("delete", "pod", "second", "--wait=true")
        services = {
            s.name: s
            for s in (
                plane.etcd,
                plane.apiserver,
                plane.controller_manager,
                plane.scheduler,
                node.containerd,
                node.kubelet,
                node.kube_proxy,
                node.coredns,
            )
            if s is not None
        }
        before = usage(services)
        time.sleep(args.idle)
        after = usage(services)
        idle = {
            name: {
                "cpu_percent": round(100 * (after[name][0] - before[name][0]) / args.idle, 2),
                "rss_mib": round(after[name][1], 1),
            }
            for name in services
        }
        figures = {
            "control_plane_start_s": round(plane_s, 1),
            "node_start_to_ready_s": round(node_s, 1),
            "first_pod_apply_to_ready_s": round(first_pod_s, 1),
            "second_pod_apply_to_ready_s": round(second_pod_s, 1),
            "idle_seconds": args.idle,
            "idle_with_one_pod": idle,
            "node_total": {
                "cpu_percent": round(
                    sum(idle[n]["cpu_percent"] for n in ("containerd", "kubelet", "kube-proxy", "coredns")), 2
                ),
                "rss_mib": round(
                    sum(idle[n]["rss_mib"] for n in ("containerd", "kubelet", "kube-proxy", "coredns")), 1
                ),
            },
        }
        print(json.dumps(figures, indent=2))
        if args.out:
            args.out.write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    finally:
        node.stop()
        plane.stop()


if __name__ == "__main__":
    sys.exit(main())
