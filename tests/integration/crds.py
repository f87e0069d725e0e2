"""Installing the project's CustomResourceDefinitions into the test apiserver.

Tests that need a custom resource install the canonical CRD from ``crds/`` (never a copy), so
what the apiserver validates and defaults in a test is exactly what users install. A CRD is
ready when it is Established and its resource answers a list call: only then do create calls
stop racing the apiserver's handler for the new resource.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from spark_dlq_devtools.kube import CRD_LOADER

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"
DEADLETTERPOLICY_CRD = CRD_DIR / "sparkdlq.io_deadletterpolicies.yaml"
DEADLETTERREDRIVE_CRD = CRD_DIR / "sparkdlq.io_deadletterredrives.yaml"
DEADLETTERPOLICYCLASS_CRD = CRD_DIR / "sparkdlq.io_deadletterpolicyclasses.yaml"
#: Every CRD of the project, as a user installs them (the class CRD with no class object: the
#: operator then governs policies by its built-in class, as the chart's default class would).
PROJECT_CRDS = (DEADLETTERPOLICY_CRD, DEADLETTERREDRIVE_CRD, DEADLETTERPOLICYCLASS_CRD)


def load_crds(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in the given YAML files, in order."""
    crds: list[dict[str, Any]] = []
    for path in paths:
        for document in yaml.load_all(Path(path).read_text(), Loader=CRD_LOADER):
            if document and document.get("kind") == "CustomResourceDefinition":
                crds.append(document)
    return crds


def install_crds(api_client: Any, paths: Iterable[Path], *, timeout: float = 60.0) -> list[str]:
    """Create, or replace when present, the CRDs in ``paths``; return their names once each is
    Established and serving."""
    ext = client.ApiextensionsV1Api(api_client)
    names: list[str] = []
    crds = load_crds(paths)
    for crd in crds:
        name = crd["metadata"]["name"]
        # The client takes a manifest (a dict) for a body; its stubs name only the model class.
        try:
            ext.create_custom_resource_definition(crd)  # type: ignore[arg-type]
        except ApiException as error:
            if error.status != 409:
                raise
            current = ext.read_custom_resource_definition(name)
            assert current.metadata is not None  # a stored object has its metadata
            body = {
                **crd,
                "metadata": {**crd["metadata"], "resourceVersion": current.metadata.resource_version},
            }
            ext.replace_custom_resource_definition(name, body)  # type: ignore[arg-type]
        names.append(name)
    for crd in crds:
        _wait_until_serving(api_client, crd, timeout)
    return names


def _wait_until_serving(api_client: Any, crd: dict[str, Any], timeout: float) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    objects = client.CustomObjectsApi(api_client)
    name = crd["metadata"]["name"]
    group = crd["spec"]["group"]
    plural = crd["spec"]["names"]["plural"]
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
    deadline = time.monotonic() + timeout
    while True:
        status = ext.read_custom_resource_definition(name).status
        conditions = {c.type: c for c in (status.conditions or [])} if status else {}
        established = conditions.get("Established")
        if established is not None and established.status == "True":
            try:
                objects.list_cluster_custom_object(group, version, plural, limit=1)
                return
            except ApiException as error:
                if error.status != 404:
                    raise
        if time.monotonic() > deadline:
            problems = "; ".join(f"{c.type}={c.status}: {c.message}" for c in conditions.values())
            raise AssertionError(f"CRD {name} is not serving after {timeout}s ({problems})")
        time.sleep(0.1)
