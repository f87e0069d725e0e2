"""What the operator writes, taken by the real Kubeflow spark-operator.

The spark-operator built from its Go module runs as host processes against the test bed's
apiserver (``spark_dlq_devtools.spark_operator``): its controller, and its webhook registered
with the chart's own webhook configurations. It is given the SparkApplications ``render``
writes, and its own admission, spark-submit and state machine decide:

- a policy name that is a DNS subdomain but not a DNS-1035 label (a dot) is refused as a
  SparkApplication name by its validating webhook; the name the operator derives is taken;
- the driver pod spark-submit creates carries the policy volume, the metrics port and the
  restricted security contexts from the pod templates, also where its pod webhook is not called;
- with the restart policy the operator writes, the application is resubmitted after every loss
  of its driver, more times than any ``OnFailure`` budget, and never reaches ``FAILED``;
- an application in a namespace it does not watch never gets a state, and the operator's hint
  names that namespace.

No node runs these pods: the driver pods stay Pending, which is what the controller needs to
walk its states.
"""

from __future__ import annotations

import copy
import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dlq_engine.model import parse_policy
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.spark_operator import JOB_NAMESPACE_LABEL, POD_WEBHOOK_OFF, WATCHED, SparkOperator
from spark_dlq_operator import naming, render
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.policies.application_state import application_state, job_condition, time_of, unnoticed
from tests.conftest import unique
from tests.helpers import policy_document

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
#: Short waits, so the restarts below take seconds: the shapes are those the operator writes.
CONFIG = OperatorConfig(spark_image="spark-dlq:test", restart_interval=1, submission_retry_interval=1)
#: More driver losses than the ``OnFailure`` budget a streaming job used to be given.
DRIVER_LOSSES = 4


@pytest.fixture(scope="module")
def spark_operator(kube: ControlPlane) -> Iterator[SparkOperator]:
    operator = SparkOperator(kube, name=unique("spark-operator"))
    operator.start()
    yield operator
    operator.stop()


def job_namespace(kube_api: Any, value: str) -> str:
    name = unique("sparkop")
    labels = {JOB_NAMESPACE_LABEL: value}
    client.CoreV1Api(kube_api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
    )
    return name


def application(policy_name: str, namespace: str) -> dict[str, Any]:
    document = policy_document(source={"topic": "orders"}, broker={"bootstrapServers": "kafka:9092"})
    document["metadata"] = {"name": policy_name, "namespace": namespace}
    policy = parse_policy(document)
    owner = naming.Owner(policy.name, namespace, "00000000-0000-0000-0000-000000000000")
    app = render.spark_application(policy, config=CONFIG, owner=owner)
    # No DeadLetterPolicy object owns it here: the garbage collector would delete it.
    del app["metadata"]["ownerReferences"]
    return app


def create(kube_api: Any, app: dict[str, Any]) -> None:
    namespace = app["metadata"]["namespace"]
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, app)


def read(kube_api: Any, app: dict[str, Any]) -> dict[str, Any]:
    meta = app["metadata"]
    found: dict[str, Any] = client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        GROUP, VERSION, meta["namespace"], PLURAL, meta["name"]
    )
    return found


def wait_for(what: str, check: Any, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"{what}: not after {timeout:.0f}s")


def driver_pod(kube_api: Any, app: dict[str, Any], *, not_uid: str | None = None) -> Any:
    """The driver pod of the application's current submission (another than ``not_uid``)."""
    status = read(kube_api, app).get("status", {})
    name = status.get("driverInfo", {}).get("podName")
    if not name:
        return None
    try:
        pod = client.CoreV1Api(kube_api).read_namespaced_pod(name, app["metadata"]["namespace"])
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    if pod.metadata.uid == not_uid or pod.metadata.deletion_timestamp is not None:
        return None
    return pod


def test_webhook_refuses_a_policy_name_that_is_not_a_dns_1035_label(
    spark_operator: SparkOperator, kube_api: Any
) -> None:
    namespace = job_namespace(kube_api, WATCHED)
    app = application("orders.billing", namespace)
    assert app["metadata"]["name"] != "orders.billing"
    verbatim = copy.deepcopy(app)
    verbatim["metadata"]["name"] = "orders.billing"
    with pytest.raises(ApiException) as refused:
        create(kube_api, verbatim)
    assert "DNS-1035" in str(refused.value.body) or "dns-1035" in str(refused.value.body).lower()
    create(kube_api, app)
    assert read(kube_api, app)["metadata"]["name"] == naming.application_name("orders.billing")


@pytest.mark.parametrize("webhook_label", [WATCHED, POD_WEBHOOK_OFF])
def test_driver_pod_carries_the_templates_with_or_without_the_pod_webhook(
    spark_operator: SparkOperator, kube_api: Any, webhook_label: str
) -> None:
    namespace = job_namespace(kube_api, webhook_label)
    policy_name = unique("orders")
    app = application(policy_name, namespace)
    create(kube_api, app)
    pod = wait_for("the driver pod", lambda: driver_pod(kube_api, app))
    volumes = {v.name: v for v in pod.spec.volumes}
    assert volumes["policy"].config_map.name == naming.config_map_name(policy_name)
    [container] = [c for c in pod.spec.containers if c.name == render.DRIVER_CONTAINER]
    assert {(m.name, m.mount_path) for m in container.volume_mounts} >= {("policy", naming.POLICY_MOUNT)}
    assert [(p.name, p.container_port) for p in container.ports or [] if p.name == "metrics"] == [
        ("metrics", render.ENGINE_METRICS_PORT)
    ]
    assert pod.spec.security_context.run_as_non_root is True
    assert pod.spec.security_context.seccomp_profile.type == "RuntimeDefault"
    security = container.security_context
    assert security.allow_privilege_escalation is False
    assert security.capabilities.drop == ["ALL"]
    assert read(kube_api, app)["status"]["applicationState"]["state"] == "SUBMITTED"


def test_application_is_resubmitted_after_every_loss_of_its_driver(
    spark_operator: SparkOperator, kube_api: Any
) -> None:
    namespace = job_namespace(kube_api, WATCHED)
    app = application(unique("orders"), namespace)
    create(kube_api, app)
    core = client.CoreV1Api(kube_api)
    seen: set[str] = set()
    pod = wait_for("the first driver pod", lambda: driver_pod(kube_api, app))
    for _ in range(DRIVER_LOSSES):
        seen.add(pod.metadata.uid)
        core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
        lost = pod.metadata.uid

        def resubmitted(lost: str = lost) -> Any:
            state = read(kube_api, app).get("status", {}).get("applicationState", {}).get("state")
            assert state != "FAILED", read(kube_api, app)["status"]
            current = driver_pod(kube_api, app, not_uid=lost)
            return current if current is not None and state == "SUBMITTED" else None

        pod = wait_for("a resubmission", resubmitted, 240)
        assert pod.metadata.uid not in seen
    status = read(kube_api, app)["status"]
    assert status["submissionAttempts"] >= DRIVER_LOSSES + 1
    # The operator's reading of that status: submitted again, not failed.
    condition = job_condition(read(kube_api, app))
    assert condition.reason == "Submitted", condition


def test_application_in_a_namespace_it_does_not_watch_gets_the_hint(
    spark_operator: SparkOperator, kube_api: Any
) -> None:
    watched = job_namespace(kube_api, WATCHED)
    unwatched = job_namespace(kube_api, "not-a-job-namespace")
    apps = [application(unique("orders"), namespace) for namespace in (watched, unwatched)]
    for app in apps:
        create(kube_api, app)
    # Once the watched one has a state, the other one has had the same time to get one.
    wait_for("the watched application's state", lambda: application_state(read(kube_api, apps[0]))[0])
    seen = read(kube_api, apps[1])
    assert application_state(seen)[0] == "", seen.get("status")
    created = time_of(seen["metadata"]["creationTimestamp"])
    assert created is not None
    hint = unnoticed(seen, now=created + datetime.timedelta(seconds=120), timeout=60)
    assert hint is not None
    assert hint.reason == "NotPickedUp"
    assert unwatched in hint.message
