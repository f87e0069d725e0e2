"""The circuit breaker against the real broker and Spark: a dead downstream under load, with and
without ``retry.breaker``, side by side (``spark_dlq_devtools.outage``).

The processor calls a real HTTP service started here; it stops listening for ``OUTAGE_S``
seconds while both engines run on the same SparkSession, then listens again. The suite runs a
short outage (enough to exhaust the redeliveries many times over); ``bench/outage.py`` runs the
same harness for a minute for docs/engine.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlq_engine.job import breaker as job_breaker
from dlq_engine.job.preflight import engine_class
from dlq_engine.model.breaker import BREAKER_STATES, CLOSED, HALF_OPEN, OPEN
from spark_dlq_devtools.outage import OutageRun, side_by_side

#: The suite's outage: longer than four failed attempts half a second apart take, in batches of
#: a second or two, and well under a minute.
OUTAGE_S = 12.0
#: Small enough to trip within one micro-batch at the run's rate; open longer than the batch that
#: trips it may take on a loaded machine (a batch must run while it is open), short enough to
#: probe soon after recovery.
BREAKER = {"window": 10, "threshold": 0.5, "openTime": "8s", "probes": 5}
#: Four attempts: a breaker trips at the end of a batch, so the batch in flight when the outage
#: begins and the next may both run closed on a loaded machine; a message must outlast them.
RETRY = {"maxRedeliverCount": 3, "backoff": {"type": "fixed", "delay": "500ms"}}


def test_the_jvm_side_names_the_states_and_options_as_the_engine_does(spark: Any) -> None:
    gate = engine_class(spark, job_breaker.GATE_CLASS)
    source = engine_class(spark, job_breaker.GATED_SOURCE)
    assert (gate.CLOSED, gate.OPEN, gate.HALF_OPEN) == (CLOSED, OPEN, HALF_OPEN)
    assert {gate.CLOSED, gate.OPEN, gate.HALF_OPEN} == set(BREAKER_STATES)
    assert gate.STATE_PROPERTY == job_breaker.STATE_PROPERTY
    assert (source.INNER, source.GATE, source.METRIC) == (
        job_breaker.INNER_OPTION,
        job_breaker.GATE_OPTION,
        job_breaker.STATE_METRIC,
    )


@pytest.mark.parametrize("outage_s", [OUTAGE_S])
def test_a_dead_downstream_pauses_the_engine_instead_of_exhausting_its_messages(
    spark: Any,
    bootstrap_servers: str,
    topics: Callable[..., dict[str, str]],
    tmp_path: Path,
    outage_s: float,
) -> None:
    run = OutageRun(
        bootstrap=bootstrap_servers,
        make_topics=topics,
        workdir=tmp_path,
        outage_s=outage_s,
        before_s=3.0,
        after_s=3.0,
        rate=40.0,
        breaker=BREAKER,
        retry=RETRY,
        # The breaker's engine on the foreachBatch sink: its jobs are submitted from the Python
        # batch function and must still carry the breaker's state to the delay stage and routing.
        table=True,
    )
    sides, recovered_at = run.run(spark)
    print("\n" + side_by_side(sides, recovered_at, outage_s, run.produced))
    with_breaker, without = sides

    # Both: every message routed once the downstream is back, nothing lost.
    for side in sides:
        assert side.drained_at is not None, f"{side.name}: not every message was routed"
        assert side.missing == [], f"{side.name}: missing {side.missing[:10]}"
        assert side.status == 0, side.name

    # With the breaker: it opened during the outage and closed after it; nothing was dead-lettered;
    # every message reached the output; no batch read a source message or routed anything while
    # it was open.
    states = [state for _, state, _ in with_breaker.transitions]
    assert OPEN in states, with_breaker.transitions
    assert states[-1] == CLOSED, with_breaker.transitions
    assert sum(with_breaker.dead_letters.values()) == 0, with_breaker.dead_letters
    assert with_breaker.distinct_outputs == run.produced
    assert with_breaker.open_batches, f"no batch ran while the breaker was open: {with_breaker.batches}"
    assert all(read == 0 and routed == 0 for read, routed in with_breaker.open_batches), (
        with_breaker.open_batches
    )

    # Without it, today's behaviour: the outage became exhausted dead letters. The retry-topic
    # writes are printed, not compared: in a 12 s outage they depend on how long the batch in
    # flight when it began takes (it runs closed, and so do its failures' retries); the minute of
    # bench/outage.py shows the flood's size.
    assert without.dead_letters["exhausted"] > 0
    assert without.distinct_outputs + without.dead_letters["exhausted"] == run.produced
