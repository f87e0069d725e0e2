"""The engine against a secured broker: TLS, SASL/SCRAM-SHA-512 and ACLs, enforced.

The broker (``spark_dlq_devtools.kafka_secure``) lets a user do only what its ACLs grant. The
engine connects through a ``broker.secretRef``-shaped folder of client properties, exactly as
in a cluster. With exactly the ACLs the engine needs it routes every message; a wrong password,
an expired broker certificate and each missing ACL stop it before it reads anything, with an
error naming the principal, the topic or group and the operation, and no credential in it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlq_engine.job.pipeline import RunOptions, client_properties
from dlq_engine.job.preflight import PreflightError, check_topics
from dlq_engine.job.runner import Run
from dlq_engine.model.policy import parse_policy
from spark_dlq_devtools.kafka_secure import SecureKafkaBroker, write_secret_files
from tests.helpers import engine_policy

SUBSCRIPTION = "secured"

#: What the engine's principal needs: (resource, name key, operation, prefixed).
ENGINE_ACLS = [
    ("TOPIC", "source", "READ", False),
    ("TOPIC", "retry", "READ", False),
    ("TOPIC", "retry", "WRITE", False),
    ("TOPIC", "dlq", "WRITE", False),
    ("TOPIC", "output", "WRITE", False),
    ("GROUP", f"spark-dlq-{SUBSCRIPTION}", "READ", True),
]


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureKafkaBroker]:
    broker = SecureKafkaBroker(name=f"kafka-secure-{os.getpid()}")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(broker.root, ignore_errors=True)


@pytest.fixture
def names(secure: SecureKafkaBroker) -> dict[str, str]:
    from confluent_kafka.admin import NewTopic

    tag = uuid.uuid4().hex[:8]
    topics = {k: f"sec-{k}-{tag}" for k in ("source", "retry", "dlq", "output")}
    admin = secure.admin()
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()]).values():
        future.result(timeout=60)
    return topics


def user_with(
    secure: SecureKafkaBroker, names: dict[str, str], acls: list[tuple[str, str, str, bool]]
) -> str:
    """A new user holding exactly ``acls`` (READ and WRITE imply DESCRIBE in Kafka)."""
    user = f"engine-{uuid.uuid4().hex[:6]}"
    secure.add_user(user)
    for resource, key, operation, prefixed in acls:
        secure.grant(user, resource, names.get(key, key), operation, prefixed=prefixed)
    return user


def policy_for(secure: SecureKafkaBroker, names: dict[str, str], bootstrap: str | None = None) -> Any:
    document = engine_policy(names, bootstrap or secure.bootstrap_servers)
    document["spec"]["source"]["subscription"] = SUBSCRIPTION
    document["spec"]["broker"]["secretRef"] = {"name": "kafka-client"}
    return parse_policy(document)


def refusal(spark: Any, policy: Any, client: dict[str, str]) -> str:
    with pytest.raises(PreflightError) as caught:
        check_topics(spark, policy, client)
    return str(caught.value)


def test_engine_routes_with_exactly_its_acls(
    spark: Any, secure: SecureKafkaBroker, names: dict[str, str], tmp_path: Path
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    user = user_with(secure, names, ENGINE_ACLS)
    secret = write_secret_files(tmp_path / "kafka-client", secure.java_client(user))
    policy = policy_for(secure, names)
    producer = Producer(secure.librdkafka_client("admin"))
    values = [b"ok:1", b"ok:2", b"terminate:3", b"ok:4"]
    for value in values:
        producer.produce(names["source"], value=value)
    assert producer.flush(30) == 0

    check_topics(spark, policy, client_properties(str(secret)))
    run = Run(
        spark, policy, RunOptions(checkpoint=str(tmp_path / "cp"), once=True, kafka_client_dir=str(secret))
    )
    run.start()
    assert run.wait() == 0

    def count(topic: str) -> int:
        consumer = Consumer({**secure.librdkafka_client("admin"), "group.id": "sec-audit"})
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            return int(high)
        finally:
            consumer.close()

    assert count(names["output"]) == 3
    assert count(names["dlq"]) == 1


def test_wrong_password_names_the_principal_and_hides_the_password(
    spark: Any, secure: SecureKafkaBroker, names: dict[str, str]
) -> None:
    user = user_with(secure, names, ENGINE_ACLS)
    client = secure.java_client(user, password="not-the-password-42")
    message = refusal(spark, policy_for(secure, names), client)
    assert f"Kafka authentication failed for principal User:{user}" in message
    assert "spec.broker.secretRef" in message
    assert "not-the-password-42" not in message
    assert secure.passwords[user] not in message


def test_expired_broker_certificate_is_named(
    spark: Any, secure: SecureKafkaBroker, names: dict[str, str]
) -> None:
    user = user_with(secure, names, ENGINE_ACLS)
    policy = policy_for(secure, names, bootstrap=secure.expired_bootstrap_servers)
    message = refusal(spark, policy, secure.java_client(user))
    assert "the broker's TLS certificate has expired" in message
    assert secure.expired_bootstrap_servers in message
    assert secure.passwords[user] not in message


@pytest.mark.parametrize(
    ("missing", "words"),
    [
        pytest.param(0, ["READ on topic", "source", "spec.source.topic"], id="source-read"),
        pytest.param(1, ["READ on topic", "retry"], id="retry-read"),
        pytest.param(2, ["WRITE on topic", "retry"], id="retry-write"),
        pytest.param(3, ["WRITE on topic", "dlq", "dead-letter topic"], id="dlq-write"),
        pytest.param(4, ["WRITE on topic", "output", "spec.output.topic"], id="output-write"),
        pytest.param(5, ["READ on consumer groups prefixed", "spec.source.subscription"], id="group-read"),
    ],
)
def test_each_missing_acl_is_named(
    spark: Any,
    secure: SecureKafkaBroker,
    names: dict[str, str],
    missing: int,
    words: list[str],
) -> None:
    acls = [acl for i, acl in enumerate(ENGINE_ACLS) if i != missing]
    user = user_with(secure, names, acls)
    message = refusal(spark, policy_for(secure, names), secure.java_client(user))
    assert f"Kafka principal User:{user} is not authorised for" in message
    for word in words:
        assert word in message, message
    _resource, key, _operation, _prefixed = ENGINE_ACLS[missing]
    assert names.get(key, key) in message
    # Only the missing grant is reported.
    assert message.count(" on ") == 1, message
    assert secure.passwords[user] not in message


def test_no_acl_at_all_names_every_grant(
    spark: Any, secure: SecureKafkaBroker, names: dict[str, str]
) -> None:
    """Without any grant a topic is invisible to the principal: each is named as refused with
    what the engine does with it, not reported missing."""
    user = user_with(secure, names, [])
    message = refusal(spark, policy_for(secure, names), secure.java_client(user))
    assert "not authorised for" in message
    assert f"READ on topic {names['source']!r} (spec.source.topic)" in message
    assert f"READ, WRITE on topic {names['retry']!r} (retry topic)" in message
    assert f"WRITE on topic {names['dlq']!r} (dead-letter topic)" in message
    assert f"WRITE on topic {names['output']!r} (spec.output.topic)" in message
    assert "READ on consumer groups prefixed 'spark-dlq-secured'" in message
    assert "missing on" not in message


def test_messages_stay_in_the_source_after_a_refusal(
    spark: Any, secure: SecureKafkaBroker, names: dict[str, str], tmp_path: Path
) -> None:
    """A refused engine reads nothing: a correctly configured engine afterwards gets every
    message."""
    from confluent_kafka import Producer

    producer = Producer(secure.librdkafka_client("admin"))
    for i in range(5):
        producer.produce(names["source"], value=b"ok:%d" % i)
    assert producer.flush(30) == 0
    policy = policy_for(secure, names)
    refusal(spark, policy, secure.java_client(user_with(secure, names, ENGINE_ACLS[1:])))

    good = user_with(secure, names, ENGINE_ACLS)
    secret = write_secret_files(tmp_path / "kafka-client", secure.java_client(good))
    run = Run(
        spark, policy, RunOptions(checkpoint=str(tmp_path / "cp"), once=True, kafka_client_dir=str(secret))
    )
    run.start()
    assert run.wait() == 0
    assert run.totals.counts["total"] == 5
