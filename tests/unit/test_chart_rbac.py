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

from spark_dlq_operator import identity
from tests.chart import (
    DRIVER_RULES,
    NAMESPACE,
    RELEASE,
    Grant,
    documented_peering_verbs,
    documented_rules,
    driver_cluster_role,
    find,
    granted,
    needed,
    one,
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
        {
            "spark": {
                "serviceAccount": {"create": False, "name": "spark"},
                "rbac": {"create": False, "clusterRoleName": "platform-spark-driver"},
            }
        },
        id="existing-spark-account-and-role",
    ),
    pytest.param(
        {"operator": {"watch": {"allNamespaces": False}}, "spark": {"rbac": {"clusterRoleName": "drivers"}}},
        id="namespaced-named-driver-role",
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


def test_spark_drivers_get_a_cluster_role_with_their_executor_pods_only_bound_by_the_operator() -> None:
    """The chart makes the drivers' ClusterRole and binds it to nobody: the operator binds it,
    per policy, in the policy's namespace. No Spark Role, RoleBinding or service account."""
    objects = render()
    role = one(objects, "ClusterRole", driver_cluster_role({}))
    assert role["rules"] == list(DRIVER_RULES)
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        assert not [b for b in find(objects, kind) if b["roleRef"]["name"] == driver_cluster_role({})]
    spark = [
        o for o in objects if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "spark"
    ]
    assert [o["kind"] for o in spark] == ["ClusterRole"]


def test_the_operator_may_bind_the_drivers_cluster_role_and_no_other() -> None:
    for case in CASES:
        values = case.values[0]
        got = granted(render(values), namespace=NAMESPACE, name=OPERATOR_SA)
        binds = {
            g
            for g in got
            if g.verb in ("bind", "escalate") or g.resource in ("clusterroles", "clusterrolebindings")
        }
        scopes = {g.scope for g in got if g.resource == "deadletterpolicies"}
        assert binds == {
            Grant(scope, "rbac.authorization.k8s.io", "clusterroles", "bind", driver_cluster_role(values))
            for scope in scopes
        }, case.id


def test_the_operator_holds_every_right_of_the_lease_role_it_grants() -> None:
    """RBAC lets a Role be written only by who holds its rights (or may escalate, which the
    operator may not)."""
    for case in CASES:
        got = granted(render(case.values[0]), namespace=NAMESPACE, name=OPERATOR_SA)
        scopes = {g.scope for g in got if g.resource == "deadletterpolicies"}
        for scope in scopes:
            verbs = {g.verb for g in got if g.resource == "leases" and g.scope == scope and not g.name}
            assert set(identity.LEASE_VERBS) <= verbs, case.id


def test_a_shared_spark_account_is_made_only_when_named_and_asked() -> None:
    assert not find(render(), "ServiceAccount", namespace="payments")
    shared = {"spark": {"namespaces": ["payments"], "serviceAccount": {"name": "spark", "create": True}}}
    assert one(render(shared), "ServiceAccount", "spark", "payments")


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
        (("",), ("serviceaccounts",)),
        (("coordination.k8s.io",), ("leases",)),
        (("rbac.authorization.k8s.io",), ("roles", "rolebindings")),
        (("rbac.authorization.k8s.io",), ("clusterroles",)),
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


#: What Spark 4.2's spark-submit does with a NetworkPolicy (``NetworkPolicyFeatureStep``: a
#: server-side apply, a delete when the submission fails).
SUBMITTER_NETWORK_POLICY_VERBS = ("create", "get", "patch", "delete")


@pytest.mark.parametrize(
    ("values", "namespaces"),
    [
        pytest.param({}, {NAMESPACE}, id="cluster-wide-release-namespace"),
        pytest.param({"spark": {"namespaces": ["payments", "orders"]}}, {"payments", "orders"}, id="spark"),
        pytest.param(
            {"operator": {"watch": {"allNamespaces": False, "namespaces": ["payments"]}}},
            {"payments"},
            id="watched",
        ),
    ],
)
def test_the_spark_operator_may_make_sparks_network_policy_where_policies_run_and_nothing_else(
    values: dict[str, Any], namespaces: set[str]
) -> None:
    got = granted(render(values), namespace="spark-operator", name="spark-operator-controller")
    assert got == {
        Grant(namespace, "networking.k8s.io", "networkpolicies", verb)
        for namespace in namespaces
        for verb in SUBMITTER_NETWORK_POLICY_VERBS
    }


def test_the_spark_operators_network_policy_rights_follow_its_account_and_can_be_left_out() -> None:
    named = {"sparkOperator": {"controllerServiceAccount": {"name": "submitter", "namespace": "ops"}}}
    assert {g.verb for g in granted(render(named), namespace="ops", name="submitter")} == set(
        SUBMITTER_NETWORK_POLICY_VERBS
    )
    for values in (
        {"sparkOperator": {"rbac": {"networkPolicies": False}}},
        {"spark": {"networkPolicy": False}},
    ):
        objects = render(values)
        assert not [o for o in objects if "networkpolicies" in str(o.get("rules", ""))]
        assert not [o for o in objects if o["metadata"]["name"].endswith("-spark-network-policies")]
    # Without Spark's policies the operator excludes the step that makes them.
    [deployment] = [o for o in render({"spark": {"networkPolicy": False}}) if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "SPARK_DLQ_SPARK_NETWORK_POLICY", "value": "false"} in container["env"]
