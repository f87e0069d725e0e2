"""The processor's time limit (``processor.timeout``): a call that overruns it fails.

A processor can hang (a socket read with no timeout, a deadlock, an endless loop). Without a
limit the Spark task hangs with it and nothing behind that message moves. With a limit, the
calls for a batch run one after another on a helper thread (one per Python worker, reused from
batch to batch), which notes when each call starts; the routing thread sleeps until the
running call's deadline and checks. Nothing is handed between threads per message, so the
limit costs a clock read and an uncontended lock per call, not a thread switch.

A call that overruns fails with ``TimeoutError`` naming the limit, and is then retried and
dead-lettered like any other failure; the calls after it go on on a fresh helper thread.
Python cannot kill a thread, so the overrunning one is *abandoned*: it is asked to stop (an
exception raised inside it at its next Python instruction), which ends a call looping in Python
code; a call blocked in C code (a socket read, ``time.sleep``) goes on until that returns, its
result discarded, and then the thread ends. A processor that catches ``BaseException`` can
ignore the request and keep its thread for ever.

What abandoned threads hold (a connection, memory, the thread itself) is bounded twice. While
``MAX_HUNG_CALLS`` of them are still running in a Python worker, no further call is started:
the messages left fail at once with ``HungCalls`` (a transient failure, retried), so a task
whose every call hangs ends after that many limits instead of one limit per message. And a
worker that still has one running when its task ends is not given another task: Spark's
worker is told not to reuse it (``worker_must_retire``, read by ``job.worker_daemon``) and the
process ends, with every thread it holds; the next task gets a fresh worker.

A ``SIGALRM`` timer was not used: it works only on a process's main thread, it cannot interrupt
C code either, it clashes with a processor's own alarms, and the exception it raises inside the
processor can be swallowed by an ``except Exception`` there, leaving the task hung after all.
With no limit (``processor.timeout: 0s``; the default is 30 s) nothing here is used: the processor
is called on the routing thread.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Final

from dlq_engine.model.durations import format_ms

log = logging.getLogger("dlq_engine.processing")

#: How many frames of an overrunning call's stack its TimeoutError's note keeps.
STACK_FRAMES: Final = 20
#: While this many abandoned calls are still running in a worker, no further call is started.
MAX_HUNG_CALLS: Final = 8
#: A batch or Arrow processor call is given ``processor.timeout`` times its number of messages,
#: but at most this long (or the limit itself, if longer): below the operator's default stall
#: timeout (5 minutes), so a hung batch call fails its messages before the whole job is
#: resubmitted and the batch replayed.
MAX_BATCH_CALL_MS: Final = 240_000


class HungCalls(RuntimeError):
    """A message the processor was not called for: too many earlier calls of this worker
    overran their limit and are still running (``MAX_HUNG_CALLS``). Retried like any failure."""


def batch_call_limit_ms(timeout_ms: int, messages: int) -> int:
    """The limit of one batch or Arrow processor call for ``messages`` messages."""
    return max(timeout_ms, min(timeout_ms * messages, MAX_BATCH_CALL_MS))


class Abandoned(BaseException):
    """Raised inside an abandoned helper thread to ask its overrunning call to stop. A
    ``BaseException``, so that a processor's ``except Exception`` does not swallow it."""


class Raised:
    """In ``map_with_limit``'s answer: the call raised ``error`` (or overran: a TimeoutError)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Run:
    """Calls ``function`` on ``arguments[start:]`` in order, on a helper thread. ``current``
    (the index of the call in progress and when it started, ``len(arguments)`` when all are
    done) changes only under ``lock``, where ``abandoned`` is checked before each call."""

    __slots__ = ("abandoned", "arguments", "current", "done", "function", "lock", "results", "start")

    def __init__(self, function: Callable[[Any], Any], arguments: Sequence[Any], start: int) -> None:
        self.function = function
        self.arguments = arguments
        self.start = start
        self.results: list[Any] = [None] * len(arguments)
        self.current = (start, time.monotonic())
        self.lock = threading.Lock()
        self.done = threading.Lock()
        self.done.acquire()
        self.abandoned = False

    def run(self) -> None:
        function, arguments, results, lock, clock = (
            self.function,
            self.arguments,
            self.results,
            self.lock,
            time.monotonic,
        )
        try:
            for i in range(self.start, len(arguments)):
                with lock:
                    if self.abandoned:
                        return
                    self.current = (i, clock())
                try:
                    results[i] = function(arguments[i])
                except BaseException as error:  # noqa: BLE001 - handed back to the routing thread
                    results[i] = Raised(error)
            with lock:
                self.current = (len(arguments), clock())
        finally:
            self.done.release()


class _Helper:
    """A daemon thread running the runs put on its queue, one after another, until None."""

    def __init__(self) -> None:
        self.runs: queue.SimpleQueue[_Run | None] = queue.SimpleQueue()
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._serve, name="dlq-processor", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            while (run := self.runs.get()) is not None:
                run.run()
        except Abandoned:
            return


class _Workers:
    """This process's helper thread, and the abandoned ones that have not ended yet."""

    def __init__(self) -> None:
        self.helper: _Helper | None = None
        self.abandoned: list[threading.Thread] = []

    def current(self) -> _Helper:
        helper = self.helper
        # A forked Python worker inherits the object but not the thread.
        if helper is None or helper.pid != os.getpid() or not helper.thread.is_alive():
            helper = self.helper = _Helper()
        return helper

    def abandon(self, helper: _Helper) -> int:
        """Give up on ``helper``'s thread; the number of abandoned threads still running."""
        if self.helper is helper:
            self.helper = None
        helper.runs.put(None)  # ends the thread once its call returns
        ident = helper.thread.ident
        if ident is not None and helper.thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(Abandoned))
        return self.still_running(helper.thread)

    def still_running(self, *new: threading.Thread) -> int:
        self.abandoned = [t for t in (*self.abandoned, *new) if t.is_alive()]
        return len(self.abandoned)


_workers = _Workers()


def map_with_limit(
    function: Callable[[Any], Any],
    arguments: Sequence[Any],
    *,
    timeout_ms: int,
    what: str = "the processor",
    limit: str = "processor.timeout",
) -> list[Any]:
    """``[function(a) for a in arguments]``, called in order on the helper thread, each call
    given at most ``timeout_ms`` (positive). A call that raises gives ``Raised(error)`` in its
    place; one that overruns gives ``Raised(TimeoutError("<what> did not return within
    <timeout> (<limit>)"))``, with a note saying where it was, and the calls after it go on."""
    n = len(arguments)
    results: list[Any] = [None] * n
    seconds = timeout_ms / 1000
    start = 0
    while start < n:
        hung = _workers.still_running()
        if hung >= MAX_HUNG_CALLS:
            hung_calls = HungCalls(
                f"{what} was not called: {hung} earlier calls in this Python worker overran "
                f"{limit} and are still running; the worker is replaced after this task"
            )
            results[start:] = [Raised(hung_calls)] * (n - start)
            break
        helper = _workers.current()
        run = _Run(function, arguments, start)
        helper.runs.put(run)
        overran = _wait(run, seconds)
        if overran is None:
            results[start:] = run.results[start:]
            break
        where = _stack_of(helper.thread)
        running = _workers.abandon(helper)
        results[start:overran] = run.results[start:overran]
        text = f"{what} did not return within {format_ms(timeout_ms)} ({limit})"
        log.warning(
            "%s; its thread is abandoned (%d abandoned threads still running in this worker)", text, running
        )
        error = TimeoutError(text)
        if where:
            error.add_note(f"The call was abandoned while it was here:\n{where.rstrip()}")
        results[overran] = Raised(error)
        start = overran + 1
    return results


def _wait(run: _Run, seconds: float) -> int | None:
    """Wait for ``run`` to finish: None when it has, or the index of the call that overran
    (``run`` is then marked abandoned and will start no further call)."""
    while True:
        current = run.current
        remaining = current[1] + seconds - time.monotonic()
        if remaining > 0:
            if run.done.acquire(timeout=min(remaining, threading.TIMEOUT_MAX)):
                return None
            continue
        with run.lock:
            if run.current is not current:
                continue  # that call ended just now
            if current[0] >= len(run.arguments):
                return None  # done (``done`` is about to be released)
            run.abandoned = True
            return current[0]


def abandoned_threads() -> int:
    """How many abandoned helper threads of this process are still running."""
    return _workers.still_running()


def worker_must_retire() -> bool:
    """Whether this Python worker should end after its task: an abandoned call is still running
    in it (the threads it holds go with the process)."""
    return _workers.still_running() > 0


def _stack_of(thread: threading.Thread) -> str:
    """Where ``thread`` is now, from the processor's frame inwards (without the helper's own
    frames); empty if it has just ended."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return ""
    entries = traceback.extract_stack(frame)
    start = 0
    for i, entry in enumerate(entries):
        if entry.filename == __file__ and entry.name == "run":
            start = i + 1
    kept = entries[start:][-STACK_FRAMES:]
    return "".join(traceback.StackSummary.from_list(kept).format())
