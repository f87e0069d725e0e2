"""The one builder of DeadLetterPolicy documents for tests: a base document, whole spec
sections merged in, and single fields changed.

Validation tests read best as "the minimal policy, except this one field": ``policy_document
({"spec.retry.backoff.jitter": 1.5})``. Paths are dotted; ``DELETE`` removes a field. A key that
itself holds dots (``dlq.reason``, ``retention.ms``) is set through its parent mapping:
``{"spec.deadLetter.headers": {"dlq.reason": "x"}}``. Tests against real services start from
another base (``tests.helpers.BASE_POLICY``) and give sections: ``policy_document(base=...,
retry={"maxRedeliverCount": 1})`` merges one level deep into ``spec.retry``.

``every_field_document()`` is the one Kafka policy that sets every field the model reads, none
at its default (where a field's rule allows), for the round-trip, schema and API-server tests.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dlq_engine.model import DeadLetterPolicy, PolicyError, parse_policy

#: Marks a field to remove from the document.
DELETE: Any = object()

MINIMAL: dict[str, Any] = {
    "apiVersion": "sparkdlq.io/v1alpha1",
    "kind": "DeadLetterPolicy",
    "metadata": {"name": "orders-billing", "namespace": "payments"},
    "spec": {
        "source": {"topic": "orders", "subscription": "billing"},
        "broker": {"bootstrapServers": "kafka.kafka:9092"},
        "processor": {"entrypoint": "billing.handlers:process"},
    },
}


def policy_document(
    overrides: Mapping[str, Any] | None = None, *, base: Mapping[str, Any] = MINIMAL, **sections: Any
) -> dict[str, Any]:
    """A fresh copy of ``base`` with the spec ``sections`` merged in (one level deep: a mapping
    updates the section, anything else replaces it), then ``overrides`` (dotted path -> value)
    applied; missing parents are created as mappings."""
    document = copy.deepcopy(dict(base))
    spec = document["spec"]
    for section, value in sections.items():
        if isinstance(value, Mapping) and isinstance(spec.get(section), dict):
            spec[section].update(copy.deepcopy(value))
        else:
            spec[section] = copy.deepcopy(value)
    for path, value in (overrides or {}).items():
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node.setdefault(key, {})
        if value is DELETE:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)
    return document


#: A whole Kubernetes Affinity as a policy may write it (every field of the schema named once).
FULL_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []},
        "preferredDuringSchedulingIgnoredDuringExecution": [],
    },
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [],
        "preferredDuringSchedulingIgnoredDuringExecution": [],
    },
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [],
        "preferredDuringSchedulingIgnoredDuringExecution": [],
    },
}

#: Every field of a Kafka policy set, none at its default, in the model's canonical form
#: (``to_spec`` gives this spec back). Left at their defaults because a rule says so:
#: ``broker.type`` (the Pulsar fields are refused with Kafka's), ``deadLetter.strategy`` (a
#: table needs ``topic``) and ``retry.breaker`` (refused with ``source.ordering: key``).
_EVERY_FIELD_SPEC: dict[str, Any] = {
    "source": {
        "topic": "orders",
        "subscription": "billing",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": 5000,
        "ordering": "key",
    },
    "broker": {
        "type": "kafka",
        "bootstrapServers": "kafka-0:9092,kafka-1:9092",
        "secretRef": {"name": "kafka-client"},
    },
    "processor": {"entrypoint": "billing.handlers:process", "mode": "batch", "timeout": "1m30s"},
    "output": {"topic": "orders-billed"},
    "retry": {
        "maxRedeliverCount": 5,
        "topic": "orders-retry",
        "backoff": {
            "type": "levels",
            "delay": "2s",
            "multiplier": 3.5,
            "maxDelay": "1h",
            "jitter": 0.25,
            "levels": ["1s", "5s", "1m30s"],
        },
        "nonRetryableErrors": ["ValueError", "billing.errors.BadOrder"],
        "maxRetryDuration": "2h",
        "rules": [
            {
                "errors": ["TimeoutError", "ConnectionError"],
                "maxRedeliverCount": 9,
                "backoff": {
                    "type": "fixed",
                    "delay": "10s",
                    "multiplier": 2.0,
                    "maxDelay": "10m",
                    "jitter": 0.0,
                    "levels": [],
                },
                "maxRetryDuration": "10m",
            }
        ],
    },
    "deadLetter": {
        "strategy": "topic",
        "topic": "orders-dead",
        "includeStackTrace": False,
        "headers": {"team": "billing", "x-source": "orders"},
        "headerProfiles": ["spark-dlq", "spring", "connect", "pulsar"],
        "table": {"format": "parquet", "path": "/dead-letters/orders"},
    },
    "errorWindow": {"size": 100, "threshold": 0.5},
    "topics": {
        "create": False,
        "provisioner": "strimzi",
        "strimzi": {"namespace": "kafka", "cluster": "my-cluster"},
        "partitions": 6,
        "replicationFactor": 3,
        "retryConfig": {"retention.ms": "604800000"},
        "deadLetterConfig": {"cleanup.policy": "compact", "max.message.bytes": "16384", "retention.ms": "-1"},
        "deleteWithPolicy": True,
    },
    "spark": {
        "image": "registry.example/spark-dlq:1.0",
        "trigger": "10s",
        "checkpointLocation": "s3a://bucket/checkpoints",
        "driver": {"cores": 2, "memory": "2g"},
        "executor": {"instances": 4, "cores": 3, "memory": "4g"},
        "sparkConf": {"spark.sql.shuffle.partitions": "8"},
        "pod": {
            "nodeSelector": {"pool": "streaming"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "dlq", "effect": "NoSchedule"}
            ],
            "affinity": FULL_AFFINITY,
            "priorityClassName": "high",
            "labels": {"team": "billing"},
            "annotations": {"owner": "billing@example.com"},
        },
    },
    "suspend": True,
    "ordering": {
        "onDeadLetter": "block",
        "maxHeldPerKey": 7,
        "maxHeldTotal": 70,
        "maxHoldTime": "30m",
        "onOverflow": "stop",
    },
    "className": "billing",
}

#: What an API server refuses in a policy (its class decides where these live): written empty,
#: or left out, by ``every_field_document(in_cluster=True)``. A table without its path is not a
#: policy the model can read (governance adds the class's path), so the table goes whole.
_CLASS_DECIDES: dict[str, Any] = {"spec.spark.checkpointLocation": "", "spec.deadLetter.table": DELETE}


def every_field_document(
    overrides: Mapping[str, Any] | None = None, *, namespace: str = "billing-prod", in_cluster: bool = False
) -> dict[str, Any]:
    """The policy with every field set (``_EVERY_FIELD_SPEC``), in ``namespace``, then
    ``overrides`` as in ``policy_document``. ``in_cluster``: without the fields an API server
    refuses in a policy (a checkpoint location, a dead-letter table's path)."""
    base = {**MINIMAL, "metadata": {**MINIMAL["metadata"], "namespace": namespace}, "spec": _EVERY_FIELD_SPEC}
    return policy_document({**(_CLASS_DECIDES if in_cluster else {}), **(overrides or {})}, base=base)


def policy(overrides: Mapping[str, Any] | None = None) -> DeadLetterPolicy:
    """The parsed minimal policy with ``overrides`` applied (it must be valid)."""
    return parse_policy(policy_document(overrides))


def issues(document: object) -> list[str]:
    """Every problem ``parse_policy`` reports for ``document``, as ``path: message`` lines."""
    try:
        parse_policy(document)
    except PolicyError as error:
        return [str(issue) for issue in error.issues]
    raise AssertionError("the document parsed without problems")
