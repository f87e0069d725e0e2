"""The red team (issue 26): a policy author tries each escalation for real, and is refused or
contained, with the message asserted.

The author is a user holding only the ``edit`` role in team A's namespace (a RoleBinding to the
ClusterRole ``edit``) plus the chart's aggregated rights on policies and redrives: the chart's
user ClusterRoles as ``helm template`` renders them, aggregated into ``edit`` by the control
plane's clusterrole-aggregation controller (``spark_dlq_devtools.kube`` runs it). Team B is
another namespace, with a policy of its own on the real broker and a plain topic of its own.
One operator watches both namespaces; every policy names one class made from the chart's
``defaultClass`` values (the broker listed, an image allow-list, executor limits, a dead-letter
table base). One apiserver, one broker, one operator for the module; no Spark runs: every check
here happens before a Spark job would start (the operator refuses a redrive filter before it
creates anything for it).

Where each attack is stopped: the CRD's rules at admission (sparkConf keys, free paths), RBAC
(another namespace, status, classes, a Spark pod's token), the operator (the class's rules,
topics owned by another policy or another team).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dlq_engine.model import parse_policy
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.paths import kubernetes_bin
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import govern
from spark_dlq_operator.kubectl_dlq import cli as kubectl_dlq
from spark_dlq_operator.policy_class import (
    BUILT_IN_CLASS,
    DEFAULT_SPARK_CONF_ALLOWED,
    NEVER_CHECKPOINT,
    NEVER_TABLE_PATH,
    ClassRefusal,
    forbidden,
    never_allowed_message,
)
from tests import filter_corpus
from tests.chart import find, one, render
from tests.conftest import unique
from tests.integration.operator.conftest import (
    GROUP,
    PLURAL,
    VERSION,
    Cluster,
    RunningOperator,
    policy_document,
    topic_partitions,
    wait_for,
)

CLASSES = "deadletterpolicyclasses"
REDRIVES = "deadletterredrives"
CHECKPOINT_BASE = "s3a://checkpoints/dlq"
TABLE_BASE = "s3a://tables/dlq"
IMAGE = "registry.test/spark-dlq:test"
#: How often a test looks again (the operator answers within tens of milliseconds here).
POLL = 0.05
#: A Pulsar cluster the class lists without an admin URL (nothing listens there: every policy
#: naming it is refused before a client would connect).
PULSAR_SERVICE = "pulsar://pulsar.platform.svc:6650"


@dataclasses.dataclass(frozen=True)
class Bed:
    """The module's test bed: the two teams' namespaces, the class, the author's API client,
    the admin's view of each namespace, the broker."""

    team_a: str
    team_b: str
    class_name: str
    author: Any
    #: The author's kubeconfig (for kubectl).
    author_kubeconfig: str
    admin_a: Cluster
    admin_b: Cluster
    bootstrap: str
    kafka: AdminClient
    #: The source topic both teams read (each its own subscription, so its own derived topics).
    source: str

    def policy(self, namespace: str, name: str, *, subscription: str = "", **spec: Any) -> dict[str, Any]:
        """A policy of the class on the broker, reading ``source`` with ``subscription`` (default
        ``name``: its derived retry and dead-letter topics are its own)."""
        document = policy_document(
            namespace,
            name,
            source=self.source,
            bootstrap=self.bootstrap,
            source_subscription=subscription or name,
            **spec,
        )
        document["spec"]["className"] = self.class_name
        return document

    def objects(self) -> Any:
        """The custom objects API as the author."""
        return client.CustomObjectsApi(self.author)

    def author_creates(self, document: dict[str, Any]) -> dict[str, Any]:
        namespace = document["metadata"]["namespace"]
        return dict(
            self.objects().create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, document)
        )


def make_topic(admin: AdminClient, prefix: str, *, partitions: int = 1) -> str:
    name = unique(prefix)
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    return name


@pytest.fixture(scope="module")
def platform(kube_api: Any, dlp_crd: str, bootstrap_servers: str) -> Iterator[str]:
    """What the platform team installs: the chart's user ClusterRoles (aggregated into view and
    edit) and a class from the chart's ``defaultClass`` values. Returns the class's name."""
    release, class_name = unique("redteam"), unique("class")
    values = {
        "defaultClass": {
            "name": class_name,
            "default": False,  # the policies name it: the cluster's other tests see no default
            "brokers": [
                {"type": "kafka", "bootstrapServers": bootstrap_servers},
                {"type": "pulsar", "serviceUrl": PULSAR_SERVICE},
            ],
            "images": {"allowed": ["registry.test/spark-dlq:*"]},
            "limits": {"executor": {"maxInstances": 2}},
            "storage": {"checkpointBase": CHECKPOINT_BASE, "deadLetterTableBase": TABLE_BASE},
        }
    }
    objects = render(values, release=release)
    rbac, custom = client.RbacAuthorizationV1Api(kube_api), client.CustomObjectsApi(kube_api)
    user_roles = [
        role
        for role in find(objects, "ClusterRole")
        if role["metadata"]["labels"].get("app.kubernetes.io/component") == "user-roles"
    ]
    assert len(user_roles) == 2, [r["metadata"]["name"] for r in user_roles]
    for role in user_roles:
        rbac.create_cluster_role(role)
    custom.create_cluster_custom_object(GROUP, VERSION, CLASSES, one(objects, "DeadLetterPolicyClass"))
    yield class_name
    custom.delete_cluster_custom_object(GROUP, VERSION, CLASSES, class_name)
    for role in user_roles:
        rbac.delete_cluster_role(role["metadata"]["name"])


def may(api: Any, verb: str, resource: str, namespace: str, *, group: str = GROUP) -> bool:
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                group=group, resource=resource, verb=verb, namespace=namespace
            )
        )
    )
    return bool(client.AuthorizationV1Api(api).create_self_subject_access_review(review).status.allowed)


@pytest.fixture(scope="module")
def bed(
    kube: ControlPlane, kube_api: Any, spark_crd: str, platform: str, bootstrap_servers: str
) -> Iterator[Bed]:
    """The two namespaces, the author bound to ``edit`` in team A's, and one operator."""
    core = client.CoreV1Api(kube_api)
    team_a, team_b = unique("team-a"), unique("team-b")
    for name in (team_a, team_b):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    user = unique("author")
    client.RbacAuthorizationV1Api(kube_api).create_namespaced_role_binding(
        team_a,
        {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    author_kubeconfig = str(kube.kubeconfig(user))
    author = config.new_client_from_config(config_file=author_kubeconfig)
    # The chart's rights reach the author through edit once the aggregation controller has
    # copied them in (and edit's own, e.g. ConfigMaps, once it has filled edit at all).
    wait_for(
        lambda: (
            may(author, "create", PLURAL, team_a) and may(author, "create", "configmaps", team_a, group="")
        ),
        interval=POLL,
        what="the chart's rights aggregated into edit",
    )
    kafka = AdminClient({"bootstrap.servers": bootstrap_servers})
    operator = RunningOperator(
        OperatorConfig(
            namespaces=(team_a, team_b),
            kubeconfig=str(kube.admin_kubeconfig),
            spark_image=IMAGE,
            checkpoint_base="s3a://checkpoints/operator",
            metrics_port=0,
            resync_interval=2.0,
            finalizer_timeout=60.0,
            kafka_timeout=3.0,
            broker_retry_delay=1.0,
            topics_retry_delay=1.0,
        )
    )
    try:
        yield Bed(
            team_a,
            team_b,
            platform,
            author,
            author_kubeconfig,
            Cluster(kube_api, team_a),
            Cluster(kube_api, team_b),
            bootstrap_servers,
            kafka,
            make_topic(kafka, "orders"),
        )
    finally:
        operator.stop()
        for name in (team_a, team_b):
            core.delete_namespace(name)


@pytest.fixture(scope="module")
def victim(bed: Bed) -> str:
    """Team B's policy ``billing``, running: its topics created (and recorded) by the operator.
    Returns its dead-letter topic."""
    bed.admin_b.create_policy(bed.policy(bed.team_b, "billing"))
    wait_for(lambda: bed.admin_b.application("billing"), interval=POLL, what="team B's SparkApplication")
    owned = wait_for(
        lambda: bed.admin_b.status("billing").get("ownedTopics"),
        interval=POLL,
        what="team B's topics recorded",
    )
    [dead_letter] = [t["name"] for t in owned if t["kind"] == "deadLetter"]
    assert topic_partitions(bed.kafka, dead_letter) == 1
    return str(dead_letter)


@pytest.fixture(scope="module")
def payroll(bed: Bed) -> str:
    """The author's own valid policy (the control: the author may do what the class allows)."""
    bed.author_creates(bed.policy(bed.team_a, "payroll", spark={"image": "registry.test/spark-dlq:v2"}))
    wait_for(lambda: bed.admin_a.application("payroll"), interval=POLL, what="the author's SparkApplication")
    return "payroll"


def refused(call: Callable[[], object], status: int) -> dict[str, Any]:
    """The apiserver's answer to ``call``, which must be refused with ``status``."""
    with pytest.raises(ApiException) as error:
        call()
    assert error.value.status == status, error.value
    return dict(json.loads(error.value.body))


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c.get("message", "")) for c in body.get("details", {}).get("causes", [])]


def refused_by_the_operator(document: dict[str, Any]) -> list[str]:
    """What the operator says of ``document`` had it been stored under an older CRD."""
    parse_policy(document)  # the model takes it: dlq-engine run -f on a laptop reads these
    with pytest.raises(ClassRefusal) as refusal:
        govern(document, BUILT_IN_CLASS, config=OperatorConfig())
    return [str(issue) for issue in refusal.value.issues]


# ---------------------------------------------------------------------------------------------
# Refused at admission: sparkConf keys no class can allow, free paths


@pytest.mark.parametrize(
    "conf",
    [
        pytest.param(
            {"spark.kubernetes.authenticate.driver.serviceAccountName": "spark-operator"}, id="driver-sa"
        ),
        pytest.param({"spark.kubernetes.driver.serviceAccountName": "default"}, id="driver-sa-key"),
        pytest.param({"spark.kubernetes.namespace": "{team_b}"}, id="another-namespace"),
        pytest.param(
            {
                "spark.kubernetes.driver.volumes.hostPath.root.mount.path": "/host",
                "spark.kubernetes.driver.volumes.hostPath.root.options.path": "/",
            },
            id="host-path",
        ),
        pytest.param({"spark.jars.packages": "org.example:payload:1.0"}, id="jars-packages"),
        pytest.param({"spark.driver.extraJavaOptions": "-javaagent:/tmp/agent.jar"}, id="java-options"),
        pytest.param({"spark.executor.extraClassPath": "/tmp/payload.jar"}, id="executor-class-path"),
        pytest.param({"spark.executorEnv.JAVA_TOOL_OPTIONS": "-javaagent:/tmp/agent.jar"}, id="executor-env"),
        pytest.param(
            {"spark.sql.streaming.checkpointLocation": "s3a://checkpoints/dlq/{team_b}/billing"},
            id="checkpoint-conf",
        ),
    ],
)
def test_spark_conf_no_class_can_allow_is_refused_at_admission(bed: Bed, conf: dict[str, str]) -> None:
    conf = {key: value.format(team_b=bed.team_b) for key, value in conf.items()}
    document = bed.policy(
        bed.team_a, unique("evil"), spark={"sparkConf": {"spark.sql.shuffle.partitions": "4", **conf}}
    )

    body = refused(lambda: bed.author_creates(document), 422)

    # The first offending key is named (the map's order is the apiserver's), with what to use.
    expected = [
        [("spec.spark.sparkConf", f"Forbidden: {key} {never_allowed_message(group)}")]
        for key in conf
        if (group := forbidden(key)) is not None
    ]
    assert causes(body) in expected
    assert refused_by_the_operator(document) == [
        f"spec.spark.sparkConf.{key}: {never_allowed_message(forbidden(key))}"  # type: ignore[arg-type]
        for key in sorted(conf)
    ]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        pytest.param(
            {"spark": {"checkpointLocation": f"{CHECKPOINT_BASE}/{{team_b}}/billing"}},
            "spec.spark.checkpointLocation",
            NEVER_CHECKPOINT,
            id="checkpoint",
        ),
        pytest.param(
            {"deadLetter": {"table": {"format": "delta", "path": f"{TABLE_BASE}/{{team_b}}/billing"}}},
            "spec.deadLetter.table.path",
            NEVER_TABLE_PATH,
            id="table",
        ),
    ],
)
def test_another_namespaces_checkpoint_or_table_is_refused_at_admission(
    bed: Bed, spec: dict[str, Any], field: str, message: str
) -> None:
    spec = json.loads(json.dumps(spec).replace("{team_b}", bed.team_b))
    document = bed.policy(bed.team_a, unique("evil"), **spec)

    body = refused(lambda: bed.author_creates(document), 422)

    assert (field, f"Forbidden: {message}") in causes(body)
    assert f"{field}: {message}" in refused_by_the_operator(document)


# ---------------------------------------------------------------------------------------------
# Refused by RBAC: another namespace, the status, the classes


def test_the_author_cannot_reach_another_namespace_the_status_or_the_classes(
    bed: Bed, victim: str, payroll: str
) -> None:
    objects, core = bed.objects(), client.CoreV1Api(bed.author)

    def cannot(verb: str, resource: str, call: Callable[[], object], where: str = "") -> None:
        message = refused(call, 403)["message"]
        assert f'cannot {verb} resource "{resource}" in API group' in message, message
        assert where in message

    inside_b = f'in the namespace "{bed.team_b}"'
    cannot(
        "create",
        PLURAL,
        lambda: objects.create_namespaced_custom_object(
            GROUP, VERSION, bed.team_b, PLURAL, bed.policy(bed.team_b, "intruder")
        ),
        inside_b,
    )
    cannot(
        "delete",
        PLURAL,
        lambda: objects.delete_namespaced_custom_object(GROUP, VERSION, bed.team_b, PLURAL, "billing"),
        inside_b,
    )
    cannot(
        "get", "configmaps", lambda: core.read_namespaced_config_map("billing-policy", bed.team_b), inside_b
    )
    cannot("list", "secrets", lambda: core.list_namespaced_secret(bed.team_b), inside_b)
    # status.ownedTopics decides which topics a deletion deletes: forging it would make another
    # team's dead-letter topic "owned" by the author's policy.
    forged = {"status": {"ownedTopics": [{"broker": bed.bootstrap, "name": victim, "kind": "deadLetter"}]}}
    cannot(
        "patch",
        f"{PLURAL}/status",
        lambda: objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, bed.team_a, PLURAL, payroll, forged
        ),
    )
    # The class is the platform team's: no author may widen it.
    cannot(
        "patch",
        CLASSES,
        lambda: objects.patch_cluster_custom_object(
            GROUP, VERSION, CLASSES, bed.class_name, {"spec": {"images": {"allowed": ["*"]}}}
        ),
    )
    cannot(
        "create",
        CLASSES,
        lambda: objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            CLASSES,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "DeadLetterPolicyClass",
                "metadata": {"name": unique("mine")},
            },
        ),
    )
    assert victim not in json.dumps(bed.admin_a.status(payroll))


def test_the_author_reads_the_dead_letters_of_a_policy_that_names_no_broker(
    bed: Bed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The author may not list the classes, so ``kubectl dlq --policy`` finds a brokerless
    policy's broker in its status, where the operator wrote its class's."""
    document = bed.policy(bed.team_a, "receipts")
    del document["spec"]["broker"]
    bed.author_creates(document)
    broker = wait_for(
        lambda: bed.admin_a.status("receipts").get("broker"), interval=POLL, what="status.broker written"
    )
    assert broker == {"type": "kafka", "bootstrapServers": bed.bootstrap}
    monkeypatch.setenv("KUBECTL", str(kubernetes_bin("kubectl")))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = kubectl_dlq.main(
            [
                "stats",
                "--policy",
                "receipts",
                "-n",
                bed.team_a,
                "--kubeconfig",
                bed.author_kubeconfig,
                "-o",
                "json",
            ]
        )
    assert (status, err.getvalue()) == (0, ""), out.getvalue()
    assert json.loads(out.getvalue())["total"] == 0


# ---------------------------------------------------------------------------------------------
# Refused by the operator: what the class does not allow (phase Invalid, nothing created)


#: Each: what the author asks for, and the condition's message ({cls}, {broker}, {allowed}: the
#: class's name, brokers and sparkConf allow-list; {admin}: the URL of the author's collector).
BEYOND_THE_CLASS: dict[str, tuple[dict[str, Any], str]] = {
    "image": (
        {"spark": {"image": "evil.example/miner:latest"}},
        "spec.spark.image: 'evil.example/miner:latest' is not allowed by class '{cls}' "
        "(spec.images.allowed: registry.test/spark-dlq:*)",
    ),
    "broker": (
        {"broker": {"bootstrapServers": "kafka.team-b.svc:9092"}},
        "spec.broker.bootstrapServers: 'kafka.team-b.svc:9092' is not allowed by class '{cls}' "
        "(spec.brokers: {broker})",
    ),
    "pulsar-admin-url": (
        # The operator's admin calls, with the class's credentials for that cluster, would go
        # to the author's server.
        {"broker": {"type": "pulsar", "serviceUrl": PULSAR_SERVICE, "adminUrl": "{admin}"}},
        "spec.broker.adminUrl: '{admin}' is not allowed by class '{cls}' (spec.brokers[1] names no adminUrl)",
    ),
    "strimzi-cluster": (
        # KafkaTopics for another Strimzi cluster would take over its topics of those names.
        {"topics": {"strimzi": {"namespace": "kafka", "cluster": "prod"}}},
        "spec.topics.strimzi.namespace: 'kafka' is not allowed by class '{cls}' (spec.brokers[0] names no "
        "strimzi cluster)\nspec.topics.strimzi.cluster: 'prod' is not allowed by class '{cls}' "
        "(spec.brokers[0] names no strimzi cluster)",
    ),
    "spark-conf-key": (
        {"spark": {"sparkConf": {"spark.eventLog.dir": "s3a://logs/team-b"}}},
        "spec.spark.sparkConf.spark.eventLog.dir: is not allowed by class '{cls}' "
        "(spec.sparkConf.allowed: {allowed})",
    ),
    "pod-node-selector": (
        {"spark": {"pod": {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}}}},
        "spec.spark.pod.nodeSelector: is not allowed by class '{cls}' (spec.pods.policyMayOverride is empty)",
    ),
    "executors": (
        {"spark": {"executor": {"instances": 50}}},
        "spec.spark.executor.instances: 50 is more than class '{cls}' allows "
        "(spec.limits.executor.maxInstances: 2)",
    ),
}


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    """The author's server, where a policy points the operator's admin calls."""
    with Collector() as server:
        yield server


class Collector:
    """A TCP listener on 127.0.0.1 that counts the connections made to it."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self._socket.accept()
                self.connections += 1
                connection.close()

    def __enter__(self) -> Collector:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._socket.close()


@pytest.fixture(scope="module")
def beyond_the_class(bed: Bed, collector: Collector) -> dict[str, str]:
    """Every policy of ``BEYOND_THE_CLASS``, created by the author at once (the operator
    handles them side by side); their names by case."""
    names: dict[str, str] = {}
    for case, (spec, _) in BEYOND_THE_CLASS.items():
        names[case] = name = unique(case)
        rest = {key: value for key, value in spec.items() if key != "broker"}
        document = bed.policy(bed.team_a, name, **rest)
        if "broker" in spec:  # the builder sets the broker last: replace it afterwards
            broker = dict(spec["broker"])
            if "adminUrl" in broker:
                broker["adminUrl"] = collector.url
            document["spec"]["broker"] = broker
        bed.author_creates(document)
    return names


@pytest.mark.parametrize("case", list(BEYOND_THE_CLASS))
def test_what_the_class_does_not_allow_is_invalid_and_gets_nothing(
    bed: Bed, beyond_the_class: dict[str, str], collector: Collector, case: str
) -> None:
    name = beyond_the_class[case]

    wait_for(
        lambda: bed.admin_a.status(name).get("phase") == "Invalid", interval=POLL, what="the policy Invalid"
    )
    ready = bed.admin_a.condition(name, "Ready")
    allowed = ", ".join(DEFAULT_SPARK_CONF_ALLOWED)  # the chart's default list is the built-in one
    assert (ready["reason"], ready["message"]) == (
        "ClassViolation",
        BEYOND_THE_CLASS[case][1].format(
            cls=bed.class_name,
            broker=f"{bed.bootstrap}, {PULSAR_SERVICE}",
            allowed=allowed,
            admin=collector.url,
        ),
    )
    assert collector.connections == 0
    assert bed.admin_a.application(name) is None
    assert bed.admin_a.config_map(f"{name}-policy") is None
    assert topic_partitions(bed.kafka, f"{bed.source}-{name}-DLQ") is None


# ---------------------------------------------------------------------------------------------
# Contained by the operator: topics owned by another policy or another team


def test_another_policys_dead_letter_topic_is_refused_and_survives_the_deletion(
    bed: Bed, victim: str
) -> None:
    bed.author_creates(
        bed.policy(bed.team_a, "sharer", deadLetter={"topic": victim}, topics={"deleteWithPolicy": True})
    )

    refusal = wait_for(
        lambda: (c := bed.admin_a.condition("sharer", "TopicsReady")).get("reason") == "TopicInUse" and c,
        interval=POLL,
        what="TopicsReady TopicInUse",
    )
    assert refusal["message"] == (
        f"spec.deadLetter.topic: topic {victim!r} on broker {bed.bootstrap!r} is the dead-letter topic of "
        f"DeadLetterPolicy {bed.team_b}/billing, which keeps it (the operator created it for that policy): "
        "a retry or dead-letter topic belongs to one policy; name another"
    )
    assert bed.admin_a.application("sharer") is None
    assert bed.admin_a.config_map("sharer-policy") is None
    assert topic_partitions(bed.kafka, f"{bed.source}-sharer-RETRY") is None

    bed.objects().delete_namespaced_custom_object(GROUP, VERSION, bed.team_a, PLURAL, "sharer")
    wait_for(lambda: bed.admin_a.policy("sharer") is None, interval=POLL, what="the sharing policy to go")
    assert topic_partitions(bed.kafka, victim) == 1
    assert victim in [t["name"] for t in bed.admin_b.status("billing")["ownedTopics"]]


def test_another_teams_topic_named_with_delete_with_policy_survives_and_paths_stay_home(
    bed: Bed, victim: str
) -> None:
    """The attack of issue 26 as it was measured: a topic the policy did not create, named as its
    dead-letter topic with deleteWithPolicy. The policy runs (the topic exists), and deleting it
    keeps the topic. Its checkpoint and table are in the author's namespace, whatever its name."""
    ledger = make_topic(bed.kafka, "team-b-ledger", partitions=2)
    bed.author_creates(
        bed.policy(
            bed.team_a,
            "billing",  # team B's policy's name: its paths must still be the author's own
            subscription="ledger",  # its retry topic: not team B's
            deadLetter={"topic": ledger, "table": {"format": "delta"}},
            topics={"deleteWithPolicy": True},
        )
    )
    wait_for(
        lambda: bed.admin_a.application("billing"),
        interval=POLL,
        what="the borrowing policy's SparkApplication",
    )
    wait_for(
        lambda: bed.admin_a.policy("billing")["metadata"].get("finalizers"),
        interval=POLL,
        what="its finalizer",
    )
    # The status is written after the SparkApplication: wait for it.
    topics = wait_for(
        lambda: bed.admin_a.condition("billing", "TopicsReady").get("message"),
        interval=POLL,
        what="TopicsReady",
    )
    assert topics.endswith(
        f"; kept when the policy is deleted (the operator did not create them for it): {ledger!r}"
    )
    engine = parse_policy_yaml(bed.admin_a.config_map("billing-policy").data["policy.yaml"])
    assert engine["spec"]["spark"]["checkpointLocation"] == f"{CHECKPOINT_BASE}/{bed.team_a}/billing"
    assert engine["spec"]["deadLetter"]["table"]["path"] == f"{TABLE_BASE}/{bed.team_a}/billing"
    theirs = parse_policy_yaml(bed.admin_b.config_map("billing-policy").data["policy.yaml"])
    assert theirs["spec"]["spark"]["checkpointLocation"] == f"{CHECKPOINT_BASE}/{bed.team_b}/billing"

    bed.objects().delete_namespaced_custom_object(GROUP, VERSION, bed.team_a, PLURAL, "billing")
    wait_for(lambda: bed.admin_a.policy("billing") is None, interval=POLL, what="the borrowing policy to go")
    wait_for(
        lambda: topic_partitions(bed.kafka, f"{bed.source}-ledger-RETRY") is None,
        interval=POLL,
        what="its own retry topic deleted (the control: deleteWithPolicy works)",
    )
    assert topic_partitions(bed.kafka, ledger) == 2
    [kept] = [e.message for e in bed.admin_a.events("billing") if e.reason == "TopicsKept"]
    assert kept.startswith(f"topic {ledger!r} kept: the operator did not create it for this policy")
    assert topic_partitions(bed.kafka, victim) == 1


def parse_policy_yaml(text: str) -> dict[str, Any]:
    return dict(yaml.safe_load(text))


# ---------------------------------------------------------------------------------------------
# Refused by the operator before anything runs: redrive filters that reach past the data


#: Filters the author tries: the corpus's cases (their messages are the model's), and an
#: allowed one, the control that the check does not refuse everything.
FILTERS: dict[str, filter_corpus.Case] = {
    "reflect": filter_corpus.CASES["reflect"],
    "java-method": filter_corpus.CASES["java-method"],
    "read-files": filter_corpus.CASES["read-files"],
    "subquery-reading-a-file": filter_corpus.CASES["scalar-subquery"],
    "allowed-the-control": filter_corpus.ok("attempts > 1"),
}


@pytest.fixture(scope="module")
def redrives(bed: Bed, payroll: str) -> dict[str, str]:
    """A dry-run redrive of the author's policy per filter of ``FILTERS``, created at once;
    their names by case."""
    names: dict[str, str] = {}
    for case, example in FILTERS.items():
        names[case] = name = unique(case)
        bed.objects().create_namespaced_custom_object(
            GROUP,
            VERSION,
            bed.team_a,
            REDRIVES,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "DeadLetterRedrive",
                "metadata": {"name": name},
                "spec": {
                    "policyRef": {"name": payroll},
                    "selection": {"filter": example.text},
                    "dryRun": True,
                },
            },
        )
    return names


@pytest.mark.parametrize("case", list(FILTERS))
def test_a_redrive_filter_that_calls_java_or_reads_files_fails_before_anything_runs(
    bed: Bed, redrives: dict[str, str], case: str
) -> None:
    name, problem = redrives[case], FILTERS[case].problem
    if problem is None:
        wait_for(
            lambda: bed.admin_a.application(f"{name}-redrive"),
            interval=POLL,
            what="the allowed redrive's app",
        )
        return

    def status() -> dict[str, Any]:
        found = bed.objects().get_namespaced_custom_object(GROUP, VERSION, bed.team_a, REDRIVES, name)
        return dict(found.get("status") or {})

    wait_for(lambda: status().get("phase") == "Failed", interval=POLL, what="the redrive to fail")
    # A redrive's conditions are a Job's: the Failed one says why.
    [condition] = [c for c in status()["conditions"] if c["type"] == "Failed"]
    assert condition["status"] == "True"
    assert (condition["reason"], condition["message"]) == ("InvalidSpec", f"spec.selection.filter: {problem}")
    assert bed.admin_a.application(f"{name}-redrive") is None
    assert bed.admin_a.config_map(f"{name}-redrive") is None


# ---------------------------------------------------------------------------------------------
# Contained by RBAC: what a Spark pod's token may do (the processor's code runs in those pods)


def test_a_spark_pods_token_writes_its_own_lease_and_nothing_of_another_policy(
    kube: ControlPlane, kube_api: Any, bed: Bed, victim: str, payroll: str
) -> None:
    """The token the author's policy's driver mounts (TokenRequest for its service account) may
    renew its own heartbeat and nothing else here: not its policy's ConfigMap (the engine's
    configuration), not team B's Lease or ConfigMap. The same within one namespace, with a real
    chart-installed operator: test_rbac.py's driver-token test."""
    app = bed.admin_a.application(payroll)
    assert app is not None
    account = app["spec"]["driver"]["serviceAccount"]
    assert account == f"{payroll}-spark"
    assert app["spec"]["executor"]["template"]["spec"]["automountServiceAccountToken"] is False
    token = (
        client.CoreV1Api(kube_api)
        .create_namespaced_service_account_token(account, bed.team_a, {"spec": {"expirationSeconds": 600}})
        .status.token
    )
    as_pod = client.Configuration()
    as_pod.host, as_pod.ssl_ca_cert = kube.server, str(kube.pki / "ca.crt")
    as_pod.api_key = {"authorization": f"Bearer {token}"}
    pod = client.ApiClient(as_pod)
    leases, core = client.CoordinationV1Api(pod), client.CoreV1Api(pod)
    beat = {"metadata": {"annotations": {"sparkdlq.io/red-team": "tried"}}}
    leases.patch_namespaced_lease(f"{payroll}-heartbeat", bed.team_a, beat)  # the control

    user = f'User "system:serviceaccount:{bed.team_a}:{account}"'
    inside_b = f'in the namespace "{bed.team_b}"'
    for call, words in (
        (
            lambda: leases.patch_namespaced_lease("billing-heartbeat", bed.team_b, beat),
            'cannot patch resource "leases"',
        ),
        (
            lambda: core.patch_namespaced_config_map(
                "billing-policy", bed.team_b, {"data": {"policy.yaml": "x"}}
            ),
            'cannot patch resource "configmaps"',
        ),
        (lambda: core.list_namespaced_secret(bed.team_b), 'cannot list resource "secrets"'),
    ):
        message = refused(call, 403)["message"]
        assert user in message, message
        assert words in message, message
        assert inside_b in message, message
    message = refused(
        lambda: core.patch_namespaced_config_map(
            f"{payroll}-policy", bed.team_a, {"data": {"policy.yaml": "x"}}
        ),
        403,
    )["message"]
    assert 'cannot patch resource "configmaps"' in message, message
    assert bed.admin_b.config_map("billing-policy").data["policy.yaml"] != "x"
