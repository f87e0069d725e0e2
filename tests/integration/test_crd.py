"""The DeadLetterPolicy CRD in a real kube-apiserver: defaults, refusals, names, status.

The API server is the first line of defence: it fills in the same defaults as the shared policy
model and refuses what the model would refuse, naming the field. Every refusal here is also
checked against the model, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dlq_engine.model import PolicyError, parse_policy, to_spec
from spark_dlq_devtools.paths import REPO_ROOT, kubernetes_bin
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import govern
from spark_dlq_operator.policy_class import (
    BUILT_IN_CLASS,
    DEFAULTABLE,
)
from tests.policy_builder import every_field_document

GROUP = "sparkdlq.io"
VERSION = "v1alpha1"
PLURAL = "deadletterpolicies"

pytestmark = pytest.mark.usefixtures("dlp_crd")


# ---------------------------------------------------------------------------------------------
# Helpers


def minimal(namespace: str, name: str = "orders-billing") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "source": {"topic": "orders", "subscription": "billing"},
            "broker": {"bootstrapServers": "kafka.kafka:9092"},
            "processor": {"entrypoint": "billing.handlers:process"},
        },
    }


def with_spec(document: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` with ``patch`` merged into its spec (a None value is kept)."""
    result = copy.deepcopy(document)

    def merge(target: dict[str, Any], changes: dict[str, Any]) -> None:
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                merge(target[key], value)
            else:
                target[key] = copy.deepcopy(value)

    merge(result["spec"], patch)
    return result


def create(api: Any, document: dict[str, Any]) -> dict[str, Any]:
    """Create as ``kubectl apply`` does: unknown fields are refused, not silently pruned."""
    objects = client.CustomObjectsApi(api)
    created: dict[str, Any] = objects.create_namespaced_custom_object(
        GROUP, VERSION, document["metadata"]["namespace"], PLURAL, document, field_validation="Strict"
    )
    return created


def read(api: Any, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return found


def refusal(error: ApiException) -> tuple[list[tuple[str, str]], str]:
    """The ``(field, message)`` causes of a refusal, and its whole message."""
    body = json.loads(error.body)
    causes = [(c.get("field", ""), c.get("message", "")) for c in body.get("details", {}).get("causes", [])]
    return causes, body["message"]


#: The CRD's schema of ``spec``.
_SPEC_SCHEMA: Final = yaml.safe_load(
    (REPO_ROOT / "crds" / "sparkdlq.io_deadletterpolicies.yaml").read_text()
)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def _as_stored(spec: dict[str, Any], written: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """``spec`` (the model's, every field filled in) less the fields the apiserver leaves out:
    those neither ``written`` nor defaulted by the CRD's ``schema``."""
    kept: dict[str, Any] = {}
    given = written if isinstance(written, dict) else {}
    for key, value in spec.items():
        field = (schema.get("properties") or {}).get(key, {})
        mine = given.get(key)  # a null is as good as absent: the apiserver defaults it
        if mine is None and "default" not in field:
            continue
        if isinstance(value, dict) and field.get("properties"):
            value = _as_stored(value, field.get("default") if mine is None else mine, field)
        kept[key] = value
    return kept


def crd_defaults_of(document: dict[str, Any]) -> dict[str, Any]:
    """The spec the CRD should store for ``document``: the model's spec, except that the retry
    and dead-letter topics stay as written (the CRD defaults them to "", the model derives them),
    and that the fields a class may default stay unset unless written (the class, else the
    model, fills them in)."""
    spec = _as_stored(to_spec(parse_policy(document)), document["spec"], _SPEC_SCHEMA)
    for section in ("retry", "deadLetter"):
        spec[section]["topic"] = (document["spec"].get(section) or {}).get("topic") or ""
    # The model leaves broker.type out at kafka; the CRD stores it.
    spec["broker"].setdefault("type", "kafka")
    for path in DEFAULTABLE:
        *parents, last = path.split(".")
        node, written = spec, document["spec"]
        for key in parents:
            node, written = node[key], (written or {}).get(key) or {}
        if last not in written:
            node.pop(last, None)
    return spec


def with_kafka_type(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` as the CRD stores it: the model leaves broker.type out at kafka, the CRD fills it in."""
    return {**spec, "broker": {"type": "kafka", **spec["broker"]}}


# ---------------------------------------------------------------------------------------------
# Defaults


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param({}, id="minimal"),
        pytest.param(
            {
                "retry": {"backoff": {"type": "levels", "levels": ["1s", "5s"]}},
                "topics": {"strimzi": {"cluster": "my-cluster"}},
                "spark": {"executor": {"instances": 3}},
            },
            id="partly-filled-sections",
        ),
        pytest.param(
            {"retry": None, "spark": {"driver": None}, "output": {"topic": None}}, id="null-sections"
        ),
    ],
)
def test_defaults_match_the_model(kube_api: Any, namespace: str, patch: dict[str, Any]) -> None:
    document = with_spec(minimal(namespace), patch)

    stored = create(kube_api, document)

    assert stored["spec"] == crd_defaults_of(document)
    assert parse_policy(stored) == parse_policy(document)


def test_derived_topics_are_left_empty_for_the_model(kube_api: Any, namespace: str) -> None:
    stored = create(kube_api, minimal(namespace))

    assert (stored["spec"]["retry"]["topic"], stored["spec"]["deadLetter"]["topic"]) == ("", "")
    policy = parse_policy(stored)
    assert (policy.retry_topic, policy.dead_letter_topic) == ("orders-billing-RETRY", "orders-billing-DLQ")


def full_spec() -> dict[str, Any]:
    """Every field the model knows that a policy may write in a cluster, none at its default,
    in the model's canonical form (the one shared builder's)."""
    spec: dict[str, Any] = every_field_document(in_cluster=True)["spec"]
    return spec


def test_every_model_field_is_kept(kube_api: Any, namespace: str) -> None:
    document = {**minimal(namespace), "spec": full_spec()}

    stored = create(kube_api, document)

    assert to_spec(parse_policy(document)) == document["spec"]
    assert stored["spec"] == with_kafka_type(document["spec"])


def test_retry_rules_are_kept_and_a_class_in_two_rules_is_refused(kube_api: Any, namespace: str) -> None:
    spec = full_spec()
    spec["retry"] = {
        **spec["retry"],
        "rules": [
            {
                "errors": ["TimeoutError", "ConnectionError"],
                "maxRedeliverCount": 20,
                "backoff": {
                    "type": "fixed",
                    "delay": "10s",
                    "multiplier": 2.0,
                    "maxDelay": "10m",
                    "jitter": 0.0,
                    "levels": [],
                },
            }
        ],
    }
    document = {**minimal(namespace), "spec": spec}
    stored = create(kube_api, document)
    assert stored["spec"]["retry"]["rules"] == spec["retry"]["rules"]
    assert to_spec(parse_policy(document)) == spec

    twice = with_spec(
        minimal(namespace), {"retry": {"rules": [{"errors": ["TimeoutError"]}, {"errors": ["TimeoutError"]}]}}
    )
    twice["metadata"]["name"] = "twice"
    with pytest.raises(ApiException) as refused:
        create(kube_api, twice)
    assert refused.value.status == 422
    assert "an error class may be named in one rule only" in refusal(refused.value)[1]
    # A rule without maxRedeliverCount or backoff stays without them: the model fills in the policy's.
    bare = with_spec(minimal(namespace), {"retry": {"rules": [{"errors": ["TimeoutError"]}]}})
    bare["metadata"]["name"] = "bare"
    assert create(kube_api, bare)["spec"]["retry"]["rules"] == [{"errors": ["TimeoutError"]}]


def test_the_breaker_is_kept_and_an_empty_one_stays_empty(kube_api: Any, namespace: str) -> None:
    breaker = {"window": 20, "threshold": 0.8, "openTime": "1m", "probes": 3}
    document = with_spec(minimal(namespace), {"retry": {"breaker": breaker}})
    assert create(kube_api, document)["spec"]["retry"]["breaker"] == breaker
    # No defaults in the CRD: the model fills them in. A policy that leaves its broker to its
    # class may have one (the class's broker, if Pulsar, is refused by the model).
    empty = with_spec(minimal(namespace), {"retry": {"breaker": {}}})
    empty["metadata"]["name"] = "empty-breaker"
    del empty["spec"]["broker"]
    assert create(kube_api, empty)["spec"]["retry"]["breaker"] == {}


def test_dead_letter_table_is_kept_without_a_path(kube_api: Any, namespace: str) -> None:
    """The policy's class gives the path (governance.govern)."""
    document = with_spec(minimal(namespace), {"deadLetter": {"table": {}}})

    stored = create(kube_api, document)

    assert stored["spec"]["deadLetter"]["table"] == {"format": "delta"}


def test_unquoted_topic_config_numbers_are_accepted(kube_api: Any, namespace: str) -> None:
    document = with_spec(minimal(namespace), {"topics": {"retryConfig": {"retention.ms": 604800000}}})

    stored = create(kube_api, document)

    assert stored["spec"]["topics"]["retryConfig"] == {"retention.ms": 604800000}
    assert parse_policy(stored).topics.retry_config == {"retention.ms": "604800000"}


@pytest.mark.parametrize(
    ("delay", "max_delay"),
    [
        pytest.param("1d", "24h", id="days-equal-hours"),
        pytest.param("90s", "1m30s", id="mixed-units"),
        pytest.param("0", "0s", id="zero"),
        pytest.param("1h", "1d1h", id="days-then-hours"),
    ],
)
def test_max_delay_not_shorter_than_delay_is_accepted(
    kube_api: Any,
    namespace: str,
    delay: str,
    max_delay: str,
) -> None:
    document = with_spec(minimal(namespace), {"retry": {"backoff": {"delay": delay, "maxDelay": max_delay}}})

    stored = create(kube_api, document)

    assert stored["spec"]["retry"]["backoff"]["maxDelay"] == max_delay
    parse_policy(stored)


# ---------------------------------------------------------------------------------------------
# Refusals


#: The CRD's (and the model's) refusal of a retry or DLQ topic whose max.message.bytes is too small.
MESSAGE_BYTES_REFUSAL = (
    "max.message.bytes must be a number of at least 16384: below the producer's "
    "batch.size (16 KiB) the Kafka client retries a refused batch forever (KAFKA-8350)"
)

INVALID = [
    pytest.param(
        {"retry": {"maxRedeliverCount": -1}},
        "spec.retry.maxRedeliverCount",
        "Invalid value: -1: spec.retry.maxRedeliverCount in body should be greater than or equal to 0",
        id="negative-max-redeliver-count",
    ),
    pytest.param(
        {"retry": {"backoff": {"jitter": 1.5}}},
        "spec.retry.backoff.jitter",
        "Invalid value: 1.5: spec.retry.backoff.jitter in body should be less than or equal to 1",
        id="jitter-above-1",
    ),
    pytest.param(
        {"retry": {"backoff": {"jitter": -0.1}}},
        "spec.retry.backoff.jitter",
        "Invalid value: -0.1: spec.retry.backoff.jitter in body should be greater than or equal to 0",
        id="jitter-below-0",
    ),
    pytest.param(
        {"retry": {"backoff": {"type": "levels"}}},
        "spec.retry.backoff.levels",
        "Required value: must list at least one delay when type is levels",
        id="levels-type-without-levels",
    ),
    pytest.param(
        {"retry": {"backoff": {"type": "levels", "levels": []}}},
        "spec.retry.backoff.levels",
        "Required value: must list at least one delay when type is levels",
        id="levels-type-with-empty-levels",
    ),
    pytest.param(
        {"retry": {"backoff": {"type": "levels", "levels": ["1s", "soon"]}}},
        "spec.retry.backoff.levels[1]",
        'Invalid value: "soon": spec.retry.backoff.levels[1] in body should match '
        "'^([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+$|^0$'",
        id="level-not-a-duration",
    ),
    pytest.param(
        {"retry": {"backoff": {"multiplier": 0.5}}},
        "spec.retry.backoff.multiplier",
        "Invalid value: 0.5: spec.retry.backoff.multiplier in body should be greater than or equal to 1",
        id="multiplier-below-1",
    ),
    pytest.param(
        {"retry": {"backoff": {"delay": "5 seconds"}}},
        "spec.retry.backoff.delay",
        'Invalid value: "5 seconds": spec.retry.backoff.delay in body should match '
        "'^([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+$|^0$'",
        id="delay-not-a-duration",
    ),
    pytest.param(
        {"retry": {"backoff": {"delay": "1d2h", "maxDelay": "1d1h"}}},
        "spec.retry.backoff.maxDelay",
        'Invalid value: "object": must not be shorter than delay',
        id="max-delay-shorter-in-days",
    ),
    pytest.param(
        {"retry": {"backoff": {"delay": "25h", "maxDelay": "1d"}}},
        "spec.retry.backoff.maxDelay",
        'Invalid value: "object": must not be shorter than delay',
        id="max-delay-one-day-below-25h",
    ),
    pytest.param(
        {"retry": {"topic": "orders"}},
        "spec.retry.topic",
        'Invalid value: "object": must differ from spec.source.topic',
        id="retry-topic-is-source-topic",
    ),
    pytest.param(
        {"deadLetter": {"topic": "orders"}},
        "spec.deadLetter.topic",
        'Invalid value: "object": must differ from spec.source.topic',
        id="dead-letter-topic-is-source-topic",
    ),
    pytest.param(
        {"output": {"topic": "orders"}},
        "spec.output.topic",
        'Invalid value: "object": must differ from spec.source.topic',
        id="output-topic-is-source-topic",
    ),
    pytest.param(
        {"retry": {"topic": "failures"}, "deadLetter": {"topic": "failures"}},
        "spec.deadLetter.topic",
        'Invalid value: "object": must differ from the retry topic',
        id="retry-topic-is-dead-letter-topic",
    ),
    pytest.param(
        {"retry": {"topic": "orders-billing-DLQ"}},
        "spec.deadLetter.topic",
        'Invalid value: "object": must differ from the retry topic',
        id="retry-topic-is-derived-dead-letter-topic",
    ),
    pytest.param(
        {"output": {"topic": "orders-billing-RETRY"}},
        "spec.output.topic",
        'Invalid value: "object": must differ from the retry and dead-letter topics',
        id="output-topic-is-derived-retry-topic",
    ),
    pytest.param(
        {"source": {"topic": ".."}},
        "spec.source.topic",
        "Invalid value: \"string\": must not be named '.' or '..'",
        id="source-topic-dot-dot",
    ),
    pytest.param(
        {"source": {"topic": "or ders"}},
        "spec.source.topic",
        'Invalid value: "or ders": spec.source.topic in body should match '
        "'^(persistent://)?([a-zA-Z0-9._-]+/[a-zA-Z0-9._-]+/)?[a-zA-Z0-9._-]+$'",
        id="source-topic-with-space",
    ),
    pytest.param(
        {"source": {"topic": "o" * 250}},
        "spec.source.topic",
        "Too long: may not be longer than 249",
        id="source-topic-too-long",
    ),
    pytest.param(
        {"source": {"topic": "o" * 200, "subscription": "s" * 45}},
        "spec.retry.topic",
        'Invalid value: "object": (derived) <source.topic>-<source.subscription>-RETRY must be '
        "at most 249 characters: shorten them or name the retry topic",
        id="derived-retry-topic-too-long",
    ),
    pytest.param(
        {"source": {"subscription": None}},
        "spec.source.subscription",
        "Required value",
        id="missing-subscription",
    ),
    pytest.param(
        {"source": {"startingOffsets": "newest"}},
        "spec.source.startingOffsets",
        'Unsupported value: "newest": supported values: "earliest", "latest"',
        id="unknown-starting-offsets",
    ),
    pytest.param(
        {"broker": {"bootstrapServers": "  "}},
        "spec.broker.bootstrapServers",
        'Invalid value: "string": must not be empty',
        id="blank-bootstrap-servers",
    ),
    pytest.param(
        {"processor": {"entrypoint": "billing.handlers"}},
        "spec.processor.entrypoint",
        "Invalid value: \"string\": must be 'module:function'",
        id="entrypoint-without-function",
    ),
    pytest.param(
        {"processor": {"timeout": "-1s"}},
        "spec.processor.timeout",
        'Invalid value: "-1s": spec.processor.timeout in body should match '
        "'^([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+$|^0$'",
        id="negative-timeout",
    ),
    pytest.param(
        {"retry": {"nonRetryableErrors": ["ValueError", " "]}},
        "spec.retry.nonRetryableErrors[1]",
        'Invalid value: "string": must not be empty',
        id="blank-non-retryable-error",
    ),
    pytest.param(
        {"deadLetter": {"strategy": "drop"}},
        "spec.deadLetter.strategy",
        'Unsupported value: "drop": supported values: "topic", "ignore", "stop"',
        id="unknown-dead-letter-strategy",
    ),
    pytest.param(
        {"deadLetter": {"headers": {"team": "billing", "DLQ.reason": "mine"}}},
        "spec.deadLetter.headers",
        "Forbidden: header names must not start with 'dlq.': those headers are written by the engine",
        id="dead-letter-header-in-engine-namespace",
    ),
    pytest.param(
        {"deadLetter": {"headerProfiles": ["spark-dlq", "kafka-ui"]}},
        "spec.deadLetter.headerProfiles[1]",
        'Unsupported value: "kafka-ui": supported values: "spark-dlq", "spring", "connect", "pulsar"',
        id="unknown-header-profile",
    ),
    pytest.param(
        {"deadLetter": {"headerProfiles": ["spark-dlq", "spring", "spring"]}},
        "spec.deadLetter.headerProfiles",
        'Invalid value: "array": must not list a profile twice',
        id="header-profile-twice",
    ),
    pytest.param(
        {"deadLetter": {"headerProfiles": ["connect"]}},
        "spec.deadLetter.headerProfiles",
        'Invalid value: "array": must include spark-dlq (the engine, the redrive and the triage CLI '
        "read the dlq.* headers)",
        id="header-profiles-without-spark-dlq",
    ),
    pytest.param(
        {"deadLetter": {"strategy": "ignore", "table": {"path": "/data/dl"}}},
        "spec.deadLetter.table",
        "Forbidden: is only allowed with strategy topic (it holds what the dead-letter topic receives)",
        id="dead-letter-table-with-strategy-ignore",
    ),
    pytest.param(
        {"deadLetter": {"table": {"path": " /data/dl"}}},
        "spec.deadLetter.table.path",
        'Invalid value: "string": must not start or end with white space',
        id="dead-letter-table-path-leading-space",
    ),
    pytest.param(
        {"deadLetter": {"table": {"format": "iceberg", "path": "/data/dl"}}},
        "spec.deadLetter.table.format",
        'Unsupported value: "iceberg": supported values: "delta", "parquet"',
        id="dead-letter-table-unknown-format",
    ),
    pytest.param(
        {"errorWindow": {"threshold": 0}},
        "spec.errorWindow.threshold",
        "Invalid value: 0: spec.errorWindow.threshold in body should be greater than 0",
        id="error-window-threshold-0",
    ),
    pytest.param(
        {"errorWindow": {"threshold": 1.2}},
        "spec.errorWindow.threshold",
        "Invalid value: 1.2: spec.errorWindow.threshold in body should be less than or equal to 1",
        id="error-window-threshold-above-1",
    ),
    pytest.param(
        {"errorWindow": {"size": -5}},
        "spec.errorWindow.size",
        "Invalid value: -5: spec.errorWindow.size in body should be greater than or equal to 0",
        id="negative-error-window-size",
    ),
    pytest.param(
        {"topics": {"provisioner": "strimzi"}},
        "spec.topics.strimzi.cluster",
        "Required value: is required when provisioner is strimzi",
        id="strimzi-provisioner-without-cluster",
    ),
    pytest.param(
        {"topics": {"replicationFactor": 0}},
        "spec.topics.replicationFactor",
        'Invalid value: "integer": must be -1 (broker default) or at least 1',
        id="replication-factor-0",
    ),
    pytest.param(
        {"topics": {"replicationFactor": -2}},
        "spec.topics.replicationFactor",
        "Invalid value: -2: spec.topics.replicationFactor in body should be greater than or equal to -1",
        id="replication-factor-below-minus-1",
    ),
    pytest.param(
        {"topics": {"deadLetterConfig": {"max.message.bytes": 16383}}},
        "spec.topics.deadLetterConfig",
        f'Invalid value: "object": {MESSAGE_BYTES_REFUSAL}',
        id="dlq-max-message-bytes-below-batch-size",
    ),
    pytest.param(
        {"topics": {"retryConfig": {"max.message.bytes": "1MB"}}},
        "spec.topics.retryConfig",
        f'Invalid value: "object": {MESSAGE_BYTES_REFUSAL}',
        id="retry-max-message-bytes-not-a-number",
    ),
    pytest.param(
        {"topics": {"partitions": -1}},
        "spec.topics.partitions",
        "Invalid value: -1: spec.topics.partitions in body should be greater than or equal to 0",
        id="negative-partitions",
    ),
    pytest.param(
        {"spark": {"trigger": "0ms"}},
        "spec.spark.trigger",
        'Invalid value: "string": must be longer than 0',
        id="zero-trigger",
    ),
    pytest.param(
        {"ordering": {"onDeadLetter": "block"}},
        "spec.ordering",
        'Invalid value: "object": is only read with spec.source.ordering key',
        id="ordering-without-key-ordering",
    ),
    pytest.param(
        {"source": {"ordering": "key"}, "ordering": {"maxHoldTime": "0s"}},
        "spec.ordering.maxHoldTime",
        'Invalid value: "string": must be longer than 0',
        id="zero-max-hold-time",
    ),
    pytest.param(
        {"source": {"ordering": "key"}, "ordering": {"maxHeldTotal": 0}},
        "spec.ordering.maxHeldTotal",
        "Invalid value: 0: spec.ordering.maxHeldTotal in body should be greater than or equal to 1",
        id="zero-max-held-total",
    ),
    pytest.param(
        {"source": {"ordering": "key"}, "ordering": {"maxHeldPerKey": 2**31}},
        "spec.ordering.maxHeldPerKey",
        "Invalid value: 2147483648: spec.ordering.maxHeldPerKey in body should be less than or equal to 2147483647",
        id="max-held-per-key-beyond-an-int",
    ),
    pytest.param(
        {"source": {"ordering": "key"}, "retry": {"breaker": {}}},
        "spec.retry.breaker",
        'Invalid value: "object": is not supported with spec.source.ordering key yet',
        id="breaker-with-key-ordering",
    ),
    pytest.param(
        {"retry": {"breaker": {"threshold": 0}}},
        "spec.retry.breaker.threshold",
        "Invalid value: 0: spec.retry.breaker.threshold in body should be greater than 0",
        id="breaker-threshold-0",
    ),
    pytest.param(
        {"retry": {"breaker": {"openTime": "0s"}}},
        "spec.retry.breaker.openTime",
        'Invalid value: "string": must be longer than 0',
        id="breaker-open-time-0",
    ),
    pytest.param(
        {"retry": {"breaker": {"probes": 0}}},
        "spec.retry.breaker.probes",
        "Invalid value: 0: spec.retry.breaker.probes in body should be greater than or equal to 1",
        id="breaker-no-probes",
    ),
    pytest.param(
        {"spark": {"executor": {"instances": 0}}},
        "spec.spark.executor.instances",
        "Invalid value: 0: spec.spark.executor.instances in body should be greater than or equal to 1",
        id="no-executors",
    ),
    pytest.param(
        {"spark": {"driver": {"memory": "1gb"}}},
        "spec.spark.driver.memory",
        "Invalid value: \"1gb\": spec.spark.driver.memory in body should match '^[1-9][0-9]*[kmgtKMGT]?$'",
        id="driver-memory-not-a-jvm-size",
    ),
]


def test_a_delay_beyond_a_default_max_delay_is_left_to_the_operator(kube_api: Any, namespace: str) -> None:
    """maxDelay has no CRD default (the policy's class may give one), so the API server cannot
    compare a delay with it; the operator does, with the class's defaults merged in."""
    document = with_spec(minimal(namespace), {"retry": {"backoff": {"delay": "20m"}}})
    create(kube_api, document)
    with pytest.raises(PolicyError) as refused:
        govern(document, BUILT_IN_CLASS, config=OperatorConfig())
    assert [str(i) for i in refused.value.issues] == [
        "spec.retry.backoff.maxDelay: must not be shorter than delay (20m), got 10m"
    ]


@pytest.mark.parametrize(("patch", "field", "message"), INVALID)
def test_invalid_policy_is_refused_naming_the_field(
    kube_api: Any,
    namespace: str,
    patch: dict[str, Any],
    field: str,
    message: str,
) -> None:
    document = with_spec(minimal(namespace), patch)

    with pytest.raises(ApiException) as refused:
        create(kube_api, document)

    assert refused.value.status == 422
    causes, whole = refusal(refused.value)
    assert (field, message) in causes
    assert f"{field}: {message}" in whole
    with pytest.raises(PolicyError) as model_refused:
        parse_policy(document)
    assert any(issue.path.startswith(field) for issue in model_refused.value.issues), (
        f"the model does not refuse {field}: {model_refused.value}"
    )


def test_a_policy_may_leave_its_broker_to_its_class(kube_api: Any, namespace: str) -> None:
    document = minimal(namespace)
    del document["spec"]["broker"]
    document["spec"]["className"] = "standard"
    document["spec"]["spark"] = {"pod": {"labels": {"team": "billing"}}}

    stored = create(kube_api, document)

    assert "broker" not in stored["spec"]
    assert (stored["spec"]["className"], stored["spec"]["spark"]["pod"]) == (
        "standard",
        {"labels": {"team": "billing"}},
    )


# ---------------------------------------------------------------------------------------------
# Pulsar: spec.broker.type pulsar

PULSAR_BROKER = {
    "type": "pulsar",
    "bootstrapServers": None,
    "serviceUrl": "pulsar://pulsar.pulsar:6650",
    "adminUrl": "http://pulsar.pulsar:8080",
}


def pulsar(namespace: str, patch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The minimal policy on Pulsar (``None`` drops a field, as the API server prunes nulls)."""
    return with_spec(with_spec(minimal(namespace), {"broker": PULSAR_BROKER}), patch or {})


def test_pulsar_policy_is_stored_with_the_model_s_defaults(kube_api: Any, namespace: str) -> None:
    document = pulsar(namespace, {"source": {"topic": "persistent://payments/shop/orders"}})
    document["spec"]["broker"] = {k: v for k, v in document["spec"]["broker"].items() if v is not None}

    stored = create(kube_api, document)

    assert stored["spec"] == crd_defaults_of(document)
    policy = parse_policy(stored)
    assert (policy.broker.type, policy.retry_topic, policy.dead_letter_topic) == (
        "pulsar",
        "persistent://payments/shop/orders-billing-RETRY",
        "persistent://payments/shop/orders-billing-DLQ",
    )


def test_pulsar_policy_names_its_client_secret(kube_api: Any, namespace: str) -> None:
    document = pulsar(namespace, {"broker": {"secretRef": {"name": "pulsar-client"}}})
    stored = create(kube_api, document)
    assert stored["spec"]["broker"]["secretRef"] == {"name": "pulsar-client"}
    parse_policy(stored)


def test_pulsar_policy_without_topic_creation_needs_no_admin_url(kube_api: Any, namespace: str) -> None:
    document = pulsar(namespace, {"broker": {"adminUrl": None}, "topics": {"create": False}})

    stored = create(kube_api, document)

    assert "adminUrl" not in stored["spec"]["broker"]
    assert parse_policy(stored).broker.admin_url == ""


KAFKA_CONFIGS_REFUSAL = (
    "must be empty with broker type pulsar: these are Kafka topic configs (a Pulsar topic takes "
    "retention and the rest from its namespace's policies)"
)

#: (base, patch, field, message): base "pulsar" starts from the minimal Pulsar policy.
MIXED = [
    pytest.param(
        "kafka",
        {"broker": {"bootstrapServers": None}},
        "spec.broker.bootstrapServers",
        "Required value: is required with type kafka",
        id="kafka-without-bootstrap-servers",
    ),
    pytest.param(
        "kafka",
        {"broker": {"serviceUrl": "pulsar://p:6650"}},
        "spec.broker.serviceUrl",
        "Forbidden: is for type pulsar (spec.broker.type is kafka)",
        id="service-url-with-kafka",
    ),
    pytest.param(
        "kafka",
        {"broker": {"adminUrl": "http://p:8080"}},
        "spec.broker.adminUrl",
        "Forbidden: is for type pulsar (spec.broker.type is kafka)",
        id="admin-url-with-kafka",
    ),
    pytest.param(
        "kafka",
        {"source": {"topic": "persistent://public/default/orders"}},
        "spec.source.topic",
        "Invalid value: \"object\": may contain only letters, digits, '.', '_' and '-' with broker type kafka",
        id="pulsar-topic-name-with-kafka",
    ),
    pytest.param(
        "kafka",
        {"deadLetter": {"topic": "dead/letters"}},
        "spec.deadLetter.topic",
        'Invalid value: "dead/letters": spec.deadLetter.topic in body should match '
        "'^((persistent://)?([a-zA-Z0-9._-]+/[a-zA-Z0-9._-]+/)?[a-zA-Z0-9._-]+)?$'",
        id="dead-letter-topic-two-parts",
    ),
    pytest.param(
        "kafka",
        {"broker": {"type": "rabbitmq"}},
        "spec.broker.type",
        'Unsupported value: "rabbitmq": supported values: "kafka", "pulsar"',
        id="unknown-broker-type",
    ),
    pytest.param(
        "pulsar",
        {"broker": {"serviceUrl": None}},
        "spec.broker.serviceUrl",
        "Required value: is required with type pulsar",
        id="pulsar-without-service-url",
    ),
    pytest.param(
        "pulsar",
        {"broker": {"bootstrapServers": "kafka:9092"}},
        "spec.broker.bootstrapServers",
        "Forbidden: is for type kafka: a Pulsar broker is reached through serviceUrl and adminUrl",
        id="bootstrap-servers-with-pulsar",
    ),
    pytest.param(
        "pulsar",
        {"broker": {"adminUrl": None}},
        "spec.broker.adminUrl",
        "Required value: is required with type pulsar when spec.topics.create is true: the operator "
        "creates the topics through Pulsar's admin REST API",
        id="pulsar-without-admin-url",
    ),
    pytest.param(
        "pulsar",
        {"broker": {"serviceUrl": "http://p:6650"}},
        "spec.broker.serviceUrl",
        'Invalid value: "http://p:6650": spec.broker.serviceUrl in body should match '
        "'^pulsar(\\+ssl)?://[^\\s/]+/?$'",
        id="service-url-not-pulsar",
    ),
    pytest.param(
        "pulsar",
        {"broker": {"adminUrl": "p:8080"}},
        "spec.broker.adminUrl",
        "Invalid value: \"p:8080\": spec.broker.adminUrl in body should match '^https?://[^\\s]+$'",
        id="admin-url-without-scheme",
    ),
    pytest.param(
        "pulsar",
        {"topics": {"provisioner": "strimzi", "strimzi": {"cluster": "c"}}},
        "spec.topics.provisioner",
        'Invalid value: "object": strimzi provisions Kafka topics: with broker type pulsar use auto or '
        "admin (Pulsar's admin REST API)",
        id="strimzi-with-pulsar",
    ),
    pytest.param(
        "pulsar",
        {"topics": {"replicationFactor": 3}},
        "spec.topics.replicationFactor",
        'Invalid value: "object": must be -1 with broker type pulsar: a Pulsar topic\'s replicas are '
        "its namespace's persistence policy",
        id="replication-factor-with-pulsar",
    ),
    pytest.param(
        "pulsar",
        {"topics": {"retryConfig": {"retention.ms": "1000"}}},
        "spec.topics.retryConfig",
        f'Invalid value: "object": {KAFKA_CONFIGS_REFUSAL}',
        id="retry-config-with-pulsar",
    ),
    pytest.param(
        "pulsar",
        {"topics": {"deadLetterConfig": {"retention.ms": "-1"}}},
        "spec.topics.deadLetterConfig",
        f'Invalid value: "object": {KAFKA_CONFIGS_REFUSAL}',
        id="dead-letter-config-with-pulsar",
    ),
    pytest.param(
        "pulsar",
        {"source": {"topic": "non-persistent://t/ns/orders"}},
        "spec.source.topic",
        'Invalid value: "non-persistent://t/ns/orders": spec.source.topic in body should match '
        "'^(persistent://)?([a-zA-Z0-9._-]+/[a-zA-Z0-9._-]+/)?[a-zA-Z0-9._-]+$'",
        id="non-persistent-source",
    ),
    pytest.param(
        "pulsar",
        {"deadLetter": {"topic": "t/ns/orders-partition-0"}},
        "spec.deadLetter.topic",
        'Invalid value: "object": must not end in -partition-<n> with broker type pulsar: Pulsar names '
        "a topic's partitions so",
        id="dead-letter-topic-named-like-a-partition",
    ),
    pytest.param(
        "pulsar",
        {"retry": {"topic": "t/ns/.."}},
        "spec.retry.topic",
        "Invalid value: \"string\": must not be named '.' or '..'",
        id="retry-topic-dot-dot",
    ),
]


@pytest.mark.parametrize(("base", "patch", "field", "message"), MIXED)
def test_mixed_broker_settings_are_refused_naming_the_field(
    kube_api: Any,
    namespace: str,
    base: str,
    patch: dict[str, Any],
    field: str,
    message: str,
) -> None:
    document = with_spec(pulsar(namespace) if base == "pulsar" else minimal(namespace), patch)

    with pytest.raises(ApiException) as refused:
        create(kube_api, document)

    assert refused.value.status == 422
    causes, whole = refusal(refused.value)
    assert (field, message) in causes, causes
    assert f"{field}: {message}" in whole
    with pytest.raises(PolicyError) as model_refused:
        parse_policy(document)
    assert any(issue.path.startswith(field) for issue in model_refused.value.issues), (
        f"the model does not refuse {field}: {model_refused.value}"
    )


def test_unknown_field_is_refused_like_kubectl_does(kube_api: Any, namespace: str) -> None:
    document = with_spec(minimal(namespace), {"retry": {"maxRedeliveryCount": 3}})

    with pytest.raises(ApiException) as refused:
        create(kube_api, document)

    assert refused.value.status == 400
    assert 'unknown field "spec.retry.maxRedeliveryCount"' in json.loads(refused.value.body)["message"]
    with pytest.raises(PolicyError, match=r"spec\.retry\.maxRedeliveryCount: unknown field"):
        parse_policy(document)


# ---------------------------------------------------------------------------------------------
# Names


def test_discovery_lists_short_name_category_and_status(kube_api: Any) -> None:
    resources = client.CustomObjectsApi(kube_api).get_api_resources(GROUP, VERSION).resources
    by_name = {r.name: r for r in resources}

    policies = by_name[PLURAL]
    assert (policies.kind, policies.singular_name, policies.namespaced) == (
        "DeadLetterPolicy",
        "deadletterpolicy",
        True,
    )
    assert policies.short_names == ["dlp"]
    assert policies.categories == ["spark-dlq"]
    assert f"{PLURAL}/status" in by_name


def kubectl(kubeconfig: str, cache: Path, *args: str) -> str:
    result = subprocess.run(
        [str(kubernetes_bin("kubectl")), "--kubeconfig", kubeconfig, "--cache-dir", str(cache), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(
    "resource",
    [
        "dlp",
        "spark-dlq",
        "deadletterpolicy",
        "deadletterpolicies",
        "deadletterpolicies.sparkdlq.io",
    ],
)
def test_kubectl_resolves_names_and_prints_columns(
    kube_api: Any,
    kubeconfig: str,
    namespace: str,
    tmp_path: Path,
    resource: str,
) -> None:
    create(kube_api, minimal(namespace))

    out = kubectl(kubeconfig, tmp_path, "get", resource, "-n", namespace)

    header, row = out.splitlines()
    assert header.split() == ["NAME", "TOPIC", "SUBSCRIPTION", "READY", "PHASE", "RESTARTS", "AGE"]
    # The category spans policies and redrives: kubectl names each row by its kind then.
    name = "deadletterpolicy.sparkdlq.io/orders-billing" if resource == "spark-dlq" else "orders-billing"
    assert row.split()[:3] == [name, "orders", "billing"]


def test_printer_columns_show_ready_phase_and_restarts(
    kube_api: Any,
    kubeconfig: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    create(kube_api, minimal(namespace))
    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "orders-billing",
        {
            "status": {
                "phase": "Restarting",
                "restartCount": 2,
                "conditions": [{"type": "Ready", "status": "False", "reason": "JobRestarting"}],
            }
        },
    )

    out = kubectl(kubeconfig, tmp_path, "get", "dlp", "orders-billing", "-n", namespace)

    assert out.splitlines()[1].split()[:6] == [
        "orders-billing",
        "orders",
        "billing",
        "False",
        "Restarting",
        "2",
    ]


def test_wide_printer_columns_show_what_ordering_holds(
    kube_api: Any,
    kubeconfig: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    create(kube_api, minimal(namespace))
    client.CustomObjectsApi(kube_api).patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "orders-billing",
        {
            "status": {
                "phase": "Running",
                "restartCount": 1,
                "ordering": {"heldMessages": 12, "blockedKeys": 2},
            }
        },
    )

    out = kubectl(kubeconfig, tmp_path, "get", "dlp", "orders-billing", "-n", namespace, "-o", "wide")

    header, row = out.splitlines()
    assert header.split()[5:8] == ["RESTARTS", "HELD", "BLOCKED"]
    assert row.split()[3:7] == ["Running", "1", "12", "2"]


# ---------------------------------------------------------------------------------------------
# Status subresource


STATUS = {
    "observedGeneration": 1,
    "phase": "Running",
    "conditions": [
        {
            "type": "Ready",
            "status": "True",
            "reason": "JobRunning",
            "message": "running",
            "lastTransitionTime": "2026-11-22T01:00:00Z",
            "observedGeneration": 1,
        },
        {"type": "TopicsReady", "status": "True"},
        {"type": "JobRunning", "status": "True"},
    ],
    "retryTopic": "orders-billing-RETRY",
    "deadLetterTopic": "orders-billing-DLQ",
    "sparkApplication": "orders-billing",
    "configHash": "9f2c0d",
    "restartCount": 1,
    "lastRestartTime": "2026-11-22T01:00:00Z",
    "ordering": {"heldMessages": 12, "blockedKeys": 2, "blockedKeySample": ["order-7", "order-9"]},
}


def test_status_patch_is_kept_and_leaves_spec_alone(kube_api: Any, namespace: str) -> None:
    objects = client.CustomObjectsApi(kube_api)
    created = create(kube_api, minimal(namespace))

    objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "orders-billing", {"spec": {"suspend": True}, "status": STATUS}
    )

    stored = read(kube_api, namespace, "orders-billing")
    assert stored["status"] == STATUS
    assert stored["spec"] == created["spec"]
    assert stored["metadata"]["generation"] == 1


def test_spec_update_leaves_status_alone(kube_api: Any, namespace: str) -> None:
    objects = client.CustomObjectsApi(kube_api)
    create(kube_api, minimal(namespace))
    objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "orders-billing", {"status": STATUS}
    )

    current = read(kube_api, namespace, "orders-billing")
    changed = {**current, "spec": {**current["spec"], "suspend": True}, "status": {"phase": "Failed"}}
    objects.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "orders-billing", changed)
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "orders-billing",
        {"spec": {"retry": {"maxRedeliverCount": 3}}, "status": {"restartCount": 7}},
    )

    stored = read(kube_api, namespace, "orders-billing")
    assert stored["status"] == STATUS
    assert (stored["spec"]["suspend"], stored["spec"]["retry"]["maxRedeliverCount"]) == (True, 3)
    assert stored["metadata"]["generation"] == 3


# The status subresource names fields relative to status (its validator starts there).
@pytest.mark.parametrize(
    ("status", "field", "message"),
    [
        pytest.param(
            {"phase": "Sleeping"},
            "phase",
            'Unsupported value: "Sleeping": supported values: "Pending", "Provisioning", '
            '"Running", "Restarting", "Suspended", "Failed", "Invalid"',
            id="unknown-phase",
        ),
        pytest.param(
            {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}]},
            "status.conditions[1]",
            'Duplicate value: map[string]interface {}{"type":"Ready"}',
            id="duplicate-condition-type",
        ),
        pytest.param(
            {"conditions": [{"type": "Ready", "status": "Yes"}]},
            "conditions[0].status",
            'Unsupported value: "Yes": supported values: "True", "False", "Unknown"',
            id="condition-status-not-true-false-unknown",
        ),
        pytest.param(
            {"conditions": [{"type": "Ready"}]},
            "conditions[0].status",
            "Required value",
            id="condition-without-status",
        ),
        pytest.param(
            {"restartCount": -1},
            "restartCount",
            "Invalid value: -1: restartCount in body should be greater than or equal to 0",
            id="negative-restart-count",
        ),
    ],
)
def test_invalid_status_is_refused(
    kube_api: Any,
    namespace: str,
    status: dict[str, Any],
    field: str,
    message: str,
) -> None:
    create(kube_api, minimal(namespace))

    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(kube_api).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, "orders-billing", {"status": status}
        )

    assert refused.value.status == 422
    causes, _ = refusal(refused.value)
    assert (field, message) in causes


def test_unknown_status_fields_are_pruned(kube_api: Any, namespace: str) -> None:
    """The status schema is closed: whatever the operator writes must be declared in it."""
    create(kube_api, minimal(namespace))

    patched = client.CustomObjectsApi(kube_api).patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        "orders-billing",
        {"status": {"phase": "Running", "kopf": {"progress": {}}}},
    )

    assert patched["status"] == {"phase": "Running"}


# ---------------------------------------------------------------------------------------------
# The DeadLetterPolicyClass CRD


def create_class(api: Any, document: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = client.CustomObjectsApi(api).create_cluster_custom_object(
        GROUP, VERSION, "deadletterpolicyclasses", document, field_validation="Strict"
    )
    return created


@pytest.fixture
def class_name(kube_api: Any) -> Any:
    """A unique class name; the class (cluster-scoped) is deleted after the test."""
    from tests.conftest import unique

    name = unique("class")
    yield name
    try:
        client.CustomObjectsApi(kube_api).delete_cluster_custom_object(
            GROUP, VERSION, "deadletterpolicyclasses", name
        )
    except ApiException as error:
        if error.status != 404:
            raise


def test_a_class_with_every_field_is_stored_as_written(
    kube_api: Any, kubeconfig: str, tmp_path: Path, class_name: str
) -> None:
    from spark_dlq_operator.policy_class import parse_class
    from tests.unit.test_class_crd_schema import full_class

    document = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeadLetterPolicyClass", **full_class()}
    document["metadata"] = {"name": class_name, "annotations": {"sparkdlq.io/is-default-class": "true"}}

    stored = create_class(kube_api, document)

    assert stored["spec"] == document["spec"]
    parse_class(stored)
    header, row = kubectl(kubeconfig, tmp_path, "get", "dlpc", class_name).splitlines()
    assert header.split() == ["NAME", "DEFAULT", "BROKERS", "AGE"]
    assert row.split()[:3] == [class_name, "true", "kafka:9092"]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        pytest.param(
            {
                "brokers": [
                    {
                        "type": "pulsar",
                        "serviceUrl": "pulsar://p:6650",
                        "operatorSecretRef": {"name": "op", "key": "client.conf"},
                    }
                ]
            },
            "spec.brokers[0].operatorSecretRef.key",
            "Forbidden: is for type kafka: on Pulsar the Secret's keys are the client's (token, ca.crt, "
            "tls.crt, tls.key, oauth2.*)",
            id="pulsar-broker-with-a-kafka-secret-key",
        ),
        pytest.param(
            {
                "brokers": [
                    {
                        "type": "pulsar",
                        "serviceUrl": "pulsar://p:6650",
                        "strimzi": {"namespace": "kafka", "cluster": "my-cluster"},
                    }
                ]
            },
            "spec.brokers[0].strimzi",
            "Forbidden: is for type kafka: Strimzi runs Kafka clusters",
            id="pulsar-broker-with-a-strimzi-cluster",
        ),
        pytest.param(
            {"sparkConf": {"fixed": {"spark.kubernetes.authenticate.driver.serviceAccountName": "admin"}}},
            "spec.sparkConf.fixed",
            "must not set the keys the operator sets itself (master, deploy mode, namespace, service "
            "account, image): use spec.pods and spec.images",
            id="fixed-service-account",
        ),
        pytest.param(
            {"images": {"allowed": ["registry/*/spark"]}},
            "spec.images.allowed[0]",
            "may hold * only at the end (a prefix)",
            id="star-inside-an-image",
        ),
    ],
)
def test_a_bad_class_is_refused_naming_the_field(
    kube_api: Any, class_name: str, spec: dict[str, Any], field: str, message: str
) -> None:
    document = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeadLetterPolicyClass",
        "metadata": {"name": class_name},
    }
    with pytest.raises(ApiException) as refused:
        create_class(kube_api, {**document, "spec": spec})
    causes, _ = refusal(refused.value)
    assert any(f == field and message in m for f, m in causes), causes
