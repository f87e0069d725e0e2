"""``dlq-operator run``: flags, their environment variables, and what is refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.model.policy import PROVISIONERS
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_operator.cli import DEFAULTS, config_from_args
from spark_dlq_operator.config import SPARK_VERSION


def test_defaults_with_one_namespace() -> None:
    config = config_from_args(["run", "--namespace", "payments"], environ={})
    assert config.namespaces == ("payments",)
    assert not config.all_namespaces
    assert config.spark_version == SPARK_VERSION
    assert config.peering is None
    assert config.provisioner == "auto"
    assert config.resync_interval == 60.0
    assert config.finalizer_timeout == 300.0


def test_flags_fill_the_config() -> None:
    config = config_from_args(
        [
            "run",
            "-n",
            "a",
            "-n",
            "b",
            "--spark-image",
            "img:1",
            "--checkpoint-base",
            "s3a://cp",
            "--spark-service-account",
            "sa",
            "--provisioner",
            "strimzi",
            "--liveness",
            "http://0.0.0.0:8080/healthz",
            "--metrics-port",
            "0",
            "--peering",
            "spark-dlq",
            "--priority",
            "10",
            "--peering-lifetime",
            "20",
            "--resync-interval",
            "5",
            "--finalizer-timeout",
            "30",
        ],
        environ={},
    )
    assert config.namespaces == ("a", "b")
    assert (config.spark_image, config.checkpoint_base, config.spark_service_account) == (
        "img:1",
        "s3a://cp",
        "sa",
    )
    assert (config.provisioner, config.liveness, config.metrics_port) == (
        "strimzi",
        "http://0.0.0.0:8080/healthz",
        0,
    )
    assert (config.peering, config.priority, config.peering_lifetime) == ("spark-dlq", 10, 20)
    assert (config.resync_interval, config.finalizer_timeout) == (5.0, 30.0)


def test_environment_fills_what_flags_do_not_say() -> None:
    environ = {
        "SPARK_DLQ_NAMESPACES": "a, b",
        "SPARK_DLQ_SPARK_IMAGE": "env:1",
        "SPARK_DLQ_METRICS_PORT": "9999",
        "SPARK_DLQ_PEERING": "spark-dlq",
    }
    config = config_from_args(["run", "--spark-image", "flag:1"], environ=environ)
    assert config.namespaces == ("a", "b")
    assert config.spark_image == "flag:1"
    assert config.metrics_port == 9999
    assert config.peering == "spark-dlq"


def test_spark_network_policies_are_on_unless_turned_off() -> None:
    assert config_from_args(["run", "-A"], environ={}).spark_network_policy
    assert not config_from_args(["run", "-A", "--no-spark-network-policy"], environ={}).spark_network_policy
    environ = {"SPARK_DLQ_SPARK_NETWORK_POLICY": "false"}
    assert not config_from_args(["run", "-A"], environ=environ).spark_network_policy
    assert config_from_args(
        ["run", "-A"], environ={"SPARK_DLQ_SPARK_NETWORK_POLICY": "true"}
    ).spark_network_policy


def test_standalone_overrides_a_peering_from_the_environment() -> None:
    config = config_from_args(["run", "-A", "--standalone"], environ={"SPARK_DLQ_PEERING": "spark-dlq"})
    assert config.all_namespaces
    assert config.peering is None


def test_peering_lifetime_defaults_to_15_and_refuses_less_than_10(capsys: pytest.CaptureFixture[str]) -> None:
    assert config_from_args(["run", "-A"], environ={}).peering_lifetime == 15
    assert (
        config_from_args(["run", "-A"], environ={"SPARK_DLQ_PEERING_LIFETIME": "30"}).peering_lifetime == 30
    )
    with pytest.raises(SystemExit):
        config_from_args(["run", "-A", "--peering-lifetime", "5"], environ={})
    assert "'5' is not a valid number of seconds, at least 10" in capsys.readouterr().err


def test_kafka_config_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "kafka.properties"
    path.write_text("# the operator's own credentials\nsecurity.protocol=SASL_SSL\nsasl.mechanism = PLAIN\n")
    config = config_from_args(
        ["run", "-A", "--kafka-config", str(path), "--kafka-config-brokers", "kafka:9092,kafka-2:9092"],
        environ={"SPARK_DLQ_KAFKA_CONFIG_BROKERS": "ignored:9092"},
    )
    assert config.kafka_config == (("security.protocol", "SASL_SSL"), ("sasl.mechanism", "PLAIN"))
    assert config.kafka_config_brokers == ("kafka:9092,kafka-2:9092",)
    from_env = config_from_args(
        ["run", "-A"],
        environ={
            "SPARK_DLQ_KAFKA_CONFIG_BROKERS": "a:9092; b:9092,c:9092",
            "SPARK_DLQ_KAFKA_CONFIG": str(path),
        },
    )
    assert from_env.kafka_config_brokers == ("a:9092", "b:9092,c:9092")


def test_kafka_config_names_the_brokers_it_is_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kafka.properties"
    path.write_text("security.protocol=SASL_SSL\n")
    with pytest.raises(SystemExit):
        config_from_args(["run", "-A", "--kafka-config", str(path)], environ={})
    assert "--kafka-config: name the brokers these credentials are for with --kafka-config-brokers" in (
        capsys.readouterr().err
    )


def test_the_operator_namespace() -> None:
    assert config_from_args(["run", "-A"], environ={}).operator_namespace is None
    given = config_from_args(["run", "-A"], environ={"SPARK_DLQ_OPERATOR_NAMESPACE": "spark-dlq"})
    assert given.operator_namespace == "spark-dlq"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["run"], id="no-namespace"),
        pytest.param(["run", "-A", "-n", "a"], id="both"),
        pytest.param(["run", "-A", "--provisioner", "kafka"], id="unknown-provisioner"),
    ],
)
def test_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        config_from_args(argv, environ={})


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        (
            "SPARK_DLQ_PROVISIONER",
            "kafka",
            "argument --provisioner: 'kafka' is not a valid choice: auto, admin, strimzi",
        ),
        ("SPARK_DLQ_RESYNC_INTERVAL", "1m", "argument --resync-interval: '1m' is not a valid float"),
        ("SPARK_DLQ_METRICS_PORT", "http", "argument --metrics-port: 'http' is not a valid int"),
    ],
)
def test_a_bad_environment_value_is_refused_by_name(
    variable: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse checks ``choices`` only for flags; a default from the environment is checked too."""
    with pytest.raises(SystemExit) as stopped:
        config_from_args(["run", "-A"], environ={variable: value})
    assert stopped.value.code == 2
    assert f"{said} (from the flag or ${variable})" in capsys.readouterr().err


def test_every_provisioner_of_the_model_is_accepted() -> None:
    for provisioner in PROVISIONERS:
        assert (
            config_from_args(["run", "-A", "--provisioner", provisioner], environ={}).provisioner
            == provisioner
        )


def _chart_value(values: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        values = values[key]
    return values


#: The chart's values that configure the operator, by the OperatorConfig field they set.
_CHART_VALUES = {
    "spark_version": "spark.version",
    "checkpoint_base": "spark.checkpointBase",
    "metrics_port": "operator.metrics.port",
    "resync_interval": "operator.resyncInterval",
    "finalizer_timeout": "operator.finalizerTimeout",
    "stall_timeout": "operator.supervisor.stallTimeout",
    "pending_timeout": "operator.supervisor.pendingTimeout",
    "peering_lifetime": "operator.peering.lifetime",
    "spark_network_policy": "spark.networkPolicy",
}


def test_the_chart_s_values_are_the_operator_s_defaults() -> None:
    chart = REPO_ROOT / "charts" / "spark-dlq-operator"
    values = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8"))
    app_version = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))["appVersion"]
    defaults = config_from_args(["run", "-A"], environ={})
    assert defaults == dataclasses.replace(DEFAULTS, all_namespaces=True)
    assert {field: _chart_value(values, path) for field, path in _CHART_VALUES.items()} == {
        field: getattr(DEFAULTS, field) for field in _CHART_VALUES
    }
    assert f"{values['spark']['image']['repository']}:{app_version}" == DEFAULTS.spark_image
