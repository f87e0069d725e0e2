"""The Helm chart as data: render it with the pinned helm, and what its RBAC grants and needs.

``render`` runs ``helm template`` (the helm that scripts/setup/helm.sh builds) and returns the
objects. ``granted`` resolves the rendered bindings of a service account into the set of
``Grant(scope, group, resource, verb)`` it receives (scope: ``*`` for cluster-wide, else a
namespace). ``needed`` derives the grants the operator needs for a set of values from the RBAC
block of operator/README.md, which tests/integration/operator/test_rbac.py proves sufficient by
running the operator under exactly those rules, split the way the chart scopes them.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from spark_dlq_devtools.paths import REPO_ROOT, helm_bin

CHART = REPO_ROOT / "charts" / "spark-dlq-operator"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
KOPF_PEERING_CRDS = CHART / "crds" / "kopf.dev_peerings.yaml"
OPERATOR_README = REPO_ROOT / "operator" / "README.md"
RELEASE = "dlq"
NAMESPACE = "spark-dlq"

#: Resources the operator reads cluster-wide whatever it watches (kopf's scanning, the classes).
CLUSTER_SCOPED = frozenset({"customresourcedefinitions", "namespaces", "deadletterpolicyclasses"})
#: What a Spark driver needs for its executors, with the operator's Spark settings (the chart's
#: ClusterRole for drivers; docs/security.md ("Least privilege")).
DRIVER_RULES = (
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["get", "list", "watch", "create", "delete", "deletecollection"],
    },
)
#: The name the README's RBAC block gives the drivers' ClusterRole (the operator's default).
README_DRIVER_CLUSTER_ROLE = "spark-dlq-spark-driver"


class Grant(NamedTuple):
    scope: str
    group: str
    resource: str
    verb: str
    #: One object (a rule's resourceNames), or every object of the resource ("").
    name: str = ""


class HelmError(AssertionError):
    """helm failed; the message has its stderr."""


def helm(
    *args: str, check: bool = True, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(helm_bin()), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env) if env is not None else None,
    )
    if check and result.returncode != 0:
        raise HelmError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def values_args(values: Mapping[str, Any] | None, folder: Path) -> list[str]:
    """``--values FILE`` for ``values`` (nested dicts, as in values.yaml), written into ``folder``."""
    if not values:
        return []
    path = folder / f"values-{len(list(folder.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(dict(values)))
    return ["--values", str(path)]


def template(
    values: Mapping[str, Any] | None = None,
    *,
    namespace: str = NAMESPACE,
    release: str = RELEASE,
    values_files: Sequence[Path] = (),
    include_crds: bool = False,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the chart with ``values`` on top of ``values_files``."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for path in values_files:
        args += ["--values", str(path)]
    if include_crds:
        args.append("--include-crds")
    with tempfile.TemporaryDirectory(prefix="chart-values-") as folder:
        return helm(*args, *values_args(values, Path(folder)), check=check)


#: Rendered charts by values and options: many tests render the same values (the defaults
#: above all), and a ``helm template`` is a process start. The text is immutable; ``render``
#: parses a fresh copy for each caller.
_RENDERED: dict[str, str] = {}


def render_text(values: Mapping[str, Any] | None = None, **options: Any) -> str:
    key = json.dumps([values or {}, options], sort_keys=True, default=str)
    if key not in _RENDERED:
        _RENDERED[key] = template(values, **options).stdout
    return _RENDERED[key]


#: The parsed objects of each rendered text; ``render`` hands out deep copies, so a caller may
#: change its own.
_PARSED: dict[str, list[dict[str, Any]]] = {}


def render(values: Mapping[str, Any] | None = None, **options: Any) -> list[dict[str, Any]]:
    """The objects ``helm template`` renders (no NOTES, no CRDs unless include_crds). The same
    values and options render and parse once per session; each caller gets a copy of its own."""
    key = json.dumps([values or {}, options], sort_keys=True, default=str)
    if key not in _PARSED:
        _PARSED[key] = [doc for doc in yaml.safe_load_all(render_text(values, **options)) if doc]
    return copy.deepcopy(_PARSED[key])


def find(
    objects: Iterable[Mapping[str, Any]], kind: str, name: str | None = None, namespace: str | None = None
) -> list[dict[str, Any]]:
    return [
        dict(o)
        for o in objects
        if o["kind"] == kind
        and (name is None or o["metadata"]["name"] == name)
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]


def one(
    objects: Iterable[Mapping[str, Any]], kind: str, name: str | None = None, namespace: str | None = None
) -> dict[str, Any]:
    found = find(objects, kind, name, namespace)
    assert len(found) == 1, (
        f"expected one {kind} {name or ''} in {namespace or 'any namespace'}: {len(found)}"
    )
    return found[0]


def env_of(deployment: Mapping[str, Any]) -> dict[str, str]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


# --- RBAC ----------------------------------------------------------------------------------------


def expand(rules: Iterable[Mapping[str, Any]], scope: str) -> set[Grant]:
    grants: set[Grant] = set()
    for rule in rules:
        assert not rule.get("nonResourceURLs"), f"nonResourceURLs are not expected here: {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert "*" not in (group, resource, verb), f"wildcard in {rule}"
                    for name in rule.get("resourceNames") or [""]:
                        grants.add(Grant(scope, group, resource, verb, name))
    return grants


def granted(objects: Sequence[Mapping[str, Any]], *, namespace: str, name: str) -> set[Grant]:
    """What the rendered bindings give the service account ``namespace/name``."""

    def bound(binding: Mapping[str, Any]) -> bool:
        return any(
            s.get("kind") == "ServiceAccount" and s.get("name") == name and s.get("namespace") == namespace
            for s in binding.get("subjects") or []
        )

    def role(kind: str, role_name: str, role_namespace: str | None) -> Mapping[str, Any]:
        matches = find(objects, kind, role_name, role_namespace)
        assert matches, f"{kind} {role_name} is bound but not rendered"
        return matches[0]

    grants: set[Grant] = set()
    for binding in find(objects, "ClusterRoleBinding"):
        if bound(binding):
            ref = binding["roleRef"]
            assert ref["kind"] == "ClusterRole"
            grants |= expand(role("ClusterRole", ref["name"], None)["rules"], "*")
    for binding in find(objects, "RoleBinding"):
        if bound(binding):
            ref, scope = binding["roleRef"], binding["metadata"]["namespace"]
            kind_namespace = scope if ref["kind"] == "Role" else None
            grants |= expand(role(ref["kind"], ref["name"], kind_namespace)["rules"], scope)
    return grants


def documented_rules() -> list[dict[str, Any]]:
    """The rules of the yaml block under ``## RBAC`` in operator/README.md."""
    section = OPERATOR_README.read_text().split("## RBAC", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "operator/README.md has no yaml block under ## RBAC"
    return list(yaml.safe_load(block.group(1))["rules"])


def documented_peering_verbs() -> set[str]:
    """The verbs the README gives kopf's peering objects (its sentence after the block)."""
    section = OPERATOR_README.read_text().split("## RBAC", 1)[1]
    found = re.search(r"also `([a-z, ]+)` on `kopf\.dev`", section)
    assert found is not None, "operator/README.md no longer says which verbs kopf's peering needs"
    return {verb.strip() for verb in found.group(1).split(",")}


def driver_cluster_role(values: Mapping[str, Any], *, release: str = RELEASE) -> str:
    """The drivers' ClusterRole the chart names for ``values``."""
    rbac = (values.get("spark") or {}).get("rbac") or {}
    return str(rbac.get("clusterRoleName") or f"{release}-spark-dlq-operator-spark-driver")


def class_secrets(values: Mapping[str, Any]) -> list[str]:
    """The Secrets the operator may read: the chart's class's ``operatorSecretRef``s, and
    ``operator.rbac.classSecretNames``."""
    klass = values.get("defaultClass") or {}
    names = [
        b["operatorSecretRef"]["name"]
        for b in (klass.get("brokers") or [])
        if klass.get("create", True) and b.get("operatorSecretRef")
    ]
    names += ((values.get("operator") or {}).get("rbac") or {}).get("classSecretNames") or []
    return list(dict.fromkeys(names))


def needed(
    values: Mapping[str, Any], *, release_namespace: str = NAMESPACE, release: str = RELEASE
) -> set[Grant]:
    """The grants the operator needs when installed with ``values`` (only the keys that matter:
    operator.replicas, operator.watch, topics.strimzi, spark.rbac, the Secrets classes name)."""
    operator = values.get("operator") or {}
    watch = operator.get("watch") or {}
    all_namespaces = watch.get("allNamespaces", True)
    namespaces = watch.get("namespaces") or [release_namespace]
    strimzi = (values.get("topics") or {}).get("strimzi") or {}
    peering = int(operator.get("replicas", 1)) > 1

    grants: set[Grant] = set()
    for rule in documented_rules():
        if rule.get("resourceNames") == [README_DRIVER_CLUSTER_ROLE]:
            rule = {**rule, "resourceNames": [driver_cluster_role(values, release=release)]}
        if rule["resources"] == ["secrets"]:
            # Only the Secrets classes name, only in the operator's namespace (resourceNames).
            for name in class_secrets(values):
                grants |= expand([{**rule, "resourceNames": [name]}], release_namespace)
        elif rule["apiGroups"] == ["kafka.strimzi.io"]:
            if strimzi.get("enabled"):
                for namespace in strimzi.get("namespaces") or ["kafka"]:
                    grants |= expand([rule], namespace)
        elif set(rule["resources"]) <= CLUSTER_SCOPED:
            # kopf observes namespaces only when it watches a list of them
            # (kopf._core.reactor.observation.namespace_observer: "not clusterwide").
            if rule["resources"] == ["namespaces"] and "get" not in rule["verbs"] and all_namespaces:
                continue
            grants |= expand([rule], "*")
        elif all_namespaces:
            grants |= expand([rule], "*")
        else:
            for namespace in namespaces:
                grants |= expand([rule], namespace)
    if peering:
        verbs = sorted(documented_peering_verbs())
        if all_namespaces:
            grants |= expand(
                [{"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "verbs": verbs}], "*"
            )
        else:
            for namespace in namespaces:
                grants |= expand(
                    [{"apiGroups": ["kopf.dev"], "resources": ["kopfpeerings"], "verbs": verbs}], namespace
                )
    return grants
