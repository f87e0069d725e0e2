"""The Kubeflow spark-operator's image starts, and its Spark submits as the operator does.

``scripts/setup/spark_operator.sh`` builds the image the spark-operator's own Dockerfile
describes on our Spark base (``scripts/images/spark-operator.Containerfile``): the binary built
from its Go module, tini and the module's entry point. One container runs as the spark-operator
chart runs its controller: the image's own numeric user, a read-only root file system with
``/tmp`` writable (the chart's emptyDir), every capability dropped, no privilege escalation.
In it the module's entry point runs the binary (``version``), then the image's spark-submit
submits the SparkApplication our operator renders, in cluster mode against the test bed's API
server, as the controller does (without waiting for the application). The driver pod Spark
creates is the contract our Spark base's entry point implements: the ``driver`` role, the
properties file and the main file as arguments, the pod's address in an environment variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from dlq_engine.model import parse_policy
from spark_dlq_devtools import containers
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.paths import spark_operator, versions, work_dir
from spark_dlq_operator import naming, render
from spark_dlq_operator.config import OperatorConfig
from tests.conftest import unique
from tests.helpers import non_root_uid, policy_document
from tests.integration.operator.test_rbac import CONTAINER_CA, token_kubeconfig

KUBECONFIG = "/etc/spark-dlq-test/kubeconfig"


def chart_controller_security() -> dict[str, Any]:
    """The spark-operator chart's security context and writable folders for its controller."""
    chart = spark_operator() / "chart"
    values = yaml.safe_load((chart / "values.yaml").read_text())["controller"]
    empty_dirs = {volume["name"] for volume in values["volumes"] if "emptyDir" in volume}
    writable = [mount["mountPath"] for mount in values["volumeMounts"] if mount["name"] in empty_dirs]
    return {"securityContext": values["securityContext"], "writable": writable}


def submitter_kubeconfig(kube: ControlPlane, kube_api: Any, namespace: str) -> Path:
    """A kubeconfig with the token of a service account that may do in ``namespace`` what
    spark-submit does for a driver (the spark-operator's controller role grants it): create and
    manage pods, services and config maps, and, from Spark 4.2 on, the driver's NetworkPolicy
    (Spark's NetworkPolicyFeatureStep makes one for every application)."""
    core, rbac = client.CoreV1Api(kube_api), client.RbacAuthorizationV1Api(kube_api)
    account = "spark-submitter"
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata={"name": account}))
    verbs = ["create", "get", "list", "watch", "update", "patch", "delete", "deletecollection"]
    rules = [
        {"apiGroups": [""], "resources": ["pods", "services", "configmaps"], "verbs": verbs},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": verbs},
    ]
    rbac.create_namespaced_role(namespace, {"metadata": {"name": account}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )
    token = core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    folder = work_dir(f"spark-operator-image-{namespace}")
    return token_kubeconfig(kube, folder / "kubeconfig", token, ca=CONTAINER_CA)


def test_spark_operator_image_runs_and_submits_a_driver_pod(
    kube: ControlPlane, kube_api: Any, namespace: str
) -> None:
    image_name = containers.image("spark-operator")
    assert non_root_uid(containers.configured_user(image_name))
    controller = chart_controller_security()
    security = controller["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["runAsNonRoot"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["allowPrivilegeEscalation"] is False

    document = policy_document(source={"topic": "orders"}, broker={"bootstrapServers": "kafka:9092"})
    document["metadata"] = {"name": unique("submit"), "namespace": namespace}
    policy = parse_policy(document)
    engine_image = containers.image("engine")
    config = OperatorConfig(spark_image=engine_image)
    app = render.spark_application(policy, config=config, owner=naming.Owner(policy.name, namespace, "uid"))
    spec = app["spec"]
    driver_pod = f"{policy.name}-driver"
    # The spark-submit arguments the spark-operator builds for this SparkApplication (its
    # submission.go), without the options this spec leaves empty.
    submit = [
        *("--master", f"k8s://{kube.server}", "--deploy-mode", spec["mode"], "--name", policy.name),
        *("--conf", f"spark.kubernetes.namespace={namespace}"),
        *("--conf", f"spark.kubernetes.container.image={spec['image']}"),
        *("--conf", "spark.kubernetes.submission.waitAppCompletion=false"),
        *("--conf", f"spark.kubernetes.driver.pod.name={driver_pod}"),
        spec["mainApplicationFile"],
        *spec["arguments"],
    ]
    kubeconfig = submitter_kubeconfig(kube, kube_api, namespace)
    name = unique("spark-operator-image")
    argv = containers.run_argv(
        name,
        image_name=image_name,
        entrypoint="/bin/bash",
        command=[
            "-c",
            '/usr/bin/entrypoint.sh version && exec "$SPARK_HOME/bin/spark-submit" "$@"',
            "-",
            *submit,
        ],
        volumes={kubeconfig: KUBECONFIG, kube.pki / "ca.crt": CONTAINER_CA},
        environment={"KUBECONFIG": KUBECONFIG},
        read_only=True,
        tmpfs=controller["writable"],
    )
    finished = containers.run_once(name, argv, timeout=300)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert f"Git Version: {versions()['SPARK_OPERATOR_VERSION']}" in finished.stdout, finished.stdout

    pod = client.CoreV1Api(kube_api).read_namespaced_pod(driver_pod, namespace)
    [container] = pod.spec.containers
    assert container.image == engine_image
    args = container.args
    assert args[0] == "driver"
    assert args[1:3] == ["--properties-file", "/opt/spark/conf/spark.properties"]
    assert args[-1 - len(spec["arguments"]) :] == [spec["mainApplicationFile"], *spec["arguments"]]
    env = {e.name: e for e in container.env}
    assert env["SPARK_DRIVER_BIND_ADDRESS"].value_from.field_ref.field_path == "status.podIP"
    assert env["SPARK_CONF_DIR"].value == "/opt/spark/conf"
