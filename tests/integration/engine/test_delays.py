"""Retries wait in the delay stage and are never processed before ``dlq.deliver.at``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from dlq_engine.job.delay import DELIVER_AT_COLUMN, JVM_DELAY_STAGE
from dlq_engine.job.preflight import engine_class
from tests.helpers import produce, read_all


def test_retries_are_never_processed_before_they_are_due(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics(partitions=2)
    produce(bootstrap_servers, names["source"], [(f"k{i}".encode(), b"timed:2") for i in range(20)])
    running = engine(
        names,
        retry={
            "maxRedeliverCount": 3,
            "backoff": {"type": "exponential", "delay": "1s", "multiplier": 2.0, "jitter": 0.2},
        },
    )
    output = read_all(bootstrap_servers, names["output"], expect=20, timeout=120)
    retries = read_all(bootstrap_servers, names["retry"], expect=40, timeout=30)
    running.stop()

    results = [json.loads(r.value or b"") for r in output]
    assert len(results) == 20
    assert {r["attempt"] for r in results} == {2}
    assert all(r["ran_at"] >= r["due"] > 0 for r in results)
    # Two failures each: two retry records per message, each due after the backoff.
    assert len(retries) == 40
    for record in retries:
        failed_at = int(record.header("dlq.failed.at") or 0)
        due = int(record.header("dlq.deliver.at") or 0)
        attempt = int(record.header("dlq.attempt") or 0)
        expected = 1000 * 2 ** (attempt - 1)
        assert 0.8 * expected <= due - failed_at <= 1.2 * expected + 1


def test_retry_delay_from_the_processor_overrides_the_backoff(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics()
    produce(bootstrap_servers, names["source"], [(b"k", b"retry:3s")])
    # Records written into the retry topic by hand, without a readable dlq.deliver.at: due now.
    produce(bootstrap_servers, names["retry"], [(b"bare", b"ok:bare")])
    produce(
        bootstrap_servers,
        names["retry"],
        [(b"forged", b"ok:forged")],
        headers=[("dlq.deliver.at", b"soon"), ("dlq.attempt", b"x")],
    )
    running = engine(names, retry={"backoff": {"type": "fixed", "delay": "100ms"}})
    output = read_all(bootstrap_servers, names["output"], expect=3, timeout=90)
    retry = [r for r in read_all(bootstrap_servers, names["retry"], expect=3, timeout=30) if r.key == b"k"]
    running.stop()

    assert sorted(r.value or b"" for r in output) == [b"BARE", b"FORGED", b"waited 3s"]
    (record,) = retry
    assert int(record.header("dlq.deliver.at") or 0) - int(record.header("dlq.failed.at") or 0) == 3000
    assert record.header("dlq.error.class") == "dlq_engine.model.processor_api.Retry"


def test_released_retries_not_yet_due_leave_in_due_order(spark: Any) -> None:
    """The routing task waits for each record in turn, so the delay stage hands on the records
    that are not yet due sorted by due time; those already due go first, as they came."""
    from pyspark.sql import DataFrame

    now, hour = int(time.time() * 1000), 3_600_000
    dues = [now + 3 * hour, now - hour, now + hour, None, now + 2 * hour, now - 2 * hour]
    released = spark.createDataFrame(list(enumerate(dues)), f"id int, {DELIVER_AT_COLUMN} bigint").coalesce(1)
    stage = engine_class(spark, JVM_DELAY_STAGE)
    ordered = DataFrame(stage.inDueOrder(released._jdf, DELIVER_AT_COLUMN), spark)
    assert [row.id for row in ordered.collect()] == [1, 3, 5, 2, 4, 0]
