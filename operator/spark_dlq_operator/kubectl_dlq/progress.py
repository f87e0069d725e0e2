"""The progress line a long scan shows on a terminal's stderr."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

#: A scan of this many records or more shows its progress on a terminal's stderr (about a
#: second's reading or more), every PROGRESS_INTERVAL_S.
LARGE_SCAN: Final = 20_000

PROGRESS_INTERVAL_S: Final = 0.25


class Progress:
    """One line on stderr, rewritten in place, while a scan of a large range goes on: only on a
    terminal (a pipe or a log gets nothing), only for LARGE_SCAN records or more, at most every
    PROGRESS_INTERVAL_S seconds; the line is cleared when the scan ends."""

    def __init__(self, stream: Any, *, label: str, clock: Callable[[], float] = time.monotonic) -> None:
        isatty = getattr(stream, "isatty", None)
        self.stream = stream if isatty is not None and isatty() else None
        self.label = label
        self.clock = clock
        self.shown = False
        self.last = float("-inf")

    def __call__(self, done: int, total: int) -> None:
        if self.stream is None or total < LARGE_SCAN:
            return
        now = self.clock()
        if now - self.last < PROGRESS_INTERVAL_S and done < total:
            return
        self.last = now
        self.stream.write(f"\r{self.label}: {done:,} of {total:,} records ({100 * done // total}%)\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown and self.stream is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False
