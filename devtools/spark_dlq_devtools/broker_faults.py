"""Broker faults under a running engine: a replicated cluster loses nodes while messages flow.

Used by the replicated-cluster reliability test (``tests/integration/engine/test_broker_faults.py``)
and its longer bench run (``bench/broker_faults.py``). A run, on a :class:`~spark_dlq_devtools.kafka_cluster.KafkaCluster`:

1. a producer thread writes numbered messages to the source topic at a steady rate, up to ``n``
   or until the faults are over
   (the same numbers, kinds and processor as the engine crash runs, ``spark_dlq_devtools.chaos``);
2. the engine runs as a user runs it, against all three nodes;
3. one fault at a time, each while records flow: SIGKILL of the node leading the source topic's
   partition 0, then of the one leading the retry topic's, then the dead-letter topic's, then of
   the active KRaft controller; each node is started again once the cluster has fenced it (its
   partitions led by others, after the controller's loss by the next controller), and the
   cluster is let catch up (every partition fully in sync) before the next fault; then, if
   asked (the bench, ``bench/broker_faults.py``), a rolling restart of all nodes;
4. the engine keeps running until every message is accounted for, then SIGTERM;
5. the audit checks every number: in the right place at least once, never missing.

The engine is never restarted by the run: if its query dies, the run says so (``engine_exits``)
and starts it again on its checkpoint, as the spark-operator would, so that the audit still
shows whether anything was lost.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spark_dlq_devtools.chaos import Audit, SteadyProducer, audit, end_offsets, policy_document, read_topic
from spark_dlq_devtools.chaos import start_engine as _start_engine
from spark_dlq_devtools.kafka_cluster import KafkaCluster
from spark_dlq_devtools.processes import Service


@dataclass
class Fault:
    """One fault: what was done to which node, and how the engine's writes went on."""

    name: str
    node: int
    at_s: float
    written_before: int
    written_after_recovery: int
    seconds_down: float


@dataclass
class FaultReport:
    faults: list[Fault]
    rolling_restart_s: float | None
    engine_exits: list[str]
    audit: Audit
    seconds: float
    lost: int = field(init=False)

    def __post_init__(self) -> None:
        self.lost = self.audit.lost

    def as_dict(self) -> dict[str, Any]:
        return {
            "faults": [f.__dict__ for f in self.faults],
            "rolling_restart_s": None if self.rolling_restart_s is None else round(self.rolling_restart_s, 1),
            "engine_exits": self.engine_exits,
            "seconds": round(self.seconds, 1),
            **self.audit.as_dict(),
        }


class BrokerFaultRun:
    """One run against ``cluster``; ``names`` holds the source, retry, dlq and output topics
    (created by the caller, replicated)."""

    def __init__(
        self,
        cluster: KafkaCluster,
        names: dict[str, str],
        workdir: Path,
        *,
        n: int,
        rate: float,
        rolling_restart: bool = False,
        log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    ) -> None:
        self.cluster, self.names, self.workdir = cluster, names, workdir
        self.n, self.rate = n, rate
        self.rolling_restart = rolling_restart
        self.log = log
        self.policy = workdir / "policy.yaml"
        self.checkpoint = workdir / "checkpoint"
        self.engine_exits: list[str] = []
        self._starts = 0
        self._engine: Service | None = None

    # --- the engine, kept running ---------------------------------------------------------------

    def _start_engine(self) -> None:
        self._starts += 1
        self._engine = _start_engine(
            self.policy, self.checkpoint, self.workdir / f"engine-{self._starts}.log"
        )

    def _keep_engine_running(self) -> None:
        """If the engine's query died, record why and start it again on its checkpoint."""
        assert self._engine is not None
        if not self._engine.alive():
            status = self._engine.process.poll() if self._engine.process is not None else None
            self.engine_exits.append(f"exit {status}: {self._engine.tail(3)}")
            self.log(f"broker-faults: the engine exited ({status}); starting it again")
            self._start_engine()

    def _written(self) -> int:
        return end_offsets(
            self.cluster.bootstrap_servers, [self.names["output"], self.names["retry"], self.names["dlq"]]
        )

    def _wait_for_writes(self, *, beyond: int, timeout: float = 180.0) -> int:
        """Wait until the engine has written past ``beyond`` (it is making progress)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._keep_engine_running()
            written = self._written()
            if written > beyond:
                return written
            time.sleep(0.25)
        assert self._engine is not None
        raise TimeoutError(f"the engine wrote nothing for {timeout:.0f}s:\n{self._engine.tail()}")

    # --- the run -----------------------------------------------------------------------------------

    def _fault(self, name: str, node: int, began: float, *, writing_past: int | None = None) -> Fault:
        """Kill ``node`` once the engine has written past ``writing_past`` (default: what it has
        written now), keep it down until the cluster has fenced it (its partitions moved to
        another leader, after a controller's loss a new controller elected), start it, and wait
        for the engine's next write."""
        before = self._wait_for_writes(beyond=self._written() if writing_past is None else writing_past)
        at = time.monotonic()
        self.log(f"broker-faults: {name}: SIGKILL node {node}")
        self.cluster.kill(node)
        self.cluster.wait_fenced(node)
        self._keep_engine_running()
        self.cluster.start_node(node)
        self.cluster.wait_fully_replicated()
        down = time.monotonic() - at
        after = self._wait_for_writes(beyond=self._written())
        return Fault(name, node, round(at - began, 1), before, after, round(down, 1))

    def run(self, *, settle_timeout: float = 600.0) -> FaultReport:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.policy.write_text(yaml.safe_dump(policy_document(self.names, self.cluster.bootstrap_servers)))
        began = time.monotonic()
        producer = SteadyProducer(self.cluster.bootstrap_servers, self.names["source"], self.n, self.rate)
        producer.start()
        self._start_engine()
        faults: list[Fault] = []
        targets: list[tuple[str, Callable[[], int]]] = [
            ("source-leader", lambda: self.cluster.leader_of(self.names["source"])),
            ("retry-leader", lambda: self.cluster.leader_of(self.names["retry"])),
            ("dead-letter-leader", lambda: self.cluster.leader_of(self.names["dlq"])),
            ("active-controller", self.cluster.active_controller),
        ]
        for name, target in targets:
            # The next fault comes once the engine writes past its write after the last one.
            past = faults[-1].written_after_recovery if faults else None
            faults.append(self._fault(name, target(), began, writing_past=past))
        rolling_s = None
        if self.rolling_restart:
            self.log("broker-faults: rolling restart of every node")
            rolling = time.monotonic()
            self.cluster.rolling_restart()
            rolling_s = time.monotonic() - rolling
        # The faults are over: what was produced so far is what the audit accounts for.
        producer.finish()
        producer.join(900)
        if producer.error is not None:
            raise RuntimeError(f"the producer failed: {producer.error}")
        self.n = producer.sent
        result = self._settle(settle_timeout)
        return FaultReport(
            faults=faults,
            rolling_restart_s=rolling_s,
            engine_exits=self.engine_exits,
            audit=result,
            seconds=time.monotonic() - began,
        )

    def _settle(self, timeout: float) -> Audit:
        """Let the engine run until every number is accounted for, then stop it. The topics
        are read (the audit) only once the output and the dead-letter topic hold as many records
        as were produced, each of which needs one."""
        deadline = time.monotonic() + timeout
        bootstrap = self.cluster.bootstrap_servers
        try:
            while True:
                time.sleep(0.5)
                self._keep_engine_running()
                routed = end_offsets(bootstrap, [self.names["output"], self.names["dlq"]])
                if routed < self.n and time.monotonic() < deadline:
                    continue
                result = audit(
                    self.n,
                    read_topic(bootstrap, self.names["output"]),
                    read_topic(bootstrap, self.names["dlq"]),
                )
                if not result.missing or time.monotonic() > deadline:
                    return result
        finally:
            if self._engine is not None:
                self._engine.stop(timeout=60)
