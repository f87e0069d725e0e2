"""An operator harness: the real operator, in-process, against the real apiserver and Kafka.

``operator`` runs ``spark_dlq_operator.runner.run`` in a thread with a stop flag (kopf's own
way of being embedded), logged in with a kubeconfig, watching the test's namespace, with short
timings so retries and the drift resync happen within a test. The CRDs are the real ones: the
spark-operator's SparkApplication CRD from its Go module, Strimzi's KafkaTopic CRD made by
Strimzi's own generator (a current release serving ``v1``, and for the older-Strimzi tests one
serving ``v1beta2``). Most tests here play the spark-operator's and Strimzi's part by writing
status; the real spark-operator controller and webhook run in ``test_spark_operator.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import REGISTRY

from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.paths import kafka_topic_crd, spark_application_crd
from spark_dlq_operator import runner
from spark_dlq_operator.config import OperatorConfig
from tests import policy_builder
from tests.integration.crds import install_crds, load_crds

GROUP, VERSION, PLURAL = "sparkdlq.io", "v1alpha1", "deadletterpolicies"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
STRIMZI = ("kafka.strimzi.io", "v1", "kafkatopics")

T = TypeVar("T")


def wait_for(probe: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.2, what: str = "") -> T:
    """Call ``probe`` until it returns something truthy; fail with the last value after ``timeout``."""
    deadline = time.monotonic() + timeout
    value = probe()
    while not value:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or probe}: last {value!r}")
        time.sleep(interval)
        value = probe()
    return value


def resync_rounds() -> float:
    """How many resync rounds the in-process operator completed (its metric)."""
    return REGISTRY.get_sample_value("spark_dlq_operator_resync_rounds_total") or 0.0


def after_resync_rounds(rounds: int = 2, *, timeout: float = 30.0) -> None:
    """Wait until ``rounds`` more resync rounds completed: with two, the last one listed every
    object after this call (the first may have listed before it), reconciled and supervised it.
    Tests that prove something did not happen wait on this fact, not on a fixed time."""
    target = resync_rounds() + rounds
    wait_for(lambda: resync_rounds() >= target, timeout=timeout, what=f"{rounds} resync rounds")


class RunningOperator:
    """An operator running in a thread until ``stop()``."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="dlq-operator", daemon=True)
        self._thread.start()
        if not self._ready.wait(60):
            self.stop()
            raise AssertionError(f"the operator did not start: {self.error!r}")

    def _main(self) -> None:
        try:
            asyncio.run(runner.run(self.config, stop_flag=self._stop, ready_flag=self._ready))
        except BaseException as error:  # noqa: BLE001 - reported by stop() in the test's thread
            self.error = error

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the operator did not stop"
        assert self.error is None, f"the operator failed: {self.error!r}"


@pytest.fixture(scope="session")
def spark_crd(kube_api: Any, dlp_crd: str) -> str:
    [name] = install_crds(kube_api, [spark_application_crd()])
    return name


@contextlib.contextmanager
def served_for_the_test(kube_api: Any, crd: Path) -> Iterator[str]:
    """Install ``crd`` for one test (``auto`` picks Strimzi while it is there), then delete it
    and wait until no version of it answers."""
    [name] = install_crds(kube_api, [crd])
    document = load_crds([crd])[0]
    versions = [v["name"] for v in document["spec"]["versions"] if v.get("served")]
    yield name
    client.ApiextensionsV1Api(kube_api).delete_custom_resource_definition(name)

    def gone() -> bool:
        for version in versions:
            try:
                client.CustomObjectsApi(kube_api).list_cluster_custom_object(
                    STRIMZI[0], version, STRIMZI[2], limit=1
                )
                return False
            except ApiException as error:
                if error.status != 404:
                    raise
        return True

    wait_for(gone, timeout=60, what="the KafkaTopic CRD to go")


@pytest.fixture
def strimzi_crd(kube_api: Any) -> Iterator[str]:
    """The real KafkaTopic CRD of a current Strimzi (served as ``v1`` only), for this test."""
    with served_for_the_test(kube_api, kafka_topic_crd()) as name:
        yield name


@pytest.fixture
def strimzi_v1beta2_crd(kube_api: Any) -> Iterator[str]:
    """The real KafkaTopic CRD of an older Strimzi (``v1beta2``, no ``v1``), for this test."""
    with served_for_the_test(kube_api, kafka_topic_crd(v1beta2=True)) as name:
        yield name


@pytest.fixture
def operator_config(kube: ControlPlane, namespace: str, spark_crd: str) -> OperatorConfig:
    """Short timings: retries in about a second, a resync every 2 s."""
    return OperatorConfig(
        namespaces=(namespace,),
        kubeconfig=str(kube.admin_kubeconfig),
        spark_image="registry.test/spark-dlq:test",
        checkpoint_base="s3a://checkpoints/dlq",
        metrics_port=0,
        resync_interval=2.0,
        finalizer_timeout=60.0,
        kafka_timeout=3.0,
        broker_retry_delay=1.0,
        strimzi_poll_delay=0.5,
        topics_retry_delay=1.0,
    )


@pytest.fixture
def start_operator(operator_config: OperatorConfig) -> Iterator[Callable[..., RunningOperator]]:
    """``start_operator(**config_changes)`` runs an operator; every one is stopped at the end."""
    running: list[RunningOperator] = []

    def start(**changes: Any) -> RunningOperator:
        operator = RunningOperator(dataclasses.replace(operator_config, **changes))
        running.append(operator)
        return operator

    yield start
    for operator in running:
        if operator.alive():
            operator.stop()


@pytest.fixture
def operator(start_operator: Callable[..., RunningOperator]) -> RunningOperator:
    return start_operator()


class Cluster:
    """Terse access to the objects a test looks at, as the admin."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.namespace = namespace
        self.objects = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    # policies
    def create_policy(self, document: dict[str, Any]) -> dict[str, Any]:
        return dict(
            self.objects.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, document)
        )

    def policy(self, name: str) -> dict[str, Any] | None:
        return self._get(GROUP, VERSION, PLURAL, name, self.namespace)

    def patch_policy(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return dict(
            self.objects.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, patch)
        )

    def delete_policy(self, name: str) -> None:
        self.objects.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

    def status(self, name: str) -> dict[str, Any]:
        return dict((self.policy(name) or {}).get("status") or {})

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        for condition in self.status(name).get("conditions") or []:
            if condition["type"] == kind:
                return dict(condition)
        return {}

    # owned objects
    def application(self, name: str) -> dict[str, Any] | None:
        return self._get(*SPARK, name, self.namespace)

    def applications(self) -> list[dict[str, Any]]:
        group, version, plural = SPARK
        items = self.objects.list_namespaced_custom_object(group, version, self.namespace, plural)["items"]
        return list(items)

    def set_application_state(self, name: str, state: str, *, submission: str = "1", error: str = "") -> None:
        """Play the spark-operator: write ``status.applicationState`` (with the ``driverInfo``
        its CRD requires)."""
        app_state: dict[str, Any] = {"state": state}
        if error:
            app_state["errorMessage"] = error
        self.objects.patch_namespaced_custom_object_status(
            *SPARK[:2],
            self.namespace,
            SPARK[2],
            name,
            {"status": {"applicationState": app_state, "submissionID": submission, "driverInfo": {}}},
        )

    def delete_application(self, name: str) -> None:
        group, version, plural = SPARK
        self.objects.delete_namespaced_custom_object(group, version, self.namespace, plural, name)

    def config_map(self, name: str) -> Any:
        try:
            return self.core.read_namespaced_config_map(name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def kafka_topic(self, namespace: str, name: str, *, version: str = STRIMZI[1]) -> dict[str, Any] | None:
        return self._get(STRIMZI[0], version, STRIMZI[2], name, namespace)

    def kafka_topics(self, namespace: str, *, version: str = STRIMZI[1]) -> list[dict[str, Any]]:
        group, _, plural = STRIMZI
        return list(self.objects.list_namespaced_custom_object(group, version, namespace, plural)["items"])

    def set_kafka_topic_ready(self, namespace: str, name: str, *, version: str = STRIMZI[1]) -> None:
        """Play Strimzi's topic operator: the KafkaTopic is Ready for its generation."""
        group, _, plural = STRIMZI
        current = self.objects.get_namespaced_custom_object(group, version, namespace, plural, name)
        self.objects.patch_namespaced_custom_object_status(
            group,
            version,
            namespace,
            plural,
            name,
            {
                "status": {
                    "observedGeneration": current["metadata"]["generation"],
                    "conditions": [{"type": "Ready", "status": "True"}],
                }
            },
        )

    def events(self, name: str) -> list[Any]:
        items = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}"
        ).items
        return list(items)

    def event_reasons(self, name: str) -> set[str]:
        return {event.reason for event in self.events(name)}

    def _get(self, group: str, version: str, plural: str, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return dict(self.objects.get_namespaced_custom_object(group, version, namespace, plural, name))
        except ApiException as error:
            if error.status == 404:
                return None
            raise


@pytest.fixture
def cluster(kube_api: Any, namespace: str) -> Cluster:
    return Cluster(kube_api, namespace)


@pytest.fixture
def kafka_admin(bootstrap_servers: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap_servers})


def topic_partitions(admin: Any, topic: str) -> int | None:
    """Partitions of ``topic`` on the broker, None when it does not exist."""
    metadata = admin.list_topics(timeout=10)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return None
    return len(found.partitions)


def policy_document(
    namespace: str, name: str, *, source: str, bootstrap: str, source_subscription: str = "", **spec: Any
) -> dict[str, Any]:
    """A policy for ``source`` on ``bootstrap``, with spec sections given as keyword arguments.
    ``source_subscription`` (default ``billing``) names its default retry and dead-letter
    topics: policies on one source need their own (a retry or dead-letter topic is one
    policy's)."""
    where = {
        "metadata.namespace": namespace,
        "metadata.name": name,
        "spec.source.topic": source,
        "spec.broker.bootstrapServers": bootstrap,
    }
    if source_subscription:
        where["spec.source.subscription"] = source_subscription
    return policy_builder.policy_document(where, **spec)


@contextlib.contextmanager
def no_change(probe: Callable[[], object], *, settle: float) -> Iterator[None]:
    """Assert that ``probe()`` is the same after the block and ``settle`` seconds more."""
    before = probe()
    yield
    time.sleep(settle)
    assert probe() == before
