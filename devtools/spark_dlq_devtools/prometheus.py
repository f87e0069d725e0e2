"""A real Prometheus for the monitoring tests, and a client of its HTTP API.

The server is the one ``scripts/setup/prometheus.sh`` builds from the Go module proxy. It
scrapes the given targets (the engine's and the operator's ``/metrics``) on a short interval
into a throwaway TSDB; tests then ask its API what a platform team's dashboards and alerts
would ask: instant and range queries, the metric names it has, and the parse tree of a PromQL
expression (``/api/v1/parse_query``, Prometheus' own parser).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from spark_dlq_devtools.paths import prometheus_bin
from spark_dlq_devtools.processes import Service, free_port


class PrometheusError(RuntimeError):
    """The API answered with an error (its ``errorType`` and ``error``)."""


class Prometheus:
    """``prometheus`` scraping ``targets`` (job name -> ``host:port`` list) every
    ``scrape_interval``."""

    def __init__(
        self, *, workdir: Path, targets: Mapping[str, Sequence[str]], scrape_interval: str = "1s"
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": list(addresses)}]}
                for job, addresses in targets.items()
            ],
        }
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.service = Service(
            "prometheus",
            [
                str(prometheus_bin("prometheus")),
                f"--config.file={self.config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1d",
                "--log.level=warn",
            ],
            log=workdir / "prometheus.log",
            cwd=workdir,
        )

    def start(self, timeout: float = 60.0) -> None:
        self.service.start()
        self.service.wait_until(self._ready, timeout=timeout, what="a ready answer on /-/ready")

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
            return int(answer.status) == 200

    def stop(self) -> None:
        self.service.stop()

    def api(self, path: str, **params: str) -> Any:
        """``data`` of a GET on ``/api/v1/<path>``."""
        query = urllib.parse.urlencode(params)
        request = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = json.loads(answer.read())
        except urllib.error.HTTPError as error:
            body = json.loads(error.read() or b"{}")
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, *, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query, now or ``at`` (Unix seconds)."""
        data = self.api("query", query=expr, **({"time": str(at)} if at is not None else {}))
        if data["resultType"] in ("vector", "matrix"):
            return list(data["result"])
        return [{"metric": {}, "value": data["result"]}]  # a scalar or a string

    def value(self, expr: str) -> float | None:
        """The single value of an instant query (None when it returns nothing)."""
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, f"{expr}: {len(result)} series"
        return float(result[0]["value"][1])

    def query_range(self, expr: str, *, start: float, end: float, step: float) -> list[dict[str, Any]]:
        data = self.api("query_range", query=expr, start=str(start), end=str(end), step=str(step))
        return list(data["result"])

    def metric_names(self) -> set[str]:
        return set(self.api("label/__name__/values"))

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets")["activeTargets"])

    def selectors(self, expr: str) -> list[str]:
        """The metric names an expression selects, from Prometheus' own parse tree."""
        return sorted(
            {
                node["name"]
                for node in _walk(self.api("parse_query", query=expr))
                if node.get("name") and node.get("type") in ("vectorSelector", "matrixSelector")
            }
        )


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for child in node.values():
            yield from _walk(child)
    elif isinstance(node, list):
        for child in node:
            yield from _walk(child)
