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


def stores(region_dir, **options):
    """(name, charge, take, check) for each store kind, a fresh 10/s burst-5 limit each
    (max_debt=10 unless `options` say otherwise)."""
    options = {"burst": 5, "max_debt": 10, **options}
    region_dir = region_dir / str(len(list(region_dir.iterdir())))  # fresh regions each call
    region_dir.mkdir()
    limiter = cellrate.Limiter(10, **options)
    keyed = cellrate.KeyedLimiter(10, capacity=16, **options)
    shared = cellrate.Limiter(10, shared=region_dir / "one", **options)
    shared_keyed = cellrate.KeyedLimiter(10, capacity=16, shared=region_dir / "many", **options)
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
    limit = gcra_model.Limit(100 * 10**6, 5, 10)
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


def test_one_bad_figure_locks_a_key_out_for_one_more_burst_at_most(region_dir):
    """A charge of 2**70 (an upstream's usage header gone wrong): committed up to
    max_debt units beyond the burst (default: the burst), clipped, and the key is
    admitted again once that drains (1.1 s at 10/s, burst 10), not in 146 years."""
    for name, charge, _, check in stores(region_dir, burst=10, max_debt=None):
        d = charge(2**70, 1.0)
        assert (d.allowed, d.clipped, d.retry_after) == (False, True, 1.1), name
        assert charge(1, 1.0).clipped, name  # at the bound: nothing more fits
        assert not check(2.0999).allowed and check(2.1).allowed, name


def test_max_debt_sets_the_bound(region_dir):
    for name, charge, _, _ in stores(region_dir, burst=10, max_debt=100):
        d = charge(50, 1.0)  # 40 units of debt: below the bound
        assert (d.clipped, d.retry_after) == (False, 4.1), name
        d = charge(2**70, 1.0)  # 60 more fit under it
        assert (d.clipped, d.retry_after) == (True, 10.1), name
    for name, charge, _, check in stores(region_dir, burst=10, max_debt=0):
        assert charge(15, 1.0).clipped, name  # no debt at all: the limit filled
        assert check(1.1).allowed, name
    huge = cellrate.Limiter("1/s", burst=1, max_debt=2**63 - 1)
    d = huge.charge(2**63 - 1, now=1.0)  # whatever max_debt: the horizon, 2**62 ns
    assert d.clipped and d.reset_after == 4611686018.0  # the whole seconds below 2**62 ns
    assert "clipped=True" in repr(d) and "clipped" not in repr(huge.check(now=1.0))
    assert cellrate.Decision(False, 0, 1.0, 1.0, 1, clipped=True) != \
        cellrate.Decision(False, 0, 1.0, 1.0, 1)


def test_max_debt_option():
    lim = cellrate.Limiter("10/s")
    assert lim.max_debt == 10 and "max_debt" not in repr(lim)  # the default: the burst
    keyed = cellrate.KeyedLimiter("10/s", burst=20, max_debt=5)
    assert keyed.max_debt == 5 and "max_debt=5" in repr(keyed)
    assert cellrate.Limiter(10, 60, algorithm="fixed_window").max_debt == 10  # a window: its rate
    for bad, error in ((-1, cellrate.InvalidArgument), (2.5, cellrate.InvalidArgumentType),
                       ("3", cellrate.InvalidArgumentType)):
        for make in (cellrate.Limiter, cellrate.KeyedLimiter):
            with pytest.raises(error) as info:
                make(10, max_debt=bad)
            assert info.value.param == "max_debt", bad
            assert "max_debt must be an integer >= 0" in str(info.value)
    # a live change keeps a max_debt given; max_debt= changes it (a debt carries whole)
    keyed.reconfigure(100, burst=30)
    assert (keyed.burst, keyed.max_debt) == (30, 5)
    keyed.reconfigure(100, burst=30, max_debt=50)
    assert keyed.max_debt == 50
    lim.reconfigure(20)  # the default follows the new burst
    assert lim.max_debt == 20
    with pytest.raises(cellrate.InvalidArgument) as info:
        lim.reconfigure(20, max_debt=-1)
    assert info.value.param == "max_debt" and lim.max_debt == 20


def test_max_debt_is_the_shared_regions(region_dir):
    path = region_dir / "debt"
    first = cellrate.Limiter(10, burst=10, shared=path)
    assert first.charge(2**70, now=1.0).retry_after == 1.1
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.Limiter(10, burst=10, max_debt=100, shared=path, on_change="refuse")
    assert info.value.param == "shared" and "another max_debt" in str(info.value)
    with pytest.warns(RuntimeWarning, match="max_debt=100"):
        second = cellrate.Limiter(10, burst=10, max_debt=100, shared=path)
    assert first.charge(2**70, now=1.0).retry_after == 10.1  # the region's, for every opener
    assert (first.max_debt, second.max_debt) == (100, 100)


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
