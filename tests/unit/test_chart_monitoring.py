"""The chart's monitoring objects: off by default, each on by its value, and well-formed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.chart import CHART, HelmError, find, one, render

MONITORING_KINDS = ("ServiceMonitor", "PodMonitor", "PrometheusRule")
DASHBOARD = CHART / "files" / "dashboards" / "spark-dlq-policy.json"


def monitoring(**parts: dict[str, Any]) -> dict[str, Any]:
    return {"monitoring": parts}


def test_nothing_of_monitoring_is_rendered_by_default() -> None:
    objects = render()
    for kind in MONITORING_KINDS:
        assert not find(objects, kind)
    assert not find(objects, "Service")
    assert [
        c["metadata"]["name"] for c in find(objects, "ConfigMap") if "dashboard" in c["metadata"]["name"]
    ] == []


def test_the_operator_service_selects_the_operator_pods_metrics_port() -> None:
    objects = render(monitoring(service={"enabled": True}))
    service = one(objects, "Service")
    deployment = one(objects, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [port] = service["spec"]["ports"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    assert port["port"] == 9090


def test_the_service_monitor_scrapes_the_service() -> None:
    objects = render(
        monitoring(service={"enabled": True}, serviceMonitor={"enabled": True, "labels": {"release": "kps"}})
    )
    monitor, service = one(objects, "ServiceMonitor"), one(objects, "Service")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [service["spec"]["ports"][0]["name"]]


def test_a_service_monitor_without_the_service_is_refused() -> None:
    with pytest.raises(
        HelmError, match=r"monitoring\.serviceMonitor\.enabled needs monitoring\.service\.enabled"
    ):
        render(monitoring(serviceMonitor={"enabled": True}))


@pytest.mark.parametrize(
    ("namespaces", "selector"),
    [
        pytest.param([], {"any": True}, id="any-namespace"),
        pytest.param(["payments"], {"matchNames": ["payments"]}, id="listed-namespaces"),
    ],
)
def test_the_pod_monitor_selects_the_spark_drivers(namespaces: list[str], selector: dict[str, Any]) -> None:
    monitor = one(render(monitoring(podMonitor={"enabled": True, "namespaces": namespaces})), "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/managed-by": "spark-dlq-operator",  # naming.MANAGED_BY_LABEL on driver pods
        "spark-role": "driver",  # set by Spark on its driver pod
    }
    assert monitor["spec"]["namespaceSelector"] == selector
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"


def test_the_pod_monitor_labels_match_what_the_operator_puts_on_drivers() -> None:
    from dlq_engine.model.policy import parse_policy
    from spark_dlq_operator import naming
    from spark_dlq_operator import render as operator_render
    from spark_dlq_operator.config import OperatorConfig
    from tests.policy_builder import policy_document

    monitor = one(render(monitoring(podMonitor={"enabled": True})), "PodMonitor")
    owner = naming.Owner(name="p", namespace="ns", uid="u")
    app = operator_render.spark_application(
        parse_policy(policy_document()), config=OperatorConfig(), owner=owner
    )
    ours = {k: v for k, v in monitor["spec"]["selector"]["matchLabels"].items() if k != "spark-role"}
    assert ours.items() <= app["spec"]["driver"]["labels"].items()


def test_the_dashboard_config_map_carries_the_dashboard_and_the_sidecar_label() -> None:
    objects = render(monitoring(grafanaDashboard={"enabled": True, "annotations": {"grafana_folder": "dlq"}}))
    [config_map] = [c for c in find(objects, "ConfigMap") if c["metadata"]["name"].endswith("-dashboards")]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "dlq"}
    assert json.loads(config_map["data"][DASHBOARD.name]) == json.loads(DASHBOARD.read_text())


def test_the_dashboard_has_a_policy_variable_and_restart_and_phase_annotations() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["policy"]["multi"] is False, "one policy at a time"
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert 'policy=~"$policy"' in target["expr"], (panel["title"], target["expr"])
    names = {a["name"] for a in dashboard["annotations"]["list"]}
    assert names == {"Job restarts", "Phase changes"}


def test_a_misspelt_monitoring_value_is_refused() -> None:
    with pytest.raises(HelmError, match="enabeld"):
        render(monitoring(podMonitor={"enabeld": True}))
