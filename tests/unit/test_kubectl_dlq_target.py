"""``kubectl dlq``: where a policy's dead letters are and how its broker is reached, on Kafka and
Pulsar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dlq_engine.model.policy import parse_policy
from spark_dlq_operator.kubectl_dlq import target as targets
from spark_dlq_operator.kubectl_dlq.errors import BadInput
from tests.policy_builder import policy_document


def test_kafka_config_reads_key_value_lines(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# SASL\nsecurity.protocol = SASL_SSL\n\nsasl.mechanism=PLAIN\nsasl.password=a=b\n")
    assert targets.read_kafka_config(str(path)) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.password": "a=b",
    }


def test_kafka_config_problems_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\nssl.ca.location\n")
    with pytest.raises(BadInput, match=r"client.properties:2: expected key=value, got 'ssl.ca.location'"):
        targets.read_kafka_config(str(path))
    with pytest.raises(BadInput, match=r"--kafka-config .*missing: No such file"):
        targets.read_kafka_config(str(tmp_path / "missing"))


def test_the_topic_is_the_policys_dead_letter_topic() -> None:
    default = parse_policy(policy_document())
    target = targets.target_for(default, bootstrap_servers=None, kafka_config=None)
    assert target.topic == "orders-billing-DLQ"
    assert target.client == {"bootstrap.servers": "kafka.kafka:9092"}
    assert "spec.broker.bootstrapServers of payments/orders-billing" in target.broker_origin
    named = parse_policy(policy_document({"spec.deadLetter.topic": "billing-dead"}))
    assert targets.target_for(named, bootstrap_servers=None, kafka_config=None).topic == "billing-dead"


PULSAR_BROKER = {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"}


def test_a_pulsar_policy_is_read_at_its_service_url_or_the_flags() -> None:
    pulsar = parse_policy(policy_document({"spec.broker": PULSAR_BROKER}))
    target = targets.target_for(pulsar, bootstrap_servers=None, kafka_config=None)
    assert (target.broker, target.topic, target.address) == (
        "pulsar",
        "orders-billing-DLQ",
        "pulsar://p:6650",
    )
    assert target.broker_origin.startswith("spec.broker.serviceUrl of payments/orders-billing")
    given = targets.target_for(
        pulsar, bootstrap_servers=None, kafka_config=None, service_url="pulsar://laptop:6650"
    )
    assert (given.address, given.broker_origin) == ("pulsar://laptop:6650", "--service-url")


@pytest.mark.parametrize(
    ("spec", "flags", "problem"),
    [
        pytest.param(PULSAR_BROKER, {"bootstrap_servers": "k:9092"}, r"--bootstrap-servers: is for a Kafka policy; payments/orders-billing is on Pulsar", id="kafka-flag-on-pulsar"),
        pytest.param(PULSAR_BROKER, {"kafka_config": "client.properties"}, r"--kafka-config: is for a Kafka policy", id="kafka-config-on-pulsar"),
        pytest.param(None, {"service_url": "pulsar://p:6650"}, r"--service-url: is for a Pulsar policy; payments/orders-billing is on Kafka", id="pulsar-flag-on-kafka"),
        pytest.param(PULSAR_BROKER, {"service_url": "http://p:8080"}, r"--service-url: must be pulsar://host:port", id="not-a-service-url"),
    ],
)  # fmt: skip
def test_the_other_brokers_options_are_refused(spec: Any, flags: dict[str, str], problem: str) -> None:
    policy = parse_policy(policy_document({"spec.broker": spec} if spec else {}))
    given = {"bootstrap_servers": None, "kafka_config": None, **flags}
    with pytest.raises(BadInput, match=problem):
        targets.target_for(policy, **given)


def test_the_broker_address_flag_over_the_file_over_the_policy(tmp_path: Path) -> None:
    policy = parse_policy(policy_document())
    config = tmp_path / "client.properties"
    config.write_text("bootstrap.servers=file:9093\nsecurity.protocol=SSL\n")
    target = targets.target_for(policy, bootstrap_servers=None, kafka_config=str(config))
    assert target.client == {"bootstrap.servers": "file:9093", "security.protocol": "SSL"}
    assert target.broker_origin == f"bootstrap.servers in {config}"
    target = targets.target_for(policy, bootstrap_servers="localhost:9092", kafka_config=str(config))
    assert target.client["bootstrap.servers"] == "localhost:9092"
    assert target.broker_origin == "--bootstrap-servers"
    with pytest.raises(BadInput, match="--bootstrap-servers: must not be empty"):
        targets.target_for(policy, bootstrap_servers=" ", kafka_config=None)
