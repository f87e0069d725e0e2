"""Session fixtures: the real services every integration and e2e test stands on.

Each service is started once per test session by the repo's own code (``spark_dlq_devtools``)
and stopped at the end; nothing is assumed to be running. What was installed by
``scripts/setup.sh`` is found in the cache; a missing part fails the test with the command
that installs it, it never skips.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.node import Node
from spark_dlq_devtools.oauth2_issuer import OAuth2Issuer
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_devtools.pulsar import PulsarBroker

#: The whole flow on the test bed's node (tests/e2e/cluster): run by scripts/cluster-e2e.sh,
#: and by pytest when named on its command line; the suite's default run leaves it out.
CLUSTER_TESTS = f"{os.sep}tests{os.sep}e2e{os.sep}cluster{os.sep}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tier markers follow the folder, so a test cannot land in CI untiered. The cluster flow
    is deselected (and counted as such) unless a command-line argument names its folder."""
    named = any("e2e/cluster" in str(arg) for arg in config.args)
    kept, deselected = [], []
    for item in items:
        path = str(item.path)
        for tier in ("unit", "integration", "e2e"):
            if f"{os.sep}{tier}{os.sep}" in path:
                item.add_marker(getattr(pytest.mark, tier))
        if CLUSTER_TESTS in path:
            item.add_marker(pytest.mark.cluster)
            if not named:
                deselected.append(item)
                continue
        kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------------------------
# Kafka


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    """The session's broker: 127.0.0.1 for the host, the host's address for pods."""
    broker = KafkaBroker(name=f"kafka-test-{os.getpid()}", pods=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def bootstrap_servers(kafka: KafkaBroker) -> str:
    return kafka.bootstrap_servers


@pytest.fixture
def make_topic(bootstrap_servers: str) -> Callable[..., str]:
    """Create a topic with a unique name for this test: ``make_topic("orders", partitions=3)``."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})

    def create(prefix: str = "topic", *, partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = unique(prefix)
        futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
        for future in futures.values():
            future.result(timeout=30)
        return name

    return create


# ---------------------------------------------------------------------------------------------
# Pulsar


@pytest.fixture(scope="session")
def pulsar() -> Iterator[PulsarBroker]:
    """The session's standalone Pulsar broker (broker, bookie and metadata store in one JVM),
    started only when a test asks for it."""
    broker = PulsarBroker(name=f"pulsar-test-{os.getpid()}", secured=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def oauth2_issuer() -> Iterator[OAuth2Issuer]:
    """A stand-in OAuth2 issuer whose access tokens are the secured broker's tokens."""
    issuer = OAuth2Issuer()
    issuer.start()
    try:
        yield issuer
    finally:
        issuer.stop()


@pytest.fixture
def make_pulsar_topic(pulsar: PulsarBroker) -> Callable[..., str]:
    """Create a persistent topic in ``public/default`` with a unique name for this test:
    ``make_pulsar_topic("orders", partitions=2)``; ``partitions=0`` (the default) makes a
    non-partitioned topic."""

    def create(prefix: str = "topic", *, partitions: int = 0) -> str:
        return pulsar.create_topic(unique(prefix), partitions)

    return create


# ---------------------------------------------------------------------------------------------
# Kubernetes


@pytest.fixture(scope="session")
def kube() -> Iterator[ControlPlane]:
    plane = ControlPlane(name=f"kube-test-{os.getpid()}")
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kubeconfig(kube: ControlPlane) -> str:
    return str(kube.admin_kubeconfig)


@pytest.fixture(scope="session")
def kube_api(kube: ControlPlane) -> Any:
    """A synchronous Kubernetes API client (the ``kubernetes`` package) as the admin."""
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kube.admin_kubeconfig))


@pytest.fixture
def namespace(kube_api: Any) -> Iterator[str]:
    """A throwaway namespace per test (no controller manager runs, so deletion only marks it)."""
    from kubernetes import client

    name = unique("t")
    core = client.CoreV1Api(kube_api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


# ---------------------------------------------------------------------------------------------
# A cluster whose pods run: its own control plane (workloads=True) and the machine's one node


@pytest.fixture(scope="session")
def node() -> Iterator[Node]:
    """A real one-node cluster: kube-apiserver, controllers and scheduler, and this machine as
    its node (containerd, kubelet, kube-proxy, CoreDNS). One node runs per machine, so a
    session waits for another session's node to stop."""
    plane = ControlPlane(name=f"cluster-test-{os.getpid()}", workloads=True)
    plane.start()
    machine = Node(plane)
    try:
        machine.start(lock_timeout=900)
        yield machine
    finally:
        machine.stop()
        plane.stop()


# ---------------------------------------------------------------------------------------------
# Spark


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, kafka: KafkaBroker) -> Iterator[Any]:
    """One local SparkSession for the whole test session, with the Kafka connector. It depends
    on the broker so that it stops first (its producers would otherwise log a dead broker)."""
    from pyspark.sql import SparkSession

    from dlq_engine.job.session import DELTA_CONF, REQUIRED_CONF
    from spark_dlq_devtools.spark import TEST_CONF, submit_env
    from tests.helpers import DELTA_TEST_CONF

    os.environ.update(submit_env())
    # Python workers import the test and example processors by module name.
    paths = [str(REPO_ROOT), str(REPO_ROOT / "examples" / "processors")]
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])
    builder = SparkSession.builder.master("local[2]").appName("spark-dlq-tests")
    # What the engine requires, as it runs; and Delta's extension and catalog, which the engine
    # sets only for a policy with a Delta dead-letter table (one session serves every test).
    for key, value in {**TEST_CONF, **REQUIRED_CONF, **DELTA_CONF, **DELTA_TEST_CONF}.items():
        builder = builder.config(key, value)
    builder = builder.config(
        "spark.sql.streaming.checkpointLocation", str(tmp_path_factory.mktemp("checkpoints"))
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()
