"""Reference model of the algorithm catalogue, reservations and check_all.

Written from the design contract (docs/design.md §1, §7, §8,
§9) alone, in exact Python integers and fractions, sharing no code with the C
core. A key's state is kept abstractly (its window index and counts); the
state word the stores keep is derived from it by `pack`, the layout that
docs/design.md §7 fixes, so that the vectors can pin the word too.

Window semantics:
- fixed_window: at most `rate` units in each window [k*P, (k+1)*P).
- sliding_window: admitted while prev * (P - elapsed) / P + curr + cost <= rate,
  prev and curr the counts of the previous and the current window.
- A key whose count no longer matters is the same as an absent key.
- A clock that steps back never loosens: a key whose window lies after `now`
  keeps its counts in that window, and a sliding key there weighs its previous
  window fully (elapsed 0), until `now` reaches it.
- retry_after: the earliest instant at which the same request would be
  admitted with no other admission meanwhile (found here by search, not by
  formula); reset_after: until the key holds no count that matters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import gcra_model as gcra
from gcra_model import HORIZON_NS, INT64_MAX, NEVER, round_half_away

ALGORITHMS = ("gcra", "token_bucket", "fixed_window", "sliding_window")
WINDOWS = ("fixed_window", "sliding_window")
MAX_WINDOW_NS = 2**60


@dataclass(frozen=True)
class WindowLimit:
    algorithm: str  # "fixed_window" | "sliding_window"
    window_ns: int  # P
    rate: int  # whole units per window
    max_debt: int | None = None  # units a charge may count beyond the rate; None: the rate

    @property
    def debt(self) -> int:
        return self.rate if self.max_debt is None else self.max_debt

    def __post_init__(self) -> None:
        assert self.algorithm in WINDOWS
        assert 1 <= self.window_ns < MAX_WINDOW_NS and self.rate >= 1
        if self.algorithm == "fixed_window":
            assert self.rate <= self.window_ns - 1, "over the fixed_window ceiling"
        else:
            assert (self.rate + 1) ** 2 <= self.window_ns, "over the sliding_window ceiling"


@dataclass(frozen=True)
class Counts:
    """A window key: its current window index and counts (prev unused by fixed)."""

    window: int
    prev: int
    curr: int


def pack(limit: WindowLimit, counts: Counts | None) -> int:
    """The state word (docs/design.md §7); 0 for an absent key."""
    if counts is None:
        return 0
    P = limit.window_ns
    if limit.algorithm == "fixed_window":
        word = (counts.window + 1) * P + counts.curr
    else:
        word = (counts.window + 2) * P + counts.prev * (limit.rate + 1) + counts.curr
    assert 0 < word <= INT64_MAX
    return word


def _seen(limit: WindowLimit, counts: Counts | None, t: int) -> tuple[int, int, int, int]:
    """(window, prev, curr, elapsed) of the key as it counts at time t."""
    P = limit.window_ns
    k = t // P
    if counts is None:
        return k, 0, 0, t - k * P
    if counts.window > k:  # the clock stepped back: keep the later window, fully weighted
        return counts.window, counts.prev, counts.curr, 0
    if counts.window == k:
        return k, counts.prev, counts.curr, t - k * P
    if counts.window == k - 1 and limit.algorithm == "sliding_window":
        return k, counts.curr, 0, t - k * P
    return k, 0, 0, t - k * P


def _effective(limit: WindowLimit, prev: int, curr: int, elapsed: int) -> Fraction:
    if limit.algorithm == "fixed_window":
        return Fraction(curr)
    P = limit.window_ns
    return Fraction(prev * (P - elapsed), P) + curr


def _admits(limit: WindowLimit, counts: Counts | None, t: int, cost: int) -> bool:
    _, prev, curr, elapsed = _seen(limit, counts, t)
    return _effective(limit, prev, curr, elapsed) + cost <= limit.rate


def _earliest(limit: WindowLimit, counts: Counts | None, t: int, cost: int) -> int:
    """The least t' >= t at which `cost` is admitted: a search (admission only
    grows with time, and within two windows after the key's any cost <= rate fits)."""
    window = counts.window if counts is not None else t // limit.window_ns
    hi = max(t, (window + 2) * limit.window_ns)
    assert _admits(limit, counts, hi, cost)
    lo = t
    while lo < hi:
        mid = (lo + hi) // 2
        if _admits(limit, counts, mid, cost):
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class WindowDecision:
    allowed: bool
    remaining: int
    retry_after_ns: int
    reset_after_ns: int
    limit: int
    counts_after: Counts | None


def window_decide(limit: WindowLimit, counts: Counts | None, t: int, cost: int,
                  commit: bool = True) -> WindowDecision:
    if not 0 <= t < HORIZON_NS or cost < 0:
        raise ValueError("t must be in [0, 2**62) and cost >= 0")
    P, R = limit.window_ns, limit.rate
    window, prev, curr, elapsed = _seen(limit, counts, t)
    if cost == 0:
        allowed = True
    elif cost > R:
        allowed = False
    else:
        allowed = _effective(limit, prev, curr, elapsed) + cost <= R
    after = counts
    if allowed and cost > 0:
        curr += cost
        if commit:
            after = Counts(window, prev, curr)
    remaining = max(0, math.floor(R - _effective(limit, prev, curr, elapsed)))
    if allowed:
        retry = 0
    elif cost > R:
        retry = NEVER
    else:
        retry = _earliest(limit, counts, t, cost) - t
    start = window * P
    if curr > 0:
        reset = start + (P if limit.algorithm == "fixed_window" else 2 * P) - t
    elif prev > 0:
        reset = start + P - t
    else:
        reset = 0
    return WindowDecision(allowed, remaining, retry, reset, R, after)


def window_refund(limit: WindowLimit, counts: Counts | None, t: int,
                  cost: int) -> tuple[Counts | None, int]:
    """(counts after, units given back): `cost` units from the current
    window's count, else (sliding) from the previous window's; units of a
    window that ended are gone."""
    if cost == 0:
        return counts, 0
    window, prev, curr, _ = _seen(limit, counts, t)
    if curr > 0:
        return Counts(window, prev, max(0, curr - cost)), min(cost, curr)
    if prev > 0:
        return Counts(window, max(0, prev - cost), 0), min(cost, prev)
    return counts, 0


def window_carry(old: WindowLimit, new: WindowLimit, counts: Counts | None, t: int) -> Counts | None:
    """The counts under `new` of a key counted `counts` under `old`, at t
    (docs/design.md §4): counts carry as counts. A new period re-aligns the
    windows: the current count goes to the new window holding t (or the key's
    own, later, window when the clock stepped back), the previous count to the
    window before it. A count above the new rate is clipped to it: a full
    window, refused until it rolls (fixed) or decays (sliding); a previous
    count's excess weighs on in the current count for the rest of its window.
    A key with no count is absent; a change to the same parameters keeps the
    counts."""
    if old.algorithm != new.algorithm:
        raise ValueError("the algorithm cannot change")
    if (old.window_ns, old.rate) == (new.window_ns, new.rate):
        return counts  # max_debt bounds later charges: a debt carries whole
    window, prev, curr, _ = _seen(old, counts, t)
    if prev == 0 and curr == 0:
        return None
    anchor = max(t, window * old.window_ns)
    P, R = new.window_ns, new.rate
    k = anchor // P
    carried_curr = min(curr, R)
    if new.algorithm == "sliding_window" and prev > R:
        # the weight of the previous count above R, from now to the window's end, moves
        # into the current count (rounded up): never less than the counts weighed
        elapsed = max(0, t - k * P)
        carried_curr = min(R, carried_curr + math.ceil(Fraction((prev - R) * (P - elapsed), P)))
    return Counts(k, min(prev, R), carried_curr)


# --------------------------------------------------------------------------
# Reservations (docs/design.md §9)


def gcra_reserve(limit: gcra.Limit, tat: int, t: int, cost: int,
                 max_wait_ns: int | None) -> tuple[bool, int, int]:
    """(reserved, delay_ns, tat_after): commits `cost` at the earliest instant it
    fits when that is at most max_wait_ns away (None: any wait)."""
    if cost == 0:
        return True, 0, tat
    T, tau = limit.emission_ns, limit.tolerance_ns
    if cost * T > tau:
        return False, 0, tat
    new_tat = max(tat, t) + cost * T
    if new_tat > INT64_MAX:
        return False, 0, tat
    delay = max(0, new_tat - tau - t)
    if max_wait_ns is not None and delay > max_wait_ns:
        return False, 0, tat
    return True, delay, new_tat


def gcra_refund(limit: gcra.Limit, tat: int, t: int, cost: int) -> tuple[int, int]:
    """(TAT after, units given back): `cost` units, never better than idle (a
    TAT <= t); given back, the span restored in units of T, a part counted whole."""
    if cost == 0 or tat <= t:
        return tat, 0
    after = max(tat - cost * limit.emission_ns, t)
    return after, -(-(tat - after) // limit.emission_ns)


# --------------------------------------------------------------------------
# Limits with an algorithm (cr_limit_init)


@dataclass(frozen=True)
class Derived:
    status: str
    emission_ns: int = 0
    tolerance_ns: int = 0
    burst: int = 0


def limit_for(algorithm: str, rate: float | None, period_s: float | None, burst: int | None,
              rate_text: str | None = None) -> Derived:
    """cr_limit_init with an algorithm: checks in the core's order."""
    if algorithm not in ALGORITHMS:
        return Derived("E_ALGORITHM")
    if algorithm not in WINDOWS:
        if rate_text is not None:
            status, T, b = gcra.limit_from_text(rate_text, period_s is not None, burst)
        else:
            status, T, b = gcra.limit_from_number(rate, period_s, burst)
        return Derived(status, T, T * b, b) if status == "OK" else Derived(status)
    if rate_text is not None:
        status, rate, period = gcra.parse_rate(rate_text)
        if status != "OK":
            return Derived(status)
    else:
        period = 1.0 if period_s is None else period_s
    assert rate is not None
    if not (math.isfinite(rate) and rate > 0):
        return Derived("E_RATE")
    if rate_text is not None and period_s is not None:
        return Derived("E_PERIOD_WITH_TEXT")
    if not (math.isfinite(period) and period > 0):
        return Derived("E_PERIOD")
    if burst is not None:
        return Derived("E_BURST_WINDOW")
    if rate != math.floor(rate):
        return Derived("E_RATE_WHOLE")
    window = period * 1e9  # one IEEE double product, as the core computes it
    ceiling = "E_RATE_FIXED_CEILING" if algorithm == "fixed_window" else "E_RATE_SLIDING_CEILING"
    if not window < MAX_WINDOW_NS:
        return Derived("E_WINDOW_TOO_LONG")
    if not rate < MAX_WINDOW_NS:
        return Derived(ceiling)
    window_ns = round_half_away(Fraction(window))
    amount = int(rate)
    over = amount > window_ns - 1 if algorithm == "fixed_window" else (amount + 1) ** 2 > window_ns
    if over:
        return Derived(ceiling)
    emission = round_half_away(Fraction(float(window_ns) / float(amount)))
    return Derived("OK", emission, window_ns, amount)


def fixed_ceiling(window_ns: int) -> int:
    return window_ns - 1


def sliding_ceiling(window_ns: int) -> int:
    return math.isqrt(window_ns) - 1


# --------------------------------------------------------------------------
# Several limits as one (docs/design.md §8)


def tightest(decisions: list) -> int:
    """The index of the tightest decision: a refusal with the longest
    retry_after, else the admission with the fewest remaining (first wins)."""
    best = 0
    for i, d in enumerate(decisions):
        b = decisions[best]
        if d.allowed != b.allowed:
            if not d.allowed:
                best = i
        elif not d.allowed and d.retry_after_ns > b.retry_after_ns:
            best = i
        elif d.allowed and d.remaining < b.remaining:
            best = i
    return best


# --------------------------------------------------------------------------
# Cost known after the fact (docs/design.md §9)

# The deepest GCRA debt whatever max_debt says: TAT at most now + 2**62 ns.
DEBT_MAX_NS = HORIZON_NS


@dataclass(frozen=True)
class Charged:
    """A charge's decision: check's when the units fit; else the key is in debt:
    refused, retry_after the wait of one unit now, remaining and reset_after
    those of the state charged. clipped: the charge met the debt bound and
    committed fewer units than asked; committed: the units it committed."""

    allowed: bool
    remaining: int
    retry_after_ns: int
    reset_after_ns: int
    clipped: bool
    committed: int


def window_ceiling(limit: WindowLimit) -> int:
    """The largest current count a charge may leave: fixed, the rate plus
    max_debt, at most what `end + count` carries while count < P; sliding,
    the rate (counts are digits of radix rate + 1: no debt)."""
    if limit.algorithm == "fixed_window":
        return min(limit.rate + limit.debt, limit.window_ns - 1)
    return limit.rate


def charge(limit, state, t: int, cost: int) -> tuple[Charged, object]:
    """(decision, state after) of charging `cost` units at t; `limit` a
    gcra.Limit (state: the TAT) or a WindowLimit (state: Counts or None).
    The units committed are the cost, or, past the debt bound, the most whole
    units under it (none when the key is there already: its state is kept)."""
    if cost < 0:
        raise ValueError("cost must be >= 0")
    peek = _peeker(limit)
    fits = peek(state, t, cost).allowed
    if isinstance(limit, WindowLimit):
        window, prev, curr, _ = _seen(limit, state, t)
        room = max(0, window_ceiling(limit) - curr)
    else:
        base = max(state, t)
        T = limit.emission_ns
        bound = t + min(limit.tolerance_ns + limit.debt * T, DEBT_MAX_NS)
        room = max(0, (bound - base) // T)
    committed = min(cost, room)
    after = state
    if committed > 0 and isinstance(limit, WindowLimit):
        after = Counts(window, prev, curr + committed)
    elif committed > 0:
        after = base + committed * T
    assert not fits or committed == cost  # what fits is the check's commit
    report = peek(after, t, 0 if fits else 1)
    return Charged(fits, report.remaining, report.retry_after_ns, report.reset_after_ns,
                   cost > room, committed), after


def take(limit, state, t: int, max_cost: int) -> tuple[int, object]:
    """(units taken, state after): the most units, at most max_cost, that one
    check admits at t (found by search: admission only shrinks as the cost grows)."""
    if max_cost < 0:
        raise ValueError("max_cost must be >= 0")
    peek = _peeker(limit)
    lo, hi = 0, max_cost
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if peek(state, t, mid).allowed:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return 0, state
    if isinstance(limit, WindowLimit):
        return lo, window_decide(limit, state, t, lo, True).counts_after
    return lo, gcra.decide(limit, state, t, lo, True).tat_after


def _peeker(limit):
    if isinstance(limit, WindowLimit):
        return lambda state, t, cost: window_decide(limit, state, t, cost, False)
    return lambda state, t, cost: gcra.decide(limit, state, t, cost, False)
