"""``spark-dlq-dev cluster``: the test bed's one-node cluster, started by hand.

It starts a control plane for workloads, this machine as its node and (unless told not to)
a Kafka broker that pods can reach, prints how to reach them (a kubeconfig, the broker's
addresses) and what starting took, then waits. Ctrl-C or SIGTERM stops everything it
started. For debugging, and for scripts that need real pods: ``--ready-file`` writes the same
facts as JSON once everything is up.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.node import Node, NodeError


def main(*, kafka: bool = True, lock_timeout: float = 0.0, ready_file: Path | None = None) -> int:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    plane = ControlPlane(name=f"cluster-{os.getpid()}", workloads=True)
    node = Node(plane)
    broker = KafkaBroker(name="cluster-kafka", pods=True, log_level="WARN") if kafka else None
    try:
        started = time.monotonic()
        plane.start()
        control_plane_s = time.monotonic() - started
        node.start(lock_timeout=lock_timeout)
        ready_s = time.monotonic() - started - control_plane_s
        if broker is not None:
            broker.start()
        print(
            f"control plane up in {control_plane_s:.1f}s, node {node.plane.address} Ready {ready_s:.1f}s later"
        )
        print(f"export KUBECONFIG={node.kubeconfig}")
        if broker is not None:
            print(
                f"kafka: {broker.bootstrap_servers} from the host, {broker.pod_bootstrap_servers} from pods"
            )
        print(f"logs: {plane.root} and {node.root}; Ctrl-C stops the cluster", flush=True)
        if ready_file is not None:
            facts = {
                "kubeconfig": str(node.kubeconfig),
                "node_address": plane.address,
                "kafka_host": broker.bootstrap_servers if broker else None,
                "kafka_pods": broker.pod_bootstrap_servers if broker else None,
            }
            ready_file.write_text(json.dumps(facts, indent=2) + "\n")
        stop.wait()
        return 0
    except NodeError as error:
        print(f"spark-dlq-dev cluster: {error}", file=sys.stderr)
        return 1
    finally:
        print("stopping the cluster", flush=True)
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
        if broker is not None:
            broker.stop()
        node.stop()
        plane.stop()
