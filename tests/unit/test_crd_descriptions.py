"""What ``kubectl explain`` shows of every CRD in crds/: a description on every schema node (a new
field without one fails here, whoever adds it); and the redrive's spec rule, which must name
every field but suspend. The printer columns: test_crd_schema.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_dlq_devtools.paths import REPO_ROOT

CRDS = sorted((REPO_ROOT / "crds").glob("*.yaml"))


def versions(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for document in yaml.safe_load_all(path.read_text()):
        if document and document.get("kind") == "CustomResourceDefinition":
            for version in document["spec"]["versions"]:
                yield f"{document['spec']['names']['kind']}/{version['name']}", version


def nodes(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node kubectl explain can show: properties, list items, map values."""
    yield path, node
    for key, child in (node.get("properties") or {}).items():
        yield from nodes(child, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        yield from nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from nodes(node["additionalProperties"], f"{path}.*")


#: The API server allows nothing but a type on the root's metadata (kubectl explain shows
#: ObjectMeta's own text for it).
UNDESCRIBABLE = {"metadata"}


@pytest.mark.parametrize("path", CRDS, ids=lambda p: p.name)
def test_every_schema_node_has_a_description(path: Path) -> None:
    missing = [
        where
        for name, version in versions(path)
        for where, node in nodes(version["schema"]["openAPIV3Schema"], name)
        if not str(node.get("description", "")).strip() and where.split(".", 1)[-1] not in UNDESCRIBABLE
    ]
    assert not missing, f"{len(missing)} schema nodes without a description: {missing}"


def test_the_check_sees_a_node_without_one() -> None:
    schema = {"description": "x", "properties": {"a": {"description": "y", "items": {"type": "string"}}}}
    assert [w for w, n in nodes(schema, "T") if not n.get("description")] == ["T.a[]"]


def test_the_redrive_s_immutability_names_every_spec_field_but_suspend() -> None:
    """A spec field added later is immutable too, or this fails: the CEL rule compares each."""
    [(_, version)] = versions(REPO_ROOT / "crds" / "sparkdlq.io_deadletterredrives.yaml")
    schema = version["schema"]["openAPIV3Schema"]
    [rule] = schema["x-kubernetes-validations"]
    fields = set(schema["properties"]["spec"]["properties"]) - {"suspend"}
    for field in fields:
        assert f"self.spec.{field} == oldSelf.spec.{field}" in rule["rule"], field
    assert "suspend" not in rule["rule"]
    assert "create a new DeadLetterRedrive" in rule["message"]
