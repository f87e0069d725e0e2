"""The operator's rights: enough for the whole life of a policy, and nothing more.

- The operator runs as a user that has only the rules of operator/README.md's RBAC block, bound
  as the chart binds them in each watch mode (cluster-wide: one ClusterRole; one namespace: the
  namespaced rules there only), so the Helm chart can copy that block and trust it: nothing the
  operator or kopf does may be refused, from creation (with the Spark pods' identity: the
  ``bind`` of the drivers' ClusterRole, a Role on the Lease) through a restart and a
  resubmission to deletion with topic clean-up.
- The real ``dlq-operator run`` process runs as the chart's own ServiceAccount (``helm install``
  of the chart, a token from the TokenRequest API, the environment of the rendered Deployment):
  a policy reconciles fully under it, and what the role does not grant is refused (403).
- Under that identity, the values of the Secret a policy's ``broker.secretRef`` names appear
  nowhere the operator writes or logs.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.paths import work_dir
from spark_dlq_devtools.processes import Service, free_port
from spark_dlq_devtools.spark import submit_env
from spark_dlq_operator.render import DRIVER_SPARK_CONF
from tests.chart import CHART, helm, one, render
from tests.conftest import unique
from tests.integration.operator.conftest import (
    Cluster,
    RunningOperator,
    policy_document,
    topic_partitions,
    wait_for,
)

README = Path(__file__).resolve().parents[3] / "operator" / "README.md"


def documented_rules() -> list[dict[str, Any]]:
    """The rules of the ```yaml block in the README's RBAC section."""
    section = README.read_text().split("## RBAC", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "operator/README.md has no yaml block under ## RBAC"
    return list(yaml.safe_load(block.group(1))["rules"])


#: The rules about cluster-scoped resources (kopf's scanning), which need a ClusterRole whatever
#: the operator watches.
CLUSTER_SCOPED = {"customresourcedefinitions", "namespaces"}


@dataclasses.dataclass(frozen=True)
class Restricted:
    """A user holding the README's rules as the chart grants them for one watch mode."""

    kubeconfig: str
    all_namespaces: bool


@pytest.fixture(params=["all-namespaces", "one-namespace"])
def restricted(
    request: pytest.FixtureRequest, kube: ControlPlane, kube_api: Any, namespace: str
) -> Iterator[Restricted]:
    """Cluster-wide: every rule in a ClusterRole. One namespace: the namespaced rules bound in
    the watched namespace only (a RoleBinding), the cluster-scoped ones by a ClusterRoleBinding."""
    all_namespaces = request.param == "all-namespaces"
    user = unique("spark-dlq-operator")
    rbac = client.RbacAuthorizationV1Api(kube_api)
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
    rules = documented_rules()
    cluster_rules = [r for r in rules if all_namespaces or set(r["resources"]) <= CLUSTER_SCOPED]
    namespaced_rules = [r for r in rules if r not in cluster_rules]
    made: list[Callable[[], object]] = []
    for name, role_rules in ((user, cluster_rules), (f"{user}-ns", namespaced_rules)):
        if not role_rules:
            continue
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": role_rules})
        made.append(lambda name=name: rbac.delete_cluster_role(name))
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
            "subjects": subjects,
        }
    )
    made.append(lambda: rbac.delete_cluster_role_binding(user))
    if namespaced_rules:
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": user},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": f"{user}-ns",
                },
                "subjects": subjects,
            },
        )
    yield Restricted(str(kube.kubeconfig(user)), all_namespaces)
    for undo in made:
        undo()


def rbac_refusals(messages: Iterable[str]) -> list[str]:
    """The lines where the API server's authorizer refused the operator something (RBAC says
    ``User "..." cannot <verb> resource "..."``)."""
    return [
        m for m in messages if re.search(r"\b403\b|[Ff]orbidden", m) and re.search(r"cannot \w+ resource", m)
    ]


def test_operator_runs_with_only_the_documented_rbac(
    restricted: Restricted,
    start_operator: Callable[..., RunningOperator],
    cluster: Cluster,
    namespace: str,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    watch: dict[str, Any] = {"all_namespaces": True, "namespaces": ()} if restricted.all_namespaces else {}
    start_operator(kubeconfig=restricted.kubeconfig, **watch)
    source = make_topic("orders")
    cluster.create_policy(
        policy_document(
            namespace,
            "billing",
            source=source,
            bootstrap=bootstrap_servers,
            topics={"deleteWithPolicy": True},
        )
    )

    first = wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    assert first["spec"]["driver"]["serviceAccount"] == "billing-spark"
    wait_for(lambda: cluster.policy("billing")["metadata"].get("finalizers"), what="the finalizer")
    cluster.set_application_state("billing", "RUNNING")
    wait_for(lambda: cluster.status("billing").get("phase") == "Running", what="phase Running")
    cluster.patch_policy("billing", {"spec": {"retry": {"maxRedeliverCount": 2}}})
    wait_for(lambda: cluster.status("billing").get("restartCount") == 1, what="a restart")
    # A job the spark-operator gave up on is resubmitted by the operator (a patch).
    cluster.set_application_state("billing", "FAILED", submission="2")
    wait_for(
        lambda: "SparkApplicationResubmitted" in cluster.event_reasons("billing"), what="the resubmission"
    )
    cluster.delete_application("billing")
    first_uid = first["metadata"]["uid"]
    wait_for(
        lambda: (a := cluster.application("billing")) and a["metadata"]["uid"] != first_uid,
        what="the SparkApplication recreated",
    )
    wait_for(
        lambda: (
            {"TopicCreated", "IdentityCreated", "SparkApplicationCreated", "SparkApplicationRestarted"}
            <= cluster.event_reasons("billing")
        ),
        what="the events",
    )

    cluster.delete_policy("billing")
    wait_for(lambda: cluster.policy("billing") is None, what="the policy to go")
    wait_for(lambda: topic_partitions(kafka_admin, f"{source}-billing-DLQ") is None, what="topics deleted")

    refused = rbac_refusals(r.getMessage() for r in caplog.records)
    assert not refused, refused


# ---------------------------------------------------------------------------------------------
# The real process, as the chart's ServiceAccount


@dataclasses.dataclass
class ChartOperator:
    """``dlq-operator run`` installed by the chart: its namespace, identity and log."""

    namespace: str
    account: str
    kubeconfig: str
    service: Service

    def api(self) -> Any:
        """An API client authenticated as the operator's ServiceAccount."""
        return config.new_client_from_config(config_file=self.kubeconfig)

    def log(self) -> str:
        return self.service.log.read_text(errors="replace")


#: Where a container started by a test finds the test bed's CA (the cache's own folder may be
#: under a home directory the container's user cannot enter).
CONTAINER_CA = "/etc/spark-dlq-test/ca.crt"


def token_kubeconfig(kube: ControlPlane, path: Path, token: str, *, ca: str | None = None) -> Path:
    """A kubeconfig logging in with ``token``; ``ca`` is the CA's path as its reader sees it
    (default: the test bed's own file)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [
                    {
                        "name": "testbed",
                        "cluster": {
                            "server": kube.server,
                            "certificate-authority": ca or str(kube.pki / "ca.crt"),
                        },
                    }
                ],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "testbed", "user": "sa"}}],
            }
        )
    )
    return path


@dataclasses.dataclass(frozen=True)
class InstalledChart:
    """The chart installed with helm, watching one namespace (also the release's): its
    Deployment's pod spec and operator container, and a kubeconfig with a token of its
    ServiceAccount."""

    namespace: str
    release: str
    folder: Path
    pod: dict[str, Any]
    container: dict[str, Any]
    kubeconfig: Path
    token: str


@contextlib.contextmanager
def installed_chart(kube: ControlPlane, kube_api: Any, prefix: str) -> Iterator[InstalledChart]:
    """Install the chart for one namespace (the operator's liveness on a free port, no metrics,
    the Admin API provisioner); uninstall it and delete the namespace afterwards."""
    namespace, release = unique(prefix), unique("dlq")
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    folder = work_dir(f"{prefix}-{namespace}")
    values = {
        "operator": {
            "watch": {"allNamespaces": False, "namespaces": [namespace]},
            "liveness": {"port": free_port()},
            "metrics": {"port": 0},
        },
        "topics": {"provisioner": "admin"},
    }
    values_file = folder / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    admin = str(kube.admin_kubeconfig)
    helm(
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--values",
        str(values_file),
        "--kubeconfig",
        admin,
    )
    try:
        deployment = one(render(values, namespace=namespace, release=release), "Deployment")
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        token = core.create_namespaced_service_account_token(
            pod["serviceAccountName"], namespace, {"spec": {"expirationSeconds": 3600}}
        ).status.token
        kubeconfig = token_kubeconfig(kube, folder / "operator.kubeconfig", token)
        yield InstalledChart(namespace, release, folder, pod, container, kubeconfig, token)
    finally:
        helm("uninstall", release, "--namespace", namespace, "--kubeconfig", admin)
        core.delete_namespace(namespace)


@pytest.fixture(scope="module")
def chart_operator(kube: ControlPlane, kube_api: Any, spark_crd: str) -> Iterator[ChartOperator]:
    """The chart installed with helm (watching one namespace, which is also the release's), and
    the operator process started with its Deployment's command, arguments and environment,
    logged in with a token of the chart's ServiceAccount."""
    with installed_chart(kube, kube_api, "chart-op") as chart:
        container = chart.container
        env = {
            "PATH": str(Path(sys.executable).parent),
            "HOME": str(chart.folder),
            "SPARK_DLQ_KUBECONFIG": str(chart.kubeconfig),
        }
        env.update({e["name"]: e["value"] for e in container["env"]})
        if os.environ.get("PYTHONPATH"):  # a checkout other than the one installed in the venv
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        assert container["command"] == ["dlq-operator"]
        program = str(Path(sys.executable).parent / "dlq-operator")
        service = Service(
            "dlq-operator", [program, *container["args"]], log=chart.folder / "operator.log", env=env
        )
        service.start()
        try:
            operator = ChartOperator(
                chart.namespace, chart.pod["serviceAccountName"], str(chart.kubeconfig), service
            )
            wait_for(
                lambda: "Initial authentication has finished" in operator.log() or not service.alive(),
                timeout=60,
                what="the operator to start",
            )
            assert service.alive(), service.tail()
            yield operator
        finally:
            service.stop()


def forbidden(call: Callable[[], object]) -> str:
    """The apiserver's message for ``call``, which must be refused with 403."""
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 403, refused.value
    return str(json.loads(refused.value.body)["message"])


def test_operator_process_reconciles_as_the_charts_service_account(
    chart_operator: ChartOperator,
    kube_api: Any,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
    kafka_admin: AdminClient,
) -> None:
    cluster = Cluster(kube_api, chart_operator.namespace)
    source = make_topic("orders")
    cluster.create_policy(
        policy_document(chart_operator.namespace, "billing", source=source, bootstrap=bootstrap_servers)
    )

    app = wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    assert cluster.config_map("billing-policy") is not None
    wait_for(lambda: topic_partitions(kafka_admin, f"{source}-billing-DLQ") == 1, what="the DLQ topic")
    wait_for(
        lambda: (
            cluster.status("billing").get("configHash")
            == app["metadata"]["annotations"]["sparkdlq.io/config-hash"]
        ),
        what="the status",
    )
    assert cluster.condition("billing", "TopicsReady")["status"] == "True"
    cluster.set_application_state("billing", "RUNNING")
    wait_for(lambda: cluster.status("billing").get("phase") == "Running", what="phase Running")
    wait_for(
        lambda: (
            {"TopicCreated", "ConfigMapCreated", "SparkApplicationCreated", "Ready"}
            <= cluster.event_reasons("billing")
        ),
        what="the events",
    )
    assert chart_operator.service.alive()
    refused = [line for line in chart_operator.log().splitlines() if re.search(r"\b403\b|[Ff]orbidden", line)]
    assert not refused, refused


def test_the_charts_service_account_is_refused_outside_its_role(
    chart_operator: ChartOperator, kube_api: Any, namespace: str
) -> None:
    """``namespace`` is one the operator does not watch."""
    api = chart_operator.api()
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    user = f"system:serviceaccount:{chart_operator.namespace}:{chart_operator.account}"
    # It works where the role says (the control for the refusals below).
    core.list_namespaced_config_map(chart_operator.namespace)

    assert f'User "{user}" cannot get resource "secrets"' in forbidden(
        lambda: core.read_namespaced_secret("anything", chart_operator.namespace)
    )
    assert 'cannot list resource "secrets"' in forbidden(lambda: core.list_namespaced_secret(namespace))
    assert 'cannot list resource "configmaps"' in forbidden(
        lambda: core.list_namespaced_config_map(namespace)
    )
    assert 'cannot create resource "configmaps"' in forbidden(
        lambda: core.create_namespaced_config_map(namespace, {"metadata": {"name": "intruder"}, "data": {}})
    )
    assert 'cannot delete resource "namespaces"' in forbidden(lambda: core.delete_namespace(namespace))
    assert 'cannot create resource "clusterroles"' in forbidden(
        lambda: rbac.create_cluster_role(
            {
                "metadata": {"name": unique("escalate")},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
            }
        )
    )
    assert 'cannot create resource "pods"' in forbidden(
        lambda: core.create_namespaced_pod(
            chart_operator.namespace,
            {"metadata": {"name": "intruder"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        )
    )
    assert 'cannot delete resource "deadletterpolicies"' in forbidden(
        lambda: client.CustomObjectsApi(api).delete_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", chart_operator.namespace, "deadletterpolicies", "anything"
        )
    )


def test_secret_values_never_leak(
    chart_operator: ChartOperator, kube_api: Any, make_topic: Callable[..., str], bootstrap_servers: str
) -> None:
    namespace = chart_operator.namespace
    password, username = f"Zebra-{unique('pw')}", f"user-{unique('u')}"
    jaas = (
        f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{username}" '
        f'password="{password}";'
    )
    secret_name = unique("kafka-client")
    client.CoreV1Api(kube_api).create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": secret_name},
            "stringData": {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": jaas,
            },
        },
    )
    cluster = Cluster(kube_api, namespace)
    source = make_topic("orders")
    cluster.create_policy(
        policy_document(
            namespace,
            "secured",
            source=source,
            bootstrap=bootstrap_servers,
            broker={"bootstrapServers": bootstrap_servers, "secretRef": {"name": secret_name}},
        )
    )
    app = wait_for(lambda: cluster.application("secured"), what="the SparkApplication")
    wait_for(lambda: cluster.status("secured").get("configHash"), what="the status")
    wait_for(lambda: "SparkApplicationCreated" in cluster.event_reasons("secured"), what="the events")

    # The SparkApplication only names the secret: a volume and its mounts, in the pod templates.
    for role in ("driver", "executor"):
        volumes = app["spec"][role]["template"]["spec"]["volumes"]
        assert {"name": "kafka-client", "secret": {"secretName": secret_name}} in volumes
    serialize = kube_api.sanitize_for_serialization
    written = {
        "ConfigMap": json.dumps(serialize(cluster.config_map("secured-policy"))),
        "SparkApplication": json.dumps(app),
        "policy": json.dumps(cluster.policy("secured")),
        "Events": json.dumps(serialize(cluster.core.list_namespaced_event(namespace))),
        "operator log": chart_operator.log(),
    }
    values = [password, username, jaas]
    values += [base64.b64encode(v.encode()).decode() for v in values]
    leaks = [(where, value) for where, text in written.items() for value in values if value in text]
    assert not leaks, leaks
    assert secret_name in written["ConfigMap"]  # the control: the name is there, the values are not


def test_a_spark_drivers_token_writes_its_own_lease_and_nothing_of_another_policy(
    chart_operator: ChartOperator,
    kube: ControlPlane,
    kube_api: Any,
    make_topic: Callable[..., str],
    bootstrap_servers: str,
) -> None:
    """Two policies of one namespace, each with its own service account: the one's driver token
    (TokenRequest, as its pod mounts it) renews its own Lease, and is refused (403) the other's
    Lease and ConfigMap, and any ConfigMap at all."""
    namespace = chart_operator.namespace
    cluster = Cluster(kube_api, namespace)
    source = make_topic("orders")  # one topic, known to the broker by the time the second reads it
    for name in ("payroll", "shipping"):
        cluster.create_policy(policy_document(namespace, name, source=source, bootstrap=bootstrap_servers))
    for name in ("payroll", "shipping"):  # the identity is written before the SparkApplication
        app = wait_for(lambda name=name: cluster.application(name), what=f"{name}'s SparkApplication")
        assert app["spec"]["driver"]["serviceAccount"] == f"{name}-spark"
    token = (
        client.CoreV1Api(kube_api)
        .create_namespaced_service_account_token(
            "payroll-spark", namespace, {"spec": {"expirationSeconds": 600}}
        )
        .status.token
    )
    folder = work_dir(f"driver-{namespace}")
    driver = config.new_client_from_config(
        config_file=str(token_kubeconfig(kube, folder / "kubeconfig", token))
    )
    leases, core = client.CoordinationV1Api(driver), client.CoreV1Api(driver)
    user = f"system:serviceaccount:{namespace}:payroll-spark"

    # Its own Lease: the heartbeat patched in, read, replaced with its resourceVersion.
    beat = {"metadata": {"annotations": {"sparkdlq.io/heartbeat": '{"queryActive":true}'}}}
    leases.patch_namespaced_lease("payroll-heartbeat", namespace, beat)
    own = leases.read_namespaced_lease("payroll-heartbeat", namespace)
    own.spec.holder_identity = "payroll-driver"
    leases.replace_namespaced_lease("payroll-heartbeat", namespace, own)
    assert (
        leases.read_namespaced_lease("payroll-heartbeat", namespace).spec.holder_identity == "payroll-driver"
    )

    # Another policy's Lease and ConfigMap, and any ConfigMap or Secret: refused.
    assert f'User "{user}" cannot patch resource "leases"' in forbidden(
        lambda: leases.patch_namespaced_lease("shipping-heartbeat", namespace, beat)
    )
    assert 'cannot create resource "leases"' in forbidden(
        lambda: leases.create_namespaced_lease(namespace, {"metadata": {"name": "shipping-heartbeat-2"}})
    )
    tampered = {"data": {"policy.yaml": "tampered"}}
    for policy_config_map in ("shipping-policy", "payroll-policy"):
        assert 'cannot patch resource "configmaps"' in forbidden(
            lambda n=policy_config_map: core.patch_namespaced_config_map(n, namespace, tampered)
        )
    assert 'cannot delete resource "configmaps"' in forbidden(
        lambda: core.delete_namespaced_config_map("shipping-policy", namespace)
    )
    assert 'cannot create resource "configmaps"' in forbidden(
        lambda: core.create_namespaced_config_map(namespace, {"metadata": {"name": "x"}, "data": {}})
    )
    assert 'cannot list resource "secrets"' in forbidden(lambda: core.list_namespaced_secret(namespace))

    # What Spark's driver does for its executors, in its own namespace only.
    def may(verb: str, resource: str, where: str) -> bool:
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(namespace=where, resource=resource, verb=verb)
            )
        )
        return bool(
            client.AuthorizationV1Api(driver).create_self_subject_access_review(review).status.allowed
        )

    spark_verbs = ["get", "list", "watch", "create", "delete", "deletecollection"]
    assert all(may(verb, "pods", namespace) for verb in spark_verbs)
    assert not [v for v in ("update", "patch") if may(v, "pods", namespace)]
    assert not [r for r in ("services", "persistentvolumeclaims") if may("create", r, namespace)]
    assert not may("create", "pods", "default")

    # A real Spark 4.0 driver as this account, with the operator's Spark settings: it starts its
    # executor pods, deletes them when it stops, and is refused nothing on the way.
    cluster.core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "payroll-driver"},
            "spec": {"automountServiceAccountToken": False, "containers": [{"name": "driver", "image": "x"}]},
        },
    )
    (folder / "token").write_text(token)
    arguments = [kube.server, namespace, str(folder / "token"), str(kube.pki / "ca.crt")]
    spark = subprocess.Popen(
        [sys.executable, "-c", SPARK_DRIVER, *arguments, json.dumps(dict(DRIVER_SPARK_CONF))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_spark_env(),
    )
    try:

        def executors() -> list[Any]:
            return list(
                cluster.core.list_namespaced_pod(namespace, label_selector="spark-role=executor").items
            )

        wait_for(lambda: len(executors()) == 2 or spark.poll() is not None, timeout=120, what="executor pods")
        output, _ = spark.communicate("stop\n", timeout=120)
    finally:
        if spark.poll() is None:
            spark.kill()
    assert spark.returncode == 0, output[-3000:]
    assert executors() == []
    refused = [line for line in output.splitlines() if "Forbidden" in line or "forbidden" in line]
    assert not refused, refused[:3]


#: A Spark driver in client mode against the API server (arguments: server, namespace, token file,
#: CA, extra Spark settings as JSON): two executors asked for, stopped on a line on stdin.
SPARK_DRIVER = """
import json, sys
from pyspark.sql import SparkSession
server, namespace, token, ca, conf = sys.argv[1:6]
builder = (
    SparkSession.builder.master("k8s://" + server)
    .config("spark.kubernetes.namespace", namespace)
    .config("spark.kubernetes.authenticate.oauthTokenFile", token)
    .config("spark.kubernetes.authenticate.caCertFile", ca)
    .config("spark.kubernetes.driver.pod.name", "payroll-driver")
    .config("spark.kubernetes.container.image", "registry.test/spark-dlq:test")
    .config("spark.executor.instances", "2")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.ui.enabled", "false")
    # Do not wait (30 s) for executors to register: none can, no node runs them.
    .config("spark.scheduler.minRegisteredResourcesRatio", "0")
)
for key, value in json.loads(conf).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
sys.stdin.readline()
spark.stop()
"""


def _spark_env() -> dict[str, str]:
    env = submit_env()
    env.pop("PYSPARK_SUBMIT_ARGS")  # no jars needed: Spark's own Kubernetes backend
    return env
