"""Run spark-dlq's benchmarks and write ``docs/benchmarks.md``, its plots and JSON results.

    bench/run.sh [--n 1000000] [--only throughput,scaling,precision] [--note TEXT] ...

Starts its own Kafka broker (KRaft, on a free port) and local SparkSessions; nothing needs to
be running. Benchmarks, in order:

0. routing: the Python routing code alone on Arrow batches (no Spark, CPU time);
1. throughput (and 4, memory, sampled during it) on one ``local[2]`` session, against two
   ceilings: the plain Spark copy and the same copy through an identity ``mapInArrow``;
1b. peers: the Spring Kafka and Kafka Connect peers in rounds beside the engine and the Spark
   copy (benchmark 1's runs, without the confluent-kafka baselines), on the same session;
2. retry precision on the same session;
3. scaling, one subprocess per (cores, partitions) point;
4. operator: ``bench/operator_scale.py`` in its own process, after the broker is stopped (it
   starts the test bed's kube-apiserver, etcd and controller manager, and ``dlq-operator run``);
5. pulsar: ``bench/pulsar_throughput.py``, the engine's first pass on Pulsar beside Kafka, on a
   Kafka broker and a standalone Pulsar of its own and a session of its own (``--pulsar-n``
   messages, ``--rounds`` rounds).

Each prints its figures as it goes and writes ``bench/results/<name>.json``; the document is
rebuilt from those files at the end (``--report-only`` rebuilds it without running anything).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import precision, pulsar_throughput, report, routing, scaling, throughput
from bench.common import (
    RESULTS,
    bench_session,
    jvm_pid,
    log,
    machine,
    software_versions,
    write_json,
)
from bench.memory import MemorySampler
from bench.processors import MIXES
from dlq_engine.model.durations import parse_duration_ms
from spark_dlq_devtools.kafka import KafkaBroker
from spark_dlq_devtools.paths import REPO_ROOT, work_dir

BENCHMARKS = ("routing", "throughput", "peers", "precision", "scaling", "operator", "pulsar")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/run.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000, help="messages in the throughput source topic")
    p.add_argument("--partitions", type=int, default=2, help="source partitions for benchmark 1")
    p.add_argument("--mixes", default=",".join(MIXES), help=f"failure mixes, of {', '.join(MIXES)}")
    p.add_argument("--modes", default="batch,message", help="engine modes (batch, message)")
    p.add_argument("--warmup-n", type=int, default=200_000, help="messages in the warm-up topic")
    p.add_argument("--rounds", type=int, default=2, help="rounds of copy and engine runs per mix")
    p.add_argument(
        "--peers",
        default="spring,spring-no-seek,connect",
        help="the peers of the peers benchmark, of spring, spring-no-seek, connect",
    )
    p.add_argument(
        "--peer-mixes",
        default="0%,1%+0.1%",
        help="failure mixes of the peers benchmark (Kafka Connect retries in place: at 10%% of "
        "1,000,000 messages, 100,000 back-offs of 200 ms on 2 tasks, hours)",
    )
    p.add_argument("--peer-n", type=int, default=None, help="messages in the peers benchmark (default --n)")
    p.add_argument(
        "--pulsar-n", type=int, default=100_000, help="messages on each broker in the pulsar benchmark"
    )
    p.add_argument("--no-baselines", action="store_true", help="skip the confluent-kafka baselines")
    p.add_argument("--scaling-n", type=int, default=500_000, help="messages per scaling point")
    p.add_argument("--scaling-cores", default="1,2")
    p.add_argument("--scaling-partitions", default="1,4,12")
    p.add_argument("--retry-m", type=int, default=10_000, help="retried messages per delay kind")
    p.add_argument("--retry-rate", type=float, default=200.0, help="messages/s produced in benchmark 3")
    p.add_argument("--retry-kinds", default=",".join(precision.DELAYS))
    p.add_argument("--trigger", default="1s", help="the engine's trigger in benchmark 3")
    p.add_argument("--driver-memory", default="1g", help="spark.driver.memory (the engine's default)")
    p.add_argument("--broker-heap", default="1g")
    p.add_argument("--only", default=",".join(BENCHMARKS), help="which benchmarks to run")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--doc", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md")
    p.add_argument("--note", default="", help="a note printed at the top of the document")
    p.add_argument("--report-only", action="store_true", help="rebuild the document from the JSON")
    return p


def _list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    analysis = REPO_ROOT / "bench" / "analysis.md"
    if args.report_only:
        print(report.write(args.doc, args.results, analysis=analysis))
        return 0
    only = _list(args.only)
    unknown = set(only) - set(BENCHMARKS)
    if unknown:
        raise SystemExit(f"--only: unknown benchmark(s) {sorted(unknown)}; choose from {BENCHMARKS}")
    mixes = _list(args.mixes)
    for mix in [*mixes, *_list(args.peer_mixes)]:
        if mix not in MIXES:
            raise SystemExit(f"--mixes: unknown mix {mix!r}; choose from {list(MIXES)}")
    modes = _list(args.modes)
    started = time.time()
    meta: dict[str, Any] = {
        "command": "bench/run.sh "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "benchmarks": only,
        "note": args.note,
        "machine": machine(),
        "versions": software_versions(),
    }
    if "routing" in only:
        result = routing.run(mixes)
        write_json(args.results, "routing", result)
        print_routing(result)
    if {"throughput", "peers", "precision", "scaling"} & set(only):
        on_broker(args, only, mixes, modes)
    if "operator" in only:
        operator_scale(args.results / "operator.json", args.note)
    if "pulsar" in only:
        log(f"pulsar: the engine's first pass on Pulsar beside Kafka ({args.pulsar_n:,} messages)")
        print_pulsar(pulsar_throughput.run(args.pulsar_n, args.rounds, args.results))
    meta["minutes"] = round((time.time() - started) / 60, 1)
    meta["loadavg_end"] = os.getloadavg()
    write_json(args.results, "meta", merge_meta(args.results / "meta.json", meta, only))
    doc = report.write(args.doc, args.results, analysis=analysis)
    log(f"wrote {doc} and {args.results}/*.json in {meta['minutes']} minutes")
    return 0


def on_broker(args: argparse.Namespace, only: list[str], mixes: list[str], modes: list[str]) -> None:
    """Benchmarks 1-3 (and the memory figures), on one Kafka broker started here."""
    workdir = work_dir(f"bench-{os.getpid()}")
    broker = KafkaBroker(name=f"kafka-bench-{os.getpid()}", heap=args.broker_heap, log_level="WARN")
    log(f"starting the Kafka broker ({args.broker_heap} heap)")
    broker.start()
    bootstrap = broker.bootstrap_servers
    try:
        if {"throughput", "peers", "precision"} & set(only):
            spark = bench_session("local[2]", driver_memory=args.driver_memory)
            try:
                if "throughput" in only:
                    with MemorySampler(jvm_pid(spark)) as sampler:
                        result = throughput.run(
                            spark,
                            bootstrap,
                            n=args.n,
                            partitions=args.partitions,
                            mixes=mixes,
                            modes=modes,
                            warmup_n=args.warmup_n,
                            workdir=workdir,
                            baselines=not args.no_baselines,
                            rounds=args.rounds,
                            broker_pid=broker.service.pid if broker.service else None,
                        )
                    write_json(args.results, "throughput", result)
                    memory = {
                        **sampler.summary(),
                        "driver_memory": args.driver_memory,
                        "samples": sampler.samples,
                    }
                    write_json(args.results, "memory", memory)
                    print_throughput(result)
                    print_memory(memory)
                if "peers" in only:
                    result = throughput.run(
                        spark,
                        bootstrap,
                        n=args.peer_n or args.n,
                        partitions=args.partitions,
                        mixes=_list(args.peer_mixes),
                        modes=modes,
                        warmup_n=args.warmup_n,
                        workdir=workdir,
                        baselines=False,
                        rounds=args.rounds,
                        broker_pid=broker.service.pid if broker.service else None,
                        peers=_list(args.peers),
                        arrow_copy=False,
                    )
                    write_json(args.results, "peers", result)
                    print_throughput(result)
                if "precision" in only:
                    trigger_ms = parse_duration_ms(args.trigger)
                    result = precision.run(
                        spark,
                        bootstrap,
                        m=args.retry_m,
                        rate=args.retry_rate,
                        trigger=args.trigger,
                        trigger_ms=trigger_ms,
                        partitions=args.partitions,
                        workdir=workdir,
                        kinds=_list(args.retry_kinds),
                    )
                    write_json(args.results, "precision", result)
                    print_precision(result)
            finally:
                spark.stop()
        if "scaling" in only:
            result = scaling.run(
                bootstrap,
                n=args.scaling_n,
                warmup_n=args.warmup_n,
                mode="batch",
                mix=throughput.HEADLINE_MIX,
                workdir=workdir,
                cores=tuple(int(c) for c in _list(args.scaling_cores)),
                partitions=tuple(int(p) for p in _list(args.scaling_partitions)),
                driver_memory=args.driver_memory,
            )
            write_json(args.results, "scaling", result)
            print_scaling(result)
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(broker.root, ignore_errors=True)  # gigabytes of benchmark topics


def operator_scale(path: Path, note: str, sizes: Sequence[str] = ()) -> None:
    """Benchmark 4 (``bench/operator_scale.py``, also run alone: see docs/operator-scale.md);
    ``sizes``: its ``--latency``, ``--total``, ``--changes`` and ``--settle`` when not the defaults."""
    log("operator: policies created one at a time, then in bulk, then changed")
    command = [sys.executable, str(REPO_ROOT / "bench" / "operator_scale.py"), "--json", str(path), *sizes]
    if note:
        command += ["--note", note]
    subprocess.run(command, check=True, cwd=REPO_ROOT)


def merge_meta(path: Path, meta: dict[str, Any], only: list[str]) -> dict[str, Any]:
    """A run of every benchmark replaces the description of the run; a run of some of them is
    added to it under ``partial_runs`` (their JSON files replace the earlier ones)."""
    if set(only) == set(BENCHMARKS) or not path.exists():
        return meta
    import json

    earlier: dict[str, Any] = json.loads(path.read_text())
    partial = {k: meta[k] for k in ("benchmarks", "command", "started", "minutes", "loadavg_end")}
    partial["loadavg_start"] = meta["machine"].get("loadavg")
    earlier.setdefault("partial_runs", []).append(partial)
    return earlier


def print_routing(result: dict[str, Any]) -> None:
    print(f"\n== Python routing alone ({result['rows_per_batch']:,}-row Arrow batches)")
    for r in result["runs"]:
        print(f"{r['mode']:<8} {r['mix']:<8} {r['cpu_us_per_message']:6.2f} CPU-us/msg")


def print_throughput(result: dict[str, Any]) -> None:
    s = result["summary"]
    print(f"\n== throughput ({result['n']:,} messages, {result['partitions']} partitions)")
    print(f"spark copy        {s['spark_copy']:>12,.0f} msg/s  (runs: {s['spark_copy_runs']})")
    if s.get("spark_arrow_copy"):
        print(
            f"arrow copy        {s['spark_arrow_copy']:>12,.0f} msg/s  (runs: {s['spark_arrow_copy_runs']})"
        )
    if s.get("raw_copy"):
        print(f"raw kafka copy    {s['raw_copy']:>12,.0f} msg/s")
    for mix, row in s["by_mix"].items():
        for mode, value in row["engine"].items():
            print(f"engine {mode:<8} {mix:<8} {value:>12,.0f} msg/s")
        if row["hand_loop"]:
            print(f"hand loop {mix:<14} {row['hand_loop']:>12,.0f} msg/s")
        for kind, peer in row.get("peers", {}).items():
            print(
                f"{kind:<15} {mix:<8} {peer['rate']:>12,.0f} msg/s  {peer['cpu_us']:.1f} CPU-us/msg  "
                f"routing {'correct' if peer['correct'] else 'WRONG'}"
            )
        for name, value in row["ratios"].items():
            met = row["targets_met"].get(name)
            flag = "" if met is None else ("  target met" if met else "  TARGET NOT MET")
            print(f"  {name:<22} {value:6.2f}x{flag}")


def print_memory(memory: dict[str, Any]) -> None:
    print("\n== memory during benchmark 1")
    for key in ("jvm_peak_rss_mib", "python_worker_peak_rss_mib", "python_workers_sum_peak_rss_mib"):
        print(f"{key:<34} {memory[key]:>8,.1f}")


def print_precision(result: dict[str, Any]) -> None:
    print(f"\n== retry precision ({result['m']:,} messages, trigger {result['trigger_ms']} ms)")
    for r in result["runs"]:
        print(
            f"{r['kind']:<12} delivered {r['delivered']}/{r['messages']} p50 {r['p50_ms']} ms "
            f"p99 {r['p99_ms']} ms max {r['max_ms']} ms early {r['early']} "
            f"target {'met' if r['target_met'] else 'NOT MET'}"
        )


def print_pulsar(result: dict[str, Any]) -> None:
    print(f"\n== Pulsar beside Kafka ({result['n']:,} messages, {result['partitions']} partitions)")
    print(f"kafka  {result['kafka_rate']:>10,} msg/s")
    print(f"pulsar {result['pulsar_rate']:>10,} msg/s  ({result['pulsar_vs_kafka']:.2f}x Kafka)")
    print(
        f"pulsar, unbatched source {result['pulsar_unbatched_rate']:>10,} msg/s  "
        f"({result['pulsar_unbatched_vs_kafka']:.2f}x Kafka)"
    )


def print_scaling(result: dict[str, Any]) -> None:
    print(f"\n== scaling ({result['n']:,} messages)")
    for p in result["points"]:
        print(
            f"local[{p['cores']}] partitions {p['partitions']:>2}: engine {p['engine_rate']:>10,.0f} "
            f"copy {p['copy_rate']:>10,.0f} msg/s"
        )


if __name__ == "__main__":
    sys.exit(main())
