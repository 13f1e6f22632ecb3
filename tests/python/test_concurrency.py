"""Many threads on one limiter: the count of admissions is exact.

The GIL is held around each decision in the default build, so the switch
interval is shortened here to interleave the threads as finely as the
interpreter allows; the lock-free core is what keeps the count exact (the
benchmark's copy built with CELLRATE_RELEASE_GIL runs these same tests truly in
parallel).
"""

import sys
import threading
import time

import pytest

import cellrate

THREADS = 4


@pytest.fixture(autouse=True)
def fine_thread_switching():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def run_threads(work, threads=THREADS):
    """Runs work(index, barrier) on `threads` threads; returns their results."""
    barrier = threading.Barrier(threads)
    results = [None] * threads
    errors = []

    def run(index):
        try:
            results[index] = work(index, barrier)
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
            barrier.abort()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    return results


def single_key(limiter):
    if isinstance(limiter, cellrate.KeyedLimiter):
        return lambda cost=1, now=None: limiter.allow("shared", cost, now=now)
    return lambda cost=1, now=None: limiter.allow(cost, now=now)


@pytest.mark.parametrize("burst", [1, 7, 1000])
@pytest.mark.parametrize("factory", [cellrate.Limiter, cellrate.KeyedLimiter])
def test_frozen_now_admits_exactly_burst(factory, burst):
    allow = single_key(factory(10, burst=burst))
    attempts = burst + 2000

    def hammer(index, barrier):
        barrier.wait()
        return sum(allow(now=50.0) for _ in range(attempts))

    counts = run_threads(hammer)
    assert sum(counts) == burst
    assert not allow(now=50.0)


@pytest.mark.parametrize("factory", [cellrate.Limiter, cellrate.KeyedLimiter])
def test_frozen_now_mixed_costs_never_exceed_burst(factory):
    burst = 500
    allow = single_key(factory(10, burst=burst))

    def hammer(index, barrier):
        cost = index + 1  # 1, 2, 3, 4
        barrier.wait()
        return cost * sum(allow(cost, now=50.0) for _ in range(600))

    units = sum(run_threads(hammer))
    # cost-1 requests keep coming until nothing is left, so all is spent
    assert units == burst


def test_first_admission_of_a_new_key_is_claimed_once():
    keyed = cellrate.KeyedLimiter(1, 3600, burst=1, capacity=10_000)
    rounds = 200

    def race(index, barrier):
        won = []
        for r in range(rounds):
            barrier.wait()
            if keyed.allow(f"fresh-{r}", now=9.0):
                won.append(r)
        return won

    winners = sorted(r for won in run_threads(race) for r in won)
    assert winners == list(range(rounds))  # exactly one thread per key
    assert len(keyed) == rounds


@pytest.mark.parametrize("factory", [cellrate.Limiter, cellrate.KeyedLimiter])
def test_real_clock_stays_within_the_bound(factory):
    rate, burst = 2000.0, 20
    allow = single_key(factory(rate, burst=burst))
    duration = 0.5

    refilled = threading.Event()  # an admission beyond the burst, by any thread
    lock, total = threading.Lock(), [0]

    def hammer(index, barrier):
        barrier.wait()
        admitted = 0
        end = time.monotonic() + duration
        deadline = end + 30  # a machine that stalled them through the run: on until one
        while time.monotonic() < end or not refilled.is_set() and time.monotonic() < deadline:
            if allow():
                admitted += 1
                with lock:
                    total[0] += 1
                    if total[0] > burst:
                        refilled.set()
        return admitted

    start = time.monotonic()  # before any decision
    admitted = sum(run_threads(hammer))
    elapsed = time.monotonic() - start  # after every decision
    # docs/design.md §1: in any interval d, at most burst + floor(d / T)
    assert admitted <= burst + rate * elapsed + 1
    assert admitted > burst  # the key refilled while being hammered


def test_key_flood_keeps_the_table_bounded_and_counts_evictions():
    capacity = 1000
    keyed = cellrate.KeyedLimiter(1, 3600, burst=1, capacity=capacity)
    keys = 10 * capacity
    now = 100.0

    def flood(index, barrier):
        barrier.wait()
        return sum(keyed.allow(f"flood-{index}-{i}", now=now) for i in range(keys // THREADS))

    assert sum(run_threads(flood)) == keys  # every new key is idle: admitted
    held = len(keyed)
    assert capacity <= held <= 2 * capacity
    # At a frozen now every key holding a slot is live, so each admission of
    # a new key either took a free slot or evicted a live key.
    assert keyed.evictions == keys - held

    # Once every TAT has passed, slots are reused without evicting anyone.
    evicted = keyed.evictions
    later = now + 7200.0
    assert all(keyed.allow(f"later-{i}", now=later) for i in range(capacity // 10))
    assert keyed.evictions == evicted
    assert len(keyed) <= 2 * capacity


def test_evicted_keys_are_counted_one_by_one():
    # the smallest table fills after a few keys; from then on each new key
    # evicts exactly one live key
    keyed = cellrate.KeyedLimiter(1, 3600, burst=1, capacity=1)
    for i in range(100):
        assert keyed.allow(f"k{i}", now=1.0)
        assert keyed.evictions == i + 1 - len(keyed)
    assert keyed.evictions > 0


def test_shared_between_threads_that_also_reset():
    # reset, peek and len racing with decisions: no crash, no deadlock, and
    # state stays consistent
    keyed = cellrate.KeyedLimiter(100, burst=10, capacity=64)
    limiter = cellrate.Limiter(100, burst=10)

    def mixed(index, barrier):
        barrier.wait()
        for i in range(3000):
            key = f"k{i % 97}"
            keyed.allow(key)
            keyed.peek(key, 2)
            limiter.allow()
            if i % 50 == index:
                keyed.reset(key)
                limiter.reset()
            if i % 500 == 0:
                assert len(keyed) <= 2 * 64
        return True

    assert all(run_threads(mixed))
    keyed.reset("k1")
    assert keyed.check("k1", 10, now=time.monotonic()).allowed


@pytest.mark.parametrize("keyed", [False, True], ids=["Limiter", "KeyedLimiter"])
def test_live_change_back_and_forth_never_exceeds_the_piecewise_bound(keyed):
    """4 threads decide while another changes the limit back and forth at
    stepped instants, mid-drain; per key, the admissions never exceed a greedy
    replay: all that fits under the old limit, carried, then all that fits
    under the new one (docs/design.md §4)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "model"))
    import gcra_model as model

    limits = [(1000.0, 50, model.Limit(10**6, 50)), (1000.0 / 3, 8, model.Limit(3 * 10**6, 8))]
    keys = ["a", "b", "c"] if keyed else [None]
    if keyed:
        lim = cellrate.KeyedLimiter(limits[0][0], burst=limits[0][1], capacity=64)
        allow = lambda key, now: lim.allow(key, now=now)  # noqa: E731
    else:
        lim = cellrate.Limiter(limits[0][0], burst=limits[0][1])
        allow = lambda key, now: lim.allow(now=now)  # noqa: E731
    step = 0.05
    now = [0.0]
    done = threading.Event()
    admitted = {key: [0] * 4 for key in keys}
    attempts = [0]

    def decider(i: int) -> None:
        n = 0
        while not done.is_set():
            key = keys[n % len(keys)]
            admitted[key][i] += allow(key, now[0])
            attempts[0] += 1
            n += 1

    threads = [threading.Thread(target=decider, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    bound, tat = 0, 0
    for round_ in range(100):
        rate, burst, limit = limits[round_ % 2]
        t_ns = round_ * 50 * 10**6
        now[0] = round_ * step  # the deciders admit under the old limit while it changes
        if round_:
            seen = attempts[0]
            while attempts[0] - seen < 4:
                time.sleep(0)
            lim.reconfigure(rate, burst=burst, now=round_ * step)
            old = limits[(round_ + 1) % 2][2]
            while (d := model.decide(old, tat, t_ns, 1)).allowed:
                tat = d.tat_after
                bound += 1
            tat = model.carry(old, limit, tat, t_ns)
        while (d := model.decide(limit, tat, t_ns, 1)).allowed:
            tat = d.tat_after
            bound += 1
        seen = attempts[0]
        while attempts[0] - seen < 20:
            time.sleep(0)
    done.set()
    for t in threads:
        t.join()
    for key in keys:  # every key sees the same changes at the same instants
        assert 0 < sum(admitted[key]) <= bound, (key, sum(admitted[key]), bound)
