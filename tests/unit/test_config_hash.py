from __future__ import annotations

import re
from typing import Any

import pytest

from dlq_engine.model import config_hash, engine_config, parse_policy, to_document
from tests.policy_builder import policy, policy_document


def _reversed_keys(value: Any) -> Any:
    """The same document with every mapping's keys in reverse order."""
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(item) for item in value]
    return value


BASE_HASH = config_hash(policy())


def test_hash_is_16_lowercase_hex_characters() -> None:
    assert re.fullmatch(r"[0-9a-f]{16}", BASE_HASH)


def test_hash_is_deterministic() -> None:
    assert config_hash(policy()) == config_hash(policy()) == BASE_HASH


# --------------------------------------------------------------------------------------------
# Stable: the same meaning, written differently


def test_stable_defaults_written_out_or_omitted() -> None:
    written_out = to_document(policy())
    assert written_out["spec"]["retry"]["maxRedeliverCount"] == 16  # really written out
    assert config_hash(parse_policy(written_out)) == BASE_HASH


def test_stable_key_order() -> None:
    reordered = _reversed_keys(
        policy_document(
            {
                "spec.deadLetter.headers": {"team": "billing", "app": "orders"},
                "spec.spark.sparkConf": {"spark.b": "2", "spark.a": "1"},
            }
        )
    )
    assert config_hash(parse_policy(reordered)) == config_hash(
        policy(
            {
                "spec.deadLetter.headers": {"team": "billing", "app": "orders"},
                "spec.spark.sparkConf": {"spark.b": "2", "spark.a": "1"},
            }
        )
    )


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"spec.retry.backoff.delay": "1000ms"}, id="delay-1000ms-is-1s"),
        pytest.param({"spec.retry.backoff.delay": 1}, id="delay-number-is-seconds"),
        pytest.param({"spec.retry.backoff.maxDelay": "600s"}, id="max-delay-600s-is-10m"),
        pytest.param({"spec.retry.backoff.maxDelay": "9m60s"}, id="max-delay-9m60s-is-10m"),
        pytest.param({"spec.spark.trigger": "1000ms"}, id="trigger-in-milliseconds"),
        pytest.param({"spec.retry.backoff.multiplier": 2}, id="multiplier-int"),
        pytest.param({"spec.retry.backoff.jitter": 0}, id="jitter-int"),
        pytest.param({"spec.errorWindow.threshold": 1}, id="threshold-int"),
        pytest.param({"spec.retry.topic": "orders-billing-RETRY"}, id="derived-retry-written"),
        pytest.param({"spec.deadLetter.topic": "orders-billing-DLQ"}, id="derived-dlq-written"),
        pytest.param({"spec.retry.topic": ""}, id="empty-topic"),
        pytest.param({"spec.retry.maxRedeliverCount": None}, id="null"),
        pytest.param({"spec.processor.mode": "message"}, id="default-mode-written"),
        pytest.param({"spec.processor.timeout": "30s"}, id="default-timeout-written"),
        pytest.param({"spec.deadLetter.headers": {}}, id="empty-headers"),
        pytest.param(
            {"metadata.labels": {"team": "billing"}, "metadata.annotations": {"note": "x"}},
            id="labels-and-annotations",
        ),
        pytest.param(
            {"metadata.resourceVersion": "42", "metadata.generation": 7, "metadata.uid": "0b0c"},
            id="server-set-metadata",
        ),
        pytest.param({"status": {"phase": "Running", "restartCount": 3}}, id="status"),
    ],
)
def test_stable_equal_meaning(overrides: dict[str, Any]) -> None:
    assert config_hash(policy(overrides)) == BASE_HASH


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param({"spec.retry.backoff.delay": "60s"}, {"spec.retry.backoff.delay": "1m"}, id="60s-vs-1m"),
        pytest.param(
            {"spec.retry.backoff.maxDelay": "90m"},
            {"spec.retry.backoff.maxDelay": "1h30m"},
            id="90m-vs-1h30m",
        ),
        pytest.param(
            {"spec.deadLetter.headers": {"priority": 1}},
            {"spec.deadLetter.headers": {"priority": "1"}},
            id="header-int-vs-string",
        ),
        pytest.param(
            {"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": 4}},
            {"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "4"}},
            id="spark-conf-int-vs-string",
        ),
        pytest.param(
            {"spec.retry.nonRetryableErrors": [" ValueError "]},
            {"spec.retry.nonRetryableErrors": ["ValueError"]},
            id="error-name-spacing",
        ),
    ],
)
def test_stable_equivalent_spellings(first: dict[str, Any], second: dict[str, Any]) -> None:
    assert config_hash(policy(first)) == config_hash(policy(second))


# --------------------------------------------------------------------------------------------
# Changes: anything the engine's behaviour depends on


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"metadata.name": "orders-audit"}, id="name"),
        pytest.param({"metadata.namespace": "billing"}, id="namespace"),
        pytest.param({"spec.source.topic": "payments"}, id="source-topic"),
        pytest.param({"spec.source.subscription": "audit"}, id="subscription"),
        pytest.param({"spec.source.startingOffsets": "earliest"}, id="starting-offsets"),
        pytest.param({"spec.broker.bootstrapServers": "kafka-2:9092"}, id="bootstrap-servers"),
        pytest.param({"spec.broker.secretRef": {"name": "kafka-client"}}, id="secret-ref"),
        pytest.param({"spec.processor.entrypoint": "billing.handlers:process_v2"}, id="processor-entrypoint"),
        pytest.param({"spec.processor.mode": "batch"}, id="processor-mode"),
        pytest.param({"spec.processor.timeout": "10s"}, id="processor-timeout"),
        pytest.param({"spec.output.topic": "orders-billed"}, id="output-topic"),
        pytest.param({"spec.retry.maxRedeliverCount": 3}, id="max-redeliver-count"),
        pytest.param({"spec.retry.maxRedeliverCount": 0}, id="max-redeliver-count-zero"),
        pytest.param({"spec.retry.topic": "billing-retry"}, id="retry-topic"),
        pytest.param({"spec.retry.backoff.type": "fixed"}, id="backoff-type"),
        pytest.param({"spec.retry.backoff.delay": "2s"}, id="backoff-delay"),
        pytest.param({"spec.retry.backoff.multiplier": 3}, id="backoff-multiplier"),
        pytest.param({"spec.retry.backoff.maxDelay": "5m"}, id="backoff-max-delay"),
        pytest.param({"spec.retry.backoff.jitter": 0.1}, id="backoff-jitter"),
        pytest.param({"spec.retry.backoff.levels": ["1s", "5s"]}, id="backoff-levels"),
        pytest.param({"spec.retry.nonRetryableErrors": ["ValueError"]}, id="non-retryable"),
        pytest.param({"spec.retry.maxRetryDuration": "1h"}, id="max-retry-duration"),
        pytest.param({"spec.deadLetter.strategy": "ignore"}, id="dead-letter-strategy"),
        pytest.param({"spec.deadLetter.topic": "billing-dead"}, id="dead-letter-topic"),
        pytest.param({"spec.deadLetter.includeStackTrace": False}, id="include-stack-trace"),
        pytest.param({"spec.deadLetter.headers": {"team": "billing"}}, id="dead-letter-headers"),
        pytest.param({"spec.deadLetter.table": {"path": "/data/dl"}}, id="dead-letter-table"),
        pytest.param(
            {"spec.deadLetter.table": {"path": "/data/dl", "format": "parquet"}},
            id="dead-letter-table-format",
        ),
        pytest.param({"spec.errorWindow.size": 100}, id="error-window-size"),
        pytest.param({"spec.errorWindow.threshold": 0.5}, id="error-window-threshold"),
        pytest.param({"spec.spark.image": "registry/spark-dlq:2"}, id="spark-image"),
        pytest.param({"spec.spark.trigger": "5s"}, id="trigger"),
        pytest.param({"spec.spark.checkpointLocation": "s3a://b/ckpt"}, id="checkpoint"),
        pytest.param({"spec.spark.driver.memory": "2g"}, id="driver-memory"),
        pytest.param({"spec.spark.driver.cores": 2}, id="driver-cores"),
        pytest.param({"spec.spark.executor.instances": 3}, id="executor-instances"),
        pytest.param({"spec.spark.executor.cores": 2}, id="executor-cores"),
        pytest.param({"spec.spark.executor.memory": "4g"}, id="executor-memory"),
        pytest.param({"spec.spark.sparkConf": {"spark.sql.shuffle.partitions": "8"}}, id="spark-conf"),
    ],
)
def test_changes_for_engine_relevant_field(overrides: dict[str, Any]) -> None:
    assert config_hash(policy(overrides)) != BASE_HASH


def test_changes_for_header_value_not_only_key() -> None:
    first = policy({"spec.deadLetter.headers": {"team": "billing"}})
    second = policy({"spec.deadLetter.headers": {"team": "audit"}})
    assert config_hash(first) != config_hash(second)


def test_changes_for_order_of_levels() -> None:
    first = policy({"spec.retry.backoff.levels": ["1s", "5s"]})
    second = policy({"spec.retry.backoff.levels": ["5s", "1s"]})
    assert config_hash(first) != config_hash(second)


# --------------------------------------------------------------------------------------------
# Unchanged: what does not reach the engine


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"spec.suspend": True}, id="suspend"),
        pytest.param({"spec.topics.create": False}, id="topics-create"),
        pytest.param({"spec.topics.provisioner": "admin"}, id="topics-provisioner"),
        pytest.param(
            {
                "spec.topics.provisioner": "strimzi",
                "spec.topics.strimzi": {"namespace": "kafka", "cluster": "my-cluster"},
            },
            id="topics-strimzi",
        ),
        pytest.param({"spec.topics.partitions": 12}, id="topics-partitions"),
        pytest.param({"spec.topics.replicationFactor": 3}, id="topics-replication-factor"),
        pytest.param({"spec.topics.retryConfig": {"retention.ms": "604800000"}}, id="topics-retry-config"),
        pytest.param(
            {"spec.topics.deadLetterConfig": {"retention.ms": "-1"}}, id="topics-dead-letter-config"
        ),
        pytest.param({"spec.topics.deleteWithPolicy": True}, id="topics-delete-with-policy"),
    ],
)
def test_unchanged_for_field_outside_the_engine(overrides: dict[str, Any]) -> None:
    assert config_hash(policy(overrides)) == BASE_HASH


# --------------------------------------------------------------------------------------------
# engine_config


def test_engine_config_has_identity_and_spec_without_topics_or_suspend() -> None:
    config = engine_config(policy())
    assert set(config) == {"name", "namespace", "spec"}
    assert (config["name"], config["namespace"]) == ("orders-billing", "payments")
    assert set(config["spec"]) == {
        "source",
        "broker",
        "processor",
        "output",
        "retry",
        "deadLetter",
        "errorWindow",
        "spark",
    }


def test_engine_config_names_the_resolved_topics() -> None:
    spec = engine_config(policy())["spec"]
    assert spec["retry"]["topic"] == "orders-billing-RETRY"
    assert spec["deadLetter"]["topic"] == "orders-billing-DLQ"
