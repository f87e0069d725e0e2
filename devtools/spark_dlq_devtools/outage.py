"""Outage runs: the processor's downstream goes down under load and comes back, with and without
the breaker, side by side.

Used by the breaker's test (``tests/integration/engine/test_breaker.py``, a short outage) and by
``bench/outage.py`` (the minute-long outage of docs/engine.md). A run:

1. a real HTTP service (``Downstream``, on 127.0.0.1) answers the processor (``process``: one
   request per message; its value ``<port>:<number>`` says where);
2. two engines run on the same SparkSession, each on its own topics with the same policy but
   for ``retry.breaker``, and a producer writes the same numbers to both source topics at a
   steady rate, until ``after_s`` after the service is back;
3. ``before_s`` after both engines route messages the service stops listening (every call:
   connection refused, a transient failure), ``outage_s`` later it listens again;
4. each side is drained when every number is routed (output or dead letter, from the
   engine's own counts); then the topics are read: the outputs, the dead letters by reason, and
   the records the retry topic received.

Both engines see the same outage at the same moments on the same machine, so their figures
compare directly.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_dlq_devtools.chaos import end_offsets, read_topic

ENTRYPOINT = "spark_dlq_devtools.outage:process"
#: How long one processor call waits for the service (connection refused comes at once).
CALL_TIMEOUT_S = 5.0


def process(message: Any) -> bytes:
    """The outage run's processor: the value is ``<port>:<number>``; the service's answer is
    the result. A service that is down fails the call (``ConnectionRefusedError``, transient)."""
    import urllib.request

    port, _, number = (message.value or b"").decode().partition(":")
    with urllib.request.urlopen(
        f"http://127.0.0.1:{int(port)}/{int(number)}", timeout=CALL_TIMEOUT_S
    ) as reply:
        body: bytes = reply.read()
    return body


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"done:{self.path.strip('/')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        served = getattr(self.server, "served", None)
        if served is not None:
            served.append(1)

    def log_message(self, format: str, *args: Any) -> None:
        return


class Downstream:
    """The processor's downstream: an HTTP service on 127.0.0.1 that can go down (its listening
    socket closed, so a call is refused) and come back on the same port."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.served: list[int] = []
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def is_up(self) -> bool:
        return self._server is not None

    def up(self) -> None:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        server.daemon_threads = True
        server.served = self.served  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="downstream", daemon=True)
        self._thread.start()

    def down(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(10)
        self._server = self._thread = None


@dataclass
class Side:
    """One engine of the run and what it measured. Times are seconds since the run started."""

    name: str
    breaker: Mapping[str, Any] | None
    names: dict[str, str]
    drained_at: float | None = None
    outputs: int = 0
    distinct_outputs: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    retry_writes: int = 0
    #: (time, state, reason) of each breaker transition, as the engine's breaker saw it.
    transitions: list[tuple[float, str, str]] = field(default_factory=list)
    #: (time, messages routed so far), as the run looked.
    routed: list[tuple[float, int]] = field(default_factory=list)
    #: Every committed batch: (batch id, the state it ran under, source records read, messages
    #: routed).
    batches: list[tuple[int, str, int, int]] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    status: int | None = None

    @property
    def open_batches(self) -> list[tuple[int, int]]:
        """The batches run while the breaker was open: (source records read, messages routed)."""
        return [(read, routed) for _, state, read, routed in self.batches if state == "open"]

    def figures(self, recovered_at: float) -> dict[str, Any]:
        return {
            "side": self.name,
            "outputs": self.outputs,
            "distinct_outputs": self.distinct_outputs,
            "dead_letters": dict(self.dead_letters),
            "exhausted": self.dead_letters.get("exhausted", 0),
            "retry_topic_writes": self.retry_writes,
            "drain_after_recovery_s": None
            if self.drained_at is None
            else round(max(0.0, self.drained_at - recovered_at), 1),
            "breaker_opens": sum(1 for _, state, _ in self.transitions if state == "open"),
            "missing": len(self.missing),
        }


@dataclass
class OutageRun:
    """Two engines, one outage. ``start_engine(names, spec_overrides, checkpoint)`` starts an
    in-process engine (``dlq_engine.job.runner.Run``) and returns it with its waiting thread."""

    bootstrap: str
    make_topics: Callable[[], dict[str, str]]
    workdir: Path
    outage_s: float
    before_s: float = 5.0
    after_s: float = 5.0
    rate: float = 40.0
    breaker: Mapping[str, Any] = field(default_factory=dict)
    retry: Mapping[str, Any] = field(default_factory=dict)
    trigger: str = "500ms"
    drain_timeout_s: float = 180.0
    warmup_timeout_s: float = 180.0
    #: Give the breaker's engine a Parquet dead-letter table: its sink is then ``foreachBatch``,
    #: whose jobs are submitted from the Python batch function. The engine without the breaker
    #: keeps the Kafka sink.
    table: bool = False
    log: Callable[[str], None] = print
    #: The messages written to each source topic (known once the load stops).
    produced: int = 0

    def run(self, spark: Any) -> tuple[list[Side], float]:
        """The two sides (with the breaker, then without) and when the service came back."""
        downstream = Downstream()
        downstream.up()
        sides = [
            Side("breaker", dict(self.breaker), self.make_topics()),
            Side("no breaker", None, self.make_topics()),
        ]
        engines = [self._engine(spark, side, downstream.port) for side in sides]
        try:
            return self._drive(downstream, sides, engines)
        finally:
            for engine in engines:
                engine.stop()
            downstream.down()

    def _drive(
        self, downstream: Downstream, sides: list[Side], engines: list[_Engine]
    ) -> tuple[list[Side], float]:
        producer = _TwinProducer(
            self.bootstrap, [side.names["source"] for side in sides], self.rate, downstream.port
        )
        started = time.monotonic()
        producer.start()
        # The outage starts once both engines route (a query's first batch takes seconds here).
        warm_by = started + self.warmup_timeout_s
        while min(engine.routed() for engine in engines) < max(1, int(self.rate / 2)):
            if time.monotonic() > warm_by or producer.error is not None:
                raise RuntimeError(f"the engines did not start routing: {producer.error}")
            time.sleep(0.2)
        went_down = time.monotonic() + self.before_s
        comes_back = went_down + self.outage_s
        stop_at = comes_back + self.after_s
        self.log(f"[{went_down - self.before_s - started:6.1f}s] both engines route")
        recovered_at = 0.0
        deadline = stop_at + self.drain_timeout_s
        while time.monotonic() < deadline:
            now = time.monotonic()
            if downstream.is_up and went_down <= now < comes_back:
                downstream.down()
                self.log(f"[{now - started:6.1f}s] downstream down")
            if not downstream.is_up and now >= comes_back:
                downstream.up()
                recovered_at = now - started
                self.log(f"[{recovered_at:6.1f}s] downstream up")
            if now >= stop_at and self.produced == 0:
                self.produced = producer.stop()
                self.log(f"[{now - started:6.1f}s] {self.produced} messages produced to each engine")
            for side, engine in zip(sides, engines, strict=True):
                engine.watch(side, now - started, self.log)
                side.routed.append((now - started, engine.routed()))
                if side.drained_at is None and self.produced and side.routed[-1][1] >= self.produced:
                    # The first look that found every message routed (the load had stopped).
                    side.drained_at = next(t for t, routed in side.routed if routed >= self.produced)
                    self.log(f"[{side.drained_at:6.1f}s] {side.name}: every message routed")
            if producer.error is not None:
                raise RuntimeError(f"producer failed: {producer.error}")
            if all(side.drained_at is not None for side in sides):
                break
            time.sleep(0.2)
        if self.produced == 0:
            self.produced = producer.stop()
        for side, engine in zip(sides, engines, strict=True):
            engine.watch(side, time.monotonic() - started, self.log)
            side.status = engine.stop()
            self._audit(side)
        return sides, recovered_at

    def _engine(self, spark: Any, side: Side, port: int) -> _Engine:
        from dlq_engine.model import parse_policy

        retry: dict[str, Any] = {"topic": side.names["retry"], **self.retry}
        if side.breaker is not None:
            retry["breaker"] = dict(side.breaker)
        document = {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterPolicy",
            "metadata": {"name": "outage-" + side.name.replace(" ", "-"), "namespace": "bench"},
            "spec": {
                "source": {
                    "topic": side.names["source"],
                    "subscription": "outage",
                    "startingOffsets": "earliest",
                },
                "broker": {"bootstrapServers": self.bootstrap},
                "processor": {"entrypoint": ENTRYPOINT},
                "output": {"topic": side.names["output"]},
                "retry": retry,
                "deadLetter": {"topic": side.names["dlq"], **self._table(side)},
                "spark": {"trigger": self.trigger},
            },
        }
        checkpoint = self.workdir / f"checkpoint-{side.name.replace(' ', '-')}"
        return _Engine(spark, parse_policy(document), checkpoint)

    def _table(self, side: Side) -> dict[str, Any]:
        if not self.table or side.breaker is None:
            return {}
        return {"table": {"format": "parquet", "path": str(self.workdir / "table-breaker")}}

    def _audit(self, side: Side) -> None:
        output = read_topic(self.bootstrap, side.names["output"])
        dead = read_topic(self.bootstrap, side.names["dlq"])
        side.outputs = len(output)
        numbers: Counter[int] = Counter()
        for value, _ in output:
            numbers[int((value or b"").decode().removeprefix("done:"))] += 1
        side.distinct_outputs = len(numbers)
        for value, headers in dead:
            side.dead_letters[headers.get("dlq.reason", "")] += 1
            numbers[int((value or b"").decode().partition(":")[2])] += 1
        side.missing = [i for i in range(self.produced) if numbers[i] == 0]
        side.retry_writes = end_offsets(self.bootstrap, [side.names["retry"]])


class _TwinProducer(threading.Thread):
    """Writes ``0, 1, 2, ...`` to every topic at ``rate`` messages per second each (the same
    numbers to each, value ``<port>:<number>``) until ``stop``, which returns how many."""

    def __init__(self, bootstrap: str, topics: list[str], rate: float, port: int) -> None:
        super().__init__(daemon=True, name="outage-producer")
        self.bootstrap, self.topics, self.rate, self.port = bootstrap, topics, rate, port
        self.sent = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 20})
            start = time.monotonic()
            i = 0
            while not self._halt.is_set():
                ahead = start + i / self.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
                for topic in self.topics:
                    producer.produce(topic, key=b"%d" % i, value=b"%d:%d" % (self.port, i))
                producer.poll(0)
                i += 1
                self.sent = i
            if producer.flush(60) != 0:
                raise RuntimeError(f"could not deliver every message to {self.topics}")
        except BaseException as error:  # noqa: BLE001 - reported to the run through .error
            self.error = error

    def stop(self) -> int:
        self._halt.set()
        self.join(90)
        if self.error is not None:
            raise RuntimeError(f"producer failed: {self.error}")
        return self.sent


class _Engine:
    """An engine run in this process on ``spark`` (as the engine tests run it)."""

    def __init__(self, spark: Any, policy: Any, checkpoint: Path) -> None:
        from pyspark import InheritableThread

        from dlq_engine.job.pipeline import RunOptions
        from dlq_engine.job.runner import Run

        self.run = Run(spark, policy, RunOptions(checkpoint=str(checkpoint)))
        self.status: int | None = None
        self.run.start()
        self._thread = InheritableThread(target=self._wait, daemon=True)
        self._thread.start()
        self._seen_batches: set[tuple[int, str]] = set()
        self._state = "closed"

    def _wait(self) -> None:
        self.status = self.run.wait()

    def routed(self) -> int:
        """Messages that reached their end: output (or acknowledged) and dead letters."""
        counts = self.run.totals.counts
        return counts["output"] + counts["acked"] + counts["dead"] + counts["ignored"]

    def watch(self, side: Side, at: float, log: Callable[[str], None]) -> None:
        """Note the breaker's transitions and the batches that ran while it was open."""
        breaker = self.run.breaker
        if breaker is not None and breaker.state != self._state:
            self._state = breaker.state
            reason = breaker.machine.reason if breaker.state == "open" else ""
            side.transitions.append((at, breaker.state, reason))
            log(f"[{at:6.1f}s] {side.name}: breaker {breaker.state}" + (f" ({reason})" if reason else ""))
        for progress in self._progress():
            key = (int(progress.batchId), str(progress.timestamp))
            if key in self._seen_batches:
                continue
            self._seen_batches.add(key)
            from dlq_engine.job.breaker import ran_as

            source_rows = sum(
                int(s.numInputRows) for s in progress.sources if f"[{side.names['source']}]" in s.description
            )
            side.batches.append((key[0], ran_as(progress), source_rows, _routed_in(progress)))

    def _progress(self) -> list[Any]:
        """The batch progresses not seen yet, oldest first: only those are converted from the
        JVM's (PySpark's ``recentProgress`` converts all 100 it keeps, each with dozens of py4j
        calls, which took seconds per look on this machine)."""
        from pyspark.sql.streaming.listener import StreamingQueryProgress

        query = self.run.query
        if query is None:
            return []
        fresh = []
        for jprogress in reversed(list(query._jsq.recentProgress())):
            key = (int(jprogress.batchId()), str(jprogress.timestamp()))
            if key in self._seen_batches:
                break
            fresh.append(jprogress)
        return [StreamingQueryProgress.fromJObject(p) for p in reversed(fresh)]

    def stop(self) -> int | None:
        self.run.stop()
        self._thread.join(60)
        return self.status


def _routed_in(progress: Any) -> int:
    """Messages a batch's routing handled (its observed ``total``)."""
    from dlq_engine.job.pipeline import METRICS, STATS
    from dlq_engine.routing.stats import observed_row

    metrics = progress.observedMetrics.get(METRICS)
    return int(observed_row(metrics[STATS]).get("total") or 0) if metrics is not None else 0


def side_by_side(sides: list[Side], recovered_at: float, outage_s: float, n: int) -> str:
    """The two sides' figures as a table for the test's output and the docs."""
    rows = [side.figures(recovered_at) for side in sides]
    lines = [
        f"outage of {outage_s:.0f}s, {n} messages, downstream back at {recovered_at:.1f}s",
        f"{'':32}" + "".join(f"{row['side']:>14}" for row in rows),
    ]
    for label, key in (
        ("outputs (distinct)", "distinct_outputs"),
        ("dead letters: exhausted", "exhausted"),
        ("retry-topic writes", "retry_topic_writes"),
        ("drained, s after recovery", "drain_after_recovery_s"),
        ("breaker opened", "breaker_opens"),
        ("missing", "missing"),
    ):
        lines.append(f"{label:32}" + "".join(f"{row[key]!s:>14}" for row in rows))
    return "\n".join(lines)
