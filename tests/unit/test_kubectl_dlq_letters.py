"""``kubectl dlq``: which dead letters ``ls`` keeps, in which order, and what ``stats`` counts."""

from __future__ import annotations

from spark_dlq_operator.kubectl_dlq import times
from spark_dlq_operator.kubectl_dlq.letters import Filters, count, select
from spark_dlq_operator.kubectl_dlq.times import Window
from tests.unit.dead_letters import T0, letter


def test_filters_match_every_given_field() -> None:
    fraud = letter(1, reason="terminated", error_class="billing.errors.FraudError", key=b"order-9")
    flaky = letter(2, reason="exhausted", error_class="TimeoutError", key=None)
    assert Filters()(fraud)
    assert Filters()(flaky)
    assert Filters(reasons=frozenset({"terminated", "non-retryable"}))(fraud)
    assert not Filters(reasons=frozenset({"terminated"}))(flaky)
    # An error class matches by its full name or its last dotted part.
    assert Filters(error_classes=frozenset({"FraudError"}))(fraud)
    assert Filters(error_classes=frozenset({"billing.errors.FraudError"}))(fraud)
    assert not Filters(error_classes=frozenset({"errors.FraudError"}))(fraud)
    assert Filters(key="order-9")(fraud)
    assert not Filters(key="order-9")(flaky)
    assert not Filters(key="order-")(fraud)
    assert not Filters(Window(T0 + 1, None))(fraud)
    assert Filters(Window(T0, T0 + 1))(fraud)


def test_select_lists_oldest_first_and_limit_keeps_the_newest() -> None:
    letters = [letter(i, partition=i % 2, failed_at=T0 + (5 - i) * 1000) for i in range(6)]
    chosen = select(letters, Filters(), None)
    assert [d.offset for d in chosen] == [5, 4, 3, 2, 1, 0]
    assert all(d.value is None for d in chosen)  # values are not kept for a list
    assert [d.offset for d in select(letters, Filters(), 2)] == [1, 0]
    tied = [letter(3, partition=1), letter(9, partition=0), letter(2, partition=1)]
    assert [d.position for d in select(tied, Filters(), None)] == ["0/9", "1/2", "1/3"]


def test_stats_count_reasons_classes_and_both() -> None:
    letters = [
        letter(0, failed_at=T0 + 3000),
        letter(1, failed_at=T0 + 1000),
        letter(2, reason="terminated", error_class="FraudError", failed_at=T0 + 2000),
        letter(3, reason=None, failed_at=T0 + 9000),
    ]
    stats = count(letters, Window(None, T0 + 5000))
    assert stats.total == 3
    assert (stats.oldest, stats.newest) == (T0 + 1000, T0 + 3000)
    assert stats.by_reason == {"exhausted": 2, "terminated": 1}
    assert stats.by_class == {"ValueError": 2, "FraudError": 1}
    assert stats.by_both == {("exhausted", "ValueError"): 2, ("terminated", "FraudError"): 1}
    everything = count(letters, Window())
    assert everything.by_reason[times.NONE] == 1
