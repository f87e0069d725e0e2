"""Prometheus metrics for a running engine, served when ``--metrics-port`` is given.

Counters follow the observed metrics of each committed batch, so they count messages whose
routing is durable, never messages of a batch that is replayed after a crash twice.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from dlq_engine.job.pipeline import DEAD_REASONS

ROUTES = {
    "output": "output",
    "acked": "acked",
    "retried": "retry",
    "dead": "dead_letter",
    "ignored": "ignored",
}


class EngineMetrics:
    def __init__(self, policy: str) -> None:
        self.registry = CollectorRegistry()
        self.policy = policy
        self.messages = Counter(
            "spark_dlq_messages", "Messages routed, by outcome", ["policy", "outcome"], registry=self.registry
        )
        self.dead_letters = Counter(
            "spark_dlq_dead_letters",
            "Dead letters (written or ignored), by dlq.reason",
            ["policy", "reason"],
            registry=self.registry,
        )
        self.redelivered = Counter(
            "spark_dlq_redelivered_messages",
            "Retry records processed after their delay",
            ["policy"],
            registry=self.registry,
        )
        self.lateness = Gauge(
            "spark_dlq_retry_lateness_max_seconds",
            "Largest lateness past dlq.deliver.at in the last batch with retries",
            ["policy"],
            registry=self.registry,
        )
        self.batches = Counter(
            "spark_dlq_batches", "Committed micro-batches", ["policy"], registry=self.registry
        )

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        start_http_server(port, addr=host, registry=self.registry)

    def add(self, row: dict[str, Any]) -> None:
        self.batches.labels(self.policy).inc()
        for name, outcome in ROUTES.items():
            self.messages.labels(self.policy, outcome).inc(int(row.get(name) or 0))
        for name, reason in DEAD_REASONS.items():
            self.dead_letters.labels(self.policy, reason).inc(int(row.get(name) or 0))
        self.redelivered.labels(self.policy).inc(int(row.get("redelivered") or 0))
        if row.get("max_lateness_ms") is not None:
            self.lateness.labels(self.policy).set(int(row["max_lateness_ms"]) / 1000)
