"""Prometheus metrics of the operator, served on ``--metrics-port``.

How many reconciles ran and how they ended (``ok``, ``invalid``, ``waiting`` for topics,
``error``), which errors, how long they took and how many are running or queued in a resync
round, and how many resync rounds completed (tests wait on it to prove that nothing happened);
the Kubernetes API calls that failed; and, from every status the operator writes, each
policy's phase and Ready condition, its phase changes and its job's restarts (by a
configuration change, or after the job left Running by itself). Per-policy series carry one
label, ``policy`` (``namespace/name``, as the engine's), so that the scrape's own
``namespace`` label keeps meaning the operator's namespace. The collectors are module-level
(Prometheus' registry is process-wide); the HTTP server is started at operator start-up and
stopped at clean-up. The list, with labels, is in docs/monitoring.md.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, Literal

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from dlq_engine.release import build_labels
from spark_dlq_operator.reasons import Phase, Reason, RestartReason

Result = Literal["ok", "invalid", "waiting", "error"]

RECONCILES = Counter(
    "spark_dlq_operator_reconciles_total",
    "Reconciles of DeadLetterPolicies, by how they ended.",
    ["trigger", "result"],
)
ERRORS = Counter(
    "spark_dlq_operator_reconcile_errors_total",
    "Reconciles that failed or had to wait, by reason (BrokerUnavailable, InvalidSpec, ...).",
    ["reason"],
)
DURATION = Histogram(
    "spark_dlq_operator_reconcile_duration_seconds",
    "How long one reconcile of a DeadLetterPolicy took.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)


IN_PROGRESS = Gauge(
    "spark_dlq_operator_reconciles_in_progress",
    "Reconciles running now (each holds its policy's lock).",
)
RESYNC_PENDING = Gauge(
    "spark_dlq_operator_resync_pending",
    "Policies of the current resync round not reconciled yet (the operator's queue).",
)
RESYNC_ROUNDS = Counter(
    "spark_dlq_operator_resync_rounds",
    "Resync rounds completed: every watched policy listed, reconciled and supervised once.",
)
API_ERRORS = Counter(
    "spark_dlq_operator_api_errors_total",
    "Kubernetes API calls of the operator that failed, by verb, resource and HTTP status "
    "(0: no answer). 404 and 409 count too, also where the caller expects them.",
    ["verb", "resource", "code"],
)
PHASE_TRANSITIONS = Counter(
    "spark_dlq_operator_phase_transitions_total",
    "Phase changes written to a policy's status (its first phase not counted); the phase "
    "entered is spark_dlq_operator_policy_phase.",
    ["policy"],
)
JOB_RESTARTS = Counter(
    "spark_dlq_operator_job_restarts_total",
    "Restarts of a policy's Spark job: cause config (the operator resubmitted it for a new "
    "configuration) or failure (it left Running by itself: failed, or restarting; or the "
    "operator resubmitted it because its driver reported no progress).",
    ["policy", "cause"],
)
BUILD_INFO = Gauge(
    "spark_dlq_operator_build_info",
    "1, labelled with the operator's version and its Python.",
    ["version", "python"],
)
BUILD_INFO.labels(**build_labels()).set(1)
#: The phases of ``status.phase`` (docs/reference.md, section 1), each reported even at zero.
PHASES: Final = tuple(Phase)


class PolicyStates(Collector):
    """Each policy's last written phase and Ready condition, collected at scrape time:
    ``spark_dlq_operator_policies{phase}`` (how many), ``spark_dlq_operator_policy_phase``
    (1 for the policy's phase) and ``spark_dlq_operator_policy_ready``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, tuple[str, bool]] = {}

    def set(self, policy: str, phase: str, ready: bool) -> bool:
        """Note a policy's state; whether the policy is new here."""
        with self._lock:
            new = policy not in self._states
            self._states[policy] = (phase, ready)
            return new

    def forget(self, policy: str) -> None:
        with self._lock:
            self._states.pop(policy, None)
        _forget_counters(policy)

    def keep_only(self, policies: Iterable[str]) -> None:
        keep = set(policies)
        with self._lock:
            gone = [p for p in self._states if p not in keep]
            for policy in gone:
                del self._states[policy]
        for policy in gone:
            _forget_counters(policy)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self._lock:
            states = dict(self._states)
        counts = GaugeMetricFamily(
            "spark_dlq_operator_policies",
            "Policies by the phase last written to their status.",
            labels=["phase"],
        )
        for each in PHASES:
            counts.add_metric([each], sum(1 for p, _ in states.values() if p == each))
        phases = GaugeMetricFamily(
            "spark_dlq_operator_policy_phase",
            "1 for each policy's current phase (status.phase).",
            labels=["policy", "phase"],
        )
        ready = GaugeMetricFamily(
            "spark_dlq_operator_policy_ready",
            "1 when the policy's Ready condition is True, else 0.",
            labels=["policy"],
        )
        for policy, (phase, is_ready) in sorted(states.items()):
            phases.add_metric([policy, phase], 1)
            ready.add_metric([policy], 1 if is_ready else 0)
        yield counts
        yield phases
        yield ready


def _forget_counters(policy: str) -> None:
    """Drop a deleted policy's per-policy counter series (absent labels are ignored)."""
    for counter, labels in (
        (PHASE_TRANSITIONS, [(policy,)]),
        (JOB_RESTARTS, [(policy, "config"), (policy, "failure")]),
    ):
        for values in labels:
            with contextlib.suppress(KeyError):
                counter.remove(*values)


POLICY_STATES = PolicyStates()
REGISTRY.register(POLICY_STATES)


def policy_label(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def status_written(namespace: str, name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Note a policy's status as the operator wrote (or confirmed) it: its phase and Ready,
    a phase change, a restart for a new configuration, a job that left Running by itself."""
    policy = policy_label(namespace, name)
    phase = str(new.get("phase") or Phase.PENDING)
    if POLICY_STATES.set(policy, phase, _condition(new, "Ready").get("status") == "True"):
        # A policy seen for the first time: its counters start at zero, so that the first
        # increase after a scrape shows in rate() and increase().
        PHASE_TRANSITIONS.labels(policy)
        for cause in ("config", "failure"):
            JOB_RESTARTS.labels(policy, cause)
    if old.get("phase") and old.get("phase") != new.get("phase"):
        PHASE_TRANSITIONS.labels(policy).inc()
    restarts = int(new.get("restartCount") or 0) - int(old.get("restartCount") or 0)
    if restarts > 0:
        cause = "failure" if new.get("lastRestartReason") == RestartReason.ENGINE_STALLED else "config"
        JOB_RESTARTS.labels(policy, cause).inc(restarts)
        return
    was, now = _condition(old, "JobRunning"), _condition(new, "JobRunning")
    if was.get("status") == "True" and now.get("reason") in (Reason.RESTARTING, Reason.FAILED):
        JOB_RESTARTS.labels(policy, "failure").inc()


def policy_gone(namespace: str, name: str) -> None:
    POLICY_STATES.forget(policy_label(namespace, name))


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def api_error(verb: str, resource: str, code: int) -> None:
    API_ERRORS.labels(verb, resource, str(code)).inc()


class ReconcileOutcome:
    """Filled in by the reconcile: how it ended and why."""

    def __init__(self) -> None:
        self.result: Result = "error"
        self.reason = ""


@contextlib.contextmanager
def observe(trigger: str) -> Iterator[ReconcileOutcome]:
    """Time one reconcile and count its outcome (``error`` unless the body sets another, also
    when it then raises: a reconcile that waits for topics raises after setting ``waiting``)."""
    outcome = ReconcileOutcome()
    started = time.perf_counter()
    IN_PROGRESS.inc()
    try:
        yield outcome
    except BaseException as error:
        outcome.reason = outcome.reason or type(error).__name__
        raise
    finally:
        IN_PROGRESS.dec()
        DURATION.observe(time.perf_counter() - started)
        RECONCILES.labels(trigger=trigger, result=outcome.result).inc()
        if outcome.result != "ok":
            ERRORS.labels(reason=outcome.reason or outcome.result).inc()


class MetricsServer:
    """The /metrics HTTP endpoint, in its own thread."""

    def __init__(self, port: int) -> None:
        server: Any
        thread: threading.Thread
        server, thread = start_http_server(port)
        self._server = server
        self._thread = thread

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
