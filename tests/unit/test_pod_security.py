"""Every pod spark-dlq starts meets the Kubernetes "restricted" Pod Security Standard.

The rules are the profile's (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
baseline and restricted, as of Kubernetes 1.30): no host namespaces, ports or paths, nothing
privileged, only the restricted volume types, no privilege escalation, non-root, capabilities
dropped (only NET_BIND_SERVICE may come back), a RuntimeDefault or Localhost seccomp profile.
They are checked on every pod template the chart renders (the real helm, with the default
values, every ci/ values file and the values that change the pod) and on the driver and executor
pods of the SparkApplication the operator renders. tests/integration/test_chart.py has the real
apiserver's PodSecurity admission judge the same pods.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from spark_dlq_operator import naming
from spark_dlq_operator import render as operator_render
from spark_dlq_operator.config import OperatorConfig
from tests.chart import CI_VALUES, render
from tests.policy_builder import policy

ALLOWED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)


def violations(pod: Mapping[str, Any]) -> list[str]:
    """What in the pod spec ``pod`` breaks the restricted profile (empty: nothing)."""
    found: list[str] = []
    context = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(field)
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            found.append(f"volume {volume['name']}: {sorted(kinds - ALLOWED_VOLUMES)}")
    for sysctl in context.get("sysctls") or []:
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl['name']}")
    if (context.get("seLinuxOptions") or {}).keys() & {"user", "role"}:
        found.append("pod seLinuxOptions user/role")
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        found.append("pod hostProcess")
    if context.get("runAsUser") == 0:
        found.append("pod runAsUser 0")
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        found.append("pod seccompProfile Unconfined")
    containers = [
        *(pod.get("initContainers") or []),
        *(pod.get("containers") or []),
        *(pod.get("ephemeralContainers") or []),
    ]
    if not containers:
        found.append("no containers")
    for container in containers:
        name, security = container.get("name", "?"), container.get("securityContext") or {}
        if security.get("privileged"):
            found.append(f"{name}: privileged")
        if security.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation is not false")
        if not security.get("runAsNonRoot", context.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot is not true")
        if security.get("runAsUser") == 0:
            found.append(f"{name}: runAsUser 0")
        seccomp = (security.get("seccompProfile") or context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile {seccomp}")
        capabilities = security.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"{name}: capabilities do not drop ALL")
        if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities add {capabilities['add']}")
        if any(port.get("hostPort") for port in container.get("ports") or []):
            found.append(f"{name}: hostPort")
        if security.get("procMount") not in (None, "Default"):
            found.append(f"{name}: procMount")
        if (security.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{name}: hostProcess")
        if (security.get("seLinuxOptions") or {}).keys() & {"user", "role"}:
            found.append(f"{name}: seLinuxOptions user/role")
    return found


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(kind/name, pod spec)`` of every pod or pod template among ``objects``."""
    for obj in objects:
        kind, spec = obj["kind"], obj.get("spec") or {}
        where = f"{kind}/{obj['metadata']['name']}"
        if kind == "Pod":
            yield where, spec
        elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"):
            yield where, spec["template"]["spec"]
        elif kind == "CronJob":
            yield where, spec["jobTemplate"]["spec"]["template"]["spec"]


CHART_VALUES: list[Any] = [
    pytest.param({}, [], id="defaults"),
    *[pytest.param({}, [path], id=path.name) for path in CI_VALUES],
    pytest.param({"operator": {"replicas": 2}}, [], id="peering"),
    pytest.param(
        {
            "defaultClass": {
                "brokers": [{"bootstrapServers": "k:9092", "operatorSecretRef": {"name": "kafka-admin"}}]
            }
        },
        [],
        id="class-credentials",
    ),
    pytest.param(
        {
            "operator": {
                "extraEnv": [{"name": "X", "value": "1"}],
                "metrics": {"port": 0},
                "podLabels": {"team": "dlq"},
            }
        },
        [],
        id="extra-env-no-metrics",
    ),
]


@pytest.mark.parametrize(("values", "values_files"), CHART_VALUES)
def test_every_pod_the_chart_renders_is_restricted(values: dict[str, Any], values_files: list[Path]) -> None:
    pods = list(pod_specs(render(values, values_files=values_files)))
    assert pods, "the chart rendered no pod template"
    for where, pod in pods:
        assert violations(pod) == [], where


def spark_pods() -> dict[str, dict[str, Any]]:
    """The driver and executor pods as spark-submit builds them on the SparkApplication's pod
    templates (``spec.driver.template``, ``spec.executor.template``): the templates' pod spec
    with the image set on their one container."""
    app = operator_render.spark_application(
        policy({"spec.broker.secretRef": {"name": "kafka-client"}}),
        config=OperatorConfig(),
        owner=naming.Owner(name="orders-billing", namespace="payments", uid="uid-1"),
    )
    spec = app["spec"]
    pods = {}
    for role in ("driver", "executor"):
        pod = copy.deepcopy(spec[role]["template"]["spec"])
        [container] = pod["containers"]
        assert container["name"] == f"spark-kubernetes-{role}"
        container["image"] = spec["image"]
        pods[role] = pod
    return pods


@pytest.mark.parametrize("role", ["driver", "executor"])
def test_spark_application_pods_are_restricted(role: str) -> None:
    assert violations(spark_pods()[role]) == []


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(pod["containers"][0])


BREAKS: list[Any] = [
    pytest.param(lambda p: p.update(hostNetwork=True), "hostNetwork", id="host-network"),
    pytest.param(lambda p: p.update(hostPID=True), "hostPID", id="host-pid"),
    pytest.param(
        lambda p: p["volumes"].append({"name": "root", "hostPath": {"path": "/"}}),
        "volume root: ['hostPath']",
        id="host-path",
    ),
    pytest.param(
        lambda p: p["containers"][0]["securityContext"].update(privileged=True), "privileged", id="privileged"
    ),
    pytest.param(
        lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
        "allowPrivilegeEscalation is not false",
        id="privilege-escalation",
    ),
    pytest.param(
        lambda p: [
            p["securityContext"].pop("runAsNonRoot"),
            p["containers"][0]["securityContext"].pop("runAsNonRoot"),
        ],
        "runAsNonRoot is not true",
        id="root",
    ),
    pytest.param(
        lambda p: [
            p["securityContext"].pop("seccompProfile"),
            p["containers"][0]["securityContext"].pop("seccompProfile"),
        ],
        "seccompProfile None",
        id="no-seccomp",
    ),
    pytest.param(
        lambda p: p["containers"][0]["securityContext"].update(capabilities={"add": ["SYS_ADMIN"]}),
        "capabilities do not drop ALL",
        id="capabilities",
    ),
    pytest.param(
        lambda p: p["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]),
        "hostPort",
        id="host-port",
    ),
]


@pytest.mark.parametrize(("breaking", "expected"), BREAKS)
def test_the_check_finds_each_kind_of_violation(
    breaking: Callable[[dict[str, Any]], object], expected: str
) -> None:
    """The control: the same pod, broken in one way, is caught."""
    pod = copy.deepcopy(spark_pods()["driver"])
    breaking(pod)
    found = violations(pod)
    assert any(expected in problem for problem in found), found
