"""Bad arguments: the right exception, naming the right parameter, and no crash.

InvalidArgument (also a ValueError) is a value the parameter's type allows but
the limiter refuses; InvalidArgumentType (also a TypeError) is a type the
parameter never takes. Both are CellrateError and carry `.param`; the message
names the parameter.
"""

import math

import pytest

import cellrate
from conftest import rss_growth

VALUE = cellrate.InvalidArgument
TYPE = cellrate.InvalidArgumentType

HUGE = 10**30
TOO_BIG_FOR_A_FLOAT = 10**400
NAN = math.nan
INF = math.inf


class Indexable:
    """An int-like object (as numpy's integers are): it has __index__."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def assert_raises(expected, param, call, *args, **kwargs):
    with pytest.raises(expected) as info:
        call(*args, **kwargs)
    error = info.value
    assert type(error) is expected
    assert isinstance(error, cellrate.CellrateError)
    assert isinstance(error, ValueError if expected is VALUE else TypeError)
    assert error.param == param
    assert param in str(error), str(error)
    return error


def test_exception_hierarchy():
    assert issubclass(cellrate.CellrateError, Exception)
    assert cellrate.InvalidArgument.__mro__[1:3] == (cellrate.CellrateError, ValueError)
    assert cellrate.InvalidArgumentType.__mro__[1:3] == (cellrate.CellrateError, TypeError)
    assert not issubclass(cellrate.InvalidArgument, TypeError)
    assert not issubclass(cellrate.InvalidArgumentType, ValueError)
    for cls in (cellrate.CellrateError, cellrate.InvalidArgument, cellrate.InvalidArgumentType):
        assert cls.__module__ == "cellrate"
        assert cls("made by hand").param == ""  # a default for user-raised ones


def test_errors_pickle_with_their_param():
    import pickle

    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.Limiter(10, burst=0)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is cellrate.InvalidArgument
    assert copy.param == "burst" and str(copy) == str(info.value)


# --------------------------------------------------------------------------
# rate

RATE_CASES = [
    (0, VALUE),
    (0.0, VALUE),
    (-1, VALUE),
    (-0.5, VALUE),
    (NAN, VALUE),
    (INF, VALUE),
    (-INF, VALUE),
    (HUGE, VALUE),  # period/rate rounds below 1 ns: too high
    (-HUGE, VALUE),
    (TOO_BIG_FOR_A_FLOAT, VALUE),
    (-TOO_BIG_FOR_A_FLOAT, VALUE),
    (1e-30, VALUE),  # period/rate beyond 2^63 ns: too low
    (None, TYPE),
    (True, TYPE),
    (False, TYPE),
    ([], TYPE),
    ([10], TYPE),
    (object(), TYPE),
    (b"10/s", TYPE),
    (1j, TYPE),
    ("1000/30 days", None),  # valid: see test_calendar_message
    ("abc", VALUE),
    ("", VALUE),
    ("10/", VALUE),
    ("/s", VALUE),
    ("10", VALUE),
    ("10/fortnight", VALUE),
    ("10/s extra", VALUE),
    ("-5/s", VALUE),
    ("0/s", VALUE),
    ("10\x00/s", VALUE),
    ("1e3/s", VALUE),
]


@pytest.mark.parametrize("rate, expected", RATE_CASES)
@pytest.mark.parametrize("factory", [cellrate.Limiter, cellrate.KeyedLimiter])
def test_bad_rate(factory, rate, expected):
    if expected is None:
        factory(rate)
        return
    assert_raises(expected, "rate", factory, rate)


@pytest.mark.parametrize("rate", ["10/month", "10/months", "5/year", "5 per yr", "1/mo"])
def test_calendar_message(rate):
    # a month or a year is a calendar quota's period (docs/design.md §19)
    error = assert_raises(VALUE, "algorithm", cellrate.Limiter, rate)
    assert "algorithm='calendar'" in str(error) and "30d" in str(error)


def test_rate_messages_differ_by_fault():
    syntax = assert_raises(VALUE, "rate", cellrate.Limiter, "abc")
    nonpositive = assert_raises(VALUE, "rate", cellrate.Limiter, 0)
    too_high = assert_raises(VALUE, "rate", cellrate.Limiter, HUGE)
    too_low = assert_raises(VALUE, "rate", cellrate.Limiter, 1e-30)
    assert len({str(e) for e in (syntax, nonpositive, too_high, too_low)}) == 4
    assert "too high" in str(too_high) and "too low" in str(too_low)


def test_wrong_type_message_is_the_core_message():
    error = assert_raises(TYPE, "rate", cellrate.Limiter, None)
    value_error = assert_raises(VALUE, "rate", cellrate.Limiter, -1)
    assert str(error) == str(value_error)


# --------------------------------------------------------------------------
# period

PERIOD_CASES = [
    (0, VALUE, "period"),
    (0.0, VALUE, "period"),
    (-1, VALUE, "period"),
    (NAN, VALUE, "period"),
    (INF, VALUE, "period"),
    (-INF, VALUE, "period"),
    (-HUGE, VALUE, "period"),
    (TOO_BIG_FOR_A_FLOAT, VALUE, "period"),
    # a finite period so long that period/rate exceeds 2^63 ns: the core
    # reports it as a rate too low (the message names the period too)
    (HUGE, VALUE, "rate"),
    ("1", TYPE, "period"),
    (True, TYPE, "period"),
    ([], TYPE, "period"),
    (object(), TYPE, "period"),
]


@pytest.mark.parametrize("period, expected, param", PERIOD_CASES)
@pytest.mark.parametrize("factory", [cellrate.Limiter, cellrate.KeyedLimiter])
def test_bad_period(factory, period, expected, param):
    error = assert_raises(expected, param, factory, 10, period)
    assert "period" in str(error)
    assert_raises(expected, param, factory, 10, period=period)


@pytest.mark.parametrize("period", [1, 1.0, 60, 0.5])
def test_period_with_a_rate_string(period):
    error = assert_raises(VALUE, "period", cellrate.Limiter, "10/s", period)
    assert "rate string" in str(error)
    assert_raises(VALUE, "period", cellrate.KeyedLimiter, "10/s", period=period)


# --------------------------------------------------------------------------
# burst

BURST_CASES = [
    (0, VALUE),
    (-1, VALUE),
    (HUGE, VALUE),  # saturates: burst * T beyond 2^63 ns
    (2**62, VALUE),
    (-HUGE, VALUE),
    (NAN, TYPE),
    (INF, TYPE),
    (-INF, TYPE),
    (1.0, TYPE),
    (6.5, TYPE),
    (True, TYPE),
    ("6", TYPE),
    ([], TYPE),
    (object(), TYPE),
]


@pytest.mark.parametrize("burst, expected", BURST_CASES)
@pytest.mark.parametrize("factory", [cellrate.Limiter, cellrate.KeyedLimiter])
def test_bad_burst(factory, burst, expected):
    assert_raises(expected, "burst", factory, 10, burst=burst)


def test_burst_too_large_message():
    error = assert_raises(VALUE, "burst", cellrate.Limiter, 10, burst=HUGE)
    assert "too large" in str(error)


def test_int_like_burst_is_accepted():
    assert cellrate.Limiter(10, burst=Indexable(4)).burst == 4
    assert_raises(VALUE, "burst", cellrate.Limiter, 10, burst=Indexable(0))


# --------------------------------------------------------------------------
# capacity

CAPACITY_CASES = [
    (0, VALUE),
    (-1, VALUE),
    (2**32 + 1, VALUE),
    (HUGE, VALUE),
    (-HUGE, VALUE),
    (NAN, TYPE),
    (INF, TYPE),
    (-INF, TYPE),
    (100.0, TYPE),
    (True, TYPE),
    ("100", TYPE),
    ([], TYPE),
    (object(), TYPE),
]


@pytest.mark.parametrize("capacity, expected", CAPACITY_CASES)
def test_bad_capacity(capacity, expected):
    assert_raises(expected, "capacity", cellrate.KeyedLimiter, 10, capacity=capacity)


def test_limiter_takes_no_capacity():
    with pytest.raises(TypeError):
        cellrate.Limiter(10, capacity=10)


# --------------------------------------------------------------------------
# cost, now and key, on every deciding method

COST_CASES = [
    (-1, VALUE),
    (-HUGE, VALUE),
    (NAN, TYPE),
    (INF, TYPE),
    (-INF, TYPE),
    (1.0, TYPE),
    (0.5, TYPE),
    (True, TYPE),
    (False, TYPE),
    (None, TYPE),
    ("1", TYPE),
    ([], TYPE),
    (object(), TYPE),
]

NOW_CASES = [
    (-1, VALUE),
    (-1e-3, VALUE),
    (NAN, VALUE),
    (INF, VALUE),
    (-INF, VALUE),
    (HUGE, VALUE),
    (-HUGE, VALUE),
    (2**63 / 1e9, VALUE),  # 2^63 ns
    (TOO_BIG_FOR_A_FLOAT, VALUE),
    (-TOO_BIG_FOR_A_FLOAT, VALUE),
    (True, TYPE),
    ("1.0", TYPE),
    ([], TYPE),
    (object(), TYPE),
]

KEY_CASES = [0, -1, 1.5, NAN, INF, None, True, [], object(), bytearray(b"a"), memoryview(b"a")]

METHODS = ["allow", "check", "peek"]


def deciders():
    """(name, call(cost=..., now=...)) for each deciding method of both types."""
    for method in METHODS:
        lim = cellrate.Limiter(10, burst=2)
        yield f"Limiter.{method}", getattr(lim, method)
        keyed = cellrate.KeyedLimiter(10, burst=2)
        yield f"KeyedLimiter.{method}", (
            lambda *args, _m=getattr(keyed, method), **kwargs: _m("key", *args, **kwargs)  # noqa: B008
        )


DECIDERS = list(deciders())
DECIDER_IDS = [name for name, _ in DECIDERS]


@pytest.mark.parametrize("decide", [call for _, call in DECIDERS], ids=DECIDER_IDS)
@pytest.mark.parametrize("cost, expected", COST_CASES)
def test_bad_cost(decide, cost, expected):
    assert_raises(expected, "cost", decide, cost, now=1.0)
    assert_raises(expected, "cost", decide, cost=cost, now=1.0)


@pytest.mark.parametrize("decide", [call for _, call in DECIDERS], ids=DECIDER_IDS)
@pytest.mark.parametrize("now, expected", NOW_CASES)
def test_bad_now(decide, now, expected):
    assert_raises(expected, "now", decide, now=now)
    assert_raises(expected, "now", decide, 1, now=now)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("key", KEY_CASES)
def test_bad_key(method, key):
    keyed = cellrate.KeyedLimiter(10)
    assert_raises(TYPE, "key", getattr(keyed, method), key)
    assert_raises(TYPE, "key", getattr(keyed, method), key=key, now=1.0)


@pytest.mark.parametrize("key", KEY_CASES)
def test_bad_key_on_reset(key):
    assert_raises(TYPE, "key", cellrate.KeyedLimiter(10).reset, key)


def test_bad_key_message_says_python_types():
    # the core's words, then this face's own type names
    error = assert_raises(TYPE, "key", cellrate.KeyedLimiter(10).allow, 1)
    assert str(error) == "key must be a string (any bytes, any length): str or bytes, not int"


def test_unencodable_str_key():
    # a lone surrogate has no UTF-8 form: a ValueError naming key, the
    # codec's error as its cause
    with pytest.raises(ValueError) as info:
        cellrate.KeyedLimiter(10).allow("\udc80")
    assert info.value.param == "key"
    assert isinstance(info.value.__cause__, UnicodeEncodeError)


def test_huge_cost_is_a_denial_not_an_error():
    lim = cellrate.Limiter(10, burst=2)
    for cost in (HUGE, 2**63, 2**63 - 1):
        dec = lim.check(cost, now=1.0)
        assert not dec.allowed and dec.retry_after == math.inf


def test_edge_values_that_are_valid():
    lim = cellrate.Limiter(10, burst=1)
    assert lim.allow(0, now=0)  # cost 0, now 0 (int seconds)
    assert lim.allow(now=0)
    assert lim.allow(Indexable(1), now=5)  # int-like cost
    assert cellrate.Limiter(10).allow(now=(2**62 - 2**20) / 1e9)  # just below the 2^62 ns horizon
    assert cellrate.KeyedLimiter(10, capacity=1).capacity == 1
    assert cellrate.KeyedLimiter(10, capacity=Indexable(3)).capacity == 3


def test_errors_change_nothing():
    lim = cellrate.Limiter(10, burst=1)
    keyed = cellrate.KeyedLimiter(10, burst=1)
    for bad in [dict(cost=-1), dict(cost=1.0), dict(now=-1.0), dict(now="x")]:
        with pytest.raises(cellrate.CellrateError):
            lim.allow(**bad)
        with pytest.raises(cellrate.CellrateError):
            keyed.allow("k", **bad)
    assert lim.allow(now=1.0)
    assert keyed.allow("k", now=1.0)
    assert len(keyed) == 1


def test_an_index_that_raises_propagates():
    class Broken:
        def __index__(self):
            raise RuntimeError("broken __index__")

    with pytest.raises(RuntimeError, match="broken"):
        cellrate.Limiter(10).allow(Broken())
    with pytest.raises(RuntimeError, match="broken"):
        cellrate.Limiter(10, burst=Broken())
    with pytest.raises(RuntimeError, match="broken"):
        cellrate.Limiter(Broken())
    with pytest.raises(RuntimeError, match="broken"):
        cellrate.Limiter(10).allow(now=Broken())


def test_no_growth_over_many_errors():
    lim = cellrate.Limiter(10)
    keyed = cellrate.KeyedLimiter(10, capacity=16)

    def fail_many_ways():
        for call in (
            lambda: cellrate.Limiter("10/month"),
            lambda: cellrate.Limiter(None),
            lambda: cellrate.KeyedLimiter(10, burst=0, capacity=5),
            lambda: cellrate.KeyedLimiter(10, capacity=0),
            lambda: lim.allow(-1),
            lambda: lim.check(now=NAN),
            lambda: keyed.peek(5),
            lambda: keyed.allow("k", 1.5),
        ):
            try:
                call()
            except cellrate.CellrateError:
                pass
            else:
                raise AssertionError("no error")

    # 10^5 failing calls a round
    grown = rss_growth(lambda _: fail_many_ways(), warm=2_000, count=12_500)
    assert grown < 2 * 1024 * 1024, f"RSS grew by {grown} bytes"


def test_reconfigure_refuses_another_algorithm_and_bad_limits_unchanged():
    lim = cellrate.Limiter(10, burst=5)
    assert lim.allow(2, now=1.0)
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure(10, algorithm="fixed_window", now=1.0)
    assert info.value.param == "algorithm"
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure(-1, now=1.0)
    assert info.value.param == "rate"
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure(10, burst=0, now=1.0)
    assert info.value.param == "burst"
    assert lim.peek(0, now=1.0).remaining == 3 and lim.burst == 5


@pytest.mark.parametrize("kind", [cellrate.Limiter, cellrate.KeyedLimiter])
def test_a_bad_change_of_a_shared_limiter_changes_nothing(tmp_path, kind):
    lim = kind(10, shared=str(tmp_path / "region"))
    other = kind(10, shared=str(tmp_path / "region"))
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure(20, algorithm="fixed_window")
    assert info.value.param == "algorithm"
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure(-1)
    assert info.value.param == "rate"
    assert (other.rate, lim.rate) == (10, 10)
    lim.reconfigure(20)
    other.check(**({"key": "k"} if kind is cellrate.KeyedLimiter else {}))
    assert other.rate == 20  # the region's change, followed on the next decision
