"""The follow model against its contract (docs/design.md §18), by brute force:
units admitted one by one through the decision models after a follow, never
more than a bound allows, never more than before the follow; and the reading
of fields against hand-worked examples."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import catalogue_model as catalogue  # noqa: E402
import follow_model as follow  # noqa: E402
import gcra_model as gcra  # noqa: E402

S = 10**9
MS = 10**6


def greedy(limit, state, now: int, until: int, step: int) -> list[int]:
    """The instants at which cost-1 requests, made every `step` ns from `now`
    to `until` (inclusive), are admitted."""
    admitted = []
    t = now
    while t <= until:
        if isinstance(limit, catalogue.WindowLimit):
            d = catalogue.window_decide(limit, state, t, 1, True)
            if d.allowed:
                state = d.counts_after
        else:
            d = gcra.decide(limit, state, t, 1, True)
            if d.allowed:
                state = d.tat_after
        if d.allowed:
            admitted.append(t)
        else:
            t += step
    return admitted


def test_gcra_follow_leaves_remaining_now_and_no_more_until_the_bound_ends():
    rng = random.Random(7)
    for _ in range(150):
        limit = gcra.Limit(rng.choice([MS, 3 * MS, 10 * MS]), rng.randrange(1, 8))
        now = 10 * S
        tat = rng.choice([0, now - 5 * MS, now + rng.randrange(0, 30) * MS])
        remaining = rng.randrange(0, 10)
        within = rng.choice([0, 1, MS, 7 * MS, 40 * MS])
        after = follow.gcra_follow(limit, tat, now, remaining, within)
        assert after >= tat
        step = MS // 2
        admitted = greedy(limit, after, now, now + within + 3 * limit.emission_ns, step)
        before = greedy(limit, tat, now, now + within + 3 * limit.emission_ns, step)
        assert len(admitted) <= len(before)  # only ever stricter
        # no more than `remaining` now, one interval on; for a wait none before its end
        due = now + (max(within, limit.emission_ns) if remaining == 0 else limit.emission_ns)
        assert len([t for t in admitted if t < due]) <= remaining
        if after > tat and remaining > 0:  # pulled: `remaining` now (the burst spent to them)
            assert len([t for t in admitted if t == now]) == remaining


def test_window_follow_keeps_the_bound_within_the_window_and_only_tightens():
    rng = random.Random(11)
    for _ in range(100):
        algorithm = rng.choice(catalogue.WINDOWS)
        limit = catalogue.WindowLimit(algorithm, 100 * MS, rng.randrange(1, 9))
        now = 10 * S + rng.randrange(0, 100) * MS
        counts = None
        for t in sorted(rng.randrange(now - 150 * MS, now + 1) for _ in range(rng.randrange(4))):
            decision = catalogue.window_decide(limit, counts, t, 1, True)
            counts = decision.counts_after if decision.allowed else counts
        remaining = rng.randrange(0, 10)
        within = rng.choice([0, MS, 30 * MS, 150 * MS, 400 * MS])
        after = follow.window_follow(limit, counts, now, remaining, within)
        assert catalogue.pack(limit, after) >= catalogue.pack(limit, counts)
        step = 2 * MS
        until = now + 300 * MS
        admitted = greedy(limit, after, now, until, step)
        before = greedy(limit, counts, now, until, step)
        for x in range(now, until, 20 * MS):
            assert sum(t <= x for t in admitted) <= sum(t <= x for t in before)
        window_end = (now // limit.window_ns + 1) * limit.window_ns
        last = now + max(within - 1, 0)
        if remaining == 0 and last >= window_end:  # a wait: nothing until the window holding it ends
            assert all(t >= (last // limit.window_ns + 1) * limit.window_ns for t in admitted)
        elif remaining == 0:
            assert not [t for t in admitted if t <= last]
        else:
            assert len([t for t in admitted if t == now]) <= remaining


def test_reading_by_hand():
    read = follow.read_signal
    now = 1_750_000_000 * S
    assert read([("Retry-After", "120")], 429, "requests", now) == [(0, 120 * S)]
    assert read([("Retry-After", "120")], 200, "requests", now) == []
    assert read([("retry-after", "31536000")], 503, "tokens", now) == [(0, 3600 * S)]
    assert read([("Retry-After", "-1")], 429, "requests", now) == []
    assert read([], 429, "requests", now) == [(0, 0)]
    assert read([], 429, "tokens", now) == []
    assert read([("RateLimit", '"default";r=50;t=30')], 200, "requests", now) == [(50, 30 * S)]
    assert read([("RateLimit-Policy", '"t";q=9;qu="tokens"'), ("RateLimit", '"t";r=5;t=2')],
                200, "tokens", now) == [(5, 2 * S)]
    assert read([("RateLimit", "limit=100, remaining=50, reset=5")], 0, "requests", now) == \
        [(50, 5 * S)]
    assert read([("x-ratelimit-remaining-tokens", "149984"), ("x-ratelimit-reset-tokens", "6m0s")],
                200, "tokens", now) == [(149984, 360 * S)]
    assert read([("x-ratelimit-remaining-requests", "3"), ("x-ratelimit-reset-requests", "20ms")],
                200, "requests", now) == [(3, 20 * MS)]
    assert read([("anthropic-ratelimit-requests-remaining", "49"),
                 ("anthropic-ratelimit-requests-reset", "2025-06-15T15:07:22Z")],
                200, "requests", now) == [(49, 42 * S)]
    assert read([("x-ratelimit-remaining", "10"), ("x-ratelimit-reset", str(now // S + 60))],
                200, "requests", now) == [(10, 60 * S)]
    assert read([("RateLimit", '"a";r=1;t=2,')], 200, "requests", now) == []  # malformed: ignored
