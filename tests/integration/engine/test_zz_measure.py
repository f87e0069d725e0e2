"""Scratch (not committed): a 10 MB source record, the engine's exit and the time it took."""

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer

from tests.helpers import read_all

MIB = 1024 * 1024


def test_measure(bootstrap_servers: str, make_topic: Callable[..., str], engine: Any) -> None:
    big = {"max.message.bytes": str(12 * MIB)}
    names = {
        "source": make_topic("src", config=big),
        "retry": make_topic("retry"),
        "dlq": make_topic("dlq"),
        "output": make_topic("out", config=big),
    }
    producer = Producer({"bootstrap.servers": bootstrap_servers, "message.max.bytes": 16 * MIB})
    value = bytes(range(256)) * (10_000_000 // 256 + 1)
    producer.produce(names["source"], key=b"small-0", value=b"a", headers=[("do", b"echo")])
    producer.produce(names["source"], key=b"big", value=value, headers=[("do", b"echo")])
    for i in range(1, 5):
        producer.produce(names["source"], key=b"small-%d" % i, value=b"a", headers=[("do", b"echo")])
    assert producer.flush(30) == 0
    started = time.monotonic()
    running = engine(names, once=True, processor={"entrypoint": "tests.processors.bad_input:process"})
    status = running.join(240)
    took = time.monotonic() - started
    error = running.run.query.exception()
    print("MEASURE status", status, "took", round(took, 1), "counts", {k: v for k, v in running.run.totals.counts.items() if v})
    print("MEASURE error", str(error).splitlines()[0][:300] if error else None)
    outputs = read_all(bootstrap_servers, names["output"], timeout=5)
    dead = read_all(bootstrap_servers, names["dlq"], timeout=5)
    print("MEASURE outputs", len(outputs), "dead", [(r.key, r.value, len(r.headers), sum(len(k) + len(v or b"") for k, v in r.headers)) for r in dead])
    for r in dead:
        print("MEASURE headers", [(k, (v or b"")[:80]) for k, v in r.headers])
