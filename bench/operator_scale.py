"""How fast the operator turns policies into SparkApplications, and how big it gets.

    python bench/operator_scale.py [--latency 200] [--total 1000] [--changes 50] [--topics]
                                   [--json bench/results/operator.json]

Starts the test bed's kube-apiserver (and Kafka with ``--topics``), runs ``dlq-operator run`` as
a separate process (so its RSS is its own), then:

1. latency: creates ``--latency`` policies one at a time, each after the previous one's
   SparkApplication appeared, and reports p50/p99 of creation -> SparkApplication;
2. throughput: creates ``--total`` policies from ``--clients`` threads and reports the time until
   every one has its SparkApplication and its status written;
3. the operator's RSS afterwards;
4. change -> resubmission: changes ``--changes`` policies' specs one at a time and reports
   p50/p99 of the patch -> the SparkApplication carrying the new config hash.

Each phase also reports the CPU seconds the operator, the kube-apiserver, etcd, the
controller manager (garbage collector) and this benchmark's own client spent (``/proc/<pid>/stat``) and the API requests the apiserver served (its ``/metrics``), per policy:
on a shared machine the wall clock is noisy, CPU seconds and request counts are not. The load
average is recorded beside them. ``--idle S`` measures S more seconds with nothing changing (the
periodic resync); ``--crd`` installs another DeadLetterPolicy CRD, and an operator package put
first on ``PYTHONPATH`` runs instead of the working tree's, to compare versions.

Without ``--topics`` policies say ``topics.create: false`` (the operator's own cost); with it
every policy gets its two topics on the real broker. Targets (issue 4): p99 <= 1 s, 1,000 in
<= 60 s, RSS <= 200 MiB. A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

from kubernetes import client, config, watch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_dlq_devtools.kafka import KafkaBroker  # noqa: E402
from spark_dlq_devtools.kube import ControlPlane  # noqa: E402
from spark_dlq_devtools.paths import spark_application_crd  # noqa: E402
from tests.integration.crds import DEADLETTERPOLICY_CRD, install_crds  # noqa: E402

NAMESPACE = "bench"
POLICIES = ("sparkdlq.io", "v1alpha1", NAMESPACE, "deadletterpolicies")
APPLICATIONS = ("sparkoperator.k8s.io", "v1beta2", NAMESPACE, "sparkapplications")


def policy(name: str, *, bootstrap: str, topics: bool) -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "source": {"topic": "orders", "subscription": name},
            "broker": {"bootstrapServers": bootstrap},
            "processor": {"entrypoint": "billing.handlers:process"},
            "topics": {"create": topics},
        },
    }


HASH_ANNOTATION = "sparkdlq.io/config-hash"
TICKS = os.sysconf("SC_CLK_TCK")
_REQUEST = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")


class AppWatcher:
    """Records when each SparkApplication first appears, and when it first carries each config
    hash (a watch, not polling)."""

    def __init__(self, api: Any) -> None:
        self.seen: dict[str, float] = {}
        self.hashes: dict[tuple[str, str], float] = {}
        self._cond = threading.Condition()
        self._api = api
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        objects = client.CustomObjectsApi(self._api)
        while True:  # a watch ends now and then: start another (a re-list only repeats names)
            try:
                for event in watch.Watch().stream(  # type: ignore[no-untyped-call]
                    objects.list_namespaced_custom_object, *APPLICATIONS, timeout_seconds=60
                ):
                    metadata = event["object"]["metadata"]
                    name = metadata["name"]
                    digest = (metadata.get("annotations") or {}).get(HASH_ANNOTATION, "")
                    with self._cond:
                        now = time.monotonic()
                        self.seen.setdefault(name, now)
                        self.hashes.setdefault((name, digest), now)
                        self._cond.notify_all()
            except Exception:  # noqa: BLE001 - a broken watch is simply started again
                time.sleep(0.1)

    def wait(self, name: str, timeout: float = 60) -> float:
        with self._cond:
            if not self._cond.wait_for(lambda: name in self.seen, timeout):
                raise TimeoutError(name)
            return self.seen[name]

    def current_hash(self, name: str) -> str:
        with self._cond:
            return max((t, d) for (n, d), t in self.hashes.items() if n == name)[1]

    def wait_new_hash(self, name: str, old: str, since: float, timeout: float = 60) -> float:
        """When the application first carried a config hash other than ``old`` after ``since``."""

        def changed() -> float | None:
            times = [t for (n, d), t in self.hashes.items() if n == name and d != old and t >= since]
            return min(times) if times else None

        with self._cond:
            if not self._cond.wait_for(lambda: changed() is not None, timeout):
                raise TimeoutError(name)
            result = changed()
            assert result is not None
            return result


def count(objects: Any, group: str, version: str, namespace: str, plural: str) -> int:
    """How many objects there are, from a one-item list page."""
    page = objects.list_namespaced_custom_object(group, version, namespace, plural, limit=1)
    return len(page["items"]) + int(page["metadata"].get("remainingItemCount") or 0)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (its own threads; children are not counted)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def request_counts(api: Any) -> collections.Counter[str]:
    """The apiserver's request counters, as "VERB resource[/subresource]" -> count."""
    text = api.call_api("GET", api.configuration.host + "/metrics").read().decode()
    counts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        match = _REQUEST.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if labels.get("verb") in ("WATCH", "CONNECT") or not labels.get("resource"):
            continue
        key = f"{labels['verb']} {labels['resource']}" + (
            f"/{labels['subresource']}" if labels.get("subresource") else ""
        )
        if int(labels.get("code") or 0) >= 400:
            key += f" ({labels['code']})"
        counts[key] += int(float(match["value"]))
    return counts


class Meter:
    """CPU seconds of the operator, the apiserver and etcd, and the apiserver's request counts,
    between ``start`` and ``stop``."""

    def __init__(self, api: Any, pids: dict[str, int]) -> None:
        self._api = api
        self._pids = pids

    def start(self) -> None:
        self._cpu = {k: cpu_seconds(p) for k, p in self._pids.items()}
        self._requests = request_counts(self._api)
        self._wall = time.monotonic()

    def stop(self, policies: int) -> dict[str, Any]:
        cpu = {k: cpu_seconds(p) - self._cpu[k] for k, p in self._pids.items()}
        requests = request_counts(self._api)
        requests.subtract(self._requests)
        per = max(1, policies)
        return {
            "wall_s": round(time.monotonic() - self._wall, 2),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "cpu_s": {k: round(v, 2) for k, v in cpu.items()},
            "cpu_ms_per_policy": {k: round(v / per * 1000, 2) for k, v in cpu.items()},
            "cpu_s_total": round(sum(cpu.values()), 2),
            "requests_per_policy": {k: round(v / per, 2) for k, v in sorted(requests.items()) if v > 0},
        }


def show(label: str, figures: dict[str, Any]) -> None:
    cpu = ", ".join(f"{k} {v:.1f} ms" for k, v in figures["cpu_ms_per_policy"].items())
    requests = ", ".join(f"{k} {v:g}" for k, v in figures["requests_per_policy"].items())
    print(f"  {label}: CPU per policy: {cpu}; load {figures['load_average']}")
    print(f"  {label}: requests per policy: {requests}")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=int, default=200)
    parser.add_argument("--total", type=int, default=1000)
    parser.add_argument("--topics", action="store_true")
    parser.add_argument("--clients", type=int, default=4, help="threads creating the bulk policies")
    parser.add_argument("--changes", type=int, default=50, help="policies changed one at a time (phase 4)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here as JSON")
    parser.add_argument("--note", default="", help="a note stored in the JSON")
    parser.add_argument(
        "--idle",
        type=float,
        default=0,
        help="then measure this many seconds with nothing changing (resync rounds)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="seconds let pass after each phase, so that the status writes that follow are "
        "metered with it (and one more after the operator starts, before its RSS is read)",
    )
    parser.add_argument(
        "--crd",
        type=Path,
        default=DEADLETTERPOLICY_CRD,
        help="the DeadLetterPolicy CRD to install (to compare versions)",
    )
    args = parser.parse_args()
    results: dict[str, Any] = {
        "benchmark": "operator_scale",
        "args": {k: str(v) for k, v in vars(args).items()},
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "note": args.note,
    }

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
        api = config.new_client_from_config(config_file=str(plane.admin_kubeconfig))  # type: ignore[no-untyped-call]
        install_crds(api, [args.crd, spark_application_crd()])
        # The client takes a manifest (a dict) for a body; its stubs name only the model class.
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})  # type: ignore[arg-type]
        objects = client.CustomObjectsApi(api)
        watcher = AppWatcher(api)

        log = open(plane.root / "operator-bench.log", "wb")  # noqa: SIM115 - lives as long as the process
        operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spark_dlq_operator.cli",
                "run",
                "--namespace",
                NAMESPACE,
                "--kubeconfig",
                str(plane.admin_kubeconfig),
                "--metrics-port",
                "0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)])),
            },
        )
        print(f"operator: {operator.pid}, CRD {args.crd}", flush=True)
        time.sleep(args.settle + 1)
        print(f"operator RSS at start: {rss_mib(operator.pid):.0f} MiB")
        results["rss_start_mib"] = round(rss_mib(operator.pid), 1)
        assert plane.apiserver is not None
        assert plane.etcd is not None
        pids = {
            "operator": operator.pid,
            "apiserver": plane.apiserver.pid,
            "etcd": plane.etcd.pid,
            "bench client": os.getpid(),
        }
        if plane.controller_manager is not None:
            pids["controller-manager"] = plane.controller_manager.pid
        meter = Meter(api, pids)

        meter.start()
        latencies: list[float] = []
        for i in range(args.latency):
            name = f"lat-{i}"
            started = time.monotonic()
            document = policy(name, bootstrap=bootstrap, topics=args.topics)
            objects.create_namespaced_custom_object(*POLICIES, document)
            latencies.append(watcher.wait(name) - started)
        p50, p99 = percentile(latencies, 0.5) * 1000, percentile(latencies, 0.99) * 1000
        print(
            f"creation -> SparkApplication over {args.latency}: p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
            f"max {max(latencies) * 1000:.0f} ms"
        )
        time.sleep(args.settle)  # the status writes that follow each application
        results["latency"] = {
            "policies": args.latency,
            "p50_ms": round(p50),
            "p99_ms": round(p99),
            "max_ms": round(max(latencies) * 1000),
            **meter.stop(args.latency),
        }
        show("latency", results["latency"])

        def create(i: int) -> None:
            for attempt in range(5):  # a loaded apiserver may time a request out (504)
                try:
                    objects.create_namespaced_custom_object(
                        *POLICIES, policy(f"bulk-{i}", bootstrap=bootstrap, topics=args.topics)
                    )
                    return
                except client.exceptions.ApiException as error:
                    if error.status == 409 and attempt:  # the timed-out attempt did create it
                        return
                    if error.status not in (500, 503, 504) or attempt == 4:
                        raise

        meter.start()
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(create, range(args.total)))
        created = time.monotonic() - started
        while count(objects, *APPLICATIONS) < args.latency + args.total:
            time.sleep(0.25)
        apps = time.monotonic() - started
        while True:
            # The client returns a custom object list as its JSON document (typed ``object``).
            items = cast(
                "dict[str, Any]",
                objects.list_namespaced_custom_object(
                    "sparkdlq.io", "v1alpha1", NAMESPACE, "deadletterpolicies"
                ),
            )["items"]
            if all((i.get("status") or {}).get("configHash") for i in items):
                break
            time.sleep(1)
        statuses = time.monotonic() - started
        print(
            f"{args.total} policies: created by the client in {created:.1f} s, all SparkApplications after "
            f"{apps:.1f} s, all statuses after {statuses:.1f} s"
        )
        bulk = meter.stop(args.total)
        rss = rss_mib(operator.pid)
        print(f"operator RSS with {args.latency + args.total} policies: {rss:.0f} MiB")
        results["throughput"] = {
            "policies": args.total,
            "created_s": round(created, 2),
            "applications_s": round(apps, 2),
            "statuses_s": round(statuses, 2),
            "rss_mib": round(rss, 1),
            **bulk,
        }
        show("throughput", bulk)

        if args.changes:
            meter.start()
            resubmissions: list[float] = []
            for i in range(args.changes):
                name = f"lat-{i % args.latency}" if args.latency else f"bulk-{i}"
                old = watcher.current_hash(name)
                started = time.monotonic()
                objects.patch_namespaced_custom_object(
                    *POLICIES,
                    name,
                    {"spec": {"spark": {"sparkConf": {"spark.sql.shuffle.partitions": str(8 + i)}}}},
                )
                resubmissions.append(watcher.wait_new_hash(name, old, started) - started)
            time.sleep(args.settle)
            c50, c99 = percentile(resubmissions, 0.5) * 1000, percentile(resubmissions, 0.99) * 1000
            print(
                f"change -> resubmitted SparkApplication over {args.changes}: p50 {c50:.0f} ms, "
                f"p99 {c99:.0f} ms, max {max(resubmissions) * 1000:.0f} ms"
            )
            results["change"] = {
                "policies": args.changes,
                "p50_ms": round(c50),
                "p99_ms": round(c99),
                "max_ms": round(max(resubmissions) * 1000),
                **meter.stop(args.changes),
            }
            show("change", results["change"])
        if args.idle:
            meter.start()
            time.sleep(args.idle)
            results["idle"] = meter.stop(args.latency + args.total)
            show(f"idle {args.idle:.0f} s", results["idle"])
        results["rss_end_mib"] = round(rss_mib(operator.pid), 1)
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(30)
        if broker is not None:
            broker.stop()
        plane.stop()
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
