"""A secured Apache Kafka broker: TLS, SASL/SCRAM-SHA-512 and ACLs, as production clusters run.

A broker that speaks PLAINTEXT ignores every client security setting, so the engine's and the
operator's security paths can only be proven against a broker that enforces them. This one (a
single KRaft node, the test bed's jars) has:

- ``SASL_SSL`` on ``port``: TLS with a certificate signed by the test bed's own CA, then
  SCRAM-SHA-512; the users are created when the storage is formatted (``admin`` is a super
  user) and later through the Admin API (:meth:`SecureKafkaBroker.add_user`);
- ``EXPIRED`` on ``expired_port``: the same, but with a server certificate whose validity
  ended in the past, for the expired-certificate fault;
- the controller listener on 127.0.0.1 in PLAINTEXT, whose principal (``User:ANONYMOUS``) is a
  super user: only the node's own controller traffic uses it;
- Kafka's ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: a user may do
  only what an ACL grants it (:meth:`SecureKafkaBroker.grant`).

Client settings for a user come in both dialects: :meth:`java_client` (the Spark engine's
Kafka clients, the files of a ``broker.secretRef`` Secret) and :meth:`librdkafka_client` (the
operator's and the tests' confluent-kafka clients).
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path
from typing import Any

from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.processes import free_port

ADMIN = "admin"
MECHANISM = "SCRAM-SHA-512"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_broker_certs(folder: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 valid for ten years, and one that expired in
    2020 (``openssl ca`` sets its validity window explicitly)."""
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "expired.pem").exists():
        return
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
        "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=spark-dlq-kafka-ca", cwd=folder,
    )  # fmt: skip
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    for name in ("server", "expired"):
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", "-subj", f"/CN=kafka-{name}", cwd=folder,
        )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "3650", "-out", "server.crt", "-extfile", "server.ext", cwd=folder,
    )  # fmt: skip
    (folder / "index.txt").write_text("")
    (folder / "serial").write_text("1000\n")
    (folder / "ca.cnf").write_text(
        "[ca]\ndefault_ca = testbed\n"
        "[testbed]\ndatabase = index.txt\nserial = serial\nnew_certs_dir = .\n"
        "certificate = ca.crt\nprivate_key = ca.key\ndefault_md = sha256\npolicy = any\n"
        "copy_extensions = none\n"
        "[any]\ncommonName = supplied\n"
    )
    _openssl(
        "ca", "-batch", "-config", "ca.cnf", "-in", "expired.csr", "-out", "expired.crt",
        "-startdate", "20200101000000Z", "-enddate", "20200201000000Z", "-extfile", "server.ext",
        "-notext", cwd=folder,
    )  # fmt: skip
    # Kafka's PEM key stores: the private key (PKCS#8) followed by the certificate chain.
    for name in ("server", "expired"):
        key = subprocess.run(
            ["openssl", "pkcs8", "-topk8", "-nocrypt", "-in", f"{name}.key"],
            cwd=folder, check=True, capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip
        (folder / f"{name}.pem").write_text(key + (folder / f"{name}.crt").read_text())


class SecureKafkaBroker(KafkaBroker):
    """One KRaft node with TLS, SCRAM-SHA-512 and ACLs (see the module's docstring)."""

    def __init__(self, *, name: str = "kafka-secure", heap: str = "384m", log_level: str = "WARN") -> None:
        super().__init__(name=name, heap=heap, log_level=log_level)
        self.expired_port = free_port()
        self.certs = self.root / "certs"
        self.passwords: dict[str, str] = {ADMIN: secrets.token_urlsafe(16)}

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def expired_bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.expired_port}"

    @property
    def ca_file(self) -> Path:
        return self.certs / "ca.crt"

    def _write_config(self) -> None:
        super()._write_config()
        make_broker_certs(self.certs)
        props = dict(line.split("=", 1) for line in self.config.read_text().splitlines() if "=" in line)
        jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN}" password="{self.passwords[ADMIN]}";'
        props.update(
            {
                "listeners": (
                    f"SASL_SSL://127.0.0.1:{self.port},EXPIRED://127.0.0.1:{self.expired_port},"
                    f"CONTROLLER://127.0.0.1:{self.controller_port}"
                ),
                "advertised.listeners": (
                    f"SASL_SSL://127.0.0.1:{self.port},EXPIRED://127.0.0.1:{self.expired_port}"
                ),
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,EXPIRED:SASL_SSL",
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.enabled.mechanisms": MECHANISM,
                "sasl.mechanism.inter.broker.protocol": MECHANISM,
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
                "listener.name.expired.scram-sha-512.sasl.jaas.config": jaas,
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.certs / "server.pem"),
                "listener.name.expired.ssl.keystore.type": "PEM",
                "listener.name.expired.ssl.keystore.location": str(self.certs / "expired.pem"),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca_file),
                "ssl.endpoint.identification.algorithm": "https",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "false",
                "super.users": f"User:{ADMIN};User:ANONYMOUS",
            }
        )
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self) -> None:
        # The admin user exists before the broker first starts (it authenticates the broker's
        # own inter-broker connections).
        cluster_id = self._new_cluster_id()
        scram = f"{MECHANISM}=[name={ADMIN},password={self.passwords[ADMIN]}]"
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(self.config),
                "--add-scram",
                scram,
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )

    @staticmethod
    def _new_cluster_id() -> str:
        import base64
        import uuid

        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        return cluster_id

    def _serves_metadata(self) -> bool:
        import socket

        from confluent_kafka.admin import AdminClient

        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            pass
        admin = AdminClient({**self.librdkafka_client(ADMIN), "socket.timeout.ms": 2000})
        return bool(admin.list_topics(timeout=5).brokers)

    # --- users, ACLs and client settings ------------------------------------------------------

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.librdkafka_client(ADMIN))

    def add_user(self, user: str, password: str | None = None) -> str:
        """Create (or reset) a SCRAM-SHA-512 user; returns its password."""
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        password = password or secrets.token_urlsafe(16)
        upsert = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
        )
        admin = self.admin()  # kept referenced until the futures resolve
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        self.passwords[user] = password
        return password

    def grant(self, user: str, resource: str, name: str, operation: str, *, prefixed: bool = False) -> None:
        """Allow ``user`` ``operation`` (READ, WRITE, CREATE, DESCRIBE, ...) on the ``resource``
        (TOPIC, GROUP, CLUSTER) ``name``, literally or as a prefix."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        binding = AclBinding(
            ResourceType[resource],
            name,
            ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
            f"User:{user}",
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        admin = self.admin()  # kept referenced until the futures resolve
        for future in admin.create_acls([binding]).values():
            future.result(timeout=30)

    def java_client(self, user: str, *, password: str | None = None) -> dict[str, str]:
        """The Java Kafka client's settings for ``user`` (the files of a ``broker.secretRef``)."""
        secret = password if password is not None else self.passwords[user]
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{user}" password="{secret}";'
            ),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
        }

    def librdkafka_client(self, user: str, *, password: str | None = None) -> dict[str, Any]:
        """confluent-kafka's settings for ``user``, with the bootstrap servers."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": MECHANISM,
            "sasl.username": user,
            "sasl.password": password if password is not None else self.passwords[user],
            "ssl.ca.location": str(self.ca_file),
            "log_level": 0,
        }


def write_secret_files(folder: Path, properties: dict[str, str]) -> Path:
    """A folder laid out like a mounted ``broker.secretRef`` Secret: one file per property."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, value in properties.items():
        (folder / key).write_text(value)
    return folder
