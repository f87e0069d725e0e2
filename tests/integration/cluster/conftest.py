"""Pods on the test bed's real node: a namespace per test and small helpers over kubectl.

Every pod runs the probe image (devtools/node-images/cmd/probe), whose subcommands check
from inside the pod what a test asserts; the helpers run them with ``kubectl exec``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from spark_dlq_devtools.node import Node, NodeError, probe_image
from tests.conftest import unique

POD_START_TIMEOUT = 120.0


@pytest.fixture
def pod_namespace(node: Node) -> Iterator[str]:
    """A namespace whose ``default`` service account exists (pods are refused before it does)."""
    name = unique("pods")
    node.kubectl("create", "namespace", name)
    deadline = time.monotonic() + 60
    while True:
        try:
            node.kubectl("get", "serviceaccount", "default", "-n", name)
            break
        except NodeError:
            assert time.monotonic() < deadline, f"no default service account in {name} after 60s"
            time.sleep(0.5)
    yield name
    node.kubectl("delete", "namespace", name, "--wait=false")


def apply(node: Node, *objects: dict[str, Any]) -> None:
    node.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    )


def probe_pod(name: str, namespace: str, *args: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "probe",
                    "image": probe_image(),
                    "imagePullPolicy": "Never",
                    "args": list(args) or ["serve"],
                }
            ],
        },
    }


def wait_ready(node: Node, namespace: str, pod: str, timeout: float = POD_START_TIMEOUT) -> None:
    node.kubectl(
        "wait",
        "--for=condition=Ready",
        f"pod/{pod}",
        "-n",
        namespace,
        f"--timeout={timeout:.0f}s",
        timeout=timeout + 10,
    )


def probe(node: Node, namespace: str, pod: str, *args: str, within: float = 30.0) -> str:
    """``/probe ARGS`` in the pod, retried until it succeeds or ``within`` seconds pass (Service
    rules and DNS records follow a new endpoint by a second or two); returns its output."""
    deadline = time.monotonic() + within
    while True:
        try:
            return node.kubectl("exec", pod, "-n", namespace, "--", "/probe", *args)
        except NodeError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1)
