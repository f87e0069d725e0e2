"""The chart's RBAC is exactly what the operator needs: every grant it needs, nothing more.

What the operator needs comes from the RBAC block of operator/README.md (which
tests/integration/operator/test_rbac.py proves enough by running the operator under it), scoped
the way the chart installs it (tests/chart.py ``needed``). What the chart grants is resolved
from the rendered bindings of the operator's service account. tests/integration/test_chart.py
asks a real apiserver the same questions.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tests.chart import (
    DRIVER_RESOURCES,
    DRIVER_VERBS,
    NAMESPACE,
    RELEASE,
    Grant,
    documented_peering_verbs,
    documented_rules,
    expand,
    granted,
    needed,
    render,
)

OPERATOR_SA = f"{RELEASE}-spark-dlq-operator"

CASES = [
    pytest.param({}, id="cluster-wide"),
    pytest.param({"operator": {"watch": {"allNamespaces": False}}}, id="release-namespace"),
    pytest.param(
        {"operator": {"watch": {"allNamespaces": False, "namespaces": ["payments", "orders"]}}},
        id="two-namespaces",
    ),
    pytest.param({"topics": {"strimzi": {"enabled": True, "namespaces": ["kafka"]}}}, id="strimzi"),
    pytest.param(
        {
            "topics": {"strimzi": {"enabled": True, "namespaces": ["kafka", "kafka-eu"]}},
            "operator": {"watch": {"allNamespaces": False, "namespaces": ["payments"]}},
        },
        id="strimzi-two-clusters-namespaced",
    ),
    pytest.param({"operator": {"replicas": 2}}, id="peering-cluster-wide"),
    pytest.param(
        {"operator": {"replicas": 2, "watch": {"allNamespaces": False, "namespaces": ["a", "b"]}}},
        id="peering-namespaced",
    ),
    pytest.param(
        {"spark": {"serviceAccount": {"create": False, "name": "spark"}, "rbac": {"create": False}}},
        id="existing-spark-account",
    ),
]


CLASS_SECRETS = {
    "defaultClass": {"brokers": [{"bootstrapServers": "k:9092", "operatorSecretRef": {"name": "op-kafka"}}]},
    "operator": {"rbac": {"classSecretNames": ["other"]}},
}
CASES.append(pytest.param(CLASS_SECRETS, id="class-secrets"))


def describe(grants: set[Grant]) -> list[str]:
    return sorted(
        f"{g.scope}: {g.group or 'core'}/{g.resource}{'/' + g.name if g.name else ''} {g.verb}"
        for g in grants
    )


@pytest.mark.parametrize("values", CASES)
def test_operator_is_granted_exactly_what_it_needs(values: dict[str, Any]) -> None:
    got = granted(render(values), namespace=NAMESPACE, name=OPERATOR_SA)
    want = needed(values)
    assert not want - got, f"missing: {describe(want - got)}"
    assert not got - want, f"more than needed: {describe(got - want)}"


def test_cluster_wide_grants_no_namespaced_role() -> None:
    objects = render()
    assert not [o for o in objects if o["kind"] == "RoleBinding" and o["subjects"][0]["name"] == OPERATOR_SA]


def test_kafka_topics_only_in_the_kafka_namespaces() -> None:
    got = granted(
        render({"topics": {"strimzi": {"enabled": True, "namespaces": ["kafka"]}}}),
        namespace=NAMESPACE,
        name=OPERATOR_SA,
    )
    scopes = {g.scope for g in got if g.group == "kafka.strimzi.io"}
    assert scopes == {"kafka"}
    off = granted(render(), namespace=NAMESPACE, name=OPERATOR_SA)
    assert not {g for g in off if g.group == "kafka.strimzi.io"}


def test_no_rbac_when_asked() -> None:
    values = {"operator": {"rbac": {"create": False}}, "topics": {"strimzi": {"enabled": True}}}
    assert granted(render(values), namespace=NAMESPACE, name=OPERATOR_SA) == set()


def test_operator_never_gets_secrets_and_reads_pods_only_one_by_one() -> None:
    """No services at all; Secrets only ``get`` on those classes name, in the release namespace;
    pods only ``get``: a redrive's driver pod, by the name its SparkApplication gives, for its
    termination message (the redrive's counts)."""
    for case in CASES:
        if case.values[0] is CLASS_SECRETS:
            continue
        got = granted(render(case.values[0]), namespace=NAMESPACE, name=OPERATOR_SA)
        assert not {g for g in got if g.resource in ("secrets", "services")}, case.id
        assert {g.verb for g in got if g.resource == "pods"} == {"get"}, case.id
    got = granted(render(CLASS_SECRETS), namespace=NAMESPACE, name=OPERATOR_SA)
    assert {g for g in got if g.resource == "secrets"} == {
        Grant(NAMESPACE, "", "secrets", "get", "op-kafka"),
        Grant(NAMESPACE, "", "secrets", "get", "other"),
    }


@pytest.mark.parametrize(
    ("values", "namespaces"),
    [
        pytest.param({}, {NAMESPACE}, id="cluster-wide-release-namespace"),
        pytest.param(
            {"operator": {"watch": {"allNamespaces": False, "namespaces": ["a", "b"]}}},
            {"a", "b"},
            id="watched-namespaces",
        ),
        pytest.param({"spark": {"namespaces": ["payments"]}}, {"payments"}, id="explicit"),
    ],
)
def test_spark_drivers_get_their_role_where_policies_run(
    values: dict[str, Any], namespaces: set[str]
) -> None:
    objects = render(values)
    got: set[Grant] = set()
    for namespace in namespaces:
        got |= granted(objects, namespace=namespace, name="spark-dlq-driver")
    want = expand(
        [{"apiGroups": [""], "resources": sorted(DRIVER_RESOURCES), "verbs": sorted(DRIVER_VERBS)}], ""
    )
    assert got == {g._replace(scope=ns) for g in want for ns in namespaces}


def test_readme_rules_are_the_ones_the_chart_knows() -> None:
    """A rule added to operator/README.md must find a place in the chart (and in ``needed``)."""
    groups = {(tuple(r["apiGroups"]), tuple(r["resources"])) for r in documented_rules()}
    assert groups == {
        (("sparkdlq.io",), ("deadletterpolicies",)),
        (("sparkdlq.io",), ("deadletterpolicies/status",)),
        (("sparkdlq.io",), ("deadletterpolicies/finalizers",)),
        (("sparkdlq.io",), ("deadletterredrives",)),
        (("sparkdlq.io",), ("deadletterredrives/status",)),
        (("sparkdlq.io",), ("deadletterredrives/finalizers",)),
        (("",), ("pods",)),
        (("",), ("configmaps",)),
        (("sparkoperator.k8s.io",), ("sparkapplications",)),
        (("kafka.strimzi.io",), ("kafkatopics",)),
        (("",), ("events",)),
        (("apiextensions.k8s.io",), ("customresourcedefinitions",)),
        (("",), ("namespaces",)),
        (("sparkdlq.io",), ("deadletterpolicyclasses",)),
        (("",), ("secrets",)),
    }
    assert documented_peering_verbs() == {"get", "list", "watch", "patch"}


def test_kopf_looks_at_namespaces_only_when_not_cluster_wide() -> None:
    """Why the chart grants namespaces list/watch only to a namespace-scoped operator."""
    from kopf._core.reactor import observation

    source = inspect.getsource(observation.namespace_observer)
    assert source.count("not settings.scanning.disabled and not clusterwide") == 2
