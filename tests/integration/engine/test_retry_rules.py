"""``retry.rules`` on the real broker and Spark: a failure of a listed class gets its rule's
limit, backoff and time budget and names the rule on its records; other failures keep the
policy's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.helpers import produce, read_all


def test_rules_give_each_error_class_its_own_limit(
    bootstrap_servers: str, topics: Callable[..., dict[str, str]], engine: Callable[..., Any]
) -> None:
    names = topics()
    produce(
        bootstrap_servers,
        names["source"],
        [
            (b"fail", b"fail:x"),
            (b"flaky", b"flaky:2"),
            (b"timed", b"timed:3"),
            (b"ok", b"ok:y"),
            (b"budget", b"broken-until:/never/there"),
        ],
    )
    # The policy allows 2 redeliveries (tests.helpers.BASE_POLICY); RuntimeError gets none,
    # ConnectionError (flaky:2 and timed:3) four, ValueError (budget) fifty within one second.
    running = engine(
        names,
        retry={
            "maxRedeliverCount": 2,
            "backoff": {"type": "fixed", "delay": "200ms"},
            "rules": [
                {"errors": ["RuntimeError"], "maxRedeliverCount": 0},
                {
                    "errors": ["ConnectionError"],
                    "maxRedeliverCount": 4,
                    "backoff": {"type": "fixed", "delay": "100ms"},
                },
                {
                    "errors": ["ValueError"],
                    "maxRedeliverCount": 50,
                    "maxRetryDuration": "1s",
                    "backoff": {"type": "fixed", "delay": "300ms"},
                },
            ],
        },
    )
    running.wait_for(output=3, dead=2, timeout=180)
    dead = {r.key: r for r in read_all(bootstrap_servers, names["dlq"], expect=2, timeout=30)}
    fail = dead[b"fail"]
    assert (fail.header("dlq.reason"), fail.header("dlq.rule"), fail.header("dlq.attempt")) == (
        "exhausted",
        "retry.rules[0]",
        "1",
    )
    # Dead-lettered once its next retry would have been due past a second from its first failure,
    # with most of its fifty redeliveries left; no retry of it was due past that second.
    budget = dead[b"budget"]
    first = int(budget.header("dlq.first.failure.at") or "")
    assert (budget.header("dlq.reason"), budget.header("dlq.rule")) == ("retry-timeout", "retry.rules[2]")
    assert 2 <= int(budget.header("dlq.attempt") or "") < 10
    assert int(budget.header("dlq.failed.at") or "") + 300 > first + 1_000
    assert running.run.totals.counts["dead_retry_timeout"] == 1
    outputs = {r.key: r.value for r in read_all(bootstrap_servers, names["output"], expect=3, timeout=30)}
    assert outputs[b"ok"] == b"Y"
    assert outputs[b"flaky"] == b"recovered after 2"
    assert b"timed" in outputs  # three redeliveries: more than the policy's two, within the rule's four
    retries = read_all(bootstrap_servers, names["retry"])
    assert {r.header("dlq.rule") for r in retries if r.key in (b"flaky", b"timed")} == {"retry.rules[1]"}
    # The rule's backoff (fixed 100 ms), not the policy's (fixed 200 ms).
    waits = {
        int(str(r.header("dlq.deliver.at"))) - int(str(r.header("dlq.failed.at")))
        for r in retries
        if r.key != b"budget"
    }
    assert waits == {100}, waits
    assert all(int(str(r.header("dlq.deliver.at"))) <= first + 1_000 for r in retries if r.key == b"budget")
    running.stop()
