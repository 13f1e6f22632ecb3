"""The algorithm catalogue, reservations and check_all through the Python face.

- Hypothesis replays >= 10**4 random operations per algorithm (check, peek,
  allow, reserve, refund, reset; times that step back) on a Limiter and a
  KeyedLimiter against the reference model (tests/model/catalogue_model.py).
- check_all: the tightest decision, nothing spent on a refusal, and threads
  hammering overlapping limits (every admission counted).
- 4 threads and 4 processes on one shared region at one frozen instant admit
  exactly a window's amount.
- Bad input for every new parameter and combination.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import sys
import threading
import uuid
from pathlib import Path

import pytest

cellrate = pytest.importorskip("cellrate")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "model"))

import catalogue_model as catalogue  # noqa: E402
import gcra_model as model  # noqa: E402
from gcra_model import HORIZON_NS  # noqa: E402

VALUE = cellrate.InvalidArgument
TYPE = cellrate.InvalidArgumentType
MIN_OPS = 10**4
EXAMPLES = 150
GRID = 1953125  # 5**9 ns: a multiple has exact float seconds at any magnitude
EPOCH = 1_700_000_000 * 10**9  # a realtime instant (windows are aligned to the epoch)
S = 10**9
KEYS = ["alpha", b"beta", "", "δ"]
ALGORITHMS = ["gcra", "token_bucket", "fixed_window", "sliding_window"]


def seconds(now_ns: int) -> float:
    now = model.float_face_seconds(now_ns)
    assert now is not None and model.seconds_to_ns(now) == ("OK", now_ns)
    return now


def shared_path(tag: str) -> str:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
    return f"{base}/cellrate-catalogue-{tag}-{uuid.uuid4().hex}"


# --------------------------------------------------------------------------
# The faces take the algorithm


def test_algorithm_attribute_and_identity():
    assert cellrate.Limiter(10).algorithm == "gcra"
    for name in ALGORITHMS:
        lim = cellrate.Limiter("100/minute", algorithm=name)
        keyed = cellrate.KeyedLimiter("100/minute", algorithm=name)
        assert lim.algorithm == keyed.algorithm == name
        window = "window" in name
        assert lim.clock == ("realtime" if window else "fast")
        assert (name in repr(lim)) == (name != "gcra")
    assert repr(cellrate.Limiter(10, algorithm="gcra")) == repr(cellrate.Limiter(10))
    fixed = cellrate.Limiter("10/8s", algorithm="fixed_window")
    assert fixed.burst == 10 and fixed.tolerance_ns == 8 * S and fixed.rate == 10 and fixed.period == 8


def test_gcra_and_omitted_share_a_region():
    path = shared_path("same")
    try:
        a = cellrate.Limiter(10, shared=path, algorithm="gcra")
        b = cellrate.Limiter(10, shared=path)
        assert a.allow(10, now=5.0) and not b.allow(1, now=5.0)
        with pytest.raises(VALUE) as info:
            cellrate.Limiter(10, shared=path, algorithm="token_bucket")
        assert info.value.param == "shared" and "algorithm" in str(info.value)
    finally:
        os.unlink(path)


def test_window_decisions_follow_the_design_vectors():
    fixed = cellrate.Limiter("10/8s", algorithm="fixed_window")
    t0 = EPOCH / 1e9
    assert all(fixed.allow(now=t0 + i / 4) for i in range(9))
    d = fixed.check(3, now=t0 + 4)
    assert not d.allowed and d.retry_after == 4.0 and d.remaining == 1
    assert all(fixed.allow(now=t0 + 8 + i / 4) for i in range(9))

    sliding = cellrate.Limiter("10/8s", algorithm="sliding_window")
    assert all(sliding.allow(now=t0 + 7) for _ in range(6))
    assert all(sliding.allow(now=t0 + 12) for _ in range(6))  # prev weighs 3 here
    d = sliding.check(3, now=t0 + 14)
    assert not d.allowed and d.remaining == 2
    assert d.retry_after == 0.666666667  # exact: 6 * 2/8 + 6 = 7.5 decays to 7 at 6.666666667 s


def test_window_reads_the_realtime_clock():
    import time

    lim = cellrate.Limiter(1, 3600, algorithm="fixed_window")
    for _ in range(3):
        lim.reset()
        before = time.time()
        assert lim.allow()
        after = time.time()
        if int(before // 3600) != int(after // 3600):
            continue
        d = lim.peek(now=after)
        assert not d.allowed
        assert abs(d.retry_after - (3600 - after % 3600)) < 1e-3
        break


# --------------------------------------------------------------------------
# Reservations


def test_reserve_and_refund_gcra():
    for name in ("gcra", "token_bucket"):
        lim = cellrate.Limiter(10, burst=2, algorithm=name)
        assert lim.reserve(now=0.0) == 0.0
        assert lim.reserve(now=0.0) == 0.0
        assert lim.reserve(now=0.0) == pytest.approx(0.1)
        assert lim.reserve(now=0.0, timeout=0.15) is None
        assert lim.reserve(now=0.0, timeout=0.2) == pytest.approx(0.2)
        assert lim.reserve(3, now=0.0) is None  # never fits
        assert lim.refund(2, now=0.0) is None
        assert lim.reserve(now=0.0, timeout=0.1) == pytest.approx(0.1)
        keyed = cellrate.KeyedLimiter(10, burst=1, algorithm=name)
        assert keyed.reserve("k", now=0.0) == 0.0
        assert keyed.reserve("k", timeout=0.05, now=0.0) is None
        keyed.refund("k", now=0.0)
        assert keyed.reserve("k", timeout=0.0, now=0.0) == 0.0


def test_reserve_windows_only_now():
    for name in ("fixed_window", "sliding_window"):
        lim = cellrate.Limiter(2, 10, algorithm=name)
        t = EPOCH / 1e9
        assert lim.reserve(2, now=t) == 0.0
        assert lim.reserve(1, now=t) is None  # would need the next window: refused
        lim.refund(1, now=t)
        assert lim.reserve(1, now=t, timeout=100.0) == 0.0


# --------------------------------------------------------------------------
# Random operations against the model, per algorithm


@st.composite
def window_limits(draw, algorithm):
    window = draw(st.sampled_from([S, 60 * S, 8 * S, S // 2, GRID * 64]) |
                  st.integers(2, 50000).map(lambda m: GRID * m))
    ceiling = (catalogue.fixed_ceiling(window) if algorithm == "fixed_window"
               else catalogue.sliding_ceiling(window))
    rate = min(ceiling, draw(st.sampled_from([1, 2, 3, 10, 100]) | st.integers(1, ceiling)))
    return catalogue.WindowLimit(algorithm, window, rate)


@st.composite
def gcra_limits(draw):
    emission = draw(st.sampled_from([10**6, 10**8, 2 * 10**8, 10**9, 60 * 10**9]) |
                    st.integers(1, 2**20).map(lambda m: GRID * m))
    burst = draw(st.integers(1, 12) | st.integers(1, 2000))
    return model.Limit(emission, burst)


KINDS = ["check"] * 4 + ["peek", "allow", "allow", "reserve", "reserve", "refund", "reset"]
raw_ops = st.lists(st.binary(min_size=12, max_size=12), min_size=40, max_size=90)


def shape(span_ns: int, rate: int, keyed: bool, start: int, raw) -> list:
    t, ops = start, []
    for op in raw:
        move, roll, kind, key = op[0] % 100, op[1] % 100, op[2] % len(KINDS), op[3] % len(KEYS)
        span = int.from_bytes(op[4:12], "little")
        steps = max(1, span_ns // GRID)
        if move < 20:
            pass
        elif move < 70:
            t += GRID * (span % (steps // 3 + 2))
        elif move < 85:
            t += GRID * (span % (3 * steps + 2))
        else:
            t -= GRID * (span % (2 * steps + 2))  # the clock steps back
        t = max(t, 0)
        if roll < 10:
            cost = 0
        elif roll < 55:
            cost = 1
        elif roll < 92:
            cost = 1 + span % rate
        else:
            cost = rate + 1 + span % 3
        wait = [None, 0.0, 1.0][span % 3]
        ops.append((KINDS[kind], KEYS[key] if keyed else None, cost, t, wait))
    return ops


class ModelStore:
    """One model state per key, for any algorithm."""

    def __init__(self, limit) -> None:
        self.limit = limit
        self.states: dict = {}

    def key(self, key):
        return key.encode() if isinstance(key, str) else key

    def decide(self, key, now, cost, commit):
        k = self.key(key)
        if isinstance(self.limit, model.Limit):
            d = model.decide(self.limit, self.states.get(k, 0), now, cost, commit)
            self.states[k] = d.tat_after
            return d
        d = catalogue.window_decide(self.limit, self.states.get(k), now, cost, commit)
        self.states[k] = d.counts_after
        return d

    def reserve(self, key, now, cost, wait):
        k = self.key(key)
        max_wait = None if wait is None else round(wait * S)
        if isinstance(self.limit, model.Limit):
            reserved, delay, self.states[k] = catalogue.gcra_reserve(
                self.limit, self.states.get(k, 0), now, cost, max_wait)
            return delay / 1e9 if reserved else None
        d = catalogue.window_decide(self.limit, self.states.get(k), now, cost, True)
        self.states[k] = d.counts_after
        return 0.0 if d.allowed else None

    def refund(self, key, now, cost):
        k = self.key(key)
        if isinstance(self.limit, model.Limit):
            self.states[k] = catalogue.gcra_refund(self.limit, self.states.get(k, 0), now, cost)[0]
        else:
            self.states[k] = catalogue.window_refund(self.limit, self.states.get(k), now, cost)[0]

    def reset(self, key):
        self.states.pop(self.key(key), None)


def same(got, want, context) -> None:
    assert got.allowed is want.allowed, context
    assert got.remaining == want.remaining, context
    assert got.limit == want.limit, context
    for name in ("retry_after", "reset_after"):
        ns = getattr(want, f"{name}_ns")
        value = getattr(got, name)
        assert value == (math.inf if ns == model.NEVER else ns / 1e9), (name, value, ns, context)


def replay(face, store: ModelStore, ops, keyed: bool) -> int:
    for index, (kind, key, cost, now_ns, wait) in enumerate(ops):
        context = (index, kind, key, cost, now_ns, wait)
        args = (key,) if keyed else ()
        now = seconds(now_ns)
        if kind == "reset":
            face.reset(*args)
            store.reset(key)
        elif kind == "reserve":
            want = store.reserve(key, now_ns, cost, wait)
            got = face.reserve(*args, cost, timeout=wait, now=now)
            assert (got is None) == (want is None) and (got is None or got == want), (got, want, context)
        elif kind == "refund":
            assert face.refund(*args, cost, now=now) is None
            store.refund(key, now_ns, cost)
        else:
            want = store.decide(key, now_ns, cost, kind != "peek")
            if kind == "allow":
                assert face.allow(*args, cost, now=now) is want.allowed, context
            else:
                same(getattr(face, kind)(*args, cost, now=now), want, context)
    return len(ops)


def run_algorithm(algorithm: str) -> int:
    replayed = 0

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def run(data):
        nonlocal replayed
        keyed = data.draw(st.booleans(), label="keyed")
        if algorithm in catalogue.WINDOWS:
            limit = data.draw(window_limits(algorithm), label="limit")
            span, rate = limit.window_ns, limit.rate
            args = (float(limit.rate), seconds(limit.window_ns))
            kwargs = {"algorithm": algorithm}
            start = EPOCH + GRID * data.draw(st.integers(0, 2**24), label="start")
        else:
            limit = data.draw(gcra_limits(), label="limit")
            span, rate = limit.tolerance_ns, limit.burst
            args = (1.0, seconds(limit.emission_ns))
            kwargs = {"algorithm": algorithm, "burst": limit.burst}
            start = GRID * data.draw(st.integers(0, 2**24), label="start")
        ops = shape(span, rate, keyed, start, data.draw(raw_ops, label="ops"))
        face = (cellrate.KeyedLimiter(*args, capacity=100, **kwargs) if keyed
                else cellrate.Limiter(*args, **kwargs))
        replayed += replay(face, ModelStore(limit), ops, keyed)

    for _ in range(5):
        run()
        if replayed >= MIN_OPS:
            break
    return replayed


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_against_model(algorithm):
    replayed = run_algorithm(algorithm)
    assert replayed >= MIN_OPS, replayed


@settings(max_examples=300, deadline=None, database=None)
@given(algorithm=st.sampled_from(ALGORITHMS),
       rate=st.one_of(st.floats(1e-3, 1e10), st.integers(1, 10**7).map(float)),
       period=st.one_of(st.none(), st.floats(1e-9, 1e9)),
       burst=st.one_of(st.none(), st.integers(1, 10**6)))
def test_limits_against_model(algorithm, rate, period, burst):
    want = catalogue.limit_for(algorithm, rate, period, burst)
    args = (rate,) if period is None else (rate, period)
    kwargs = {"algorithm": algorithm} if burst is None else {"algorithm": algorithm, "burst": burst}
    if want.status != "OK":
        with pytest.raises(VALUE):
            cellrate.Limiter(*args, **kwargs)
        return
    lim = cellrate.Limiter(*args, **kwargs)
    assert (lim.emission_ns, lim.tolerance_ns, lim.burst) == (want.emission_ns, want.tolerance_ns, want.burst)


# --------------------------------------------------------------------------
# check_all


def remaining(item, now):
    lim, *key = item if isinstance(item, tuple) else (item,)
    d = lim.peek(*key, 1, now=now)
    return d.remaining + 1 if d.allowed else 0


def test_check_all_tightest_and_spends_nothing():
    t = EPOCH / 1e9
    route = cellrate.Limiter(5, 1)
    per_ip = cellrate.KeyedLimiter(2, 1, algorithm="fixed_window")
    per_user = cellrate.KeyedLimiter(3, 1, algorithm="sliding_window")
    items = [route, (per_ip, "10.0.0.1"), (per_user, b"alice")]
    d = cellrate.check_all(items, now=t)
    assert d.allowed and d.remaining == 1 and d.limit == 2
    assert cellrate.check_all(items, 1, now=t).allowed
    before = [remaining(i, t) for i in items]
    d = cellrate.check_all(items, now=t)
    assert not d.allowed and d.retry_after == 1.0 and d.limit == 2
    assert [remaining(i, t) for i in items] == before
    d = cellrate.check_all(items, cost=4, now=t)
    assert not d.allowed and d.retry_after == math.inf
    assert cellrate.check_all([route], cost=0, now=t).allowed
    assert cellrate.check_all((route, (per_ip, "other")), now=t).allowed  # any sequence
    twice = cellrate.Limiter(1, 1)
    assert not cellrate.check_all([twice, twice], now=t).allowed
    assert remaining(twice, t) == 1  # the unit committed first was given back


def test_check_all_bad_input():
    lim = cellrate.Limiter(10)
    keyed = cellrate.KeyedLimiter(10)
    for bad, error, param in [([], VALUE, "items"), (None, TYPE, "items"), (5, TYPE, "items"),
                              ([5], TYPE, "items"), ([keyed], TYPE, "items"),
                              ([(lim, "k")], TYPE, "items"), ([(keyed,)], TYPE, "items"),
                              ([(keyed, "k", 1)], TYPE, "plan"),  # (keyed, key, plan)
                              ([(keyed, "k", None, 1)], TYPE, "items"), ([(keyed, 5)], TYPE, "key"),
                              ("ab", TYPE, "items")]:
        with pytest.raises(error) as info:
            cellrate.check_all(bad)
        assert info.value.param == param, bad
    for cost, error in [(-1, VALUE), (1.5, TYPE), ("1", TYPE)]:
        with pytest.raises(error) as info:
            cellrate.check_all([lim], cost)
        assert info.value.param == "cost"
    with pytest.raises(VALUE) as info:
        cellrate.check_all([lim], now=-1.0)
    assert info.value.param == "now"


def test_check_all_threads_overlapping():
    t = EPOCH / 1e9
    bounds = [300, 900, 1500, 5000]
    limits = [cellrate.Limiter(300, 60), cellrate.Limiter(900, 60, algorithm="token_bucket"),
              cellrate.Limiter(1500, 60, algorithm="fixed_window"),
              cellrate.KeyedLimiter(5000, 60, algorithm="sliding_window")]
    items = [limits[0], limits[1], limits[2], (limits[3], "user")]
    admitted = [[0] * 4 for _ in range(4)]
    refused = [0] * 4
    start = threading.Barrier(4)

    def work(n):
        rng = random.Random(n)
        start.wait()
        for _ in range(2500):
            which = rng.sample(range(4), rng.choice((2, 3)))
            cost = rng.randrange(1, 4)
            if cellrate.check_all([items[w] for w in which], cost, now=t).allowed:
                for w in which:
                    admitted[n][w] += cost
            else:
                refused[n] += 1

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for w in range(4):
        total = sum(admitted[n][w] for n in range(4))
        assert total <= bounds[w]
        assert remaining(items[w], t) == bounds[w] - total  # refusals gave everything back
    assert sum(refused) > 0


# --------------------------------------------------------------------------
# One frozen instant, 4 threads and 4 processes


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
def test_threads_frozen_instant(algorithm):
    t = EPOCH / 1e9 + 1
    lim = cellrate.Limiter(500, 60, algorithm=algorithm)
    keyed = cellrate.KeyedLimiter(500, 60, algorithm=algorithm)
    counts = [0] * 8
    start = threading.Barrier(4)

    def work(n):
        start.wait()
        for i in range(1000):
            counts[n] += lim.allow(now=t) if i % 2 else lim.reserve(now=t) == 0.0
            counts[4 + n] += keyed.allow("k", now=t)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sum(counts[:4]) == 500 and sum(counts[4:]) == 500


def _process_worker(path, algorithm, keyed, queue, start):
    import cellrate as cr

    t = EPOCH / 1e9 + 1
    if keyed:
        store = cr.KeyedLimiter(300, 60, algorithm=algorithm, shared=path, capacity=16)
        call = lambda: store.allow("k", now=t)  # noqa: E731
    else:
        store = cr.Limiter(300, 60, algorithm=algorithm, shared=path)
        call = lambda: store.allow(now=t)  # noqa: E731
    start.wait()
    queue.put(sum(call() for _ in range(1000)))


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
@pytest.mark.parametrize("keyed", [False, True])
def test_processes_frozen_instant(algorithm, keyed):
    ctx = multiprocessing.get_context("fork")
    path = shared_path("proc")
    queue, start = ctx.Queue(), ctx.Barrier(4)
    procs = [ctx.Process(target=_process_worker, args=(path, algorithm, keyed, queue, start))
             for _ in range(4)]
    try:
        for p in procs:
            p.start()
        total = sum(queue.get(timeout=60) for _ in procs)
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        assert total == 300
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        if os.path.exists(path):
            os.unlink(path)


# --------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("cls", ["Limiter", "KeyedLimiter"])
def test_bad_algorithm_combinations(cls):
    make = getattr(cellrate, cls)
    cases = [
        (dict(rate=10, algorithm="leaky_bucket"), VALUE, "algorithm"),
        (dict(rate=10, algorithm="GCRA"), VALUE, "algorithm"),
        (dict(rate=10, algorithm=""), VALUE, "algorithm"),
        (dict(rate=10, algorithm=1), TYPE, "algorithm"),
        (dict(rate=10, algorithm=b"gcra"), TYPE, "algorithm"),
        (dict(rate=10, algorithm="fixed_window", burst=10), VALUE, "burst"),
        (dict(rate=10, algorithm="sliding_window", burst=1), VALUE, "burst"),
        (dict(rate="0.5/s", algorithm="fixed_window"), VALUE, "rate"),
        (dict(rate=2.5, algorithm="sliding_window"), VALUE, "rate"),
        (dict(rate="1000000000/s", algorithm="fixed_window"), VALUE, "rate"),
        (dict(rate="31622/s", algorithm="sliding_window"), VALUE, "rate"),
        (dict(rate=10, algorithm="fixed_window", clock="fast"), VALUE, "clock"),
        (dict(rate=10, algorithm="gcra", clock="realtime"), VALUE, "clock"),
        (dict(rate=1, period=2e9, algorithm="fixed_window"), VALUE, "period"),
        (dict(rate=2, period=9.2e9), VALUE, "burst"),
    ]
    for kwargs, error, param in cases:
        with pytest.raises(error) as info:
            make(**kwargs)
        assert info.value.param == param, (kwargs, str(info.value))
        assert param in str(info.value)
    with pytest.raises(VALUE) as info:
        make("0.5/s", algorithm="fixed_window")
    assert "1/2s" in str(info.value)
    with pytest.raises(VALUE) as info:
        make("31622/s", algorithm="sliding_window")
    assert "31621" in str(info.value)


def test_bad_reserve_refund_and_now():
    lim = cellrate.Limiter(10)
    keyed = cellrate.KeyedLimiter(10)
    for call, error, param in [
        (lambda: lim.reserve(timeout=-1.0), VALUE, "timeout"),
        (lambda: lim.reserve(timeout=math.nan), VALUE, "timeout"),
        (lambda: lim.reserve(timeout="1"), TYPE, "timeout"),
        (lambda: lim.reserve(-1), VALUE, "cost"),
        (lambda: lim.reserve(now=-1.0), VALUE, "now"),
        (lambda: lim.refund(-1), VALUE, "cost"),
        (lambda: lim.refund(1.5), TYPE, "cost"),
        (lambda: keyed.reserve(5), TYPE, "key"),
        (lambda: keyed.reserve("k", timeout=-0.5), VALUE, "timeout"),
        (lambda: keyed.refund(None), TYPE, "key"),
        (lambda: keyed.refund("k", now=math.inf), VALUE, "now"),
        (lambda: lim.allow(now=HORIZON_NS / 1e9), VALUE, "now"),
        (lambda: lim.allow(now=9223372036.5), VALUE, "now"),
    ]:
        with pytest.raises(error) as info:
            call()
        assert info.value.param == param
    assert lim.reserve(timeout=math.inf) == 0.0
    assert lim.allow(now=(HORIZON_NS - 2**40) / 1e9)


def test_mixed_shared_regions_refused():
    path = shared_path("mixed")
    try:
        cellrate.KeyedLimiter(10, 8, algorithm="fixed_window", shared=path)
        for kwargs in (dict(algorithm="sliding_window"), dict(algorithm="gcra"), dict()):
            with pytest.raises(VALUE) as info:
                cellrate.KeyedLimiter(10, 8, shared=path, **kwargs)
            assert info.value.param == "shared" and "algorithm" in str(info.value)
        with pytest.raises(VALUE) as info:
            cellrate.KeyedLimiter(11, 8, algorithm="fixed_window", shared=path, on_change="refuse")
        assert info.value.param == "shared"
        same = cellrate.KeyedLimiter(10, 8, algorithm="fixed_window", shared=path)
        assert same.algorithm == "fixed_window"
    finally:
        os.unlink(path)
