"""``kubectl dlq``: the policy from a file or from the cluster through kubectl, with its class's
broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_dlq_operator.kubectl_dlq import policies
from spark_dlq_operator.kubectl_dlq.errors import BadInput, Unreachable
from tests.policy_builder import DELETE, policy_document


def test_kubectl_gets_the_connection_flags_a_plugin_was_given() -> None:
    command = policies.kubectl_command(
        "orders-billing", namespace="payments", kubeconfig="/k/config", context="prod", timeout_ms=10_000
    )
    assert command[1:] == [
        "--kubeconfig=/k/config",
        "--context=prod",
        "--namespace=payments",
        "--request-timeout=10s",
        "get",
        "deadletterpolicies.sparkdlq.io",
        "orders-billing",
        "-o",
        "yaml",
    ]
    bare = policies.kubectl_command("p", namespace=None, kubeconfig=None, context=None, timeout_ms=500)
    assert bare[1:3] == ["--request-timeout=1s", "get"]


def test_policy_names_are_checked_before_kubectl_runs() -> None:
    kwargs: dict[str, Any] = {"kubeconfig": None, "context": None, "timeout_ms": 1000}
    with pytest.raises(BadInput, match="--policy: 'Orders_Billing' is not a valid resource name"):
        policies.policy_from_cluster("Orders_Billing", namespace=None, **kwargs)
    with pytest.raises(BadInput, match="--namespace: 'a b' is not a valid namespace name"):
        policies.policy_from_cluster("orders", namespace="a b", **kwargs)


def test_a_missing_kubectl_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBECTL", str(tmp_path / "no-kubectl"))
    with pytest.raises(Unreachable, match=r"no-kubectl is not on the PATH \(--policy reads the policy"):
        policies.policy_from_cluster("orders", namespace=None, kubeconfig=None, context=None, timeout_ms=1000)


def test_a_bad_policy_file_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy_document({"spec.source.topic": "no spaces"})))
    with pytest.raises(BadInput, match=r"policy.yaml:\d+: spec.source.topic: "):
        policies.policy_from_file(str(path))


WHERE = "deadletterpolicy payments/orders-billing"


def class_object(
    name: str, *, default: bool = False, brokers: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    annotations = {"sparkdlq.io/is-default-class": "true"} if default else {}
    spec = {"brokers": brokers} if brokers is not None else {}
    return {"metadata": {"name": name, "annotations": annotations}, "spec": spec}


def brokerless(**overrides: Any) -> dict[str, Any]:
    return policy_document({"spec.broker": DELETE, "metadata.namespace": "payments", **overrides})


KAFKA_A = {"bootstrapServers": "kafka-a:9092", "operatorSecretRef": {"name": "op"}}


KAFKA_B = {"bootstrapServers": "kafka-b:9092", "engineSecretName": "kafka-client"}


@pytest.mark.parametrize(
    ("policy", "classes", "broker", "origin"),
    [
        pytest.param(
            brokerless(**{"spec.className": "team-b"}),
            [class_object("std", default=True, brokers=[KAFKA_A]), class_object("team-b", brokers=[KAFKA_B])],
            {"type": "kafka", "bootstrapServers": "kafka-b:9092", "secretRef": {"name": "kafka-client"}},
            "spec.brokers[0] of class 'team-b'",
            id="its-named-class",
        ),
        pytest.param(
            brokerless(),
            [class_object("std", default=True, brokers=[KAFKA_A, KAFKA_B]), class_object("team-b")],
            {"type": "kafka", "bootstrapServers": "kafka-a:9092"},
            "spec.brokers[0] of class 'std'",
            id="the-default-class-first-broker",
        ),
    ],
)
def test_a_policy_without_a_broker_gets_its_classs(
    policy: dict[str, Any], classes: list[dict[str, Any]], broker: dict[str, Any], origin: str
) -> None:
    found, note = policies.class_broker(policy, classes, where=WHERE)
    assert found == broker
    assert note == f"{origin}, the broker of {WHERE}; --bootstrap-servers overrides it"


@pytest.mark.parametrize(
    ("policy", "classes", "message"),
    [
        pytest.param(
            brokerless(**{"spec.className": "team-b"}),
            [class_object("team-b")],
            "spec.broker: is required: class 'team-b' lists no brokers (spec.brokers) to take it from; "
            "give the broker with --bootstrap-servers",
            id="class-lists-none",
        ),
        pytest.param(
            brokerless(),
            [],
            "spec.broker: is required: class 'built-in' lists no brokers (spec.brokers) to take it from "
            "(no DeadLetterPolicyClass in the cluster: the operator's built-in class, whose "
            "--kafka-config-brokers kubectl dlq cannot see); give the broker with --bootstrap-servers",
            id="no-class-in-the-cluster",
        ),
        pytest.param(
            brokerless(**{"spec.className": "gone"}),
            [class_object("std", default=True, brokers=[KAFKA_A])],
            "spec.className: DeadLetterPolicyClass 'gone' does not exist (classes: std)",
            id="class-not-found",
        ),
        pytest.param(
            brokerless(),
            [class_object("a", brokers=[KAFKA_A]), class_object("b", brokers=[KAFKA_B])],
            "spec.className: is not set and no DeadLetterPolicyClass is marked default",
            id="no-default-class",
        ),
    ],
)
def test_a_policy_without_a_broker_whose_class_gives_none_is_bad_input_naming_the_field(
    policy: dict[str, Any], classes: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(BadInput) as refused:
        policies.class_broker(policy, classes, where=WHERE)
    assert str(refused.value).startswith(f"{WHERE}: {message}"), str(refused.value)
