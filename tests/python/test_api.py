"""The Python API against docs/design.md §1 and §6.

Expected values are worked out by hand from the formulas of docs/design.md §1 (shown in the
comments), in whole nanoseconds: T is the emission interval, tau = T * burst.
"""

import ast
import importlib.metadata
import inspect
import math
import pickle
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

import cellrate
from conftest import ns, rss_growth

MS = 1_000_000  # ns
REPO = pathlib.Path(__file__).resolve().parents[2]

# Start times for the scenarios: the same arithmetic must hold far from 0.
OFFSETS = [0.0, 1000.0, 1_000_000.0]


def d(allowed, remaining, retry_after, reset_after, limit, window=0.0):
    """An expected decision, times in seconds."""
    return cellrate.Decision(allowed, remaining, retry_after, reset_after, limit, window)


def assert_decision(got, allowed, remaining, retry_after_ns, reset_after_ns, limit):
    assert got.allowed is allowed
    assert got.remaining == remaining
    assert ns(got.retry_after) == retry_after_ns
    assert ns(got.reset_after) == reset_after_ns
    assert got.limit == limit


# --------------------------------------------------------------------------
# docs/design.md §1 reference scenarios


@pytest.mark.parametrize("t0", OFFSETS)
def test_scenario_10_per_s_burst_1(one_key, t0):
    # T = 100 ms, tau = 100 ms
    lim = one_key(10, burst=1)
    # t=0: tat=0 -> new 100ms, allow_at 0: admit, remaining 0, reset 100ms
    assert_decision(lim.check(now=t0), True, 0, 0, 100 * MS, 1)
    # t=0.1: tat=100 -> new 200, allow_at 100: admit
    assert_decision(lim.check(now=t0 + 0.1), True, 0, 0, 100 * MS, 1)
    # t=0.2: admit, TAT 300ms
    assert_decision(lim.check(now=t0 + 0.2), True, 0, 0, 100 * MS, 1)
    # t=0.25: tat=300, new 400, allow_at 300 > 250: deny, retry 50ms,
    # remaining max(0, floor((250+100-300)/100)) = 0, reset 300-250 = 50ms
    assert_decision(lim.check(now=t0 + 0.25), False, 0, 50 * MS, 50 * MS, 1)
    # t=0.3: the denial wrote nothing, so allow_at is still 300: admit
    assert_decision(lim.check(now=t0 + 0.3), True, 0, 0, 100 * MS, 1)


@pytest.mark.parametrize("t0", OFFSETS)
def test_scenario_10_per_s_burst_6_seven_at_once(one_key, t0):
    # T = 100 ms, tau = 600 ms
    lim = one_key(10, burst=6)
    for k in range(1, 7):
        # k-th: new_tat = 100k ms, remaining floor((600 - 100k)/100) = 6 - k
        assert_decision(lim.check(now=t0), True, 6 - k, 0, 100 * k * MS, 6)
    # 7th: tat 600, new 700, allow_at 100 > 0: retry 100ms, reset 600ms
    assert_decision(lim.check(now=t0), False, 0, 100 * MS, 600 * MS, 6)
    # t=0.1: admitted, TAT 700ms, so reset_after = 700 - 100 = 600ms
    assert_decision(lim.check(now=t0 + 0.1), True, 0, 0, 600 * MS, 6)


@pytest.mark.parametrize("t0", OFFSETS)
def test_scenario_10_per_s_burst_6_two_groups(one_key, t0):
    lim = one_key(10, burst=6)
    assert all(lim.allow(now=t0) for _ in range(6))
    # at t=1.0 the key is idle again (TAT 0.6 s has passed): 6 more
    decisions = [lim.check(now=t0 + 1.0) for _ in range(6)]
    assert all(dec.allowed for dec in decisions)
    # TAT 1.6 s after the second group: reset_after = 1.6 - 1.0
    assert ns(decisions[-1].reset_after) == 600 * MS
    assert not lim.allow(now=t0 + 1.0)


def test_scenario_300_per_minute_burst_60_drained(one_key):
    # T = 60 s / 300 = 200 ms, tau = 12 s. At t=0: 60 admitted (TAT 12 s),
    # then admission k is at TAT + T - tau = 200k ms; in [0, 60 s] that is
    # k = 1..300: 360 in all.
    lim = one_key(300, 60, burst=60)
    admitted_at = []
    for ms in range(0, 60_001):
        for _ in range(61):  # bounded, so that a limiter that never fills fails
            if not lim.allow(now=ms / 1000):
                break
            admitted_at.append(ms)
    assert admitted_at[:60] == [0] * 60
    assert admitted_at[60:] == [200 * k for k in range(1, 301)]
    assert len(admitted_at) == 360


def test_scenario_300_per_minute_burst_60_one_request(one_key):
    # new_tat 200ms; remaining floor((12 s - 200 ms) / 200 ms) = 59
    assert_decision(one_key(300, 60, burst=60).check(now=5.0), True, 59, 0, 200 * MS, 60)


def test_scenario_300_per_minute_burst_300_one_request(one_key):
    # tau = 60 s; remaining floor((60 s - 200 ms) / 200 ms) = 299
    assert_decision(one_key("300/minute", burst=300).check(now=5.0), True, 299, 0, 200 * MS, 300)


def test_one_per_T_after_burst(one_key):
    # rate 4/s, burst 2: T = 250 ms, tau = 500 ms
    lim = one_key(4, burst=2)
    assert [lim.allow(now=10.0) for _ in range(3)] == [True, True, False]
    assert not lim.allow(now=10.249_999_999)
    assert lim.allow(now=10.25)
    assert not lim.allow(now=10.25)


def test_denials_do_not_push_recovery_out(one_key):
    lim = one_key(10, burst=1)
    assert lim.allow(now=0.0)
    for i in range(1, 100):  # a client retrying every ms
        assert not lim.allow(now=i / 1000)
    assert lim.allow(now=0.1)


# --------------------------------------------------------------------------
# cost


def test_cost_zero_is_a_probe(one_key):
    lim = one_key(10, burst=6)
    # idle: remaining floor((t + tau - t) / T) = 6, reset_after = 0
    assert_decision(lim.check(0, now=1.0), True, 6, 0, 0, 6)
    assert all(lim.allow(now=1.0) for _ in range(6))
    # drained: TAT = 1.6; still admitted, remaining 0, reset 600ms, commits nothing
    assert_decision(lim.check(0, now=1.0), True, 0, 0, 600 * MS, 6)
    assert_decision(lim.check(cost=0, now=1.0), True, 0, 0, 600 * MS, 6)
    assert_decision(lim.peek(1, now=1.0), False, 0, 100 * MS, 600 * MS, 6)


def test_cost_above_one(one_key):
    lim = one_key(10, burst=6)
    # cost 4 at t=0: new_tat 400ms, remaining floor((600-400)/100) = 2
    assert_decision(lim.check(4, now=0.0), True, 2, 0, 400 * MS, 6)
    # cost 3: new_tat 700, allow_at 100ms: deny, retry 100ms, remaining 2
    assert_decision(lim.check(3, now=0.0), False, 2, 100 * MS, 400 * MS, 6)
    assert lim.allow(2, now=0.0)


@pytest.mark.parametrize("cost", [7, 1000, 2**62, 10**30])
def test_unfittable_cost_never_fits(one_key, cost):
    # cost * T > tau (huge ints saturate to INT64_MAX, which also never fits)
    lim = one_key(10, burst=6)
    dec = lim.check(cost, now=3.0)
    assert dec.allowed is False
    assert dec.retry_after == math.inf
    # state unchanged: an idle key, remaining 6, reset_after 0
    assert dec.remaining == 6 and dec.reset_after == 0.0 and dec.limit == 6
    assert not lim.allow(cost, now=3.0)
    assert lim.allow(6, now=3.0)


# --------------------------------------------------------------------------
# peek, reset


def test_peek_commits_nothing(one_key):
    lim = one_key(10, burst=1)
    for _ in range(50):
        assert_decision(lim.peek(now=7.0), True, 0, 0, 100 * MS, 1)
    assert lim.allow(now=7.0)
    for _ in range(50):
        assert_decision(lim.peek(now=7.0), False, 0, 100 * MS, 100 * MS, 1)


def test_peek_gives_the_answer_check_gives(one_key):
    lim = one_key(10, burst=3)
    for t in [0.0, 0.0, 0.05, 0.1, 0.1, 0.1, 0.1, 0.35, 2.0]:
        for cost in (0, 1, 2, 4):
            peeked = lim.peek(cost, now=t)
            assert lim.peek(cost, now=t) == peeked
        assert lim.peek(now=t) == lim.check(now=t)


def test_reset_restores_a_full_burst(one_key):
    lim = one_key(10, burst=3)
    assert [lim.allow(now=1.0) for _ in range(4)] == [True, True, True, False]
    assert lim.reset() is None
    assert [lim.allow(now=1.0) for _ in range(4)] == [True, True, True, False]


def test_clear_forgets_every_key_and_keeps_the_limit_and_counters():
    keyed = cellrate.KeyedLimiter(10, burst=2, capacity=64)
    for key in ("a", "b", "c"):
        assert keyed.allow(key, 2, now=1.0) and not keyed.allow(key, now=1.0)
    assert len(keyed) == 3 and keyed.clear() is None and len(keyed) == 0
    assert all(keyed.allow(key, 2, now=1.0) for key in ("a", "b", "c"))
    assert keyed.burst == 2 and keyed.stats()["admitted"] == 6


def test_check_commits_like_allow(one_key):
    lim = one_key(10, burst=2)
    assert lim.check(now=0.0).allowed
    assert lim.allow(now=0.0)
    assert not lim.check(now=0.0).allowed
    assert not lim.allow(now=0.0)


# --------------------------------------------------------------------------
# the real clock (CLOCK_MONOTONIC, the clock of time.monotonic)


def test_clock_is_the_clock_of_time_monotonic(one_key):
    # one per hour: an admission at an explicit monotonic() time makes the
    # core's own clock reading see a full key, and the other way round (a
    # minute's slack for a busy machine's pause between the two calls; another
    # clock would be off by far more).
    lim = one_key(1, 3600, burst=1)
    assert lim.allow(now=time.monotonic())
    assert not lim.allow()
    lim.reset()
    assert lim.allow()
    dec = lim.check(now=time.monotonic())
    assert not dec.allowed
    assert 3540.0 < dec.retry_after <= 3600.0


def test_default_arguments_use_cost_1_and_the_clock(one_key):
    lim = one_key(1, 3600, burst=2)
    assert lim.allow()
    dec = lim.check()
    assert dec.allowed and dec.remaining == 0
    assert not lim.allow()
    assert 7140.0 < lim.peek().reset_after <= 7200.0


# --------------------------------------------------------------------------
# keys


def test_keys_are_independent():
    keyed = cellrate.KeyedLimiter(10, burst=2)
    assert [keyed.allow("a", now=0.0) for _ in range(3)] == [True, True, False]
    assert [keyed.allow("b", now=0.0) for _ in range(3)] == [True, True, False]
    assert keyed.check("c", now=0.0).remaining == 1
    keyed.reset("a")
    assert keyed.allow("a", now=0.0)
    assert not keyed.allow("b", now=0.0)


@pytest.mark.parametrize("text", ["a", "", "user:42", "é", "日本語", "emoji \U0001f600", "a\x00b"])
def test_str_key_is_its_utf8_bytes(text):
    keyed = cellrate.KeyedLimiter(1, 3600, burst=1)
    assert keyed.allow(text, now=1.0)
    assert not keyed.allow(text.encode("utf-8"), now=1.0)
    keyed.reset(text.encode("utf-8"))
    assert keyed.allow(text.encode("utf-8"), now=1.0)
    assert not keyed.allow(text, now=1.0)


def test_keys_differ_by_every_byte():
    keyed = cellrate.KeyedLimiter(1, 3600, burst=1)
    keys = [b"", b"a", b"a\x00", b"\x00a", b"a\x00b", b"A", "é".encode("latin-1"), "é".encode()]
    assert all(keyed.allow(key, now=1.0) for key in keys)
    assert not any(keyed.allow(key, now=1.0) for key in keys)


def test_len_counts_keys_holding_a_slot():
    keyed = cellrate.KeyedLimiter(1, 3600, burst=2, capacity=1000)
    assert len(keyed) == 0
    for key in ["a", "b", "c"]:
        keyed.allow(key, now=1.0)
    keyed.allow("a", now=1.0)
    assert len(keyed) == 3
    # probes and peeks store nothing for a new key
    keyed.peek("d", now=1.0)
    keyed.check("e", 0, now=1.0)
    assert len(keyed) == 3
    keyed.reset("b")
    assert len(keyed) == 2


def test_keyed_limiter_is_true_even_when_empty():
    # len() is 0, but `if limiter:` must not treat the limiter as absent
    keyed = cellrate.KeyedLimiter(10)
    assert len(keyed) == 0
    assert bool(keyed) is True


def test_keyed_arguments_by_keyword():
    keyed = cellrate.KeyedLimiter(10, burst=2)
    assert keyed.allow(key="k", cost=2, now=0.0)
    assert not keyed.check(key=b"k", now=0.0).allowed
    assert keyed.peek("k", cost=0, now=0.0).allowed


# --------------------------------------------------------------------------
# construction, attributes, repr


@pytest.mark.parametrize(
    "text, rate, period, burst, interval_ns",
    [
        ("300/minute", 300.0, 60.0, 300, 200 * MS),
        ("10/s", 10.0, 1.0, 10, 100 * MS),
        ("5 per second", 5.0, 1.0, 5, 200 * MS),
        ("1000/hour", 1000.0, 3600.0, 1000, 3_600 * MS),
        ("100/5m", 100.0, 300.0, 100, 3_000 * MS),
        ("0.5/s", 0.5, 1.0, 1, 2_000 * MS),  # burst max(1, ceil(0.5)) = 1
        ("2/day", 2.0, 86400.0, 2, 43_200_000 * MS),
        (" 7 / 2 sec ", 7.0, 2.0, 7, 2_000 * MS // 7 + 1),  # 285714285.7 rounds up
    ],
)
def test_rate_strings(one_key, text, rate, period, burst, interval_ns):
    lim = one_key(text)
    assert (lim.rate, lim.period, lim.burst) == (rate, period, burst)
    assert (lim.emission_ns, lim.tolerance_ns) == (interval_ns, interval_ns * burst)
    # the interval shows in behaviour: a drained key admits again after T
    assert all(lim.allow(now=100.0) for _ in range(burst))
    dec = lim.check(now=100.0)
    assert not dec.allowed
    assert ns(dec.retry_after) == interval_ns


@pytest.mark.parametrize(
    "args, kwargs, rate, period, burst",
    [
        ((10,), {}, 10.0, 1.0, 10),
        ((2.5,), {}, 2.5, 1.0, 3),  # ceil(2.5)
        ((0.5,), {}, 0.5, 1.0, 1),
        ((300, 60), {"burst": 60}, 300.0, 60.0, 60),
        ((300,), {"period": 60.0}, 300.0, 60.0, 300),
        ((5, None), {"burst": None}, 5.0, 1.0, 5),  # None: not given
        (("5/s",), {"period": None}, 5.0, 1.0, 5),
    ],
)
def test_numeric_limits(one_key, args, kwargs, rate, period, burst):
    lim = one_key(*args, **kwargs)
    assert (lim.rate, lim.period, lim.burst) == (rate, period, burst)
    assert isinstance(lim.rate, float) and isinstance(lim.period, float)
    assert isinstance(lim.burst, int)


def test_limiter_repr():
    assert repr(cellrate.Limiter(300, 60, burst=60)) == "cellrate.Limiter(rate=300, period=60, burst=60)"
    assert repr(cellrate.Limiter("0.5/s")) == "cellrate.Limiter(rate=0.5, period=1, burst=1)"


def test_keyed_repr_and_attributes():
    keyed = cellrate.KeyedLimiter("100/5m", burst=20, capacity=500)
    assert repr(keyed) == "cellrate.KeyedLimiter(rate=100, period=300, burst=20, capacity=500)"
    assert keyed.capacity == 500
    assert keyed.evictions == 0


def test_keyed_default_capacity():
    assert cellrate.KeyedLimiter(10).capacity == 100_000
    assert cellrate.KeyedLimiter(10, capacity=None).capacity == 100_000


def test_limit_in_nanoseconds(one_key):
    lim = one_key(10, burst=6)
    assert (lim.emission_ns, lim.tolerance_ns) == (100 * MS, 600 * MS)
    assert type(lim.emission_ns) is int and type(lim.tolerance_ns) is int
    huge = one_key(1, period=2**62 / 1e9 / 2, burst=2)  # T = 2^61 ns, tau = 2^62 ns
    assert (huge.emission_ns, huge.tolerance_ns) == (2**61, 2**62)


@pytest.mark.parametrize("name", ["rate", "period", "burst", "emission_ns", "tolerance_ns", "clock"])
def test_limiter_attributes_are_read_only(name):
    lim = cellrate.Limiter(10)
    with pytest.raises(AttributeError):
        setattr(lim, name, 1)
    with pytest.raises(AttributeError):
        delattr(lim, name)
    with pytest.raises(AttributeError):
        lim.other = 1


@pytest.mark.parametrize(
    "name", ["rate", "period", "burst", "emission_ns", "tolerance_ns", "clock", "capacity", "evictions"]
)
def test_keyed_attributes_are_read_only(name):
    keyed = cellrate.KeyedLimiter(10)
    with pytest.raises(AttributeError):
        setattr(keyed, name, 1)


def test_method_signatures_are_introspectable():
    assert list(inspect.signature(cellrate.Limiter.allow).parameters) == ["self", "cost", "now",
                                                                          "priority"]
    keyed_check = inspect.signature(cellrate.KeyedLimiter.check).parameters
    assert list(keyed_check) == ["self", "key", "cost", "now", "priority", "plan"]
    assert keyed_check["cost"].default == 1
    assert keyed_check["now"].kind is inspect.Parameter.KEYWORD_ONLY
    assert keyed_check["priority"].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.skipif(sys.version_info < (3, 10), reason="3.9 drops a heap type's signature")
def test_constructor_signatures_are_introspectable():
    params = inspect.signature(cellrate.Limiter).parameters
    assert list(params) == ["rate", "period", "burst", "shared", "shared_mode", "clock", "algorithm",
                            "on_change", "max_cost", "max_debt", "tz", "priorities", "penalty",
                            "sync"]
    assert params["burst"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["shared"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(inspect.signature(cellrate.KeyedLimiter).parameters) == [
        "rate",
        "period",
        "burst",
        "capacity",
        "shared",
        "shared_mode",
        "clock",
        "algorithm",
        "on_change",
        "max_cost",
        "max_debt",
        "tz",
        "priorities",
        "penalty",
        "plans",
        "sync",
    ]
    assert list(inspect.signature(cellrate.Decision).parameters) == [
        "allowed",
        "remaining",
        "retry_after",
        "reset_after",
        "limit",
        "window",
        "clipped",
    ]


def test_call_signature_mistakes_raise_type_error():
    lim = cellrate.Limiter(10)
    keyed = cellrate.KeyedLimiter(10)
    with pytest.raises(TypeError, match="positional"):
        lim.allow(1, 2.0)  # now is keyword-only
    with pytest.raises(TypeError, match="unexpected keyword argument 'key'"):
        lim.allow(key="a")
    with pytest.raises(TypeError, match="multiple values for argument 'cost'"):
        lim.check(1, cost=1)
    with pytest.raises(TypeError, match="missing required argument 'key'"):
        keyed.allow()
    with pytest.raises(TypeError, match="missing required argument 'key'"):
        keyed.peek(cost=1)
    with pytest.raises(TypeError, match="multiple values for argument 'key'"):
        keyed.allow("a", key="b")
    with pytest.raises(TypeError, match="positional"):
        keyed.allow("a", 1, 2.0)
    with pytest.raises(TypeError):
        cellrate.Limiter()
    with pytest.raises(TypeError):
        cellrate.Limiter(10, 1.0, 5)  # burst is keyword-only
    with pytest.raises(TypeError):
        cellrate.KeyedLimiter(10, capacity=10, other=1)
    with pytest.raises(TypeError):
        lim.reset("a")
    with pytest.raises(TypeError):
        keyed.reset()


def test_types_are_final():
    for cls in (cellrate.Limiter, cellrate.KeyedLimiter, cellrate.Decision):
        with pytest.raises(TypeError):
            type("Sub", (cls,), {})


# --------------------------------------------------------------------------
# Decision


def test_decision_fields_and_types():
    dec = cellrate.Limiter(300, 60, burst=60).check(now=1.0)
    assert dec.allowed is True
    assert type(dec.remaining) is int and dec.remaining == 59
    assert type(dec.retry_after) is float and dec.retry_after == 0.0
    assert type(dec.reset_after) is float and ns(dec.reset_after) == 200 * MS
    assert type(dec.limit) is int and dec.limit == 60


def test_decision_repr():
    dec = cellrate.Limiter(300, 60, burst=60).check(now=1.0)
    assert repr(dec) == (
        "Decision(allowed=True, remaining=59, retry_after=0.0, reset_after=0.2, limit=60, "
        "window=12.0)"
    )
    never = cellrate.Limiter(10, burst=1).check(2, now=1.0)
    assert repr(never) == (
        "Decision(allowed=False, remaining=1, retry_after=inf, reset_after=0.0, limit=1, "
        "window=0.1)"
    )
    assert eval(repr(dec), {"Decision": cellrate.Decision}) == dec


def test_decision_is_immutable():
    dec = cellrate.Limiter(10).check(now=1.0)
    for name in ["allowed", "remaining", "retry_after", "reset_after", "limit", "window", "other"]:
        with pytest.raises(AttributeError):
            setattr(dec, name, 1)
    with pytest.raises(AttributeError):
        del dec.allowed


@pytest.mark.skipif(sys.version_info < (3, 10), reason="immutable heap types came in 3.10")
def test_types_are_immutable():
    for cls in (cellrate.Limiter, cellrate.KeyedLimiter, cellrate.Decision):
        with pytest.raises(TypeError):
            cls.allow = None
    assert not hasattr(cellrate.Decision, "allow")


def test_decision_equality_and_hash():
    lim = cellrate.Limiter(10, burst=2)
    first = lim.peek(now=1.0)
    same = lim.peek(now=1.0)
    assert first is not same
    assert first == same and not (first != same)
    assert hash(first) == hash(same)
    assert first == d(True, 1, 0.0, 0.1, 2, 0.2)
    assert first != d(True, 1, 0.0, 0.1, 3, 0.2)
    assert first != d(False, 1, 0.0, 0.1, 2, 0.2)
    assert first != d(True, 0, 0.0, 0.1, 2, 0.2)
    assert first != d(True, 1, 0.5, 0.1, 2, 0.2)
    assert first != d(True, 1, 0.0, 0.2, 2, 0.2)
    assert first != d(True, 1, 0.0, 0.1, 2, 0.3)
    assert first != (True, 1, 0.0, 0.1, 2)
    assert len({first, same, d(True, 1, 0.0, 0.1, 3, 0.2)}) == 2
    with pytest.raises(TypeError):
        first < same  # noqa: B015


def test_decision_constructor_and_pickle():
    dec = d(False, 3, 0.25, 1.5, 10, 5.0)
    assert (dec.allowed, dec.remaining, dec.retry_after, dec.reset_after, dec.limit,
            dec.window) == (False, 3, 0.25, 1.5, 10, 5.0)
    by_name = cellrate.Decision(
        allowed=False, remaining=3, retry_after=0.25, reset_after=1.5, limit=10, window=5.0
    )
    assert by_name == dec
    assert d(False, 3, 0.25, 1.5, 10).window == 0.0  # a store that knows no window
    assert pickle.loads(pickle.dumps(dec)) == dec
    never = cellrate.Limiter(10, burst=1).check(5, now=0.0)
    assert pickle.loads(pickle.dumps(never)) == never
    with pytest.raises(TypeError):
        cellrate.Decision(True, 1, 0.0, 0.0)


# --------------------------------------------------------------------------
# module


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", cellrate.__version__)
    try:
        installed = importlib.metadata.version("cellrate")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("not installed as a distribution (in-place build)")
    assert cellrate.__version__ == installed


def test_public_names():
    assert sorted(cellrate.__all__) == [
        "CellrateError",
        "Concurrency",
        "Decision",
        "InvalidArgument",
        "InvalidArgumentType",
        "KeyedLimiter",
        "Limit",
        "Limiter",
        "Penalty",
        "RateLimited",
        "Slot",
        "__version__",
        "calendar_period",
        "check_all",
        "check_policy_name",
        "concurrent",
        "limit",
        "read_signal",
    ]
    for name in set(cellrate.__all__) - {"Penalty", "RateLimited", "limit", "concurrent"}:  # Python
        assert getattr(cellrate, name) is getattr(cellrate._cellrate, name)
    for cls in (cellrate.Limiter, cellrate.KeyedLimiter, cellrate.Decision):
        assert cls.__module__ == "cellrate"


# --------------------------------------------------------------------------
# memory


def test_no_growth_over_many_constructions_and_calls():
    def round_trip(i):
        lim = cellrate.Limiter(1000, burst=5)
        lim.allow()
        lim.allow(2, now=1.0)
        lim.check(now=1.0)
        lim.peek(1, now=None)
        repr(lim.check(cost=0))
        lim.reset()
        keyed = cellrate.KeyedLimiter("10/s", burst=3, capacity=16)
        keyed.allow(f"key{i}", now=2.0)
        keyed.check(b"bytes", 1, now=2.0)
        keyed.peek("é")
        keyed.reset("key")
        len(keyed)
        repr(keyed)

    grown = rss_growth(round_trip, warm=10_000, count=100_000)
    # a leak of even one small object per round would be several MB
    assert grown < 2 * 1024 * 1024, f"RSS grew by {grown} bytes"


def test_fast_clock():
    # One unit per 100 ms: the refusal the wait starts from is the check's own
    # (a busy machine's pause after draining can refill a unit).
    for make in (lambda **kw: cellrate.Limiter(10, burst=5, **kw),
                 lambda **kw: cellrate.KeyedLimiter(10, burst=5, **kw)):
        assert make().clock == "fast"
        assert make(clock="fast").clock == "fast"
        ordered = make(clock="monotonic")
        assert ordered.clock == "monotonic"
        assert "clock='monotonic'" in repr(ordered)
        assert "clock" not in repr(make())
        lim = make(clock="fast")
        # The decisions follow time.monotonic(): a drained limiter waits its retry_after.
        call = (lambda f, *a, **k: f(*a, **k)) if isinstance(lim, cellrate.Limiter) else (
            lambda f, *a, **k: f("key", *a, **k))
        d = call(lim.check)
        while d.allowed:
            d = call(lim.check)
        assert 0 < d.retry_after <= 0.1
        time.sleep(d.retry_after + 0.0005)
        assert call(lim.allow)
        # An explicit now is taken as given, whatever the clock.
        assert call(lim.peek, now=10**6).remaining == 4
    for bad in ("tsc", "", "FAST"):
        with pytest.raises(cellrate.InvalidArgument) as info:
            cellrate.Limiter(1, clock=bad)
        assert info.value.param == "clock"
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.KeyedLimiter(1, clock=1)
    assert info.value.param == "clock"


# --------------------------------------------------------------------------
# Limit: the core's validated limit, no store


def test_limit_fields():
    limit = cellrate.Limit("300/minute", burst=60)
    assert (limit.rate, limit.period, limit.burst, limit.algorithm) == (300.0, 60.0, 60, "gcra")
    assert (limit.emission_ns, limit.tolerance_ns) == (200 * MS, 12_000 * MS)
    assert limit.window == 12.0 == cellrate.Limiter("300/minute", burst=60).peek().window
    window = cellrate.Limit(10, 8, algorithm="fixed_window")
    assert (window.burst, window.tolerance_ns, window.window) == (10, 8_000 * MS, 8.0)
    assert repr(limit) == "cellrate.Limit(rate=300, period=60, burst=60)"
    assert repr(window) == "cellrate.Limit(rate=10, period=8, algorithm='fixed_window')"


def test_limit_is_an_immutable_value():
    limit = cellrate.Limit(10, burst=6)
    with pytest.raises(AttributeError):
        limit.burst = 7
    assert limit == cellrate.Limit("10/s", burst=6) == cellrate.Limit(10, 1.0, burst=6, algorithm="gcra")
    assert hash(limit) == hash(cellrate.Limit("10/s", burst=6))
    assert limit != cellrate.Limit(10, burst=7)
    assert limit != cellrate.Limit(10, burst=6, algorithm="token_bucket")  # same arithmetic, other name
    assert limit != cellrate.Limit(20, 2, burst=6)  # the same T and tau, other parameters
    assert len({limit, cellrate.Limit("10/s", burst=6), cellrate.Limit(10)}) == 2
    assert limit != cellrate.Limiter(10, burst=6)
    with pytest.raises(TypeError):
        class Sub(cellrate.Limit):  # noqa: F841 - final, as the other types
            pass


@pytest.mark.parametrize("args, kwargs, param, kind", [
    ((0,), {}, "rate", cellrate.InvalidArgument),
    (("10/month",), {}, "algorithm", cellrate.InvalidArgument),
    (("10/month",), {"algorithm": "calendar", "tz": "Nowhere/Town"}, "tz",
     cellrate.InvalidArgument),
    ((None,), {}, "rate", cellrate.InvalidArgumentType),
    ((10, 0), {}, "period", cellrate.InvalidArgument),
    ((10,), {"burst": 0}, "burst", cellrate.InvalidArgument),
    ((10,), {"burst": 1.5}, "burst", cellrate.InvalidArgumentType),
    ((10,), {"algorithm": "leaky"}, "algorithm", cellrate.InvalidArgument),
    ((10,), {"algorithm": 3}, "algorithm", cellrate.InvalidArgumentType),
    ((0.5,), {"algorithm": "sliding_window"}, "rate", cellrate.InvalidArgument),
])
def test_limit_refuses_as_limiter_does(args, kwargs, param, kind):
    with pytest.raises(kind) as limit_error:
        cellrate.Limit(*args, **kwargs)
    with pytest.raises(kind) as limiter_error:
        cellrate.Limiter(*args, **kwargs)
    assert limit_error.value.param == limiter_error.value.param == param
    assert str(limit_error.value) == str(limiter_error.value)


def test_limit_takes_no_store_options():
    for option in ("shared", "capacity", "clock", "shared_mode"):
        with pytest.raises(TypeError):
            cellrate.Limit(10, **{option: None})


def test_check_policy_name():
    assert cellrate.check_policy_name("api") is None
    assert cellrate.check_policy_name("x" * 64) is None
    for bad in ("", "x" * 65, "tab\there", "caf\u00e9", "\ud800"):
        with pytest.raises(cellrate.InvalidArgument) as info:
            cellrate.check_policy_name(bad)
        assert info.value.param == "name"
        with pytest.raises(cellrate.InvalidArgument) as formatted:
            cellrate.Limiter(1).check().headers(bad)
        assert str(formatted.value).startswith(str(info.value))
    assert cellrate.check_policy_name(None) is None  # the core's default, as headers(None)
    for bad in (b"api", 3):
        with pytest.raises(cellrate.InvalidArgumentType) as info:
            cellrate.check_policy_name(bad)
        assert info.value.param == "name"


# The same limits in both faces: (Python constructor, Lua constructor, arguments).
DESCRIBED = [
    ("Limiter", "limiter", ("300/minute",), {"burst": 60}),
    ("Limiter", "limiter", (0.5,), {}),
    ("Limiter", "limiter", (2.5,), {"period": 0.25, "burst": 4}),
    ("Limiter", "limiter", (1 / 3,), {"period": 7.3}),
    ("Limiter", "limiter", ("10/s",), {"clock": "fast"}),
    ("Limiter", "limiter", ("10/8s",), {"algorithm": "fixed_window"}),
    ("KeyedLimiter", "keyed", ("100/5m",), {"burst": 20, "capacity": 500}),
    ("KeyedLimiter", "keyed", (1e-3,), {"algorithm": "token_bucket", "capacity": 7}),
    ("Limit", "limit_spec", ("300/minute",), {"burst": 60}),
    ("Limit", "limit_spec", (100,), {"period": 60, "algorithm": "sliding_window"}),
]


def lua_value(value):
    return repr(value) if isinstance(value, str) else f"{value!r}"


def test_both_faces_describe_a_limit_alike():
    lua = shutil.which("lua5.4")
    module = REPO / "build" / "lua5.4" / "cellrate.so"
    if lua is None or not module.exists():
        pytest.skip("lua5.4 and build/lua5.4/cellrate.so (make lua) are needed")
    lines = [f'package.cpath = "{module.parent}/?.so;" .. package.cpath',
             'local cellrate = require "cellrate"']
    for _, function, args, kwargs in DESCRIBED:
        options = ", ".join(f"{k} = {lua_value(v)}" for k, v in kwargs.items())
        lines.append(f"print(tostring(cellrate.{function}({lua_value(args[0])}, {{ {options} }})))")
    lua_text = subprocess.run([lua, "-e", "\n".join(lines)], capture_output=True, text=True,
                              check=True).stdout.splitlines()
    python_text = [repr(getattr(cellrate, cls)(*args, **kwargs)) for cls, _, args, kwargs in DESCRIBED]
    assert python_text == lua_text
    assert python_text[3] == "cellrate.Limiter(rate=0.3333333333333333, period=7.3, burst=1)"


def test_reconfigure_carries_units_used():
    """docs/design.md §4's reference vectors through the Python face."""
    lim = cellrate.Limiter(10, burst=10)
    for _ in range(6):
        assert lim.allow(now=5.0)
    lim.reconfigure(100, burst=20, now=5.0)
    assert lim.peek(0, now=5.0).remaining == 14
    assert lim.burst == 20

    lim = cellrate.Limiter(100, burst=100)
    assert lim.allow(80, now=5.0)
    lim.reconfigure("10/s", burst=10, now=5.0)
    d = lim.check(now=5.0)
    assert not d.allowed and abs(d.retry_after - 7.1) < 1e-9
    assert lim.allow(now=12.1)


def test_reconfigure_to_the_same_limit_changes_nothing():
    lim = cellrate.Limiter("10/s", burst=5)
    assert lim.allow(3, now=1.0)
    lim.reconfigure("10/s", burst=5, now=1.0)
    assert lim.peek(0, now=1.0).remaining == 2


def test_keyed_reconfigure_carries_each_key_on_its_next_touch():
    keyed = cellrate.KeyedLimiter(10, burst=10, capacity=100)
    for _ in range(6):
        assert keyed.allow("busy", now=5.0)
    keyed.reconfigure(100, burst=20, now=5.0)
    assert keyed.burst == 20
    assert keyed.peek("busy", 0, now=5.0).remaining == 14
    assert keyed.peek("never-seen", 0, now=5.0).remaining == 20
    # a key asleep through many changes still carries what it used
    for _ in range(3):
        assert keyed.allow("sleeper", now=6.0)
    for i in range(300):
        keyed.reconfigure(100 if i % 2 else 200, burst=20, now=6.0)
    assert keyed.peek("sleeper", 0, now=6.0).remaining == 17


def test_no_module_takes_a_private_name_from_a_public_one():
    """A private name that several modules share lives in a private module (as
    cellrate.redis's _protocol and _store, which the fleet share builds on): a public
    module's private names are its own. Imports for type checking only do not count."""
    package = pathlib.Path(cellrate.__file__).resolve().parent
    taken = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        type_only = {id(node) for block in ast.walk(tree)
                     if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
                     for node in ast.walk(block)}
        for node in ast.walk(tree):
            if (not isinstance(node, ast.ImportFrom) or id(node) in type_only or not node.module
                    or node.module.split(".")[0] != "cellrate"
                    or node.module.split(".")[-1].startswith("_")):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                # a private submodule is fine; found on disk, not imported (the package's
                # __init__ may need an optional dependency this interpreter lacks)
                folder = package.parent.joinpath(*node.module.split("."))
                submodule = (any(folder.glob(f"{alias.name}.*"))  # .py, the extension
                             or (folder / alias.name / "__init__.py").exists())
                if private and not submodule:
                    taken.append(f"{path.relative_to(package)}: {node.module}.{alias.name}")
    assert not taken
