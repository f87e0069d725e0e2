"""The chart's alert rules, checked and unit-tested by the real promtool (built from the Go
module proxy by scripts/setup/prometheus.sh): every alert fires on a series that should page
and stays silent on one that should not (tests/fixtures/prometheus/alerts-test.yaml)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from spark_dlq_devtools.paths import REPO_ROOT, prometheus_bin
from tests.chart import one, render

RULES_TEST = REPO_ROOT / "tests" / "fixtures" / "prometheus" / "alerts-test.yaml"
RUNBOOKS = REPO_ROOT / "docs" / "runbooks"
CAMEL_CASE = re.compile(r"^[A-Z][a-zA-Z0-9]+$")


def rule_groups(values: dict[str, Any] | None = None) -> dict[str, Any]:
    on = {"monitoring": {"prometheusRule": {"enabled": True, **(values or {})}}}
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
    """Each alert has a case where it fires for one policy while another policy's series, in
    the same test, stays silent."""
    tests = yaml.safe_load(RULES_TEST.read_text())["tests"]
    fired: dict[str, set[str]] = {}
    silent: dict[str, set[str]] = {}
    for case in tests:
        policies = {re.search(r'policy="([^"]+)"', s["series"]).group(1) for s in case["input_series"]}  # type: ignore[union-attr]
        for check in case["alert_rule_test"]:
            firing = {a["exp_labels"]["policy"] for a in check.get("exp_alerts") or []}
            fired.setdefault(check["alertname"], set()).update(firing)
            silent.setdefault(check["alertname"], set()).update(policies - firing)
    names = {a["alert"] for a in alerts(rule_groups())}
    assert names == set(fired), "every alert, and nothing else, has a promtool test"
    for name in names:
        assert fired[name], f"{name} is never tested firing"
        assert silent[name], f"{name} is never tested silent"


def test_alerts_follow_the_kube_prometheus_conventions() -> None:
    for alert in alerts(rule_groups()):
        name = alert["alert"]
        assert CAMEL_CASE.match(name), name
        assert alert["labels"]["severity"] in ("info", "warning", "critical"), name
        assert set(alert["annotations"]) == {"summary", "description", "runbook_url"}, name
        assert alert["annotations"]["runbook_url"] == f"docs/runbooks/{name}.md"
        assert (RUNBOOKS / f"{name}.md").is_file(), f"no runbook page for {name}"


def test_the_runbook_base_url_is_a_value() -> None:
    groups = rule_groups({"runbookBaseUrl": "https://runbooks.example/spark-dlq/"})
    urls = {a["annotations"]["runbook_url"] for a in alerts(groups)}
    assert all(u.startswith("https://runbooks.example/spark-dlq/Spark") for u in urls), urls
