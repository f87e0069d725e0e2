"""The Helm chart, rendered by the pinned helm: lint, templates, schema, layout, CRD drift.

Objects are checked as data here; tests/integration/test_chart.py sends them to a real
kube-apiserver. RBAC has its own file (test_chart_rbac.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_dlq_devtools.paths import REPO_ROOT, versions
from tests.chart import (
    CHART,
    CI_VALUES,
    KOPF_PEERING_CRDS,
    NAMESPACE,
    RELEASE,
    env_of,
    find,
    helm,
    one,
    render,
    render_text,
    template,
)

TOP_CRD = REPO_ROOT / "crds" / "sparkdlq.io_deadletterpolicies.yaml"
FULLNAME = f"{RELEASE}-spark-dlq-operator"
#: Values whose default is a Kubernetes structure (documented as a whole, not key by key).
KUBERNETES_VALUES = {
    "operator.resources",
    "operator.podSecurityContext",
    "operator.securityContext",
    "operator.affinity",
    # The chart's DeadLetterPolicyClass: sections empty by default, described by the schema and
    # the class CRD (the API server checks them on install).
    "defaultClass.namespaceSelector",
    "defaultClass.defaults",
    "defaultClass.limits",
    "defaultClass.pods.affinity",
}


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [only] = pod_spec(objects)["containers"]
    return dict(only)


# --- CRDs --------------------------------------------------------------------------------------


def test_crd_copies_in_the_chart_are_the_top_level_crds() -> None:
    top = sorted((REPO_ROOT / "crds").glob("*.yaml"))
    chart_crds = sorted(p.name for p in (CHART / "crds").iterdir() if p != KOPF_PEERING_CRDS)
    assert chart_crds == [p.name for p in top], "the chart's crds/ holds the top-level CRDs and kopf's"
    for crd in top:
        assert (CHART / "crds" / crd.name).read_bytes() == crd.read_bytes(), (
            "charts/spark-dlq-operator/crds/ drifted from crds/: "
            f"cp {crd.relative_to(REPO_ROOT)} charts/spark-dlq-operator/crds/"
        )


def test_crds_are_rendered_only_on_request() -> None:
    assert not find(render(), "CustomResourceDefinition")
    crds = find(render(include_crds=True), "CustomResourceDefinition")
    top = sorted((REPO_ROOT / "crds").glob("*.yaml"))
    expected = [yaml.safe_load(p.read_text()) for p in top] + list(
        yaml.safe_load_all(KOPF_PEERING_CRDS.read_text())
    )
    assert sorted(crds, key=lambda c: c["metadata"]["name"]) == sorted(
        expected, key=lambda c: c["metadata"]["name"]
    )


# --- lint --------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=lambda v: v.name if v else "defaults")
def test_lint_strict_passes(values: Path | None) -> None:
    args = ["lint", "--strict", str(CHART)] + (["--values", str(values)] if values else [])
    result = helm(*args)
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout, result.stdout
    assert "[ERROR]" not in result.stdout, result.stdout


def test_chart_versions_follow_the_project() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    import tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert chart["appVersion"] == project["version"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["spark"]["version"] == versions()["SPARK_VERSION"]


# --- the default install -----------------------------------------------------------------------


def test_default_renders_one_recreated_operator_watching_all_namespaces() -> None:
    objects = render()
    deployment = one(objects, "Deployment", FULLNAME, NAMESPACE)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    operator = container(objects)
    assert operator["image"] == "spark-dlq-operator:0.1.0"
    assert operator["command"] == ["dlq-operator"]
    assert operator["args"] == ["run"]
    env = env_of(deployment)
    assert env == {
        "SPARK_DLQ_ALL_NAMESPACES": "true",
        "SPARK_DLQ_SPARK_IMAGE": "spark-dlq:0.1.0",
        "SPARK_DLQ_SPARK_VERSION": versions()["SPARK_VERSION"],
        "SPARK_DLQ_CHECKPOINT_BASE": "/var/lib/spark-dlq/checkpoints",
        "SPARK_DLQ_SPARK_SERVICE_ACCOUNT": "",
        "SPARK_DLQ_SPARK_DRIVER_CLUSTER_ROLE": f"{FULLNAME}-spark-driver",
        "SPARK_DLQ_SPARK_NETWORK_POLICY": "true",
        "SPARK_DLQ_PROVISIONER": "admin",
        "SPARK_DLQ_LIVENESS": "http://0.0.0.0:8080/healthz",
        "SPARK_DLQ_METRICS_PORT": "9090",
        "SPARK_DLQ_RESYNC_INTERVAL": "60",
        "SPARK_DLQ_FINALIZER_TIMEOUT": "300",
        "SPARK_DLQ_STALL_TIMEOUT": "300",
        "SPARK_DLQ_PENDING_TIMEOUT": "300",
        "SPARK_DLQ_OPERATOR_NAMESPACE": NAMESPACE,
    }
    assert "SPARK_DLQ_PEERING" not in env
    assert pod_spec(objects)["serviceAccountName"] == FULLNAME
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} == {
        ("ServiceAccount", FULLNAME),
        ("ClusterRole", FULLNAME),
        ("ClusterRole", f"{FULLNAME}-view"),
        ("ClusterRole", f"{FULLNAME}-edit"),
        ("ClusterRole", f"{FULLNAME}-spark-driver"),
        ("ClusterRole", f"{FULLNAME}-spark-network-policies"),
        ("ClusterRoleBinding", FULLNAME),
        ("RoleBinding", f"{FULLNAME}-spark-network-policies"),
        ("Deployment", FULLNAME),
        ("DeadLetterPolicyClass", "standard"),
    }


def test_env_is_what_the_operator_cli_reads() -> None:
    from spark_dlq_operator.cli import config_from_args

    config = config_from_args(["run"], environ=env_of(one(render(), "Deployment")))
    assert config.all_namespaces
    assert config.namespaces == ()
    assert config.spark_image == "spark-dlq:0.1.0"
    assert config.liveness == "http://0.0.0.0:8080/healthz"
    assert config.provisioner == "admin"
    assert config.peering is None
    assert config.metrics_port == 9090
    assert (config.spark_service_account, config.spark_driver_cluster_role) == (
        "",
        f"{FULLNAME}-spark-driver",
    )
    assert config.resync_interval == 60
    assert (config.stall_timeout, config.pending_timeout) == (300, 300)
    assert config.operator_namespace == NAMESPACE


def test_liveness_probe_is_kopfs_endpoint() -> None:
    operator = container(render())
    probe = operator["livenessProbe"]["httpGet"]
    assert probe == {"path": "/healthz", "port": "liveness"}
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert ports == {"liveness": 8080, "metrics": 9090}


def test_pod_is_restricted() -> None:
    objects = render()
    pod = pod_spec(objects)["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert pod["runAsUser"] > 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container(objects)["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in security
    assert "hostNetwork" not in pod_spec(objects)
    mounts = {m["mountPath"] for m in container(objects)["volumeMounts"]}
    assert "/tmp" in mounts, "a writable /tmp beside the read-only root filesystem"
    assert container(objects)["resources"]["limits"]["memory"]


def test_metrics_port_zero_removes_the_port() -> None:
    objects = render({"operator": {"metrics": {"port": 0}}})
    assert env_of(one(objects, "Deployment"))["SPARK_DLQ_METRICS_PORT"] == "0"
    assert [p["name"] for p in container(objects)["ports"]] == ["liveness"]


# --- non-default installs ----------------------------------------------------------------------


def test_namespace_scoped_watches_the_given_namespaces() -> None:
    objects = render({"operator": {"watch": {"allNamespaces": False, "namespaces": ["payments", "orders"]}}})
    env = env_of(one(objects, "Deployment"))
    assert env["SPARK_DLQ_NAMESPACES"] == "payments,orders"
    assert "SPARK_DLQ_ALL_NAMESPACES" not in env
    assert {r["metadata"]["namespace"] for r in find(objects, "Role", FULLNAME)} == {"payments", "orders"}
    operator_roles = [
        r
        for r in find(objects, "ClusterRole")
        if not r["metadata"]["name"].endswith(("-view", "-edit", "-spark-driver", "-spark-network-policies"))
    ]
    assert [r["metadata"]["name"] for r in operator_roles] == [f"{FULLNAME}-scanning"]


def test_namespace_scoped_defaults_to_the_release_namespace() -> None:
    objects = render({"operator": {"watch": {"allNamespaces": False}}}, namespace="team-a")
    assert env_of(one(objects, "Deployment"))["SPARK_DLQ_NAMESPACES"] == "team-a"
    assert one(objects, "Role", FULLNAME)["metadata"]["namespace"] == "team-a"


def test_strimzi_on_grants_kafka_topics_in_the_kafka_namespace_only() -> None:
    objects = render(
        {
            "topics": {
                "strimzi": {"enabled": True, "namespaces": ["kafka"]},
            },
        }
    )
    env = env_of(one(objects, "Deployment"))
    assert env["SPARK_DLQ_PROVISIONER"] == "strimzi"
    role = one(objects, "Role", f"{FULLNAME}-kafkatopics")
    assert role["metadata"]["namespace"] == "kafka"
    assert role["rules"] == [
        {
            "apiGroups": ["kafka.strimzi.io"],
            "resources": ["kafkatopics"],
            "verbs": ["get", "list", "create", "patch", "delete"],
        }
    ]
    for rule in one(objects, "ClusterRole", FULLNAME)["rules"]:
        assert "kafka.strimzi.io" not in rule["apiGroups"]


# --- the default class --------------------------------------------------------------------------


def test_the_default_class_is_the_operator_built_in_class() -> None:
    """So a policy runs the same with the chart's class as with no class at all (CONTRACT 5)."""
    import dataclasses

    from spark_dlq_operator.policy_class import BUILT_IN_CLASS, DEFAULT_CLASS_ANNOTATION, parse_class

    klass = one(render(), "DeadLetterPolicyClass", "standard")
    assert "namespace" not in klass["metadata"]
    assert klass["metadata"]["annotations"] == {DEFAULT_CLASS_ANNOTATION: "true"}
    assert parse_class(klass) == dataclasses.replace(BUILT_IN_CLASS, name="standard", is_default=True)


def test_the_default_class_takes_its_values() -> None:
    from spark_dlq_operator.policy_class import parse_class

    klass = parse_class(
        one(
            render(
                {
                    "defaultClass": {
                        "name": "payments",
                        "default": False,
                        "defaults": {"retry": {"maxRedeliverCount": 3}},
                        "brokers": [
                            {"bootstrapServers": "kafka:9092", "operatorSecretRef": {"name": "op-kafka"}}
                        ],
                        "images": {"default": "registry/spark-dlq:1", "allowed": ["registry/team-*"]},
                        "sparkConf": {"allowed": [], "fixed": {"spark.driver.extraJavaOptions": "-Dx=1"}},
                        "limits": {"executor": {"maxInstances": 4}},
                        "storage": {"checkpointBase": "s3a://cp", "deadLetterTableBase": "s3a://tables"},
                        "pods": {
                            "imagePullSecrets": [{"name": "registry"}],
                            "tolerations": [{"key": "spark", "operator": "Exists"}],
                            "policyMayOverride": ["labels"],
                        },
                    }
                }
            ),
            "DeadLetterPolicyClass",
        )
    )
    assert (klass.name, klass.is_default) == ("payments", False)
    assert klass.defaults == {"retry": {"maxRedeliverCount": 3}}
    assert klass.brokers[0].operator_secret is not None
    assert klass.images.allowed == ("registry/team-*",)
    assert klass.spark_conf.allowed == ()  # an empty list allows no key
    assert klass.limits.executor.max_instances == 4
    assert klass.storage.dead_letter_table_base == "s3a://tables"
    assert klass.pods.image_pull_secrets == ("registry",)
    assert klass.pods.policy_may_override == ("labels",)


def test_no_default_class_when_asked() -> None:
    assert not find(render({"defaultClass": {"create": False}}), "DeadLetterPolicyClass")


def test_the_operator_reads_only_the_secrets_classes_name() -> None:
    objects = render(
        {
            "defaultClass": {
                "brokers": [{"bootstrapServers": "k:9092", "operatorSecretRef": {"name": "op-kafka"}}]
            },
            "operator": {"rbac": {"classSecretNames": ["other-class-kafka"]}},
        }
    )
    role = one(objects, "Role", f"{FULLNAME}-class-credentials", NAMESPACE)
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["op-kafka", "other-class-kafka"],
            "verbs": ["get"],
        }
    ]
    assert not find(render(), "Role", f"{FULLNAME}-class-credentials")


def test_the_operator_kafka_config_fails_with_how_to_move_it() -> None:
    result = template({"topics": {"kafkaConfig": {"secretName": "kafka-admin"}}}, check=False)
    assert result.returncode != 0
    assert "topics.kafkaConfig is replaced by defaultClass.brokers[].operatorSecretRef" in result.stderr


def test_provisioner_auto_is_passed_through() -> None:
    objects = render({"topics": {"provisioner": "auto", "strimzi": {"enabled": True}}})
    assert env_of(one(objects, "Deployment"))["SPARK_DLQ_PROVISIONER"] == "auto"


def test_two_replicas_peer_with_distinct_priorities() -> None:
    objects = render({"operator": {"replicas": 2, "strategy": "RollingUpdate"}})
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate"}
    env = env_of(deployment)
    assert env["SPARK_DLQ_PEERING"] == FULLNAME
    assert env["SPARK_DLQ_PEERING_LIFETIME"] == "15"
    operator = container(objects)
    # kopf names each replica in the peering by $POD_ID: the pod's name.
    pod_id = next(e for e in operator["env"] if e["name"] == "POD_ID")
    assert pod_id["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    # Equal priorities pause every kopf peer: each pod draws its own before exec'ing the operator.
    assert operator["command"][:2] == ["/bin/sh", "-c"]
    assert "SPARK_DLQ_PRIORITY=" in operator["command"][2]
    assert 'exec dlq-operator "$@"' in operator["command"][2]
    assert operator["args"][0] == "run"
    peering = one(objects, "ClusterKopfPeering")
    assert peering["metadata"]["name"] == FULLNAME
    # The operator accepts what the chart gives it.
    from spark_dlq_operator.cli import config_from_args

    config = config_from_args(["run"], environ={**env, "SPARK_DLQ_PRIORITY": "1"})
    assert (config.peering, config.peering_lifetime) == (FULLNAME, 15)


def test_peering_lifetime_is_a_value() -> None:
    objects = render({"operator": {"replicas": 2, "peering": {"lifetime": 30}}})
    assert env_of(one(objects, "Deployment"))["SPARK_DLQ_PEERING_LIFETIME"] == "30"


def test_one_replica_runs_standalone_without_peering_objects() -> None:
    objects = render({"operator": {"replicas": 1, "peering": {"lifetime": 30}}})
    env = env_of(one(objects, "Deployment"))
    assert "SPARK_DLQ_PEERING" not in env
    assert "SPARK_DLQ_PEERING_LIFETIME" not in env
    assert container(objects)["command"] == ["dlq-operator"]
    assert not find(objects, "ClusterKopfPeering")
    assert not find(objects, "KopfPeering")


def test_peering_when_namespaced_uses_a_kopfpeering_per_namespace() -> None:
    objects = render(
        {
            "operator": {
                "replicas": 3,
                "peering": {"name": "dlq-peers"},
                "watch": {"allNamespaces": False, "namespaces": ["a", "b"]},
            }
        }
    )
    assert {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in find(objects, "KopfPeering")} == {
        ("a", "dlq-peers"),
        ("b", "dlq-peers"),
    }
    assert not find(objects, "ClusterKopfPeering")
    assert env_of(one(objects, "Deployment"))["SPARK_DLQ_PEERING"] == "dlq-peers"


def test_peering_priority_command_runs_in_a_posix_shell(tmp_path: Path) -> None:
    """Pods started in the same second get distinct priorities; a pod started later always gets a
    lower one (so it stands by instead of preempting the working replica)."""
    import subprocess

    script = container(render({"operator": {"replicas": 2}}))["command"][2]
    fake = tmp_path / "dlq-operator"
    fake.write_text('#!/bin/sh\necho "$SPARK_DLQ_PRIORITY $*"\n')
    fake.chmod(0o755)
    date = tmp_path / "date"  # the pod's clock, as the test sets it
    date.write_text('#!/bin/sh\necho "$FAKE_NOW"\n')
    date.chmod(0o755)

    def start(now: int) -> tuple[int, list[str]]:
        out = subprocess.run(
            ["/bin/sh", "-c", script, "dlq-operator", "run", "--verbose"],
            env={"PATH": f"{tmp_path}:/usr/bin:/bin", "FAKE_NOW": str(now)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return int(out[0]), out[1:]

    now = 1_764_000_000
    same_second = [start(now) for _ in range(3)]
    assert len({priority for priority, _ in same_second}) == 3, same_second
    assert all(args == ["run", "--verbose"] for _, args in same_second)
    later, _ = start(now + 1)
    assert later < min(priority for priority, _ in same_second)
    # The oldest possible pod's priority still fits the 64-bit integer the peering object keeps.
    assert start(0)[0] < 2**63


def test_existing_spark_service_account_and_cluster_role_are_only_named() -> None:
    objects = render(
        {
            "spark": {
                "serviceAccount": {"create": False, "name": "platform-spark"},
                "rbac": {"create": False, "clusterRoleName": "platform-spark-driver"},
                "namespaces": ["payments"],
            }
        }
    )
    env = env_of(one(objects, "Deployment"))
    assert env["SPARK_DLQ_SPARK_SERVICE_ACCOUNT"] == "platform-spark"
    assert env["SPARK_DLQ_SPARK_DRIVER_CLUSTER_ROLE"] == "platform-spark-driver"
    assert [s["metadata"]["name"] for s in find(objects, "ServiceAccount")] == [FULLNAME]
    assert not find(objects, "Role")
    assert not find(objects, "ClusterRole", "platform-spark-driver")


def test_a_shared_spark_service_account_in_each_spark_namespace() -> None:
    """The weaker mode, kept for an upgrade that needs the old account (its cloud identity)."""
    objects = render(
        {
            "spark": {
                "namespaces": ["payments", "orders"],
                "serviceAccount": {
                    "name": "spark-dlq-driver",
                    "create": True,
                    "annotations": {"iam.example.com/role": "dlq"},
                },
            }
        }
    )
    assert env_of(one(objects, "Deployment"))["SPARK_DLQ_SPARK_SERVICE_ACCOUNT"] == "spark-dlq-driver"
    for namespace in ("payments", "orders"):
        account = one(objects, "ServiceAccount", "spark-dlq-driver", namespace)
        assert account["metadata"]["annotations"] == {"iam.example.com/role": "dlq"}
    # Bound per policy by the operator, as its own account would be: no Role or binding here
    # but the spark-operator's NetworkPolicy rights.
    assert not find(objects, "Role", namespace="payments")
    assert [b["roleRef"]["name"] for b in find(objects, "RoleBinding", namespace="payments")] == [
        f"{FULLNAME}-spark-network-policies"
    ]


@pytest.mark.parametrize(
    ("spark", "message"),
    [
        pytest.param(
            {"serviceAccount": {"annotations": {"iam.example.com/role": "dlq"}}},
            "spark.serviceAccount.annotations are put on a shared service account",
            id="annotations-without-a-name",
        ),
        pytest.param(
            {"serviceAccount": {"create": True}},
            "spark.serviceAccount.create makes a shared service account",
            id="create-without-a-name",
        ),
        pytest.param(
            {"rbac": {"create": False}},
            "spark.rbac.clusterRoleName is required when spark.rbac.create is false",
            id="no-cluster-role",
        ),
    ],
)
def test_spark_identity_values_that_cannot_work_are_refused(spark: dict[str, Any], message: str) -> None:
    failed = template({"spark": spark}, check=False)
    assert failed.returncode != 0
    assert message in failed.stderr


def test_users_view_and_edit_policies_and_redrives_through_aggregation() -> None:
    objects = render()
    view, edit = (
        one(objects, "ClusterRole", f"{FULLNAME}-view"),
        one(objects, "ClusterRole", f"{FULLNAME}-edit"),
    )
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in edit["metadata"]["labels"]
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert view["rules"][0]["verbs"] == ["get", "list", "watch"]
    assert set(edit["rules"][0]["resources"]) == {"deadletterpolicies", "deadletterredrives"}


def test_existing_operator_service_account_and_no_rbac() -> None:
    objects = render(
        {"operator": {"serviceAccount": {"create": False, "name": "dlq-ops"}, "rbac": {"create": False}}}
    )
    assert pod_spec(objects)["serviceAccountName"] == "dlq-ops"
    # The drivers' ClusterRole is spark.rbac's: the operator binds it, and the platform its rights;
    # the spark-operator's NetworkPolicy rights are sparkOperator.rbac's.
    assert sorted(r["metadata"]["name"] for r in find(objects, "ClusterRole")) == [
        f"{FULLNAME}-spark-driver",
        f"{FULLNAME}-spark-network-policies",
    ]
    assert not find(objects, "ClusterRoleBinding")
    assert not find(objects, "ServiceAccount")


def test_values_reach_the_pod() -> None:
    objects = render(
        {
            "image": {"repository": "registry.example.com/dlq-op", "tag": "1.2.3", "pullPolicy": "Always"},
            "imagePullSecrets": ["regcred"],
            "commonLabels": {"team": "platform"},
            "spark": {
                "image": {"repository": "registry.example.com/dlq", "tag": "9"},
                "checkpointBase": "s3a://bucket/cp",
            },
            "operator": {
                "verbose": True,
                "extraArgs": ["--resync-interval", "30"],
                "extraEnv": [{"name": "TZ", "value": "UTC"}],
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "podAnnotations": {"prometheus.io/scrape": "true"},
                "priorityClassName": "system-cluster-critical",
            },
        }
    )
    deployment = one(objects, "Deployment")
    spec = pod_spec(objects)
    operator = container(objects)
    assert operator["image"] == "registry.example.com/dlq-op:1.2.3"
    assert operator["imagePullPolicy"] == "Always"
    assert operator["args"] == ["run", "--verbose", "--resync-interval", "30"]
    env = env_of(deployment)
    assert env["TZ"] == "UTC"
    assert env["SPARK_DLQ_SPARK_IMAGE"] == "registry.example.com/dlq:9"
    assert env["SPARK_DLQ_CHECKPOINT_BASE"] == "s3a://bucket/cp"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert deployment["spec"]["template"]["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert all(o["metadata"]["labels"]["team"] == "platform" for o in objects)


def test_names_follow_overrides() -> None:
    objects = render({"fullnameOverride": "dlq-op"})
    assert one(objects, "Deployment")["metadata"]["name"] == "dlq-op"
    objects = render(release="spark-dlq-operator")
    assert one(objects, "Deployment")["metadata"]["name"] == "spark-dlq-operator"


def test_every_object_carries_the_release_labels() -> None:
    for values in (
        {},
        {
            "operator": {"replicas": 2, "watch": {"allNamespaces": False}},
            "topics": {"strimzi": {"enabled": True}},
        },
    ):
        for obj in render(values):
            labels = obj["metadata"]["labels"]
            assert labels["app.kubernetes.io/instance"] == RELEASE, obj["kind"]
            assert labels["app.kubernetes.io/managed-by"] == "Helm"
            assert labels["app.kubernetes.io/name"] == "spark-dlq-operator"
            assert labels["app.kubernetes.io/component"] in (
                "operator",
                "spark",
                "spark-operator",
                "strimzi",
                "user-roles",
                "class",
            )


# --- the values schema -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"operator": {"replicsa": 2}},
            "operator: Additional property replicsa is not allowed",
            id="typo-nested",
        ),
        pytest.param(
            {"imagePullPolicy": "Always"},
            "Additional property imagePullPolicy is not allowed",
            id="typo-top-level",
        ),
        pytest.param(
            {"operator": {"replicas": "two"}},
            "operator.replicas: Invalid type. Expected: integer",
            id="replicas-string",
        ),
        pytest.param(
            {"operator": {"watch": {"allNamespaces": "yes"}}},
            "operator.watch.allNamespaces: Invalid type. Expected: boolean",
            id="bool-string",
        ),
        pytest.param(
            {"operator": {"watch": {"namespaces": "payments"}}},
            "operator.watch.namespaces: Invalid type. Expected: array",
            id="namespaces-string",
        ),
        pytest.param({"operator": {"strategy": "Rolling"}}, "operator.strategy", id="strategy-enum"),
        pytest.param({"topics": {"provisioner": "kafka"}}, "topics.provisioner", id="provisioner-enum"),
        pytest.param({"operator": {"liveness": {"port": 70000}}}, "operator.liveness.port", id="port-range"),
        pytest.param(
            {"operator": {"resources": {"requests": {"cpu": "lots"}}}},
            "operator.resources.requests.cpu",
            id="quantity",
        ),
        pytest.param(
            {"operator": {"securityContext": {"runAsNonroot": True}}},
            "Additional property runAsNonroot is not allowed",
            id="security-context-typo",
        ),
        pytest.param({"spark": {"namespaces": ["Payments"]}}, "spark.namespaces.0", id="namespace-name"),
        pytest.param(
            {"topics": {"strimzi": {"namespace": "kafka"}}},
            "Additional property namespace is not allowed",
            id="strimzi-singular",
        ),
    ],
)
def test_schema_refuses_typos_and_wrong_types(values: dict[str, Any], message: str) -> None:
    result = template(values, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert message in result.stderr, result.stderr


def test_strimzi_provisioner_without_its_rbac_fails_clearly() -> None:
    result = template({"topics": {"provisioner": "strimzi"}}, check=False)
    assert result.returncode != 0
    assert "set topics.strimzi.enabled=true" in result.stderr


def _schema_nodes(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    nodes = [(path, node)]
    for key, child in (node.get("properties") or {}).items():
        nodes += _schema_nodes(child, f"{path}.{key}".lstrip("."))
    if isinstance(node.get("items"), dict):
        nodes += _schema_nodes(node["items"], path + "[]")
    if isinstance(node.get("additionalProperties"), dict):
        nodes += _schema_nodes(node["additionalProperties"], path + ".*")
    return nodes


def test_schema_closes_every_object() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    for path, node in _schema_nodes(schema):
        if path == "global":
            # A parent chart's globals: any key, as Helm gives every subchart all of them.
            assert node.get("additionalProperties") is True
            continue
        if "properties" in node:
            assert node.get("additionalProperties") is False, f"{path or 'the root'} lets unknown keys in"
            assert node.get("type") == "object", path
        elif node.get("type") == "object":
            extra = node.get("additionalProperties")
            if extra is True:
                # Only Kubernetes' own scheduling terms are passed through as they are: the API
                # server validates them field by field (tests/integration/test_chart.py).
                assert path.startswith(("operator.affinity.", "defaultClass.pods.affinity.")), (
                    f"{path}: an open object"
                )
            else:
                assert isinstance(extra, dict), f"{path}: an open object without a value schema"
        assert "type" in node, f"{path}: no type"


def test_schema_describes_exactly_the_values() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def keys(tree: dict[str, Any], prefix: str = "") -> set[str]:
        found: set[str] = set()
        for key, value in tree.items():
            path = f"{prefix}{key}"
            found.add(path)
            if isinstance(value, dict) and path not in KUBERNETES_VALUES:
                found |= keys(value, path + ".")
        return found

    def schema_keys(node: dict[str, Any], prefix: str = "") -> set[str]:
        found: set[str] = set()
        for key, child in (node.get("properties") or {}).items():
            path = f"{prefix}{key}"
            found.add(path)
            if path not in KUBERNETES_VALUES:
                found |= schema_keys(child, path + ".")
        return found

    assert keys(values) == schema_keys(schema)


# --- values.yaml and layout ----------------------------------------------------------------------


def test_every_value_is_documented() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    stack: list[tuple[int, str]] = []
    undocumented: list[str] = []
    for number, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z][\w.-]*):", line)
        if not match:
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        stack.append((indent, key))
        if any(path.startswith(k + ".") for k in KUBERNETES_VALUES):
            continue
        above = number - 1
        while (
            above >= 0
            and lines[above].strip().startswith("#")
            and not lines[above].strip().startswith("# --")
        ):
            above -= 1
        if above < 0 or not lines[above].strip().startswith("# --"):
            undocumented.append(path)
    assert not undocumented, f"values without a '# --' comment: {undocumented}"


def test_templates_are_grouped_by_component_with_named_helpers() -> None:
    templates = CHART / "templates"
    top = sorted(p.name for p in templates.iterdir() if p.is_file())
    assert top == ["NOTES.txt", "_helpers.tpl"]
    components = sorted(p.name for p in templates.iterdir() if p.is_dir())
    assert components == ["class", "monitoring", "operator", "spark", "spark-operator", "strimzi"]
    for tpl in templates.rglob("*.tpl"):
        component = tpl.parent.name if tpl.parent != templates else None
        for name in re.findall(r'define "([^"]+)"', tpl.read_text()):
            parts = name.split(".")
            assert parts[0] == "spark-dlq-operator", name
            if component:
                assert parts[1:2] == [component], f"{tpl.name}: {name}"
                assert len(parts) == 3, f"{tpl.name}: {name}"
    # Every include names a defined helper.
    defined = {
        n for tpl in templates.rglob("*.tpl") for n in re.findall(r'define "([^"]+)"', tpl.read_text())
    }
    used = {
        n
        for f in templates.rglob("*")
        if f.is_file()
        for n in re.findall(r'include "([^"]+)"', f.read_text())
    }
    assert used <= defined, used - defined
    assert defined <= used, f"unused helpers: {defined - used}"


def test_ci_values_render() -> None:
    for values in CI_VALUES:
        assert one(render(values_files=[values]), "Deployment")


def test_readme_explains_crd_upgrades() -> None:
    readme = (CHART / "README.md").read_text()
    assert "kubectl apply --server-side -f" in readme
    assert "never" in readme.lower()
    assert "crds/" in readme
    assert "helm install" in readme


def test_rendered_manifests_are_plain_yaml() -> None:
    text = render_text(
        {
            "operator": {"replicas": 2, "watch": {"allNamespaces": False}},
            "topics": {"strimzi": {"enabled": True}},
        }
    )
    assert "\t" not in text
    assert not re.search(r"^\s+$", text, re.M), "blank lines with trailing spaces in the output"


# --- as platform teams use it -------------------------------------------------------------------


def test_global_values_are_accepted_and_give_the_registry() -> None:
    objects = render({"global": {"imageRegistry": "registry.example.com", "storageClass": "fast"}})
    assert container(objects)["image"] == "registry.example.com/spark-dlq-operator:0.1.0"
    assert (
        env_of(one(objects, "Deployment"))["SPARK_DLQ_SPARK_IMAGE"] == "registry.example.com/spark-dlq:0.1.0"
    )


def test_image_registry_and_digest() -> None:
    digest = "sha256:" + "ab" * 32
    objects = render(
        {
            "global": {"imageRegistry": "ignored.example.com"},
            "image": {"registry": "registry.example.com:5000/", "tag": "1.2.3", "digest": digest},
            "spark": {
                "image": {"registry": "spark.example.com", "repository": "team/spark-dlq", "digest": digest}
            },
        }
    )
    assert container(objects)["image"] == f"registry.example.com:5000/spark-dlq-operator:1.2.3@{digest}"
    assert env_of(one(objects, "Deployment"))["SPARK_DLQ_SPARK_IMAGE"] == (
        f"spark.example.com/team/spark-dlq:0.1.0@{digest}"
    )
    refused = template({"image": {"digest": "latest"}}, check=False)
    assert refused.returncode != 0
    assert "image.digest" in refused.stderr


def test_the_chart_works_as_a_subchart(tmp_path: Path) -> None:
    """An umbrella chart that depends on this one, with globals of its own and the subchart's
    values under its name: Helm validates the subchart's values with its schema."""
    parent = tmp_path / "platform"
    parent.mkdir()
    (parent / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "platform",
                "version": "1.0.0",
                "dependencies": [
                    {"name": "spark-dlq-operator", "version": "0.1.0", "repository": f"file://{CHART}"}
                ],
            }
        )
    )
    (parent / "values.yaml").write_text(
        yaml.safe_dump(
            {
                "global": {"imageRegistry": "registry.example.com", "environment": "prod"},
                "spark-dlq-operator": {
                    "operator": {"replicas": 2},
                    "defaultClass": {"name": "platform", "limits": {"executor": {"maxInstances": 4}}},
                },
            }
        )
    )
    helm("dependency", "build", str(parent))
    objects = [
        d for d in yaml.safe_load_all(helm("template", "dlq", str(parent), "-n", NAMESPACE).stdout) if d
    ]
    assert container(objects)["image"] == "registry.example.com/spark-dlq-operator:0.1.0"
    assert one(objects, "PodDisruptionBudget")
    assert one(objects, "DeadLetterPolicyClass", "platform")["spec"]["limits"] == {
        "executor": {"maxInstances": 4}
    }
    (parent / "values.yaml").write_text(yaml.safe_dump({"spark-dlq-operator": {"operater": {}}}))
    refused = helm("template", "dlq", str(parent), check=False)
    assert refused.returncode != 0
    assert "operater" in refused.stderr


@pytest.mark.parametrize(
    ("values", "budget"),
    [
        pytest.param({}, None, id="one-replica"),
        pytest.param({"operator": {"replicas": 2}}, 1, id="two-replicas"),
        pytest.param(
            {"operator": {"replicas": 3, "podDisruptionBudget": {"maxUnavailable": 2}}}, 2, id="three"
        ),
        pytest.param(
            {"operator": {"replicas": 2, "podDisruptionBudget": {"enabled": False}}}, None, id="off"
        ),
    ],
)
def test_a_disruption_budget_with_more_than_one_replica(values: dict[str, Any], budget: int | None) -> None:
    objects = render(values)
    found = find(objects, "PodDisruptionBudget")
    if budget is None:
        assert not found
        return
    [pdb] = found
    assert pdb["spec"]["maxUnavailable"] == budget
    selector = one(objects, "Deployment")["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["selector"]["matchLabels"] == selector


def test_readme_values_table_is_generated_from_values_yaml() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "chart_values.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    readme = (CHART / "README.md").read_text()
    assert "| `image.digest` | string |" in readme
