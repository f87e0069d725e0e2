"""The local demo: the whole spark-dlq loop on one machine, with the real parts.

It starts etcd + kube-apiserver, a Kafka broker, the spark-dlq operator and the local
spark-operator runner; applies the CRD and an example DeadLetterPolicy with an example
processor; produces orders (mostly good, some flaky, some poison, some fraud, some not JSON);
shows progress live; changes the policy (``maxRedeliverCount``) to show the restart from the
checkpoint; then prints a summary, a few dead letters with their headers, and the check that
every produced order is accounted for. Ctrl-C or the end stops everything it started.

With ``--broker pulsar`` the same story runs on a real standalone Pulsar (broker, bookie and
metadata store in one JVM, ``spark_dlq_devtools.pulsar``) with ``examples/orders-billing-pulsar.yaml``:
only producing, following and creating the team's topics differ (``KafkaSide``/``PulsarSide``);
the ``kubectl dlq`` act (stats, the redrive's dry run, ``--execute`` and the DeadLetterRedrive to
its end) is the same on both.

With ``--monitor`` a real Prometheus scrapes the operator and the engine as well (its URL is
printed); ``--dashboard PNG`` then draws the chart's Grafana dashboard from it at the end
(``spark_dlq_devtools.dashboard``), and ``--rate`` spreads the orders over time.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import yaml

from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.kube import ControlPlane, crd_established
from spark_dlq_devtools.local_spark_operator import LocalSparkOperator
from spark_dlq_devtools.paths import REPO_ROOT, spark_application_crd, work_dir
from spark_dlq_devtools.processes import Service, free_port
from spark_dlq_devtools.prometheus import Prometheus
from spark_dlq_devtools.pulsar import PulsarBroker, full_topic

NAMESPACE = "demo"
#: librdkafka's own log lines (``%6|...|BGQUEUE|...``) stay out of the demo's output: warnings only.
QUIET_CLIENT = {"log_level": 4}
Broker = Literal["kafka", "pulsar"]
#: Which of the demo's topics a record was read from.
Seen = Literal["output", "retry", "dead"]
#: The example policy each broker's demo applies, and its name.
EXAMPLES: dict[Broker, tuple[str, str]] = {
    "kafka": ("orders-billing.yaml", "orders-billing"),
    "pulsar": ("orders-billing-pulsar.yaml", "orders-billing-pulsar"),
}
KINDS = (
    ("normal", 0.84),
    ("flaky", 0.08),
    ("poison", 0.03),
    ("fraud", 0.02),
    ("ignore", 0.02),
    ("garbage", 0.01),
)

BOLD, DIM, GREEN, YELLOW, RED, CYAN, RESET = (
    ("\033[1m", "\033[2m", "\033[32m", "\033[33m", "\033[31m", "\033[36m", "\033[0m")
    if sys.stdout.isatty()
    else ("",) * 7
)


def say(text: str) -> None:
    print(f"{BOLD}{CYAN}==>{RESET} {BOLD}{text}{RESET}", flush=True)


def note(text: str) -> None:
    print(f"    {DIM}{text}{RESET}", flush=True)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead letter as read from either broker: its key, value and headers (Pulsar: properties)."""

    key: str
    value: bytes
    headers: dict[str, str]


@dataclass
class Tally:
    """What the demo has seen on the output and dead-letter topics, by order id."""

    produced: dict[int, str] = field(default_factory=dict)
    output: collections.Counter[int] = field(default_factory=collections.Counter)
    dead: collections.Counter[int] = field(default_factory=collections.Counter)
    dead_records: list[DeadLetter] = field(default_factory=list)
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accounted(self) -> tuple[int, list[int]]:
        """How many produced orders ended where they should; which are missing."""
        missing = []
        for order_id, kind in self.produced.items():
            if kind == "ignore":
                continue  # acknowledged without output: the processor returned None
            if not (self.output[order_id] or self.dead[order_id]):
                missing.append(order_id)
        return len(self.produced) - len(missing), missing

    def seen(
        self,
        kind: Seen,
        value: bytes | None,
        key: str | None,
        headers: dict[str, str],
    ) -> None:
        """Count one record read from the output, retry or dead-letter topic."""
        with self.lock:
            if kind == "output":
                assert value is not None  # every output record carries its order
                self.output[int(json.loads(value)["id"])] += 1
            elif kind == "retry":
                self.retries += 1
            else:
                self.dead[int(key or "-1")] += 1
                self.dead_records.append(DeadLetter(key or "", value or b"", headers))


class BrokerSide(Protocol):
    """What the demo does on the broker itself; everything else is the same on both."""

    name: str

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def address(self) -> str: ...
    def create_team_topics(self) -> None: ...
    def point_policy(self, document: dict[str, Any]) -> None: ...
    def produce(self, orders: list[tuple[str, bytes]], rate: float) -> None: ...
    def follow(self, topics: dict[str, str], tally: Tally, stop: threading.Event) -> None: ...


class KafkaSide:
    name = "Kafka"

    def __init__(self) -> None:
        self.kafka = KafkaBroker(name="demo-kafka", log_level="WARN")

    def start(self) -> None:
        self.kafka.start()

    def stop(self) -> None:
        self.kafka.stop()

    def address(self) -> str:
        return self.kafka.bootstrap_servers

    def create_team_topics(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap_servers, **QUIET_CLIENT})
        for future in admin.create_topics(
            [NewTopic("orders", 3, 1), NewTopic("orders-billed", 3, 1)]
        ).values():
            future.result(30)

    def point_policy(self, document: dict[str, Any]) -> None:
        document["spec"]["broker"]["bootstrapServers"] = self.kafka.bootstrap_servers

    def produce(self, orders: list[tuple[str, bytes]], rate: float) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {"bootstrap.servers": self.kafka.bootstrap_servers, "linger.ms": 20, **QUIET_CLIENT}
        )
        for key, value in orders:
            producer.produce("orders", key=key.encode(), value=value)
            if rate > 0:
                producer.poll(0)
                time.sleep(1 / rate)
        producer.flush(30)

    def follow(self, topics: dict[str, str], tally: Tally, stop: threading.Event) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.kafka.bootstrap_servers,
                "group.id": "demo-watcher",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **QUIET_CLIENT,
            }
        )
        kinds: dict[str, Seen] = {topics["output"]: "output", topics["retry"]: "retry", topics["dlq"]: "dead"}
        consumer.subscribe(list(kinds))
        try:
            while not stop.is_set():
                message = consumer.poll(0.3)
                if message is None or message.error() is not None:
                    continue
                key, value = message.key(), message.value()
                tally.seen(
                    kinds[message.topic() or ""],
                    value.encode() if isinstance(value, str) else value,
                    None if key is None else _text(key),
                    {k: _text(v) for k, v in dict(message.headers() or {}).items()},
                )
        finally:
            consumer.close()


def _text(raw: str | bytes | None) -> str:
    return raw if isinstance(raw, str) else (raw or b"").decode(errors="replace")


class PulsarSide:
    name = "Pulsar"

    def __init__(self) -> None:
        self.pulsar = PulsarBroker(name="demo-pulsar", log_level="WARN")

    def start(self) -> None:
        self.pulsar.start()

    def stop(self) -> None:
        self.pulsar.stop()

    def address(self) -> str:
        return f"{self.pulsar.service_url} (admin {self.pulsar.admin_url})"

    def create_team_topics(self) -> None:
        # The broker creates no topic on the fly: the team's come first, as on Kafka.
        self.pulsar.create_topics(["orders", "orders-billed"], partitions=3)

    def point_policy(self, document: dict[str, Any]) -> None:
        document["spec"]["broker"]["serviceUrl"] = self.pulsar.service_url
        document["spec"]["broker"]["adminUrl"] = self.pulsar.admin_url

    def produce(self, orders: list[tuple[str, bytes]], rate: float) -> None:
        def paced() -> Iterator[tuple[str, bytes]]:
            for order in orders:
                yield order
                if rate > 0:
                    time.sleep(1 / rate)

        self.pulsar.produce("orders", paced(), batching=rate <= 0)

    def follow(self, topics: dict[str, str], tally: Tally, stop: threading.Event) -> None:
        import pulsar

        from spark_dlq_devtools.pulsar import from_client, quiet_logger

        client = pulsar.Client(self.pulsar.service_url, logger=quiet_logger())
        kinds: dict[str, Seen] = {
            full_topic(topics["output"]): "output",
            full_topic(topics["retry"]): "retry",
            full_topic(topics["dlq"]): "dead",
        }
        # Exclusive: the retry topic's delayed messages are counted when written, not when due.
        consumer = client.subscribe(
            list(kinds),
            "demo-watcher",
            consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        try:
            while not stop.is_set():
                try:
                    message = consumer.receive(300)
                except pulsar.Timeout:
                    continue
                read = from_client(message)
                tally.seen(
                    kinds[re.sub(r"-partition-\d+$", "", read.topic)],
                    read.value,
                    read.key,
                    dict(read.properties),
                )
                consumer.acknowledge(message)
        finally:
            client.close()


class Demo:
    def __init__(
        self,
        *,
        orders: int,
        seed: int,
        monitor: bool = False,
        dashboard: Path | None = None,
        rate: float = 0,
        broker: Broker = "kafka",
    ) -> None:
        self.orders = orders
        self.broker_type: Broker = broker
        self.example, self.policy = EXAMPLES[broker]
        self.monitor = monitor or dashboard is not None
        self.dashboard = dashboard
        self.rate = rate
        self.prometheus: Prometheus | None = None
        self.monitoring_since = 0.0
        self.random = random.Random(seed)
        self.root = work_dir("demo")
        self.kube = ControlPlane(name="demo-kube", collector=False)
        self.broker: BrokerSide = KafkaSide() if broker == "kafka" else PulsarSide()
        self.operator: Service | None = None
        self.runner: LocalSparkOperator | None = None
        self.tally = Tally()
        self._stop = threading.Event()
        self.topics: dict[str, str] = {}
        self.redriven = 0

    # -- setup ----------------------------------------------------------------------------

    def start_services(self) -> None:
        # The broker starts empty: a previous run's checkpoints would name offsets it never had.
        for stale in ("checkpoints", "spark-apps", "prometheus"):
            shutil.rmtree(self.root / stale, ignore_errors=True)
        say(f"Starting a Kubernetes control plane (etcd + kube-apiserver) and a {self.broker.name} broker")
        started = time.monotonic()
        self.kube.start()
        self.broker.start()
        note(
            f"kube-apiserver {self.kube.server}, {self.broker.name} {self.broker.address()} "
            f"({time.monotonic() - started:.0f}s)"
        )
        from kubernetes import client, config

        self.api = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kube.admin_kubeconfig)
        )
        self.core = client.CoreV1Api(self.api)
        self.objects = client.CustomObjectsApi(self.api)
        self._install_crds()
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))

        say("Starting the spark-dlq operator and the local spark-operator runner")
        env = {**os.environ, "KUBECONFIG": str(self.kube.admin_kubeconfig)}
        operator_port, driver_port = (free_port(), free_port()) if self.monitor else (0, 0)
        self.operator = Service(
            "dlq-operator",
            [
                sys.executable,
                "-m",
                "spark_dlq_operator.cli",
                "run",
                "--namespace",
                NAMESPACE,
                "--provisioner",
                "admin",
                "--checkpoint-base",
                str(self.root / "checkpoints"),
                "--resync-interval",
                "15",
                "--metrics-port",
                str(operator_port),
            ],
            log=self.root / "operator.log",
            env=env,
        )
        self.operator.start()
        self.runner = LocalSparkOperator(
            kubeconfig=str(self.kube.admin_kubeconfig),
            workdir=self.root / "spark-apps",
            namespaces=[NAMESPACE],
            path_map={"/opt/spark-dlq": str(REPO_ROOT / "spark_image")},
            python_path=[str(REPO_ROOT / "examples" / "processors")],
            master="local[2]",
            driver_env={"SPARK_DLQ_METRICS_PORT": str(driver_port)} if self.monitor else None,
        )
        self.runner.start()
        if self.monitor:
            self.prometheus = Prometheus(
                workdir=self.root / "prometheus",
                targets={
                    "spark-dlq-engine": [f"127.0.0.1:{driver_port}"],
                    "spark-dlq-operator": [f"127.0.0.1:{operator_port}"],
                },
                scrape_interval="2s",
            )
            self.prometheus.start()
            self.monitoring_since = time.time()
            note(f"Prometheus at {self.prometheus.url} scrapes the operator and the engine")
        note(f"logs: {self.root}")

    def _install_crds(self) -> None:
        from kubernetes import client

        ext = client.ApiextensionsV1Api(self.api)
        crds = [*sorted((REPO_ROOT / "crds").glob("*.yaml")), spark_application_crd()]
        for path in crds:
            ext.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        for path in crds:
            name = yaml.safe_load(path.read_text())["metadata"]["name"]
            self._until(
                lambda n=name: crd_established(ext, n),  # type: ignore[misc]
                30,
                f"CRD {name} established",
            )

    def create_team_topics(self) -> None:
        say("The team's topics: orders (3 partitions) and orders-billed")
        self.broker.create_team_topics()

    def apply_policy(self) -> dict[str, Any]:
        document: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / self.example).read_text())
        document["metadata"]["namespace"] = NAMESPACE
        self.broker.point_policy(document)
        say(f"kubectl apply -f examples/{self.example}  (DeadLetterPolicy {NAMESPACE}/{self.policy})")
        note(
            f"maxRedeliverCount={document['spec']['retry']['maxRedeliverCount']}, exponential backoff "
            f"1s x2 (jitter 10%), dead letters to a topic, processor {document['spec']['processor']['entrypoint']}"
        )
        self.objects.create_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", NAMESPACE, "deadletterpolicies", document
        )
        return document

    # -- watching ---------------------------------------------------------------------------

    def policy_status(self) -> dict[str, Any]:
        # The client returns a custom object as its JSON document (typed ``object``).
        policy = cast(
            "dict[str, Any]",
            self.objects.get_namespaced_custom_object(
                "sparkdlq.io", "v1alpha1", NAMESPACE, "deadletterpolicies", self.policy
            ),
        )
        return dict(policy.get("status") or {})

    def wait_running(self, *, restart_count: int = 0, timeout: float = 240) -> dict[str, Any]:
        started = time.monotonic()
        last = ""
        while time.monotonic() - started < timeout:
            status = self.policy_status()
            phase = status.get("phase", "")
            if phase != last:
                note(f"policy phase: {phase or '(none yet)'}")
                last = phase
            if phase == "Running" and int(status.get("restartCount", 0) or 0) >= restart_count:
                return status
            if phase in ("Failed", "Invalid"):
                raise RuntimeError(f"policy {phase}: {json.dumps(status.get('conditions'))}")
            time.sleep(0.5)
        raise RuntimeError(
            f"policy not Running after {timeout:.0f}s; operator log: {self.root / 'operator.log'}"
        )

    def consume(self) -> None:
        """Follow the output, retry and dead-letter topics in the background."""
        self.broker.follow(self.topics, self.tally, self._stop)

    def produce(self, first: int, count: int) -> None:
        kinds, weights = zip(*KINDS, strict=True)
        orders: list[tuple[str, bytes]] = []
        for order_id in range(first, first + count):
            kind = self.random.choices(kinds, weights)[0]
            self.tally.produced[order_id] = kind
            if kind == "garbage":
                value = b"{not json"
            else:
                value = json.dumps(
                    {"id": order_id, "amount": self.random.randint(5, 500), "kind": kind}
                ).encode()
            orders.append((str(order_id), value))
        self.broker.produce(orders, self.rate)

    def progress(self, until: Callable[[], bool], timeout: float, label: str) -> None:
        started = time.monotonic()
        tty = sys.stdout.isatty()
        last = ""
        while time.monotonic() - started < timeout:
            with self.tally.lock:
                out, dead, retries = (
                    sum(self.tally.output.values()),
                    sum(self.tally.dead.values()),
                    self.tally.retries,
                )
                done, _ = self.tally.accounted()
            line = (
                f"    {label} {time.monotonic() - started:4.0f}s: {GREEN}output {out:5d}{RESET}  "
                f"{YELLOW}retried {retries:5d}{RESET}  {RED}dead letters {dead:4d}{RESET}  "
                f"accounted {done}/{len(self.tally.produced)}"
            )
            counts = line.split(":", 1)[1]
            if tty:
                print(f"\r{line}   ", end="", flush=True)
            elif counts != last:
                print(line, flush=True)
            last = counts
            if until():
                if tty:
                    print()
                return
            time.sleep(0.5)
        if tty:
            print()
        raise RuntimeError(f"{label}: not done after {timeout:.0f}s")

    def all_accounted(self) -> bool:
        with self.tally.lock:
            return not self.tally.accounted()[1]

    # -- the story --------------------------------------------------------------------------

    def run(self) -> int:
        started = time.monotonic()
        self.start_services()
        self.create_team_topics()
        self.apply_policy()
        status = self.wait_running()
        self.topics = {
            "output": "orders-billed",
            "retry": status["retryTopic"],
            "dlq": status["deadLetterTopic"],
        }
        say(
            f"The operator created {status['retryTopic']} and {status['deadLetterTopic']}, "
            f"ConfigMap {self.policy}-policy and SparkApplication {status['sparkApplication']}"
        )
        note(f"config hash {status['configHash']}; the Spark job is running")
        threading.Thread(target=self.consume, daemon=True).start()

        say(
            f"Producing {self.orders} orders: ~84% normal, 8% flaky, 3% poison, 2% fraud, 2% ignored, 1% not JSON"
        )
        self.produce(0, self.orders)
        self.progress(self.all_accounted, 240, "routing")

        say("Changing the policy: maxRedeliverCount 3 -> 1 (kubectl patch)")
        self.objects.patch_namespaced_custom_object(
            "sparkdlq.io",
            "v1alpha1",
            NAMESPACE,
            "deadletterpolicies",
            self.policy,
            {"spec": {"retry": {"maxRedeliverCount": 1}}},
        )
        status = self.wait_running(restart_count=1)
        note(
            f"new config hash {status['configHash']}, restartCount {status['restartCount']}: "
            "the job restarted from its checkpoint"
        )
        second = max(50, self.orders // 2)
        say(f"Producing {second} more orders to the restarted job")
        before_output = sum(self.tally.output.values())
        self.produce(self.orders, second)
        self.progress(self.all_accounted, 240, "routing")

        self.redrive_act()
        self.summary(before_output, time.monotonic() - started)
        if self.dashboard is not None:
            self.draw_dashboard(self.dashboard)
        _, missing = self.tally.accounted()
        return 0 if not missing else 1

    def dlq(self, *args: str) -> str:
        """``kubectl dlq ARGS`` as a team runs it (the plugin, with the test bed's kubectl)."""
        from spark_dlq_devtools.paths import kubernetes_bin

        env = {
            **os.environ,
            "PATH": os.pathsep.join([str(kubernetes_bin("kubectl").parent), os.environ["PATH"]]),
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "spark_dlq_operator.kubectl_dlq",
                *args,
                "--policy",
                self.policy,
                "-n",
                NAMESPACE,
                "--kubeconfig",
                str(self.kube.admin_kubeconfig),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kubectl dlq {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def redrive_act(self) -> None:
        """The dead letters a team can act on: see why, fix, look before sending, send back."""
        say("Why did they fail?  kubectl dlq stats")
        for line in self.dlq("stats").rstrip().splitlines():
            print(f"    {line}")
        say(
            "A new processor version for the poison orders: processor.entrypoint shop_orders:process_v2 (kubectl patch)"
        )
        self.objects.patch_namespaced_custom_object(
            "sparkdlq.io",
            "v1alpha1",
            NAMESPACE,
            "deadletterpolicies",
            self.policy,
            {"spec": {"processor": {"entrypoint": "shop_orders:process_v2"}}},
        )
        self.wait_running(restart_count=2)
        say("What would a redrive send back?  kubectl dlq redrive --error-class ValueError  (writes nothing)")
        for line in self.dlq("redrive", "--error-class", "ValueError").rstrip().splitlines():
            print(f"    {line}")
        with self.tally.lock:
            poison = [i for i, kind in self.tally.produced.items() if kind == "poison"]
        say(
            "The redrive:  kubectl dlq redrive --error-class ValueError --rate 100 --name fix-poison --execute"
        )
        for line in (
            self.dlq(
                "redrive", "--error-class", "ValueError", "--rate", "100", "--name", "fix-poison", "--execute"
            )
            .rstrip()
            .splitlines()
        ):
            print(f"    {line}")
        phase = ""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and phase not in ("Succeeded", "Failed", "Cancelled"):
            found = cast(
                "dict[str, Any]",
                self.objects.get_namespaced_custom_object(
                    "sparkdlq.io", "v1alpha1", NAMESPACE, "deadletterredrives", "fix-poison"
                ),
            )
            status = found.get("status") or {}
            if status.get("phase", "") != phase:
                phase = status.get("phase", "")
                note(f"redrive phase: {phase or '(none yet)'}")
            time.sleep(0.5)
        if phase != "Succeeded":
            raise RuntimeError(
                f"the redrive ended {phase or 'nowhere'}; operator log: {self.root / 'operator.log'}"
            )

        def billed() -> bool:
            with self.tally.lock:
                return all(self.tally.output[i] for i in poison)

        self.progress(billed, 180, "redriven orders billed")
        self.redriven = len(poison)
        note(f"all {len(poison)} poison orders came out on orders-billed, billed to the walk-in account")

    def draw_dashboard(self, out: Path) -> None:
        from spark_dlq_devtools import dashboard

        assert self.prometheus is not None
        time.sleep(35)  # the probe of the dead-letter topic (30 s) and one more scrape
        document = dashboard.load(
            REPO_ROOT / "charts" / "spark-dlq-operator" / "files" / "dashboards" / "spark-dlq-policy.json"
        )
        dashboard.render(
            self.prometheus,
            document,
            out,
            variables={"policy": f"{NAMESPACE}/{self.policy}", "__rate_interval": "30s", "datasource": ""},
            start=self.monitoring_since,
            end=time.time(),
            note="The demo's run ($__rate_interval = 30s).",
        )
        say(f"The dashboard, drawn from Prometheus: {out}")

    def summary(self, output_before_restart: int, seconds: float) -> None:
        with self.tally.lock:
            tally = self.tally
            by_kind = collections.Counter(tally.produced.values())
            reasons = collections.Counter(r.headers.get("dlq.reason", "?") for r in tally.dead_records)
            duplicates = sum(n - 1 for n in tally.output.values() if n > 1) + sum(
                n - 1 for n in tally.dead.values() if n > 1
            )
            done, missing = tally.accounted()
        say("Summary")
        print(
            f"    produced     {len(tally.produced):5d}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(by_kind.items()))
        )
        print(f"    {GREEN}output{RESET}       {sum(tally.output.values()):5d}  (orders-billed)")
        print(f"    acknowledged {by_kind['ignore']:5d}  (processor returned None)")
        print(f"    {YELLOW}retried{RESET}      {tally.retries:5d}  (messages written to the retry topic)")
        print(
            f"    {RED}dead letters{RESET} {sum(tally.dead.values()):5d}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
        )
        print(f"    duplicates   {duplicates:5d}  (at-least-once; counted, not lost)")
        if self.redriven:
            print(
                f"    {GREEN}redriven{RESET}     {self.redriven:5d}  (dead letters sent back after the fix, now in orders-billed)"
            )
        say("A few dead letters, with their headers")
        shown: set[str] = set()
        for record in tally.dead_records:
            headers = record.headers
            reason = headers.get("dlq.reason", "")
            if reason in shown:
                continue
            shown.add(reason)
            print(f"    {BOLD}key={record.key} value={record.value[:60]!r}{RESET}")
            for name in (
                "dlq.reason",
                "dlq.attempt",
                "dlq.error.class",
                "dlq.error.message",
                "dlq.original.topic",
                "dlq.original.partition",
                "dlq.original.offset",
                "dlq.policy",
                "dlq.subscription",
                "dlq.first.failure.at",
                "dlq.failed.at",
                "REAL_TOPIC",
                "ORIGIN_MESSAGE_ID",
                "RECONSUMETIMES",
                "team",
            ):
                if name in headers:
                    print(f"      {name:24s} {headers[name][:90]}")
            if "dlq.error.stacktrace" in headers:
                last = headers["dlq.error.stacktrace"].strip().splitlines()[-1]
                print(f"      {'dlq.error.stacktrace':24s} ... {last[:80]}")
        verdict = (
            f"{GREEN}every produced order is accounted for ({done}/{len(tally.produced)}){RESET}"
            if not missing
            else f"{RED}MISSING {len(missing)} orders: {missing[:20]}{RESET}"
        )
        say(f"Check: {verdict}")
        note(f"demo took {seconds:.0f}s")

    def stop(self) -> None:
        self._stop.set()
        if self.prometheus is not None:
            self.prometheus.stop()
        if self.runner is not None:
            self.runner.stop()
        if self.operator is not None:
            self.operator.stop()
        self.broker.stop()
        self.kube.stop()

    def _until(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except Exception:  # noqa: BLE001 - not there yet
                pass
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}")


def main(
    orders: int = 400,
    seed: int = 7,
    *,
    monitor: bool = False,
    dashboard: Path | None = None,
    rate: float = 0,
    broker: Broker = "kafka",
) -> int:
    demo = Demo(orders=orders, seed=seed, monitor=monitor, dashboard=dashboard, rate=rate, broker=broker)
    try:
        return demo.run()
    except KeyboardInterrupt:
        print()
        say("Interrupted: stopping everything the demo started")
        return 130
    finally:
        demo.stop()


if __name__ == "__main__":
    sys.exit(main())
