"""Where the engine's time goes on a Pulsar source written with and without producer batching.

One standalone Pulsar broker and one ``local[2]`` session, as ``bench.pulsar_throughput`` uses;
the engine's first pass over N messages on a batched and on an unbatched source, in rounds. Per
run it prints the rate and the CPU seconds each process spent (the Pulsar broker, the Spark JVM,
the Python workers); with ``--jfr DIR`` the Spark JVM's first round of each source is recorded
with Java Flight Recorder (``jcmd``), for ``jfr print --events jdk.ExecutionSample``.

    python -m bench.pulsar_profile [--n 100000] [--rounds 2] [--jfr /tmp/pulsar-jfr]

bench/notes/14-pulsar-per-entry.md has a run's figures and what they say.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import bench_session, log, unique
from bench.processors import entrypoint
from bench.pulsar_throughput import MIX, PARTITIONS, fill_pulsar
from bench.spark_runs import engine_first_pass
from spark_dlq_devtools.paths import work_dir
from spark_dlq_devtools.pulsar import PulsarBroker

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(spark_pid: int) -> dict[str, float]:
    """CPU seconds so far of the broker, the Spark JVM and the Python workers (live processes)."""
    found: dict[str, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if "PulsarStandaloneStarter" in command:
            kind = "pulsar-broker"
        elif int(entry) == spark_pid:
            kind = "spark-jvm"
        elif "python" in command and ("pyspark" in command or "daemon" in command or "worker" in command):
            kind = "python-workers"
        else:
            continue
        found[kind] = found.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS
    return found


def jcmd(pid: int, *args: str) -> None:
    subprocess.run(["jcmd", str(pid), *args], check=True, capture_output=True)


def run(n: int, rounds: int, jfr: Path | None) -> list[dict[str, Any]]:
    workdir = work_dir(f"bench-pulsar-profile-{os.getpid()}")
    pulsar = PulsarBroker(name=f"pulsar-profile-{os.getpid()}", log_level="WARN")
    pulsar.start()
    spark = None

    def source(batching: bool, count: int) -> str:
        topic = pulsar.create_topic(unique("source"), PARTITIONS)
        fill_pulsar(pulsar, topic, count, batching=batching)
        return topic

    def first_pass(topic: str, count: int) -> dict[str, Any]:
        return engine_first_pass(
            spark,
            "",
            topic,
            count,
            partitions=PARTITIONS,
            mode="message",
            entrypoint=entrypoint("message", MIX),
            checkpoint=workdir / unique("cp"),
            broker={"type": "pulsar", "serviceUrl": pulsar.service_url, "adminUrl": pulsar.admin_url},
            topics={kind: pulsar.create_topic(unique(kind), PARTITIONS) for kind in ("retry", "dlq", "out")},
        )

    runs: list[dict[str, Any]] = []
    try:
        sources = {(batching, r): source(batching, n) for batching in (True, False) for r in range(rounds)}
        spark = bench_session("local[2]")
        pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        for batching in (True, False):  # untimed: the session's first queries are cold
            first_pass(source(batching, 10_000), 10_000)
        for r in range(rounds):
            for batching in (False, True):
                name = "batched" if batching else "unbatched"
                record = jfr is not None and r == 0
                if record:
                    jcmd(pid, "JFR.start", f"name={name}", "settings=profile")
                before, start = cpu_seconds(pid), time.monotonic()
                result = first_pass(sources[(batching, r)], n)
                after, wall = cpu_seconds(pid), time.monotonic() - start
                if record:
                    assert jfr is not None
                    jfr.mkdir(parents=True, exist_ok=True)
                    jcmd(pid, "JFR.dump", f"name={name}", f"filename={jfr / name}.jfr")
                    jcmd(pid, "JFR.stop", f"name={name}")
                cpu = {kind: round(after.get(kind, 0.0) - before.get(kind, 0.0), 1) for kind in after}
                runs.append(
                    {"source": name, "round": r, "rate": round(result["rate"]), "wall": wall, "cpu": cpu}
                )
                log(
                    f"{name} round {r}: {result['rate']:.0f} msg/s, CPU s "
                    + ", ".join(f"{k} {v}" for k, v in cpu.items())
                )
        return runs
    finally:
        if spark is not None:
            spark.stop()
        pulsar.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--jfr", type=Path, default=None, help="record each source's first round here")
    args = p.parse_args(argv)
    run(args.n, args.rounds, args.jfr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
