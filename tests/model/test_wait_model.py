"""The wait plan's reference model (wait_model.py) against the design's
invariants, on random sequences: a start is an admission at its instant, so
with burst 1 any two starts are at least one interval apart however late
their waiters woke; a give-up holds no place; every admission is at or after
the waiter's turn."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gcra_model as gcra  # noqa: E402
import wait_model as model  # noqa: E402

MS = 10**6


def test_starts_keep_the_interval_whatever_the_lateness():
    rng = random.Random(7)
    for _ in range(200):
        T = rng.choice([10, 50, 250]) * MS
        process = model.Process(gcra.Limit(T, 1), T)
        now, starts, turns = 10**12, [], {}
        for serial in range(rng.randint(2, 12)):
            name = f"w{serial}"
            process.begin(name, 1, None, now)
            turns[name] = None
            now += rng.randrange(0, T)
        while turns:
            name = rng.choice(sorted(turns))
            if turns[name] is not None:
                now = max(now, turns[name] + rng.choice([0, 0, rng.randrange(0, 3 * T)]))
            action, sleep, _ = process.step(name, now)
            if action == "go":
                assert turns[name] is None or now >= turns[name]
                starts.append(now)
                del turns[name]
            else:
                assert action == "sleep" and sleep > 0
                turns[name] = process.waiters[name].turn_ns
        starts.sort()
        assert all(b - a >= T for a, b in zip(starts, starts[1:])), starts


def test_a_give_up_holds_no_place_and_the_rule_is_exact():
    assert model.answer(None, 0, gcra.NEVER) == ("refused", 0)
    assert model.answer(100, 40, 60) == ("sleep", 60)
    assert model.answer(100, 40, 61) == ("timeout", 0)
    process = model.Process(gcra.Limit(MS, 1), MS)
    process.begin("a", 2, None, 0)
    assert process.step("a", 0) == ("refused", 0, gcra.NEVER)
    assert process.waiters["a"].turn_ns is None and process.tail_ns == 0
