"""A real Apache Pulsar standalone broker on 127.0.0.1, for tests and the benchmark.

``PulsarStandaloneStarter`` runs the broker, an embedded BookKeeper bookie and a RocksDB
metadata store in one JVM, without the functions worker and stream storage. The jars come from
Maven Central through ``scripts/setup/pulsar.sh``; this module writes the configuration, starts
the JVM with a modest heap and waits until the admin API lists the ``public/default`` namespace.
The embedded bookie binds every interface on port 3181 unless the configuration allows
ephemeral ports on the loopback interface and the starter is given a port of its own, as here,
so several brokers (and other sessions' services) run side by side. ``restart()`` keeps the data; ``start(fresh=True)`` wipes it.

``secured=True`` turns on what a company's Pulsar has: token authentication (HS256 tokens signed
with a key made here, ``token(role)``), mutual-TLS authentication, authorization, and TLS
listeners (``service_url_tls``, ``admin_url_tls``) with a certificate of a CA made here
(``ca``). Role ``SUPERUSER`` may do everything; a client without credentials gets that role too
(the broker's ``anonymousUserRole``), so every helper and test that predates authentication runs
unchanged, while a client that presents a token or certificate is held to it: a wrong token is
refused, a limited role gets what ``grant`` gave it. ``client_dir(role)`` writes the files of a
``broker.secretRef`` Secret for a role.

Admin helpers go through the broker's REST API (``admin_url``); produce and consume helpers
through ``pulsar-client``, the engine's own Pulsar client.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlq_engine.model.policy import pulsar_topic
from spark_dlq_devtools.certs import make_ca, make_client_cert, make_server_cert
from spark_dlq_devtools.paths import pulsar_libs, work_dir
from spark_dlq_devtools.processes import Service, free_port

TENANT_NAMESPACE = "public/default"
#: The secured broker's superuser (also the role of a client without credentials there).
SUPERUSER = "admin"

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.bk.name = org.apache.bookkeeper
logger.bk.level = warn
logger.rocks.name = org.apache.pulsar.metadata
logger.rocks.level = warn
"""

#: What the JVM needs opened (as Pulsar's own bin/pulsar passes them) on Java 17.
_ADD_OPENS = (
    "java.base/sun.net=ALL-UNNAMED",
    "java.base/java.lang=ALL-UNNAMED",
    "java.base/java.nio=ALL-UNNAMED",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "java.base/jdk.internal.platform=ALL-UNNAMED",
    "java.management/sun.management=ALL-UNNAMED",
    "jdk.management/com.sun.management.internal=ALL-UNNAMED",
)


def full_topic(name: str) -> str:
    """``persistent://public/default/<name>`` for a short name, as a policy's names are read."""
    return pulsar_topic(name).full_name


class PulsarBroker:
    """One standalone broker. ``service_url`` is ``pulsar://127.0.0.1:<port>``, ``admin_url``
    ``http://127.0.0.1:<port>``."""

    def __init__(
        self,
        *,
        name: str = "pulsar",
        heap: str = "768m",
        log_level: str = "INFO",
        port: int | None = None,
        web_port: int | None = None,
        secured: bool = False,
    ) -> None:
        self.root = work_dir(name)
        self.port = port or free_port()
        self.web_port = web_port or free_port()
        self.secured = secured
        self.tls_port = free_port() if secured else 0
        self.web_tls_port = free_port() if secured else 0
        self.certs = self.root / "certs"
        self.bookie_port = free_port()
        self.heap = heap
        self.log_level = log_level
        self.data = self.root / "data"
        self.config = self.root / "standalone.conf"
        self.service: Service | None = None

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def service_url_tls(self) -> str:
        return f"pulsar+ssl://127.0.0.1:{self.tls_port}"

    @property
    def admin_url_tls(self) -> str:
        return f"https://127.0.0.1:{self.web_tls_port}"

    @property
    def ca(self) -> Path:
        """The CA that signed the broker's certificate (and the clients')."""
        return self.certs / "ca.crt"

    # -- security (secured=True) -----------------------------------------------------------------

    def _signing_key(self) -> bytes:
        path = self.certs / "token.key"
        if not path.exists():
            self.certs.mkdir(parents=True, exist_ok=True)
            path.write_bytes(secrets.token_bytes(32))
        return path.read_bytes()

    def token(self, role: str, *, key: bytes | None = None) -> str:
        """A token for ``role`` signed with the broker's key (or ``key``: a wrong token)."""

        def part(value: bytes) -> str:
            return base64.urlsafe_b64encode(value).rstrip(b"=").decode()

        signed = part(b'{"alg":"HS256"}') + "." + part(json.dumps({"sub": role}).encode())
        mac = hmac.new(key or self._signing_key(), signed.encode(), hashlib.sha256).digest()
        return f"{signed}.{part(mac)}"

    def client_cert(self, role: str) -> tuple[Path, Path]:
        """A client certificate whose CN is ``role`` (mutual TLS), and its key."""
        return make_client_cert(self.certs, role)

    def client_dir(self, name: str, files: Mapping[str, str | bytes | Path]) -> Path:
        """A folder as a mounted ``broker.secretRef`` Secret: one file per key (a Path's content
        is copied)."""
        folder = self.root / "clients" / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for key, value in files.items():
            if isinstance(value, Path):
                value = value.read_bytes()
            (folder / key).write_bytes(value.encode() if isinstance(value, str) else value)
        return folder

    def grant(self, topic: str, role: str, actions: Iterable[str]) -> None:
        """Give ``role`` ``actions`` (``produce``, ``consume``) on the topic (all its partitions)."""
        self.admin("POST", f"/admin/v2/{_topic_path(topic)}/permissions/{role}", sorted(actions))

    def _security_config(self) -> dict[str, str]:
        if not self.secured:
            return {"authenticationEnabled": "false", "authorizationEnabled": "false"}
        make_ca(self.certs)
        cert, key = make_server_cert(self.certs, name="pulsar", common_name="pulsar")
        secret = base64.b64encode(self._signing_key()).decode()
        return {
            "authenticationEnabled": "true",
            "authorizationEnabled": "true",
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
            "org.apache.pulsar.broker.authentication.AuthenticationProviderTls",
            "tokenSecretKey": f"data:;base64,{secret}",
            "superUserRoles": SUPERUSER,
            "anonymousUserRole": SUPERUSER,
            "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
            "brokerClientAuthenticationParameters": f"token:{self.token(SUPERUSER)}",
            "brokerServicePortTls": str(self.tls_port),
            "webServicePortTls": str(self.web_tls_port),
            "tlsCertificateFilePath": str(cert),
            "tlsKeyFilePath": str(key),
            "tlsTrustCertsFilePath": str(self.ca),
            "tlsAllowInsecureConnection": "false",
            "tlsRequireTrustedClientCertOnConnect": "false",
            # The https listener's acceptors and selectors need threads of the web pool too.
            "numHttpServerThreads": "8",
        }

    def _config(self) -> dict[str, str]:
        return {
            "clusterName": "standalone",
            "bindAddress": "127.0.0.1",
            "advertisedAddress": "127.0.0.1",
            "brokerServicePort": str(self.port),
            "webServicePort": str(self.web_port),
            "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.NoopLoadManager",
            "loadBalancerEnabled": "false",
            "managedLedgerDefaultEnsembleSize": "1",
            "managedLedgerDefaultWriteQuorum": "1",
            "managedLedgerDefaultAckQuorum": "1",
            "managedLedgerCacheSizeMB": "32",
            "managedLedgerMaxEntriesPerLedger": "50000",
            "numIOThreads": "2",
            "numOrderedExecutorThreads": "2",
            "numHttpServerThreads": "4",
            "numExecutorThreadPoolSize": "2",
            "numCacheExecutorThreadPoolSize": "1",
            "bookkeeperNumberOfChannelsPerBookie": "4",
            # As the Kafka test bed (auto.create.topics.enable=false): a missing topic is an
            # error the engine must name, not a topic made on the fly.
            "allowAutoTopicCreation": "false",
            "allowAutoSubscriptionCreation": "true",
            "brokerDeleteInactiveTopicsEnabled": "false",
            "delayedDeliveryEnabled": "true",
            "delayedDeliveryTickTimeMillis": "100",
            "topicLevelPoliciesEnabled": "false",
            "systemTopicEnabled": "false",
            "transactionCoordinatorEnabled": "false",
            "functionsWorkerEnabled": "false",
            "webSocketServiceEnabled": "false",
            "exposeTopicLevelMetricsInPrometheus": "false",
            "maxMessageSize": str(8 * 1024 * 1024),
            "brokerShutdownTimeoutMs": "3000",
            "backlogQuotaDefaultLimitBytes": "-1",
            # Keep every message: a test reads topics that no subscription holds (the output).
            "defaultRetentionTimeInMinutes": "-1",
            "defaultRetentionSizeInMB": "-1",
            # The embedded bookie: on the loopback interface, on --bookkeeper-port (without these
            # two it binds 3181 on every interface), with small caches.
            "allowEphemeralPorts": "true",
            "listeningInterface": "lo",
            "useHostNameAsBookieID": "false",
            "advertisedAddress.bookie": "127.0.0.1",
            "journalSyncData": "false",
            "dbStorage_writeCacheMaxSizeMb": "16",
            "dbStorage_readAheadCacheMaxSizeMb": "16",
            "dbStorage_rocksDB_blockCacheSize": str(8 * 1024 * 1024),
            "journalMaxGroupWaitMSec": "1",
            "diskUsageThreshold": "0.99",
            "diskUsageWarnThreshold": "0.98",
            "isForceGCAllowWhenNoSpace": "true",
            "gcWaitTime": "300000",
            **self._security_config(),
        }

    def _write_config(self) -> None:
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in self._config().items()))
        (self.root / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.root / "pulsar.log", level=self.log_level)
        )

    def _java(self) -> list[str]:
        java = shutil.which("java") or "java"
        return [
            java,
            f"-Xmx{self.heap}",
            "-Xms128m",
            "-XX:MaxDirectMemorySize=256m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            "-Dio.netty.tryReflectionSetAccessible=true",
            "-Dpulsar.allocator.exit_on_oom=true",
            f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
            *(f"--add-opens={opened}" for opened in _ADD_OPENS),
            "-cp",
            f"{pulsar_libs()}/*",
            "org.apache.pulsar.PulsarStandaloneStarter",
            "--config",
            str(self.config),
            "--no-functions-worker",
            "--no-stream-storage",
            "--metadata-dir",
            str(self.data / "metadata"),
            "--bookkeeper-dir",
            str(self.data / "bookkeeper"),
            "--bookkeeper-port",
            str(self.bookie_port),
        ]

    def start(self, *, fresh: bool = True, timeout: float = 120.0) -> None:
        """Start the broker; ``fresh`` wipes the data folder."""
        if fresh:
            shutil.rmtree(self.data, ignore_errors=True)
            (self.root / "stdout.log").unlink(missing_ok=True)
            self._write_config()
        self.service = Service("pulsar", self._java(), log=self.root / "stdout.log", cwd=self.root)
        self.service.start()
        self.service.wait_until(self._ready, timeout=timeout, what="the public/default namespace")

    def _ready(self) -> bool:
        return TENANT_NAMESPACE in self.admin("GET", "/admin/v2/namespaces/public", timeout=2)

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop(timeout=30)

    def kill(self) -> None:
        if self.service is not None:
            self.service.kill()

    def restart(self, *, timeout: float = 120.0) -> None:
        """Stop and start again on the same ports and data (a broker restart)."""
        self.stop()
        self.start(fresh=False, timeout=timeout)

    def log_path(self) -> Path:
        return self.root / "pulsar.log"

    # -- admin REST ------------------------------------------------------------------------------

    def admin(self, method: str, path: str, body: Any = None, *, timeout: float = 30.0) -> Any:
        """One admin REST call; the JSON answer (None when empty). An error status raises
        ``AdminError`` with the broker's reason."""
        return admin_call(self.admin_url, method, path, body, timeout=timeout)

    def create_topic(self, name: str, partitions: int = 0) -> str:
        """A persistent topic in ``public/default``: partitioned when ``partitions`` > 0."""
        path = f"/admin/v2/{_topic_path(name)}"
        if partitions:
            self.admin("PUT", f"{path}/partitions", partitions)
        else:
            self.admin("PUT", path)
        return name

    def create_topics(self, names: Iterable[str], partitions: int = 0) -> None:
        for name in names:
            self.create_topic(name, partitions)

    def delete_topic(self, name: str, *, partitioned: bool = False) -> None:
        """Delete a topic with its producers, consumers and subscriptions (``force``)."""
        suffix = "/partitions" if partitioned else ""
        self.admin("DELETE", f"/admin/v2/{_topic_path(name)}{suffix}?force=true")

    def subscriptions(self, name: str) -> list[str]:
        return list(self.admin("GET", f"/admin/v2/{_topic_path(name)}/subscriptions"))

    def stats(self, name: str) -> dict[str, Any]:
        """The topic's stats (``subscriptions.<name>.msgBacklog`` and so on); a partitioned
        topic's are its partitions' summed."""
        metadata = self.admin("GET", f"/admin/v2/{_topic_path(name)}/partitions")
        suffix = "/partitioned-stats" if metadata.get("partitions", 0) else "/stats"
        return dict(self.admin("GET", f"/admin/v2/{_topic_path(name)}{suffix}"))

    def backlog(self, name: str, subscription: str) -> int:
        """Messages not yet acknowledged by ``subscription`` on topic ``name``."""
        return int(self.stats(name)["subscriptions"][subscription]["msgBacklog"])

    # -- produce and consume ---------------------------------------------------------------------

    def produce(
        self,
        topic: str,
        messages: Iterable[Message | tuple[str | None, bytes]],
        *,
        batching: bool = False,
    ) -> int:
        return produce(self.service_url, topic, messages, batching=batching)

    def read_all(self, topic: str, *, timeout: float = 5.0) -> list[Message]:
        return read_all(self.service_url, topic, timeout=timeout)

    def wait_for(self, topic: str, count: int, *, timeout: float = 120.0) -> list[Message]:
        """Every message of the topic once there are at least ``count`` (AssertionError with
        what is there after ``timeout`` seconds)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            found = self.read_all(topic)
            if len(found) >= count or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if len(found) < count:
            raise AssertionError(f"{topic}: {len(found)} messages after {timeout:.0f}s, expected {count}")
        return found


@dataclass(frozen=True, slots=True)
class Message:
    """A message as written or read: key (None when absent), value, properties; read messages
    carry their id (``ledger:entry:partition:batch``) and topic too."""

    key: str | None
    value: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    message_id: str = ""
    topic: str = ""
    deliver_after_ms: int = 0
    publish_ms: int = 0


class AdminError(RuntimeError):
    def __init__(self, status: int, method: str, path: str, reason: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {reason}")
        self.status = status


def admin_call(base: str, method: str, path: str, body: Any = None, *, timeout: float = 30.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base.rstrip("/") + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            text = answer.read().decode()
    except urllib.error.HTTPError as error:
        raise AdminError(error.code, method, path, error.read().decode(errors="replace")) from None
    return json.loads(text) if text.strip() else None


def _topic_path(name: str) -> str:
    return pulsar_topic(name).rest_path


def produce(
    service_url: str,
    topic: str,
    messages: Iterable[Message | tuple[str | None, bytes]],
    *,
    batching: bool = False,
) -> int:
    """Send messages and wait until the broker has stored every one; a failed send raises
    (``send_async`` reports a failure only to its callback). Returns how many were sent."""
    import threading

    import pulsar

    client = pulsar.Client(service_url, logger=quiet_logger())
    failures: list[str] = []
    receipts = threading.Semaphore(0)

    def sent(result: Any, _message_id: Any) -> None:
        if result != pulsar.Result.Ok:
            failures.append(str(result))
        receipts.release()

    count = 0
    try:
        producer = client.create_producer(
            full_topic(topic), batching_enabled=batching, block_if_queue_full=True
        )
        for item in messages:
            message = item if isinstance(item, Message) else Message(item[0], item[1])
            extra: dict[str, Any] = {}
            if message.key is not None:
                extra["partition_key"] = message.key
            if message.deliver_after_ms:
                from datetime import timedelta

                extra["deliver_after"] = timedelta(milliseconds=message.deliver_after_ms)
            producer.send_async(message.value, sent, properties=dict(message.properties), **extra)
            count += 1
        producer.flush()
        for _ in range(count):
            receipts.acquire()
        producer.close()
    finally:
        client.close()
    if failures:
        raise RuntimeError(f"{len(failures)} of {count} messages not stored on {topic}: first {failures[0]}")
    return count


def read_all(service_url: str, topic: str, *, timeout: float = 5.0) -> list[Message]:
    """Every message on the topic now, from the earliest: each partition is read by a
    non-durable reader up to the broker's last message (``has_message_available`` asks the
    broker for it), a fact as the Kafka reader's end offsets are (after the writer stopped,
    ``[]`` proves that it wrote nothing). A message the broker has that does not arrive within
    ``timeout`` seconds fails the read: a partial answer is never returned."""
    import pulsar

    client = pulsar.Client(service_url, logger=quiet_logger())
    found: list[Message] = []
    try:
        partitions = client.get_topic_partitions(full_topic(topic))
        for name in partitions:
            reader = client.create_reader(name, pulsar.MessageId.earliest)
            try:
                while reader.has_message_available():
                    try:
                        msg = reader.read_next(int(timeout * 1000))
                    except pulsar.Timeout:
                        raise AssertionError(
                            f"{name}: not read to its last message within {timeout}s ({len(found)} read)"
                        ) from None
                    found.append(from_client(msg))
            finally:
                reader.close()
    finally:
        client.close()
    return found


def from_client(msg: Any) -> Message:
    ident = msg.message_id()
    return Message(
        key=msg.partition_key() or None,
        value=msg.data(),
        properties=dict(msg.properties()),
        message_id=f"{ident.ledger_id()}:{ident.entry_id()}:{ident.partition()}:{ident.batch_index()}",
        topic=msg.topic_name(),
        publish_ms=msg.publish_timestamp(),
    )


def quiet_logger() -> Any:
    """The C++ client logs every connection at INFO on stderr: warnings only."""
    import logging

    import pulsar

    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
