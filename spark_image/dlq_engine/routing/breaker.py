"""The circuit breaker's state machine: when to stop taking messages, when to probe, when to resume.

A dead downstream makes every processor call fail transiently; without a breaker each message
then goes round the retry topic until it is dead-lettered as ``exhausted``, and the outage
becomes dead letters that someone must redrive. ``retry.breaker`` (``BreakerSpec``) pauses
instead:

- **closed**: the committed micro-batches' calls and transient failures fill a count-based
  window of the last ``window`` calls (the oldest batch in view scaled so that exactly
  ``window`` calls count, as the error window does). Once the window is full and the failures
  in it reach ``threshold`` of it, the breaker **opens**.
- **open**: for ``open_ms`` the engine reads no new source message and its delay stage
  releases no retry (``dlq_engine.job.breaker`` does that; nothing is read and committed that
  is not processed). Then it is **half-open**.
- **half-open**: a few messages go through (``probes`` per micro-batch from the source, as
  many per delay-stage task from the retries), and a failed one goes back to the retry topic
  whatever redeliveries it has left. Once ``probes`` calls were made, or ``open_ms`` has passed
  since it became half-open, the probes decide: if the failed ones reach ``threshold`` of
  ``probes`` it opens again, otherwise it closes (so a few bad messages among little traffic
  cannot keep it open: as much evidence is needed to reopen it as to trip it).

Only batches that ran in the breaker's current state count (each committed batch says which
state its routing saw: a batch planned while closed and committed after the breaker opened is
no evidence about the probes). Transient failures are those routing retries or dead-letters as
``exhausted``: a ``Retry``, a timeout, any exception not in ``nonRetryableErrors``;
``Terminate`` and non-retryable errors mean the downstream answered. Time is read from an
injected clock, so the whole machine is tested without waiting (tests/unit/test_breaker.py).
"""

from __future__ import annotations

import collections
import datetime
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dlq_engine.model.breaker import CLOSED, HALF_OPEN, MAX_REASON_CHARS, OPEN, BreakerReport, BreakerState
from dlq_engine.model.durations import format_ms
from dlq_engine.model.policy import BreakerSpec

#: Error classes a reason names at most (the most frequent first).
REASON_CLASSES = 3


@dataclass(frozen=True, slots=True)
class Transition:
    """The breaker changed state: to ``state``, and why (one line)."""

    state: BreakerState
    reason: str


@dataclass(slots=True)
class _Window:
    """The last ``size`` calls, kept per micro-batch: (calls, failures, failures by class)."""

    size: int
    batches: collections.deque[tuple[int, int, Mapping[str, int]]] = field(default_factory=collections.deque)

    def add(self, calls: int, failures: int, classes: Mapping[str, int]) -> None:
        self.batches.append((calls, failures, classes))
        seen = sum(c for c, _, _ in self.batches)
        while self.batches and seen - self.batches[0][0] >= self.size:
            seen -= self.batches.popleft()[0]

    def failed(self) -> float | None:
        """The failures among exactly the last ``size`` calls; None while fewer were seen."""
        seen = sum(c for c, _, _ in self.batches)
        if seen < self.size:
            return None
        oldest_calls, oldest_failures, _ = self.batches[0]
        excess = seen - self.size
        return sum(f for _, f, _ in self.batches) - oldest_failures * excess / oldest_calls

    def classes(self) -> collections.Counter[str]:
        total: collections.Counter[str] = collections.Counter()
        for _, _, classes in self.batches:
            total.update(classes)
        return total

    def clear(self) -> None:
        self.batches.clear()


class Breaker:
    """One policy's breaker, driven by the committed micro-batches (``record``) and by time
    (``tick``). Each returns the ``Transition`` it made, or None."""

    def __init__(self, spec: BreakerSpec, *, clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self._clock = clock
        self.state: BreakerState = CLOSED
        #: When the breaker entered its state (seconds since the epoch, on ``clock``).
        self.since = clock()
        #: Why it last opened ("" before it ever did), and how often it opened.
        self.reason = ""
        self.opens = 0
        self._window = _Window(spec.window)
        self._probe_calls = 0
        self._probe_failures = 0
        self._probe_classes: collections.Counter[str] = collections.Counter()

    @property
    def probe_at(self) -> float | None:
        """When an open breaker lets probes through; None unless open."""
        return self.since + self.spec.open_ms / 1000 if self.state == OPEN else None

    @property
    def reopen_failures(self) -> int:
        """Failed probes that open the breaker again: ``threshold`` of ``probes``, rounded up."""
        return max(1, math.ceil(self.spec.threshold * self.spec.probes - 1e-9))

    def record(
        self, ran_as: BreakerState, calls: int, failures: int, classes: Mapping[str, int] | None = None
    ) -> Transition | None:
        """A committed micro-batch whose routing ran while the breaker was ``ran_as``: its
        processor calls, its transient failures and those by error class."""
        if calls <= 0 or ran_as != self.state:
            return None
        failures = min(max(failures, 0), calls)
        classes = dict(classes or {})
        if self.state == CLOSED:
            self._window.add(calls, failures, classes)
            failed = self._window.failed()
            if failed is None or failed < self.spec.threshold * self.spec.window:
                return None
            reason = (
                f"{round(failed)} of the last {self.spec.window} processor calls failed transiently"
                f"{_naming(self._window.classes())}"
            )
            return self._open(reason)
        if self.state == HALF_OPEN:
            self._probe_calls += calls
            self._probe_failures += failures
            self._probe_classes.update(classes)
            if self._probe_calls >= self.spec.probes:
                return self._judge_probes()
        return None

    def tick(self) -> Transition | None:
        """What time alone changes: an open breaker's ``open_ms`` ran out (half-open), a
        half-open one's probes took longer than ``open_ms`` (they decide with what they have)."""
        now = self._clock()
        elapsed_ms = (now - self.since) * 1000
        if self.state == OPEN and elapsed_ms >= self.spec.open_ms:
            return self._enter(HALF_OPEN, f"open for {format_ms(self.spec.open_ms)}: letting probes through")
        if self.state == HALF_OPEN and elapsed_ms >= self.spec.open_ms:
            return self._judge_probes()
        return None

    def _judge_probes(self) -> Transition:
        calls, failed = self._probe_calls, self._probe_failures
        if failed >= self.reopen_failures:
            return self._open(f"{failed} of {calls} probes failed transiently{_naming(self._probe_classes)}")
        return self._enter(
            CLOSED, f"{calls - failed} of {calls} probes succeeded" if calls else "no probe failed"
        )

    def _open(self, reason: str) -> Transition:
        self.opens += 1
        self.reason = reason[:MAX_REASON_CHARS]
        return self._enter(OPEN, self.reason)

    def _enter(self, state: BreakerState, reason: str) -> Transition:
        self.state = state
        self.since = self._clock()
        self._window.clear()
        self._probe_calls = self._probe_failures = 0
        self._probe_classes.clear()
        return Transition(state, reason)

    def report(self) -> BreakerReport:
        """What the heartbeat carries (``model.breaker.BreakerReport``)."""
        probe_at = self.probe_at
        return {
            "state": self.state,
            "since": rfc3339(self.since),
            "reason": self.reason,
            "opens": self.opens,
            "probeAt": rfc3339(probe_at) if probe_at is not None else "",
        }


def _naming(classes: Mapping[str, int]) -> str:
    """`` (ConnectionError, TimeoutError)``: the error classes of the failures counted, the most
    frequent first (their counts are those of whole micro-batches, so they are not given)."""
    top = sorted(((n, c) for c, n in classes.items() if n > 0), key=lambda item: (-item[0], item[1]))
    if not top:
        return ""
    named = ", ".join(c or "unknown" for _, c in top[:REASON_CLASSES])
    more = f" and {len(top) - REASON_CLASSES} more" if len(top) > REASON_CLASSES else ""
    return f" ({named}{more})"


def rfc3339(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
