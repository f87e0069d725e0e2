"""A real Kubernetes control plane on 127.0.0.1, envtest style: etcd and kube-apiserver.

A kube-controller-manager runs only its garbage collector, namespace controller and ClusterRole
aggregation, so owned objects are really collected, namespaces really deleted, and the default
``view``/``edit``/``admin`` roles hold what is aggregated into them (a chart's user roles). There is no kubelet or
scheduler: objects are stored, validated (schemas, CEL, admission), authorised (RBAC is on)
and watched, but no pod runs. That is what an operator's tests need. ``kubeconfig()``
writes a kubeconfig for any user, signed by the test CA, so tests can act as the admin or as
a restricted identity.

``ControlPlane(workloads=True)`` is the control plane of a cluster whose pods run (a
``spark_dlq_devtools.node.Node`` joins it): the API server also listens on the host's address,
which the ``kubernetes`` Service points at and its certificate names, together with the
Service's ClusterIP and DNS names; nodes are authorised by the Node authoriser and
NodeRestriction; service accounts are admitted (pods get projected tokens); the
controller manager runs every default controller (deployments, replica sets, jobs, service
accounts, endpoint slices, root CA publisher, node lifecycle, ...) and kube-scheduler runs.
"""

from __future__ import annotations

import shutil
import ssl
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from spark_dlq_devtools.certs import make_ca, make_client_cert, make_server_cert
from spark_dlq_devtools.network import CLUSTER_DOMAIN, KUBERNETES_SERVICE_IP, SERVICE_CIDR, host_address
from spark_dlq_devtools.paths import etcd_bin, kubernetes_bin, work_dir
from spark_dlq_devtools.processes import Service, free_port

if TYPE_CHECKING:
    from kubernetes.client import ApiextensionsV1Api

ADMIN_USER = "testbed-admin"
#: libyaml's safe loader where PyYAML has it, for the large CRDs the test bed installs: the
#: spark-operator's SparkApplication CRD (800 kB) takes it a tenth of the pure-Python loader's
#: time, the same documents.
CRD_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ControlPlane:
    """etcd + kube-apiserver. ``server`` is the https URL; ``admin_kubeconfig`` a file."""

    def __init__(self, *, name: str = "kube", workloads: bool = False, collector: bool = True) -> None:
        self.root = work_dir(name)
        self.pki = self.root / "pki"
        self.workloads = workloads
        # kube-controller-manager (its garbage collector and namespace controller); the demo runs
        # without it: it deletes no owner and no namespace, and its set-up skips building it.
        self.collector = collector or workloads
        # Where pods and nodes reach the API server (the ``kubernetes`` Service's endpoint).
        self.address = host_address() if workloads else "127.0.0.1"
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.etcd: Service | None = None
        self.apiserver: Service | None = None
        self.controller_manager: Service | None = None
        self.scheduler: Service | None = None

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
        service_names = [f"DNS:kubernetes.default.svc.{CLUSTER_DOMAIN}", f"IP:{KUBERNETES_SERVICE_IP}"]
        make_server_cert(
            self.pki,
            sans=(
                "DNS:kubernetes",
                "DNS:kubernetes.default",
                "DNS:kubernetes.default.svc",
                *service_names,
                f"IP:{self.address}",
            ),
        )
        self._start_etcd(timeout)
        self._start_apiserver(timeout)
        self.kubeconfig(ADMIN_USER, ("system:masters",), path=self.admin_kubeconfig)
        if self.collector:
            self._start_controller_manager()
        if self.workloads:
            self._start_scheduler()

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
                f"--bind-address={'0.0.0.0' if self.workloads else '127.0.0.1'}",
                f"--advertise-address={self.address}",
                f"--secure-port={self.port}",
                f"--cert-dir={self.root / 'certs'}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                *(self._node_flags() if self.workloads else self._envtest_flags()),
                "--enable-priority-and-fairness=false",
                "--watch-cache=true",
                "--v=1",
            ],
            log=self.root / "apiserver.log",
        )
        self.apiserver.start()
        self.apiserver.wait_until(self._ready, timeout=timeout, what="/readyz")

    @staticmethod
    def _envtest_flags() -> list[str]:
        return [
            "--authorization-mode=RBAC",
            # No service-account controller runs: admission that waits for one would hang requests.
            "--disable-admission-plugins=ServiceAccount",
        ]

    def _node_flags(self) -> list[str]:
        p = self.pki
        # The API server's own identity towards kubelets (logs, exec), which check it against the CA.
        cert, key = make_client_cert(p, "kube-apiserver-kubelet-client", ("system:masters",))
        return [
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={cert}",
            f"--kubelet-client-key={key}",
            f"--kubelet-certificate-authority={p / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
        ]

    def _start_controller_manager(self) -> None:
        # Its controllers would each need a service-account token of their own; as one
        # identity it needs the rights of all of them: the masters group.
        config = self.kubeconfig("system:kube-controller-manager", ("system:masters",))
        if self.workloads:
            controllers = [
                "--controllers=*",
                f"--root-ca-file={self.pki / 'ca.crt'}",
                f"--service-account-private-key-file={self.pki / 'sa.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
            ]
        else:
            controllers = ["--controllers=garbagecollector,namespace,clusterrole-aggregation"]
        self.controller_manager = Service(
            "kube-controller-manager",
            [
                str(kubernetes_bin("kube-controller-manager")),
                f"--kubeconfig={config}",
                *controllers,
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "--concurrent-gc-syncs=5",
                "--v=1",
            ],
            log=self.root / "controller-manager.log",
        )
        self.controller_manager.start()

    def _start_scheduler(self) -> None:
        # The bootstrap RBAC policy grants this user what the scheduler needs.
        config = self.kubeconfig("system:kube-scheduler")
        self.scheduler = Service(
            "kube-scheduler",
            [
                str(kubernetes_bin("kube-scheduler")),
                f"--kubeconfig={config}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
            log=self.root / "scheduler.log",
        )
        self.scheduler.start()

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
        for service in (self.scheduler, self.controller_manager, self.apiserver, self.etcd):
            if service is not None:
                service.stop()


def _get(url: str, context: ssl.SSLContext | None) -> int:
    with urllib.request.urlopen(url, timeout=2, context=context) as response:
        return int(response.status)


def crd_established(ext: ApiextensionsV1Api, name: str) -> bool:
    """Whether the CustomResourceDefinition ``name`` has its Established condition true."""
    status = ext.read_custom_resource_definition(name).status
    assert status is not None  # the apiserver reports a stored CRD's status
    return any(c.type == "Established" and c.status == "True" for c in status.conditions or [])
