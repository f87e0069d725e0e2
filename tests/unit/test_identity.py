"""Who a policy's Spark pods are: the service account, Lease, Role and RoleBindings the operator
writes for them, and what it repairs, refuses and restarts for."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from spark_dlq_operator import identity, naming, render
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import NO_FIT, PodFit
from spark_dlq_operator.naming import Owner
from tests.policy_builder import policy

OWNER = Owner(name="orders-billing", namespace="payments", uid="uid-1")
LABELS = {"app.kubernetes.io/managed-by": "spark-dlq-operator", "sparkdlq.io/policy": "orders-billing"}
META = {"namespace": "payments", "labels": LABELS, "ownerReferences": [OWNER.reference()]}
ACCOUNT = [{"kind": "ServiceAccount", "name": "orders-billing-spark", "namespace": "payments"}]


CONFIG = OperatorConfig(spark_driver_cluster_role="dlq-spark-driver")


def manifests(fit: PodFit = NO_FIT, config: OperatorConfig = CONFIG) -> list[dict[str, Any]]:
    return identity.manifests("orders-billing", namespace="payments", owner=OWNER, fit=fit, config=config)


def test_a_policy_gets_an_account_a_lease_and_rights_on_that_lease_only() -> None:
    assert manifests() == [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "orders-billing-spark", **META}},
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "orders-billing-heartbeat", **META},
            "spec": {},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "orders-billing-heartbeat", **META},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": ["orders-billing-heartbeat"],
                    "verbs": ["get", "update", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "orders-billing-heartbeat", **META},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "orders-billing-heartbeat",
            },
            "subjects": ACCOUNT,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "orders-billing-spark", **META},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "dlq-spark-driver",
            },
            "subjects": ACCOUNT,
        },
    ]


def test_the_names_follow_the_application_name() -> None:
    """A policy name that is no DNS-1035 label gets the application's derived name in them."""
    [account, lease, *_] = identity.manifests(
        "v1.orders", namespace="payments", owner=OWNER, fit=NO_FIT, config=CONFIG
    )
    app = naming.application_name("v1.orders")
    assert (account["metadata"]["name"], lease["metadata"]["name"]) == (f"{app}-spark", f"{app}-heartbeat")
    assert account["metadata"]["labels"]["sparkdlq.io/policy"] == "v1.orders"


def test_the_accounts_annotations_come_from_the_class() -> None:
    [account, *_] = manifests(PodFit(service_account_annotations={"iam.example.com/role": "dlq"}))
    assert account["metadata"]["annotations"] == {"iam.example.com/role": "dlq"}


@pytest.mark.parametrize(
    ("fit", "config", "shared"),
    [
        pytest.param(PodFit(service_account="platform-spark"), CONFIG, "platform-spark", id="class"),
        pytest.param(
            NO_FIT,
            OperatorConfig(
                spark_service_account="platform-spark", spark_driver_cluster_role="dlq-spark-driver"
            ),
            "platform-spark",
            id="operator",
        ),
        pytest.param(
            PodFit(service_account="class-spark"),
            OperatorConfig(
                spark_service_account="operator-spark", spark_driver_cluster_role="dlq-spark-driver"
            ),
            "class-spark",
            id="class-wins",
        ),
    ],
)
def test_a_shared_account_is_bound_but_not_made(fit: PodFit, config: OperatorConfig, shared: str) -> None:
    objects = manifests(PodFit(**{**_fields(fit), "service_account_annotations": {"a": "b"}}), config)
    assert [o["kind"] for o in objects] == ["Lease", "Role", "RoleBinding", "RoleBinding"]
    subjects = [{"kind": "ServiceAccount", "name": shared, "namespace": "payments"}]
    assert [o["subjects"] for o in objects[2:]] == [subjects, subjects]
    assert render.spark_service_account("orders-billing", fit, config) == shared


def test_without_a_shared_account_each_policy_has_its_own() -> None:
    assert render.spark_service_account("orders-billing", NO_FIT, CONFIG) == "orders-billing-spark"


def _fields(fit: PodFit) -> dict[str, Any]:
    return {f: getattr(fit, f) for f in fit.__slots__}


def stored(desired: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``desired`` as the API server returns it, with ``changes`` made by someone."""
    current = copy.deepcopy(desired)
    current["metadata"].update(uid="x", resourceVersion="7")
    current.update(changes)
    return current


def test_nothing_to_repair_in_what_the_operator_wrote() -> None:
    for desired in manifests():
        assert identity.repair(stored(desired), desired) is None


def test_the_heartbeat_and_other_annotations_on_the_lease_are_left_alone() -> None:
    lease = manifests()[1]
    current = stored(lease, spec={"holderIdentity": "pod-1"})
    current["metadata"]["annotations"] = {naming.HEARTBEAT_ANNOTATION: "{}", "team": "billing"}
    assert identity.repair(current, lease) is None


@pytest.mark.parametrize(
    ("index", "change", "patch"),
    [
        pytest.param(
            2,
            {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
            {"rules": manifests()[2]["rules"]},
            id="role-rules",
        ),
        pytest.param(3, {"subjects": []}, {"subjects": ACCOUNT}, id="binding-subjects"),
    ],
)
def test_changed_rules_and_subjects_are_put_back(
    index: int, change: dict[str, Any], patch: dict[str, Any]
) -> None:
    desired = manifests()[index]
    assert identity.repair(stored(desired, **change), desired) == patch


def test_lost_labels_and_owner_are_put_back() -> None:
    desired = manifests()[0]
    current = stored(desired)
    current["metadata"]["labels"] = {"team": "billing"}
    current["metadata"].pop("ownerReferences")
    assert identity.repair(current, desired) == {
        "metadata": {"labels": LABELS, "ownerReferences": [OWNER.reference()]}
    }


def test_an_object_of_another_policy_or_of_nobody_is_not_taken() -> None:
    desired = manifests()[0]
    other = stored(desired)
    other["metadata"]["ownerReferences"] = [
        {"kind": "DeadLetterPolicy", "name": "other", "uid": "uid-2", "controller": True}
    ]
    assert identity.conflict(other, OWNER, kind="ServiceAccount") == (
        "ServiceAccount orders-billing-spark belongs to DeadLetterPolicy other: rename the policy"
    )
    foreign = {"metadata": {"name": "orders-billing-spark", "labels": {"team": "billing"}}}
    assert identity.conflict(foreign, OWNER, kind="ServiceAccount") == (
        "ServiceAccount orders-billing-spark exists and is not managed by spark-dlq: delete or rename it"
    )
    mine = stored(desired)
    assert identity.conflict(mine, OWNER, kind="ServiceAccount") is None
    orphan = stored(desired)
    orphan["metadata"].pop("ownerReferences")
    assert identity.conflict(orphan, OWNER, kind="ServiceAccount") is None


def test_a_binding_of_another_role_is_not_bent_but_named() -> None:
    desired = manifests()[4]
    old = stored(
        desired, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "old"}
    )
    assert identity.rebind(old, desired) == (
        "RoleBinding orders-billing-spark binds ClusterRole old, not ClusterRole dlq-spark-driver: "
        "delete it and the operator makes it again"
    )
    assert identity.rebind(stored(desired), desired) is None
    assert identity.rebind(stored(manifests()[0]), manifests()[0]) is None


APP_CONFIG = OperatorConfig(checkpoint_base="s3a://cp")


def test_a_new_account_or_executor_token_moves_the_job() -> None:
    app = render.spark_application(policy(), config=APP_CONFIG, owner=OWNER)
    assert identity.moved(app, app) is None
    shared = render.spark_application(
        policy(), config=APP_CONFIG, owner=OWNER, fit=PodFit(service_account="spark-dlq-driver")
    )
    assert identity.moved(shared, app) == (
        "the Spark pods' service account changed from spark-dlq-driver to orders-billing-spark"
    )
    token = render.spark_application(
        policy(), config=APP_CONFIG, owner=OWNER, fit=PodFit(executor_service_account_token=True)
    )
    assert identity.moved(app, token) == "the executors' service-account token changed from False to True"
