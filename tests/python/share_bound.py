"""The fleet's bound (docs/design/share.md, "The bound") over a run's admissions, for the
fleet tests: tests/python/test_share.py (processes) and tests/nginx/test_nginx_share.py (an
nginx host among processes)."""

from __future__ import annotations

from cellrate.share import FLOOR_DIVISOR


def bound(window: float, changes: int, joins: int, members: int, *, rate: float, burst: int,
          interval: float, timeout: float) -> float:
    """R*d + B*(1 + changes) + n + joins * R * (I + T) / FLOOR_DIVISOR."""
    return (rate * window + burst * (1 + changes) + members
            + joins * rate * (interval + timeout) / FLOOR_DIVISOR)


def busiest(admitted: list[float], events: list[tuple[float, str, object]], *, members: int,
            rate: float, burst: int, interval: float, ttl: float, timeout: float,
            window: float = 1.0, step: float = 0.05) -> tuple[float, float]:
    """Every window of `window` s, starting every `step` s, of the sorted admission instants
    checked against the bound, with the changes (events: (instant, "join" | "death", who))
    that may still move shares in it; returns the busiest window's start and its fraction of
    the bound (AssertionError at the first window past it)."""
    reach = ttl + 3 * (interval + timeout)  # how long a change moves shares
    worst, worst_at = 0.0, admitted[0]
    t = admitted[0]
    lo = hi = 0
    while t + window <= admitted[-1]:
        while admitted[lo] < t:
            lo += 1
        while hi < len(admitted) and admitted[hi] < t + window:
            hi += 1
        near = [e for e in events if t - reach <= e[0] <= t + window]
        joins = sum(1 for e in near if e[1] == "join")
        limit = bound(window, len(near), joins, members, rate=rate, burst=burst,
                      interval=interval, timeout=timeout)
        assert hi - lo <= limit, (t, hi - lo, limit)
        if (hi - lo) / limit > worst:
            worst, worst_at = (hi - lo) / limit, t
        t += step
    return worst_at, worst
