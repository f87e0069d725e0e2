"""The DeadLetterPolicy CRD, read as data: structural, bounded, and in step with the model.

The API server checks the CRD when it is installed; these tests check what it does not: that
the schema names exactly the fields the shared policy model reads, that its defaults are the
model's defaults, and that its enums and patterns accept what the model accepts.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from dlq_engine.model import PolicyError, parse_duration_ms, parse_policy, to_spec
from dlq_engine.model.heartbeat import ORDERING_SAMPLE, OrderingReport
from dlq_engine.model.policy import (
    DEFAULT_SPEC,
    KAFKA_TOPIC_MAX_LENGTH,
    MAX_TABLE_PATH_LENGTH,
    PULSAR_ADMIN_URL_PATTERN,
    PULSAR_SERVICE_URL_PATTERN,
    PULSAR_TOPIC_PATTERN,
    BackoffType,
    Broker,
    BrokerType,
    DeadLetterStrategy,
    DeadLetterTableFormat,
    HeaderProfile,
    OnDeadLetter,
    OnOverflow,
    OrderingMode,
    ProcessorMode,
    Provisioner,
    SecretRef,
    StartingOffsets,
)
from dlq_engine.model.policy_spec import broker_spec
from spark_dlq_operator.policy_class import (
    DEFAULTABLE,
    NEVER_CHECKPOINT,
    NEVER_TABLE_PATH,
    forbidden_conf_rules,
)
from spark_dlq_operator.topic_ownership import MAX_OWNED, TOPIC_KINDS, OwnedTopic
from tests.policy_builder import every_field_document

CRD_PATH = Path(__file__).resolve().parents[2] / "crds" / "sparkdlq.io_deadletterpolicies.yaml"
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+$|^0$"
TOPIC_FIELDS = ("source.topic", "output.topic", "retry.topic", "deadLetter.topic")


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return document


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    [only] = crd["spec"]["versions"]
    return dict(only)


@pytest.fixture(scope="module")
def root(version: dict[str, Any]) -> dict[str, Any]:
    return dict(version["schema"]["openAPIV3Schema"])


@pytest.fixture(scope="module")
def spec_schema(root: dict[str, Any]) -> dict[str, Any]:
    return dict(root["properties"]["spec"])


def node(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    """The schema of the field at ``dotted`` (``retry.backoff.delay``) below ``schema``."""
    for key in dotted.split("."):
        schema = schema["properties"][key]
    return schema


def walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path; ``[]`` for list items, ``{}`` for map values."""
    yield path, schema
    for key, child in schema.get("properties", {}).items():
        yield from walk(child, f"{path}.{key}" if path else key)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")
    if "items" in schema:
        yield from walk(schema["items"], f"{path}[]")


def minimal() -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterPolicy",
        "metadata": {"name": "orders-billing", "namespace": "payments"},
        "spec": {
            "source": {"topic": "orders", "subscription": "billing"},
            "broker": {"bootstrapServers": "kafka.kafka:9092"},
            "processor": {"entrypoint": "billing.handlers:process"},
        },
    }


def full_pulsar() -> dict[str, Any]:
    """The fields only a Pulsar policy has (the Kafka-only ones are refused with it)."""
    document = minimal()
    document["spec"]["broker"] = {
        "type": "pulsar",
        "serviceUrl": "pulsar://pulsar.pulsar:6650",
        "adminUrl": "http://pulsar.pulsar:8080",
    }
    return document


def full_breaker() -> dict[str, Any]:
    """The breaker's fields (refused with ``source.ordering: key``, which ``every_field_document``
    sets)."""
    document = minimal()
    document["spec"]["retry"] = {"breaker": {"window": 20, "threshold": 0.8, "openTime": "10s", "probes": 3}}
    return document


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: a missing field with a ``default`` gets
    it, then defaults apply again inside (so ``default: {}`` fills a whole section)."""
    if isinstance(value, dict) and "properties" in schema:
        for key, child in schema["properties"].items():
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                value[key] = apply_defaults(child, value[key])
    return value


# ---------------------------------------------------------------------------------------------
# Names and shape


def test_names_match_the_contract(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "deadletterpolicies.sparkdlq.io"
    assert (spec["group"], spec["scope"]) == ("sparkdlq.io", "Namespaced")
    assert spec["names"] == {
        "kind": "DeadLetterPolicy",
        "listKind": "DeadLetterPolicyList",
        "plural": "deadletterpolicies",
        "singular": "deadletterpolicy",
        "shortNames": ["dlp"],
        "categories": ["spark-dlq"],
    }


def test_one_version_served_and_stored_with_status_subresource(version: dict[str, Any]) -> None:
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_printer_columns(version: dict[str, Any]) -> None:
    columns = [
        (c["name"], c["type"], c["jsonPath"], c.get("priority", 0))
        for c in version["additionalPrinterColumns"]
    ]
    assert columns == [
        ("Topic", "string", ".spec.source.topic", 0),
        ("Subscription", "string", ".spec.source.subscription", 0),
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', 0),
        ("Phase", "string", ".status.phase", 0),
        ("Restarts", "integer", ".status.restartCount", 0),
        # -o wide only: most policies do not order by key.
        ("Held", "integer", ".status.ordering.heldMessages", 1),
        ("Blocked", "integer", ".status.ordering.blockedKeys", 1),
        ("Age", "date", ".metadata.creationTimestamp", 0),
    ]


def test_every_node_has_a_type(root: dict[str, Any]) -> None:
    untyped = [path for path, n in walk(root) if "type" not in n and not n.get("x-kubernetes-int-or-string")]
    assert untyped == []


def test_no_node_preserves_unknown_fields(root: dict[str, Any]) -> None:
    assert [path for path, n in walk(root) if "x-kubernetes-preserve-unknown-fields" in n] == []


def test_objects_declare_their_fields_or_values(root: dict[str, Any]) -> None:
    for path, n in walk(root):
        if n.get("type") == "object" and path != "metadata":
            assert ("properties" in n) != ("additionalProperties" in n), path
        if n.get("type") == "array":
            assert "items" in n, path


def test_every_spec_string_list_and_map_is_bounded(spec_schema: dict[str, Any]) -> None:
    """CEL rules are priced by the largest value they may see: nothing in the spec is unbounded."""
    unbounded = []
    for path, n in walk(spec_schema, "spec"):
        kind = n.get("type")
        if (
            (kind == "string" and "maxLength" not in n and "enum" not in n)
            or (kind == "array" and "maxItems" not in n)
            or (kind == "object" and "additionalProperties" in n and "maxProperties" not in n)
        ):
            unbounded.append(path)
    assert unbounded == []


def test_every_rule_has_a_message_and_a_real_field_path(root: dict[str, Any]) -> None:
    for path, n in walk(root):
        for rule in n.get("x-kubernetes-validations", []):
            assert rule["rule"].strip(), path
            assert rule.get("message", "").strip(), (path, rule["rule"])
            if "fieldPath" in rule:
                assert node(n, rule["fieldPath"].lstrip(".")), (path, rule["fieldPath"])


def test_status_schema(root: dict[str, Any]) -> None:
    status = root["properties"]["status"]
    assert set(status["properties"]) == {
        "observedGeneration",
        "phase",
        "conditions",
        "retryTopic",
        "deadLetterTopic",
        "sparkApplication",
        "configHash",
        "restartCount",
        "lastRestartTime",
        "lastRestartReason",
        "ordering",
        "ownedTopics",
        "broker",
    }
    # status.broker holds spec.broker as the operator writes it, for either broker type.
    written = {
        key
        for broker in (
            Broker(bootstrap_servers="k:9092", secret_ref=SecretRef("s")),
            Broker(type="pulsar", service_url="pulsar://p:6650", admin_url="http://p:8080"),
        )
        for key in broker_spec(broker)
    }
    assert set(status["properties"]["broker"]["properties"]) == written
    # The keys of status.ownedTopics' entries and its kinds (topic_ownership.OwnedTopic).
    owned = status["properties"]["ownedTopics"]
    assert (
        set(owned["items"]["properties"])
        == set(OwnedTopic.__annotations__)
        == set(owned["items"]["required"])
    )
    assert tuple(owned["items"]["properties"]["kind"]["enum"]) == TOPIC_KINDS
    assert owned["maxItems"] == MAX_OWNED
    assert owned["x-kubernetes-list-map-keys"] == ["broker", "name"]
    # The keys of what the operator copies from the heartbeat (OrderingReport).
    ordering = status["properties"]["ordering"]
    assert set(ordering["properties"]) == set(OrderingReport.__annotations__)
    assert ordering["properties"]["blockedKeySample"]["maxItems"] == ORDERING_SAMPLE
    assert status["properties"]["phase"]["enum"] == [
        "Pending",
        "Provisioning",
        "Running",
        "Restarting",
        "Suspended",
        "Failed",
        "Invalid",
    ]
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert set(conditions["items"]["properties"]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    assert "type" in conditions["items"]["required"]


# ---------------------------------------------------------------------------------------------
# In step with the model


def model_paths(value: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Field paths of a ``to_spec`` mapping, entering a mapping only where the schema declares
    its fields (maps of user keys, such as headers, are one field)."""
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        yield path
        child = schema.get("properties", {}).get(key, {})
        if isinstance(item, dict) and "properties" in child:
            yield from model_paths(item, child, path)


def test_schema_fields_are_exactly_the_model_fields(spec_schema: dict[str, Any]) -> None:
    from_model = {
        path
        for document in (every_field_document(), full_pulsar(), full_breaker())
        for path in model_paths(to_spec(parse_policy(document)), spec_schema)
    }
    in_schema = {path for path, n in walk(spec_schema) if path and "[]" not in path and "{}" not in path}

    assert sorted(from_model - in_schema) == [], "the model has fields the CRD would prune"
    assert sorted(in_schema - from_model) == [], "the CRD has fields the model refuses"


@pytest.mark.parametrize(
    "document", [every_field_document(), full_pulsar(), full_breaker()], ids=["kafka", "pulsar", "breaker"]
)
def test_schema_types_match_the_model_values(spec_schema: dict[str, Any], document: dict[str, Any]) -> None:
    types = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}
    spec = to_spec(parse_policy(document))
    for path in model_paths(spec, spec_schema):
        value: Any = spec
        for key in path.split("."):
            value = value[key]
        assert node(spec_schema, path)["type"] == types[type(value)], path


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param({}, id="minimal"),
        pytest.param(
            {
                "retry": {"backoff": {"type": "levels", "levels": ["1s"]}},
                "topics": {"strimzi": {"cluster": "c"}},
                "spark": {"executor": {"instances": 3}},
            },
            id="partly-filled-sections",
        ),
        pytest.param({"broker": full_pulsar()["spec"]["broker"]}, id="pulsar"),
    ],
)
def test_schema_defaults_are_the_model_defaults(spec_schema: dict[str, Any], patch: dict[str, Any]) -> None:
    """Except on the fields a class may default: there the CRD sets none, so that the policy's
    class can (the model's own default applies when neither does)."""
    document = minimal()
    for section, fields in patch.items():
        document["spec"][section] = copy.deepcopy(fields)

    defaulted = apply_defaults(spec_schema, copy.deepcopy(document["spec"]))

    expected = to_spec(parse_policy(document))
    # The model derives these two names; the CRD leaves them empty for it to do so.
    expected["retry"]["topic"] = expected["deadLetter"]["topic"] = ""
    # Likewise broker.type at kafka.
    expected["broker"].setdefault("type", "kafka")
    for path in DEFAULTABLE:
        *parents, last = path.split(".")
        in_expected, in_defaulted = expected, defaulted
        for key in parents:
            in_expected, in_defaulted = in_expected[key], in_defaulted.get(key, {})
        in_expected.pop(last, None)
        # What the document itself sets stays.
        if last in in_defaulted:
            written = document["spec"]
            for key in parents:
                written = written.get(key, {})
            assert last in written, path
            in_defaulted.pop(last)
    _drop_unset(expected, defaulted, DEFAULT_SPEC)
    _drop_empty(expected)
    _drop_empty(defaulted)
    assert defaulted == expected


def _drop_unset(expected: dict[str, Any], defaulted: dict[str, Any], defaults: dict[str, Any]) -> None:
    """The fields the CRD gives no default (absent means the model's default) left out of
    ``expected`` where they are at the model's default and the document leaves them out."""
    for key in list(expected):
        if key not in defaulted and expected[key] == defaults.get(key, object()):
            del expected[key]
        elif isinstance(expected[key], dict) and isinstance(defaulted.get(key), dict):
            _drop_unset(expected[key], defaulted[key], defaults.get(key, {}))


def _drop_empty(value: dict[str, Any]) -> None:
    for key in list(value):
        if isinstance(value[key], dict):
            _drop_empty(value[key])
            if not value[key] and key in ("backoff", "driver", "executor"):
                del value[key]


def test_the_fields_a_class_may_default_have_no_crd_default(spec_schema: dict[str, Any]) -> None:
    for path in DEFAULTABLE:
        assert "default" not in node(spec_schema, path), path
        assert (
            "Default: the policy's class's (spec.defaults), else " in node(spec_schema, path)["description"]
        ), path


def test_derived_topic_defaults_are_empty(spec_schema: dict[str, Any]) -> None:
    assert node(spec_schema, "retry.topic")["default"] == ""
    assert node(spec_schema, "deadLetter.topic")["default"] == ""


@pytest.mark.parametrize(
    ("path", "literal"),
    [
        pytest.param("source.startingOffsets", StartingOffsets, id="startingOffsets"),
        pytest.param("processor.mode", ProcessorMode, id="mode"),
        pytest.param("retry.backoff.type", BackoffType, id="backoff-type"),
        pytest.param("deadLetter.strategy", DeadLetterStrategy, id="strategy"),
        pytest.param("deadLetter.table.format", DeadLetterTableFormat, id="table-format"),
        pytest.param("topics.provisioner", Provisioner, id="provisioner"),
        pytest.param("source.ordering", OrderingMode, id="ordering"),
        pytest.param("ordering.onDeadLetter", OnDeadLetter, id="on-dead-letter"),
        pytest.param("ordering.onOverflow", OnOverflow, id="on-overflow"),
        pytest.param("broker.type", BrokerType, id="broker-type"),
    ],
)
def test_enums_are_the_model_choices(spec_schema: dict[str, Any], path: str, literal: Any) -> None:
    assert node(spec_schema, path)["enum"] == list(get_args(literal))


def test_header_profiles_are_the_model_profiles(spec_schema: dict[str, Any]) -> None:
    field = node(spec_schema, "deadLetter.headerProfiles")
    assert field["items"]["enum"] == list(get_args(HeaderProfile))
    assert field["maxItems"] == len(get_args(HeaderProfile))


@pytest.mark.parametrize("path", TOPIC_FIELDS)
def test_topic_fields_take_pulsar_names_and_the_spec_rules_narrow_them(
    spec_schema: dict[str, Any], path: str
) -> None:
    """The field's pattern is Pulsar's, a superset of Kafka's; the spec's rules keep Kafka
    names free of '/' and Pulsar names clear of a partition's name."""
    field = node(spec_schema, path)
    required = path == "source.topic"
    pattern = PULSAR_TOPIC_PATTERN if required else "^(" + PULSAR_TOPIC_PATTERN[1:-1] + ")?$"
    assert (field["pattern"], field["maxLength"]) == (pattern, KAFKA_TOPIC_MAX_LENGTH)
    assert [r["rule"] for r in field["x-kubernetes-validations"]] == ["!self.matches('(^|/)[.][.]?$')"]
    rules = {r["rule"] for r in spec_schema["x-kubernetes-validations"] if r.get("fieldPath") == f".{path}"}
    assert f"!has(self.broker) || self.broker.type == 'pulsar' || !self.{path}.contains('/')" in rules
    assert (
        f"!has(self.broker) || self.broker.type != 'pulsar' || !self.{path}.matches('-partition-[0-9]+$')"
        in rules
    )


def crd_accepts_topic(spec_schema: dict[str, Any], broker: str, name: str) -> bool:
    """The source topic's pattern and rules, read as the API server would apply them."""
    field = node(spec_schema, "source.topic")
    if len(name) > field["maxLength"] or not re.search(field["pattern"], name):
        return False
    if re.search(r"(^|/)[.][.]?$", name):
        return False
    if broker == "kafka":
        return "/" not in name
    return not re.search("-partition-[0-9]+$", name)


def model_refuses(document: dict[str, Any]) -> set[str]:
    """The field paths the model names when it refuses ``document``; empty when it accepts it."""
    try:
        parse_policy(document)
    except PolicyError as error:
        return {issue.path for issue in error.issues}
    return set()


def policy_for(broker: str) -> dict[str, Any]:
    return full_pulsar() if broker == "pulsar" else minimal()


@pytest.mark.parametrize("broker", ["kafka", "pulsar"])
@pytest.mark.parametrize(
    "name",
    [
        "orders",
        "or.ders_1-x",
        "payments/orders/orders",
        "persistent://payments/orders/orders",
        "persistent://orders",
        "non-persistent://payments/orders/orders",
        "payments/orders",
        "a/b/c/d",
        "orders-partition-0",
        "persistent://t/n/orders-partition-12",
        "orders-partition-x",
        "..",
        "t/n/..",
        "t/n/.",
        "or ders",
        "o" * 249,
        "o" * 250,
        "persistent://t/n/" + "o" * 233,
    ],
)
def test_topic_rules_accept_what_the_model_accepts(
    spec_schema: dict[str, Any], broker: str, name: str
) -> None:
    document = policy_for(broker)
    document["spec"]["source"]["topic"] = name
    document["spec"]["retry"] = {"topic": "retry-topic"}
    document["spec"]["deadLetter"] = {"topic": "dead-topic"}
    refused = model_refuses(document)
    assert refused <= {"spec.source.topic"}
    assert crd_accepts_topic(spec_schema, broker, name) == (not refused)


@pytest.mark.parametrize(
    ("path", "pattern", "value"),
    [
        pytest.param("broker.serviceUrl", PULSAR_SERVICE_URL_PATTERN, value, id=f"service-{value}")
        for value in [
            "pulsar://localhost:6650",
            "pulsar+ssl://pulsar.example:6651",
            "pulsar://a:6650,b:6650",
            "pulsar://a:6650/",
            "http://a:8080",
            "pulsar://",
            "pulsar://a b",
            "pulsar://a:6650/x",
        ]
    ]
    + [
        pytest.param("broker.adminUrl", PULSAR_ADMIN_URL_PATTERN, value, id=f"admin-{value}")
        for value in ["http://localhost:8080", "https://pulsar.example/admin", "pulsar://a:6650", "http://"]
    ],
)
def test_pulsar_url_patterns_are_the_models(
    spec_schema: dict[str, Any], path: str, pattern: str, value: str
) -> None:
    assert node(spec_schema, path)["pattern"] == pattern
    document = full_pulsar()
    document["spec"]["broker"][path.split(".")[1]] = value
    refused = model_refuses(document)
    assert refused <= {f"spec.{path}"}
    assert (re.search(pattern, value) is not None) == (not refused)


DURATION_FIELDS = (
    "processor.timeout",
    "retry.backoff.delay",
    "retry.backoff.maxDelay",
    "spark.trigger",
    "ordering.maxHoldTime",
)


@pytest.mark.parametrize("path", DURATION_FIELDS)
def test_duration_fields_use_the_duration_pattern(spec_schema: dict[str, Any], path: str) -> None:
    assert node(spec_schema, path)["pattern"] == DURATION_PATTERN


def test_levels_use_the_duration_pattern(spec_schema: dict[str, Any]) -> None:
    assert node(spec_schema, "retry.backoff.levels")["items"]["pattern"] == DURATION_PATTERN


def model_accepts_duration(text: str) -> bool:
    try:
        parse_duration_ms(text)
    except ValueError:
        return False
    return True


# Strings only, with no surrounding spaces: the model also takes bare numbers (seconds) and
# strips spaces, which the CRD refuses.
@pytest.mark.parametrize(
    "text",
    [
        "1s",
        "500ms",
        "1h30m",
        "1.5s",
        "0",
        "0s",
        "2d",
        "10m",
        "1m30s",
        "1d2h3m4s5ms",
        "01s",
        "",
        "1",
        "s",
        "-1s",
        "1 s",
        "1sec",
        ".5s",
        "1.s",
        "1h 30m",
        "1us",
        "P1D",
        "0.0",
    ],
)
def test_duration_pattern_accepts_what_the_model_accepts(text: str) -> None:
    assert (re.search(DURATION_PATTERN, text) is not None) == model_accepts_duration(text)


def model_accepts_field(path: str, value: object) -> bool:
    document = minimal()
    section, *rest = path.split(".")
    target = document["spec"].setdefault(section, {})
    for key in rest[:-1]:
        target = target.setdefault(key, {})
    target[rest[-1]] = value
    try:
        parse_policy(document)
    except PolicyError as error:
        elsewhere = [issue for issue in error.issues if not issue.path.startswith(f"spec.{path}")]
        if elsewhere:
            raise AssertionError(f"the document is wrong beyond {path}: {elsewhere}") from error
        return False
    return True


@pytest.mark.parametrize(
    "value",
    [
        "512m",
        "1g",
        "2G",
        "1024",
        "3t",
        "10k",
        "0",
        "0g",
        "1gb",
        "g",
        "1.5g",
        "-1g",
        "",
        " 1g",
    ],
)
@pytest.mark.parametrize("path", ["spark.driver.memory", "spark.executor.memory"])
def test_memory_pattern_accepts_what_the_model_accepts(
    spec_schema: dict[str, Any],
    path: str,
    value: str,
) -> None:
    pattern = node(spec_schema, path)["pattern"]
    assert (re.search(pattern, value) is not None) == model_accepts_field(path, value)


@pytest.mark.parametrize(
    "value",
    [
        "billing:process",
        "billing.handlers:process",
        "_a._b:_c",
        "a1.b2:c3",
        "billing",
        ":process",
        "billing:",
        "1billing:process",
        "billing-x:process",
        "a..b:c",
        "billing:pro.cess",
        "billing handlers:process",
        "a:b:c",
        " billing:process",
    ],
)
def test_entrypoint_rule_accepts_what_the_model_accepts(spec_schema: dict[str, Any], value: str) -> None:
    [rule] = node(spec_schema, "processor.entrypoint")["x-kubernetes-validations"]
    match = re.fullmatch(r"self\.matches\('(.+)'\)", rule["rule"].strip())
    assert match is not None, rule["rule"]
    assert (re.search(match[1], value) is not None) == model_accepts_field("processor.entrypoint", value)


def test_the_dead_letter_header_rule_is_case_insensitive(spec_schema: dict[str, Any]) -> None:
    [rule] = node(spec_schema, "deadLetter.headers")["x-kubernetes-validations"]
    assert rule["rule"] == "self.all(k, !k.lowerAscii().startsWith('dlq.'))"
    assert not model_accepts_field("deadLetter.headers", {"DLQ.Reason": "x"})


def test_the_table_path_is_refused_and_bounded_as_in_the_model(spec_schema: dict[str, Any]) -> None:
    """The model still reads a path (dlq-engine run -f on a laptop; the policy's class fills it in
    a cluster), the CRD refuses one in a policy."""
    table = node(spec_schema, "deadLetter.table")
    assert "required" not in table
    assert "default" not in table  # no table unless one is asked for
    [rule] = table["x-kubernetes-validations"]
    assert (rule["rule"], rule["fieldPath"], rule["message"]) == (
        "!has(self.path)",
        ".path",
        NEVER_TABLE_PATH,
    )
    path = node(spec_schema, "deadLetter.table.path")
    assert (path["minLength"], path["maxLength"]) == (1, MAX_TABLE_PATH_LENGTH)
    assert model_accepts_field("deadLetter.table", {"path": "/" * MAX_TABLE_PATH_LENGTH})
    assert not model_accepts_field("deadLetter.table", {"path": "/" * (MAX_TABLE_PATH_LENGTH + 1)})


def test_a_checkpoint_location_is_refused_in_a_policy(spec_schema: dict[str, Any]) -> None:
    [rule] = node(spec_schema, "spark.checkpointLocation")["x-kubernetes-validations"]
    assert (rule["rule"], rule["message"]) == ("self == ''", NEVER_CHECKPOINT)


def test_spark_conf_keys_no_class_can_allow_are_refused_by_the_crd(spec_schema: dict[str, Any]) -> None:
    rules = node(spec_schema, "spark.sparkConf")["x-kubernetes-validations"]
    assert rules == forbidden_conf_rules()


@pytest.mark.parametrize("value", ["/data/dl", "s3a://b/dead letters", " /data/dl", "/data/dl\t", "  "])
def test_the_table_path_rule_accepts_what_the_model_accepts(spec_schema: dict[str, Any], value: str) -> None:
    [rule] = node(spec_schema, "deadLetter.table.path")["x-kubernetes-validations"]
    assert rule["rule"] == "self.trim() == self"
    assert (value.strip() == value) == model_accepts_field("deadLetter.table", {"path": value})


@pytest.mark.parametrize("strategy", ["topic", "ignore", "stop"])
def test_the_table_needs_strategy_topic_in_the_crd_and_the_model(
    spec_schema: dict[str, Any], strategy: str
) -> None:
    [rule] = node(spec_schema, "deadLetter")["x-kubernetes-validations"]
    assert rule["rule"] == "!has(self.table) || !has(self.strategy) || self.strategy == 'topic'"
    assert rule["fieldPath"] == ".table"
    document = minimal()
    document["spec"]["deadLetter"] = {"strategy": strategy, "table": {"path": "/data/dl"}}
    if strategy == "topic":
        parse_policy(document)
        return
    with pytest.raises(PolicyError) as refused:
        parse_policy(document)
    assert [issue.path for issue in refused.value.issues] == ["spec.deadLetter.table"]
