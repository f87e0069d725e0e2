"""Two operator replicas in one kopf peering (what the chart runs with ``operator.replicas: 2``):
the active one is SIGKILLed mid-reconcile of 100 policies, the standby takes over.

Both are real ``dlq-operator run`` processes against the real apiserver. A watch on the
operator's ConfigMaps and SparkApplications, open from before the first policy to the end, sees
every write to them: each must be created once and never written again. The policies leave their
topics to others (``topics.create: false``): what is under test is the Kubernetes side, and 200
topic creations would only add time (topic provisioning has its own tests).
"""

from __future__ import annotations

import datetime
import os
import re
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from dlq_engine.model import config_hash, parse_policy
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.processes import Service, free_port
from tests.chart import KOPF_PEERING_CRDS
from tests.integration.crds import install_crds
from tests.integration.operator.conftest import GROUP, PLURAL, SPARK, VERSION, Cluster, policy_document

PEERING = "dlq-ha"
#: The peering lifetime the test runs with: the takeover bound. The shortest the CLI takes, under
#: its default (15 s), which the test would only wait out longer: kopf keeps a live replica's
#: keep-alive 5-10 s ahead of its deadline whatever the lifetime (docs/reliability.md).
LIFETIME = 10
POLICIES = 100
MANAGED = "app.kubernetes.io/managed-by=spark-dlq-operator"
#: What kopf logs for each handler it runs: a replica that logs none of these handled nothing.
FREEZE = "freeze"
RECONCILES = "spark_dlq_operator_reconciles_total"
IN_PROGRESS = "spark_dlq_operator_reconciles_in_progress"
ROUNDS = "spark_dlq_operator_resync_rounds_total"
HANDLED = re.compile(r"Handler '[^']+' (succeeded|failed)")


class Writes:
    """Every ADDED/MODIFIED/DELETED event of the operator's ConfigMaps and SparkApplications in
    ``namespace``, from a watch per kind, each in its own thread, until ``close()``."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.seen: list[tuple[str, str, str, str]] = []  # (kind, event, name, resourceVersion)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.errors: list[BaseException] = []
        core = client.CoreV1Api(api_client)
        objects = client.CustomObjectsApi(api_client)
        group, version, plural = SPARK
        listers: dict[str, Callable[..., Any]] = {
            "ConfigMap": lambda **kw: core.list_namespaced_config_map(
                namespace, label_selector=MANAGED, **kw
            ),
            "SparkApplication": lambda **kw: objects.list_namespaced_custom_object(
                group, version, namespace, plural, label_selector=MANAGED, **kw
            ),
        }
        self._threads = []
        self._ready = threading.Barrier(len(listers) + 1)
        for kind, lister in listers.items():
            thread = threading.Thread(target=self._follow, args=(kind, lister), daemon=True)
            thread.start()
            self._threads.append(thread)
        self._ready.wait(30)

    def _follow(self, kind: str, lister: Callable[..., Any]) -> None:
        try:
            self._watch(kind, lister)
        except BaseException as error:  # a blind watch would let the test pass: check() fails it
            self.errors.append(error)
            raise

    def _watch(self, kind: str, lister: Callable[..., Any]) -> None:
        listed = lister()
        version = (
            listed["metadata"]["resourceVersion"]
            if isinstance(listed, dict)
            else listed.metadata.resource_version
        )
        self._ready.wait(30)
        while not self._closed.is_set():
            stream = watch.Watch()
            for event in stream.stream(lister, resource_version=version, timeout_seconds=2):
                obj = event["object"]
                metadata = obj["metadata"] if isinstance(obj, dict) else obj.metadata.to_dict()
                version = metadata["resourceVersion" if isinstance(obj, dict) else "resource_version"]
                with self._lock:
                    self.seen.append((kind, event["type"], metadata["name"], version))

    def count(self, kind: str, event: str) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for k, e, name, _ in self.seen:
                if (k, e) == (kind, event):
                    counts[name] = counts.get(name, 0) + 1
            return counts

    def others(self) -> list[tuple[str, str, str, str]]:
        with self._lock:
            return [s for s in self.seen if s[1] != "ADDED"]

    def check(self) -> None:
        """Both watches have run without a break so far: ``seen`` is every write."""
        assert self.errors == []
        assert all(thread.is_alive() for thread in self._threads)

    def close(self) -> None:
        self._closed.set()
        for thread in self._threads:
            thread.join(10)


@pytest.fixture
def peering(kube_api: Any, namespace: str, spark_crd: str) -> str:
    """kopf's peering CRDs (the chart's) and a KopfPeering in the test's namespace."""
    install_crds(kube_api, [KOPF_PEERING_CRDS])
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        "kopf.dev",
        "v1",
        namespace,
        "kopfpeerings",
        {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": PEERING}},
    )
    return PEERING


@pytest.fixture
def writes(kube_api: Any, namespace: str, spark_crd: str) -> Iterator[Writes]:
    recorder = Writes(kube_api, namespace)
    yield recorder
    recorder.close()


def peers(cluster: Cluster) -> dict[str, Any]:
    body = cluster.objects.get_namespaced_custom_object(
        "kopf.dev", "v1", cluster.namespace, "kopfpeerings", PEERING
    )
    return dict(body.get("status") or {})


def set_peer(cluster: Cluster, identity: str, record: dict[str, Any] | None) -> None:
    cluster.objects.patch_namespaced_custom_object(
        "kopf.dev", "v1", cluster.namespace, "kopfpeerings", PEERING, {"status": {identity: record}}
    )


def finished(cluster: Cluster) -> dict[str, str]:
    """Each policy's ``status.configHash``, for those that have one (one list)."""
    listed = cluster.objects.list_namespaced_custom_object(GROUP, VERSION, cluster.namespace, PLURAL)
    return {
        p["metadata"]["name"]: p["status"]["configHash"]
        for p in listed["items"]
        if (p.get("status") or {}).get("configHash")
    }


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def metric(port: int, name: str) -> float:
    """The sum of every sample of ``name`` on a replica's /metrics (0 when it has none yet)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + "{", name + " "))
    )


def log_has(service: Service, pattern: str | re.Pattern[str]) -> bool:
    return re.search(pattern, service.log.read_text(errors="replace")) is not None


def test_standby_takes_over_from_a_killed_active_replica_without_double_writes(
    kube: ControlPlane,
    cluster: Cluster,
    namespace: str,
    peering: str,
    writes: Writes,
    tmp_path: Path,
) -> None:
    source, bootstrap_servers = "orders", "kafka.test:9092"  # never reached: topics.create false
    names = [f"p{i:03d}" for i in range(POLICIES)]

    ports = {"active": free_port(), "standby": free_port()}

    def replica(identity: str, priority: int) -> Service:
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
            str(ports[identity]),
            "--resync-interval",
            "2",
            "--spark-image",
            "registry.test/spark-dlq:test",
            "--peering",
            peering,
            "--priority",
            str(priority),
            "--peering-lifetime",
            str(LIFETIME),
        ]
        # kopf names a replica in the peering by $POD_ID (the pod's name in the chart).
        return Service(
            f"dlq-operator {identity}",
            argv,
            log=tmp_path / f"{identity}.log",
            env={**os.environ, "POD_ID": identity},
        )

    active = replica("active", 200)
    standby = replica("standby", 100)
    try:
        active.start()
        active.wait_until(
            lambda: "active" in peers(cluster), timeout=60, what="its keep-alive in the peering"
        )
        standby.start()
        # kopf starts a replica of a named peering paused, and keeps it so while a live peer has
        # a higher priority.
        standby.wait_until(
            lambda: "standby" in peers(cluster), timeout=60, what="its keep-alive in the peering"
        )
        assert set(peers(cluster)) == {"active", "standby"}

        # Both pause for a higher-priority peer (what ``kopf freeze`` writes) while the 100
        # policies are created; when it goes, the active replica starts on all of them at once.
        set_peer(cluster, FREEZE, {"priority": 1000, "lifetime": 300, "lastseen": now()})
        active.wait_until(
            lambda: log_has(active, "Pausing operations in favour of"),
            timeout=30,
            what="a pause for the freeze",
        )
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda name: cluster.create_policy(
                        policy_document(
                            namespace,
                            name,
                            source=source,
                            bootstrap=bootstrap_servers,
                            source_subscription=name,
                            topics={"create": False},
                        )
                    ),
                    names,
                )
            )
        assert writes.seen == []
        set_peer(cluster, FREEZE, None)
        active.wait_until(
            lambda: writes.count("SparkApplication", "ADDED"), timeout=60, what="its first application"
        )
        # The standby has handled nothing while the active lives (kopf's handlers and its own
        # resync rounds); the active is in the middle of reconciles when it is killed.
        assert not log_has(standby, HANDLED), standby.tail()
        assert metric(ports["standby"], RECONCILES) == 0
        assert metric(ports["standby"], IN_PROGRESS) == 0
        assert metric(ports["active"], IN_PROGRESS) > 0
        active.kill()
        killed_at = time.monotonic()
        time.sleep(1)  # the watch catches up; the standby cannot write before the lifetime lapses
        done_at_kill = len(writes.count("SparkApplication", "ADDED"))
        finished_at_kill = len(finished(cluster))
        assert finished_at_kill < POLICIES, (
            "the active replica finished before the kill: nothing was interrupted"
        )
        assert not log_has(standby, HANDLED), standby.tail()
        assert metric(ports["standby"], RECONCILES) == 0

        standby.wait_until(
            lambda: log_has(standby, "Resuming operations after the pause"),
            timeout=LIFETIME + 30,
            what="a resume",
        )
        takeover = time.monotonic() - killed_at
        standby.wait_until(
            lambda: len(finished(cluster)) > finished_at_kill,
            timeout=30,
            what="a first policy of its own",
        )
        first_status = time.monotonic() - killed_at
        print(
            f"takeover: resumed {takeover:.1f}s, first status {first_status:.1f}s after the kill"
            f" ({done_at_kill} of {POLICIES} applications, {finished_at_kill} statuses written at the kill)"
        )
        assert takeover <= LIFETIME + 5

        digests = {n: config_hash(parse_policy(cluster.policy(n))) for n in names}
        standby.wait_until(
            lambda: finished(cluster) == digests,
            timeout=90,
            what="every policy's status",
        )
        converged = time.monotonic() - killed_at
        print(f"converged {converged:.1f}s after the kill")
        # One SparkApplication and one ConfigMap per policy, each at the policy's hash.
        apps = cluster.applications()
        assert sorted(a["metadata"]["name"] for a in apps) == names
        assert all(
            a["metadata"]["annotations"]["sparkdlq.io/config-hash"] == digests[a["metadata"]["name"]]
            for a in apps
        )
        config_maps = cluster.core.list_namespaced_config_map(namespace, label_selector=MANAGED).items
        assert sorted(c.metadata.name for c in config_maps) == [f"{n}-policy" for n in names]
        for name in names:
            assert cluster.status(name)["restartCount"] == 0, name
        # Two resync rounds more, then: each object was created once and never written again.
        rounds = metric(ports["standby"], ROUNDS) + 2
        standby.wait_until(
            lambda: metric(ports["standby"], ROUNDS) >= rounds, timeout=60, what="two resync rounds"
        )
        writes.check()
        assert writes.count("SparkApplication", "ADDED") == dict.fromkeys(names, 1)
        assert writes.count("ConfigMap", "ADDED") == {f"{n}-policy": 1 for n in names}
        assert writes.others() == []
        # And no policy was told twice that its application was created.
        created = [
            e.involved_object.name
            for e in cluster.core.list_namespaced_event(namespace).items
            if e.reason == "SparkApplicationCreated"
        ]
        assert len(created) == len(set(created)), sorted(created)
        # The dead replica's keep-alive is gone from the peering; the standby's stays.
        assert set(peers(cluster)) == {"standby"}
        assert metric(ports["standby"], RECONCILES) >= POLICIES
        assert standby.alive()
    finally:
        active.kill()
        standby.stop()
