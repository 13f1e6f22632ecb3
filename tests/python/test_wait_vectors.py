"""The wait plan (tests/vectors/wait.txt, the reference model's:
tests/model/wait_model.py) through the Python face: the plans that wait(),
acquire() and the decorators iterate (_cellrate._wait_plan), stepped on one
stand-in clock. The C tests (tests/c/test_steps.c), busted and nginx
(tests/lua/wait_vectors.lua) read the same file."""

from __future__ import annotations

import math
import pathlib
from types import SimpleNamespace

import pytest

import cellrate
from cellrate import _cellrate

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "wait.txt"


def seconds(word: str):
    return None if word == "never" else int(word) / 1e9


def ns(value: float):
    return "never" if math.isinf(value) else str(round(value * 1e9))


def lines():
    for number, line in enumerate(VECTORS.read_text().splitlines(), 1):
        if line and not line.startswith("#"):
            yield number, line.split()


def test_every_line_as_the_reference_model():
    limiter, plans, checked, failures = None, {}, 0, []
    for number, w in lines():
        got = want = None
        if w[0] == "answer":
            plan = _cellrate._wait_plan(None, None, 1, seconds(w[1]), 0.0)
            wait = math.inf if w[3] == "never" else int(w[3]) / 1e9
            try:
                got = ["sleep", ns(plan.retry(SimpleNamespace(retry_after=wait, limit=1), int(w[2]) / 1e9))]
            except cellrate.RateLimited:
                got = ["refused" if math.isinf(wait) else "timeout", "0"]
            want = w[4:]
        elif w[0] == "limit":
            options = {"algorithm": w[1]}
            if w[4] != "-":
                options["burst"] = int(w[4])
            limiter, plans = cellrate.Limiter(int(w[2]), int(w[3]) / 1e9, **options), {}
        elif w[0] == "begin":
            plans[w[1]] = _cellrate._wait_plan(limiter, None, int(w[2]), seconds(w[3]),
                                               seconds(w[4]))
        elif w[0] == "step":
            action, sleep, retry = plans[w[1]].step(seconds(w[2]))
            got = [action, ns(sleep), "-" if retry is None else ns(retry)]
            want = w[3:]
            if action != "sleep":
                assert plans[w[1]].turn is None, number
        elif w[0] == "leave":
            plans[w[1]].leave(seconds(w[2]))
        else:
            failures.append((number, w, "not understood"))
        if want is not None:
            checked += 1
            if got != want:
                failures.append((number, " ".join(w), got))
    assert failures == []
    assert checked > 400


def test_a_plan_refuses_a_bad_timeout_and_cost_in_the_cores_words():
    with pytest.raises(cellrate.InvalidArgument, match="^timeout must be"):
        _cellrate._wait_plan(cellrate.Limiter(1), None, 1, -1.0)
    with pytest.raises(cellrate.InvalidArgument, match="^cost"):
        _cellrate._wait_plan(cellrate.Limiter(1), None, -1, None)
