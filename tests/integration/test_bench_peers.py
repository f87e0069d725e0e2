"""The benchmark's peers (``bench/peer_runs.py``) in benchmark 1's rounds: the Spark copy, the
engine, then Spring Kafka's ``@RetryableTopic`` listener and a Kafka Connect standalone worker
with a failing transform, each peer in its own JVM on the real broker, over 2,000 messages of
the 1%+0.1% failure mix. Every message must be accounted for: each transient one published
once after its retry, each poison one dead-lettered once with its error header, nothing missing
and nothing duplicated. Then the report's peers section is written from the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import report, throughput
from bench.common import write_json
from bench.peer_runs import PEERS, expected
from spark_dlq_devtools.kafka import KafkaBroker

N = 2_000
MIX = "1%+0.1%"


def test_the_peers_route_every_message_once_beside_the_engine(
    spark: Any, kafka: KafkaBroker, bootstrap_servers: str, tmp_path: Path
) -> None:
    assert kafka.service is not None
    result = throughput.run(
        spark,
        bootstrap_servers,
        n=N,
        partitions=2,
        mixes=[MIX],
        modes=["batch"],
        warmup_n=0,
        workdir=tmp_path,
        baselines=False,
        broker_pid=kafka.service.pid,
        rounds=1,
        peers=list(PEERS),
    )
    kinds = [r["kind"] for r in result["runs"]]
    assert kinds == ["spark_copy", "spark_arrow_copy", "engine", "spring_kafka", "kafka_connect"]
    by_kind = dict(zip(kinds, result["runs"], strict=True))
    want_out, want_dead = expected(N, MIX)
    # 1% transient (retried, then published) + 0.1% poison (dead) of 2,000.
    assert (len(want_out), len(want_dead)) == (N - 2, 2)
    for run in (by_kind["spring_kafka"], by_kind["kafka_connect"]):
        assert run["counts"] == {
            "output": N - 2,
            "dead": 2,
            "output_duplicates": 0,
            "dead_duplicates": 0,
            "missing_output": 0,
            "missing_dead": 0,
            "wrong_output": 0,
            "wrong_dead": 0,
            "dead_with_error_header": 2,
            "correct": True,
        }, run["kind"]
        assert run["rate"] > 0
        # The peer's JVM and the broker both worked during the peer's span.
        assert run["cpu_seconds"]["broker"] > 0
        assert run["cpu_seconds"][{"spring_kafka": "spring", "kafka_connect": "connect"}[run["kind"]]] > 0
    spring = by_kind["spring_kafka"]
    assert 0 < spring["first_pass_seconds"] <= spring["seconds"]
    peers = result["summary"]["by_mix"][MIX]["peers"]
    assert set(peers) == {"spring_kafka", "kafka_connect"}
    assert all(p["correct"] and p["duplicates"] == 0 for p in peers.values())

    results = tmp_path / "results"
    write_json(results, "peers", result)
    write_json(results, "meta", {"command": "smoke", "machine": {}, "versions": {}})
    text = report.write(tmp_path / "benchmarks.md", results).read_text()
    assert "## 1b. Peers: Spring Kafka and Kafka Connect beside the engine" in text
    assert text.count("| correct |") == 2
    assert (tmp_path / "benchmarks" / "peers.png").stat().st_size > 1000
