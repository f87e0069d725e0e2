"""Classes on the in-memory API server (``tests/unit/fake_kube.py``): which class governs a policy,
what a refused policy gets (and does not), a class change reconciling what it governs, the
namespaces a class selects, and the operator's credentials a class names. The same against the
real API server are in tests/integration/operator/test_classes.py."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
import yaml

from dlq_engine.model import DeadLetterPolicy, parse_policy
from dlq_engine.model.policy import PULSAR_CLIENT_DIR
from spark_dlq_operator import naming
from spark_dlq_operator.classes import ClassCatalog, CredentialsUnavailable, own_namespace
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.kubeapi import ApiError
from spark_dlq_operator.policies.services import Services
from spark_dlq_operator.policy_class import CLASS_PLURAL, DEFAULT_CLASS_ANNOTATION
from spark_dlq_operator.reasons import Reason
from spark_dlq_operator.resync import Resync
from spark_dlq_operator.topics import AdminProvisioner, StrimziProvisioner
from tests.policy_builder import policy_document
from tests.unit.fake_brokers import FakePulsar
from tests.unit.fake_kube import FakeKube

NAMESPACE = "payments"
POLICIES, APPS, CONFIG_MAPS = "deadletterpolicies", "sparkapplications", "configmaps"


def class_object(name: str, *, default: bool = False, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if default:
        metadata["annotations"] = {DEFAULT_CLASS_ANNOTATION: "true"}
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicyClass",
        "metadata": metadata,
        "spec": spec,
    }


class Bed:
    """A fake API server, the operator's services on it, and a resync to drive them."""

    def __init__(self, **config: Any) -> None:
        self.api = FakeKube()
        self.config = OperatorConfig(namespaces=(NAMESPACE,), operator_namespace="spark-dlq", **config)
        self.services = Services(
            config=self.config,
            api=self.api,
            events=EventRecorder(self.api, instance="test"),
            admin=AdminProvisioner(timeout=1.0),
            strimzi=StrimziProvisioner(self.api),
        )
        self.resync = Resync(self.services)

    def put_class(self, name: str, *, default: bool = False, **spec: Any) -> dict[str, Any]:
        return self.api.put(CLASS_PLURAL, class_object(name, default=default, **spec))

    def put_policy(self, name: str = "billing", **overrides: Any) -> None:
        document = policy_document(
            {"metadata.name": name, "metadata.namespace": NAMESPACE, "spec.topics.create": False, **overrides}
        )
        self.api.put(POLICIES, document)

    def round(self) -> int:
        return asyncio.run(self._run(self.resync.round()))

    def class_changed(self, event: str, obj: dict[str, Any]) -> int:
        return asyncio.run(self._run(self.resync.class_changed(event, obj)))

    async def _run(self, call: Any) -> Any:
        try:
            return await call
        finally:
            await self.services.events.close()

    def status(self, name: str = "billing") -> dict[str, Any]:
        found = self.api.stored(POLICIES, NAMESPACE, name)
        assert found is not None
        return dict(found.get("status") or {})

    def ready(self, name: str = "billing") -> dict[str, Any]:
        return next(c for c in self.status(name)["conditions"] if c["type"] == "Ready")

    def app(self, name: str = "billing") -> dict[str, Any] | None:
        return self.api.stored(APPS, NAMESPACE, naming.application_name(name))


def test_no_class_in_the_cluster_governs_by_the_built_in_defaults(caplog: pytest.LogCaptureFixture) -> None:
    bed = Bed()
    bed.put_policy()
    with caplog.at_level("INFO"):
        assert bed.round() == 1
    assert bed.app() is not None
    assert (
        "no DeadLetterPolicyClass in the cluster: policies are governed by the built-in defaults"
        in caplog.text
    )
    with caplog.at_level("INFO"):
        caplog.clear()
        bed.round()
    assert "no DeadLetterPolicyClass" not in caplog.text  # once, not every round


def test_a_missing_class_crd_is_no_class_and_any_other_failure_governs_nothing() -> None:
    bed = Bed()
    bed.api.fail("GET", CLASS_PLURAL, 404)
    bed.put_policy()
    assert bed.round() == 1
    other = Bed()
    other.put_policy()
    other.api.fail("GET", CLASS_PLURAL, 403)
    with pytest.raises(ApiError):
        other.round()
    assert other.app() is None


def test_a_policy_its_class_refuses_is_invalid_and_gets_nothing() -> None:
    bed = Bed()
    bed.put_class("standard", default=True, images={"allowed": ["spark-dlq:*"]})
    bed.put_policy(**{"spec.spark.image": "evil:1"})
    assert bed.round() == 0

    assert bed.status()["phase"] == "Invalid"
    assert bed.ready()["reason"] == Reason.CLASS_VIOLATION
    assert bed.ready()["message"] == (
        "spec.spark.image: 'evil:1' is not allowed by class 'standard' (spec.images.allowed: spark-dlq:*)"
    )
    assert bed.app() is None
    assert bed.api.of(CONFIG_MAPS) == []


@pytest.mark.parametrize(
    ("classes", "overrides", "reason"),
    [
        pytest.param(
            [("standard", True)], {"spec.className": "gold"}, Reason.CLASS_NOT_FOUND, id="not-found"
        ),
        pytest.param([("standard", False)], {}, Reason.NO_DEFAULT_CLASS, id="no-default"),
        pytest.param([("a", True), ("b", True)], {}, Reason.DEFAULT_CLASS_AMBIGUOUS, id="two-defaults"),
    ],
)
def test_a_policy_without_a_usable_class_is_invalid(
    classes: list[tuple[str, bool]], overrides: dict[str, Any], reason: Reason
) -> None:
    bed = Bed()
    for name, default in classes:
        bed.put_class(name, default=default)
    bed.put_policy(**overrides)
    bed.round()
    assert (bed.status()["phase"], bed.ready()["reason"]) == ("Invalid", reason)
    assert bed.app() is None


def test_a_class_that_appears_reconciles_the_policies_waiting_for_it() -> None:
    bed = Bed()
    bed.put_class("standard", default=True)
    bed.put_policy(**{"spec.className": "gold"})
    bed.round()
    assert bed.ready()["reason"] == Reason.CLASS_NOT_FOUND

    gold = bed.put_class("gold")
    assert bed.class_changed("ADDED", gold) == 1
    assert bed.app() is not None
    assert bed.status()["phase"] != "Invalid"


def test_a_class_change_restarts_only_what_it_changes() -> None:
    bed = Bed()
    standard = bed.put_class("standard", default=True, defaults={"spark": {"trigger": "2s"}})
    bed.put_policy()
    bed.put_policy("other", **{"spec.className": "team"})
    bed.put_class("team")
    bed.round()
    before = bed.app()
    assert before is not None
    hash_before = before["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION]

    # A rule the policy already meets: nothing the engine runs changes.
    standard["spec"]["limits"] = {"maxRedeliverCount": 100}
    assert bed.class_changed("MODIFIED", standard) == 1  # "other" names another class
    assert bed.app() == before
    assert bed.status().get("restartCount") == 0

    # A default the policy takes: its job restarts with it.
    standard["spec"]["defaults"] = {"spark": {"trigger": "5s"}}
    bed.class_changed("MODIFIED", standard)
    after = bed.app()
    assert after is not None
    assert after["metadata"]["annotations"][naming.CONFIG_HASH_ANNOTATION] != hash_before
    assert bed.status()["restartCount"] == 1
    config_map = bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name("billing"))
    assert config_map is not None
    assert "trigger: 5s" in config_map["data"][naming.POLICY_FILE_KEY]

    # The same event again changes nothing and reconciles nothing.
    assert bed.class_changed("MODIFIED", standard) == 0


def test_a_class_that_stops_allowing_a_running_policy_leaves_its_job_and_marks_it_invalid() -> None:
    bed = Bed()
    standard = bed.put_class("standard", default=True)
    bed.put_policy(**{"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "4"}})
    bed.round()
    app = bed.app()
    assert app is not None

    standard["spec"]["sparkConf"] = {"allowed": []}
    bed.class_changed("MODIFIED", standard)
    assert (bed.status()["phase"], bed.ready()["reason"]) == ("Invalid", Reason.CLASS_VIOLATION)
    assert bed.app() == app

    # Deleting the only class: the built-in class governs again, and allows the key.
    bed.api.objects.pop((CLASS_PLURAL, "", "standard"))
    bed.class_changed("DELETED", standard)
    assert bed.status()["phase"] != "Invalid"


def test_a_namespace_the_class_does_not_select() -> None:
    bed = Bed()
    bed.put_class("standard", default=True, namespaceSelector={"matchLabels": {"team": "billing"}})
    bed.api.put("namespaces", {"metadata": {"name": NAMESPACE, "labels": {"team": "orders"}}})
    bed.put_policy()
    bed.round()
    assert bed.ready()["reason"] == Reason.NAMESPACE_NOT_ALLOWED
    assert bed.ready()["message"] == (
        "metadata.namespace: 'payments' is not allowed by class 'standard' (spec.namespaceSelector: team=billing)"
    )


# --- the pods and the operator's credentials -------------------------------------------------------


def governed_app(bed: Bed) -> dict[str, Any]:
    bed.put_policy(**{"spec.spark.pod": {"labels": {"team": "billing"}}})
    bed.round()
    app = bed.app()
    assert app is not None, bed.status()
    return app


def test_the_class_fits_the_pods() -> None:
    bed = Bed(checkpoint_claim="operator-claim")
    bed.put_class(
        "standard",
        default=True,
        images={"default": "registry/spark-dlq:2"},
        storage={"checkpointBase": "/cp", "checkpointClaim": "class-claim"},
        pods={
            "serviceAccountName": "shared-spark",
            "imagePullSecrets": [{"name": "registry"}],
            "nodeSelector": {"pool": "spark"},
            "tolerations": [{"key": "spark", "operator": "Exists"}],
            "priorityClassName": "batch",
            "labels": {"cost": "dlq"},
            "policyMayOverride": ["labels"],
        },
    )
    app = governed_app(bed)
    spec = app["spec"]
    assert spec["image"] == "registry/spark-dlq:2"
    assert spec["imagePullSecrets"] == ["registry"]
    assert spec["driver"]["serviceAccount"] == "shared-spark"
    assert spec["arguments"][spec["arguments"].index("--checkpoint") + 1] == f"/cp/{NAMESPACE}/billing"
    for role in ("driver", "executor"):
        template = spec[role]["template"]
        assert template["metadata"]["labels"] == {"cost": "dlq", "team": "billing"}
        assert template["spec"]["nodeSelector"] == {"pool": "spark"}
        assert template["spec"]["tolerations"] == [{"key": "spark", "operator": "Exists"}]
        assert template["spec"]["priorityClassName"] == "batch"
        assert {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "class-claim"}} in template[
            "spec"
        ]["volumes"]


def secret(name: str, lines: str, *, key: str = "client.properties") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "spark-dlq"},
        "data": {key: base64.b64encode(lines.encode()).decode()},
    }


def credentials(bed: Bed, body_overrides: dict[str, Any]) -> tuple[DeadLetterPolicy, ClassCatalog]:
    document = policy_document({"metadata.namespace": NAMESPACE, **body_overrides})
    catalog = bed.services.classes
    governed = asyncio.run(catalog.govern(document))
    return governed.policy, catalog


def test_the_operator_uses_the_class_credentials_for_the_class_broker_only() -> None:
    bed = Bed()
    bed.put_class(
        "standard",
        default=True,
        brokers=[{"bootstrapServers": "kafka.kafka:9092", "operatorSecretRef": {"name": "op-kafka"}}],
    )
    bed.put_class("any")
    bed.api.put("secrets", secret("op-kafka", "security.protocol=SASL_SSL\nsasl.username=operator\n"))

    policy, catalog = credentials(bed, {})
    assert catalog.admin_config(policy) == {"security.protocol": "SASL_SSL", "sasl.username": "operator"}
    elsewhere, _ = credentials(bed, {"spec.className": "any", "spec.broker.bootstrapServers": "evil:9092"})
    assert catalog.admin_config(elsewhere) == {}


def test_unreadable_credentials_are_named() -> None:
    bed = Bed()
    bed.put_class(
        "standard",
        default=True,
        brokers=[
            {"bootstrapServers": "kafka.kafka:9092", "operatorSecretRef": {"name": "op-kafka", "key": "k"}}
        ],
    )
    policy, catalog = credentials(bed, {})
    with pytest.raises(CredentialsUnavailable) as missing:
        catalog.admin_config(policy)
    assert str(missing.value) == (
        "the operator's credentials for kafka.kafka:9092 (Secret spark-dlq/op-kafka, key k, named by the "
        "policy's class) cannot be read: the Secret does not exist"
    )


PULSAR_BROKER = {
    "type": "pulsar",
    "serviceUrl": "pulsar+ssl://pulsar.pulsar:6651",
    "adminUrl": "https://pulsar.pulsar:8443",
    "operatorSecretRef": {"name": "op-pulsar"},
    "engineSecretName": "pulsar-client",
}


def test_a_pulsar_class_broker_gives_the_operator_its_secret_and_the_engine_only_a_name() -> None:
    bed = Bed()
    pulsar = bed.services.pulsar = FakePulsar()
    pulsar.make("persistent/public/default/orders")
    bed.put_class("standard", default=True, brokers=[PULSAR_BROKER])
    token, ca = "header.op-role.signature", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    data = {"token": token, "ca.crt": ca}
    bed.api.put(
        "secrets",
        {
            "metadata": {"name": "op-pulsar", "namespace": "spark-dlq"},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()},
        },
    )
    bed.put_policy(**{"spec.broker": None, "spec.topics.create": True})
    bed.round()

    assert pulsar.calls
    assert all(used == data for used in pulsar.credentials)
    app = bed.api.stored(APPS, NAMESPACE, naming.application_name("billing"))
    assert app is not None
    for role in ("driver", "executor"):
        pod = app["spec"][role]["template"]["spec"]
        assert {"name": "pulsar-client", "secret": {"secretName": "pulsar-client"}} in pod["volumes"]
        mount = {"name": "pulsar-client", "mountPath": PULSAR_CLIENT_DIR, "readOnly": True}
        assert mount in pod["containers"][0]["volumeMounts"]
    config_map = bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name("billing"))
    stored = repr([config_map, app, bed.status()])
    assert token not in stored
    assert "MIIB" not in stored


def test_a_pulsar_secret_with_keys_of_no_pulsar_client_is_named() -> None:
    bed = Bed()
    bed.put_class("standard", default=True, brokers=[PULSAR_BROKER])
    bed.api.put("secrets", secret("op-pulsar", "x", key="tokne"))
    policy, catalog = credentials(bed, {"spec.broker": None})
    with pytest.raises(
        CredentialsUnavailable, match=r"cannot be read: unknown key\(s\) tokne \(a Pulsar client takes"
    ):
        catalog.admin_config(policy)


def test_the_command_line_credentials_go_to_the_listed_brokers_only() -> None:
    bed = Bed(kafka_config=(("sasl.username", "op"),), kafka_config_brokers=("kafka.kafka:9092",))
    policy, catalog = credentials(bed, {})
    assert catalog.admin_config(policy) == {"sasl.username": "op"}
    plain = Bed(kafka_config=(("sasl.username", "op"),))
    policy, catalog = credentials(plain, {})
    assert catalog.admin_config(policy) == {}


def test_the_governed_policy_is_what_the_engine_runs() -> None:
    bed = Bed()
    bed.put_class("standard", default=True, defaults={"retry": {"maxRedeliverCount": 3}})
    bed.put_policy()
    bed.round()
    config_map = bed.api.stored(CONFIG_MAPS, NAMESPACE, naming.config_map_name("billing"))
    assert config_map is not None
    engine_policy = parse_policy(yaml.safe_load(config_map["data"][naming.POLICY_FILE_KEY]))
    assert engine_policy.retry.max_redeliver_count == 3


def test_own_namespace_is_read_from_the_service_account_mount(tmp_path: Any) -> None:
    path = tmp_path / "namespace"
    assert own_namespace(path) is None
    path.write_text("spark-dlq\n")
    assert own_namespace(path) == "spark-dlq"
