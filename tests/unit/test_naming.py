"""Names and labels of what the operator writes (``naming``): labels, the KafkaTopic's name and
the SparkApplication's name, each a valid Kubernetes name for any policy name."""

from __future__ import annotations

import re

import pytest

from spark_dlq_operator import naming

LABELS = {"app.kubernetes.io/managed-by": "spark-dlq-operator", "sparkdlq.io/policy": "orders-billing"}


def test_labels_name_the_operator_and_the_policy() -> None:
    assert naming.labels("orders-billing") == LABELS


def test_label_value_keeps_a_short_name() -> None:
    assert naming.label_value("orders-billing") == "orders-billing"


def test_label_value_shortens_a_long_name_with_a_hash() -> None:
    long = "a" * 100
    value = naming.label_value(long)
    assert len(value) <= 63
    assert value.startswith("a" * 50)
    assert value != naming.label_value("a" * 99)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        pytest.param("orders-billing-dlq", "orders-billing-dlq", id="valid-name-kept"),
        pytest.param("orders.v1", "orders.v1", id="dots-kept"),
        pytest.param("Orders_EU-RETRY", "orders-eu-retry---", id="sanitised-with-hash"),
    ],
)
def test_kafka_topic_name(topic: str, expected: str) -> None:
    name = naming.kafka_topic_name(topic)
    assert name.startswith(expected)
    if name != topic:
        assert len(name) == len(expected) + 40
        assert name != naming.kafka_topic_name(topic.lower())


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("orders-billing", id="label"),
        pytest.param("a", id="one-letter"),
        pytest.param("x" * 63, id="63-characters"),
    ],
)
def test_application_name_is_the_policy_name_when_it_is_a_dns_1035_label(name: str) -> None:
    assert naming.application_name(name) == name


DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(
    ("name", "start"),
    [
        pytest.param("orders.billing", "orders-billing-", id="dot"),
        pytest.param("9orders", "p-9orders-", id="leading-digit"),
        pytest.param("x" * 64, "x" * 54 + "-", id="64-characters"),
        pytest.param("a." + "b" * 250, "a-" + "b" * 52 + "-", id="253-characters"),
        pytest.param("1.2", "p-1-2-", id="digits-and-dot"),
    ],
)
def test_application_name_of_any_policy_name_is_a_dns_1035_label(name: str, start: str) -> None:
    derived = naming.application_name(name)
    assert DNS_1035.match(derived)
    assert len(derived) <= 63
    assert derived.startswith(start)
    assert derived == naming.application_name(name), "deterministic"


def test_application_names_of_similar_policies_differ() -> None:
    derived = [naming.application_name(n) for n in ["orders.billing", "orders-billing", "orders..billing"]]
    assert len(set(derived)) == 3, derived
