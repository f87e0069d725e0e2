"""The DeadLetterPolicyClass CRD, read as data: cluster-scoped, every node described and bounded,
in step with what the operator reads (``policy_class.parse_class``) and with the DeadLetterPolicy
CRD where the two describe the same thing (the defaults a class may give, the pods' fit)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from dlq_engine.model.policy import BrokerType
from spark_dlq_operator.policy_class import DEFAULTABLE, FORBIDDEN_SPARK_CONF, PodField, parse_class
from tests.policy_builder import FULL_AFFINITY
from tests.unit.test_crd_schema import CRD_PATH, node, walk

CLASS_CRD_PATH = Path(__file__).resolve().parents[2] / "crds" / "sparkdlq.io_deadletterpolicyclasses.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CLASS_CRD_PATH.read_text())
    return document


@pytest.fixture(scope="module")
def root(crd: dict[str, Any]) -> dict[str, Any]:
    [version] = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


@pytest.fixture(scope="module")
def spec_schema(root: dict[str, Any]) -> dict[str, Any]:
    return dict(root["properties"]["spec"])


@pytest.fixture(scope="module")
def policy_spec() -> dict[str, Any]:
    policy = yaml.safe_load(CRD_PATH.read_text())
    return dict(policy["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"])


def test_names_and_scope(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "deadletterpolicyclasses.sparkdlq.io"
    assert (spec["group"], spec["scope"]) == ("sparkdlq.io", "Cluster")
    assert spec["names"] == {
        "kind": "DeadLetterPolicyClass",
        "listKind": "DeadLetterPolicyClassList",
        "plural": "deadletterpolicyclasses",
        "singular": "deadletterpolicyclass",
        "shortNames": ["dlpc"],
    }  # not in the spark-dlq category: `kubectl get spark-dlq` is for policy authors, in a namespace
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_every_node_is_typed_described_and_bounded(root: dict[str, Any]) -> None:
    for path, n in walk(root):
        assert "type" in n or n.get("x-kubernetes-int-or-string"), path
        assert "x-kubernetes-preserve-unknown-fields" not in n, path
        if path.startswith("spec") and "[]" not in path and "{}" not in path:
            assert n.get("description", "").strip(), f"{path} has no description"
        kind = n.get("type")
        if path.startswith("spec"):
            assert not (kind == "string" and "maxLength" not in n and "enum" not in n), path
            assert not (kind == "array" and "maxItems" not in n), path
            assert not (kind == "object" and "additionalProperties" in n and "maxProperties" not in n), path
        if kind == "object" and path != "metadata":
            assert ("properties" in n) != ("additionalProperties" in n), path
        for rule in n.get("x-kubernetes-validations", []):
            assert rule.get("message", "").strip(), (path, rule["rule"])


def test_defaults_are_the_policy_fields_a_class_may_default(
    spec_schema: dict[str, Any], policy_spec: dict[str, Any]
) -> None:
    """The same schema, rules included, as the DeadLetterPolicy CRD's for each field."""
    defaults = node(spec_schema, "defaults")
    leaves = {
        path
        for path, n in walk(defaults)
        if path and "[]" not in path and "{}" not in path and ("properties" not in n or path in DEFAULTABLE)
    }
    assert leaves == set(DEFAULTABLE)
    for path in DEFAULTABLE:
        ours, theirs = copy.deepcopy(node(defaults, path)), copy.deepcopy(node(policy_spec, path))
        ours.pop("description"), theirs.pop("description")
        assert ours == theirs, path
    assert (
        node(defaults, "retry.backoff")["x-kubernetes-validations"]
        == (node(policy_spec, "retry.backoff")["x-kubernetes-validations"])
    )


def without(schema: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    """``schema`` with the properties named ``keys`` removed, at every depth."""
    result = {k: v for k, v in schema.items() if k != "properties"}
    if "properties" in schema:
        result["properties"] = {k: without(v, keys) for k, v in schema["properties"].items() if k not in keys}
    if "items" in schema:
        result["items"] = without(schema["items"], keys)
    return result


@pytest.mark.parametrize("field", ["nodeSelector", "tolerations", "affinity", "priorityClassName", "labels"])
def test_the_pods_fit_has_the_policy_side_schema(
    spec_schema: dict[str, Any], policy_spec: dict[str, Any], field: str
) -> None:
    """What a class sets and what a policy may set look alike, except that a policy's affinity
    names no other namespace."""
    ours, theirs = node(spec_schema, f"pods.{field}"), node(policy_spec, f"spark.pod.{field}")
    strip = {"namespaces", "namespaceSelector"}

    def undescribed(schema: dict[str, Any]) -> Any:
        if isinstance(schema, dict):
            return {k: undescribed(v) for k, v in schema.items() if k != "description"}
        return schema

    assert undescribed(without(ours, strip)) == undescribed(theirs)
    assert node(policy_spec, "spark.pod")["properties"].keys() == set(get_args(PodField))


def test_enums_are_the_operators(spec_schema: dict[str, Any]) -> None:
    assert node(spec_schema, "brokers")["items"]["properties"]["type"]["enum"] == list(get_args(BrokerType))
    assert node(spec_schema, "pods.policyMayOverride")["items"]["enum"] == list(get_args(PodField))


def test_fixed_conf_may_not_set_the_operator_s_keys(spec_schema: dict[str, Any]) -> None:
    [rule] = node(spec_schema, "sparkConf.fixed")["x-kubernetes-validations"]
    for group in FORBIDDEN_SPARK_CONF:
        for key in group.keys:
            assert (f"'{key.rstrip('*')}'" in rule["rule"]) is (not group.platform_may_set), key


def full_class() -> dict[str, Any]:
    """A class naming every field of the CRD."""
    selector = {
        "matchLabels": {"team": "billing"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}],
    }
    return {
        "metadata": {"name": "gold"},
        "spec": {
            "namespaceSelector": selector,
            "defaults": {
                "retry": {
                    "maxRedeliverCount": 3,
                    "backoff": {
                        "type": "exponential",
                        "delay": "1s",
                        "multiplier": 2,
                        "maxDelay": "1m",
                        "jitter": 0.1,
                        "levels": ["1s"],
                    },
                    "nonRetryableErrors": ["ValueError"],
                },
                "processor": {"timeout": "30s"},
                "deadLetter": {"includeStackTrace": False, "headerProfiles": ["spark-dlq"]},
                "topics": {
                    "retryConfig": {},
                    "deadLetterConfig": {},
                    "partitions": 3,
                    "replicationFactor": 3,
                },
                "spark": {
                    "trigger": "5s",
                    "driver": {"cores": 1, "memory": "1g"},
                    "executor": {"instances": 1, "cores": 1, "memory": "1g"},
                },
            },
            "brokers": [
                {
                    "type": "kafka",
                    "bootstrapServers": "kafka:9092",
                    "operatorSecretRef": {"name": "op", "key": "client.properties"},
                    "engineSecretName": "kafka-client",
                    "strimzi": {"namespace": "kafka", "cluster": "my-cluster"},
                },
                {"type": "pulsar", "serviceUrl": "pulsar://p:6650", "adminUrl": "http://p:8080"},
            ],
            "images": {"default": "spark-dlq:1", "allowed": ["spark-dlq:*"]},
            "sparkConf": {"allowed": ["spark.sql.*"], "fixed": {"spark.driver.extraJavaOptions": "-Dx=1"}},
            "limits": {
                "maxRedeliverCount": 10,
                "minTrigger": "1s",
                "driver": {"maxCores": 2, "maxMemory": "2g"},
                "executor": {"maxInstances": 2, "maxCores": 2, "maxMemory": "2g"},
            },
            "storage": {
                "checkpointBase": "s3a://cp",
                "checkpointClaim": "cp",
                "deadLetterTableBase": "s3a://t",
            },
            "pods": {
                "serviceAccountName": "spark",
                "serviceAccountAnnotations": {"iam": "role"},
                "executorServiceAccountToken": False,
                "imagePullSecrets": [{"name": "registry"}],
                "nodeSelector": {"pool": "spark"},
                "tolerations": [{"key": "spark", "operator": "Exists"}],
                "affinity": FULL_AFFINITY,
                "priorityClassName": "batch",
                "labels": {"a": "b"},
                "annotations": {"a": "b"},
                "policyMayOverride": ["labels"],
            },
        },
    }


def paths_of(value: Any, schema: dict[str, Any], prefix: str = "") -> set[str]:
    found: set[str] = set()
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        found.add(path)
        child = schema.get("properties", {}).get(key, {})
        if isinstance(item, dict) and "properties" in child:
            found |= paths_of(item, child, path)
    return found


def test_the_operator_reads_every_field_of_the_crd(spec_schema: dict[str, Any]) -> None:
    document = full_class()
    parse_class(document)
    in_schema = {
        path
        for path, _ in walk(spec_schema)
        if path and "[]" not in path and "{}" not in path and not path.startswith("defaults.")
    }
    named = {p for p in paths_of(document["spec"], spec_schema) if not p.startswith("defaults.")}
    assert in_schema == named
