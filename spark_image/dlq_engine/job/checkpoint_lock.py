"""One engine per checkpoint: a lease held in a lock file at the checkpoint location.

Two drivers on one checkpoint would both write its offsets and commits and the delay stage's
state, and route every message twice. Spark refuses a second query on a checkpoint only within
one JVM, so the engine takes a lease before it starts its query: the file
``<checkpoint>/dlq-engine.lock`` holds a JSON owner (host, pid, a random token), when it was
acquired, when it was last renewed and the lease's length. It is read and written through
Hadoop's file system API, so it works wherever the checkpoint does (a local path, a shared
volume, HDFS, an object store).

- Acquire: no file -> create it without overwriting; a file whose lease ran out (``renewed``
  plus ``leaseSeconds`` is past, on this clock) -> overwrite it. Either way the claim is read
  back after ``settle`` seconds and holds only if it still carries this engine's token, so of
  two engines claiming at once (a file system whose create is not exclusive) only the last
  writer goes on. A lease of another owner that has not run out yet: wait, reading the file;
  if its owner renews it meanwhile, the owner lives -> ``CheckpointLocked`` naming it (within
  about a third of a lease); if it runs out unrenewed, the owner is gone (a killed driver) ->
  take it over. So a crashed engine's successor starts within one lease instead of failing.
- Renew: every third of the lease, a thread reads the file and rewrites it with a new
  ``renewed``. When the file carries another token (this lease ran out and was taken over),
  or when no renewal succeeded for a whole lease, the lease is lost: ``on_lost`` is called
  and the engine stops its query.
- Release: on a clean end the file is deleted if it is still this engine's, so a successor
  starts at once; after a crash it waits for the lease to run out.

The clocks of the machines that run drivers must agree to well within a lease (NTP).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

log = logging.getLogger("dlq_engine.checkpoint_lock")

LOCK_FILE: Final = "dlq-engine.lock"
#: Default lease: a crashed engine's successor waits at most this long.
DEFAULT_LEASE_S: Final = 30.0
DEFAULT_SETTLE_S: Final = 2.0


class CheckpointLocked(Exception):
    """Another engine holds the checkpoint's lease."""


@dataclass(frozen=True, slots=True)
class Holder:
    """The content of a lock file."""

    token: str
    host: str
    pid: int
    acquired: float
    renewed: float
    lease_s: float

    def expired(self, now: float) -> bool:
        return now > self.renewed + self.lease_s

    def describe(self, now: float) -> str:
        return (
            f"engine pid {self.pid} on host {self.host}, holding it since "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.acquired))}, renewed "
            f"{max(0.0, now - self.renewed):.0f}s ago (lease {self.lease_s:.0f}s)"
        )

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "token": self.token,
                "host": self.host,
                "pid": self.pid,
                "acquired": self.acquired,
                "renewed": self.renewed,
                "leaseSeconds": self.lease_s,
            }
        ).encode()

    @staticmethod
    def parse(data: bytes) -> Holder | None:
        """None for a file that is not a lock (empty, half written, foreign)."""
        try:
            raw = json.loads(data.decode())
            return Holder(
                str(raw["token"]),
                str(raw["host"]),
                int(raw["pid"]),
                float(raw["acquired"]),
                float(raw["renewed"]),
                float(raw["leaseSeconds"]),
            )
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None


def _java_class(error: Py4JJavaError) -> str:
    return str(error.java_exception.getClass().getName())


class CheckpointLock:
    """The lease on one checkpoint location, for one engine."""

    def __init__(
        self,
        spark: SparkSession,
        checkpoint: str,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        settle_s: float = DEFAULT_SETTLE_S,
        wait: bool = True,
    ) -> None:
        if lease_s <= 0:
            raise ValueError(f"the checkpoint lease must be positive, got {lease_s}")
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self.path = posixpath.join(checkpoint.rstrip("/"), LOCK_FILE)
        self._jpath = jvm.org.apache.hadoop.fs.Path(self.path)
        self._fs = self._jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self.lease_s = lease_s
        self.settle_s = settle_s
        #: Whether ``acquire`` waits to see if another owner's lease is renewed or runs out
        #: (else it refuses at once while the lease lasts).
        self.wait = wait
        host = socket.gethostname()
        self.mine = Holder(
            f"{host}:{os.getpid()}:{uuid.uuid4().hex[:12]}", host, os.getpid(), 0.0, 0.0, lease_s
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: str | None = None

    # -- the file -----------------------------------------------------------------------

    def read(self) -> Holder | None:
        """The lock file's holder; None when there is no file. A file being rewritten may read
        as garbage for a moment: read again."""
        for attempt in range(5):
            try:
                if not self._fs.exists(self._jpath):
                    return None
                stream = self._fs.open(self._jpath)
                try:
                    data = bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
                finally:
                    stream.close()
            except Py4JJavaError as error:
                if "FileNotFoundException" in _java_class(error):
                    return None
                if attempt == 4:
                    raise
                time.sleep(0.2)
                continue
            holder = Holder.parse(data)
            if holder is not None or attempt == 4:
                return holder
            time.sleep(0.2)
        return None

    def _write(self, holder: Holder, *, overwrite: bool) -> bool:
        """Write ``holder``; False when ``overwrite`` is off and the file exists."""
        self._fs.mkdirs(self._jpath.getParent())
        try:
            out = self._fs.create(self._jpath, overwrite)
        except Py4JJavaError as error:
            if not overwrite and "FileAlreadyExists" in _java_class(error):
                return False
            raise
        try:
            out.write(bytearray(holder.to_json()))
        finally:
            out.close()
        return True

    # -- the lease ----------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease, or raise ``CheckpointLocked`` naming the engine that holds it."""
        now = time.time()
        current = self.read()
        if current is not None and current.token != self.mine.token and not current.expired(now):
            current = self._outlive(current)
            now = time.time()
        claim = Holder(self.mine.token, self.mine.host, self.mine.pid, now, now, self.lease_s)
        if current is None:
            if not self._write(claim, overwrite=False):
                if self.read() is not None:  # created by another engine just now
                    self.acquire()
                    return
                # The file is there and has held no lease for as long as ``read`` tries: a holder
                # killed while it wrote it. Nobody holds the lease it cannot describe.
                log.warning(
                    "checkpoint lock file %s holds no lease (left half written): taking it over", self.path
                )
                self._write(claim, overwrite=True)
        else:
            log.warning(
                "checkpoint lease of %s ran out %.0fs ago: taking it over",
                current.describe(now),
                now - current.renewed - current.lease_s,
            )
            self._write(claim, overwrite=True)
        time.sleep(self.settle_s)
        after = self.read()
        if after is None or after.token != claim.token:
            raise CheckpointLocked(
                self._refusal(after, time.time())
                if after is not None
                else f"{self.path} vanished while claimed"
            )
        self.mine = claim

    def _outlive(self, holder: Holder) -> Holder | None:
        """Wait until ``holder``'s lease is gone or has run out (return what the file holds
        then); raise ``CheckpointLocked`` as soon as it is renewed or taken by another."""
        if not self.wait:
            raise CheckpointLocked(self._refusal(holder, time.time()))
        poll = min(1.0, holder.lease_s / 10)
        log.warning(
            "checkpoint lease held by %s: waiting to see it renewed or run out", holder.describe(time.time())
        )
        while True:
            time.sleep(poll)
            now = time.time()
            current = self.read()
            if current is None or current.expired(now):
                return current
            if current.token != holder.token or current.renewed != holder.renewed:
                raise CheckpointLocked(self._refusal(current, now))

    def _refusal(self, holder: Holder, now: float) -> str:
        return (
            f"checkpoint {posixpath.dirname(self.path)} is in use by another {holder.describe(now)}: "
            "two engines on one checkpoint would route every message twice. Stop the other engine, "
            f"or, if it is gone, wait for its lease to run out (or delete {self.path})"
        )

    def renew(self) -> bool:
        """Renew once; False when the lease turned out to be someone else's."""
        current = self.read()
        if current is None or current.token != self.mine.token:
            now = time.time()
            self.lost = (
                f"the checkpoint lease was taken over by {current.describe(now)}"
                if current is not None
                else f"the checkpoint lock file {self.path} was deleted"
            )
            return False
        renewed = Holder(
            self.mine.token, self.mine.host, self.mine.pid, self.mine.acquired, time.time(), self.lease_s
        )
        self._write(renewed, overwrite=True)
        self.mine = renewed
        return True

    def keep_renewed(self, on_lost: Callable[[str], None]) -> None:
        """Renew every third of the lease in a thread until ``release``; call ``on_lost`` once
        when the lease is lost."""

        def loop() -> None:
            while not self._stop.wait(self.lease_s / 3):
                try:
                    if self.renew():
                        continue
                except Exception as error:  # noqa: BLE001 - a file system hiccup: try again
                    log.warning("renewing the checkpoint lease failed: %s", error)
                    if time.time() <= self.mine.renewed + self.lease_s:
                        continue
                    self.lost = f"the checkpoint lease could not be renewed for {self.lease_s:.0f}s: {error}"
                assert self.lost is not None
                on_lost(self.lost)
                return

        self._thread = threading.Thread(target=loop, name="checkpoint-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop renewing; delete the file if it is still this engine's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self.lost is not None:
            return
        try:
            current = self.read()
            if current is not None and current.token == self.mine.token:
                self._fs.delete(self._jpath, False)
        except Exception as error:  # noqa: BLE001 - the lease then runs out by itself
            log.warning("releasing the checkpoint lease failed: %s", error)
