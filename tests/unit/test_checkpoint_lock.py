"""The checkpoint lease's decisions, on a lock file in memory, a fake clock and the fake API:
a holder whose pod is gone or ended is taken over at once, a live or unreadable one never before
its lease runs out, and a holder that cannot renew stops before it may be taken over.

``tests/integration/engine/test_checkpoint_lock.py`` runs the same lease on Hadoop's file
system and two real engines."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from dlq_engine.job.checkpoint_lock import FENCE, CheckpointLock, CheckpointLocked
from dlq_engine.job.driver_pod import DriverPods, PodRef
from dlq_engine.job.lock_file import Holder
from tests.unit.fake_kube import FakeKube
from tests.unit.test_driver_pod import DRIVER, NAMESPACE, TERMINATED, EngineView, driver_pod

LEASE_S = 30.0


class MemoryLockFile:
    path = "/checkpoints/payments/orders-billing/dlq-engine.lock"

    def __init__(self) -> None:
        self.data: bytes | None = None
        #: Raised by every call while set: the file system is cut off.
        self.failing: OSError | None = None

    def _check(self) -> None:
        if self.failing is not None:
            raise self.failing

    def read(self) -> bytes | None:
        self._check()
        return self.data

    def create(self, data: bytes) -> bool:
        self._check()
        if self.data is not None:
            return False
        self.data = data
        return True

    def replace(self, data: bytes) -> None:
        self._check()
        self.data = data

    def delete(self) -> None:
        self._check()
        self.data = None

    def holder(self) -> Holder:
        assert self.data is not None
        holder = Holder.parse(self.data)
        assert holder is not None
        return holder


class FakeClock:
    """Both drivers' clocks (in step, as NTP keeps them); sleeping moves them on and runs what
    the other driver does meanwhile."""

    def __init__(self) -> None:
        self.now = 1_795_000_000.0
        self.mono = 1000.0
        self.meanwhile: list[Callable[[], None]] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.mono += seconds
        for action in list(self.meanwhile):
            action()


class Drivers:
    """A lock file, a clock and an API server shared by drivers; the holder's pod Running."""

    def __init__(self) -> None:
        self.file = MemoryLockFile()
        self.clock = FakeClock()
        self.fake = FakeKube()
        self.pods = DriverPods(EngineView(self.fake))

    def lock(self, pod: PodRef | None, *, wait: bool = True) -> CheckpointLock:
        return CheckpointLock(
            self.file, lease_s=LEASE_S, settle_s=0.5, wait=wait, pods=self.pods, pod=pod, clock=self.clock
        )

    def holder(self) -> CheckpointLock:
        """The first driver, holding the lease, in its pod."""
        lock = self.lock(driver_pod(self.fake))
        lock.acquire()
        return lock

    def kill_pod(self) -> None:
        self.fake.objects.pop(("pods", NAMESPACE, DRIVER), None)


@pytest.fixture
def drivers() -> Drivers:
    return Drivers()


def test_a_holder_whose_pod_is_gone_is_taken_over_at_once(drivers: Drivers) -> None:
    holder = drivers.holder()
    assert drivers.file.holder().pod == holder.mine.pod
    drivers.kill_pod()
    # The spark-operator resubmits under the same name: the successor's pod is another one.
    successor = drivers.lock(driver_pod(drivers.fake))
    successor.acquire()
    assert successor.waited_s == 0
    assert successor.took_over == f"its pod {holder.mine.pod} is gone"
    assert drivers.file.holder().token == successor.mine.token
    # Were the killed driver still writing, its next renewal tells it: it stops.
    assert holder.beat() is None
    assert holder.lost is not None
    assert holder.lost.startswith("the checkpoint lease was taken over by engine pid")


@pytest.mark.parametrize(
    "status",
    [
        pytest.param({"phase": "Failed"}, id="pod-failed"),
        pytest.param({"phase": "Succeeded"}, id="pod-succeeded"),
        pytest.param({"phase": "Running", "containerStatuses": [TERMINATED]}, id="container-terminated"),
    ],
)
def test_a_holder_whose_pod_ended_is_taken_over_at_once(drivers: Drivers, status: dict[str, object]) -> None:
    holder = drivers.holder()
    drivers.fake.edit("pods", NAMESPACE, DRIVER, lambda pod: pod.update(status=status))
    successor = drivers.lock(None, wait=False)  # not even waiting is needed
    successor.acquire()
    assert successor.waited_s == 0
    assert successor.took_over == f"its pod {holder.mine.pod} is ended"


def test_a_live_holder_that_renews_is_refused_naming_its_pod(drivers: Drivers) -> None:
    holder = drivers.holder()
    with pytest.raises(
        CheckpointLocked, match=f"in use by another engine pid .* on pod {NAMESPACE}/{DRIVER}"
    ):
        drivers.lock(None, wait=False).acquire()
    drivers.clock.sleep(5)
    drivers.clock.meanwhile.append(lambda: holder.beat())
    began = drivers.clock.mono
    with pytest.raises(CheckpointLocked, match="renewed 0s ago"):
        drivers.lock(None).acquire()
    assert drivers.clock.mono - began <= 1.0  # refused as soon as it sees a renewal
    assert drivers.file.holder().token == holder.mine.token


def test_a_holder_whose_pod_runs_but_which_stopped_renewing_fences_before_it_is_taken_over(
    drivers: Drivers,
) -> None:
    """A holder cut off from the file (or paused) with its pod Running: the successor waits out
    the lease; the holder has stopped a quarter of a lease before."""
    holder = drivers.holder()
    acquired = drivers.clock.now
    fenced_at: list[float] = []

    def the_holder_tries_to_renew() -> None:
        drivers.file.failing = OSError("the volume is cut off")  # for the holder only
        if not fenced_at and holder.beat() is None:
            fenced_at.append(drivers.clock.now)
        drivers.file.failing = None

    drivers.clock.meanwhile.append(the_holder_tries_to_renew)
    successor = drivers.lock(None)
    successor.acquire()
    taken_at = drivers.clock.now - successor.settle_s
    assert successor.took_over is not None
    assert successor.took_over.startswith("its lease ran out")
    assert taken_at - acquired >= LEASE_S
    assert fenced_at, "the holder never stopped"
    assert taken_at - fenced_at[0] >= LEASE_S * (1 - FENCE) - 1
    assert holder.lost is not None
    assert holder.lost.startswith("the checkpoint lease was not renewed for")


@pytest.mark.parametrize("status", [403, 500], ids=["refused", "failing"])
def test_a_holder_whose_pod_cannot_be_read_is_waited_out(drivers: Drivers, status: int) -> None:
    drivers.holder()
    drivers.kill_pod()
    drivers.fake.fail("GET", "pods", status, times=1000)
    successor = drivers.lock(None)
    successor.acquire()
    assert successor.waited_s >= LEASE_S - 1
    assert successor.took_over is not None
    assert successor.took_over.startswith("its lease ran out")


def test_a_holder_whose_pod_goes_while_the_successor_waits_is_taken_over_then(drivers: Drivers) -> None:
    holder = drivers.holder()
    drivers.clock.meanwhile.append(lambda: drivers.clock.mono > 1010 and drivers.fake.objects.clear())
    successor = drivers.lock(None)
    successor.acquire()
    assert 9 <= successor.waited_s <= 12
    assert successor.took_over == f"its pod {holder.mine.pod} is gone"


@pytest.mark.parametrize("holder_pod", [False, True], ids=["holder-outside-kubernetes", "successor-outside"])
def test_without_a_pod_on_either_side_the_lease_is_waited_out(drivers: Drivers, holder_pod: bool) -> None:
    first = drivers.lock(driver_pod(drivers.fake) if holder_pod else None)
    first.acquire()
    drivers.kill_pod()
    successor = (
        CheckpointLock(drivers.file, lease_s=LEASE_S, settle_s=0.5, clock=drivers.clock)
        if holder_pod
        else drivers.lock(None)
    )
    successor.acquire()
    assert successor.waited_s >= LEASE_S - 1


def test_a_lock_file_written_before_pods_were_recorded_is_read() -> None:
    old = b'{"token": "t", "host": "h", "pid": 7, "acquired": 1.0, "renewed": 2.0, "leaseSeconds": 30}'
    assert Holder.parse(old) == Holder("t", "h", 7, 1.0, 2.0, 30.0, None)
    pod = PodRef(NAMESPACE, DRIVER, "u1")
    holder = Holder("t", "h", 7, 1.0, 2.0, 30.0, pod)
    assert Holder.parse(holder.to_json()) == holder


def test_a_holder_whose_own_pod_was_deleted_stops(drivers: Drivers) -> None:
    holder = drivers.holder()
    drivers.clock.sleep(5)
    drivers.fake.fail("GET", "pods", 500)
    assert holder.beat() is not None  # the API does not answer: nothing is known, it goes on
    drivers.kill_pod()
    drivers.clock.sleep(5)
    assert holder.beat() is None
    assert holder.lost == (
        f"this driver's pod {holder.mine.pod} was deleted: stopping, as its successor may take the "
        "checkpoint over at once"
    )


def test_a_paused_holder_does_not_renew_when_it_comes_back_late(drivers: Drivers) -> None:
    holder = drivers.holder()
    drivers.clock.sleep(LEASE_S * FENCE)
    before = drivers.file.data
    assert holder.beat() is None
    assert drivers.file.data == before  # not renewed: a successor may be taking it over
    assert holder.lost is not None
    assert holder.lost.startswith("the checkpoint lease was not renewed for 23s of its 30s")


def test_keep_renewed_calls_on_lost_once_when_renewals_fail(drivers: Drivers) -> None:
    lock = CheckpointLock(drivers.file, lease_s=0.4, settle_s=0, clock=drivers.clock)
    lock.acquire()
    drivers.file.failing = OSError("cut off")
    lost: list[str] = []
    called = threading.Event()

    def on_lost(reason: str) -> None:
        lost.append(reason)
        called.set()

    lock.keep_renewed(on_lost)
    drivers.clock.mono += 1  # the renewals fail for longer than the fence
    assert called.wait(10)
    lock.release()
    assert len(lost) == 1
    assert lost[0].startswith("the checkpoint lease was not renewed for")
    assert drivers.file.data is not None  # a lost lease is not released
