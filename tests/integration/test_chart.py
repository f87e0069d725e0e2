"""The Helm chart against a real kube-apiserver (1.30, RBAC and PodSecurity admission on).

- Every object the chart renders, for the default and the non-default values, passes a
  server-side dry-run apply with strict field validation (kubectl --server-side --dry-run=server).
- The operator pod satisfies the restricted Pod Security Standard as the apiserver enforces it.
- A real ``helm install`` of the chart's package (``helm package``, as `make dist` makes it, which
  ``helm lint --strict`` passes) gives the operator's service account exactly the rights it
  needs, asked of the apiserver's authorizer (SubjectAccessReview), and prints NOTES that say
  what to apply next.
- The example policies (GitOps folder, kind script) are accepted by the CRD.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from spark_dlq_devtools.dist import check_chart, package_chart
from spark_dlq_devtools.paths import REPO_ROOT, kubernetes_bin, prometheus_operator_crds
from tests.chart import (
    CI_VALUES,
    CLUSTER_SCOPED,
    DRIVER_RULES,
    KOPF_PEERING_CRDS,
    Grant,
    driver_cluster_role,
    helm,
    needed,
    one,
    render,
    render_text,
)
from tests.conftest import unique
from tests.integration.crds import install_crds

#: Namespaces the ci/ values files name.
FIXED_NAMESPACES = ("kafka", "payments")


@pytest.fixture(scope="module")
def chart_cluster(kube_api: Any, dlp_crd: str) -> Any:
    """The apiserver with our CRD, kopf's peering CRDs and the namespaces ci/ values name."""
    install_crds(kube_api, [KOPF_PEERING_CRDS, *prometheus_operator_crds()])
    core = client.CoreV1Api(kube_api)
    for name in FIXED_NAMESPACES:
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        except ApiException as error:
            if error.status != 409:
                raise
    return kube_api


@pytest.fixture(scope="module")
def chart_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart as released: its package, checked as `make dist` checks it."""
    package = package_chart(tmp_path_factory.mktemp("chart"))
    check_chart(package)
    return package


@pytest.fixture
def make_namespace(chart_cluster: Any) -> Iterator[Callable[..., str]]:
    core = client.CoreV1Api(chart_cluster)
    made: list[str] = []

    def make(prefix: str = "t", labels: dict[str, str] | None = None) -> str:
        name = unique(prefix)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        made.append(name)
        return name

    yield make
    for name in made:
        core.delete_namespace(name)


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(kubernetes_bin("kubectl")), "--kubeconfig", kubeconfig, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def dry_run_apply(kubeconfig: str, manifests: str) -> subprocess.CompletedProcess[str]:
    """Server-side apply, dry run: admission, strict field validation, nothing stored."""
    return kubectl(
        kubeconfig,
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        "--field-manager=chart-test",
        "--validate=strict",
        "-f",
        "-",
        stdin=manifests,
    )


# --- every rendered object is accepted -----------------------------------------------------------


CASES: list[Any] = [
    pytest.param(lambda ns: {}, id="defaults"),
    pytest.param(
        lambda ns: {"operator": {"watch": {"allNamespaces": False, "namespaces": [ns("a"), ns("b")]}}},
        id="namespace-scoped",
    ),
    pytest.param(
        lambda ns: {
            "topics": {
                "strimzi": {"enabled": True, "namespaces": [ns("kafka")]},
            },
            "defaultClass": {
                "brokers": [
                    {"bootstrapServers": "kafka.kafka:9092", "operatorSecretRef": {"name": "kafka-admin"}}
                ]
            },
        },
        id="strimzi",
    ),
    pytest.param(
        lambda ns: {"operator": {"replicas": 2, "strategy": "RollingUpdate"}}, id="peering-cluster-wide"
    ),
    pytest.param(
        lambda ns: {
            "operator": {"replicas": 2, "watch": {"allNamespaces": False, "namespaces": [ns("a"), ns("b")]}}
        },
        id="peering-namespaced",
    ),
    pytest.param(
        lambda ns: {
            "spark": {
                "namespaces": [ns("payments")],
                "serviceAccount": {"create": False, "name": "spark"},
                "rbac": {"create": False, "clusterRoleName": "platform-spark-driver"},
            }
        },
        id="existing-spark-account",
    ),
    pytest.param(
        lambda ns: {
            "operator": {
                "extraEnv": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "dlq", "effect": "NoSchedule"}
                ],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
                "metrics": {"port": 0},
            }
        },
        id="scheduling-and-env",
    ),
    pytest.param(
        lambda ns: {
            "defaultClass": {
                "name": unique("gold"),
                "namespaceSelector": {"matchLabels": {"team": "billing"}},
                "defaults": {
                    "retry": {"maxRedeliverCount": 3, "backoff": {"type": "fixed", "delay": "5s"}},
                    "topics": {"deadLetterConfig": {"retention.ms": "2592000000"}},
                    "spark": {"trigger": "2s", "executor": {"instances": 2}},
                },
                "brokers": [
                    {
                        "bootstrapServers": "kafka.kafka:9092",
                        "operatorSecretRef": {"name": "op-kafka"},
                        "engineSecretName": "kafka-client",
                    }
                ],
                "images": {"default": "registry/spark-dlq:1", "allowed": ["registry/team-*"]},
                "sparkConf": {"fixed": {"spark.driver.extraJavaOptions": "-Dx=1"}},
                "limits": {"maxRedeliverCount": 10, "minTrigger": "1s", "executor": {"maxInstances": 4}},
                "storage": {"checkpointBase": "s3a://cp", "deadLetterTableBase": "s3a://tables"},
                "pods": {
                    "imagePullSecrets": [{"name": "registry"}],
                    "nodeSelector": {"pool": "spark"},
                    "tolerations": [{"key": "spark", "operator": "Exists", "effect": "NoSchedule"}],
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 10,
                                    "podAffinityTerm": {
                                        "labelSelector": {"matchLabels": {"spark-role": "driver"}},
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "labels": {"cost": "dlq"},
                    "policyMayOverride": ["labels", "tolerations"],
                },
            }
        },
        id="a-default-class-with-every-section",
    ),
]


@pytest.mark.parametrize("values", CASES)
def test_rendered_objects_pass_a_server_side_dry_run(
    values: Callable[..., dict[str, Any]], kubeconfig: str, make_namespace: Callable[..., str]
) -> None:
    release_namespace = make_namespace("rel")
    manifests = render_text(values(make_namespace), namespace=release_namespace, include_crds=True)
    objects = [d for d in yaml.safe_load_all(manifests) if d]
    result = dry_run_apply(kubeconfig, manifests)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    applied = [line for line in result.stdout.splitlines() if line.endswith("(server dry run)")]
    assert len(applied) == len(objects), result.stdout


@pytest.mark.parametrize("values_file", CI_VALUES, ids=lambda p: p.name)
def test_ci_values_pass_a_server_side_dry_run(
    values_file: Path, kubeconfig: str, make_namespace: Callable[..., str]
) -> None:
    manifests = render_text(namespace=make_namespace("rel"), values_files=[values_file])
    result = dry_run_apply(kubeconfig, manifests)
    assert result.returncode == 0, result.stderr


def test_an_unknown_field_would_be_refused(kubeconfig: str, make_namespace: Callable[..., str]) -> None:
    """The dry run above is strict: a misspelt field in a template would fail it."""
    manifests = render_text(namespace=make_namespace("rel"))
    broken = manifests.replace("automountServiceAccountToken: true", "automountServiceAccountTokens: true")
    assert broken != manifests
    result = dry_run_apply(kubeconfig, broken)
    assert result.returncode != 0
    assert "automountServiceAccountTokens" in result.stderr


# --- restricted pod security -----------------------------------------------------------------------


def operator_pod(objects: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    template = one(objects, "Deployment")["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": unique("operator"),
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
        },
        "spec": copy.deepcopy(template["spec"]),
    }


@pytest.mark.parametrize("values", [{}, {"operator": {"replicas": 2}}], ids=["standalone", "peering"])
def test_operator_pod_is_admitted_under_restricted_pod_security(
    values: dict[str, Any], chart_cluster: Any, kubeconfig: str, make_namespace: Callable[..., str]
) -> None:
    restricted = make_namespace(
        "restricted",
        labels={
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
            "pod-security.kubernetes.io/warn": "restricted",
            "pod-security.kubernetes.io/warn-version": "latest",
        },
    )
    objects = render(values, namespace=restricted)
    core = client.CoreV1Api(chart_cluster)
    core.create_namespaced_pod(restricted, operator_pod(objects, restricted), dry_run="All")
    # The Deployment draws no PodSecurity warning either.
    result = dry_run_apply(kubeconfig, yaml.safe_dump(one(objects, "Deployment")))
    assert result.returncode == 0, result.stderr
    assert "PodSecurity" not in result.stderr, result.stderr


def test_restricted_pod_security_is_really_enforced(
    chart_cluster: Any, make_namespace: Callable[..., str]
) -> None:
    """The control for the test above: the same pod without its security settings is refused."""
    restricted = make_namespace("restricted", labels={"pod-security.kubernetes.io/enforce": "restricted"})
    pod = operator_pod(render(namespace=restricted), restricted)
    del pod["spec"]["securityContext"]
    del pod["spec"]["containers"][0]["securityContext"]
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(chart_cluster).create_namespaced_pod(restricted, pod, dry_run="All")
    assert refused.value.status == 403
    assert "violates PodSecurity" in str(refused.value.body)


@pytest.mark.parametrize("role", ["driver", "executor"])
def test_spark_pods_are_admitted_under_restricted_pod_security(
    role: str, chart_cluster: Any, make_namespace: Callable[..., str]
) -> None:
    """The driver and executor pods, as spark-submit builds them from the pod templates of the
    SparkApplication the operator renders (pod and container security contexts, the policy and
    secret volumes)."""
    from spark_dlq_operator import naming
    from spark_dlq_operator import render as operator_render
    from spark_dlq_operator.config import OperatorConfig
    from tests.policy_builder import policy

    restricted = make_namespace(
        "restricted",
        labels={
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
        },
    )
    spec = operator_render.spark_application(
        policy({"spec.broker.secretRef": {"name": "kafka-client"}}),
        config=OperatorConfig(),
        owner=naming.Owner(name="billing", namespace=restricted, uid="uid-1"),
    )["spec"]
    # spark-submit starts from the pod template and adds its own fields (image, ports, env).
    template = copy.deepcopy(spec[role]["template"])
    template["spec"]["containers"][0]["image"] = spec["image"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": unique(role), "namespace": restricted},
        "spec": template["spec"],
    }
    core = client.CoreV1Api(chart_cluster)
    core.create_namespaced_pod(restricted, pod, dry_run="All")
    # The control: without the container's security context the same pod is refused.
    del pod["spec"]["containers"][0]["securityContext"]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(restricted, pod, dry_run="All")
    assert refused.value.status == 403
    assert "violates PodSecurity" in str(refused.value.body)


# --- a real install: RBAC as the authorizer sees it --------------------------------------------------


#: Rights the operator must not have, whatever the values (checked beside everything it needs).
NOT_NEEDED = [
    ("", "secrets", "get"),
    ("", "secrets", "list"),
    ("", "pods", "create"),
    ("", "pods", "list"),
    ("", "configmaps", "delete"),
    ("", "configmaps", "update"),
    ("", "services", "create"),
    ("sparkdlq.io", "deadletterpolicies", "update"),
    ("sparkdlq.io", "deadletterpolicies", "delete"),
    ("sparkdlq.io", "deadletterpolicies", "create"),
    ("sparkdlq.io", "deadletterpolicies/status", "update"),
    ("sparkoperator.k8s.io", "sparkapplications", "deletecollection"),
    ("", "events", "delete"),
    ("kafka.strimzi.io", "kafkatopics", "create"),
    ("kafka.strimzi.io", "kafkatopics", "update"),
    ("kopf.dev", "kopfpeerings", "delete"),
    # The Spark pods' identity: made and repaired, never deleted (owner references do), and no
    # right beyond what the operator holds: no escalate, no bind but of the drivers' ClusterRole.
    ("", "serviceaccounts", "delete"),
    ("", "serviceaccounts/token", "create"),
    ("coordination.k8s.io", "leases", "delete"),
    ("rbac.authorization.k8s.io", "roles", "escalate"),
    ("rbac.authorization.k8s.io", "roles", "bind"),
    ("rbac.authorization.k8s.io", "rolebindings", "delete"),
    ("rbac.authorization.k8s.io", "clusterroles", "bind"),
    ("rbac.authorization.k8s.io", "clusterroles", "escalate"),
]
NOT_NEEDED_CLUSTER = [
    ("", "namespaces", "list"),
    ("", "namespaces", "create"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "create"),
    ("kopf.dev", "clusterkopfpeerings", "list"),
    ("", "nodes", "list"),
    ("rbac.authorization.k8s.io", "clusterrolebindings", "create"),
    ("rbac.authorization.k8s.io", "clusterroles", "create"),
]


def allowed(
    api: Any,
    user_namespace: str,
    user: str,
    *,
    scope: str,
    group: str,
    resource: str,
    verb: str,
    name: str = "",
) -> bool:
    resource, _, subresource = resource.partition("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{user_namespace}:{user}",
            groups=[
                "system:serviceaccounts",
                f"system:serviceaccounts:{user_namespace}",
                "system:authenticated",
            ],
            resource_attributes=client.V1ResourceAttributes(
                namespace=None if scope == "*" else scope,
                group=group,
                resource=resource,
                subresource=subresource or None,
                verb=verb,
                name=name or None,
            ),
        )
    )
    result = client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(result.status.allowed)


INSTALLS: list[Any] = [
    pytest.param(
        lambda ns: {"topics": {"strimzi": {"enabled": True, "namespaces": [ns("kafka")]}}},
        id="cluster-wide-strimzi",
    ),
    pytest.param(
        lambda ns: {
            "operator": {"replicas": 2, "watch": {"allNamespaces": False, "namespaces": [ns("a"), ns("b")]}}
        },
        id="namespaced-peering",
    ),
]


@pytest.mark.parametrize("values", INSTALLS)
def test_helm_install_grants_exactly_what_the_operator_needs(
    values: Callable[..., dict[str, Any]],
    chart_package: Path,
    chart_cluster: Any,
    kubeconfig: str,
    make_namespace: Callable[..., str],
) -> None:
    release_namespace = make_namespace("rel")
    chosen = values(make_namespace)
    release = unique("dlq")
    values_file = Path(kubeconfig).parent / f"{release}-values.yaml"
    values_file.write_text(yaml.safe_dump(chosen))
    installed = helm(
        "install",
        release,
        str(chart_package),
        "--namespace",
        release_namespace,
        "--values",
        str(values_file),
        "--kubeconfig",
        kubeconfig,
    )
    try:
        notes = installed.stdout.split("NOTES:", 1)[1]
        assert "kubectl apply --server-side -f" in notes
        assert "DeadLetterPolicy" in notes
        account = f"{release}-spark-dlq-operator"
        want = needed(chosen, release_namespace=release_namespace, release=release)
        scopes = {"*", release_namespace, make_namespace("other")} | {g.scope for g in want}
        rights = {(g.group, g.resource, g.verb, g.name) for g in want}
        rights |= {(*r, "") for r in [*NOT_NEEDED, *NOT_NEEDED_CLUSTER]}
        # The bind right is on one ClusterRole: another name is refused.
        rights |= {(g.group, g.resource, g.verb, "cluster-admin") for g in want if g.name}
        wrong = []
        for scope in sorted(scopes):
            for group, resource, verb, name in sorted(rights):
                cluster_scoped = resource in CLUSTER_SCOPED or resource == "clusterkopfpeerings"
                if cluster_scoped != (scope == "*") and cluster_scoped:
                    continue
                expected = (
                    Grant(scope, group, resource, verb, name) in want
                    or Grant("*", group, resource, verb, name) in want
                )
                got = allowed(
                    chart_cluster,
                    release_namespace,
                    account,
                    scope=scope,
                    group=group,
                    resource=resource,
                    verb=verb,
                    name=name,
                )
                if got != expected:
                    wrong.append(f"{scope}: {group or 'core'}/{resource} {name} {verb}: allowed={got}")
        assert not wrong, wrong
        # The drivers' ClusterRole: their executor pods, nothing else (bound by the operator).
        role = client.RbacAuthorizationV1Api(chart_cluster).read_cluster_role(
            driver_cluster_role(chosen, release=release)
        )
        assert [chart_cluster.sanitize_for_serialization(r) for r in role.rules] == list(DRIVER_RULES)
    finally:
        helm("uninstall", release, "--namespace", release_namespace, "--kubeconfig", kubeconfig)
    rbac = client.RbacAuthorizationV1Api(chart_cluster)
    assert not [r for r in rbac.list_cluster_role().items if r.metadata.name.startswith(release)]


# --- example policies ------------------------------------------------------------------------------


def example_policies() -> list[Any]:
    gitops = [
        pytest.param(p, id=p.name)
        for p in sorted((REPO_ROOT / "examples" / "gitops" / "policies").glob("*.yaml"))
    ]
    examples = [
        pytest.param(REPO_ROOT / "examples" / name, id=name)
        for name in ("orders-billing.yaml", "orders-billing-pulsar.yaml")
    ]
    return [*gitops, *examples]


@pytest.mark.parametrize("path", example_policies())
def test_example_policies_are_accepted_by_the_crd(
    path: Path, chart_cluster: Any, make_namespace: Callable[..., str]
) -> None:
    text = path.read_text()
    namespace = make_namespace("policies")
    for document in [d for d in yaml.safe_load_all(text) if d]:
        document["metadata"]["namespace"] = namespace
        client.CustomObjectsApi(chart_cluster).create_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", namespace, "deadletterpolicies", document, dry_run="All"
        )
