"""``source.ordering: key`` inside one routing task: which records wait behind their key.

The ordering stage hands a key's records on in source order. Once a record of a key goes to
retry (or is dead-lettered under ``ordering.onDeadLetter: block``: ``Decision.holds_key``), its
key's later records in the task are parked, unprocessed, in the retry topic, behind it; a
retried record that is done (published, acknowledged, or dead-lettered under ``skip``) writes a
``release`` control record, one dead-lettered under ``block`` a ``block`` record. Records with a
null key are never held. ``KeyHold`` is that rule, used both while calling the processor (a held
key's message is not processed) and when the batch's records are written.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from dlq_engine.routing import headers as h
from dlq_engine.routing.outcomes import Decision, Route


class KeyHold:
    """The keys held in one routing task (``held``: shared by the task's Arrow batches)."""

    __slots__ = ("held",)

    def __init__(self, held: set[bytes]) -> None:
        self.held = held

    def parks(self, key: bytes | None) -> bool:
        """Whether a record of ``key`` waits behind an earlier one."""
        return key is not None and key in self.held

    def after(self, key: bytes | None, decision: Decision) -> None:
        """Note ``decision`` of a record of ``key`` that was not parked."""
        if key is not None and decision.holds_key:
            self.held.add(key)


def park_and_release(
    keys: Sequence[bytes | None],
    decision_of: Callable[[int], Decision],
    retried: Container[int],
    held: set[bytes],
) -> tuple[list[int], list[tuple[int, str]]]:
    """Walk a batch's rows in order: the rows parked behind their key, and the control records
    to write as (row, ``dlq.control``): ``block`` for a dead letter that holds its key,
    ``release`` for a retry record (``retried``) whose message is done."""
    hold = KeyHold(held)
    parked: list[int] = []
    controls: list[tuple[int, str]] = []
    for i, key in enumerate(keys):
        if key is None:
            continue
        if hold.parks(key):
            parked.append(i)
            continue
        decision = decision_of(i)
        hold.after(key, decision)
        written = control(decision, retried=i in retried)
        if written is not None:
            controls.append((i, written))
    return parked, controls


def control(decision: Decision, *, retried: bool) -> str | None:
    """The control record a record's ``decision`` writes for its key: none for a retry (its key
    stays held), ``block`` for a dead letter that holds its key, ``release`` when a record read
    from the retry topic (``retried``) is done."""
    if decision.route is Route.RETRY:
        return None
    if decision.holds_key:
        return h.CONTROL_BLOCK
    return h.CONTROL_RELEASE if retried else None
