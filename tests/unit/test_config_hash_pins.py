"""The configuration hash of existing policies, pinned: a refactor of the policy model or of
how the hash is computed must give every running job the hash it has today, or the operator
restarts them all on upgrade. Each pinned value was computed before the model was split
(issue 30); a test here fails only when a policy that did not change would restart its job."""

from __future__ import annotations

from typing import Any

import pytest

from dlq_engine.model import config_hash, to_spec
from dlq_engine.model.config_hash import HASHED_IN_FULL, _without_defaults
from tests.policy_builder import policy

PULSAR = {
    "spec.broker": {
        "type": "pulsar",
        "serviceUrl": "pulsar://pulsar:6650",
        "adminUrl": "http://pulsar:8080",
    },
    "spec.source.topic": "persistent://shop/orders/placed",
}

EVERYTHING_SET: dict[str, Any] = {
    "metadata.namespace": "billing-prod",
    "spec.source": {
        "topic": "orders",
        "subscription": "billing",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": 5000,
        "ordering": "key",
    },
    "spec.broker": {"bootstrapServers": "kafka.kafka:9092", "secretRef": {"name": "kafka-client"}},
    "spec.processor": {"entrypoint": "billing.handlers:process", "mode": "batch", "timeout": "1m30s"},
    "spec.output": {"topic": "orders-billed"},
    "spec.retry": {
        "maxRedeliverCount": 5,
        "topic": "billing-retry",
        "backoff": {"type": "exponential", "delay": "2s", "multiplier": 3, "maxDelay": "1h", "jitter": 0.25},
        "nonRetryableErrors": ["ValueError", "billing.BadInput"],
        "maxRetryDuration": "2h",
        "rules": [
            {"errors": ["TimeoutError"], "maxRedeliverCount": 9, "backoff": {"type": "fixed", "delay": "5s"}},
            {"errors": ["billing.Throttled"], "maxRedeliverCount": 2, "maxRetryDuration": "10m"},
        ],
    },
    "spec.deadLetter": {
        "strategy": "topic",
        "topic": "billing-dead",
        "includeStackTrace": False,
        "headers": {"team": "billing", "priority": 1},
        "headerProfiles": ["spark-dlq", "spring"],
        "table": {"format": "parquet", "path": "/dead-letters"},
    },
    "spec.errorWindow": {"size": 100, "threshold": 0.5},
    "spec.spark": {
        "image": "registry/spark-dlq:1",
        "trigger": "5s",
        "checkpointLocation": "s3a://bucket/ckpt",
        "driver": {"cores": 2, "memory": "2g"},
        "executor": {"instances": 4, "cores": 3, "memory": "4g"},
        "sparkConf": {"spark.sql.shuffle.partitions": 8},
        "pod": {"nodeSelector": {"pool": "streaming"}, "priorityClassName": "high"},
    },
    "spec.ordering": {
        "onDeadLetter": "block",
        "maxHeldPerKey": 7,
        "maxHeldTotal": 70,
        "maxHoldTime": "30m",
        "onOverflow": "stop",
    },
}

#: Fields written at their defaults, or only the fields outside the engine (topics, suspend).
DEFAULTS_WRITTEN: dict[str, Any] = {
    "spec.source.maxOffsetsPerTrigger": 0,
    "spec.source.ordering": "none",
    "spec.retry.maxRetryDuration": "0s",
    "spec.retry.rules": [],
    "spec.deadLetter.headerProfiles": ["spark-dlq"],
    "spec.topics": {"create": False, "partitions": 3},
    "spec.suspend": True,
}


@pytest.mark.parametrize(
    ("overrides", "pinned"),
    [
        pytest.param({}, "8fd1bebef06b413e", id="minimal"),
        pytest.param(DEFAULTS_WRITTEN, "8fd1bebef06b413e", id="defaults-written-and-operator-only-fields"),
        pytest.param(PULSAR, "a53830051f8bf326", id="pulsar"),
        pytest.param({"spec.source.ordering": "key"}, "4954045dc19da1d1", id="ordering-key-default-settings"),
        pytest.param(EVERYTHING_SET, "5c5d710802e5bcbb", id="everything-set"),
        pytest.param(
            {
                "spec.retry.breaker": {"window": 50, "threshold": 0.8, "openTime": "2m", "probes": 3},
                "spec.deadLetter.strategy": "stop",
            },
            "0e4dc54c18651c70",
            id="breaker-and-stop",
        ),
    ],
)
def test_an_existing_policy_keeps_its_hash(overrides: dict[str, Any], pinned: str) -> None:
    assert config_hash(policy(overrides)) == pinned


def test_the_fields_hashed_in_full_are_fields_of_the_spec() -> None:
    spec = to_spec(policy({"spec.source.ordering": "key"}))  # spec.ordering is written with it only
    for path in HASHED_IN_FULL:
        node: Any = spec
        for key in path.split("."):
            assert isinstance(node, dict), path
            assert key in node, path
            node = node[key]


def test_a_field_added_later_leaves_the_hash_at_its_default_and_changes_it_when_set() -> None:
    spec = {"source": {"topic": "orders", "newField": 0}, "brandNew": {"knob": "off"}}
    defaults = {"source": {"topic": "", "newField": 0}, "brandNew": {"knob": "off"}}
    assert _without_defaults(spec, defaults) == {"source": {"topic": "orders"}}
    spec["brandNew"]["knob"] = "on"
    assert _without_defaults(spec, defaults) == {"source": {"topic": "orders"}, "brandNew": {"knob": "on"}}
