"""The test bed cluster's address plan, and the address of this machine that pods can reach.

The control plane, the node and the Kafka broker must agree on these, so they are written
once here. Every range is local to this machine: pod traffic goes over the node's own bridge
and reaches the host by the host's own address (the API server, the broker, cluster DNS);
the node refuses to forward pod traffic anywhere else (``spark_dlq_devtools.node``).
"""

from __future__ import annotations

import json
import subprocess
from functools import cache

# Service ClusterIPs (kube-apiserver --service-cluster-ip-range); the first is the
# ``kubernetes`` Service, cluster DNS has a fixed one.
SERVICE_CIDR = "10.96.0.0/24"
KUBERNETES_SERVICE_IP = "10.96.0.1"
CLUSTER_DNS_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
# The one node's pods, on its bridge; the bridge's own address is the pods' gateway.
POD_CIDR = "10.244.0.0/24"
POD_GATEWAY = "10.244.0.1"


class NoHostAddress(RuntimeError):
    """This machine has no IPv4 default route, so no address that pods and host share."""


@cache
def host_address() -> str:
    """The IPv4 address of the interface holding the default route (the node's InternalIP).

    Pods reach it through their gateway as an address of the host itself, so services on the
    host that listen on it (the API server, the broker) are reachable from pods without NAT."""
    routes = json.loads(_ip("-4", "route", "show", "default") or "[]")
    if not routes or "dev" not in routes[0]:
        raise NoHostAddress("no IPv4 default route: cannot pick the address pods reach the host on")
    device = routes[0]["dev"]
    for link in json.loads(_ip("-4", "addr", "show", "dev", device) or "[]"):
        for info in link.get("addr_info", []):
            if info.get("family") == "inet" and info.get("scope") == "global":
                return str(info["local"])
    raise NoHostAddress(f"the default route's device {device} has no global IPv4 address")


def _ip(*args: str) -> str:
    return subprocess.run(["ip", "-j", *args], check=True, capture_output=True, text=True, timeout=10).stdout
