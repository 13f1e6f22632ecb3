"""Costs known after the fact (docs/design.md §9): charge, settle, take and
max_cost= through the Python face, in every in-process store and a shared
region. The decisions themselves are pinned by the vectors (test_vectors)."""

import pathlib
import sys
import threading

import pytest

import cellrate

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))

import catalogue_model  # noqa: E402
import gcra_model  # noqa: E402

SECOND = 10**9


def stores(region_dir):
    """(name, charge, take, check) for each store kind, a fresh 10/s burst-5 limit each."""
    limiter = cellrate.Limiter(10, burst=5)
    keyed = cellrate.KeyedLimiter(10, burst=5, capacity=16)
    shared = cellrate.Limiter(10, burst=5, shared=region_dir / "one")
    shared_keyed = cellrate.KeyedLimiter(10, burst=5, capacity=16, shared=region_dir / "many")
    for name, lim in (("Limiter", limiter), ("shared Limiter", shared)):
        yield (name, lambda c, now, lim=lim: lim.charge(c, now=now),
               lambda m, now, lim=lim: lim.take(m, now=now),
               lambda now, lim=lim: lim.check(now=now))
    for name, lim in (("KeyedLimiter", keyed), ("shared KeyedLimiter", shared_keyed)):
        yield (name, lambda c, now, lim=lim: lim.charge("k", c, now=now),
               lambda m, now, lim=lim: lim.take("k", m, now=now),
               lambda now, lim=lim: lim.check("k", now=now))


def test_a_debt_drains_at_exactly_the_rate(region_dir):
    """The first admission after a debt is at the instant the model says, in every store."""
    limit = gcra_model.Limit(100 * 10**6, 5)
    _, tat = catalogue_model.charge(limit, 0, 0, 12)
    first = gcra_model.decide(limit, tat, 0, 1, commit=False).retry_after_ns  # when one unit fits
    assert first == 800 * 10**6
    for name, charge, take, check in stores(region_dir):
        debt = charge(12, 0.0)
        assert (debt.allowed, debt.retry_after, debt.clipped) == (False, first / 1e9, False), name
        assert take(5, 0.7999) == 0, name  # in debt: nothing fits
        refused = check(0.7999)
        assert not refused.allowed and refused.retry_after == pytest.approx(0.0001, abs=1e-12), name
        assert check(first / 1e9).allowed, name
        assert not check(first / 1e9).allowed, name  # one unit per T after that


def test_settling_an_estimate(region_dir):
    """check(estimate), then charge(actual - estimate) or refund(estimate - actual)."""
    for name, charge, take, check in stores(region_dir):
        assert check(0.0).allowed  # the estimate: 1 unit
        settled = charge(3, 0.0)  # the actual cost was 4
        assert settled.allowed and settled.remaining == 1, name
        assert take(10, 0.0) == 1, name


def test_a_charge_past_the_debt_bound_is_clipped_and_says_so():
    lim = cellrate.Limiter("1/s", burst=1)
    d = lim.charge(2**63 - 1, now=1.0)
    assert d.clipped and not d.allowed
    assert d.reset_after == 2**62 / 1e9  # the bound: now + 2**62 ns
    assert lim.charge(1, now=1.0).clipped
    assert not lim.check(now=1.0).allowed
    assert "clipped=True" in repr(d) and "clipped" not in repr(lim.check(now=1.0))
    assert cellrate.Decision(False, 0, 1.0, 1.0, 1, clipped=True) != \
        cellrate.Decision(False, 0, 1.0, 1.0, 1)


def test_window_debts_reach_the_packed_ceiling():
    fixed = cellrate.Limiter(100, 1, algorithm="fixed_window")
    now = 1_700_000_000.25
    assert not fixed.charge(SECOND - 1, now=now).clipped  # the count: period_ns - 1
    assert fixed.charge(1, now=now).clipped
    assert fixed.check(now=now + 0.75).allowed  # the next window: the debt went with its own
    sliding = cellrate.Limiter(100, 1, algorithm="sliding_window")
    assert sliding.charge(100, now=now).clipped is False
    assert sliding.charge(1, now=now).clipped  # the current count carries at most the rate


def test_take_under_four_threads_never_admits_more_than_fits():
    for lim, take in ((cellrate.Limiter(1, burst=5000), lambda lim, m: lim.take(m, now=7.0)),
                      (cellrate.KeyedLimiter(1, burst=5000, capacity=8),
                       lambda lim, m: lim.take("k", m, now=7.0))):
        taken = [0] * 4
        start = threading.Barrier(4)

        def run(index, lim=lim, take=take, start=start, taken=taken):
            start.wait()
            for attempt in range(2000):
                taken[index] += take(lim, 1 + attempt % 5)

        workers = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert sum(taken) == 5000, taken  # 4 x 2000 takes of up to 5: far more than fits


def test_max_cost_at_construction():
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.Limiter("1000/minute", max_cost=4000)  # the default burst is 1000
    assert info.value.param == "burst" and "max_cost" in str(info.value)
    assert cellrate.Limiter("1000/minute", burst=4000, max_cost=4000).burst == 4000
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.KeyedLimiter(100, 60, algorithm="fixed_window", max_cost=101)
    assert info.value.param == "rate"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.KeyedLimiter(100, max_cost=-1)
    assert info.value.param == "max_cost"
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.Limiter(100, max_cost=2.5)
    assert info.value.param == "max_cost"


@pytest.mark.parametrize("make", [
    lambda: cellrate.Limiter(10, burst=10, max_cost=8),
    lambda: cellrate.KeyedLimiter(10, burst=10, max_cost=8, capacity=8),
])
def test_a_change_keeps_max_cost(make):
    lim = make()
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure(10, burst=5)
    assert info.value.param == "burst" and "max_cost" in str(info.value)
    assert lim.burst == 10  # refused: nothing changed
    lim.reconfigure(20, burst=8)
    assert (lim.rate, lim.burst) == (20, 8)


@pytest.mark.parametrize("call, error, param", [
    (lambda lim, keyed: lim.take(-1), cellrate.InvalidArgument, "max_cost"),
    (lambda lim, keyed: keyed.take("k", -1), cellrate.InvalidArgument, "max_cost"),
    (lambda lim, keyed: lim.take("3"), cellrate.InvalidArgumentType, "max_cost"),
    (lambda lim, keyed: lim.take(1.5), cellrate.InvalidArgumentType, "max_cost"),
    (lambda lim, keyed: lim.charge(-1), cellrate.InvalidArgument, "cost"),
    (lambda lim, keyed: keyed.charge("k", None), cellrate.InvalidArgumentType, "cost"),
    (lambda lim, keyed: keyed.charge(5, 1), cellrate.InvalidArgumentType, "key"),
    (lambda lim, keyed: lim.charge(1, now=-1.0), cellrate.InvalidArgument, "now"),
    (lambda lim, keyed: keyed.take("k", 1, now=float("nan")), cellrate.InvalidArgument, "now"),
])
def test_bad_input_names_the_parameter(call, error, param):
    lim, keyed = cellrate.Limiter(10), cellrate.KeyedLimiter(10)
    with pytest.raises(error) as info:
        call(lim, keyed)
    assert type(info.value) is error and info.value.param == param
    assert lim.check(now=0.0).remaining == 9 and keyed.check("k", now=0.0).remaining == 9  # nothing spent


def test_the_units_are_required():
    with pytest.raises(TypeError, match="'cost'"):
        cellrate.Limiter(10).charge()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'max_cost'"):
        cellrate.KeyedLimiter(10).take("k")  # type: ignore[call-arg]
    assert cellrate.Limiter(10).take(max_cost=3, now=0.0) == 3
    assert cellrate.KeyedLimiter(10).charge(key="k", cost=2, now=0.0).remaining == 8
