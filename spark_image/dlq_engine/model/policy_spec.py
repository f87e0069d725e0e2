"""A DeadLetterPolicy back to its spec mapping: what the operator writes into the engine's
``policy.yaml`` and what the configuration hash is computed over (``config_hash``).

``to_spec`` writes every field, defaults included, in the contract's names and shapes, so that
parsing it gives the same policy back. An optional section that is absent means "off" (the
breaker, the dead-letter table) and is written only when set; ``spec.ordering`` is written only
with ``source.ordering: key``, the only case the parser accepts it.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from dlq_engine.model.durations import format_ms
from dlq_engine.model.policy_types import (
    API_VERSION,
    DEFAULTS,
    KIND,
    BackoffSpec,
    BreakerSpec,
    Broker,
    DeadLetterPolicy,
    DeadLetterTable,
    Ordering,
    PodSettings,
)


def _backoff_spec(b: BackoffSpec) -> dict[str, Any]:
    return {
        "type": b.type,
        "delay": format_ms(b.delay_ms),
        "multiplier": b.multiplier,
        "maxDelay": format_ms(b.max_delay_ms),
        "jitter": b.jitter,
        "levels": [format_ms(level) for level in b.levels_ms],
    }


def to_spec(policy: DeadLetterPolicy) -> dict[str, Any]:
    """The spec with every default filled in, in the contract's field names and shapes."""
    b = policy.retry.backoff
    spec: dict[str, Any] = {
        "source": {
            "topic": policy.source.topic,
            "subscription": policy.source.subscription,
            "startingOffsets": policy.source.starting_offsets,
            "maxOffsetsPerTrigger": policy.source.max_offsets_per_trigger,
            "ordering": policy.source.ordering,
        },
        "broker": broker_spec(policy.broker),
        "processor": {
            "entrypoint": policy.processor.entrypoint,
            "mode": policy.processor.mode,
            "timeout": format_ms(policy.processor.timeout_ms),
        },
        "output": {"topic": policy.output.topic},
        "retry": {
            "maxRedeliverCount": policy.retry.max_redeliver_count,
            "topic": policy.retry_topic,
            "backoff": _backoff_spec(b),
            "nonRetryableErrors": list(policy.retry.non_retryable_errors),
            "maxRetryDuration": format_ms(policy.retry.max_retry_duration_ms),
            "rules": [
                {
                    "errors": list(rule.errors),
                    "maxRedeliverCount": rule.max_redeliver_count,
                    "backoff": _backoff_spec(rule.backoff),
                    # A rule inherits the policy's budget: written only when it has its own.
                    **(
                        {"maxRetryDuration": format_ms(rule.max_retry_duration_ms)}
                        if rule.max_retry_duration_ms != policy.retry.max_retry_duration_ms
                        else {}
                    ),
                }
                for rule in policy.retry.rules
            ],
            # Absent means no breaker (present, even empty, turns it on).
            **({"breaker": _breaker_spec(policy.retry.breaker)} if policy.retry.breaker else {}),
        },
        "deadLetter": {
            "strategy": policy.dead_letter.strategy,
            "topic": policy.dead_letter_topic,
            "includeStackTrace": policy.dead_letter.include_stack_trace,
            "headers": dict(sorted(policy.dead_letter.headers.items())),
            "headerProfiles": list(policy.dead_letter.header_profiles),
            # Absent means no table.
            **({"table": _table_spec(policy.dead_letter.table)} if policy.dead_letter.table else {}),
        },
        "errorWindow": {"size": policy.error_window.size, "threshold": policy.error_window.threshold},
        "topics": {
            "create": policy.topics.create,
            "provisioner": policy.topics.provisioner,
            "strimzi": {
                "namespace": policy.topics.strimzi.namespace,
                "cluster": policy.topics.strimzi.cluster,
            },
            "partitions": policy.topics.partitions,
            "replicationFactor": policy.topics.replication_factor,
            "retryConfig": dict(sorted(policy.topics.retry_config.items())),
            "deadLetterConfig": dict(sorted(policy.topics.dead_letter_config.items())),
            "deleteWithPolicy": policy.topics.delete_with_policy,
        },
        "spark": {
            "image": policy.spark.image,
            "trigger": format_ms(policy.spark.trigger_ms),
            "checkpointLocation": policy.spark.checkpoint_location,
            "driver": {"cores": policy.spark.driver.cores, "memory": policy.spark.driver.memory},
            "executor": {
                "instances": policy.spark.executor.instances,
                "cores": policy.spark.executor.cores,
                "memory": policy.spark.executor.memory,
            },
            "sparkConf": dict(sorted(policy.spark.spark_conf.items())),
            "pod": pod_spec(policy.spark.pod),
        },
        "suspend": policy.suspend,
        # Only with source.ordering key: the parser refuses it otherwise (it is not read).
        **({"ordering": _ordering_spec(policy.ordering)} if policy.source.ordering == "key" else {}),
        "className": policy.class_name,
    }
    return spec


def pod_spec(pod: PodSettings) -> dict[str, Any]:
    """``spec.spark.pod`` with the fields that are set, in the CRD's names."""
    fields: dict[str, Any] = {
        "nodeSelector": dict(sorted(pod.node_selector.items())),
        "tolerations": [dict(t) for t in pod.tolerations],
        "affinity": copy.deepcopy(dict(pod.affinity)),
        "priorityClassName": pod.priority_class_name,
        "labels": dict(sorted(pod.labels.items())),
        "annotations": dict(sorted(pod.annotations.items())),
    }
    return {key: value for key, value in fields.items() if value}


def broker_spec(broker: Broker) -> dict[str, Any]:
    """``spec.broker`` as written: the fields of the broker's own type (the parser refuses the
    other type's)."""
    written: dict[str, Any] = {"type": broker.type}
    if broker.type == "kafka":
        written["bootstrapServers"] = broker.bootstrap_servers
    else:
        written["serviceUrl"] = broker.service_url
        if broker.admin_url:  # optional: the parser refuses an empty one
            written["adminUrl"] = broker.admin_url
    if broker.secret_ref is not None:
        written["secretRef"] = {"name": broker.secret_ref.name}
    return written


def _breaker_spec(breaker: BreakerSpec) -> dict[str, Any]:
    return {
        "window": breaker.window,
        "threshold": breaker.threshold,
        "openTime": format_ms(breaker.open_ms),
        "probes": breaker.probes,
    }


def _table_spec(table: DeadLetterTable) -> dict[str, Any]:
    return {"format": table.format, "path": table.path}


def to_document(policy: DeadLetterPolicy) -> dict[str, Any]:
    """The whole object as the engine reads it from ``policy.yaml``."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": policy.name, "namespace": policy.namespace},
        "spec": to_spec(policy),
    }


def _ordering_spec(ordering: Ordering) -> dict[str, Any]:
    return {
        "onDeadLetter": ordering.on_dead_letter,
        "maxHeldPerKey": ordering.max_held_per_key,
        "maxHeldTotal": ordering.max_held_total,
        "maxHoldTime": format_ms(ordering.max_hold_ms),
        "onOverflow": ordering.on_overflow,
    }


#: The spec of a policy that sets nothing (``DEFAULTS``): every field at its type's default.
DEFAULT_SPEC: Final = to_spec(DEFAULTS)
