"""Random operations against the reference model (tests/model/gcra_model.py).

Hypothesis draws a limit and a run of check / peek / allow / reset calls with
random costs, at times that mostly move forward and sometimes step back, on a
Limiter and on a KeyedLimiter with several keys; every answer must equal the
model's. Each test asserts it replayed at least 10**4 operations.

Times are whole nanoseconds below 2**50, passed as the float t / 1e9, which
converts back to exactly t (the model proves it for every time it uses).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

cellrate = pytest.importorskip("cellrate")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "model"))

import gcra_model as model  # noqa: E402
from gcra_model import HORIZON_NS, INT64_MAX  # noqa: E402

MIN_OPS = 10**4
EXAMPLES = 200
MAX_TIME = 2**50 - 1
KEYS = ["alpha", "beta", b"gamma", "δ", ""]


# --------------------------------------------------------------------------
# Strategies

emissions = st.one_of(
    st.sampled_from([1, 2, 3, 7, 1000, 10**6, 10**8, 2 * 10**8, 10**9, 60 * 10**9]),
    st.integers(1, 2**40),
)
small_bursts = st.one_of(st.integers(1, 12), st.integers(1, 2000))


@st.composite
def limits(draw):
    emission = draw(emissions)
    if draw(st.integers(0, 19)) == 0:
        burst = max(1, HORIZON_NS // emission // draw(st.sampled_from([1, 2, 1000])))
    else:
        burst = draw(small_bursts)
    return model.Limit(emission, burst)


KINDS = ["check"] * 5 + ["peek"] * 2 + ["allow"] * 2 + ["reset"]

# One op is one drawn 20-byte string, cut by `fields` into (move, span, cost
# roll, cost draw, kind, key): one draw per op keeps 10**4 ops fast, and
# shrinking towards zero bytes still means "same time, probe, check, first key".
raw_ops = st.lists(st.binary(min_size=20, max_size=20), min_size=40, max_size=80)


def fields(raw: bytes):
    span = int.from_bytes(raw[0:8], "little")
    pick = int.from_bytes(raw[8:16], "little")
    move = int.from_bytes(raw[16:18], "little") % 100
    roll = raw[18] % 100
    kind = raw[19] % len(KINDS)
    key = (raw[19] // len(KINDS)) % len(KEYS)
    return move, span, roll, pick, kind, key


def shape(limit: model.Limit, keyed: bool, start: int, raw) -> list:
    tau = limit.tolerance_ns
    emission = limit.emission_ns
    t = start
    ops = []
    for move, span, roll, pick, kind, key in map(fields, raw):
        if move < 15:
            pass
        elif move < 60:
            t += span % (2 * emission + 1)
        elif move < 80:
            t += span % (min(tau, 2**46) + 1)
        elif move < 90:
            t -= span % (min(2 * tau, 2**46) + 1)  # the clock steps back
        else:
            t += span % 2**46
        t = min(max(t, 0), MAX_TIME)
        if roll < 10:
            cost = 0
        elif roll < 55:
            cost = 1
        elif roll < 90:
            cost = 1 + pick % min(limit.burst, 10**6)
        elif roll < 95:
            cost = min(limit.burst + pick % 4, INT64_MAX)
        else:
            cost = 1 + pick % INT64_MAX
        ops.append((KINDS[kind], KEYS[key] if keyed else None, cost, t))
    return ops


def seconds(now_ns: int) -> float:
    now = model.float_face_seconds(now_ns)
    assert now is not None and model.seconds_to_ns(now) == ("OK", now_ns)
    return now


def period_for(limit: model.Limit) -> float:
    period = model.float_face_period(limit.emission_ns)
    assert period is not None, limit
    return period


def model_key(key):
    return key.encode() if isinstance(key, str) else key


def assert_same(got, want: model.Decision, context) -> None:
    assert got.allowed is want.allowed, context
    assert got.remaining == want.remaining, context
    assert got.limit == want.limit, context
    for name in ("retry_after", "reset_after"):
        ns = getattr(want, f"{name}_ns")
        value = getattr(got, name)
        if ns == model.NEVER:
            assert value == math.inf, (name, context)
        else:
            assert value == ns / 1e9, (name, value, ns, context)


# --------------------------------------------------------------------------
# Runs


def replay(face, store: model.Store, ops, call) -> int:
    for index, (kind, key, cost, now_ns) in enumerate(ops):
        context = (index, kind, key, cost, now_ns)
        mkey = model_key(key)
        if kind == "reset":
            call(face, "reset", key)
            store.reset(mkey)
            continue
        want = store.check(mkey, now_ns, cost, commit=kind != "peek")
        if kind == "allow":
            assert call(face, "allow", key, cost, now=seconds(now_ns)) is want.allowed, context
        else:
            assert_same(call(face, kind, key, cost, now=seconds(now_ns)), want, context)
    return len(ops)


def call_limiter(lim, method, key, *args, **kwargs):
    return getattr(lim, method)(*args, **kwargs)


def call_keyed(keyed, method, key, *args, **kwargs):
    return getattr(keyed, method)(key, *args, **kwargs)


def run_many(keyed: bool) -> int:
    replayed = 0

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def run(data):
        nonlocal replayed
        limit = data.draw(limits(), label="limit")
        start = data.draw(st.one_of(st.just(0), st.integers(0, 2**45)), label="start")
        ops = shape(limit, keyed, start, data.draw(raw_ops, label="ops"))
        period = period_for(limit)
        if keyed:
            face = cellrate.KeyedLimiter(1.0, period, burst=limit.burst, capacity=1000)
            replayed += replay(face, model.Store(limit), ops, call_keyed)
        else:
            face = cellrate.Limiter(1.0, period, burst=limit.burst)
            replayed += replay(face, model.Store(limit), ops, call_limiter)

    # Hypothesis may stop a run early (overruns, small examples): run again
    # until the floor of operations is met, a bounded number of times.
    for _ in range(5):
        run()
        if replayed >= MIN_OPS:
            break
    return replayed


def test_limiter_against_model():
    replayed = run_many(keyed=False)
    assert replayed >= MIN_OPS, replayed


def test_keyed_against_model():
    replayed = run_many(keyed=True)
    assert replayed >= MIN_OPS, replayed


@settings(max_examples=300, deadline=None, database=None)
@given(
    rate=st.one_of(st.floats(1e-6, 1e9), st.integers(1, 10**6).map(float)),
    period=st.one_of(st.none(), st.floats(1e-6, 1e6)),
    burst=st.one_of(st.none(), st.integers(1, 10**6)),
)
def test_limits_against_model(rate, period, burst):
    """Random numeric limits: status, T (seen as an idle key's reset_after) and burst."""
    status, emission, out_burst = model.limit_from_number(rate, period, burst)
    args = (rate,) if period is None else (rate, period)
    kwargs = {} if burst is None else {"burst": burst}
    if status != "OK":
        with pytest.raises(ValueError):
            cellrate.Limiter(*args, **kwargs)
        return
    lim = cellrate.Limiter(*args, **kwargs)
    assert lim.burst == out_burst
    first = lim.peek(1, now=0.0)
    assert first.limit == out_burst and first.remaining == out_burst - 1
    assert first.reset_after == emission / 1e9
