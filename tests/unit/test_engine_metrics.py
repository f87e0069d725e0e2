"""The driver's metrics: what a batch's progress turns into on ``/metrics``."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dlq_engine.job.driver_producer import Written
from dlq_engine.job.metrics import EngineMetrics, ErrorClasses, sink_failure
from dlq_engine.job.probes import TopicSize
from dlq_engine.model.policy import parse_policy
from tests.policy_builder import policy_document

POLICY = parse_policy(policy_document({"spec.errorWindow.size": 10, "spec.errorWindow.threshold": 0.5}))
SOURCE, RETRY = POLICY.source.topic, POLICY.retry_topic


def samples(metrics: EngineMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset((k, v) for k, v in s.labels.items() if k != "policy")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: EngineMetrics, name: str, **labels: str) -> float:
    return samples(metrics)[(name, frozenset(labels.items()))]


def summary(**fields: Any) -> str:
    base: dict[str, Any] = {
        "failures": [],
        "attempts": {},
        "latency": {"buckets": [0] * 15, "sum": 0.0, "count": 0},
        "lateness": {"buckets": [0] * 11, "sum": 0.0, "count": 0},
        "released": 0,
        "late": 0,
        "oldest_source_ms": None,
    }
    return json.dumps({**base, **fields})


def progress(
    batch_id: int,
    *,
    end: dict[str, int],
    latest: dict[str, int],
    retry_rows: int = 0,
    start: dict[str, int] | None = None,
) -> Any:
    def source(topic: str, rows: int) -> Any:
        return SimpleNamespace(
            description=f"KafkaV2[Subscribe[{topic}]]",
            startOffset=json.dumps({topic: {"0": start[topic]}}) if start else None,
            endOffset=json.dumps({topic: {"0": end[topic]}}),
            latestOffset=json.dumps({topic: {"0": latest[topic]}}),
            numInputRows=rows,
        )

    return SimpleNamespace(
        batchId=batch_id,
        timestamp="2026-11-24T10:00:00.000Z",
        durationMs={"triggerExecution": 1500},
        sources=[source(SOURCE, 0), source(RETRY, retry_rows)],
    )


FINISHED = 1795514401.5  # 2026-11-24T10:00:00Z plus the 1.5 s batch


def test_a_batch_counts_routes_inputs_failures_and_histograms() -> None:
    metrics = EngineMetrics(POLICY)
    row = {
        "total": 10,
        "output": 5,
        "retried": 3,
        "dead": 2,
        "dead_exhausted": 2,
        "redelivered": 4,
        "stats": [
            summary(
                failures=[
                    ["retry", "retry", "ConnectionError", 3],
                    ["dead_letter", "exhausted", "ValueError", 2],
                ],
                attempts={"1": 3, "3": 2},
                latency={"buckets": [5] + [0] * 14, "sum": 0.001, "count": 5},
                released=4,
                late=1,
                oldest_source_ms=int((FINISHED - 30) * 1000),
            ),
            summary(latency={"buckets": [0, 5] + [0] * 13, "sum": 0.004, "count": 5}),
        ],
    }
    p = progress(7, end={SOURCE: 100, RETRY: 20}, latest={SOURCE: 160, RETRY: 25}, retry_rows=6)
    metrics.add_progress(p, row)
    assert value(metrics, "spark_dlq_messages_total", outcome="retry") == 3
    assert value(metrics, "spark_dlq_messages_in_total", source="source") == 6
    assert value(metrics, "spark_dlq_messages_in_total", source="retry") == 4
    assert (
        value(
            metrics,
            "spark_dlq_failures_total",
            outcome="retry",
            reason="retry",
            error_class="ConnectionError",
        )
        == 3
    )
    assert value(metrics, "spark_dlq_failures_by_attempt_total", attempt="3") == 2
    assert value(metrics, "spark_dlq_retry_released_late_total") == 1
    assert value(metrics, "spark_dlq_processor_duration_seconds_count") == 10
    assert value(metrics, "spark_dlq_processor_duration_seconds_bucket", le="0.0005") == 5
    assert value(metrics, "spark_dlq_processor_duration_seconds_bucket", le="0.001") == 10
    assert value(metrics, "spark_dlq_batch_duration_seconds_count") == 1
    assert value(metrics, "spark_dlq_source_lag_messages", source="source") == 60
    assert value(metrics, "spark_dlq_source_lag_messages", source="retry") == 5
    assert value(metrics, "spark_dlq_source_lag_seconds") == pytest.approx(30, abs=0.01)
    assert value(metrics, "spark_dlq_last_batch_timestamp_seconds") == pytest.approx(FINISHED)


def test_an_empty_batch_updates_lag_and_duration_only() -> None:
    metrics = EngineMetrics(POLICY)
    metrics.add_progress(progress(1, end={SOURCE: 5, RETRY: 0}, latest={SOURCE: 5, RETRY: 0}), {})
    assert value(metrics, "spark_dlq_batches_total") == 0
    assert value(metrics, "spark_dlq_source_lag_seconds") == 0
    assert value(metrics, "spark_dlq_batch_duration_seconds_count") == 1


def test_held_retries_are_the_base_plus_later_batches() -> None:
    metrics = EngineMetrics(POLICY)
    offsets = {"end": {SOURCE: 0, RETRY: 0}, "latest": {SOURCE: 0, RETRY: 0}}
    metrics.add_progress(progress(4, retry_rows=10, **offsets), {"total": 0, "stats": [summary(released=0)]})
    assert ("spark_dlq_retry_held", frozenset()) not in samples(metrics)  # no base yet
    metrics.held_base(3, 7)  # state as of batch 3: 7 held
    assert value(metrics, "spark_dlq_retry_held") == 17
    metrics.add_progress(progress(5, retry_rows=0, **offsets), {"total": 12, "stats": [summary(released=12)]})
    assert value(metrics, "spark_dlq_retry_held") == 5
    metrics.add_progress(progress(5, retry_rows=0, **offsets), {"total": 12, "stats": [summary(released=12)]})
    assert value(metrics, "spark_dlq_retry_held") == 5, "a batch re-run after a restart counts once"


def test_the_restarts_wake_record_is_read_but_not_held() -> None:
    metrics = EngineMetrics(POLICY)
    metrics.woken(Written(RETRY, 0, 41))
    stats = {"total": 0, "stats": [summary()]}
    # A batch re-run from before the restart (offsets up to 41) does not read it.
    metrics.add_progress(
        progress(
            4,
            start={SOURCE: 0, RETRY: 38},
            end={SOURCE: 0, RETRY: 41},
            latest={SOURCE: 0, RETRY: 42},
            retry_rows=3,
        ),
        stats,
    )
    # The next reads it with two retries: two held, not three.
    metrics.add_progress(
        progress(
            5,
            start={SOURCE: 0, RETRY: 41},
            end={SOURCE: 0, RETRY: 44},
            latest={SOURCE: 0, RETRY: 44},
            retry_rows=3,
        ),
        stats,
    )
    metrics.add_progress(
        progress(
            6,
            start={SOURCE: 0, RETRY: 44},
            end={SOURCE: 0, RETRY: 45},
            latest={SOURCE: 0, RETRY: 45},
            retry_rows=1,
        ),
        stats,
    )
    metrics.held_base(3, 7)
    assert value(metrics, "spark_dlq_retry_held") == 7 + 3 + 2 + 1


def test_the_held_retries_are_read_once_a_batch_this_run_planned_has_committed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a restart Spark first re-runs the batch after the checkpoint's last commit (the
    previous driver may have planned it); the state read, a Spark job, waits for the batch
    after it, so that it does not hold the executor's task slot while the messages that came
    meanwhile are routed."""
    from dlq_engine.job import probes

    reads: list[int] = []

    def held_retries(spark: Any, checkpoint: str, batch_id: int) -> int:
        reads.append(batch_id)
        return 7

    monkeypatch.setattr(probes, "last_committed_batch", lambda spark, checkpoint: 3)
    monkeypatch.setattr(probes, "held_retries", held_retries)
    no_probe = parse_policy(policy_document({"spec.deadLetter.strategy": "ignore"}))
    metrics = EngineMetrics(no_probe)
    metrics.watch(None, "/checkpoint", {})
    offsets = {"end": {SOURCE: 0, RETRY: 0}, "latest": {SOURCE: 0, RETRY: 0}}
    metrics.add_progress(progress(4, retry_rows=2, **offsets), {"total": 0, "stats": [summary()]})
    assert not metrics._own_batch.is_set()  # batch 4: the re-run, perhaps the previous run's
    metrics.add_progress(progress(5, retry_rows=1, **offsets), {"total": 0, "stats": [summary()]})
    [reader] = metrics._threads
    reader.join(10)
    metrics.close()
    assert reads == [3]
    assert value(metrics, "spark_dlq_retry_held") == 7 + 2 + 1


def test_a_batch_already_in_the_base_is_not_added_again() -> None:
    metrics = EngineMetrics(POLICY)
    metrics.held_base(9, 3)
    offsets = {"end": {SOURCE: 0, RETRY: 0}, "latest": {SOURCE: 0, RETRY: 0}}
    metrics.add_progress(progress(9, retry_rows=4, **offsets), {"total": 0, "stats": [summary()]})
    assert value(metrics, "spark_dlq_retry_held") == 3


def test_error_classes_beyond_the_limit_share_other() -> None:
    classes = ErrorClasses(2)
    assert [classes.label(c) for c in ("A", "B", "C", "A", "other")] == ["A", "B", "other", "A", "other"]


def test_dead_letter_topic_size_and_oldest_age() -> None:
    metrics = EngineMetrics(POLICY)
    metrics.topic_size(TopicSize(records=12, oldest_ms=1_000_000), now=1_600.0)
    assert value(metrics, "spark_dlq_dead_letter_topic_messages") == 12
    assert value(metrics, "spark_dlq_dead_letter_oldest_age_seconds") == 600
    metrics.topic_size(TopicSize(records=0, oldest_ms=None))
    assert value(metrics, "spark_dlq_dead_letter_oldest_age_seconds") == 0


def test_error_window_ratio_and_threshold() -> None:
    metrics = EngineMetrics(POLICY)
    assert value(metrics, "spark_dlq_error_window_threshold") == 0.5
    metrics.error_window(0.25)
    assert value(metrics, "spark_dlq_error_window_ratio") == 0.25


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        pytest.param(
            "Job aborted due to stage failure: ... org.apache.kafka.common.errors.TimeoutException: "
            f"Expiring 2 record(s) for {POLICY.dead_letter_topic}-0:120000 ms has passed since batch creation",
            "dead_letter",
            id="producer-timeout-names-the-partition",
        ),
        pytest.param(
            # As Spark reported a refused dead letter (tests/integration/engine/test_outage.py).
            "Job aborted due to stage failure: Task 0 in stage 7.0 failed 1 times, most recent failure: "
            "Lost task 0.0 in stage 7.0 (TID 9) (192.0.2.2 executor driver): "
            "org.apache.kafka.common.errors.RecordTooLargeException: The request included a message "
            "larger than the max message size the server will accept.",
            "unknown",
            id="refused-record-names-no-topic",
        ),
        pytest.param(
            "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the "
            "position for partition orders-0 could be determined",
            None,
            id="consumer-timeout-is-not-a-write",
        ),
        pytest.param("java.lang.ArithmeticException: / by zero", None, id="not-kafka"),
    ],
)
def test_sink_failures_are_told_from_other_failures(text: str, kind: str | None) -> None:
    assert sink_failure(text, POLICY) == kind


def test_held_retries_stay_absent_when_the_state_cannot_be_read() -> None:
    metrics = EngineMetrics(POLICY)
    offsets = {"end": {SOURCE: 0, RETRY: 0}, "latest": {SOURCE: 0, RETRY: 0}}
    metrics.add_progress(progress(1, retry_rows=3, **offsets), {"total": 0, "stats": [summary()]})
    metrics.held_unknown()
    metrics.add_progress(progress(2, retry_rows=3, **offsets), {"total": 0, "stats": [summary()]})
    assert ("spark_dlq_retry_held", frozenset()) not in samples(metrics)


def test_the_breaker_s_state_and_its_opens() -> None:
    metrics = EngineMetrics(POLICY)
    assert not any(name.startswith("spark_dlq_breaker_state") for name, _ in samples(metrics))
    metrics.breaker_state("closed")
    assert value(metrics, "spark_dlq_breaker_state", state="closed") == 1
    assert value(metrics, "spark_dlq_breaker_state", state="open") == 0
    assert value(metrics, "spark_dlq_breaker_opens_total") == 0
    metrics.breaker_state("open", opened=True)
    metrics.breaker_state("half-open")
    metrics.breaker_state("open", opened=True)
    assert value(metrics, "spark_dlq_breaker_state", state="open") == 1
    assert value(metrics, "spark_dlq_breaker_state", state="half-open") == 0
    assert value(metrics, "spark_dlq_breaker_state", state="closed") == 0
    assert value(metrics, "spark_dlq_breaker_opens_total") == 2
