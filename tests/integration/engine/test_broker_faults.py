"""Broker faults on a replicated cluster: three KRaft nodes, replication 3,
``min.insync.replicas=2``. While messages flow, the node leading the source, the retry and the
dead-letter topic is killed in turn (SIGKILL), then the active controller; afterwards every
message is where it belongs, none missing, and the engine's query never died. See
``spark_dlq_devtools.broker_faults`` for the run; ``bench/broker_faults.py`` adds a rolling
restart of every node to the same run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_dlq_devtools.broker_faults import BrokerFaultRun
from spark_dlq_devtools.kafka_cluster import KafkaCluster, create_replicated_topics

#: At most: the producer stops once the last fault is over (the audit counts what it sent). Its
#: budget at the run's rate outlasts the faults on a slow machine: the engine must have input
#: to make progress on after each fault.
N = 250_000
#: Messages per second: fewer than the engine handles on two cores, so that its batches stay
#: small and each wait for its next write is a trigger interval, not a backlog's batch.
RATE = 100.0


@pytest.fixture
def cluster() -> Iterator[KafkaCluster]:
    kafka = KafkaCluster(name=f"kafka-cluster-{os.getpid()}")
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.remove()


@pytest.mark.timeout(1500)
def test_nothing_is_lost_when_leaders_and_the_controller_die(cluster: KafkaCluster, tmp_path: Path) -> None:
    names = {k: f"faults-{k}" for k in ("source", "retry", "dlq", "output")}
    create_replicated_topics(cluster.bootstrap_servers, names.values(), partitions=2)
    report = BrokerFaultRun(cluster, names, tmp_path, n=N, rate=RATE).run()
    (tmp_path / "report.json").write_text(json.dumps(report.as_dict(), indent=1))
    print(json.dumps(report.as_dict()))

    assert [f.name for f in report.faults] == [
        "source-leader",
        "retry-leader",
        "dead-letter-leader",
        "active-controller",
    ]
    # Each fault hit a node that was serving, and the engine wrote again after each.
    for fault in report.faults:
        assert fault.written_after_recovery > fault.written_before, fault
    assert report.audit.lost == 0, report.audit.missing[:20]
    assert report.audit.misplaced == []
    assert report.engine_exits == [], "the engine's query died under a broker fault"
