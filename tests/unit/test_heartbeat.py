"""The engine's heartbeat: its target, its document, and a driver with no Kubernetes API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlq_engine.job.heartbeat import Heartbeat, HeartbeatError, Liveness

ALIVE = Liveness(query_active=True, last_progress=1_795_000_000.0, batch_id=12)


@pytest.mark.parametrize(
    ("target", "interval", "message"),
    [
        ("billing-heartbeat", 10.0, "--heartbeat-lease must be NAMESPACE/NAME, got 'billing-heartbeat'"),
        ("shop/a/b", 10.0, "--heartbeat-lease must be NAMESPACE/NAME, got 'shop/a/b'"),
        ("shop/billing-heartbeat", 0.0, "--heartbeat-interval must be positive, got 0.0"),
    ],
)
def test_a_bad_target_or_interval_is_refused(target: str, interval: float, message: str) -> None:
    with pytest.raises(HeartbeatError) as error:
        Heartbeat(target, lambda: ALIVE, interval=interval)
    assert str(error.value) == message


def test_without_the_kubernetes_api_there_is_no_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("SPARK_DLQ_SERVICEACCOUNT_DIR", str(tmp_path))
    heartbeat = Heartbeat("shop/billing-heartbeat", lambda: ALIVE)
    assert heartbeat.unavailable == f"KUBERNETES_SERVICE_HOST is not set and {tmp_path / 'token'} is missing"
    heartbeat.start()  # a warning, no thread
    heartbeat.stop()


def test_the_url_and_the_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("t\n")
    monkeypatch.setenv("SPARK_DLQ_SERVICEACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    heartbeat = Heartbeat("shop/billing-heartbeat", lambda: ALIVE)
    assert heartbeat.unavailable is None
    assert (
        heartbeat.url
        == "https://[fd00::1]:6443/apis/coordination.k8s.io/v1/namespaces/shop/leases/billing-heartbeat"
    )
    assert json.loads(ALIVE.document(1_795_000_030.0)) == {
        "time": "2026-11-18T11:07:10Z",
        "queryActive": True,
        "lastProgressTime": "2026-11-18T11:06:40Z",
        "batchId": 12,
    }
