"""The engine's throughput on Pulsar beside Kafka, in one run on one SparkSession.

One Kafka broker and one standalone Pulsar broker are started here; each gets a source topic of
the same N messages (the throughput benchmark's ~200-byte values, a key and one header; two
partitions). The engine's first pass over them (``bench.spark_runs.engine_first_pass``: timed
from just before the query starts to the end of the batch that routes the N-th source message)
runs per broker, in rounds whose order rotates, with the failure mix ``1%+0.1%`` in
``mode: message``; each broker's fastest round is its figure, as in bench/throughput.py.

Pulsar runs twice per round: on a source written with producer batching (as a throughput-minded
producer writes it; the figure compared with Kafka's) and on one written without (one message
per entry, as the Java client's retry and dead-letter producers and unbatched producers write):
the connector reads and acknowledges entries, so the second shows its cost per entry. No
``maxOffsetsPerTrigger`` is set: every run reads the whole backlog in its first micro-batch.
Results: ``bench/results/pulsar_throughput.json``, and the ratios Pulsar / Kafka; ``bench/run.py``
runs it as its ``pulsar`` benchmark and ``bench/report.py`` puts it in docs/benchmarks.md.

    python -m bench.pulsar_throughput [--n 100000] [--rounds 3]
    bench/run.sh --only pulsar [--pulsar-n 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from bench.common import (
    TRACE_HEADER,
    VALUE_BYTES,
    bench_session,
    fill_topic,
    log,
    source_value,
    unique,
    write_json,
)
from bench.processors import entrypoint
from bench.spark_runs import engine_first_pass
from spark_dlq_devtools.kafka import KafkaBroker, create_topics
from spark_dlq_devtools.paths import work_dir
from spark_dlq_devtools.pulsar import Message, PulsarBroker

MIX = "1%+0.1%"
PARTITIONS = 2


#: The runs of a round: Kafka, Pulsar with a batched source, Pulsar with an unbatched one.
BROKERS = ("kafka", "pulsar", "pulsar-unbatched")
#: Messages of each path's untimed warm-up run.
WARMUP_N = 10_000


def fill_pulsar(pulsar: PulsarBroker, topic: str, n: int, *, batching: bool = True) -> None:
    """The same messages as ``fill_topic`` writes to Kafka, with producer batching (as a
    throughput-minded producer sends them) or without."""
    filler = (
        b'{"order":"bench","amount":12.50,"currency":"EUR","items":["a","b","c"],"note":"'
        + b"x" * VALUE_BYTES
        + b'"}'
    )
    chunk = 10_000
    for first in range(0, n, chunk):
        pulsar.produce(
            topic,
            (
                Message(f"k{i}", source_value(i, filler), {TRACE_HEADER: "bench"})
                for i in range(first, min(first + chunk, n))
            ),
            batching=batching,
        )


def run(n: int, rounds: int, results: Path, *, warmup_n: int = WARMUP_N) -> dict[str, Any]:
    loadavg_start = os.getloadavg()
    workdir = work_dir(f"bench-pulsar-{os.getpid()}")
    kafka = KafkaBroker(name=f"kafka-bench-pulsar-{os.getpid()}", log_level="WARN")
    pulsar = PulsarBroker(name=f"pulsar-bench-{os.getpid()}", log_level="WARN")
    kafka.start()
    pulsar.start()
    spark = None

    def fill(broker: str, count: int) -> str:
        if broker == "kafka":
            topic = unique("source")
            create_topics(kafka.bootstrap_servers, [topic], PARTITIONS)
            fill_topic(kafka.bootstrap_servers, topic, count)
            return topic
        topic = pulsar.create_topic(unique("source"), PARTITIONS)
        fill_pulsar(pulsar, topic, count, batching=broker == "pulsar")
        return topic

    def first_pass(spark: Any, broker: str, source: str, count: int) -> dict[str, Any]:
        checkpoint = workdir / unique(f"cp-{broker}")
        if broker == "kafka":
            return engine_first_pass(
                spark,
                kafka.bootstrap_servers,
                source,
                count,
                partitions=PARTITIONS,
                mode="message",
                entrypoint=entrypoint("message", MIX),
                checkpoint=checkpoint,
            )
        return engine_first_pass(
            spark,
            "",
            source,
            count,
            partitions=PARTITIONS,
            mode="message",
            entrypoint=entrypoint("message", MIX),
            checkpoint=checkpoint,
            broker={"type": "pulsar", "serviceUrl": pulsar.service_url, "adminUrl": pulsar.admin_url},
            topics={kind: pulsar.create_topic(unique(kind), PARTITIONS) for kind in ("retry", "dlq", "out")},
        )

    try:
        sources = {broker: fill(broker, n) for broker in BROKERS}
        warmups = {broker: fill(broker, warmup_n) for broker in BROKERS if warmup_n}
        log(f"filled {n} messages on each broker")
        spark = bench_session("local[2]")
        # Each path once on a small topic, untimed: the session's first queries are cold.
        for broker, source in warmups.items():
            first_pass(spark, broker, source, warmup_n)
        runs: list[dict[str, Any]] = []
        for round_ in range(rounds):
            order = BROKERS[round_ % 3 :] + BROKERS[: round_ % 3]
            for broker in order:
                result = first_pass(spark, broker, sources[broker], n)
                runs.append(
                    {
                        "broker": broker,
                        "round": round_,
                        "seconds": result["seconds"],
                        "rate": result["rate"],
                        "batches": sum(1 for batch in result["batches"] if batch["rows"]),
                    }
                )
                log(f"{broker}: {result['rate']:.0f} messages/s ({result['seconds']:.1f} s)")
        best = {b: max(r["rate"] for r in runs if r["broker"] == b) for b in BROKERS}
        summary = {
            "n": n,
            "warmup_n": warmup_n,
            "partitions": PARTITIONS,
            "mix": MIX,
            "mode": "message",
            "runs": runs,
            "kafka_rate": round(best["kafka"]),
            "pulsar_rate": round(best["pulsar"]),
            "pulsar_vs_kafka": round(best["pulsar"] / best["kafka"], 3),
            "pulsar_unbatched_rate": round(best["pulsar-unbatched"]),
            "pulsar_unbatched_vs_kafka": round(best["pulsar-unbatched"] / best["kafka"], 3),
            "loadavg_start": loadavg_start,
            "loadavg_end": os.getloadavg(),
        }
        write_json(results, "pulsar_throughput", summary)
        return summary
    finally:
        if spark is not None:
            spark.stop()
        pulsar.stop()
        kafka.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup-n", type=int, default=WARMUP_N, help="messages of each path's untimed warm-up")
    p.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    print(json.dumps(run(args.n, args.rounds, args.results, warmup_n=args.warmup_n), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
