"""How fast the operator turns policies into SparkApplications, and how big it gets.

    python bench/operator_scale.py [--latency 200] [--total 1000] [--topics]

Starts the test bed's kube-apiserver (and Kafka with ``--topics``), runs ``dlq-operator run`` as
a separate process (so its RSS is its own), then:

1. latency: creates ``--latency`` policies one at a time, each after the previous one's
   SparkApplication appeared, and reports p50/p99 of creation -> SparkApplication;
2. throughput: creates ``--total`` policies from ``--clients`` threads and reports the time until
   every one has its SparkApplication and its status written;
3. the operator's RSS afterwards.

Without ``--topics`` policies say ``topics.create: false`` (the operator's own cost); with it
every policy gets its two topics on the real broker. Targets (issue 4): p99 <= 1 s, 1,000 in
<= 60 s, RSS <= 200 MiB. A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_dlq_devtools.kafka import KafkaBroker  # noqa: E402
from spark_dlq_devtools.kube import ControlPlane  # noqa: E402
from tests.integration.crds import DEADLETTERPOLICY_CRD, install_crds  # noqa: E402

SPARK_CRD = REPO / "tests" / "fixtures" / "crds" / "sparkoperator.k8s.io_sparkapplications.yaml"
NAMESPACE = "bench"
POLICIES = ("sparkdlq.io", "v1alpha1", NAMESPACE, "deadletterpolicies")
APPLICATIONS = ("sparkoperator.k8s.io", "v1beta2", NAMESPACE, "sparkapplications")


def policy(name: str, *, bootstrap: str, topics: bool) -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1", "kind": "DeadLetterPolicy",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "source": {"topic": "orders", "subscription": name},
            "broker": {"bootstrapServers": bootstrap},
            "processor": {"entrypoint": "billing.handlers:process"},
            "topics": {"create": topics},
        },
    }


class AppWatcher:
    """Records when each SparkApplication first appears (a watch, not polling)."""

    def __init__(self, api: Any) -> None:
        self.seen: dict[str, float] = {}
        self._cond = threading.Condition()
        self._api = api
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        objects = client.CustomObjectsApi(self._api)
        while True:  # a watch ends now and then: start another (a re-list only repeats names)
            try:
                for event in watch.Watch().stream(objects.list_namespaced_custom_object, *APPLICATIONS,
                                                  timeout_seconds=60):
                    name = event["object"]["metadata"]["name"]
                    with self._cond:
                        self.seen.setdefault(name, time.monotonic())
                        self._cond.notify_all()
            except Exception:  # noqa: BLE001 - a broken watch is simply started again
                time.sleep(0.1)

    def wait(self, name: str, timeout: float = 60) -> float:
        with self._cond:
            if not self._cond.wait_for(lambda: name in self.seen, timeout):
                raise TimeoutError(name)
            return self.seen[name]



def count(objects: Any, group: str, version: str, namespace: str, plural: str) -> int:
    """How many objects there are, from a one-item list page."""
    page = objects.list_namespaced_custom_object(group, version, namespace, plural, limit=1)
    return len(page["items"]) + int(page["metadata"].get("remainingItemCount") or 0)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=int, default=200)
    parser.add_argument("--total", type=int, default=1000)
    parser.add_argument("--topics", action="store_true")
    parser.add_argument("--clients", type=int, default=4, help="threads creating the bulk policies")
    args = parser.parse_args()

    plane = ControlPlane(name="kube-bench")
    broker = KafkaBroker(name="kafka-bench") if args.topics else None
    plane.start()
    operator: subprocess.Popen[bytes] | None = None
    try:
        bootstrap = "127.0.0.1:9"
        if broker is not None:
            broker.start()
            bootstrap = broker.bootstrap_servers
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([NewTopic("orders", 1, 1)]).values():
                future.result(30)
        api = config.new_client_from_config(config_file=str(plane.admin_kubeconfig))
        install_crds(api, [DEADLETTERPOLICY_CRD, SPARK_CRD])
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        objects = client.CustomObjectsApi(api)
        watcher = AppWatcher(api)

        log = open(plane.root / "operator-bench.log", "wb")  # noqa: SIM115 - lives as long as the process
        operator = subprocess.Popen(
            [sys.executable, "-m", "spark_dlq_operator.cli", "run", "--namespace", NAMESPACE,
             "--kubeconfig", str(plane.admin_kubeconfig), "--metrics-port", "0"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
        time.sleep(3)
        print(f"operator RSS at start: {rss_mib(operator.pid):.0f} MiB")

        latencies: list[float] = []
        for i in range(args.latency):
            name = f"lat-{i}"
            started = time.monotonic()
            document = policy(name, bootstrap=bootstrap, topics=args.topics)
            objects.create_namespaced_custom_object(*POLICIES, document)
            latencies.append(watcher.wait(name) - started)
        p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
        print(f"creation -> SparkApplication over {args.latency}: p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
              f"max {max(latencies) * 1000:.0f} ms")

        def create(i: int) -> None:
            objects.create_namespaced_custom_object(
                *POLICIES, policy(f"bulk-{i}", bootstrap=bootstrap, topics=args.topics))

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(create, range(args.total)))
        created = time.monotonic() - started
        while count(objects, *APPLICATIONS) < args.latency + args.total:
            time.sleep(0.25)
        apps = time.monotonic() - started
        while True:
            items = objects.list_namespaced_custom_object("sparkdlq.io", "v1alpha1", NAMESPACE,
                                                          "deadletterpolicies")["items"]
            if all((i.get("status") or {}).get("configHash") for i in items):
                break
            time.sleep(1)
        statuses = time.monotonic() - started
        print(f"{args.total} policies: created by the client in {created:.1f} s, all SparkApplications after "
              f"{apps:.1f} s, all statuses after {statuses:.1f} s")
        print(f"operator RSS with {args.latency + args.total} policies: {rss_mib(operator.pid):.0f} MiB")
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(30)
        if broker is not None:
            broker.stop()
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
