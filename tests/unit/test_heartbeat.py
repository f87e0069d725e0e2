"""The engine's heartbeat: its target, its document (written by the engine, read by the operator),
and a driver with no Kubernetes API."""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path

import pytest

from dlq_engine.job.heartbeat import Heartbeat, HeartbeatError, Liveness
from dlq_engine.model.breaker import BreakerReport
from dlq_engine.model.heartbeat import Heartbeat as HeartbeatDocument
from dlq_engine.model.heartbeat import OrderingReport
from spark_dlq_operator.naming import HEARTBEAT_ANNOTATION
from spark_dlq_operator.policies.supervision import heartbeat_of

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


def test_the_document_carries_the_breaker_s_report_when_there_is_one() -> None:
    report = {
        "state": "open",
        "since": "2026-11-18T11:06:00Z",
        "reason": "20 of the last 20 processor calls failed transiently",
        "opens": 1,
        "probeAt": "2026-11-18T11:06:30Z",
    }
    alive = dataclasses.replace(ALIVE, breaker=report)
    assert json.loads(alive.document(1_795_000_030.0))["breaker"] == report
    assert "breaker" not in json.loads(ALIVE.document(1_795_000_030.0))


# --- the document: written by the engine, read by the operator ----------------------------------

_AT = datetime.datetime(2026, 11, 18, 11, 7, 10, tzinfo=datetime.UTC)
_ORDERING: OrderingReport = {"heldMessages": 7, "blockedKeys": 2, "blockedKeySample": ["k1", "k2"]}
_BREAKER: BreakerReport = {
    "state": "half-open",
    "since": "2026-11-18T11:06:00Z",
    "reason": "20 of the last 20 processor calls failed transiently",
    "opens": 2,
    "probeAt": "",
}


@pytest.mark.parametrize(
    "beat",
    [
        pytest.param(HeartbeatDocument(_AT, True, _AT - datetime.timedelta(seconds=30), 12), id="plain"),
        pytest.param(HeartbeatDocument(_AT, False, _AT, None), id="before-the-first-batch"),
        pytest.param(
            HeartbeatDocument(_AT, True, _AT, 3, ordering=_ORDERING, breaker=_BREAKER),
            id="ordering-and-breaker",
        ),
    ],
)
def test_the_document_survives_a_round_trip(beat: HeartbeatDocument) -> None:
    assert HeartbeatDocument.from_json(beat.to_json()) == beat


def test_what_the_engine_writes_is_what_the_operator_reads() -> None:
    alive = Liveness(
        query_active=True,
        last_progress=_AT.timestamp() - 30,
        batch_id=12,
        ordering=_ORDERING,
        breaker=_BREAKER,
    )
    lease = {"metadata": {"annotations": {HEARTBEAT_ANNOTATION: alive.document(_AT.timestamp())}}}
    assert heartbeat_of(lease) == HeartbeatDocument(
        _AT, True, _AT - datetime.timedelta(seconds=30), 12, ordering=_ORDERING, breaker=_BREAKER
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("not json", None, id="not-json"),
        pytest.param('{"time": "2026-11-18T11:07:10Z", "queryActive": true}', None, id="no-progress-time"),
        pytest.param(
            '{"time": "2026-11-18T11:07:10Z", "queryActive": "yes", "lastProgressTime": "2026-11-18T11:07:10Z"}',
            None,
            id="active-not-a-boolean",
        ),
        pytest.param(
            '{"time": "2026-11-18T11:07:10Z", "queryActive": true, "lastProgressTime": "2026-11-18T11:07:10Z",'
            ' "batchId": -1, "ordering": {"heldMessages": -1}, "breaker": {"state": "ajar"}}',
            HeartbeatDocument(_AT, True, _AT),
            id="bad-parts-left-out",
        ),
    ],
)
def test_a_document_not_as_the_engine_writes_it_is_not_trusted(
    text: str, expected: HeartbeatDocument | None
) -> None:
    assert HeartbeatDocument.from_json(text) == expected
