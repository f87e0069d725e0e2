"""A real Apache Kafka broker in KRaft mode on 127.0.0.1, for tests and the demo.

One process is both controller and broker. The jars come from Maven Central through
``scripts/setup/jars.sh``; this module writes the configuration, formats the storage, starts
``kafka.Kafka`` with a modest heap, and waits until the broker answers a metadata request.
``restart()`` keeps the data (for broker-restart tests); ``stop()`` removes nothing either, the
data folder goes with the next ``start`` of a fresh broker.

``KafkaBroker(pods=True)`` adds a second listener on the host's address (``network.host_address``)
for clients in the test bed's pods: each listener advertises its own address, so a client that
bootstraps from a pod is sent to an address it can route to, and host-side clients keep
127.0.0.1.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

from spark_dlq_devtools.network import host_address
from spark_dlq_devtools.paths import kafka_libs, work_dir
from spark_dlq_devtools.processes import Service, free_port

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.state.name = state.change.logger
logger.state.level = warn
"""


class KafkaBroker:
    """One KRaft broker+controller. ``bootstrap_servers`` is ``127.0.0.1:<port>``."""

    def __init__(
        self,
        *,
        name: str = "kafka",
        port: int | None = None,
        heap: str = "512m",
        log_level: str = "INFO",
        pods: bool = False,
        version: str | None = None,
        java_options: Sequence[str] = (),
    ) -> None:
        self.root = work_dir(name)
        #: More options for the broker's JVM (``processes.QUICK_JIT`` for one that lives for one test).
        self.java_options = list(java_options)
        #: The Kafka release to run (``kafka_libs``); None: the test bed's.
        self.version = version
        self.port = port or free_port()
        self.controller_port = free_port()
        self.pod_listener = (host_address(), free_port()) if pods else None
        self.heap = heap
        self.log_level = log_level
        self.data = self.root / "data"
        self.config = self.root / "server.properties"
        self.service: Service | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pod_bootstrap_servers(self) -> str:
        """``host:port`` of the listener for pods (``KafkaBroker(pods=True)`` only)."""
        if self.pod_listener is None:
            raise RuntimeError(f"broker {self.root.name} has no listener for pods: start it with pods=True")
        return "{}:{}".format(*self.pod_listener)

    def _java(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java") or "java"
        return [
            java,
            f"-Xmx{self.heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            *self.java_options,
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            "-cp",
            f"{kafka_libs(self.version)}/*",
            main,
            *args,
        ]

    def _write_config(self) -> None:
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}"]
        if self.pod_listener is not None:
            listeners.append(f"PODS://{self.pod_bootstrap_servers}")
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": ",".join([*listeners, f"CONTROLLER://127.0.0.1:{self.controller_port}"]),
            "advertised.listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PODS:PLAINTEXT",
            "log.dirs": str(self.data),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.retention.hours": "24",
            "log.segment.bytes": str(64 * 1024 * 1024),
            "message.max.bytes": str(2 * 1024 * 1024 + 1024),
            "replica.fetch.max.bytes": str(2 * 1024 * 1024 + 1024),
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.root / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.root / "server.log", level=self.log_level)
        )

    def _format(self) -> None:
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's own Uuid does: "-" would read as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config)),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self, *, fresh: bool = True, timeout: float = 90.0) -> None:
        """Start the broker; ``fresh`` wipes the data folder and formats new storage."""
        if fresh:
            shutil.rmtree(self.data, ignore_errors=True)
            self._write_config()
            self._format()
        self.service = Service(
            "kafka",
            self._java("kafka.Kafka", str(self.config)),
            log=self.root / "stdout.log",
            env={**os.environ, "KAFKA_HEAP_OPTS": ""},
        )
        self.service.start()
        self.service.wait_until(self._serves_metadata, timeout=timeout, what="metadata from the broker")

    def _serves_metadata(self) -> bool:
        from confluent_kafka.admin import AdminClient

        # A plain connect first: an admin client against a closed port logs every retry.
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            pass
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 2000})
        metadata = admin.list_topics(timeout=2)
        return bool(metadata.brokers)

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop(timeout=30)

    def kill(self) -> None:
        if self.service is not None:
            self.service.kill()

    def restart(self, *, timeout: float = 90.0) -> None:
        """Stop and start again on the same ports and data (a broker restart)."""
        self.stop()
        self.start(fresh=False, timeout=timeout)

    def log_path(self) -> Path:
        return self.root / "server.log"


def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    """Create topics (replication 1) and wait until the broker confirms each."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the futures resolve
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(timeout=60)
