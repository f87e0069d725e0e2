"""Never two engines on one checkpoint: the lease in ``<checkpoint>/dlq-engine.lock``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlq_engine import cli
from dlq_engine.exits import EXIT_CHECKPOINT_LOCKED, EXIT_OK
from dlq_engine.job.checkpoint_lock import DEFAULT_LEASE_S, CheckpointLock, CheckpointLocked
from dlq_engine.job.lock_file import LOCK_FILE, HadoopLockFile
from tests.helpers import produce, read_all
from tests.integration.engine.test_cli import ENGINE, _env, _write_policy


def test_the_lease_refuses_a_live_owner_and_passes_on_when_it_runs_out(spark: Any, tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "cp")
    first = CheckpointLock(HadoopLockFile(spark, checkpoint), lease_s=3, settle_s=0.1)
    first.acquire()
    held = json.loads((tmp_path / "cp" / LOCK_FILE).read_text())
    assert (held["host"], held["pid"], held["leaseSeconds"]) == (socket.gethostname(), os.getpid(), 3)

    refused = rf"is in use by another engine pid {os.getpid()} on host"
    with pytest.raises(CheckpointLocked, match=refused):
        CheckpointLock(HadoopLockFile(spark, checkpoint), lease_s=3, settle_s=0.1, wait=False).acquire()
    # A second engine that waits is refused as soon as it sees the owner renew its lease.
    renewal = threading.Timer(1.0, first.renew)
    renewal.start()
    with pytest.raises(CheckpointLocked, match=refused):
        CheckpointLock(HadoopLockFile(spark, checkpoint), lease_s=3, settle_s=0.1).acquire()
    renewal.join()
    # The first engine stops renewing (as a killed driver would): the second waits out the
    # lease and takes over, and the first learns it lost at its next renewal.
    assert first.renew()
    second = CheckpointLock(HadoopLockFile(spark, checkpoint), lease_s=3, settle_s=0.1)
    began = time.monotonic()
    second.acquire()
    assert time.monotonic() - began >= 2.5
    assert json.loads((tmp_path / "cp" / LOCK_FILE).read_text())["token"] == second.mine.token
    assert not first.renew()
    assert first.lost is not None
    assert first.lost.startswith(f"the checkpoint lease was taken over by engine pid {os.getpid()}")
    first.release()  # not its lease any more: the file stays
    assert (tmp_path / "cp" / LOCK_FILE).exists()
    second.release()
    assert not (tmp_path / "cp" / LOCK_FILE).exists()
    assert cli.DEFAULT_LEASE_S == DEFAULT_LEASE_S

    # A holder killed while it wrote the file leaves half a lease: the next engine takes it over
    # (it once retried that for ever, and a resumed job never started).
    (tmp_path / "cp" / LOCK_FILE).write_text('{"token": "4f1c", "host')
    third = CheckpointLock(HadoopLockFile(spark, checkpoint), lease_s=3, settle_s=0.1)
    third.acquire()
    assert json.loads((tmp_path / "cp" / LOCK_FILE).read_text())["token"] == third.mine.token
    third.release()


def test_a_second_engine_on_the_same_checkpoint_is_refused(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    names = {k: make_topic(k) for k in ("source", "retry", "dlq", "output")}
    produce(bootstrap_servers, names["source"], [(b"1", b"ok:a")])
    path = _write_policy(tmp_path, names, bootstrap_servers)
    command = [*ENGINE, "run", "-f", str(path), "--master", "local[1]", "--checkpoint", str(tmp_path / "cp")]
    command += ["--checkpoint-lease", "6"]  # the second engine sees a renewal within 2 s
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        assert len(read_all(bootstrap_servers, names["output"], expect=1, timeout=180)) == 1
        second = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=180)
        assert second.returncode == EXIT_CHECKPOINT_LOCKED, second.stderr[-2000:]
        refusal = [line for line in second.stderr.splitlines() if line.startswith("dlq-engine:")]
        assert len(refusal) == 1
        assert f"is in use by another engine pid {first.pid} on host {socket.gethostname()}" in refusal[0]
        assert first.poll() is None
        # The first engine still routes, alone: the record is output (once: read after it stopped).
        produce(bootstrap_servers, names["source"], [(b"2", b"ok:b")])
        assert len(read_all(bootstrap_servers, names["output"], expect=2, timeout=120)) == 2
        # SIGTERM to the driver's JVM alone, as tini sends a driver pod's: the engine still stops
        # cleanly and releases its lease (its JVM hands the signal over instead of shutting down).
        os.kill(_jvm_of(first.pid), signal.SIGTERM)
        _, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == EXIT_OK, stderr[-2000:]
    assert not (tmp_path / "cp" / LOCK_FILE).exists()
    assert len(read_all(bootstrap_servers, names["output"])) == 2


def _jvm_of(pid: int) -> int:
    """The JVM the engine process ``pid`` started (PySpark's gateway: its child)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    jvms = [
        int(c) for c in children if Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")[0].endswith(b"java")
    ]
    assert len(jvms) == 1, children
    return jvms[0]
