"""The chart's alert rules, checked and unit-tested by the real promtool (built from the Go
module proxy by scripts/setup/prometheus.sh): every alert fires on a series that should page
and stays silent on one that should not (tests/fixtures/prometheus/alerts-test.yaml), with the
`namespace` Alertmanager routes by, and an absolute runbook_url."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_dlq_devtools.dist import stamp_chart
from spark_dlq_devtools.paths import REPO_ROOT, prometheus_bin
from tests.chart import CHART, NAMESPACE, RELEASE, helm, one, render, template

RULES_TEST = REPO_ROOT / "tests" / "fixtures" / "prometheus" / "alerts-test.yaml"
RUNBOOKS_DIR = REPO_ROOT / "docs" / "runbooks"
CAMEL_CASE = re.compile(r"^[A-Z][a-zA-Z0-9]+$")
#: The runbooks' base the promtool tests expect (a platform's value).
RUNBOOKS = "https://runbooks.example.com/spark-dlq"
LABEL = re.compile(r'(\w+)="([^"]*)"')


def rule_groups(values: dict[str, Any] | None = None) -> dict[str, Any]:
    on = {"monitoring": {"prometheusRule": {"enabled": True, "runbookBaseUrl": RUNBOOKS, **(values or {})}}}
    spec: dict[str, Any] = one(render(on), "PrometheusRule")["spec"]
    return spec


def alerts(groups: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in groups["groups"] for rule in group["rules"] if "alert" in rule]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(prometheus_bin("promtool")), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump(rule_groups(), sort_keys=False))
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    return tmp_path


def test_promtool_checks_the_rules(rules_dir: Path) -> None:
    result = promtool("check", "rules", "alerts.yaml", cwd=rules_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts(rule_groups()))} rules found" in result.stdout


def test_promtool_unit_tests_pass(rules_dir: Path) -> None:
    result = promtool("test", "rules", RULES_TEST.name, cwd=rules_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_fail_when_a_threshold_moves(tmp_path: Path) -> None:
    """The unit tests are not vacuous: with a dead-letter threshold above the test's rate, the
    expected alert no longer fires and promtool says so."""
    moved = rule_groups({"deadLetterRate": {"perSecond": 5, "for": "10m"}})
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump(moved, sort_keys=False))
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    result = promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "SparkDlqDeadLetterRateHigh" in result.stdout + result.stderr


def test_every_alert_is_tested_firing_and_silent() -> None:
    """Each alert has a case where it fires, and one where it stays silent: at another time, or
    for another policy (or operator) whose series are in the same case."""
    tests = yaml.safe_load(RULES_TEST.read_text())["tests"]
    fired: set[str] = set()
    silent: set[str] = set()
    for case in tests:
        subjects = set()
        for series in case["input_series"]:
            labels = dict(LABEL.findall(series["series"]))
            subjects.add(labels.get("policy") or labels.get("job"))
        for check in case["alert_rule_test"]:
            expected = check.get("exp_alerts") or []
            firing = {a["exp_labels"].get("policy") or a["exp_labels"].get("job") for a in expected}
            if expected:
                fired.add(check["alertname"])
            if not expected or subjects - firing:
                silent.add(check["alertname"])
    names = {a["alert"] for a in alerts(rule_groups())}
    assert names == fired, "every alert, and nothing else, has a promtool test where it fires"
    assert names == silent, "every alert has a promtool test where it stays silent"


def test_every_alert_keeps_namespace_and_policy() -> None:
    """What Alertmanager routes by: a policy's alert carries its namespace and the policy, the
    operator's the release's namespace (promtool compares the labels exactly)."""
    tests = yaml.safe_load(RULES_TEST.read_text())["tests"]
    for case in tests:
        for check in case["alert_rule_test"]:
            for alert in check.get("exp_alerts") or []:
                labels = alert["exp_labels"]
                if check["alertname"] == "SparkDlqOperatorDown":
                    assert labels["namespace"] == NAMESPACE
                else:
                    assert labels["namespace"] == labels["policy"].split("/")[0], labels


def test_alerts_follow_the_kube_prometheus_conventions() -> None:
    for alert in alerts(rule_groups()):
        name = alert["alert"]
        assert CAMEL_CASE.match(name), name
        assert alert["labels"]["severity"] in ("info", "warning", "critical"), name
        assert set(alert["annotations"]) == {"summary", "description", "runbook_url"}, name
        assert alert["annotations"]["runbook_url"] == f"{RUNBOOKS}/{name}.md"
        assert (RUNBOOKS_DIR / f"{name}.md").is_file(), f"no runbook page for {name}"


def test_a_release_links_the_runbooks_of_its_own_version(tmp_path: Path) -> None:
    """Without runbookBaseUrl, the runbooks of the chart's version in the project's repository,
    which a release stamps into the chart (spark_dlq_devtools.dist.stamp_chart): absolute, and
    each names a page that exists at that version (docs/runbooks/<Alert>.md)."""
    chart = tmp_path / CHART.name
    shutil.copytree(CHART, chart)
    stamp_chart(chart, "https://git.example.com/platform/spark-dlq")
    text = helm(
        "template",
        RELEASE,
        str(chart),
        "--namespace",
        NAMESPACE,
        "--set",
        "monitoring.prometheusRule.enabled=true",
    ).stdout
    [rule] = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "PrometheusRule"]
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    for alert in alerts(rule["spec"]):
        url = alert["annotations"]["runbook_url"]
        page = f"docs/runbooks/{alert['alert']}.md"
        assert url == f"https://git.example.com/platform/spark-dlq/blob/v{version}/{page}"
        assert (REPO_ROOT / page).is_file()


def test_an_unreleased_chart_asks_for_the_runbooks() -> None:
    refused = template({"monitoring": {"prometheusRule": {"enabled": True}}}, check=False)
    assert refused.returncode != 0
    assert "monitoring.prometheusRule.runbookBaseUrl" in refused.stderr
    relative = template(
        {"monitoring": {"prometheusRule": {"enabled": True, "runbookBaseUrl": "docs/runbooks"}}}, check=False
    )
    assert relative.returncode != 0
    assert "runbookBaseUrl" in relative.stderr


def test_the_runbook_base_url_is_a_value() -> None:
    groups = rule_groups({"runbookBaseUrl": "https://runbooks.example/spark-dlq/"})
    urls = {a["annotations"]["runbook_url"] for a in alerts(groups)}
    assert all(u.startswith("https://runbooks.example/spark-dlq/Spark") for u in urls), urls
