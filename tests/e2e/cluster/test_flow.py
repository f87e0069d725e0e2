"""The whole flow on a real cluster, as a platform team and a user run it.

The test bed's one-node cluster (kube-apiserver, controllers, scheduler, and this machine as a
kubelet + containerd node) runs everything as pods from images built here:

1. the real Kubeflow spark-operator, installed from its own Helm chart (its webhook on, its
   real CRDs), watching the namespace ``payments`` (restricted Pod Security enforced);
2. ``helm install`` of ``charts/spark-dlq-operator`` (the operator image), with the checkpoints
   on a shared volume;
3. ``kubectl apply`` of ``examples/orders-billing.yaml``: the spark-operator runs the Spark driver
   and an executor as pods from the project's engine image (with the example processor baked
   in), reading the test bed's broker; orders of every kind are routed;
4. ``kubectl get dlp`` shows Running; ``kubectl patch`` changes the policy and the spark-operator
   resubmits from the checkpoint; the driver pod is killed five times and the policy comes back
   every time; ``kubectl delete`` removes the job and keeps the dead-letter topic;
5. every order produced is accounted for: in the output, in the dead letters with the right
   reason, or acknowledged;
6. the red team (``red_team.py``): as an ``edit`` user, sparkConf escapes are refused, and the
   running driver's own token is contained, with the spark-operator's webhook on and then off.

Each step prints what it does and how long it took. ``scripts/cluster-e2e.sh`` runs this file.
"""

from __future__ import annotations

import json
import random
import shutil
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from spark_dlq_devtools import containers
from spark_dlq_devtools.kafka import KafkaBroker, create_topics
from spark_dlq_devtools.node import Node
from spark_dlq_devtools.paths import REPO_ROOT, cache_dir, helm_bin, versions, work_dir
from tests.e2e.cluster import red_team
from tests.e2e.cluster.kill_timeline import (
    KillTimeline,
    Watch,
    kill_timeline,
    new_pod_name,
    pod_created,
    summary,
)
from tests.helpers import read_all

NAMESPACE = "payments"
POLICY = "orders-billing"
SOURCE, OUTPUT = "orders", "orders-billed"
DLQ = f"{SOURCE}-billing-DLQ"
CHECKPOINT_CLAIM = "spark-dlq-checkpoints"
STORAGE_CLASS = "spark-dlq-e2e"
DRIVER_KILLS = 5

#: What the example processor does with each kind (examples/processors/shop_orders.py) and the
#: policy's settings (examples/orders-billing.yaml): where each order must end.
KINDS = {
    "normal": "output",
    "flaky": "output",
    "poison": "exhausted",
    "fraud": "terminated",
    "garbage": "non-retryable",
    "ignore": "acknowledged",
}


def scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return None


def output_ends(bootstrap: str) -> list[Any]:
    """The output topic's partitions at their ends now."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cluster-e2e-ends"})
    try:
        partitions = consumer.list_topics(OUTPUT, timeout=10).topics[OUTPUT].partitions
        return [
            TopicPartition(
                OUTPUT, p, consumer.get_watermark_offsets(TopicPartition(OUTPUT, p), timeout=10)[1]
            )
            for p in partitions
        ]
    finally:
        consumer.close()


def first_routed(bootstrap: str, after: list[Any], ids: set[int], *, timeout: float) -> float:
    """When the first of the orders ``ids`` came out in the output topic, read from ``after``."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "cluster-e2e-first", "enable.auto.commit": False}
    )
    try:
        consumer.assign(after)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None and int(message.key() or b"0") in ids:
                return time.time()
        raise AssertionError(f"none of the orders {sorted(ids)} was routed within {timeout:.0f}s")
    finally:
        consumer.close()


def step(text: str) -> Callable[[], None]:
    """Print a step as it starts; the returned function prints how long it took."""
    started = time.monotonic()
    print(f"\n[cluster-e2e] {text}", flush=True)

    def done() -> None:
        print(f"[cluster-e2e]   done in {time.monotonic() - started:.1f}s", flush=True)

    return done


@dataclass
class Orders:
    """Orders produced (key = order id), and where each must end."""

    bootstrap: str
    kinds: dict[int, str] = field(default_factory=dict)
    rng: random.Random = field(default_factory=lambda: random.Random(11))

    def produce(self, count: int) -> set[int]:
        """Produce ``count`` orders; their ids."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "log_level": 0})
        weights = {"normal": 80, "flaky": 6, "poison": 4, "fraud": 4, "garbage": 3, "ignore": 3}
        for _ in range(count):
            order_id = len(self.kinds) + 1
            kind = self.rng.choices(list(weights), list(weights.values()))[0]
            self.kinds[order_id] = kind
            value = (
                b"not json {"
                if kind == "garbage"
                else json.dumps({"id": order_id, "amount": 10, "kind": kind}).encode()
            )
            producer.produce(SOURCE, key=str(order_id).encode(), value=value)
        assert producer.flush(60) == 0
        return set(range(len(self.kinds) - count + 1, len(self.kinds) + 1))

    def missing(self) -> list[int]:
        """Orders not yet where they belong (an acknowledged one needs nothing)."""
        seen: dict[int, set[str]] = {}
        for record in read_all(self.bootstrap, OUTPUT):
            seen.setdefault(int(record.key or b"0"), set()).add("output")
        for record in read_all(self.bootstrap, DLQ):
            seen.setdefault(int(record.key or b"0"), set()).add(record.header("dlq.reason") or "?")
        missing = []
        for order_id, kind in self.kinds.items():
            where = KINDS[kind]
            if where != "acknowledged" and where not in seen.get(order_id, set()):
                missing.append(order_id)
            wrong = seen.get(order_id, set()) - {where}
            assert not wrong, f"order {order_id} ({kind}) ended in {wrong}, expected {where}"
        return missing

    def wait_accounted(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        missing = self.missing()
        while missing and time.monotonic() < deadline:
            time.sleep(5)
            missing = self.missing()
        assert not missing, f"{len(missing)} of {len(self.kinds)} orders not accounted for: {missing[:20]}"


class Cluster:
    """kubectl and helm as the cluster's admin."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        return self.node.kubectl(*args, input=input, timeout=timeout)

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def apply(self, document: dict[str, Any] | list[dict[str, Any]]) -> None:
        documents = document if isinstance(document, list) else [document]
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))

    def helm(self, *args: str, timeout: float = 600) -> str:
        import subprocess

        result = subprocess.run(
            [str(helm_bin()), f"--kubeconfig={self.node.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"helm {' '.join(args)}: {result.stderr}"
        return result.stdout

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 300, interval: float = 2) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
            except Exception as error:  # noqa: BLE001 - not there yet; the last error is shown
                last = error
            else:
                if last:
                    return last
            time.sleep(interval)
        raise AssertionError(
            f"timed out after {timeout:.0f}s waiting for {what}: {last!r}\n{self.describe()}"
        )

    def describe(self) -> str:
        parts = []
        for args in (
            ("get", "dlp,sparkapplications,pods,pvc", "-n", NAMESPACE, "-o", "wide"),
            ("get", "pods", "-A", "-o", "wide"),
            ("get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp"),
        ):
            try:
                parts.append(self.kubectl(*args))
            except Exception as error:  # noqa: BLE001 - best effort, for a failure message
                parts.append(str(error))
        return "\n".join(parts)[-6000:]

    def policy(self) -> dict[str, Any]:
        return dict(self.json("get", "dlp", POLICY, "-n", NAMESPACE))

    def phase(self) -> str:
        return str(self.policy().get("status", {}).get("phase", ""))

    def driver(self) -> dict[str, Any] | None:
        pods = self.json("get", "pods", "-n", NAMESPACE, "-l", "spark-role=driver")["items"]
        running = [
            p
            for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]
        return running[0] if running else None

    def executors(self) -> list[dict[str, Any]]:
        pods = self.json("get", "pods", "-n", NAMESPACE, "-l", "spark-role=executor")["items"]
        return [p for p in pods if p["status"].get("phase") == "Running"]

    def running_job(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The policy Running, its driver pod and an executor pod Running."""

        def check() -> tuple[dict[str, Any], dict[str, Any]] | None:
            driver, executors = self.driver(), self.executors()
            if self.phase() == "Running" and driver and executors:
                return driver, executors[0]
            return None

        result: tuple[dict[str, Any], dict[str, Any]] = self.wait(
            "the policy Running with its pods", check, 420
        )
        return result


@pytest.fixture(scope="module")
def cluster(node: Node, kafka: KafkaBroker) -> Iterator[Cluster]:
    """The spark-operator and spark-dlq installed on the node, with the images built here."""
    admin = Cluster(node)
    done = step("loading the images built here into the node's containerd")
    for role in ("operator", "demo", "spark-operator"):
        node.load_image(containers.archive(containers.image(role)))
    done()

    done = step(f"namespace {NAMESPACE} (restricted Pod Security enforced) and its checkpoint volume")
    # The broker is new for every run: checkpoints of an earlier run name offsets it never had.
    checkpoints = work_dir("cluster-e2e-checkpoints")
    shutil.rmtree(checkpoints)
    checkpoints.mkdir()
    checkpoints.chmod(0o1777)
    admin.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": NAMESPACE,
                    "labels": {
                        "pod-security.kubernetes.io/enforce": "restricted",
                        "pod-security.kubernetes.io/warn": "restricted",
                    },
                },
            },
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "spark-dlq-e2e-checkpoints"},
                "spec": {
                    "storageClassName": STORAGE_CLASS,
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": str(checkpoints), "type": "Directory"},
                },
            },
        ]
    )
    done()

    operator_version = versions()["SPARK_OPERATOR_VERSION"]
    done = step(f"helm install the Kubeflow spark-operator {operator_version} from its own chart, webhook on")
    chart = cache_dir() / "spark-operator" / operator_version / "chart"
    spark_operator_image = containers.image("spark-operator")
    repository, tag = spark_operator_image.rsplit(":", 1)
    registry, repository = repository.split("/", 1)
    admin.helm(
        "install", "spark-operator", str(chart), "--namespace", "spark-operator", "--create-namespace",
        "--set", f"image.registry={registry}", "--set", f"image.repository={repository}",
        "--set", f"image.tag={tag}", "--set", "image.pullPolicy=Never",
        "--set", f"spark.jobNamespaces={{{NAMESPACE}}}",
        "--set", "webhook.enable=true",
        "--wait", "--timeout", "6m",
    )  # fmt: skip
    done()

    done = step("helm install charts/spark-dlq-operator (the operator image, checkpoints on a volume)")
    operator_image, demo_image = containers.image("operator"), containers.image("demo")
    values = {
        "image": {
            "repository": operator_image.rsplit(":", 1)[0],
            "tag": operator_image.rsplit(":", 1)[1],
            "pullPolicy": "Never",
        },
        "operator": {"watch": {"allNamespaces": False, "namespaces": [NAMESPACE]}},
        "spark": {
            "image": {"repository": demo_image.rsplit(":", 1)[0], "tag": demo_image.rsplit(":", 1)[1]},
            "namespaces": [NAMESPACE],
            "checkpointBase": "/var/lib/spark-dlq/checkpoints",
            "checkpointVolume": {
                "claimName": CHECKPOINT_CLAIM,
                "create": True,
                "storageClassName": STORAGE_CLASS,
                "size": "1Gi",
                "accessModes": ["ReadWriteOnce"],
            },
        },
        "topics": {"provisioner": "admin"},
    }
    values_file = work_dir("cluster-e2e") / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    admin.helm(
        "install", "spark-dlq", str(REPO_ROOT / "charts" / "spark-dlq-operator"),
        "--namespace", "spark-dlq", "--create-namespace", "--values", str(values_file),
        "--wait", "--timeout", "4m",
    )  # fmt: skip
    done()

    create_topics(kafka.bootstrap_servers, [SOURCE, OUTPUT], partitions=2)
    try:
        yield admin
    finally:
        for args in (
            ("uninstall", "spark-dlq", "--namespace", "spark-dlq", "--wait"),
            ("uninstall", "spark-operator", "--namespace", "spark-operator", "--wait"),
        ):
            try:
                admin.helm(*args)
            except AssertionError as error:
                print(f"[cluster-e2e] cleanup: {error}")


@pytest.mark.timeout(3600)
def test_the_whole_flow_on_a_real_cluster(cluster: Cluster, kafka: KafkaBroker) -> None:
    orders = Orders(kafka.bootstrap_servers)
    orders.produce(150)

    done = step("kubectl apply -f examples/orders-billing.yaml (bootstrap: the broker's address for pods)")
    policy = yaml.safe_load((REPO_ROOT / "examples" / "orders-billing.yaml").read_text())
    policy["spec"]["broker"]["bootstrapServers"] = kafka.pod_bootstrap_servers
    # The node has two cores for everything: the driver's and the executor's pods ask for 300m
    # each (Spark still runs one task slot per executor core), so that a redrive's driver and
    # executor (the policy's Spark settings) fit beside the running job.
    policy["spec"]["spark"]["sparkConf"] = {
        "spark.kubernetes.driver.request.cores": "300m",
        "spark.kubernetes.executor.request.cores": "300m",
    }
    applied = time.monotonic()
    cluster.apply(policy)
    driver, executor = cluster.running_job()
    images = {c["image"] for pod in (driver, executor) for c in pod["spec"]["containers"]}
    assert images == {containers.image("demo")}, images
    print(
        f"[cluster-e2e]   driver {driver['metadata']['name']}, executor {executor['metadata']['name']}, image {images}"
    )
    cluster.wait(
        "the first routed order", lambda: read_all(kafka.bootstrap_servers, OUTPUT, expect=1, timeout=5), 300
    )
    first_routed_s = time.monotonic() - applied
    print(f"[cluster-e2e]   first routed order {first_routed_s:.1f}s after kubectl apply")
    orders.wait_accounted(300)
    done()

    done = step("the Spark pods run as the policy's own service account; the executor has no token")
    account = f"{POLICY}-spark"
    assert (driver["spec"]["serviceAccountName"], executor["spec"]["serviceAccountName"]) == (
        account,
        account,
    )
    assert executor["spec"].get("automountServiceAccountToken") is False
    mounted = [m["mountPath"] for c in executor["spec"]["containers"] for m in c.get("volumeMounts") or []]
    assert "/var/run/secrets/kubernetes.io/serviceaccount" not in mounted, mounted
    # The driver made its executor with the chart's ClusterRole alone: nothing it asked was refused.
    driver_log = cluster.kubectl("logs", driver["metadata"]["name"], "-n", NAMESPACE)
    refused = [line for line in driver_log.splitlines() if "Forbidden" in line or " 403" in line]
    assert not refused, refused[:5]
    done()

    done = step("Spark 4.2's NetworkPolicy for the application: its executors take ingress from it only")
    # spark-submit in the spark-operator's controller made it, with the rights the chart grants
    # (sparkOperator.rbac.networkPolicies); the spark-operator's own chart gives none.
    app_id = driver["metadata"]["labels"]["spark-app-selector"]
    [isolation] = [
        p
        for p in cluster.json("get", "networkpolicies", "-n", NAMESPACE)["items"]
        if p["spec"]["podSelector"].get("matchLabels", {}).get("spark-app-selector") == app_id
    ]
    assert isolation["spec"]["podSelector"]["matchLabels"]["spark-role"] == "executor", isolation
    assert isolation["spec"]["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {"spark-app-selector": app_id}}}]}
    ], isolation
    assert executor["metadata"]["labels"]["spark-app-selector"] == app_id
    print(f"[cluster-e2e]   NetworkPolicy {isolation['metadata']['name']}: {isolation['spec']}")
    done()

    done = step("the driver serves the engine's metrics on its port 'metrics' (the PodMonitor's)")
    [port] = [
        p for c in driver["spec"]["containers"] for p in c.get("ports", []) if p.get("name") == "metrics"
    ]
    url = f"http://{driver['status']['podIP']}:{port['containerPort']}/metrics"
    scraped = cluster.wait("the driver's /metrics", lambda: scrape(url), 60)
    routed = [
        float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith("spark_dlq_messages_total{")
        and f'policy="{NAMESPACE}/{POLICY}"' in line
        and 'outcome="output"' in line
    ]
    assert routed, scraped[-3000:]
    assert routed[0] > 0, scraped[-3000:]
    done()

    done = step("the driver's heartbeat on the policy's Lease (what the operator's supervisor reads)")

    def heartbeat() -> dict[str, Any] | None:
        lease = cluster.json("get", "lease", f"{POLICY}-heartbeat", "-n", NAMESPACE)
        text = (lease["metadata"].get("annotations") or {}).get("sparkdlq.io/heartbeat")
        beat = json.loads(text) if text else None
        return beat if beat and beat.get("queryActive") and beat.get("batchId") is not None else None

    beat = cluster.wait("a heartbeat with the query active", heartbeat, 60)
    print(f"[cluster-e2e]   heartbeat {beat}")
    done()

    done = step("kubectl get dlp")
    table = cluster.kubectl("get", "dlp", "-n", NAMESPACE)
    print(table)
    assert "Running" in table
    done()

    done = step(
        "red team, webhook on: sparkConf escapes refused as an edit user; the driver's token contained"
    )
    author = red_team.author_kubeconfig(cluster.node)
    red_team.spark_conf_is_refused(cluster.node, author, bootstrap=kafka.pod_bootstrap_servers)
    red_team.driver_token_is_contained(
        cluster.node, driver["metadata"]["name"], namespace=NAMESPACE, policy=POLICY
    )
    done()

    done = step("kubectl patch: a change of the engine's configuration restarts the job from its checkpoint")
    before = cluster.policy()["status"]
    first_driver = driver["metadata"]["uid"]
    cluster.kubectl(
        "patch", "dlp", POLICY, "-n", NAMESPACE, "--type", "merge",
        "-p", json.dumps({"spec": {"retry": {"maxRedeliverCount": 4}}}),
    )  # fmt: skip
    cluster.wait(
        "the restart",
        lambda: cluster.policy()["status"].get("restartCount", 0) > before.get("restartCount", 0),
        120,
    )
    orders.produce(100)
    driver, _ = cluster.running_job()
    assert driver["metadata"]["uid"] != first_driver, "the spark-operator did not resubmit"
    orders.wait_accounted(400)
    # The old driver was stopped with SIGTERM (to its JVM, by tini): it released its lease.
    log = cluster.kubectl("logs", driver["metadata"]["name"], "-n", NAMESPACE)
    for line in (line for line in log.splitlines() if "checkpoint lease" in line or "query started" in line):
        print(f"[cluster-e2e]   {line.strip()[:240]}")
    outputs = len(read_all(kafka.bootstrap_servers, OUTPUT))
    expected = sum(1 for kind in orders.kinds.values() if KINDS[kind] == "output")
    # From the checkpoint: at most a replayed batch twice, never everything from the start.
    assert outputs < expected * 1.5, (outputs, expected)
    done()

    # Each kill's way back, part by part (tests/e2e/cluster/kill_timeline.py).
    apps = Watch(cluster.node.kubeconfig, "sparkapplications", NAMESPACE)
    pods = Watch(cluster.node.kubeconfig, "pods", NAMESPACE)
    kills: list[KillTimeline] = []
    try:
        # Their first lists (the running driver and executor) arrive before the first kill.
        cluster.wait("the watches' first lists", lambda: apps.events and pods.events, 60, interval=0.2)
        for kill in range(1, DRIVER_KILLS + 1):
            done = step(f"driver pod killed ({kill}/{DRIVER_KILLS}): the policy must come back")
            name, uid = driver["metadata"]["name"], driver["metadata"]["uid"]
            after = output_ends(kafka.bootstrap_servers)
            killed_at = time.time()
            cluster.kubectl(
                "delete", "pod", name, "-n", NAMESPACE, "--grace-period=0", "--force", "--wait=false"
            )
            # New orders once the new driver pod exists: the killed one (its kubelet stops it
            # within seconds of a forced deletion) is not the one that routes them.
            cluster.wait(
                "a new driver pod",
                lambda killed_at=killed_at: pod_created(pods, killed_at, "driver"),
                180,
                interval=0.5,
            )
            routed_at = first_routed(kafka.bootstrap_servers, after, orders.produce(20), timeout=400)
            driver, _ = cluster.running_job()
            assert driver["metadata"]["uid"] != uid, "the killed driver runs again"
            orders.wait_accounted(400)
            # The killed driver's pod is gone: the new one takes its checkpoint lease over at once.
            log = cluster.kubectl("logs", driver["metadata"]["name"], "-n", NAMESPACE, "--timestamps")
            for line in (line for line in log.splitlines() if "checkpoint lease" in line):
                print(f"[cluster-e2e]   {line.strip()[:240]}")
            new_executor = new_pod_name(pods, killed_at, "executor")
            executor_log = (
                cluster.kubectl("logs", new_executor, "-n", NAMESPACE, "--timestamps") if new_executor else ""
            )
            timeline = kill_timeline(
                kill,
                killed_at=killed_at,
                routed_at=routed_at,
                apps=apps,
                pods=pods,
                driver_log=log,
                executor_log=executor_log,
            )
            print(f"[cluster-e2e]   {timeline.line()}")
            kills.append(timeline)
            assert timeline.lease_wait_s < 1, (
                "the new driver waited for the lease of a driver whose pod is gone"
            )
            [lock] = list(work_dir("cluster-e2e-checkpoints").rglob("dlq-engine.lock"))
            assert json.loads(lock.read_text())["pod"]["uid"] == driver["metadata"]["uid"]
            done()
    finally:
        apps.close()
        pods.close()
    for line in summary(kills):
        print(f"[cluster-e2e]   over the {len(kills)} kills: {line}")

    done = step("a new processor version, then a DeadLetterRedrive sends the poison orders back")
    # Read before the patch: the operator may restart the job before a read after it.
    restarts = cluster.policy()["status"].get("restartCount", 0)
    cluster.kubectl(
        "patch", "dlp", POLICY, "-n", NAMESPACE, "--type", "merge",
        "-p", json.dumps({"spec": {"processor": {"entrypoint": "shop_orders:process_v2"}}}),
    )  # fmt: skip
    cluster.wait(
        "the new version running", lambda: cluster.policy()["status"].get("restartCount", 0) > restarts, 180
    )
    cluster.running_job()
    poison = {i for i, kind in orders.kinds.items() if kind == "poison"}
    cluster.apply(
        {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterRedrive",
            "metadata": {"name": "fix-poison", "namespace": NAMESPACE},
            "spec": {
                "policyRef": {"name": POLICY},
                "selection": {"errorClasses": ["ValueError"], "reasons": ["exhausted"]},
                "ratePerSecond": 50,
            },
        }
    )
    redrive = cluster.wait(
        "the redrive to succeed",
        lambda: (
            found
            if (found := cluster.json("get", "dlr", "fix-poison", "-n", NAMESPACE))
            .get("status", {})
            .get("phase")
            in ("Succeeded", "Failed")
            else None
        ),
        600,
    )
    status = redrive["status"]
    assert status["phase"] == "Succeeded", status
    dead_poison = {
        int(r.key or b"0")
        for r in read_all(kafka.bootstrap_servers, DLQ)
        if r.header("dlq.error.class") == "ValueError"
    }
    assert dead_poison == poison
    # The counts came from the driver's termination message, through the kubelet and the pod.
    assert status["matched"] == status["redriven"] >= len(poison), status
    print(cluster.kubectl("get", "dlr", "-n", NAMESPACE))

    def billed() -> bool:
        return poison <= {int(r.key or b"0") for r in read_all(kafka.bootstrap_servers, OUTPUT)}

    cluster.wait("every poison order billed after the fix", billed, 300)
    # A finished redrive's objects belong to it: deleting it deletes them.
    cluster.kubectl("delete", "dlr", "fix-poison", "-n", NAMESPACE, "--wait=true", timeout=300)
    cluster.wait(
        "the redrive's SparkApplication, ConfigMap and driver pod to go",
        lambda: (
            not cluster.json(
                "get",
                "sparkapplications,configmaps,pods",
                "-n",
                NAMESPACE,
                "-l",
                "sparkdlq.io/redrive=fix-poison",
            )["items"]
        ),
        300,
    )
    done()

    done = step("kubectl delete dlp: the job goes, the dead-letter topic stays")
    cluster.kubectl("delete", "dlp", POLICY, "-n", NAMESPACE, "--wait=true", timeout=300)
    cluster.wait(
        "the SparkApplication, its ConfigMap and its pods to go",
        lambda: (
            not cluster.json(
                "get",
                "sparkapplications,configmaps,pods",
                "-n",
                NAMESPACE,
                "-l",
                f"sparkdlq.io/policy={POLICY}",
            )["items"]
        ),
        300,
    )
    # Spark's NetworkPolicies belong to their driver pods: they go with them.
    cluster.wait(
        "Spark's NetworkPolicies to go with their driver pods",
        lambda: not cluster.json("get", "networkpolicies", "-n", NAMESPACE)["items"],
        120,
    )
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": kafka.bootstrap_servers}).list_topics(timeout=10).topics
    assert DLQ in topics, "the dead-letter topic must be kept"
    done()

    done = step("red team, the spark-operator's webhook off: the same refusals, the same token")
    cluster.helm(
        "upgrade", "spark-operator", str(cache_dir() / "spark-operator" / versions()["SPARK_OPERATOR_VERSION"] / "chart"),
        "--namespace", "spark-operator", "--reuse-values", "--set", "webhook.enable=false",
        "--wait", "--timeout", "6m",
    )  # fmt: skip
    cluster.wait(
        "the webhook configurations to go",
        lambda: (
            not [
                w
                for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
                for w in cluster.json("get", kind)["items"]
                if "spark-operator" in w["metadata"]["name"]
            ]
        ),
        120,
    )
    red_team.spark_conf_is_refused(cluster.node, author, bootstrap=kafka.pod_bootstrap_servers)
    cluster.apply(policy)  # the same policy again: it resumes from its checkpoint
    driver, _ = cluster.running_job()
    red_team.driver_token_is_contained(
        cluster.node, driver["metadata"]["name"], namespace=NAMESPACE, policy=POLICY
    )
    cluster.kubectl("delete", "dlp", POLICY, "-n", NAMESPACE, "--wait=true", timeout=300)
    done()
    print(
        f"[cluster-e2e] {len(orders.kinds)} orders, all accounted for; first routed order "
        f"{first_routed_s:.1f}s after kubectl apply; {DRIVER_KILLS} driver kills survived"
    )
