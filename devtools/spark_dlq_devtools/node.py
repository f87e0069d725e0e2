"""A real Kubernetes node on this machine, joined to the test bed's control plane.

``Node(plane).start()`` turns the host into the one worker of a ``ControlPlane(workloads=True)``:
containerd (its own config, root, state and socket under the cache's ``run/``) runs pods
with runc; the CNI bridge plugin puts them on a bridge of their own (``network.POD_CIDR``);
kubelet (cgroupfs driver, a client certificate for ``system:node:<name>`` and a serving
certificate, both signed by the control plane's CA) registers the node; kube-proxy programs
Services into iptables; CoreDNS runs as a host process on the bridge's address behind the
``kube-dns`` Service. The sandbox image and the tests' probe image are made here
(``scripts/setup/node.sh``) and imported into containerd, since no registry is reachable.

The node is machine-wide state (a bridge, iptables chains, cgroups, mounts, sysctls), so one
node runs per machine: a lock under /run says whose it is and a state file records its run
folder. ``stop()`` removes every pod sandbox through the CRI (which undoes their networking),
stops the processes and sweeps what is left; a ``start()`` that finds the state file of a node
that died does the same sweep first. Pod traffic may reach the host and other pods only: a
forward rule rejects anything leaving the bridge for elsewhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

from spark_dlq_devtools.certs import make_server_cert
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.network import (
    CLUSTER_DNS_IP,
    CLUSTER_DOMAIN,
    POD_CIDR,
    POD_GATEWAY,
    SERVICE_CIDR,
)
from spark_dlq_devtools.paths import (
    coredns_bin,
    crictl_bin,
    kubernetes_bin,
    node_images,
    node_images_digest,
    work_dir,
)
from spark_dlq_devtools.processes import Service, free_port

NODE_NAME = "spark-dlq-node"
BRIDGE = "sdlq0"
CNI_NETWORK = "spark-dlq-pods"
# kubelet's cgroupRoot: every pod's cgroup lives below it in each hierarchy.
CGROUP_ROOT = "spark-dlq"
# Our filter chain in FORWARD: pods talk to each other and to the host, nothing else.
FORWARD_GUARD = "SPARK-DLQ-FORWARD"
# Machine-wide: the lock held while a node runs, and the state file of the running node.
STATE_DIR = Path("/run/spark-dlq-node")
# Kernel settings kubelet sets at start (protectKernelDefaults off); stop() puts back the old values.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
_CGROUPS = Path("/sys/fs/cgroup")


class NodeError(RuntimeError):
    """The node could not start, or another node holds this machine."""


def pause_image() -> str:
    return f"spark-dlq.local/pause:{node_images_digest()}"


def probe_image() -> str:
    """The test image: ``/probe`` (devtools/node-images/cmd/probe) and nothing else."""
    return f"spark-dlq.local/probe:{node_images_digest()}"


class Node:
    """containerd + kubelet + kube-proxy + CoreDNS joined to ``plane`` as node ``NODE_NAME``."""

    def __init__(self, plane: ControlPlane, *, name: str = "node") -> None:
        if not plane.workloads:
            raise NodeError("a node joins a ControlPlane(workloads=True) only")
        self.plane = plane
        self.root = work_dir(name)
        self.address = plane.address
        self.kubelet_port = free_port()
        self.kubelet_healthz_port = free_port()
        self.proxy_healthz_port = free_port()
        self.proxy_metrics_port = free_port()
        self.dns_health_port = free_port()
        self.dns_ready_port = free_port()
        self.containerd: Service | None = None
        self.coredns: Service | None = None
        self.kube_proxy: Service | None = None
        self.kubelet: Service | None = None
        self._lock: IO[str] | None = None

    # -----------------------------------------------------------------------------------------
    # Paths

    @property
    def socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig of the cluster this node belongs to."""
        return self.plane.admin_kubeconfig

    # -----------------------------------------------------------------------------------------
    # Start and stop

    def start(self, *, timeout: float = 180.0, lock_timeout: float = 0.0) -> None:
        """Start the node and wait until it is Ready. ``lock_timeout``: how long to wait for
        another node on this machine to stop (0: fail at once, naming it)."""
        self._acquire(lock_timeout)
        try:
            stale = STATE_DIR / "state.json"
            if stale.exists():
                _sweep(json.loads(stale.read_text()), keep_images=False)
            state = {"root": str(self.root), "sysctls": _read_sysctls(KUBELET_SYSCTLS)}
            stale.write_text(json.dumps(state))
            self._prepare_host()
            self._start_containerd(timeout)
            self._import_images()
            self._apply_cluster_objects()
            self._start_coredns(timeout)
            self._start_kube_proxy()
            self._start_kubelet()
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Remove every pod sandbox, stop every process, undo the host changes; keeps imported
        images. The Node object stays (NotReady), as after a reboot: a new start resumes its pods."""
        if self._lock is None:
            return
        try:
            if self.kubelet is not None:
                self.kubelet.stop(timeout=30)
            if self.containerd is not None and self.containerd.alive():
                # Through the CRI, so the CNI plugins undo each pod's networking.
                self._crictl("rmp", "--all", "--force", timeout=120, check=False)
                self.containerd.stop(timeout=30)
            for service in (self.kube_proxy, self.coredns):
                if service is not None:
                    service.stop(timeout=15)
            state_file = STATE_DIR / "state.json"
            state = json.loads(state_file.read_text()) if state_file.exists() else {"root": str(self.root)}
            _sweep(state, keep_images=True)
            state_file.unlink(missing_ok=True)
        finally:
            self._lock.close()
            self._lock = None

    def kill(self) -> None:
        """Die as a crash would (for recovery tests): SIGKILL containerd, kubelet, kube-proxy and
        CoreDNS, and leave the pods, mounts, networking and state file behind."""
        for service in (self.kubelet, self.kube_proxy, self.coredns, self.containerd):
            if service is not None:
                service.kill()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _acquire(self, lock_timeout: float) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        lock = (STATE_DIR / "lock").open("a+")
        deadline = time.monotonic() + lock_timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    lock.close()
                    owner = STATE_DIR / "state.json"
                    where = json.loads(owner.read_text())["root"] if owner.exists() else "unknown"
                    raise NodeError(
                        f"another test bed node runs on this machine (run folder {where}); "
                        f"one node per machine: stop it first"
                    ) from None
                time.sleep(2)
        self._lock = lock

    # -----------------------------------------------------------------------------------------
    # The host: sysctls, cgroups, the bridge, routes, the forward guard, the CNI config

    def _prepare_host(self) -> None:
        if not Path("/proc/sys/net/bridge").exists():
            subprocess.run(["modprobe", "br_netfilter"], check=False, capture_output=True)
        for key in ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables"):
            try:
                (Path("/proc/sys") / key).write_text("1")
            except OSError as error:
                raise NodeError(
                    f"cannot set {key.replace('/', '.')}=1 (br_netfilter loaded?): {error}"
                ) from error
        for hierarchy in _v1_hierarchies():
            folder = hierarchy / CGROUP_ROOT
            folder.mkdir(exist_ok=True)
            if (hierarchy / "cpuset.cpus").exists():  # a new cpuset starts empty: give it the parent's
                for key in ("cpuset.cpus", "cpuset.mems"):
                    (folder / key).write_text((hierarchy / key).read_text())
        prefix = POD_CIDR.split("/")[1]
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
            _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "replace", f"{POD_GATEWAY}/{prefix}", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        # ClusterIPs without a rule (none yet, or no endpoints) stay on the bridge instead of
        # following the default route off the machine.
        _run("ip", "route", "replace", SERVICE_CIDR, "dev", BRIDGE)
        _iptables("iptables", "-N", FORWARD_GUARD, check=False)
        _iptables("iptables", "-F", FORWARD_GUARD)
        _iptables("iptables", "-A", FORWARD_GUARD, "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT")
        _iptables("iptables", "-A", FORWARD_GUARD, "-i", BRIDGE, "-j", "REJECT")
        if _iptables("iptables", "-C", "FORWARD", "-j", FORWARD_GUARD, check=False).returncode != 0:
            _iptables("iptables", "-I", "FORWARD", "1", "-j", FORWARD_GUARD)
        net_d = self.root / "cni" / "net.d"
        net_d.mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "0.4.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    # Pods reach only this machine, which sees their own addresses: no NAT.
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.root / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        (net_d / "10-spark-dlq.conflist").write_text(json.dumps(conflist, indent=2))
        (self.root / "resolv.conf").write_text(f"nameserver {CLUSTER_DNS_IP}\n")

    # -----------------------------------------------------------------------------------------
    # containerd and the images

    def _start_containerd(self, timeout: float) -> None:
        folder = self.root / "containerd"
        folder.mkdir(parents=True, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""\
version = 2
root = "{folder / "root"}"
state = "{folder / "state"}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{self.socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{folder / "opt"}"

[{cri}]
  sandbox_image = "{pause_image()}"
  netns_mounts_under_state_dir = true
  # Without CAP_SYS_RESOURCE (as in this sandbox) no process may lower its OOM score: keep
  # every container's at or above containerd's own instead of failing to start it.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
        Root = "{self.root / "runc"}"
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{self.root / "cni" / "net.d"}"
    max_conf_num = 1
"""
        (folder / "config.toml").write_text(config)
        self.containerd = Service(
            "containerd",
            ["containerd", "--config", str(folder / "config.toml"), "--log-level", "warn"],
            log=self.root / "containerd.log",
        )
        self.containerd.start()
        self.containerd.wait_until(
            lambda: self._crictl("info", check=False).returncode == 0, timeout=timeout, what="the CRI"
        )

    def _import_images(self) -> None:
        present = set(self._ctr("images", "list", "--quiet").stdout.split())
        folder = node_images()
        for archive, image in ((folder / "pause.tar", pause_image()), (folder / "probe.tar", probe_image())):
            if image not in present:
                self.load_image(archive)

    def load_image(self, archive: Path) -> None:
        """Import an image archive (OCI or ``docker save``/``podman save`` format) for pods."""
        self._ctr("images", "import", str(archive), timeout=600)

    # -----------------------------------------------------------------------------------------
    # Cluster DNS: CoreDNS on the host, behind the kube-dns Service

    def _apply_cluster_objects(self) -> None:
        identity = "system:spark-dlq-coredns"
        objects: list[dict[str, Any]] = [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": identity},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["endpoints", "services", "pods", "namespaces"],
                        "verbs": ["list", "watch"],
                    },
                    {
                        "apiGroups": ["discovery.k8s.io"],
                        "resources": ["endpointslices"],
                        "verbs": ["list", "watch"],
                    },
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": identity},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": identity},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": identity}],
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": "kube-dns",
                    "namespace": "kube-system",
                    "labels": {"k8s-app": "kube-dns"},
                },
                "spec": {
                    "clusterIP": CLUSTER_DNS_IP,
                    "ports": [
                        {"name": "dns", "port": 53, "protocol": "UDP"},
                        {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                    ],
                },
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kube-dns-host",
                    "namespace": "kube-system",
                    "labels": {
                        "kubernetes.io/service-name": "kube-dns",
                        "endpointslice.kubernetes.io/managed-by": "spark-dlq-testbed",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [POD_GATEWAY], "conditions": {"ready": True}}],
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                ],
            },
        ]
        self._kubectl(
            "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )
        self._coredns_kubeconfig = self.plane.kubeconfig(identity)

    def _start_coredns(self, timeout: float) -> None:
        corefile = self.root / "Corefile"
        corefile.write_text(
            f""".:53 {{
    bind {POD_GATEWAY}
    errors
    health 127.0.0.1:{self.dns_health_port}
    ready 127.0.0.1:{self.dns_ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self._coredns_kubeconfig} testbed
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
    loadbalance
}}
"""
        )
        self.coredns = Service(
            "coredns", [str(coredns_bin()), "-conf", str(corefile)], log=self.root / "coredns.log"
        )
        self.coredns.start()
        self.coredns.wait_until(
            lambda: _http_ok(f"http://127.0.0.1:{self.dns_ready_port}/ready"), timeout=timeout, what="/ready"
        )

    # -----------------------------------------------------------------------------------------
    # kube-proxy and kubelet

    def _start_kube_proxy(self) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.plane.kubeconfig("system:kube-proxy"))},
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "bindAddress": self.address,
            "clusterCIDR": POD_CIDR,
            "healthzBindAddress": f"127.0.0.1:{self.proxy_healthz_port}",
            "metricsBindAddress": f"127.0.0.1:{self.proxy_metrics_port}",
            "nodePortAddresses": [f"{self.address}/32"],
            # Zero leaves the machine's conntrack settings as they are.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {"localhostNodePorts": False, "syncPeriod": "30s"},
        }
        path = self.root / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        self.kube_proxy = Service(
            "kube-proxy",
            [str(kubernetes_bin("kube-proxy")), f"--config={path}", "--v=1"],
            log=self.root / "kube-proxy.log",
        )
        self.kube_proxy.start()

    def _start_kubelet(self) -> None:
        pki = self.plane.pki
        cert, key = make_server_cert(
            pki,
            name=f"kubelet-{NODE_NAME}",
            common_name=f"system:node:{NODE_NAME}",
            sans=(f"IP:{self.address}", f"DNS:{NODE_NAME}"),
        )
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.address,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.kubelet_healthz_port,
            "tlsCertFile": str(cert),
            "tlsPrivateKeyFile": str(key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{CGROUP_ROOT}",
            "clusterDNS": [CLUSTER_DNS_IP],
            "clusterDomain": CLUSTER_DOMAIN,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "failSwapOn": False,
            "resolvConf": str(self.root / "resolv.conf"),
            "podLogsDir": str(self.root / "pod-logs"),
            "volumePluginDir": str(self.root / "volume-plugins"),
            # A shared disk: neither evict pods nor delete images because other work fills it.
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "rotateCertificates": False,
        }
        path = self.root / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config))
        kubeconfig = self.plane.kubeconfig(f"system:node:{NODE_NAME}", ("system:nodes",))
        self.kubelet = Service(
            "kubelet",
            [
                str(kubernetes_bin("kubelet")),
                f"--config={path}",
                f"--kubeconfig={kubeconfig}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.address}",
                f"--root-dir={self.root / 'kubelet'}",
                "--v=1",
            ],
            log=self.root / "kubelet.log",
        )
        self.kubelet.start()

    def _wait_ready(self, timeout: float) -> None:
        # kube-proxy reports healthy once it has synced its rules for a registered node.
        assert self.kubelet is not None
        assert self.kube_proxy is not None
        jsonpath = '{.status.conditions[?(@.type=="Ready")].status}'
        self.kubelet.wait_until(
            lambda: (
                self._kubectl("get", "node", NODE_NAME, "-o", f"jsonpath={jsonpath}", check=False).stdout
                == "True"
            ),
            timeout=timeout,
            what=f"node {NODE_NAME} Ready",
        )
        self.kube_proxy.wait_until(
            lambda: _http_ok(f"http://127.0.0.1:{self.proxy_healthz_port}/healthz"),
            timeout=timeout,
            what="/healthz",
        )

    # -----------------------------------------------------------------------------------------
    # Tools

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        """Run kubectl as the cluster's admin; returns stdout, raises with stderr on failure."""
        result = self._kubectl(*args, input=input, timeout=timeout, check=False)
        if result.returncode != 0:
            raise NodeError(f"kubectl {shlex.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def _kubectl(
        self, *args: str, input: str | None = None, timeout: float = 60, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kubernetes_bin("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def _crictl(
        self, *args: str, timeout: float = 30, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        endpoint = f"unix://{self.socket}"
        return subprocess.run(
            [str(crictl_bin()), f"--runtime-endpoint={endpoint}", f"--image-endpoint={endpoint}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def _ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return _run("ctr", f"--address={self.socket}", "--namespace=k8s.io", *args, timeout=timeout)

    def leftovers(self) -> list[str]:
        """What a stopped node would have left on this machine; empty once it is swept."""
        found = [f"process {pid}" for pid in _node_processes(self.root)]
        found += [f"mount {mount}" for mount in _mounts_below(self.root)]
        found += [f"cgroup {path}" for path in _our_cgroups()]
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
            found.append(f"link {BRIDGE}")
        for pattern in (f"{CNI_NETWORK}-*", "cni-loopback-*"):
            found += [f"CNI result {path}" for path in Path("/var/lib/cni/results").glob(pattern)]
        for tool in ("iptables", "ip6tables"):
            for table in ("filter", "nat", "mangle"):
                listing = _iptables(tool, "-t", table, "-S", check=False).stdout
                found += [
                    f"{tool} -t {table} {line}"
                    for line in listing.splitlines()
                    if "KUBE-" in line or FORWARD_GUARD in line or f'\\"{CNI_NETWORK}\\"' in line
                ]
        return found


# ---------------------------------------------------------------------------------------------
# Sweeping a node's leftovers (after stop(), or after a node that died)


def _sweep(state: dict[str, Any], *, keep_images: bool) -> None:
    root = Path(state["root"])
    _kill_leftovers(root)
    _unmount_below(root)
    for folder in (root / "containerd" / "state", root / "runc", root / "kubelet", root / "cni" / "ipam"):
        shutil.rmtree(folder, ignore_errors=True)
    if not keep_images:
        shutil.rmtree(root / "containerd", ignore_errors=True)
    for link in _links_of(BRIDGE):
        subprocess.run(["ip", "link", "delete", link], capture_output=True)
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
    _clean_iptables()
    _remove_cgroups()
    for log in Path("/var/log/containers").glob("*.log"):
        with contextlib.suppress(OSError):
            if str(root) in os.readlink(log):
                log.unlink()
    # The CNI plugins' result cache: our network's, and containerd's own loopback network's
    # (only this node runs containerd's CRI here).
    for pattern in (f"{CNI_NETWORK}-*", "cni-loopback-*"):
        for result in Path("/var/lib/cni/results").glob(pattern):
            result.unlink(missing_ok=True)
    # Shims bind their sockets under /run/containerd/s whatever containerd's state folder:
    # remove those no process listens on any more (a live containerd's stay).
    bound = {line.split()[-1] for line in Path("/proc/net/unix").read_text().splitlines()[1:]}
    for shim_socket in Path("/run/containerd/s").glob("*"):
        if shim_socket.is_socket() and str(shim_socket) not in bound:
            shim_socket.unlink(missing_ok=True)
    # Paths kubelet uses whatever its root folder: removed when nothing else is in them.
    Path("/var/lib/kubelet/device-plugins/kubelet.sock").unlink(missing_ok=True)
    for shared in (
        "/var/lib/kubelet/device-plugins",
        "/var/lib/kubelet",
        "/var/log/containers",
        "/run/containerd/s",
        "/run/containerd",
    ):
        with contextlib.suppress(OSError):
            os.rmdir(shared)
    for key, value in state.get("sysctls", {}).items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)


def _node_processes(root: Path) -> set[int]:
    """The node's processes: their command lines name its run folder (containerd and its
    shims, kubelet, kube-proxy, CoreDNS), or they run in the pods' cgroups."""
    needle = str(root).encode()
    found = set(_cgroup_pids())
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


def _kill_leftovers(root: Path) -> None:
    for _ in range(50):
        victims = _node_processes(root)
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    raise NodeError(f"processes of the node in {root} survive SIGKILL")


def _v1_hierarchies() -> list[Path]:
    return [
        path
        for path in sorted(_CGROUPS.iterdir())
        if path.is_dir()
        and not path.is_symlink()
        and path.name != "unified"
        and (path / "cgroup.procs").exists()
    ]


def _our_cgroups() -> Iterator[Path]:
    for hierarchy in sorted(_CGROUPS.iterdir()):
        base = hierarchy / CGROUP_ROOT
        if base.is_dir() and not hierarchy.is_symlink():
            yield base


def _cgroup_pids() -> Iterator[int]:
    for base in _our_cgroups():
        for procs in base.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                yield from (int(pid) for pid in procs.read_text().split())


def _remove_cgroups() -> None:
    for base in _our_cgroups():
        for folder, _, _ in os.walk(base, topdown=False):  # children before their parent
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def _mounts_below(root: Path) -> list[str]:
    prefix = str(root) + "/"
    return [
        line.split()[4].replace("\\040", " ")
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if (line.split()[4] + "/").startswith(prefix)
    ]


def _unmount_below(root: Path) -> None:
    for _ in range(10):
        mounts = _mounts_below(root)
        if not mounts:
            return
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "--lazy", mount], capture_output=True)
    raise NodeError(f"mounts below {root} remain after unmounting")


def _links_of(bridge: str) -> list[str]:
    result = subprocess.run(["ip", "-j", "link", "show", "master", bridge], capture_output=True, text=True)
    return [link["ifname"] for link in json.loads(result.stdout or "[]")] if result.returncode == 0 else []


def _clean_iptables() -> None:
    """Remove kubelet's and kube-proxy's KUBE-* chains, our forward guard, the CNI plugins'
    per-pod chains of our network, and every rule that jumps to them (IPv4 and IPv6)."""
    tag = f'name: "{CNI_NETWORK}"'
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            listing = _iptables(tool, "-t", table, "-S", check=False)
            if listing.returncode != 0:
                continue
            rules = [shlex.split(line) for line in listing.stdout.splitlines()]
            chains = {rule[1] for rule in rules if rule[0] == "-N"}
            ours = {c for c in chains if c.startswith("KUBE-") or c == FORWARD_GUARD}
            for rule in rules:
                target = rule[rule.index("-j") + 1] if "-j" in rule else ""
                tagged = any(tag in part for part in rule)
                # CNI-HOSTPORT-* chains are shared with every other user of the CNI plugins.
                if rule[0] == "-A" and tagged and target.startswith("CNI-") and "HOSTPORT" not in target:
                    ours.add(target)
            for rule in rules:
                target = rule[rule.index("-j") + 1] if "-j" in rule else ""
                tagged = any(tag in part for part in rule)
                if rule[0] == "-A" and rule[1] not in ours and (target in ours or tagged):
                    _iptables(tool, "-t", table, "-D", *rule[1:], check=False)
            for chain in ours:
                _iptables(tool, "-t", table, "-F", chain, check=False)
            for chain in ours:
                _iptables(tool, "-t", table, "-X", chain, check=False)


def _read_sysctls(keys: tuple[str, ...]) -> dict[str, str]:
    result = {}
    for key in keys:
        with contextlib.suppress(OSError):
            result[key] = (Path("/proc/sys") / key).read_text().strip()
    return result


def _iptables(tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool, "-w", "5", *args], capture_output=True, text=True, timeout=30, check=check)


def _run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise NodeError(f"{shlex.join(argv)} failed: {result.stderr.strip()}")
    return result


def _http_ok(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(url, timeout=2) as response:
        return int(response.status) == 200
