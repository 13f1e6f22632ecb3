"""The reference model against docs/design.md §1, and the vectors against the model.

The expectations here are restated from docs/design.md §1 by hand, so a slip in the model
shows up here before it can spread into the vectors.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import catalogue_model as catalogue  # noqa: E402
import gcra_model as model  # noqa: E402
import make_vectors  # noqa: E402
from gcra_model import INT64_MAX, Limit, Store, decide  # noqa: E402

MS = 10**6
S = 10**9


def run(limit: Limit, arrivals, cost=1):
    store = Store(limit)
    return [store.check("k", t, cost, True) for t in arrivals], store


def test_ten_per_second_burst_one():
    decisions, _ = run(Limit(100 * MS, 1), [0, 100 * MS, 200 * MS, 250 * MS, 300 * MS])
    assert [d.allowed for d in decisions] == [True, True, True, False, True]
    assert decisions[3].retry_after_ns == 50 * MS


def test_ten_per_second_burst_six():
    decisions, store = run(Limit(100 * MS, 6), [0] * 7)
    assert [d.allowed for d in decisions] == [True] * 6 + [False]
    assert decisions[5].tat_after == 600 * MS
    assert decisions[6].retry_after_ns == 100 * MS
    late = store.check("k", 100 * MS, 1, True)
    assert late.allowed and late.tat_after == 700 * MS


def test_two_groups_of_six():
    decisions, _ = run(Limit(100 * MS, 6), [0] * 6 + [S] * 6)
    assert all(d.allowed for d in decisions)
    assert decisions[-1].tat_after == 1600 * MS


def test_three_hundred_per_minute_drained():
    store = Store(Limit(200 * MS, 60))
    first = [store.check("k", 0, 1, True).allowed for _ in range(61)]
    assert first == [True] * 60 + [False]
    admitted = 60
    times = []
    for step in range(1, 600):
        if store.check("k", step * 100 * MS, 1, True).allowed:
            admitted += 1
            times.append(step * 100 * MS)
    assert all(b - a == 200 * MS for a, b in zip(times, times[1:]))
    assert 355 <= admitted <= 361


@pytest.mark.parametrize("burst, remaining", [(60, 59), (300, 299)])
def test_one_request_remaining(burst, remaining):
    assert decide(Limit(200 * MS, burst), 0, 5 * S, 1).remaining == remaining


def test_turned_away_consumes_nothing():
    limit = Limit(100 * MS, 1)
    tat = decide(limit, 0, 0, 1).tat_after
    for t in range(0, 100 * MS, MS):
        d = decide(limit, tat, t, 1)
        assert not d.allowed and d.tat_after == tat and d.retry_after_ns == 100 * MS - t
    assert decide(limit, tat, 100 * MS, 1).allowed


def test_probe_and_peek_store_nothing():
    limit = Limit(10, 3)
    assert decide(limit, 0, 5, 0) == model.Decision(True, 3, 0, 0, 3, 0)
    d = decide(limit, 1000, 5, 0)
    assert d.allowed and d.remaining == 0 and d.reset_after_ns == 995 and d.tat_after == 1000
    peek = decide(limit, 0, 5, 2, commit=False)
    assert peek.allowed and peek.tat_after == 0 and peek.remaining == 1


def test_unfittable():
    limit = Limit(10, 3)
    d = decide(limit, 0, 0, 4)
    assert not d.allowed and d.retry_after_ns == INT64_MAX and d.remaining == 3 and d.tat_after == 0
    assert decide(limit, 0, 0, INT64_MAX).retry_after_ns == INT64_MAX


def test_horizon_no_saturation():
    """Issue 8, defect 6: at the horizon the decision stays exact; 1000 calls at
    one instant admit exactly burst (saturation used to admit all 1000)."""
    limit = Limit(100 * MS, 5)
    store = Store(limit)
    last = model.HORIZON_NS - 1
    assert sum(store.check("k", last, 1, True).allowed for _ in range(1000)) == 5
    big = Limit(2**61, 2)  # tau = 2**62, the largest
    assert [decide(big, 0, last, 1).allowed, decide(big, 2**61 + last, last, 1).allowed] == [True, True]
    assert not decide(big, 2**62 + last, last, 1).allowed
    with pytest.raises(ValueError):
        decide(limit, 0, model.HORIZON_NS, 1)
    assert model.limit_from_number(2.0, 9.2e9, None)[0] == "E_BURST_TOO_LARGE"
    assert model.seconds_to_ns(9223372036.5)[0] == "E_NOW"
    assert model.seconds_to_ns(4611686018.0) == ("OK", 4611686018 * S)


def test_fixed_window_design_vector():
    """docs/design.md §7, a reference vector: rate 10 per 8 s: 9 units by t = 2 s, a cost-3 arrival at 4 s is
    turned away, at 8 s the window rolls and 9 more are admitted by 10 s."""
    limit = catalogue.WindowLimit("fixed_window", 8 * S, 10)
    counts = None
    for i in range(9):
        d = catalogue.window_decide(limit, counts, i * S // 4, 1)
        assert d.allowed
        counts = d.counts_after
    d = catalogue.window_decide(limit, counts, 4 * S, 3)
    assert not d.allowed and d.retry_after_ns == 4 * S and d.remaining == 1
    for i in range(9):
        d = catalogue.window_decide(limit, counts, 8 * S + i * S // 4, 1)
        assert d.allowed
        counts = d.counts_after
    assert d.remaining == 1 and d.reset_after_ns == 8 * S - 2 * S


def test_sliding_window_design_vector():
    """docs/design.md §7, a reference vector: previous 6, current 6, 6 s into an 8 s window:
    6 * 2/8 + 6 = 7.5, so cost 3 is turned away (a fixed window admits it)."""
    limit = catalogue.WindowLimit("sliding_window", 8 * S, 10)
    counts = catalogue.Counts(window=1, prev=6, curr=6)
    d = catalogue.window_decide(limit, counts, 8 * S + 6 * S, 3)
    assert not d.allowed and d.remaining == 2  # floor(10 - 7.5)
    # 6 * (8 - e) / 8 + 9 <= 10  <=>  e >= 8 - 4/3 s: the retry is exact to the ns
    assert d.retry_after_ns == 8 * S - (4 * S) // 3 - 6 * S == 666_666_667
    fixed = catalogue.WindowLimit("fixed_window", 8 * S, 10)
    assert catalogue.window_decide(fixed, catalogue.Counts(1, 0, 6), 14 * S, 3).allowed


def test_window_bounds_on_random_arrivals():
    import random

    rng = random.Random(11)
    for algorithm in catalogue.WINDOWS:
        limit = catalogue.WindowLimit(algorithm, 1000, 7)
        counts, t, per_window = None, 0, {}
        for _ in range(4000):
            t += rng.randrange(0, 300)
            cost = rng.randrange(0, 4)
            d = catalogue.window_decide(limit, counts, t, cost)
            if d.allowed and cost:
                per_window[t // 1000] = per_window.get(t // 1000, 0) + cost
            counts = d.counts_after
        assert max(per_window.values()) <= 7
        if algorithm == "sliding_window":  # also over any two adjacent windows
            assert all(per_window.get(k, 0) + per_window.get(k + 1, 0) <= 14 for k in per_window)


def test_window_ceilings():
    assert catalogue.sliding_ceiling(S) == 31621 and catalogue.fixed_ceiling(S) == 999_999_999
    assert catalogue.sliding_ceiling(60 * S) == 244947
    assert catalogue.limit_for("sliding_window", 31622.0, None, None).status == "E_RATE_SLIDING_CEILING"
    assert catalogue.limit_for("fixed_window", 10.0, None, 5).status == "E_BURST_WINDOW"
    assert catalogue.limit_for("fixed_window", 0.5, None, None).status == "E_RATE_WHOLE"
    assert catalogue.limit_for("gcra", 10.0, None, None) == \
        catalogue.limit_for("token_bucket", 10.0, None, None)


def test_reserve_and_refund():
    limit = Limit(100 * MS, 2)
    assert catalogue.gcra_reserve(limit, 0, 0, 1, None) == (True, 0, 100 * MS)
    assert catalogue.gcra_reserve(limit, 200 * MS, 0, 1, None) == (True, 100 * MS, 300 * MS)
    assert catalogue.gcra_reserve(limit, 200 * MS, 0, 1, 50 * MS) == (False, 0, 200 * MS)
    assert catalogue.gcra_reserve(limit, 0, 0, 3, None)[0] is False
    assert catalogue.gcra_refund(limit, 300 * MS, 0, 1) == (200 * MS, 1)
    assert catalogue.gcra_refund(limit, 300 * MS, 0, 10) == (0, 3)  # what was taken
    assert catalogue.gcra_refund(limit, 300 * MS, 400 * MS, 1) == (300 * MS, 0)
    assert catalogue.gcra_refund(limit, 300 * MS, 250 * MS, 1) == (250 * MS, 1)  # half, whole


def test_the_debt_bound():
    """A charge commits at most max_debt units beyond the limit (default: the
    burst, a window's rate), in whole units; past it, clipped."""
    limit = Limit(100 * MS, 10)
    d, tat = catalogue.charge(limit, 0, S, 2**70)
    assert (d.clipped, d.committed, tat, d.retry_after_ns) == (True, 20, S + 2 * S,
                                                               1100 * MS)
    d, again = catalogue.charge(limit, tat, S, 1)
    assert (d.clipped, d.committed, again) == (True, 0, tat)
    d, tat = catalogue.charge(Limit(100 * MS, 10, 100), 0, S, 50)
    assert (d.clipped, d.committed, d.retry_after_ns) == (False, 50, 4100 * MS)
    d, tat = catalogue.charge(Limit(100 * MS, 10, 0), 0, S, 11)
    assert (d.clipped, d.committed, tat) == (True, 10, 2 * S)
    fixed = catalogue.WindowLimit("fixed_window", S, 10)
    assert catalogue.charge(fixed, None, S, 2**70)[0].committed == 20
    fixed = catalogue.WindowLimit("fixed_window", S, 10, 2**62)
    assert catalogue.charge(fixed, None, S, 2**70)[0].committed == S - 1
    sliding = catalogue.WindowLimit("sliding_window", S, 10, 2**62)
    assert catalogue.charge(sliding, None, S, 2**70)[0].committed == 10


def test_interval_bound_holds_on_random_arrivals():
    import random

    rng = random.Random(7)
    limit = Limit(1000, 4)
    store = Store(limit)
    admitted = []
    t = 0
    for _ in range(5000):
        t += rng.randrange(0, 700)
        cost = rng.randrange(0, 3)
        if store.check("k", t, cost, True).allowed:
            admitted += [t] * cost
    for i, start in enumerate(admitted):
        for j in range(i, min(len(admitted), i + 40)):
            span = admitted[j] - start
            assert j - i + 1 <= limit.burst + span // limit.emission_ns


def test_limits_match_design():
    assert model.limit_from_number(10.0, None, None) == ("OK", 100 * MS, 10)
    assert model.limit_from_number(0.5, None, None) == ("OK", 2 * S, 1)
    assert model.limit_from_number(2.5, None, None)[2] == 3
    assert model.limit_from_number(300.0, 60.0, 60) == ("OK", 200 * MS, 60)
    assert model.limit_from_number(4e8, None, None)[1] == 3  # 2.5 ns rounds away from zero
    assert model.limit_from_number(2e10, None, None)[0] == "E_RATE_TOO_HIGH"
    assert model.limit_from_number(1e-10, None, None)[0] == "E_RATE_TOO_LOW"
    assert model.limit_from_number(1.0, None, INT64_MAX)[0] == "E_BURST_TOO_LARGE"
    assert model.limit_from_number(math.nan, None, None)[0] == "E_RATE"
    assert model.limit_from_number(1.0, 0.0, None)[0] == "E_PERIOD"
    assert model.limit_from_number(1.0, None, 0)[0] == "E_BURST"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("10/second", ("OK", 10.0, 1.0)),
        ("300/minute", ("OK", 300.0, 60.0)),
        ("5 per second", ("OK", 5.0, 1.0)),
        ("100/5m", ("OK", 100.0, 300.0)),
        (" .5 PER 2 Hours ", ("OK", 0.5, 7200.0)),
        ("10/month", ("E_RATE_CALENDAR", 0.0, 0.0)),
        ("1000/365d", ("OK", 1000.0, 365 * 86400.0)),
        ("10/", ("E_RATE_SYNTAX", 0.0, 0.0)),
        ("1e3/s", ("E_RATE_SYNTAX", 0.0, 0.0)),
        ("1234567890123456/s", ("E_RATE_SYNTAX", 0.0, 0.0)),
    ],
)
def test_rate_strings(text, expected):
    assert model.parse_rate(text) == expected


def test_seconds_round_half_away():
    assert model.seconds_to_ns(1 / 1024) == ("OK", 976563)  # 976562.5 exactly
    assert model.seconds_to_ns(-0.0) == ("OK", 0)
    assert model.seconds_to_ns(-1e-300)[0] == "E_NOW"
    assert model.seconds_to_ns(1e10)[0] == "E_NOW"


def test_vectors_are_fresh(tmp_path):
    """The committed vectors are exactly what the generator writes (never hand-edited)."""
    assert make_vectors.main(["--out", str(tmp_path)]) == 0
    for path in sorted(tmp_path.iterdir()):
        committed = make_vectors.VECTORS / path.name
        assert committed.exists(), f"{committed} missing: run make vectors"
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), (
            f"{committed} differs from a fresh generation: run make vectors"
        )
    assert make_vectors.main(["--check"]) == 0


def test_live_change_design_vectors():
    """docs/design.md §4: what carries is units used."""
    t0 = 5 * S
    tat = 0
    for _ in range(6):
        tat = decide(Limit(100 * MS, 10), tat, t0, 1).tat_after
    tat = model.carry(Limit(100 * MS, 10), Limit(10 * MS, 20), tat, t0)
    assert decide(Limit(10 * MS, 20), tat, t0, 0).remaining == 14

    tat = decide(Limit(10 * MS, 100), 0, t0, 80).tat_after
    new = Limit(100 * MS, 10)
    tat = model.carry(Limit(10 * MS, 100), new, tat, t0)
    assert not decide(new, tat, t0, 1).allowed
    assert not decide(new, tat, t0 + 7100 * MS - 1, 1).allowed
    assert decide(new, tat, t0 + 7100 * MS, 1).allowed

    minute = 60 * S
    old, wider, narrower = (catalogue.WindowLimit("fixed_window", minute, r) for r in (100, 80, 50))
    counts = catalogue.window_decide(old, None, 10 * minute + S, 60).counts_after
    carried = catalogue.window_carry(old, wider, counts, 10 * minute + 2 * S)
    assert catalogue.window_decide(wider, carried, 10 * minute + 2 * S, 0).remaining == 20
    carried = catalogue.window_carry(old, narrower, counts, 10 * minute + 2 * S)
    assert not catalogue.window_decide(narrower, carried, 11 * minute - 1, 1).allowed
    assert catalogue.window_decide(narrower, carried, 11 * minute, 50).allowed


def test_live_change_same_limit_and_idle_keep_the_state():
    limit = Limit(100 * MS, 10)
    assert model.carry(limit, limit, 7 * S, S) == 7 * S
    assert model.carry(limit, Limit(MS, 3), S // 2, S) == S // 2
    # the debt is clipped at the horizon, never admitted sooner
    assert model.carry(Limit(1, 2**62), Limit(2**62, 1), 2**62, 0) == 2**62


def test_live_change_sliding_excess_weighs_on():
    """sliding_window 100/minute with 100 in the previous window, changed to 50/minute
    half-way through the current one: the previous count clips to 50 and its excess
    (50, half of its weight left) moves into the current count, so nothing is admitted
    sooner than the counts alone would admit."""
    minute = 60 * S
    old, new = (catalogue.WindowLimit("sliding_window", minute, r) for r in (100, 50))
    counts = catalogue.window_decide(old, None, 10 * minute, 100).counts_after
    carried = catalogue.window_carry(old, new, counts, 11 * minute + 30 * S)
    assert carried == catalogue.Counts(11, 50, 25)
    assert not catalogue.window_decide(new, carried, 11 * minute + 30 * S, 1).allowed
    assert catalogue.window_decide(new, carried, 11 * minute + 45 * S, 0).remaining == 12
