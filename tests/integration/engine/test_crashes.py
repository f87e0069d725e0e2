"""Crashes: the engine killed with SIGKILL three times while messages flow (up to 24,000, until
the last kill), once in each phase the run knows (start-up or recovery, after a committed batch,
mid-write), and the broker restarted once under it; afterwards every message is where it
belongs, none missing.

The killed engines run as a user runs them (``dlq-engine run -f``, its own process group:
driver, JVM and Python workers die together); the run after the last kill, which drains the
rest, is the test session's Spark on the same checkpoint (all a restart needs), not a fourth
driver. See ``spark_dlq_devtools.chaos`` for the run and the audit, and ``bench/soak.py`` for
the longer soak (20 kills) whose figures are in docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dlq_engine.model.policy import parse_policy
from spark_dlq_devtools.chaos import CrashRun, kind_of
from spark_dlq_devtools.kafka import KafkaBroker, create_topics
from spark_dlq_devtools.processes import QUICK_JIT
from tests.integration.engine.conftest import Engine

#: At most: the producer stops at the last kill (the audit counts what it sent).
N = 24_000
KILLS = 3


class SessionEngine:
    """The run after the last kill, on the test session's Spark, as the crash run drives one."""

    def __init__(self, spark: Any, document: dict[str, Any], checkpoint: Path) -> None:
        self.engine = Engine(spark, parse_policy(document), checkpoint, once=False)

    def alive(self) -> bool:
        return self.engine.status is None

    def tail(self, lines: int = 30) -> str:
        return self.engine.describe()

    def stop(self, timeout: float = 15.0) -> None:
        self.engine.stop()


@pytest.fixture
def own_broker() -> Iterator[KafkaBroker]:
    """A broker of this test's own: it is restarted mid-run, which must not disturb the tests
    that share the session's broker afterwards. Killed at the end: its data goes with it, so
    nothing waits out a controlled shutdown."""
    broker = KafkaBroker(name=f"kafka-chaos-{os.getpid()}", log_level="WARN", java_options=QUICK_JIT)
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()
        shutil.rmtree(broker.root, ignore_errors=True)


# Three cold starts of a Spark driver: longer than the suite's 600 s per-test limit under load.
@pytest.mark.timeout(1800)
def test_nothing_is_lost_across_kills_and_a_broker_restart(
    spark: Any, own_broker: KafkaBroker, tmp_path: Path
) -> None:
    bootstrap_servers = own_broker.bootstrap_servers
    names = {k: f"chaos-{k}" for k in ("source", "retry", "dlq", "output")}
    create_topics(bootstrap_servers, names.values(), partitions=2)
    # 150 messages/s until the last kill: the messages keep arriving across the kills (each
    # restart costs the engine a cold start), so every kill lands while records flow, and the
    # backlog left for the final run stays small.
    report = CrashRun(
        bootstrap_servers,
        names,
        tmp_path,
        n=N,
        kills=KILLS,
        rate=150.0,
        seed=8,
        restart_broker=own_broker.restart,
        until_last_kill=True,
        final_engine=lambda document, checkpoint: SessionEngine(spark, document, checkpoint),
    ).run()
    (tmp_path / "report.json").write_text(json.dumps(report.as_dict(), indent=1))
    print(json.dumps({k: v for k, v in report.as_dict().items() if k != "cycles"}))

    assert report.kills == KILLS
    assert report.broker_restarts == 1
    # The kills after a committed batch and mid-write hit an engine that had written records in
    # that incarnation.
    assert sum(1 for c in report.cycles if c.written_at_kill > c.written_before) >= KILLS - 1
    audit = report.audit
    # Every kill landed while messages were still arriving.
    assert all(0 < c.produced_at_kill < N for c in report.cycles), report.cycles
    assert audit.missing == []
    assert audit.misplaced == []
    # Every flaky message waited in the retry topic (possibly across a kill) and then succeeded.
    produced = range(audit.produced)
    assert audit.flaky_retried == sum(1 for i in produced if kind_of(i) == "flaky")
    expected_dead = sum(1 for i in produced if kind_of(i) in ("poison", "exhausted"))
    assert audit.output_records + audit.dead_records == audit.produced + audit.duplicates
    assert audit.dead_records >= expected_dead
