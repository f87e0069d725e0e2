"""The sample GitOps folder (examples/gitops/): Argo CD Applications in sync-wave order, pointing
at folders that exist, with chart values the chart accepts and policies the model accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.model import parse_policy
from spark_dlq_devtools.paths import REPO_ROOT
from tests.chart import driver_cluster_role, one, render

GITOPS = REPO_ROOT / "examples" / "gitops"


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def applications() -> dict[str, dict[str, Any]]:
    apps = [d for p in sorted((GITOPS / "apps").glob("*.yaml")) for d in documents(p)]
    assert all(a["apiVersion"] == "argoproj.io/v1alpha1" and a["kind"] == "Application" for a in apps)
    return {a["metadata"]["name"]: a for a in apps}


def wave(obj: dict[str, Any]) -> int:
    return int(obj["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave", "0"))


def test_crds_sync_in_an_earlier_wave_than_the_operator_and_the_policies() -> None:
    apps = applications()
    assert set(apps) == {"spark-dlq-crds", "spark-dlq-operator", "spark-dlq-policies"}
    assert wave(apps["spark-dlq-crds"]) < wave(apps["spark-dlq-operator"]) < wave(apps["spark-dlq-policies"])
    for app in apps.values():
        assert "argocd.argoproj.io/sync-wave" in app["metadata"]["annotations"]


def test_every_source_path_exists() -> None:
    root = documents(GITOPS / "root-app.yaml")[0]
    assert (REPO_ROOT / root["spec"]["source"]["path"]) == GITOPS / "apps"
    for app in applications().values():
        path = REPO_ROOT / app["spec"]["source"]["path"]
        assert path.is_dir(), path
        assert app["spec"]["source"]["repoURL"] == root["spec"]["source"]["repoURL"]


def test_crds_come_from_the_canonical_folder_and_are_never_pruned() -> None:
    crds = applications()["spark-dlq-crds"]["spec"]
    assert crds["source"]["path"] == "crds"
    assert crds["syncPolicy"]["automated"]["prune"] is False
    assert "ServerSideApply=true" in crds["syncPolicy"]["syncOptions"]
    helm = applications()["spark-dlq-operator"]["spec"]["source"]["helm"]
    assert helm["skipCrds"] is True, "the CRD has one owner: the crds Application"


def test_operator_values_are_accepted_by_the_chart() -> None:
    helm = applications()["spark-dlq-operator"]["spec"]["source"]["helm"]
    objects = render(helm["valuesObject"], release=helm["releaseName"])
    deployment = one(objects, "Deployment")
    assert (
        deployment["metadata"]["namespace"]
        == applications()["spark-dlq-operator"]["spec"]["destination"]["namespace"]
    )
    assert one(objects, "ClusterRole", driver_cluster_role({}, release=helm["releaseName"]))


@pytest.mark.parametrize("path", sorted((GITOPS / "policies").glob("*.yaml")), ids=lambda p: p.name)
def test_policies_are_valid(path: Path) -> None:
    for document in documents(path):
        assert document["kind"] == "DeadLetterPolicy"
        parse_policy(document)
        assert wave(document) >= 0
        assert "status" not in document
