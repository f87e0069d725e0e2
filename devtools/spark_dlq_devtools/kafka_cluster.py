"""A replicated Apache Kafka cluster on 127.0.0.1: three KRaft nodes, replication 3.

Production clusters run several brokers with ``min.insync.replicas=2``; leader elections, ISR
shrinks and controller fail-overs are where messages get lost or jobs wedge, and a single
broker cannot show any of them. Each node here is a combined broker and controller (three
voters, so the quorum survives one node down), started from the same jars as the test bed's
single broker (``spark_dlq_devtools.kafka``). Topics default to replication 3 and
``min.insync.replicas=2``, unclean leader election is off: an acknowledged write survives the
loss of any one node.

Faults act on one node at a time: ``kill`` (SIGKILL) and ``start``, ``leader_of`` a partition,
``active_controller``, and ``rolling_restart`` (each node stopped and started in turn, waiting
for every partition to be fully replicated again before the next).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.paths import kafka_libs, kafka_tools, work_dir
from spark_dlq_devtools.processes import QUICK_JIT, Service, free_port

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

REPLICATION = 3
MIN_INSYNC = 2


class ClusterNode(KafkaBroker):
    """One node of a :class:`KafkaCluster`: broker and controller, node id ``node_id``. Its JVM
    compiles with C1 only (``QUICK_JIT``): a fault run starts it again under a busy engine."""

    def __init__(self, cluster: KafkaCluster, node_id: int, *, heap: str, log_level: str) -> None:
        super().__init__(
            name=f"{cluster.name}-{node_id}", heap=heap, log_level=log_level, java_options=QUICK_JIT
        )
        self.cluster = cluster
        self.node_id = node_id

    def _write_config(self) -> None:
        super()._write_config()
        props = dict(line.split("=", 1) for line in self.config.read_text().splitlines() if "=" in line)
        props.update(
            {
                "node.id": str(self.node_id),
                "controller.quorum.voters": self.cluster.voters,
                "default.replication.factor": str(REPLICATION),
                "min.insync.replicas": str(MIN_INSYNC),
                "unclean.leader.election.enable": "false",
                "offsets.topic.replication.factor": str(REPLICATION),
                "transaction.state.log.replication.factor": str(REPLICATION),
                "transaction.state.log.min.isr": str(MIN_INSYNC),
                "share.coordinator.state.topic.replication.factor": str(REPLICATION),
                "share.coordinator.state.topic.min.isr": str(MIN_INSYNC),
                # A killed node's partitions move at once; its return is noticed quickly.
                "broker.session.timeout.ms": "4000",
                "broker.heartbeat.interval.ms": "500",
                "replica.lag.time.max.ms": "10000",
            }
        )
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self) -> None:
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool", "format", "-t", self.cluster.cluster_id, "-c", str(self.config)
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def _serves_metadata(self) -> bool:
        from confluent_kafka.admin import AdminClient

        # This node answers (a plain connect first: an admin client against a closed port logs
        # every retry), and sees itself in the cluster's metadata (it has joined).
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            pass
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 2000})
        metadata = admin.list_topics(timeout=2)
        return self.node_id in metadata.brokers


class KafkaCluster:
    """Three KRaft nodes (broker + controller each) on 127.0.0.1."""

    def __init__(
        self, *, name: str = "kafka-cluster", nodes: int = 3, heap: str = "384m", log_level: str = "WARN"
    ) -> None:
        self.name = name
        self.root = work_dir(name)
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's own Uuid does: "-" would read as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.cluster_id = cluster_id
        self.nodes = [ClusterNode(self, i + 1, heap=heap, log_level=log_level) for i in range(nodes)]
        for node in self.nodes:
            node.controller_port = free_port()

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes)

    def node(self, node_id: int) -> ClusterNode:
        return self.nodes[node_id - 1]

    # --- life cycle ----------------------------------------------------------------------------

    def start(self, *, timeout: float = 120.0) -> None:
        """Format every node and start them together (a KRaft quorum needs a majority up)."""
        for node in self.nodes:
            shutil.rmtree(node.data, ignore_errors=True)
            node._write_config()
        # Each format is a JVM's start-up: the three side by side.
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            for formatted in [pool.submit(node._format) for node in self.nodes]:
                formatted.result()
        for node in self.nodes:
            self._launch(node)
        for node in self.nodes:
            assert node.service is not None
            node.service.wait_until(node._serves_metadata, timeout=timeout, what="metadata from the node")
        self.wait_fully_replicated(timeout=timeout)

    def _launch(self, node: ClusterNode) -> None:
        node.service = Service(
            node.root.name,
            node._java("kafka.Kafka", str(node.config)),
            log=node.root / "stdout.log",
            env={**os.environ, "KAFKA_HEAP_OPTS": ""},
        )
        node.service.start()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def remove(self) -> None:
        """Kill every node and delete its data: nothing is kept, so no node waits out a controlled
        shutdown that the others, already gone, can no longer acknowledge."""
        for node in self.nodes:
            node.kill()
        for node in self.nodes:
            shutil.rmtree(node.root, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (its broker and its controller)."""
        self.node(node_id).kill()

    def start_node(self, node_id: int, *, timeout: float = 120.0) -> None:
        """Start a stopped or killed node again on its data."""
        node = self.node(node_id)
        self._launch(node)
        assert node.service is not None
        node.service.wait_until(node._serves_metadata, timeout=timeout, what="metadata from the node")

    def rolling_restart(self, *, timeout: float = 180.0) -> None:
        """Stop (SIGTERM) and start each node in turn, the way an operator rolls a cluster: the
        next node goes only once every partition has all its replicas in sync again."""
        for node in self.nodes:
            node.stop()
            self.start_node(node.node_id, timeout=timeout)
            self.wait_fully_replicated(timeout=timeout)

    # --- what the cluster says ---------------------------------------------------------------

    def running(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.service is not None and n.service.alive()]

    def _admin(self) -> AdminClient:
        from confluent_kafka.admin import AdminClient

        # Only the running nodes, and librdkafka's connection errors kept off stderr.
        bootstrap = ",".join(n.bootstrap_servers for n in self.running())
        return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 0})

    def leader_of(self, topic: str, partition: int = 0, *, timeout: float = 60.0) -> int:
        """The running node leading ``topic``'s ``partition`` (waits while a dead node still
        leads it, until the controller has moved it)."""
        deadline = time.monotonic() + timeout
        while True:
            metadata = self._admin().list_topics(topic, timeout=10)
            # Right after a topic is created, or while a node is down, the metadata may not
            # list the partition yet: that is "no leader yet" too.
            described = metadata.topics.get(topic)
            found = described.partitions.get(partition) if described is not None else None
            leader = int(found.leader) if found is not None else -1
            if leader in {n.node_id for n in self.running()}:
                return leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}[{partition}] has no leader after {timeout:.0f}s")
            time.sleep(0.5)

    def under_replicated(self, topics: Iterable[str] | None = None) -> list[str]:
        """Partitions whose in-sync replicas are fewer than their replicas (``topic[p]``)."""
        metadata = self._admin().list_topics(timeout=10)
        wanted = set(topics) if topics is not None else None
        lagging = []
        for name, topic in metadata.topics.items():
            if wanted is not None and name not in wanted:
                continue
            for p, partition in topic.partitions.items():
                if len(partition.isrs) < len(partition.replicas) or partition.leader < 0:
                    lagging.append(f"{name}[{p}]")
        return sorted(lagging)

    def wait_fully_replicated(self, *, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        lagging: list[str] = []
        while time.monotonic() < deadline:
            try:
                lagging = self.under_replicated()
                if not lagging:
                    return
            except Exception:  # noqa: BLE001 - metadata not available yet, ask again
                pass
            time.sleep(0.25)
        raise TimeoutError(f"partitions still under-replicated after {timeout:.0f}s: {lagging[:10]}")

    def fenced(self, node_id: int) -> bool:
        """Whether the cluster has noticed that ``node_id`` is gone: the running nodes' metadata
        lists it neither as a broker (the controller fenced it once its session ran out) nor
        as any partition's leader (its partitions have moved)."""
        metadata = self._admin().list_topics(timeout=5)
        if node_id in metadata.brokers:
            return False
        return all(p.leader != node_id for t in metadata.topics.values() for p in t.partitions.values())

    def wait_fenced(self, node_id: int, *, timeout: float = 60.0) -> None:
        """Wait until the cluster has noticed that a killed node is gone (``fenced``): after a
        controller's loss, that takes the next controller's election first."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.fenced(node_id):
                    return
            except Exception:  # noqa: BLE001 - no metadata while the controller moves, ask again
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"node {node_id} still serves in the cluster's metadata after {timeout:.0f}s"
                )
            time.sleep(0.25)

    def active_controller(self) -> int:
        """The KRaft quorum's leader, as Kafka's own metadata-quorum tool reports it."""
        voters = ",".join(f"127.0.0.1:{n.controller_port}" for n in self.running())
        java = shutil.which("java") or "java"
        result = subprocess.run(
            [
                java,
                "-Xmx128m",
                *QUICK_JIT,
                "-cp",
                f"{kafka_libs()}/*:{kafka_tools()}/*",
                "org.apache.kafka.tools.MetadataQuorumCommand",
                "--bootstrap-controller",
                voters,
                "describe",
                "--status",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        match = re.search(r"^LeaderId:\s+(\d+)", result.stdout, re.MULTILINE)
        if match is None:
            raise RuntimeError(f"no LeaderId in the metadata quorum's status:\n{result.stdout}")
        return int(match.group(1))


def create_replicated_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    """Create topics with replication 3 and ``min.insync.replicas=2`` and wait for each."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(n, partitions, REPLICATION, config={"min.insync.replicas": str(MIN_INSYNC)}) for n in names
    ]
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)
