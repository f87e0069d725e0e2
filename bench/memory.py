"""Peak memory of the engine's processes, sampled from ``/proc`` while a benchmark runs.

In local mode the driver and the executor are one JVM; its Python workers (``pyspark.daemon``
and the workers it forks) are its descendants. Each sample reads ``VmRSS`` of the JVM and of
every Python descendant; at the end ``VmHWM`` (the kernel's own peak RSS) is read for the
processes still alive. Peaks of the sum over the workers come from the samples.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any


def _status(pid: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    except OSError:
        pass
    return fields


def _kib(fields: dict[str, str], key: str) -> int:
    value = fields.get(key, "0 kB").split()
    return int(value[0]) if value else 0


def _children(pid: int) -> list[int]:
    result: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            result.extend(int(c) for c in text.split())
    except OSError:
        pass
    return result


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


class MemorySampler:
    """Samples the JVM ``pid`` and its Python descendants every ``interval`` seconds."""

    def __init__(self, jvm_pid: int, interval: float = 0.25) -> None:
        self.jvm_pid = jvm_pid
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self.worker_peak: dict[int, int] = {}
        self.worker_hwm: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="memory-sampler")
        self._start = 0.0

    def __enter__(self) -> MemorySampler:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(10)

    def _sample(self) -> None:
        jvm = _status(self.jvm_pid)
        workers = 0
        count = 0
        for pid in descendants(self.jvm_pid):
            fields = _status(pid)
            if not fields.get("Name", "").startswith("python"):
                continue
            rss = _kib(fields, "VmRSS")
            count += 1
            workers += rss
            self.worker_peak[pid] = max(self.worker_peak.get(pid, 0), rss)
            self.worker_hwm[pid] = max(self.worker_hwm.get(pid, 0), _kib(fields, "VmHWM"))
        self.samples.append(
            {
                "t": round(time.monotonic() - self._start, 3),
                "jvm_rss_kib": _kib(jvm, "VmRSS"),
                "jvm_hwm_kib": _kib(jvm, "VmHWM"),
                "python_workers": count,
                "python_workers_rss_kib": workers,
            }
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)
        self._sample()

    def summary(self) -> dict[str, Any]:
        mib = 1024.0
        jvm_rss = max((s["jvm_rss_kib"] for s in self.samples), default=0)
        jvm_hwm = max((s["jvm_hwm_kib"] for s in self.samples), default=0)
        workers_sum = max((s["python_workers_rss_kib"] for s in self.samples), default=0)
        per_worker = max(list(self.worker_hwm.values()) + list(self.worker_peak.values()), default=0)
        return {
            "jvm_peak_rss_mib": round(max(jvm_rss, jvm_hwm) / mib, 1),
            "python_worker_peak_rss_mib": round(per_worker / mib, 1),
            "python_workers_sum_peak_rss_mib": round(workers_sum / mib, 1),
            "python_workers_seen": len(self.worker_peak),
            "samples": len(self.samples),
            "interval_s": self.interval,
        }


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` and of its reaped children (cutime + cstime), in clock ticks."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3 of stat): utime is field 14, so index 11 here.
    return sum(int(fields[i]) for i in (11, 12, 13, 14))


def _own_cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` itself, in clock ticks (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


class CpuSampler:
    """CPU seconds used by process trees (``roots``: name -> pid), between ``mark`` and
    ``since_mark``. Every process of each tree is sampled every ``interval`` s and keeps its last
    reading when it exits, so a Python worker that ends (and is not reaped into its parent's
    child times) still counts, less at most one interval."""

    def __init__(self, roots: dict[str, int], interval: float = 0.2) -> None:
        self.roots = roots
        self.interval = interval
        self.latest: dict[tuple[str, int], int] = {}
        self.start: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="cpu-sampler")
        self.sample()
        self._thread.start()

    def sample(self) -> None:
        readings = {}
        for name, root in self.roots.items():
            for pid in [root, *descendants(root)]:
                ticks = _own_cpu_ticks(pid)
                if ticks:
                    readings[(name, pid)] = ticks
        with self._lock:
            for key, ticks in readings.items():
                self.latest[key] = max(ticks, self.latest.get(key, 0))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def mark(self) -> None:
        self.sample()
        with self._lock:
            self.start = dict(self.latest)

    def since_mark(self) -> dict[str, float]:
        self.sample()
        used = dict.fromkeys(self.roots, 0.0)
        with self._lock:
            for (name, pid), ticks in self.latest.items():
                used[name] += (ticks - self.start.get((name, pid), 0)) / _TICKS
        return {name: round(value, 2) for name, value in used.items()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by ``pid`` and every process below it (live or reaped). The
    difference of two readings is what the tree used in between, whatever share of the
    machine it got: a measure that other load on a shared machine distorts much less than
    wall-clock time."""
    return sum(_cpu_ticks(p) for p in [pid, *descendants(pid)]) / _TICKS
