"""What the commands do with the dead letters a reader yields: keep those ``ls`` asks for, newest
last, and count them by reason and error class for ``stats``. Pure; the dead letter itself and
its decoded facts are the engine model's (``dlq_engine.model.dead_letter``).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from dlq_engine.model.dead_letter import DeadLetter
from spark_dlq_operator.kubectl_dlq.times import NONE, Window


@dataclass(frozen=True, slots=True)
class Filters:
    """What ``ls`` keeps: every given field must match; a repeated flag matches any of its
    values. An error class matches by its full name or its last dotted part."""

    window: Window = field(default_factory=Window)
    reasons: frozenset[str] = frozenset()
    error_classes: frozenset[str] = frozenset()
    key: str | None = None

    def __call__(self, letter: DeadLetter) -> bool:
        if letter.failed_at not in self.window:
            return False
        if self.reasons and letter.reason not in self.reasons:
            return False
        if self.error_classes:
            cls = letter.error_class
            if cls is None or (
                cls not in self.error_classes and cls.rsplit(".", 1)[-1] not in self.error_classes
            ):
                return False
        if self.key is not None:
            return letter.key is not None and letter.key == self.key.encode("utf-8")
        return True


def _order(letter: DeadLetter) -> tuple[int, int, int]:
    failed = letter.failed_at
    return (failed if failed is not None else -1, letter.partition, letter.offset)


def select(letters: Iterable[DeadLetter], filters: Filters, limit: int | None) -> list[DeadLetter]:
    """The dead letters ``filters`` keeps, oldest failure first; with ``limit`` only the newest
    ``limit`` of them (the last lines of the whole list)."""
    kept = (letter.summary() for letter in letters if filters(letter))
    if limit is None:
        return sorted(kept, key=_order)
    return sorted(heapq.nlargest(limit, kept, key=_order), key=_order)


@dataclass(slots=True)
class Stats:
    """Counts over the dead letters in a window, built one record at a time."""

    total: int = 0
    oldest: int | None = None
    newest: int | None = None
    by_reason: Counter[str] = field(default_factory=Counter)
    by_class: Counter[str] = field(default_factory=Counter)
    by_both: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, letter: DeadLetter) -> None:
        reason, cls = letter.reason or NONE, letter.error_class or NONE
        self.total += 1
        self.by_reason[reason] += 1
        self.by_class[cls] += 1
        self.by_both[(reason, cls)] += 1
        failed = letter.failed_at
        if failed is not None:
            self.oldest = failed if self.oldest is None else min(self.oldest, failed)
            self.newest = failed if self.newest is None else max(self.newest, failed)


def count(letters: Iterable[DeadLetter], window: Window) -> Stats:
    stats = Stats()
    for letter in letters:
        if letter.failed_at in window:
            stats.add(letter)
    return stats
