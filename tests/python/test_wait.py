"""Waiting for capacity: wait(), acquire(), RateLimited (docs/design.md §9).

These run on the real clock (waiting is about real time): each limit is chosen
so that the waits are tens of milliseconds, and every timing bound leaves room
for a busy machine in the direction that cannot hide a fault (a waiter that
did not wait is caught by the count of admissions, not by a stopwatch).
"""

import asyncio
import math
import pickle
import sys
import threading
import time
import types

import pytest

import cellrate
from cellrate import _wait
from conftest import core_status, ticks_during

KEY = "the-key"


class OneKey:
    """wait/acquire/peek/allow of one key, for Limiter and KeyedLimiter alike."""

    def __init__(self, limiter, key=None):
        self.limiter = limiter
        self.key = () if key is None else (key,)

    def wait(self, cost=1, **kwargs):
        return self.limiter.wait(*self.key, cost, **kwargs)

    def acquire(self, cost=1, **kwargs):
        return self.limiter.acquire(*self.key, cost, **kwargs)

    def peek(self, cost=1, **kwargs):
        return self.limiter.peek(*self.key, cost, **kwargs)

    def allow(self, cost=1, **kwargs):
        return self.limiter.allow(*self.key, cost, **kwargs)

    def reserve(self, cost=1, **kwargs):
        return self.limiter.reserve(*self.key, cost, **kwargs)


@pytest.fixture(params=["Limiter", "KeyedLimiter"])
def make(request):
    def build(*args, **kwargs):
        if request.param == "Limiter":
            return OneKey(cellrate.Limiter(*args, **kwargs))
        return OneKey(cellrate.KeyedLimiter(*args, **kwargs), KEY)

    return build


def drain(limit):
    """Spends the burst, so that the next unit is one emission interval away."""
    while limit.allow():
        pass


def test_wait_and_acquire_are_methods_of_the_compiled_types():
    import inspect

    for cls, first in ((cellrate.Limiter, []), (cellrate.KeyedLimiter, ["key"])):
        assert cls is getattr(cellrate._cellrate, cls.__name__)
        assert cls.wait.__qualname__ == f"{cls.__name__}.wait"
        assert inspect.iscoroutinefunction(cls.acquire)
        assert list(inspect.signature(cls.wait).parameters) == ["self", *first, "cost", "timeout"]
        if sys.version_info >= (3, 10):  # immutable heap types came in 3.10
            with pytest.raises(TypeError):  # still immutable to everyone else
                cls.wait = None
    with pytest.raises(ValueError):  # never over a compiled method
        cellrate._cellrate._attach_method(cellrate.Limiter, _wait.limiter_wait.__class__(
            _wait.limiter_wait.__code__, {}, "allow"))
    with pytest.raises(TypeError):
        cellrate._cellrate._attach_method(cellrate.Decision, _wait.limiter_wait)


def test_wait_admits_the_burst_then_one_per_interval(make):
    limit = make(20, burst=2)  # T = 50 ms
    admitted = []
    start = time.monotonic()
    for _ in range(5):
        limit.wait()
        admitted.append(time.monotonic() - start)
    for index, at in enumerate(admitted):  # never before its instant (late is fine)
        assert at >= (index - 1) * 0.05 - 0.001


def test_a_timeout_that_cannot_be_met_raises_at_once(make):
    limit = make(2, burst=1)  # T = 500 ms
    drain(limit)
    start = time.monotonic()
    with pytest.raises(cellrate.RateLimited) as caught:
        limit.wait(timeout=0.3)
    assert time.monotonic() - start < 0.25  # it did not sleep (0.3 s) to find out
    error = caught.value
    assert isinstance(error, cellrate.CellrateError)
    assert 0.3 < error.retry_after <= 0.5
    assert error.decision.allowed is False
    assert error.decision.retry_after == error.retry_after
    assert str(error).startswith("rate limited: retry after 0.")
    # the refused waiter reserved nothing
    assert limit.peek().retry_after <= 0.5


def test_a_timeout_that_can_be_met_waits(make):
    limit = make(20, burst=1)
    # Timed from before the drain: its last admission comes after `start`, and
    # the next unit is 50 ms after that one, however slowly the calls run.
    start = time.monotonic()
    drain(limit)
    limit.wait(timeout=1.0)
    assert time.monotonic() - start >= 0.04


@pytest.mark.parametrize("timeout", [None, 0.0, 10.0])
def test_an_unfittable_cost_raises_at_once(make, timeout):
    limit = make(100, burst=2)
    start = time.monotonic()
    with pytest.raises(cellrate.RateLimited) as caught:
        limit.wait(3, timeout=timeout)
    assert time.monotonic() - start < 0.25
    assert math.isinf(caught.value.retry_after)
    assert caught.value.param == "cost"
    assert "never fit" in str(caught.value)
    assert limit.allow(2)  # nothing was spent


@pytest.mark.parametrize(
    "timeout, error",
    [(-1, cellrate.InvalidArgument), (math.nan, cellrate.InvalidArgument),
     ("1", cellrate.InvalidArgumentType), (True, cellrate.InvalidArgumentType)],
)
def test_bad_timeouts_name_the_parameter(make, timeout, error):
    # the core's words for it, as Lua's wait() says them (tests/lua/wait_spec.lua)
    param, message = core_status("E_TIMEOUT")
    limit = make(10)
    with pytest.raises(error) as caught:
        limit.wait(timeout=timeout)
    assert (caught.value.param, str(caught.value)) == (param, message)
    with pytest.raises(error) as caught:
        asyncio.run(limit.acquire(timeout=timeout))
    assert (caught.value.param, str(caught.value)) == (param, message)
    with pytest.raises(error) as caught:
        cellrate.limit(10, timeout=timeout)
    assert (caught.value.param, str(caught.value)) == (param, message)
    assert limit.peek().remaining == 9  # as for a fresh limit: nothing spent


def test_rate_limited_pickles():
    decision = cellrate.Limiter(1).peek(5)
    error = pickle.loads(pickle.dumps(cellrate.RateLimited(decision)))
    assert error.decision == decision and math.isinf(error.retry_after)


def test_an_interrupted_wait_refunds(make, monkeypatch):
    limit = make(2, burst=1)
    drain(limit)
    before = limit.peek().retry_after

    def interrupted(seconds):
        raise KeyboardInterrupt

    monkeypatch.setattr(_wait, "time", types.SimpleNamespace(
        monotonic=time.monotonic, sleep=interrupted))
    with pytest.raises(KeyboardInterrupt):
        limit.wait()
    # without the refund the next unit would be a second interval away
    assert limit.peek().retry_after <= before


def test_wait_releases_the_gil():
    limit = cellrate.Limiter(4, burst=1)  # T = 250 ms
    drain(limit)
    progress = 0
    waiting = threading.Event()
    done = threading.Event()

    def other():
        nonlocal progress
        waiting.wait()
        while not done.is_set():
            progress += 1

    thread = threading.Thread(target=other)
    thread.start()
    try:
        waiting.set()
        before = progress
        limit.wait()
        during = progress - before
    finally:
        done.set()
        thread.join()
    # with the GIL held through the wait, the other thread could not move
    assert during > 1000


def test_acquire_keeps_the_loop_running(make):
    limit = make(4, burst=1)  # T = 250 ms
    drain(limit)

    async def main():
        started = time.monotonic()
        _, ticks = await ticks_during(limit.acquire())
        return ticks, time.monotonic() - started

    ticks, waited = asyncio.run(main())
    assert waited >= 0.2
    assert ticks >= 5  # a blocking wait would have let it tick once at most


def test_acquire_timeout_and_unfittable_raise_at_once(make):
    limit = make(2, burst=1)
    drain(limit)

    async def main():
        start = time.monotonic()
        with pytest.raises(cellrate.RateLimited) as short:
            await limit.acquire(timeout=0.3)
        with pytest.raises(cellrate.RateLimited) as never:
            await limit.acquire(2)
        return time.monotonic() - start, short.value, never.value

    elapsed, short, never = asyncio.run(main())
    assert elapsed < 0.25  # neither slept (0.3 s) to find out
    assert 0.3 < short.retry_after <= 0.5
    assert math.isinf(never.retry_after)


def test_a_cancelled_acquire_gives_its_place_back(make):
    limit = make(2, burst=1)  # T = 500 ms
    drain(limit)
    before = limit.peek().retry_after

    async def main():
        waiter = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0.05)
        assert not waiter.done()
        # a waiter holds a place in its process's line, no units of the limit
        assert limit.peek().retry_after <= before
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        # its place given back: the next waiter takes the turn it had
        started = time.monotonic()
        await limit.acquire()
        return time.monotonic() - started

    waited = asyncio.run(main())
    assert waited <= before
    assert limit.peek().retry_after > 0.4  # the one admitted spent its unit


def test_a_block_holds_the_waiters_already_waiting(make):
    limit = make(20, burst=1)  # T = 50 ms
    drain(limit)

    async def main():
        started = time.monotonic()
        waiters = [asyncio.ensure_future(limit.acquire()) for _ in range(3)]
        await asyncio.sleep(0.01)  # all three in line, the first due in 40 ms
        assert limit.limiter.follow(*limit.key, {"Retry-After": "0.3"}, 429)
        done = []
        for waiter in asyncio.as_completed(waiters):
            await waiter
            done.append(time.monotonic() - started)
        return done

    done = asyncio.run(main())
    assert min(done) >= 0.3  # none started before the block ended
    assert done[-1] - done[0] >= 0.1 - 0.001  # and then one per interval


def test_asyncio_waiters_are_admitted_in_arrival_order(make):
    limit = make(50, burst=1)  # T = 20 ms
    start = time.monotonic()  # before the drain: its unit was admitted after this
    drain(limit)
    order = []

    async def main():
        async def waiter(index):
            await limit.acquire()
            order.append((index, time.monotonic()))

        await asyncio.gather(*(waiter(i) for i in range(8)))

    asyncio.run(main())
    assert [index for index, _ in order] == list(range(8))
    for index, at in order:  # waiter i at least (i + 1) intervals after the drain
        assert at - start >= (index + 1) * 0.02 - 0.001


def test_thread_waiters_are_admitted_in_the_order_they_came(monkeypatch):
    limiter = cellrate.Limiter(20, burst=1)  # T = 50 ms
    drain(limiter)
    waiting = threading.Event()
    real_sleep = time.sleep

    def sleep(seconds):  # a waiter sleeps once it holds its place in line
        waiting.set()
        real_sleep(seconds)

    monkeypatch.setattr(_wait, "time", types.SimpleNamespace(monotonic=time.monotonic,
                                                             sleep=sleep))
    admitted = []

    def waiter(index):
        limiter.wait()
        admitted.append(index)

    threads = []
    for index in range(6):
        waiting.clear()
        threads.append(threading.Thread(target=waiter, args=(index,)))
        threads[-1].start()
        assert waiting.wait(5)  # in line before the next one comes
    for thread in threads:
        thread.join()
    assert admitted == list(range(6))


def test_no_thread_is_starved_and_none_admitted_beyond_the_limit():
    rate, threads, run_s = 100.0, 6, 0.6  # T = 10 ms, burst 1
    limit = cellrate.Limiter(rate, burst=1)
    counts = [0] * threads
    barrier = threading.Barrier(threads + 1)
    times = {}

    def worker(index):
        barrier.wait()
        while time.monotonic() < times["stop"]:
            limit.wait()
            counts[index] += 1

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    times["start"] = time.monotonic()
    times["stop"] = times["start"] + run_s
    barrier.wait()
    for thread in workers:
        thread.join()
    elapsed = time.monotonic() - times["start"]
    # every admission counted: never more than burst + elapsed / T
    assert sum(counts) <= 1 + math.floor(elapsed * rate) + 1
    # FIFO reservations: a waiting thread is at most `threads` intervals from
    # its turn, so each gets its share (a stalled thread loses only the turns
    # it was not waiting for: hence the slack)
    assert min(counts) >= sum(counts) / threads / 2, counts


def test_keys_wait_apart():
    keyed = cellrate.KeyedLimiter(2, burst=1)  # T = 500 ms per key
    keyed.wait("a")
    start = time.monotonic()
    keyed.wait("b")  # another key: no wait behind "a" (0.5 s)
    assert time.monotonic() - start < 0.4
    with pytest.raises(cellrate.RateLimited):
        keyed.wait("a", timeout=0.1)


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
def test_window_algorithms_wait_by_retrying(algorithm):
    period = 0.2
    limit = cellrate.Limiter(2, period, algorithm=algorithm)
    start = time.time()
    stamps = []
    for _ in range(5):
        limit.wait(timeout=2.0)
        stamps.append(time.time())
    # 5 units at 2 per window span three windows: the last one starts at
    # least one period after the first admission
    assert stamps[-1] - start >= period * 0.99


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
def test_window_algorithms_give_up_at_once_when_the_window_is_too_far(make, algorithm):
    # as Lua's wait() (tests/lua/wait_spec.lua); hour-long windows: the next
    # one is (all but surely) more than 0.1 s away
    limit = make(2, 3600, algorithm=algorithm)
    limit.wait(2)
    start = time.monotonic()
    with pytest.raises(cellrate.RateLimited) as late:
        limit.wait(timeout=0.1)
    with pytest.raises(cellrate.RateLimited) as never:
        limit.wait(3)  # above the rate: never, whatever the timeout
    assert time.monotonic() - start < 0.5  # neither slept to find out
    assert late.value.retry_after > 0.1 and math.isinf(never.value.retry_after)
    fresh = make(2, 3600, algorithm=algorithm)
    with pytest.raises(cellrate.RateLimited):
        fresh.wait(3)
    assert fresh.allow(2)  # the refused waits spent nothing


def test_an_anchor_spaces_what_follows_from_a_late_start(make):
    # as tests/lua/wait_spec.lua: the waiter of a reservation for t = 0.1
    # wakes at 0.13; anchored, the next unit is at 0.23 (not 0.2)
    limit = make(10, burst=1)
    assert limit.reserve(now=0.0) == 0.0
    assert limit.reserve(now=0.0) == pytest.approx(0.1, abs=1e-9)
    limit.limiter.anchor(*limit.key, 1, now=0.13)
    assert limit.reserve(now=0.13) == pytest.approx(0.1, abs=1e-9)
    limit.limiter.anchor(*limit.key, 1, now=0.0)  # never less strict
    assert limit.reserve(now=0.13) == pytest.approx(0.2, abs=1e-9)
    with pytest.raises(cellrate.InvalidArgument) as caught:
        limit.limiter.anchor(*limit.key, -1)
    assert caught.value.param == "cost"


def test_a_window_has_nothing_to_anchor():
    limit = cellrate.Limiter(2, 3600, algorithm="fixed_window")
    assert limit.allow(2, now=7200.5) is True
    before = limit.peek(0, now=7200.5)
    limit.anchor(2, now=7200.5)
    assert limit.peek(0, now=7200.5) == before
    assert limit.allow(2, now=10800.0)  # the next window, untouched
