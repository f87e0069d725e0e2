"""``docs/benchmarks.md`` and its plots, from the JSON results of one run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import RESULTS

NAMES = (
    "meta",
    "routing",
    "throughput",
    "peers",
    "pulsar_throughput",
    "memory",
    "scaling",
    "precision",
    "operator",
)


def load(results: Path = RESULTS) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in NAMES:
        path = results / f"{name}.json"
        if path.exists():
            data[name] = json.loads(path.read_text())
    return data


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("**met**" if value else "**not met**")


# ---------------------------------------------------------------------------------------------
# Plots


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_throughput(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    summary = data["summary"]
    mixes = data["mixes"]
    series: list[tuple[str, Callable[[str], Any]]] = [
        ("Spark copy (ceiling)", lambda m: summary["by_mix"][m].get("spark_copy")),
        (
            "copy through mapInArrow (PySpark's ceiling)",
            lambda m: summary["by_mix"][m].get("spark_arrow_copy"),
        ),
        ("engine batch", lambda m: summary["by_mix"][m]["engine"].get("batch")),
        ("engine message", lambda m: summary["by_mix"][m]["engine"].get("message")),
        ("hand-written loop", lambda m: summary["by_mix"][m]["hand_loop"]),
    ]
    series = [(label, get) for label, get in series if any(get(m) for m in mixes)]  # a run without it
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(series)
    for i, (label, get) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(mixes))]
        ys = [get(m) or 0 for m in mixes]
        bars = ax.bar(xs, ys, width, label=label)
        ax.bar_label(bars, labels=[f"{y / 1000:.0f}k" if y else "" for y in ys], fontsize=8)
    if summary.get("raw_copy"):
        ax.axhline(summary["raw_copy"], color="grey", linestyle=":", label="raw confluent-kafka copy")
    ax.set_xticks(range(len(mixes)), [f"failures {m}" for m in mixes])
    ax.set_ylabel("messages / second")
    ax.set_title(f"Throughput, {data['n']:,} messages, {data['partitions']} partitions, local[2]")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.25)  # room for the legend above the bars
    ax.legend(fontsize=8, loc="upper center", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scaling(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for cores in sorted({p["cores"] for p in data["points"]}):
        points = sorted((p for p in data["points"] if p["cores"] == cores), key=lambda p: p["partitions"])
        xs = [p["partitions"] for p in points]
        ax.plot(
            xs, [p["engine_rate"] for p in points], marker="o", label=f"engine {data['mode']}, local[{cores}]"
        )
        ax.plot(
            xs,
            [p["copy_rate"] for p in points],
            marker="s",
            linestyle="--",
            label=f"Spark copy, local[{cores}]",
        )
    ax.set_xscale("log")
    ticks = sorted({p["partitions"] for p in data["points"]})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("source partitions")
    ax.set_ylabel("messages / second")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Scaling, {data['n']:,} messages, failures {data['mix']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_precision(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(10, 4.2))
    target = data["target_p99_ms"]
    for run in data["runs"]:
        values = run["lateness_ms"]
        if not values:
            continue
        hist.hist(values, bins=60, alpha=0.5, label=run["kind"])
        ys = [(i + 1) / len(values) for i in range(len(values))]
        cdf.plot(values, ys, label=run["kind"])
    for ax in (hist, cdf):
        ax.axvline(target, color="red", linestyle="--", label=f"target p99 {target} ms")
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel("lateness: processed - dlq.deliver.at (ms)")
    hist.set_ylabel("messages")
    cdf.set_ylabel("share of messages")
    hist.set_title("Lateness distribution")
    cdf.set_title("Cumulative")
    hist.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_memory(data: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    samples = data.get("samples") or []
    if not samples:
        return
    fig, ax = plt.subplots(figsize=(8, 3.8))
    ts = [s["t"] for s in samples]
    ax.plot(ts, [s["jvm_rss_kib"] / 1024 for s in samples], label="JVM (driver + executor) RSS")
    ax.plot(ts, [s["python_workers_rss_kib"] / 1024 for s in samples], label="Python workers, sum of RSS")
    ax.set_xlabel("seconds into benchmark 1")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("Memory during the throughput benchmark")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# The document


PEER_LABELS = {
    "spring_kafka": "Spring Kafka @RetryableTopic",
    "spring_kafka_no_seek": "Spring Kafka, seekAfterError off",
    "kafka_connect": "Kafka Connect sink, DLQ on",
}


def _peer_kinds(data: dict[str, Any]) -> list[str]:
    """The peers' kinds present in a result, in ``PEER_LABELS``' order."""
    present = {r["kind"] for r in data["runs"]}
    return [kind for kind in PEER_LABELS if kind in present]


def plot_peers(data: dict[str, Any], path: Path) -> None:
    """Messages/s and CPU µs per message of the Spark copy, the engine and each peer, per mix."""
    plt = _pyplot()
    summary = data["summary"]
    mixes = data["mixes"]
    series: list[tuple[str, Callable[[str], Any], Callable[[str], Any]]] = [
        (
            "Spark copy (ceiling)",
            lambda m: summary["by_mix"][m].get("spark_copy"),
            lambda m: summary["by_mix"][m].get("spark_copy_cpu_us"),
        ),
        *[
            (
                f"engine {mode}",
                lambda m, mode=mode: summary["by_mix"][m]["engine"].get(mode),
                lambda m, mode=mode: summary["by_mix"][m]["engine_cpu_us"].get(mode),
            )
            for mode in data["modes"]
        ],
        *[
            (
                PEER_LABELS[kind],
                lambda m, kind=kind: summary["by_mix"][m].get("peers", {}).get(kind, {}).get("rate"),
                lambda m, kind=kind: summary["by_mix"][m].get("peers", {}).get(kind, {}).get("cpu_us"),
            )
            for kind in _peer_kinds(data)
        ],
    ]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(series)
    for ax, pick, unit in (
        (axes[0], 1, "messages / second"),
        (axes[1], 2, "CPU µs per message (all processes)"),
    ):
        for i, (label, rate, cpu_us) in enumerate(series):
            get = rate if pick == 1 else cpu_us
            xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(mixes))]
            ys = [get(m) or 0 for m in mixes]
            bars = ax.bar(xs, ys, width, label=label)
            labels = [(f"{y / 1000:.0f}k" if pick == 1 else f"{y:.0f}") if y else "" for y in ys]
            ax.bar_label(bars, labels=labels, fontsize=7)
        ax.set_xticks(range(len(mixes)), [f"failures {m}" for m in mixes])
        ax.set_ylabel(unit)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.3)
    axes[0].set_title(f"Throughput, {data['n']:,} messages, {data['partitions']} partitions")
    axes[1].set_title("CPU per message (lower is better)")
    axes[0].legend(fontsize=7, loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _peers_section(data: dict[str, Any], image: str) -> list[str]:
    s = data["summary"]
    kinds = _peer_kinds(data)
    lines = [
        "## 1b. Peers: Spring Kafka and Kafka Connect beside the engine",
        "",
        f"One run, {data['n']:,} messages in a source topic of {data['partitions']} partitions, in "
        f"{data.get('rounds', 1)} round(s) per failure mix of: the plain Spark copy, the engine in each "
        "mode, then each peer in its own JVM (built by `scripts/setup/java_programs.sh` from `bench/peers/`). "
        "The peers run the same processor (transient messages fail their first delivery, poison ones "
        "always fail) with the same fixed 200 ms back-off and 3 deliveries at most:",
        "",
        "- Spring Kafka: a `@KafkaListener` with `@RetryableTopic` (one retry topic, the poison exception "
        "excluded from retries so it goes straight to the DLT), one consumer thread per partition, "
        "successes sent to the output topic with `KafkaTemplate` (not awaited before the commit); "
        "Spring's defaults otherwise, and, as `spring-no-seek` where it was run, the same with the error "
        "handler's `seekAfterError` off (by default it seeks back after a failed record and fetches the "
        "rest of the poll's records again);",
        "- Kafka Connect: a standalone worker (connect-runtime) with a sink connector that publishes to "
        "the output topic (every send awaited before each offset commit) and a transform that throws a "
        "`RetriableException` for a transient message and a `DataException` for a poison one; "
        "`errors.tolerance=all`, `errors.retry.timeout`, `errors.retry.delay.max.ms=200`, the DLQ topic "
        "with context headers.",
        "",
        "A peer's run is timed from its first source partition's assignment (its JVM's start is left "
        "out) until the output and dead-letter topics hold every expected message, retries included; its "
        "CPU is every process's (the peer's JVM, the broker, Spark's idle JVM, the bench process) over "
        "that span. The engine's figure is its first pass (as in section 1), so its redeliveries are not "
        "in it; for Spring Kafka the first pass is given too. Then both topics are read back: each "
        "message must be in the output topic, or, if poison, in the dead-letter topic with its error "
        "header, once. The engine rows show its first pass's counts (outputs, and dead letters so far: the poison messages are still being retried)."
        "",
        "| run | failures | round | messages/s | seconds | first pass s | CPU µs per message | outputs | "
        "dead | duplicates | missing | routing |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in data["runs"]:
        label = PEER_LABELS.get(r["kind"]) or (
            f"engine, mode {r['mode']}" if r["kind"] == "engine" else "plain Spark copy"
        )
        c = r.get("counts") or {}
        if r["kind"] in PEER_LABELS:
            routed = (
                f"{_fmt(c['output'])} | {_fmt(c['dead'])} | "
                f"{c['output_duplicates'] + c['dead_duplicates']} | {c['missing_output'] + c['missing_dead']} | "
                f"{'correct' if c['correct'] else '**wrong**'}"
            )
        elif r["kind"] == "engine":
            routed = f"{_fmt(c.get('output'))} | {_fmt(c.get('dead'))} | - | - | -"
        else:
            routed = "- | - | - | - | -"
        first = r.get("first_pass_seconds")
        lines.append(
            f"| {label} | {r['group']} | {r['round'] + 1} | {_fmt(r['rate'])} | {r['seconds']:.2f} | "
            f"{'-' if first is None else f'{first:.2f}'} | {_fmt(r['cpu_us_per_message'], 1)} | {routed} |"
        )
    lines += [
        "",
        "Fastest run of each kind per mix, messages/s, and its lowest CPU µs per message:",
        "",
        "| failures | Spark copy | engine batch | engine message | "
        + " | ".join(PEER_LABELS[k] for k in kinds)
        + " |",
        "| --- " * (4 + len(kinds)) + "|",
    ]
    for mix in data["mixes"]:
        row = s["by_mix"][mix]
        peers = row.get("peers", {})
        engine, engine_cpu = row["engine"], row["engine_cpu_us"]
        cells = [
            (row["spark_copy"], row.get("spark_copy_cpu_us")),
            (engine.get("batch"), engine_cpu.get("batch")),
            (engine.get("message"), engine_cpu.get("message")),
            *((peers.get(k, {}).get("rate"), peers.get(k, {}).get("cpu_us")) for k in kinds),
        ]
        lines.append(
            f"| {mix} | " + " | ".join(f"{_fmt(rate)} ({_fmt(cpu, 1)} µs)" for rate, cpu in cells) + " |"
        )
    lines += ["", *_peer_verdicts(data), "", f"![peers]({image})", ""]
    return lines


def _peer_verdicts(data: dict[str, Any]) -> list[str]:
    """Per mix and peer, where the peer wins against the engine's better mode, in plain words."""
    out = [
        "Where a peer wins (against the engine's faster mode of the mix, by messages/s; and by CPU µs per "
        "message against its cheaper mode):",
        "",
    ]
    for mix in data["mixes"]:
        row = data["summary"]["by_mix"][mix]
        engine, engine_cpu = row["engine"], row["engine_cpu_us"]
        if not engine:
            continue
        best = max(engine.values())
        cheapest = min(engine_cpu.values())
        for kind, peer in row.get("peers", {}).items():
            by_rate = peer["rate"] / best if best else 0.0
            by_cpu = cheapest / peer["cpu_us"] if peer["cpu_us"] else 0.0
            wins = [w for w, ok in (("messages/s", by_rate > 1), ("CPU per message", by_cpu > 1)) if ok]
            verdict = f"**the peer wins on {' and '.join(wins)}**" if wins else "the engine wins on both"
            out.append(
                f"- {mix}, {PEER_LABELS[kind]}: {by_rate:.2f}x the engine's messages/s, "
                f"{by_cpu:.2f}x its CPU efficiency: {verdict}"
                f"{'' if peer['correct'] else '; its routing was **wrong**'}."
            )
    return out


def _throughput_section(data: dict[str, Any], image: str) -> list[str]:
    s = data["summary"]
    lines = [
        "## 1. Engine throughput",
        "",
        f"{data['n']:,} messages of about 200 bytes (a key and one header each) in a source topic of "
        f"{data['partitions']} partitions, on `local[2]`. The processor returns the value (trivial). "
        "Transient failures fail the first delivery and succeed on the retry; poison messages always "
        "fail (retried twice, then dead-lettered as `exhausted`). Retry backoff: fixed 200 ms.",
        "",
        "| run | failures | round | messages/s | seconds | vs fastest Spark copy of the mix | "
        "vs fastest copy through mapInArrow | CPU µs per message |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    copy = s["spark_copy"]
    for r in data["runs"]:
        label = {
            "engine": f"engine, mode {r['mode']}",
            "spark_copy": "plain Spark copy",
            "spark_arrow_copy": "Spark copy through an identity mapInArrow",
            "hand_loop": "hand-written confluent-kafka loop",
            "raw_copy": "raw confluent-kafka copy",
        }[r["kind"]]
        group = r.get("group", r["mix"])
        ref = s["by_mix"][group]["spark_copy"] if group in s["by_mix"] else copy
        arrow = s["by_mix"].get(group, {}).get("spark_arrow_copy")
        compared = ("engine", "hand_loop", "spark_arrow_copy")
        ratio = f"{r['rate'] / ref:.2f}x" if ref and r["kind"] in compared else "-"
        arrow_ratio = f"{r['rate'] / arrow:.2f}x" if arrow and r["kind"] in ("engine", "hand_loop") else "-"
        cpu = _fmt(r.get("cpu_us_per_message"), 1)
        lines.append(
            f"| {label} | {'-' if r['kind'] == 'raw_copy' else group or '-'} | {r.get('round', 0) + 1} | {_fmt(r['rate'])} | {r['seconds']:.2f} "
            f"| {ratio} | {arrow_ratio} | {cpu} |"
        )
    arrow_runs = s.get("spark_arrow_copy_runs") or []
    lines += [
        "",
        f"Spark copy: {', '.join(_fmt(c) for c in s['spark_copy_runs'])} messages/s, in the order run"
        + (
            f"; through an identity `mapInArrow`: {', '.join(_fmt(c) for c in arrow_runs)}. "
            if arrow_runs
            else ". "
        )
        + f"Each failure mix is measured in {data.get('rounds', 1)} round(s) of the copies and the engine in "
        "both modes (each order reversed every other round), and each kind is represented by its fastest "
        "run of the mix: the JVM keeps getting faster as it compiles, and other load only ever slows a run "
        "down. The copy rows show the mix they were measured with; the copies themselves have no processor. "
        "The copy through `mapInArrow` hands every row to a Python worker as Arrow and takes it back "
        "unchanged: the least any PySpark router pays, so the second ceiling. "
        f"Raw confluent-kafka copy: {_fmt(s.get('raw_copy'))} messages/s. CPU µs per message is the CPU "
        "time of every process involved (Spark's JVM and Python workers, the broker, and the bench process "
        "that runs the confluent-kafka baselines) divided by N; it is distorted far less than wall-clock "
        "time by other load on a shared machine, so the ratios by CPU (copy's CPU per message / engine's) "
        "are given beside the wall-clock ratios.",
        "",
        "### Ratios and targets",
        "",
        "| failures | batch / copy | message / copy | batch / copy by CPU | message / copy by CPU | "
        "batch / hand loop | message / hand loop | batch >= 0.8x copy | message >= 0.5x copy | "
        "either >= 2x hand loop |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    arrow_rows: list[str] = []
    arrow_lines = [
        "",
        "Against the second ceiling, the copy through an identity `mapInArrow` (by wall clock and by CPU "
        "per message; the target of issue 28 is the faster mode at 0.9x or more, at 1%+0.1%):",
        "",
        "| failures | Arrow copy / copy | batch / Arrow copy | message / Arrow copy | "
        "batch / Arrow copy by CPU | message / Arrow copy by CPU | either >= 0.9x Arrow copy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for mix in data["mixes"]:
        row = s["by_mix"][mix]
        ratios, met = row["ratios"], row["targets_met"]

        def fmt(name: str, ratios: dict[str, float] = ratios) -> str:
            return f"{ratios[name]:.2f}x" if name in ratios else "-"

        headline = " (headline, issue 3)" if mix == s["headline_mix"] else ""
        lines.append(
            f"| {mix}{headline} | {fmt('batch_vs_copy')} | {fmt('message_vs_copy')} | "
            f"{fmt('batch_vs_copy_by_cpu')} | {fmt('message_vs_copy_by_cpu')} | "
            f"{fmt('batch_vs_hand_loop')} | {fmt('message_vs_hand_loop')} | "
            f"{_yes(met.get('batch_vs_copy'))} | {_yes(met.get('message_vs_copy'))} | "
            f"{_yes(met.get('engine_vs_hand_loop'))} |"
        )
        if "engine_vs_arrow_copy" in ratios:
            arrow_rows.append(
                f"| {mix}{headline} | {fmt('arrow_copy_vs_copy')} | {fmt('batch_vs_arrow_copy')} | "
                f"{fmt('message_vs_arrow_copy')} | {fmt('batch_vs_arrow_copy_by_cpu')} | "
                f"{fmt('message_vs_arrow_copy_by_cpu')} | {_yes(met.get('engine_vs_arrow_copy'))} |"
            )
    if arrow_rows:
        lines += arrow_lines + arrow_rows
    lines += ["", f"![throughput]({image})", ""]
    return lines


def _routing_section(data: dict[str, Any]) -> list[str]:
    lines = [
        "### The Python side alone",
        "",
        f"`route_batch` on a {data['rows_per_batch']:,}-row Arrow batch like the ones `mapInArrow` hands over, "
        "with the same processors, outside Spark (`bench/routing.py`; CPU time, best of 7 rounds): what "
        "Python costs per message, before any transport between the JVM and Python.",
        "",
        "| mode | failures | CPU µs per message | messages per CPU second |",
        "| --- | --- | ---: | ---: |",
    ]
    for r in data["runs"]:
        lines.append(
            f"| {r['mode']} | {r['mix']} | {r['cpu_us_per_message']:.2f} | "
            f"{_fmt(r['messages_per_cpu_second'])} |"
        )
    return [*lines, ""]


def _memory_section(data: dict[str, Any], image: str | None) -> list[str]:
    lines = [
        "## 5. Memory during benchmark 1",
        "",
        "Sampled from `/proc` every "
        f"{data['interval_s']} s during the whole throughput benchmark (warm-up, copies, every engine run). "
        "In local mode the driver and the executor are one JVM (`spark.driver.memory="
        f"{data.get('driver_memory', '?')}`); the Python workers are its descendants "
        "(`pyspark.daemon` and the workers it forks).",
        "",
        "| process | peak RSS (MiB) |",
        "| --- | ---: |",
        f"| JVM: driver + executor | {_fmt(data['jvm_peak_rss_mib'])} |",
        f"| largest single Python worker | {_fmt(data['python_worker_peak_rss_mib'])} |",
        f"| all Python workers together (peak of the sum) | {_fmt(data['python_workers_sum_peak_rss_mib'])} |",
        "",
        f"Python worker processes seen: {data['python_workers_seen']}.",
        "",
    ]
    if image:
        lines += [f"![memory]({image})", ""]
    return lines


def _scaling_section(data: dict[str, Any], image: str, throughput: dict[str, Any] | None = None) -> list[str]:
    lines = [
        "## 2. Scaling",
        "",
        f"{data['n']:,} messages, engine in `mode: {data['mode']}`, failures {data['mix']}; each point is a "
        "fresh SparkSession in its own process (warm-up first), beside the plain Spark copy in the same "
        "process.",
        "",
        "| cores | partitions | engine msg/s | Spark copy msg/s | engine / copy |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in sorted(data["points"], key=lambda p: (p["cores"], p["partitions"])):
        lines.append(
            f"| {p['cores']} | {p['partitions']} | {_fmt(p['engine_rate'])} | {_fmt(p['copy_rate'])} | "
            f"{p['engine_rate'] / p['copy_rate']:.2f}x |"
        )
    lines += ["", f"![scaling]({image})", "", "### Across executors (an estimate)", ""]
    rates = {(p["cores"], p["partitions"]): p["engine_rate"] for p in data["points"]}
    one = [r for (c, _), r in rates.items() if c == 1]
    two = [r for (c, _), r in rates.items() if c == 2]
    if one and two:
        lines += [
            f"`local[1]` is not one core of CPU here: its task's JVM thread, the task's Python worker, the "
            "Kafka producer's network thread and the broker run side by side on both cores of this machine, "
            f"so one task slot routed {_fmt(min(one))}-{_fmt(max(one))} messages/s and two slots "
            f"{_fmt(min(two))}-{_fmt(max(two))}: the machine, not the number of slots, is the limit, and these "
            "points cannot show how the engine grows with cores.",
            "",
        ]
    per_core = _engine_rate_per_spark_core(throughput)
    if per_core:
        low, high = per_core
        lines.append(
            "The estimate therefore starts from CPU. In benchmark 1 the engine's Spark processes (the JVM "
            "and its Python workers; the broker and the benchmark excluded) spent "
            f"{1e6 / high:.0f}-{1e6 / low:.0f} µs of CPU per message, so one fully used executor core routes "
            f"about **{_fmt(low)}-{_fmt(high)} messages/s**. Each source partition is one Spark task with its "
            "own Python worker, and no message passes through the driver (per micro-batch it only plans, "
            "commits offsets and the delay stage's state), so E executors of C cores should route about "
            f"E x C x {_fmt(low)} messages/s as long as the source topic has at least E x C partitions and the "
            "brokers keep up, less the network hop between executors and brokers that local mode does not "
            "have. Partitions, then brokers, are the limits to check before executors."
        )
    lines.append("")
    return lines


def _engine_rate_per_spark_core(throughput: dict[str, Any] | None) -> tuple[float, float] | None:
    """Messages per CPU-second of the Spark processes over benchmark 1's engine runs (lowest, highest)."""
    if not throughput:
        return None
    rates = [
        r["n"] / r["cpu_seconds"]["spark"]
        for r in throughput["runs"]
        if r["kind"] == "engine" and r.get("cpu_seconds", {}).get("spark")
    ]
    return (min(rates), max(rates)) if rates else None


def _precision_section(data: dict[str, Any], image: str) -> list[str]:
    lines = [
        "## 3. Retry precision",
        "",
        f"{data['m']:,} messages per delay kind, produced at {data['rate_per_s']:,.0f}/s while the engine "
        f"runs (trigger {data['trigger_ms']} ms); each fails, is retried through the retry topic and the "
        "delay stage, and on its last attempt the processor records `time.time()` and the message's "
        "`dlq.deliver.at`. Lateness = processed - `dlq.deliver.at`. "
        f"Target (issue 20): p99 <= {data['target_p99_ms']} ms, and none early.",
        "",
        "| delays | delivered | p50 ms | p90 ms | p99 ms | max ms | early | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in data["runs"]:
        lines.append(
            f"| {r['kind']} | {r['delivered']:,}/{r['messages']:,} | {_fmt(r['p50_ms'])} | "
            f"{_fmt(r['p90_ms'])} | {_fmt(r['p99_ms'])} | {_fmt(r['max_ms'])} | {r['early']} | "
            f"{_yes(r['target_met'])} |"
        )
    lines += ["", f"![retry lateness]({image})", ""]
    profiled = [r for r in data["runs"] if r.get("profile")]
    if profiled:
        lines += [
            f"Where the late retries (over {data['target_p99_ms']} ms) lost their time, from Spark's "
            "progress reports (`bench/precision.py`, `profile`): each is placed in the micro-batch "
            "that processed it; it fell due before that batch began (of which: its previous attempt "
            "failed in the batch just before, so no earlier batch could read it), while the batch "
            "prepared (planning, reading the retry topic, the delay stage: up to its first routed "
            "retry), or after routing had begun. Batch figures are p50 / p90 in ms; the tail is from "
            "the last record processed to the batch's end (sink flush, commit); state commits are the "
            "delay stage's RocksDB commits, summed over its tasks. Load average "
            "(1 min) at each run's start and end.",
            "",
            "| delays | late | before its batch (failed in the one before) | while it prepared "
            "| after routing began | batch period | preparation | tail | state commits | load |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in profiled:
            p, fell = r["profile"], r["profile"]["late_fell_due"]
            load = r.get("loadavg_1m_start_end") or ["?", "?"]
            lines.append(
                f"| {r['kind']} | {p['late']:,} | {fell['before_its_batch']:,} "
                f"({fell['of_which_failed_in_batch_before']:,}) | {fell['while_its_batch_prepared']:,} | "
                f"{fell['after_routing_began']:,} | {_pair(p['batch_period_ms_p50_p90'])} | "
                f"{_pair(p['batch_preparation_ms_p50_p90'])} | {_pair(p['batch_tail_ms_p50_p90'])} | "
                f"{_pair(p.get('state_commit_ms_p50_p90', [None, None]))} | {load[0]} / {load[1]} |"
            )
        lines.append("")
    return lines


def _pair(values: list[float | None]) -> str:
    return " / ".join(_fmt(v) for v in values)


#: Hand-written sections (``<number>-<name>.md``): measurements the run does not take itself,
#: kept beside the generated ones in the order of their numbers.
NOTES = Path(__file__).resolve().parent / "notes"


def notes(folder: Path = NOTES) -> list[str]:
    """The hand-written sections' lines, in the order of their file names' leading numbers."""
    files = sorted(folder.glob("*.md"), key=lambda p: (int(p.name.split("-", 1)[0]), p.name))
    return [line for path in files for line in (path.read_text().rstrip(), "")]


def write(doc: Path, results: Path = RESULTS, *, analysis: Path | None = None) -> Path:
    data = load(results)
    meta = data.get("meta", {})
    images = doc.parent / doc.stem
    images.mkdir(parents=True, exist_ok=True)
    rel = doc.stem
    lines = [
        "# Benchmarks",
        "",
        "Generated by `bench/run.sh` (`python -m bench.run`) from the JSON in "
        "`bench/results/`; do not edit by hand (the numbered sections that the run does not measure "
        "come from `bench/notes/`, the analysis from `bench/analysis.md`).",
        "",
    ]
    if meta.get("note"):
        lines += [f"> **Note.** {meta['note']}", ""]
    machine = meta.get("machine", {})
    versions = meta.get("versions", {})
    lines += [
        "## How these figures were taken",
        "",
        f"- Command: `{meta.get('command', 'bench/run.sh')}`",
        f"- Date: {meta.get('started', '?')} (took {meta.get('minutes', '?')} minutes)",
        f"- Machine: {machine.get('nproc', '?')} CPUs ({machine.get('cpu_model', '?')}), "
        f"{machine.get('memory_gib', '?')} GiB memory, Linux {machine.get('kernel', '?')}; load average "
        f"{_load(machine.get('loadavg'))} at the start, {_load(meta.get('loadavg_end'))} at the end.",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v),
        *[
            f"- Re-run afterwards: {', '.join(p['benchmarks'])} with `{p['command']}` on {p['started']} "
            f"(load average {_load(p.get('loadavg_start'))} at the start)"
            for p in meta.get("partial_runs", [])
        ],
        "- Broker: one Apache Kafka broker (KRaft) on 127.0.0.1, started by the bench, replication 1; "
        "every writer uses `acks=all` and idempotence.",
        "- Timing: each Spark run (engine or copy) is timed from just before its query starts to the end "
        "of the micro-batch that completes the N messages, as Spark's own progress reports it (start "
        "plus `triggerExecution`); the engine's figure is its first pass over the N source messages "
        "(redeliveries are not counted), after a warm-up in the same SparkSession. The confluent-kafka "
        "baselines are timed from start to the last flush and commit.",
        "",
    ]
    if "throughput" in data:
        plot_throughput(data["throughput"], images / "throughput.png")
        lines += _throughput_section(data["throughput"], f"{rel}/throughput.png")
    if "routing" in data:
        lines += _routing_section(data["routing"])
    if "peers" in data:
        plot_peers(data["peers"], images / "peers.png")
        lines += _peers_section(data["peers"], f"{rel}/peers.png")
    if "pulsar_throughput" in data:
        lines += _pulsar_section(data["pulsar_throughput"])
    if "scaling" in data:
        plot_scaling(data["scaling"], images / "scaling.png")
        lines += _scaling_section(data["scaling"], f"{rel}/scaling.png", data.get("throughput"))
    if "precision" in data:
        plot_precision(data["precision"], images / "precision.png")
        lines += _precision_section(data["precision"], f"{rel}/precision.png")
    if "operator" in data:
        lines += _operator_section(data["operator"])
    if "memory" in data:
        image = None
        if data["memory"].get("samples"):
            plot_memory(data["memory"], images / "memory.png")
            image = f"{rel}/memory.png"
        lines += _memory_section(data["memory"], image)
    lines += notes()
    if analysis is not None and analysis.exists():
        lines += [analysis.read_text().rstrip(), ""]
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text("\n".join(lines))
    return doc


#: Issue 28's target: the engine's rate on Pulsar at least this share of its rate on Kafka.
PULSAR_TARGET = 0.8


def _pulsar_section(data: dict[str, Any]) -> list[str]:
    """Benchmark 1c: the engine's first pass on Pulsar beside Kafka (bench/pulsar_throughput.py)."""
    names = {
        "kafka": "Kafka (Spark's Kafka connector)",
        "pulsar": "Pulsar (the engine's JVM connector), source written with batching",
        "pulsar-unbatched": "Pulsar, source written without batching",
    }
    brokers = [b for b in names if any(r["broker"] == b for r in data["runs"])]
    rounds = {b: [r for r in data["runs"] if r["broker"] == b] for b in brokers}
    best = {b: max(rounds[b], key=lambda r: r["rate"]) for b in brokers}
    ratio = {"kafka": 1.0, "pulsar": data["pulsar_vs_kafka"]}
    if "pulsar_unbatched_vs_kafka" in data:
        ratio["pulsar-unbatched"] = data["pulsar_unbatched_vs_kafka"]
    per_broker = f"{len(rounds['kafka'])} round" + ("s" if len(rounds["kafka"]) != 1 else "")
    load = f"{_load(data.get('loadavg_end'))} at the end"
    if data.get("loadavg_start"):
        load = f"{_load(data['loadavg_start'])} at the start, {load}"
    rows = [
        (
            names[b],
            _fmt(best[b]["rate"]),
            f"{ratio[b]:.2f}x",
            ", ".join(_fmt(r["rate"]) for r in rounds[b]),
            f"{best[b]['seconds']:.1f} s",
            str(best[b].get("batches", "")),
        )
        for b in brokers
    ]
    return [
        "## 1c. Pulsar beside Kafka",
        "",
        f"`bench/pulsar_throughput.py` (`bench/run.sh --only pulsar`): the engine's first pass over the same "
        f"{data['n']:,} messages on a Kafka broker and on a standalone Pulsar, both started by the bench "
        f"({data['partitions']} partitions, `mode: {data['mode']}`, failure mix {data['mix']}, one `local[2]` "
        f"session, {per_broker} per broker in rotating order, the fastest of each; "
        f"start-up of the query included). Load average {load}.",
        "",
        "| broker | msg/s (fastest round) | vs Kafka | each round, msg/s | fastest round's time "
        "| its micro-batches with input |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
        *[f"| {' | '.join(row)} |" for row in rows],
        "",
        f"Target (issue 28): Pulsar at 0.8x the engine's Kafka rate or more: "
        f"{'met' if data['pulsar_vs_kafka'] >= PULSAR_TARGET else 'missed'} ({data['pulsar_vs_kafka']:.2f}x). "
        "A producer's batch is one Pulsar entry; the unbatched source (one message per entry) shows the "
        "cost per entry (section 14: half in the broker, half in the Pulsar client's receive path). Both brokers are read and written by JVM code (Spark's Kafka connector, the "
        'engine\'s Pulsar connector); docs/engine.md ("On Pulsar") has the history (0.31x with the Python '
        "data source).",
        "",
    ]


#: Issue 7's operator targets.
OPERATOR_TARGETS = {"latency_p99_ms": 1000, "bulk_s": 60, "rss_mib": 200}


def _operator_section(data: dict[str, Any]) -> list[str]:
    latency, bulk, change = data["latency"], data["throughput"], data.get("change")
    before = latency["policies"]
    rows = [
        (
            f"creation -> SparkApplication, p50 / p99 / max ({before} policies, one at a time)",
            f"{latency['p50_ms']} / {latency['p99_ms']} / {latency['max_ms']} ms",
            "p99 <= 1 s",
            latency["p99_ms"] <= OPERATOR_TARGETS["latency_p99_ms"],
        ),
        (
            f"{bulk['policies']:,} policies ({data.get('args', {}).get('clients', '?')} client threads): all created "
            "by the client",
            f"{bulk['created_s']:.1f} s",
            "",
            None,
        ),
        (
            f"{bulk['policies']:,} policies: every SparkApplication exists",
            f"{bulk['applications_s']:.1f} s",
            "",
            None,
        ),
        (
            f"{bulk['policies']:,} policies: every status written (reconciled)",
            f"{bulk['statuses_s']:.1f} s",
            "<= 60 s",
            bulk["statuses_s"] <= OPERATOR_TARGETS["bulk_s"],
        ),
        (
            f"operator RSS after the bulk ({before + bulk['policies']:,} policies)",
            f"{bulk['rss_mib']:.0f} MiB",
            "<= 200 MiB",
            bulk["rss_mib"] <= OPERATOR_TARGETS["rss_mib"],
        ),
    ]
    if change:
        rows.append(
            (
                f"policy change -> SparkApplication resubmitted, p50 / p99 / max ({change['policies']} "
                "changes, one at a time)",
                f"{change['p50_ms']} / {change['p99_ms']} / {change['max_ms']} ms",
                "",
                None,
            )
        )
    cpu = bulk.get("cpu_ms_per_policy", {})
    lines = [
        "## 4. Operator",
        "",
        f"`bench/operator_scale.py` (run {data.get('started', '?')}): the test bed's kube-apiserver, etcd and "
        "controller manager, and `dlq-operator run` in its own process; policies with `topics.create: false`, "
        "so the figures are the operator's and the API server's own cost (docs/operator-scale.md has earlier "
        "runs and where the time goes).",
        "",
        "| measure | value | target | met |",
        "| --- | ---: | --- | --- |",
        *[
            f"| {name} | {value} | {target or '-'} | {_yes(met) if met is not None else '-'} |"
            for name, value, target, met in rows
        ],
        "",
        "CPU per policy in the bulk phase: "
        + ", ".join(f"{k} {v:.0f} ms" for k, v in cpu.items())
        + f"; load average {_load(bulk.get('load_average'))} at its end.",
        "",
    ]
    return lines


def _load(value: Any) -> str:
    if not value:
        return "?"
    return " / ".join(f"{float(v):.2f}" for v in value)
