"""What a platform team's Prometheus sees: a real Prometheus (built from the Go module proxy)
scrapes the operator and the engine of a running policy, and answers the questions the
dashboard and the alerts ask, with the values the messages produced.

The stack is this module's own (a namespace, an operator with its metrics port, a local
spark-operator runner whose drivers serve metrics on a known port), so the e2e tier's shared
operator and runner are not disturbed. One policy, one wave of scripted messages whose fate is
known exactly, then a configuration change that restarts the job.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client

from spark_dlq_devtools.kafka import create_topics
from spark_dlq_devtools.kube import ControlPlane
from spark_dlq_devtools.local_spark_operator import LocalSparkOperator
from spark_dlq_devtools.paths import REPO_ROOT, spark_application_crd, work_dir
from spark_dlq_devtools.processes import Service, free_port
from spark_dlq_devtools.prometheus import Prometheus
from tests.conftest import unique
from tests.e2e.conftest import Policies
from tests.helpers import FAST_DRIVER_ENV, QUICK_LEASE_ENV, produce
from tests.integration.crds import PROJECT_CRDS, install_crds

DASHBOARD = REPO_ROOT / "charts" / "spark-dlq-operator" / "files" / "dashboards" / "spark-dlq-policy.json"
#: The wave: value -> how many. scripted.py: ``flaky:1`` fails once, ``fail`` always (dead
#: after 1 + 2 redeliveries), ``terminate`` and ``nonretry`` go straight to the dead letters,
#: ``retry:2s`` asks for one explicit 2 s retry.
WAVE = {b"ok:a": 40, b"flaky:1": 10, b"fail": 5, b"terminate": 5, b"nonretry": 5, b"retry:2s": 5}
SOURCE_IN = sum(WAVE.values())  # 70
RETRIES = 10 + 5 * 2 + 5  # flaky once, fail twice, retry once: 25 released retries
OUTPUT = 40 + 10 + 5
DEAD = {"exhausted": 5, "terminated": 5, "non-retryable": 5}


@dataclass
class Stack:
    prometheus: Prometheus
    policies: Policies
    name: str
    policy: str  # the metrics' label: namespace/name
    dead_letter_topic: str
    bootstrap_servers: str
    seen: dict[str, Any] = field(default_factory=dict)

    def wait(
        self, expr: str, check: Callable[[float], bool], *, timeout: float = 180, what: str = ""
    ) -> float:
        deadline = time.monotonic() + timeout
        last: float | None = None
        while time.monotonic() < deadline:
            last = self.prometheus.value(expr)
            if last is not None and check(last):
                return last
            time.sleep(0.25)  # an instant query is cheap; Prometheus scrapes every second
        raise AssertionError(f"{what or expr}: last value {last} after {timeout:.0f}s")

    def q(self, expr: str) -> float | None:
        return self.prometheus.value(expr.replace("$policy", self.policy))


@pytest.fixture(scope="module")
def stack(kube: ControlPlane, kube_api: Any, bootstrap_servers: str) -> Iterator[Stack]:
    install_crds(kube_api, [*PROJECT_CRDS, spark_application_crd()])
    namespace = unique("mon")
    client.CoreV1Api(kube_api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
    )
    root = work_dir(f"monitoring-{os.getpid()}")
    driver_port, operator_port = free_port(), free_port()
    runner = LocalSparkOperator(
        kubeconfig=str(kube.admin_kubeconfig),
        workdir=root / "spark-apps",
        namespaces=[namespace],
        path_map={"/opt/spark-dlq": str(REPO_ROOT / "spark_image")},
        python_path=[str(REPO_ROOT)],
        master="local[2]",
        stop_grace=30,
        # The dead-letter topic's size is read every 2 s instead of 30: the wave's dead letters
        # show up in the metric as soon as they are written. The runner stops the driver before
        # it submits the restarted one: no two race for the checkpoint.
        driver_env={
            **FAST_DRIVER_ENV,
            **QUICK_LEASE_ENV,
            "SPARK_DLQ_METRICS_PORT": str(driver_port),
            "SPARK_DLQ_METRICS_PROBE_INTERVAL": "2",
        },
    )
    operator = Service(
        "dlq-operator-monitoring",
        [
            sys.executable,
            "-m",
            "spark_dlq_operator.cli",
            "run",
            "--namespace",
            namespace,
            "--provisioner",
            "admin",
            "--checkpoint-base",
            str(root / "checkpoints"),
            "--resync-interval",
            "5",
            "--metrics-port",
            str(operator_port),
        ],
        log=root / "operator.log",
        env={**os.environ, "KUBECONFIG": str(kube.admin_kubeconfig)},
    )
    prometheus = Prometheus(
        workdir=root / "prometheus",
        targets={
            "spark-dlq-engine": [f"127.0.0.1:{driver_port}"],
            "spark-dlq-operator": [f"127.0.0.1:{operator_port}"],
        },
    )
    source, output = unique("orders"), unique("billed")
    create_topics(bootstrap_servers, [source, output], 2)
    name = unique("shop")
    runner.start()
    operator.start()
    prometheus.start()
    try:
        policies = Policies(kube_api, namespace)
        policies.create(
            {
                "apiVersion": "sparkdlq.io/v1alpha1",
                "kind": "DeadLetterPolicy",
                "metadata": {"name": name},
                "spec": {
                    "source": {"topic": source, "subscription": "shop", "startingOffsets": "earliest"},
                    "broker": {"bootstrapServers": bootstrap_servers},
                    "processor": {"entrypoint": "tests.processors.scripted:process"},
                    "output": {"topic": output},
                    "retry": {
                        "maxRedeliverCount": 2,
                        "backoff": {"type": "fixed", "delay": "1s"},
                        "nonRetryableErrors": ["KeyError"],
                    },
                    "errorWindow": {"size": 1000, "threshold": 0.9},
                    "spark": {"trigger": "500ms"},
                },
            }
        )
        status = policies.wait_status(name, lambda s: s.get("phase") == "Running", what="phase Running")
        yield Stack(
            prometheus, policies, name, f"{namespace}/{name}", status["deadLetterTopic"], bootstrap_servers
        )
    finally:
        prometheus.stop()
        operator.stop()
        runner.stop()


@pytest.fixture(scope="module")
def routed(stack: Stack, bootstrap_servers: str) -> Stack:
    """The wave routed, as Prometheus saw it before the restart; then the restart."""
    source = stack.policies.get(stack.name)["spec"]["source"]["topic"]
    produce(bootstrap_servers, source, [(b"k%d" % i, v) for v, n in WAVE.items() for i in range(n)])
    p = stack.policy
    stack.wait(f'sum(spark_dlq_messages_total{{policy="{p}",outcome="output"}})', lambda v: v >= OUTPUT)
    stack.wait(f'sum(spark_dlq_dead_letters_total{{policy="{p}"}})', lambda v: v >= sum(DEAD.values()))
    # The dead-letter topic is probed every 2 s here; the held retries are all released by now.
    stack.wait(f'spark_dlq_dead_letter_topic_messages{{policy="{p}"}}', lambda v: v >= 15, timeout=60)
    stack.wait(f'spark_dlq_retry_held{{policy="{p}"}}', lambda v: v == 0, timeout=60)
    stack.seen = {
        "names": stack.prometheus.metric_names(),
        "series": {
            json.dumps(r["metric"], sort_keys=True): float(r["value"][1])
            for r in stack.prometheus.query(f'{{policy="{p}"}}')
        },
        "targets": {t["labels"]["job"]: t["health"] for t in stack.prometheus.targets()},
    }
    # A configuration change: the operator resubmits the job, which restarts from its checkpoint.
    stack.policies.patch(stack.name, {"spec": {"retry": {"backoff": {"delay": "2s"}}}})
    stack.policies.wait_status(
        stack.name,
        lambda s: s.get("restartCount") == 1 and s.get("phase") == "Running",
        what="restarted and Running",
    )
    return stack


def value(stack: Stack, name: str, **labels: str) -> float:
    """The value Prometheus had for one series of the policy before the restart."""
    wanted = {"__name__": name, "policy": stack.policy, **labels}
    found = [
        v
        for key, v in stack.seen["series"].items()
        if wanted.items() <= json.loads(key).items() and len(json.loads(key)) - 2 == len(wanted)
    ]  # (instance and job are the scrape's own labels)
    assert len(found) == 1, f"{wanted}: {len(found)} series"
    return found[0]


def test_prometheus_scrapes_the_engine_and_the_operator(routed: Stack) -> None:
    assert routed.seen["targets"] == {"spark-dlq-engine": "up", "spark-dlq-operator": "up"}


def test_routes_inputs_and_dead_letters_have_the_waves_values(routed: Stack) -> None:
    assert value(routed, "spark_dlq_messages_total", outcome="output") == OUTPUT
    assert value(routed, "spark_dlq_messages_total", outcome="retry") == RETRIES
    assert value(routed, "spark_dlq_messages_total", outcome="dead_letter") == sum(DEAD.values())
    for reason, count in DEAD.items():
        assert value(routed, "spark_dlq_dead_letters_total", reason=reason) == count
    assert value(routed, "spark_dlq_messages_in_total", source="source") == SOURCE_IN
    assert value(routed, "spark_dlq_messages_in_total", source="retry") == RETRIES
    assert value(routed, "spark_dlq_redelivered_messages_total") == RETRIES


def test_failures_by_error_class_and_attempt(routed: Stack) -> None:
    def failures(outcome: str, reason: str, error_class: str) -> float:
        return value(
            routed, "spark_dlq_failures_total", outcome=outcome, reason=reason, error_class=error_class
        )

    assert failures("retry", "retry", "ConnectionError") == 10
    assert failures("retry", "retry", "RuntimeError") == 10
    assert failures("dead_letter", "exhausted", "RuntimeError") == 5
    assert failures("dead_letter", "non-retryable", "KeyError") == 5
    assert failures("dead_letter", "terminated", "dlq_engine.model.processor_api.Terminate") == 5
    assert failures("retry", "retry", "dlq_engine.model.processor_api.Retry") == 5
    assert value(routed, "spark_dlq_failures_by_attempt_total", attempt="1") == 30
    assert value(routed, "spark_dlq_failures_by_attempt_total", attempt="2") == 5
    assert value(routed, "spark_dlq_failures_by_attempt_total", attempt="3") == 5


def test_latency_lateness_and_batch_histograms_are_filled(routed: Stack) -> None:
    assert value(routed, "spark_dlq_processor_duration_seconds_count") == SOURCE_IN + RETRIES
    assert value(routed, "spark_dlq_processor_duration_seconds_sum") > 0
    assert value(routed, "spark_dlq_retry_lateness_seconds_count") == RETRIES
    assert value(routed, "spark_dlq_batch_duration_seconds_count") >= 1
    assert value(routed, "spark_dlq_batch_duration_seconds_bucket", le="+Inf") == value(
        routed, "spark_dlq_batch_duration_seconds_count"
    )


def test_backlog_lag_dead_letter_topic_and_error_window(routed: Stack) -> None:
    assert value(routed, "spark_dlq_retry_held") == 0
    assert value(routed, "spark_dlq_source_lag_messages", source="source") == 0
    assert value(routed, "spark_dlq_source_lag_messages", source="retry") == 0
    assert value(routed, "spark_dlq_dead_letter_topic_messages") == sum(DEAD.values())
    assert value(routed, "spark_dlq_dead_letter_oldest_age_seconds") > 0
    assert time.time() - value(routed, "spark_dlq_last_batch_timestamp_seconds") < 120
    failed = RETRIES + sum(DEAD.values())
    assert value(routed, "spark_dlq_error_window_ratio") == pytest.approx(failed / (SOURCE_IN + RETRIES))
    assert value(routed, "spark_dlq_error_window_threshold") == 0.9


def test_operator_reports_the_policy_phase_readiness_and_restart(routed: Stack) -> None:
    p = routed.policy
    assert value(routed, "spark_dlq_operator_policy_phase", phase="Running") == 1
    assert value(routed, "spark_dlq_operator_policy_ready") == 1
    assert value(routed, "spark_dlq_operator_phase_transitions_total") >= 1  # e.g. Pending -> Running
    routed.wait(f'spark_dlq_operator_job_restarts_total{{policy="{p}",cause="config"}}', lambda v: v == 1)
    assert (routed.q('sum(spark_dlq_operator_reconciles_total{result="ok"})') or 0) > 0
    # After the restart the engine is scraped again, its counters restarted from zero: the
    # new process routes new messages (its delay stage read its held retries from the
    # checkpoint: none).
    routed.wait('up{job="spark-dlq-engine"}', lambda v: v == 1, timeout=120)
    routed.wait(f'spark_dlq_retry_held{{policy="{p}"}}', lambda v: v == 0, timeout=120)
    source = routed.policies.get(routed.name)["spec"]["source"]["topic"]
    produce(routed.bootstrap_servers, source, [(b"late", b"ok:after")] * 3)
    routed.wait(f'spark_dlq_messages_total{{policy="{p}",outcome="output"}}', lambda v: v == 3, timeout=120)


def test_every_dashboard_query_selects_metrics_prometheus_has(routed: Stack) -> None:
    """Each panel's and annotation's PromQL, with the dashboard's variables filled in, parses
    in Prometheus, selects only metric names the scrape really has, and evaluates."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"]]
    names = routed.prometheus.metric_names() | routed.seen["names"]
    missing: dict[str, list[str]] = {}
    for expr in exprs:
        filled = expr.replace("$policy", routed.policy).replace("$__rate_interval", "1m")
        selected = routed.prometheus.selectors(filled)
        assert selected, expr
        absent = [n for n in selected if n not in names]
        if absent:
            missing[expr] = absent
        routed.prometheus.query(filled)  # raises on an evaluation error
    assert not missing, missing
    assert len(exprs) >= 25
