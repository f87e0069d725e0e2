"""How long a message waits before its next attempt.

``fixed`` waits ``delay`` every time; ``exponential`` waits ``delay * multiplier^(n-1)`` for
the n-th redelivery, capped by ``maxDelay``; ``levels`` takes the n-th level and repeats the
last (PIP-106's multiplier and TDMQ's levels). ``jitter`` spreads the delay uniformly over
``delay * (1 ± jitter)`` so that a burst of failures does not come back as a burst; an
exponential delay stays capped by ``maxDelay`` after jitter.
"""

from __future__ import annotations

from dlq_engine.model.policy import BackoffSpec


def delay_ms(backoff: BackoffSpec, redelivery: int, rand: float = 0.5) -> int:
    """The delay before redelivery number ``redelivery`` (1 for the first retry).

    ``rand`` is a uniform number in [0, 1); 0.5 means no jitter, so tests pass a fixed value.
    """
    n = max(1, redelivery)
    if backoff.type == "fixed":
        base = float(backoff.delay_ms)
    elif backoff.type == "levels":
        levels = backoff.levels_ms or (backoff.delay_ms,)
        base = float(levels[min(n, len(levels)) - 1])
    else:
        # Cap before multiplying further: multiplier^n overflows a float for large n.
        base = float(backoff.delay_ms)
        for _ in range(n - 1):
            base *= backoff.multiplier
            if base >= backoff.max_delay_ms:
                break
        base = min(base, float(backoff.max_delay_ms))
    jittered = base * (1.0 + backoff.jitter * (2.0 * rand - 1.0))
    if backoff.type == "exponential":
        jittered = min(jittered, float(backoff.max_delay_ms))
    return max(0, round(jittered))
