"""Who a policy's Spark pods are: a service account of their own, and the least it may do.

Before, every driver of a namespace ran as one service account with every verb on the
namespace's pods, Services and ConfigMaps: any policy's Spark pod could rewrite another
policy's ``policy.yaml`` or forge the heartbeat the operator's supervisor trusts (issue 26).
Now, for a policy ``P`` whose SparkApplication is ``A`` (``naming.application_name``), the
operator writes, all owned by the policy and labelled like its other objects:

- ServiceAccount ``A-spark``, the driver's and the executors' (the executors get no token
  unless the class says so: ``render.spark_application``);
- Lease ``A-heartbeat`` (``coordination.k8s.io/v1``): the driver patches its heartbeat into
  the annotation ``sparkdlq.io/heartbeat``. Its ``spec`` is left empty for a holder that writes
  it with a ``resourceVersion`` (the checkpoint's lease of issue 28 may move there);
- Role ``A-heartbeat``: ``get``, ``update``, ``patch`` of that one Lease (``resourceNames``),
  the only object of the namespace the service account may write;
- RoleBinding ``A-heartbeat``, the service account to that Role, and RoleBinding ``A-spark``,
  the service account to the platform's ClusterRole for drivers (``--spark-driver-cluster-role``:
  what Spark's driver does with its executor pods, nothing else).

What the platform decides about that identity is the pods' fit the class gives
(``governance.PodFit``): when it names one existing service account for the Spark pods (the
class's ``pods.serviceAccountName``, else the operator's ``--spark-service-account``:
``render.shared_service_account``), no service account is made and both bindings name that one:
every policy's driver running as it may then write every such policy's Lease in the namespace,
a weaker isolation that docs/security.md ("Least privilege") states. The class's
``pods.serviceAccountAnnotations`` go on the per-policy service account only.

Pure functions: the manifests, and whether a SparkApplication's identity is the one wanted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from spark_dlq_operator import naming, render
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import PodFit
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.render import Manifest

RBAC_GROUP: Final = "rbac.authorization.k8s.io"
COORDINATION_GROUP: Final = "coordination.k8s.io"
#: What the driver may do to its own Lease: read it, patch the heartbeat in, and replace it with
#: its ``resourceVersion`` (what a holder writing the Lease's spec does).
LEASE_VERBS: Final = ("get", "update", "patch")


def _metadata(name: str, namespace: str, policy_name: str, owner: Owner) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": naming.labels(policy_name),
        "ownerReferences": [owner.reference()],
    }


def manifests(
    policy_name: str, *, namespace: str, owner: Owner, fit: PodFit, config: OperatorConfig
) -> list[Manifest]:
    """The objects that give a policy's Spark pods their identity, in the order they are
    created: the service account (unless a shared one is named), the Lease, the Role on it,
    and the two RoleBindings (the second to ``config.spark_driver_cluster_role``)."""
    account = render.spark_service_account(policy_name, fit, config)
    lease = naming.lease_name(policy_name)
    subjects = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    objects: list[Manifest] = []
    if not render.shared_service_account(fit, config):
        metadata = _metadata(account, namespace, policy_name, owner)
        if fit.service_account_annotations:
            metadata["annotations"] = dict(sorted(fit.service_account_annotations.items()))
        objects.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata})
    objects += [
        {
            "apiVersion": f"{COORDINATION_GROUP}/v1",
            "kind": "Lease",
            "metadata": _metadata(lease, namespace, policy_name, owner),
            "spec": {},
        },
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "Role",
            "metadata": _metadata(lease, namespace, policy_name, owner),
            "rules": [
                {
                    "apiGroups": [COORDINATION_GROUP],
                    "resources": ["leases"],
                    "resourceNames": [lease],
                    "verbs": list(LEASE_VERBS),
                }
            ],
        },
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(lease, namespace, policy_name, owner),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": lease},
            "subjects": subjects,
        },
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(naming.service_account_name(policy_name), namespace, policy_name, owner),
            "roleRef": {
                "apiGroup": RBAC_GROUP,
                "kind": "ClusterRole",
                "name": config.spark_driver_cluster_role,
            },
            "subjects": subjects,
        },
    ]
    return objects


#: The fields the operator keeps as it wrote them, per kind (``metadata`` only its labels,
#: annotations and owner references, which it merges: others may add their own).
_KEPT: Final[Mapping[str, Sequence[str]]] = {
    "ServiceAccount": (),
    "Lease": (),
    "Role": ("rules",),
    "RoleBinding": ("subjects",),
}


def repair(current: Mapping[str, Any], desired: Manifest) -> dict[str, Any] | None:
    """The merge patch that brings ``current`` back to ``desired`` (labels and annotations it
    names, its owner references, its rules or subjects), None when nothing differs. A Lease's
    annotations and spec are its driver's and holder's, never repaired."""
    patch: dict[str, Any] = {}
    for key in _KEPT[desired["kind"]]:
        if current.get(key) != desired[key]:
            patch[key] = desired[key]
    metadata = current.get("metadata") or {}
    wanted: dict[str, Any] = {}
    for key in ("labels", "annotations"):
        want = desired["metadata"].get(key) or {}
        if any((metadata.get(key) or {}).get(k) != v for k, v in want.items()):
            wanted[key] = want
    if metadata.get("ownerReferences") != desired["metadata"]["ownerReferences"]:
        wanted["ownerReferences"] = desired["metadata"]["ownerReferences"]
    if wanted:
        patch["metadata"] = wanted
    return patch or None


def conflict(current: Mapping[str, Any], owner: Owner, *, kind: str) -> str | None:
    """Why ``current`` (a ``kind`` with the name of one of the policy's identity objects) cannot
    be the policy's, None when it is: the policy is its controller, or it has no controller and
    carries the policy's labels (it is adopted)."""
    metadata = current.get("metadata") or {}
    name = metadata.get("name")
    for ref in metadata.get("ownerReferences") or []:
        if ref.get("controller"):
            if ref.get("uid") == owner.uid:
                return None
            return f"{kind} {name} belongs to {ref.get('kind')} {ref.get('name')}: rename the policy"
    labels = metadata.get("labels") or {}
    if labels == {**labels, **naming.labels(owner.name)}:
        return None
    return f"{kind} {name} exists and is not managed by spark-dlq: delete or rename it"


def rebind(current: Mapping[str, Any], desired: Manifest) -> str | None:
    """Why a RoleBinding cannot be repaired in place: it names another role (a binding's
    ``roleRef`` never changes, e.g. after a new ``--spark-driver-cluster-role``); None when it
    names the desired one."""
    want, have = desired.get("roleRef"), current.get("roleRef")
    if want is None or have == want:
        return None
    name = desired["metadata"]["name"]
    return (
        f"RoleBinding {name} binds {(have or {}).get('kind')} {(have or {}).get('name')}, not "
        f"{want['kind']} {want['name']}: delete it and the operator makes it again"
    )


def moved(app: Mapping[str, Any], desired: Mapping[str, Any]) -> str | None:
    """What changed in the Spark pods' identity between an existing SparkApplication and the
    desired one (their service account, the executors' token), None when nothing did. A change
    is written like a configuration change: the spark-operator resubmits the job."""

    def identity(manifest: Mapping[str, Any]) -> tuple[object, object]:
        spec = manifest.get("spec") or {}
        driver, executor = spec.get("driver") or {}, spec.get("executor") or {}
        template = (executor.get("template") or {}).get("spec") or {}
        return driver.get("serviceAccount"), template.get("automountServiceAccountToken")

    (old_account, old_token), (new_account, new_token) = identity(app), identity(desired)
    if old_account != new_account:
        return f"the Spark pods' service account changed from {old_account} to {new_account}"
    if old_token != new_token:
        return f"the executors' service-account token changed from {old_token} to {new_token}"
    return None
