"""One engine per checkpoint: a lease held in a lock file at the checkpoint location.

Two drivers on one checkpoint would both write its offsets and commits and the delay stage's
state, and route every message twice. Spark refuses a second query on a checkpoint only within
one JVM, so the engine takes a lease before it starts its query: the file
``<checkpoint>/dlq-engine.lock`` holds a JSON owner (host, pid, a random token, and on
Kubernetes its pod: namespace, name, uid), when it was acquired, when it was last renewed and
the lease's length. It is read and written through Hadoop's file system API
(``lock_file``), so it works wherever the checkpoint does (a local path, a shared volume, HDFS,
an object store).

- Acquire: no file -> create it without overwriting; a file whose lease ran out (``renewed``
  plus ``leaseSeconds`` is past, on this clock), or whose holder's pod is gone or ended
  (``driver_pod``: a killed driver's successor starts at once) -> overwrite it. Either way the
  claim is read back after ``settle`` seconds and holds only if it still carries this engine's
  token, so of two engines claiming at once (a file system whose create is not exclusive) only
  the last writer goes on. A lease of another owner that has not run out, whose pod runs or
  cannot be read: wait, reading the file and the pod; if its owner renews it meanwhile, the
  owner lives -> ``CheckpointLocked`` naming it (within about a fifth of a lease); if its pod
  goes, or the lease runs out unrenewed (a killed driver outside Kubernetes, or one whose pod
  cannot be read), take it over.
- Renew: at once and then every fifth of the lease, a thread reads the file and rewrites it
  with a new ``renewed``. When the file carries another token (the lease was taken over), or
  this driver's own pod is gone (force-deleted: its successor may be taking over already), the
  lease is lost: ``on_lost`` is called and the engine stops its query. A second thread, which
  does no I/O, fences: when no renewal succeeded for three quarters of the lease (every one
  failed or hung: a holder cut off from the file; or the process was paused), the lease is
  lost too, a quarter of a lease before a successor may take it over.
- Release: on a clean end the file is deleted if it is still this engine's, so a successor
  starts at once; after a crash it takes over when the pod is gone, else when the lease ran out.

The clocks of the machines that run drivers must agree to well within a lease (NTP).
"""

from __future__ import annotations

import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Final, Protocol

from dlq_engine.job.driver_pod import HOLDER_STOPPED, DriverPods, PodRef, PodState
from dlq_engine.job.lock_file import Holder, LockFile

log = logging.getLogger("dlq_engine.checkpoint_lock")

#: Default lease: a crashed engine's successor outside Kubernetes waits at most this long.
DEFAULT_LEASE_S: Final = 30.0
DEFAULT_SETTLE_S: Final = 2.0
#: The lease is renewed every this share of it.
RENEW: Final = 1 / 5
#: A holder that has not renewed for this share of its lease stops its query: the rest of the
#: lease is the time it has to stop before a successor may take the lease.
FENCE: Final = 3 / 4


class CheckpointLocked(Exception):
    """Another engine holds the checkpoint's lease."""


class Clock(Protocol):
    """Wall time (written in the file, compared across drivers), a monotonic clock (this
    driver's own renewal age) and sleeping; tests pass a fake one."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class CheckpointLock:
    """The lease on one checkpoint location, for one engine."""

    def __init__(
        self,
        file: LockFile,
        *,
        lease_s: float = DEFAULT_LEASE_S,
        settle_s: float = DEFAULT_SETTLE_S,
        wait: bool = True,
        pods: DriverPods | None = None,
        pod: PodRef | None = None,
        clock: Clock | None = None,
    ) -> None:
        if lease_s <= 0:
            raise ValueError(f"the checkpoint lease must be positive, got {lease_s}")
        self.file = file
        self.path = file.path
        self.lease_s = lease_s
        self.settle_s = settle_s
        #: Whether ``acquire`` waits to see if another owner's lease is renewed or runs out
        #: (else it refuses at once while the lease lasts and its pod runs).
        self.wait = wait
        #: Reads holders' pods (None: outside Kubernetes, only the lease's time counts).
        self.pods = pods
        self.clock: Clock = clock or SystemClock()
        host = socket.gethostname()
        self.mine = Holder(
            f"{host}:{os.getpid()}:{uuid.uuid4().hex[:12]}", host, os.getpid(), 0.0, 0.0, lease_s, pod
        )
        #: When ``mine`` was last written, on the monotonic clock.
        self._renewed_at = 0.0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.lost: str | None = None
        #: How long ``acquire`` waited for another holder, and why it took the lease over (None
        #: when there was nobody to take it from).
        self.waited_s = 0.0
        self.took_over: str | None = None

    # -- the file -----------------------------------------------------------------------

    def read(self) -> Holder | None:
        """The lock file's holder; None when there is no file. A file being rewritten may read
        as garbage for a moment: read again."""
        for attempt in range(5):
            data = self.file.read()
            if data is None:
                return None
            holder = Holder.parse(data)
            if holder is not None or attempt == 4:
                return holder
            self.clock.sleep(0.2)
        return None

    # -- the lease ----------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease, or raise ``CheckpointLocked`` naming the engine that holds it."""
        began = self.clock.monotonic()
        current = self.read()
        now = self.clock.time()
        stopped: str | None = None
        if current is not None and current.token != self.mine.token and not current.expired(now):
            stopped = self._stopped(current)
            if stopped is None:
                current, stopped = self._outlive(current)
            now = self.clock.time()
        self.waited_s = self.clock.monotonic() - began
        claim = replace(self.mine, acquired=now, renewed=now)
        if current is None:
            if not self.file.create(claim.to_json()):
                if self.read() is not None:  # created by another engine just now
                    self.acquire()
                    return
                # The file is there and has held no lease for as long as ``read`` tries: a holder
                # killed while it wrote it. Nobody holds the lease it cannot describe.
                log.warning(
                    "checkpoint lock file %s holds no lease (left half written): taking it over", self.path
                )
                self.file.replace(claim.to_json())
        else:
            self.took_over = stopped or (
                f"its lease ran out {now - current.renewed - current.lease_s:.0f}s ago"
            )
            log.warning(
                "checkpoint lease of %s: %s: taking it over after %.1fs",
                current.describe(now),
                self.took_over,
                self.waited_s,
            )
            self.file.replace(claim.to_json())
        written = self.clock.monotonic()
        self.clock.sleep(self.settle_s)
        after = self.read()
        if after is None or after.token != claim.token:
            raise CheckpointLocked(
                self._refusal(after, self.clock.time())
                if after is not None
                else f"{self.path} vanished while claimed"
            )
        self.mine = claim
        self._renewed_at = written

    def _stopped(self, holder: Holder) -> str | None:
        """Why ``holder``'s driver runs no more (its pod is gone or ended), None when it may."""
        if holder.pod is None or self.pods is None:
            return None
        state = self.pods.state(holder.pod)
        if state not in HOLDER_STOPPED:
            return None
        return f"its pod {holder.pod} is {'gone' if state is PodState.GONE else 'ended'}"

    def _outlive(self, holder: Holder) -> tuple[Holder | None, str | None]:
        """Wait until ``holder``'s lease is gone, has run out, or its pod has stopped (return
        what the file holds then, and why the pod stopped); raise ``CheckpointLocked`` as soon as
        it is renewed or taken by another."""
        if not self.wait:
            raise CheckpointLocked(self._refusal(holder, self.clock.time()))
        poll = min(1.0, holder.lease_s / 10)
        log.warning(
            "checkpoint lease held by %s: waiting to see it renewed or run out",
            holder.describe(self.clock.time()),
        )
        while True:
            self.clock.sleep(poll)
            now = self.clock.time()
            current = self.read()
            if current is None or current.expired(now):
                return current, None
            if current.token != holder.token or current.renewed != holder.renewed:
                raise CheckpointLocked(self._refusal(current, now))
            stopped = self._stopped(current)
            if stopped is not None:
                return current, stopped

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
            now = self.clock.time()
            self.lost = (
                f"the checkpoint lease was taken over by {current.describe(now)}"
                if current is not None
                else f"the checkpoint lock file {self.path} was deleted"
            )
            return False
        stamped = self.clock.monotonic()
        renewed = replace(self.mine, renewed=self.clock.time())
        self.file.replace(renewed.to_json())
        self.mine = renewed
        self._renewed_at = stamped
        return True

    def beat(self) -> float | None:
        """One turn of the renewal: seconds until the next, or None when the lease is lost
        (``lost`` says why). A holder that comes back too late (paused) does not renew: a
        successor may be taking the lease over already."""
        fenced = self.fenced()
        if fenced is not None:
            self.lost = fenced
            return None
        try:
            if not self.renew():
                return None
        except Exception as error:  # noqa: BLE001 - a file system hiccup: try again, soon
            log.warning("renewing the checkpoint lease failed: %s", error)
            return self.lease_s * RENEW / 4
        own = self.mine.pod
        if own is not None and self.pods is not None and self.pods.state(own) is PodState.GONE:
            self.lost = (
                f"this driver's pod {own} was deleted: stopping, as its successor may take the "
                "checkpoint over at once"
            )
            return None
        return self.lease_s * RENEW

    def fenced(self) -> str | None:
        """Why this engine must stop now although nobody told it so: it has not renewed its lease
        for ``FENCE`` of it (every renewal failed or hung, or the process was paused), and a
        successor may take the lease when it runs out. None while renewed in time."""
        age = self.clock.monotonic() - self._renewed_at
        if age < self.lease_s * FENCE:
            return None
        return (
            f"the checkpoint lease was not renewed for {age:.0f}s of its {self.lease_s:.0f}s: "
            "stopping before another engine may take the checkpoint over"
        )

    def keep_renewed(self, on_lost: Callable[[str], None]) -> None:
        """Renew every fifth of the lease in a thread until ``release``, and check in another,
        which does no I/O, that the lease is renewed in time; call ``on_lost`` once when the
        lease is lost."""
        once = threading.Lock()

        def lose(reason: str) -> None:
            if once.acquire(blocking=False):
                self.lost = reason
                self._stop.set()
                on_lost(reason)

        def renewing() -> None:
            delay: float | None = 0.0  # at once: the claim has aged while it settled
            while delay is not None and not self._stop.wait(delay):
                delay = self.beat()
            if delay is None and self.lost is not None:
                lose(self.lost)

        def fencing() -> None:
            delay = self.lease_s * RENEW  # the first renewal, at once, goes first
            while not self._stop.wait(delay):
                delay = self.lease_s / 20
                reason = self.fenced()
                if reason is not None:
                    lose(reason)

        self._threads = [
            threading.Thread(target=renewing, name="checkpoint-lease", daemon=True),
            threading.Thread(target=fencing, name="checkpoint-lease-fence", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def release(self) -> None:
        """Stop renewing; delete the file if it is still this engine's."""
        self._stop.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(10)
        if self.lost is not None:
            return
        try:
            current = self.read()
            if current is not None and current.token == self.mine.token:
                self.file.delete()
        except Exception as error:  # noqa: BLE001 - the lease then runs out by itself
            log.warning("releasing the checkpoint lease failed: %s", error)
