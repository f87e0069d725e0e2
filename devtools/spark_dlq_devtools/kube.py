"""A real Kubernetes control plane on 127.0.0.1, envtest style: etcd and kube-apiserver.

A kube-controller-manager runs only its garbage collector and namespace controller, so owned
objects are really collected and namespaces really deleted. There is no kubelet or
scheduler: objects are stored, validated (schemas, CEL, admission), authorised (RBAC is on)
and watched, but no pod runs. That is what an operator's tests need. ``kubeconfig()``
writes a kubeconfig for any user, signed by the test CA, so tests can act as the admin or as
a restricted identity.
"""

from __future__ import annotations

import shutil
import ssl
import urllib.request
from pathlib import Path

import yaml

from spark_dlq_devtools.certs import make_ca, make_client_cert, make_server_cert
from spark_dlq_devtools.paths import etcd_bin, kubernetes_bin, work_dir
from spark_dlq_devtools.processes import Service, free_port

ADMIN_USER = "testbed-admin"


class ControlPlane:
    """etcd + kube-apiserver. ``server`` is the https URL; ``admin_kubeconfig`` a file."""

    def __init__(self, *, name: str = "kube") -> None:
        self.root = work_dir(name)
        self.pki = self.root / "pki"
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.etcd: Service | None = None
        self.apiserver: Service | None = None
        self.controller_manager: Service | None = None

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def start(self, *, fresh: bool = True, timeout: float = 120.0) -> None:
        if fresh:
            shutil.rmtree(self.root / "etcd", ignore_errors=True)
        make_ca(self.pki)
        make_server_cert(self.pki)
        self._start_etcd(timeout)
        self._start_apiserver(timeout)
        self.kubeconfig(ADMIN_USER, ("system:masters",), path=self.admin_kubeconfig)
        self._start_controller_manager()

    def _start_etcd(self, timeout: float) -> None:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        self.etcd = Service(
            "etcd",
            [
                str(etcd_bin()),
                "--name",
                "testbed",
                "--data-dir",
                str(self.root / "etcd"),
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer,
                "--initial-advertise-peer-urls",
                peer,
                "--initial-cluster",
                f"testbed={peer}",
                "--initial-cluster-state",
                "new",
                "--quota-backend-bytes",
                str(2 * 1024**3),
                "--log-level",
                "warn",
            ],
            log=self.root / "etcd.log",
        )
        self.etcd.start()
        self.etcd.wait_until(
            lambda: _get(f"{client}/health", None) == 200, timeout=timeout, what="etcd health"
        )

    def _start_apiserver(self, timeout: float) -> None:
        p = self.pki
        self.apiserver = Service(
            "kube-apiserver",
            [
                str(kubernetes_bin("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={self.root / 'certs'}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.96.0.0/24",
                "--allow-privileged=true",
                # No controller manager runs: admission that waits for one would hang requests.
                "--disable-admission-plugins=ServiceAccount",
                "--enable-priority-and-fairness=false",
                "--watch-cache=true",
                "--v=1",
            ],
            log=self.root / "apiserver.log",
        )
        self.apiserver.start()
        self.apiserver.wait_until(self._ready, timeout=timeout, what="/readyz")

    def _start_controller_manager(self) -> None:
        # Its controllers would each need a service-account token (no token controller runs
        # here); as one identity it needs the rights of all of them: the masters group.
        config = self.kubeconfig("system:kube-controller-manager", ("system:masters",))
        self.controller_manager = Service(
            "kube-controller-manager",
            [
                str(kubernetes_bin("kube-controller-manager")),
                f"--kubeconfig={config}",
                "--controllers=garbagecollector,namespace",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "--concurrent-gc-syncs=5",
                "--v=1",
            ],
            log=self.root / "controller-manager.log",
        )
        self.controller_manager.start()

    def _ready(self) -> bool:
        return _get(f"{self.server}/readyz", self._ssl_context()) == 200

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        cert, key = make_client_cert(self.pki, ADMIN_USER, ("system:masters",))
        ctx.load_cert_chain(str(cert), str(key))
        return ctx

    def kubeconfig(self, user: str, groups: tuple[str, ...] = (), *, path: Path | None = None) -> Path:
        """Write a kubeconfig for ``user`` (a client certificate signed by the test CA)."""
        cert, key = make_client_cert(self.pki, user, groups)
        path = path or self.root / f"{user.replace(':', '-')}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "testbed",
            "clusters": [
                {
                    "name": "testbed",
                    "cluster": {"server": self.server, "certificate-authority": str(self.pki / "ca.crt")},
                }
            ],
            "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": user}}],
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        if self.apiserver is not None:
            self.apiserver.stop()
        self._start_apiserver(timeout)

    def stop(self) -> None:
        for service in (self.controller_manager, self.apiserver, self.etcd):
            if service is not None:
                service.stop()


def _get(url: str, context: ssl.SSLContext | None) -> int:
    with urllib.request.urlopen(url, timeout=2, context=context) as response:
        return int(response.status)
