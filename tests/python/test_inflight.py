"""cellrate.Concurrency and @cellrate.concurrent: work in flight, counted.

The number held at once is counted by the tests themselves (a counter moved
by the holders), never read back from the limiter.
"""

import asyncio
import multiprocessing
import os
import random
import signal
import sys
import threading
import time

import pytest

import cellrate
from conftest import reap

HOLDERS = 8
CYCLES = 10_000
LIMIT = 5


@pytest.fixture
def fine_thread_switching():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


# ---------------------------------------------------------------------------
# Bad input: the core's words, naming the parameter


@pytest.mark.parametrize("limit", [0, -1, 65537])
def test_limit_below_one_or_too_large(limit):
    with pytest.raises(cellrate.InvalidArgument, match=r"^limit must be an integer >= 1") as e:
        cellrate.Concurrency(limit)
    assert e.value.param == "limit"


@pytest.mark.parametrize("limit", ["5", 2.5, None, True])
def test_limit_of_another_type(limit):
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.Concurrency(limit)
    assert e.value.param == "limit"


@pytest.mark.parametrize("lease", [0, -1.0, float("nan"), float("inf"), 1e300])
def test_lease_not_positive(lease):
    with pytest.raises(cellrate.InvalidArgument, match=r"^lease must be a number of seconds > 0"):
        cellrate.Concurrency(2, lease=lease)


def test_lease_of_another_type():
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.Concurrency(2, lease="30")
    assert e.value.param == "lease"


@pytest.mark.parametrize("peak", [1, 0, "yes", 1.0])
def test_peak_not_a_bool(peak):
    with pytest.raises(cellrate.InvalidArgumentType, match=r"^peak must be a boolean") as e:
        cellrate.Concurrency(2, peak=peak)
    assert e.value.param == "peak"


def test_peak_none_is_absent():
    assert cellrate.Concurrency(2, peak=None).peak is False  # None is an absent option


@pytest.mark.parametrize("cost", [0, -1])
def test_cost_below_one(cost):
    c = cellrate.Concurrency(2)
    with pytest.raises(cellrate.InvalidArgument, match=r"^cost must be an integer >= 1") as e:
        c.try_acquire(cost=cost)
    assert e.value.param == "cost"
    with pytest.raises(cellrate.InvalidArgument, match=r"^cost must be an integer >= 1"):
        with c.hold(cost=cost):
            pass
    assert c.in_flight() == 0


def test_capacity_and_keys():
    with pytest.raises(cellrate.InvalidArgument) as e:
        cellrate.Concurrency(2, capacity=0)
    assert e.value.param == "capacity"
    with pytest.raises(cellrate.InvalidArgument, match="has no keys") as e:
        cellrate.Concurrency(2).try_acquire("client")
    assert e.value.param == "key"
    with pytest.raises(cellrate.InvalidArgument, match="^key must be a string") as e:
        cellrate.Concurrency(2, capacity=10).try_acquire()
    assert e.value.param == "key"
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.Concurrency(2, capacity=10).try_acquire(42)
    assert e.value.param == "key"


def test_timeout_below_zero():
    with pytest.raises(cellrate.InvalidArgument) as e:
        cellrate.Concurrency(2).hold(timeout=-1)
    assert e.value.param == "timeout"


def test_slots_come_only_from_a_limit():
    with pytest.raises(TypeError):
        cellrate.Slot()


# ---------------------------------------------------------------------------
# Counts


def test_acquire_and_release_exactly():
    c = cellrate.Concurrency(3)
    two = c.try_acquire(cost=2)
    assert two is not None and two.cost == 2 and two.concurrency is c
    assert c.try_acquire(cost=2) is None
    one = c.try_acquire()
    assert c.in_flight() == 3
    assert two.release() is True
    assert two.release() is False  # idempotent: a second release is a no-op
    assert c.in_flight() == 1
    assert one.release() is True and one.release() is False
    assert c.in_flight() == 0  # never below zero
    assert c.try_acquire(cost=4) is None  # never fits
    assert repr(c) == "Concurrency(limit=3, lease=None)"


def test_keys_are_absent_when_idle():
    c = cellrate.Concurrency(1, capacity=2)
    slots = [c.try_acquire(f"key-{k}") for k in range(8)]  # 8 places for capacity 2
    assert all(slots)
    assert c.try_acquire("key-8") is None  # full of keys holding units
    assert slots[3].release()
    assert c.in_flight("key-3") == 0
    late = c.try_acquire("key-8")
    assert late is not None and c.in_flight("key-8") == 1
    assert slots[3].release() is False  # its gauge is key-8's now: nothing taken from it
    assert c.in_flight("key-8") == 1 and c.in_flight(b"key-0") == 1


def test_lease_reclaims_a_hung_holding():
    for _ in range(100):  # a pause as long as the lease before the second try: again
        c = cellrate.Concurrency(1, lease=0.05)
        start = time.monotonic()
        hung = c.try_acquire()
        second = c.try_acquire()
        if time.monotonic() - start < 0.05:
            break
    assert second is None  # within its lease the hung holding still counts
    time.sleep(0.1)
    fresh = c.try_acquire()
    assert fresh is not None
    assert hung.release() is False  # reclaimed: its late release gives nothing back
    assert c.in_flight() == 1
    assert c.lease == pytest.approx(0.05)


def test_hold_times_out_and_never_fits():
    c = cellrate.Concurrency(1)
    with c.hold():
        with pytest.raises(cellrate.RateLimited, match="none free within 0.01 s") as e:
            with c.hold(timeout=0.01):
                pass
        assert e.value.decision.allowed is False
    with pytest.raises(cellrate.RateLimited, match="can never fit") as e:
        with c.hold(cost=2):
            pass
    assert e.value.param == "cost" and e.value.retry_after == float("inf")
    assert c.in_flight() == 0


def test_hold_releases_on_an_exception():
    c = cellrate.Concurrency(1)
    with pytest.raises(KeyError):
        with c.hold():
            raise KeyError("boom")
    assert c.in_flight() == 0


# ---------------------------------------------------------------------------
# Threads and processes: never more than the limit, counted here


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.lost = 0

    def enter(self, units):
        with self.lock:
            self.now += units
            self.most = max(self.most, self.now)

    def leave(self, units):
        with self.lock:
            self.now -= units


def test_threads_never_hold_more_than_the_limit(fine_thread_switching):
    c = cellrate.Concurrency(LIMIT)
    counter = Counter()
    start = threading.Barrier(HOLDERS)

    def holder():
        start.wait()
        for i in range(CYCLES):
            units = 1 + i % 2
            with c.hold(cost=units) as slot:
                counter.enter(units)
                if i % 64 == 0:
                    time.sleep(0)
                counter.leave(units)
            if slot.release():  # the block's release landed: this one has nothing left
                counter.lost += 1

    threads = [threading.Thread(target=holder) for _ in range(HOLDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.most <= LIMIT
    assert counter.most >= 2  # they did overlap
    assert counter.lost == 0
    assert c.in_flight() == 0


def _process_holder(path, now, most, lock, cycles):
    c = cellrate.Concurrency(LIMIT, shared=path)
    for _ in range(cycles):
        slot = c.try_acquire()
        while slot is None:
            time.sleep(0)
            slot = c.try_acquire()
        with lock:
            now.value += 1
            most.value = max(most.value, now.value)
        with lock:
            now.value -= 1
        if not slot.release():
            os._exit(5)  # a release that did not land
    os._exit(0)


def test_processes_never_hold_more_than_the_limit(tmp_path):
    path = str(tmp_path / "processes")
    ctx = multiprocessing.get_context("fork")
    now, most, lock = ctx.Value("i", 0, lock=False), ctx.Value("i", 0, lock=False), ctx.Lock()
    workers = [ctx.Process(target=_process_holder, args=(path, now, most, lock, CYCLES), daemon=True)
               for _ in range(HOLDERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert [worker.exitcode for worker in workers] == [0] * HOLDERS
    assert 1 <= most.value <= LIMIT
    assert cellrate.Concurrency(LIMIT, shared=path).in_flight() == 0


def _storm_holder(path, key, control, parked):
    c = cellrate.Concurrency(LIMIT, capacity=8, shared=path) if key else \
        cellrate.Concurrency(LIMIT, shared=path)
    while control.value == 0:
        slot = c._wait(key, 1, 0.001)
        if slot is not None:
            slot.release()
    slot = c._wait(key, 1, None)
    with parked.get_lock():
        parked.value += 1
    while control.value != 2:
        time.sleep(0.001)
    os._exit(0 if slot.release() else 4)  # its holding was still its own


@pytest.mark.on_ends("the shared region's recovery from holders killed by the hundred, "
                     "the core's and not the interpreter's")
@pytest.mark.parametrize("key", [None, "client"])
def test_sigkill_holders_leak_nothing(tmp_path, key):
    path = str(tmp_path / "storm")
    ctx = multiprocessing.get_context("fork")
    control, parked = ctx.Value("i", 0, lock=False), ctx.Value("i", 0)  # no lock a kill could keep
    rng = random.Random(20)

    def spawn():
        worker = ctx.Process(target=_storm_holder, args=(path, key, control, parked), daemon=True)
        worker.start()
        return worker

    workers = [spawn() for _ in range(4)]
    for _ in range(200):
        time.sleep(rng.uniform(0, 0.004))
        index = rng.randrange(len(workers))
        os.kill(workers[index].pid, signal.SIGKILL)
        workers[index].join()
        workers[index] = spawn()
    for worker in workers[:2]:  # two die, two live on and park one unit each
        os.kill(worker.pid, signal.SIGKILL)
        worker.join()
    control.value = 1
    deadline = time.monotonic() + 120
    while parked.value < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert parked.value == 2, "the two living holders did not get their unit within 120 s"

    c = cellrate.Concurrency(LIMIT, capacity=8, shared=path) if key else \
        cellrate.Concurrency(LIMIT, shared=path)
    assert c.in_flight(key) == 2  # the living holders' units, and only theirs
    assert c.stats()["in_flight"] == 2  # counted in the cells: exact however the holders died
    mine = [c.try_acquire(key) for _ in range(LIMIT - 2)]
    assert all(mine) and c.try_acquire(key) is None  # the rest of the limit, no more
    os.kill(workers[2].pid, signal.SIGKILL)  # a holder dies while the limit is full
    workers[2].join()
    late = c.try_acquire(key)
    assert late is not None  # the next acquire that finds it full has the dead one's unit
    control.value = 2
    workers[3].join(120)
    assert workers[3].exitcode == 0
    assert all(slot.release() for slot in mine + [late])
    assert c.in_flight(key) == 0


def test_shared_region_of_another_limit(tmp_path):
    path = str(tmp_path / "region")
    cellrate.Concurrency(3, shared=path)
    with pytest.raises(cellrate.InvalidArgument, match="another limit, lease or peak") as e:
        cellrate.Concurrency(4, shared=path)
    assert e.value.param == "shared"


@pytest.mark.parametrize("made_with", [False, True])
def test_shared_region_of_another_peak_setting(tmp_path, made_with):
    path = str(tmp_path / "region")
    first = cellrate.Concurrency(3, shared=path, peak=made_with)
    with pytest.raises(cellrate.InvalidArgument, match="another limit, lease or peak") as e:
        cellrate.Concurrency(3, shared=path, peak=not made_with)
    assert e.value.param == "shared" and path in str(e.value)
    again = cellrate.Concurrency(3, shared=path, peak=made_with)  # its own setting opens it
    assert again.peak == first.peak == made_with


def _dead_pid():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    reap(pid)
    return pid


@pytest.mark.parametrize("peak", [False, True])
@pytest.mark.parametrize("capacity", [None, 8])
def test_stats_in_flight_counts_the_cells_of_a_sigkilled_holder(tmp_path, peak, capacity):
    path = str(tmp_path / "region")
    key = None if capacity is None else "client"
    c = cellrate.Concurrency(4, capacity=capacity, shared=path, peak=peak)
    mine = c.try_acquire(key)
    pid = os.fork()
    if pid == 0:  # holds 2 units and dies holding them
        if c.try_acquire(key, cost=2) is None:
            os._exit(3)
        os.kill(os.getpid(), signal.SIGKILL)
    status = reap(pid)
    assert os.WIFSIGNALED(status), f"the holder acquired nothing (exit status {status})"
    assert c.stats()["in_flight"] == 3  # the dead holder's cells are held until reclaimed
    assert c.in_flight(key) == 1  # reclaims them
    assert (c.stats()["in_flight"], c.stats()["reclaimed"]) == (1, 2)
    mine.release()
    assert c.stats()["in_flight"] == 0


def test_stats_in_flight_counts_a_holder_killed_before_it_counted(tmp_path):
    """A holder killed right after its compare-and-swap, before any count:
    a cell naming a dead process, written into the region (one gauge: the
    file's last 16 * (limit + 1) bytes, its head, then its cells)."""
    path = str(tmp_path / "region")
    c = cellrate.Concurrency(4, shared=path)
    with open(path, "r+b") as region:
        region.seek(-16 * 4, os.SEEK_END)  # the first of its 4 cells
        region.write((_dead_pid() << 32 | 1).to_bytes(8, "little") + bytes(8))
    assert c.stats()["in_flight"] == 1 and c.stats()["acquired"] == 0
    assert c.in_flight() == 0
    assert (c.stats()["in_flight"], c.stats()["reclaimed"]) == (0, 1)


# ---------------------------------------------------------------------------
# asyncio


def test_async_hold_waits_without_blocking_the_loop():
    c = cellrate.Concurrency(1)
    ticks = []
    order = []

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(1)
            await asyncio.sleep(0)

    async def first(release):
        async with c.hold():
            order.append("first in")
            await release.wait()
        order.append("first out")

    async def second():
        async with c.hold(timeout=5):
            order.append("second in")
            assert c.in_flight() == 1

    async def main():
        stop, release = asyncio.Event(), asyncio.Event()
        tick = asyncio.ensure_future(ticker(stop))
        holder = asyncio.ensure_future(first(release))
        await asyncio.sleep(0)
        waiter = asyncio.ensure_future(second())
        before = len(ticks)
        await asyncio.sleep(0.01)
        assert len(ticks) > before  # the loop ran while the waiter waited
        assert order == ["first in"]
        release.set()
        await asyncio.gather(holder, waiter)
        stop.set()
        await tick

    asyncio.run(main())
    assert order == ["first in", "first out", "second in"]
    assert c.in_flight() == 0


def test_a_cancelled_async_waiter_holds_nothing():
    c = cellrate.Concurrency(1)

    async def main():
        held = c.try_acquire()
        waiter = asyncio.ensure_future(c.hold().__aenter__())
        await asyncio.sleep(0.005)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert held.release()
        assert c.in_flight() == 0

    asyncio.run(main())


# ---------------------------------------------------------------------------
# @cellrate.concurrent


def test_decorated_function_holds_while_it_runs():
    @cellrate.concurrent(1, block=False)
    def work():
        assert work.concurrency.in_flight() == 1
        with pytest.raises(cellrate.RateLimited):
            work()  # a second call while the first runs: refused at once
        return "done"

    assert work() == "done"
    assert work.__name__ == "work"
    assert work.concurrency.in_flight() == 0


def test_decorated_async_function():
    import inspect

    @cellrate.concurrent(2)
    async def work():
        return work.concurrency.in_flight()

    assert inspect.iscoroutinefunction(work)
    assert asyncio.run(work()) == 1
    assert work.concurrency.in_flight() == 0


def test_decorated_generator_holds_for_its_iteration():
    shared = cellrate.Concurrency(1)

    @cellrate.concurrent(concurrency=shared)
    def numbers():
        yield shared.in_flight()
        yield shared.in_flight()

    gen = numbers()
    assert shared.in_flight() == 0  # made, not started
    assert next(gen) == 1
    assert shared.in_flight() == 1
    gen.close()
    assert shared.in_flight() == 0
    assert list(numbers()) == [1, 1]
    assert shared.in_flight() == 0


def test_decorated_async_generator():
    @cellrate.concurrent(1, key=lambda name: name, capacity=4)
    async def letters(name):
        yield letters.concurrency.in_flight(name)

    async def main():
        return [x async for x in letters("a")]

    assert asyncio.run(main()) == [1]
    assert letters.concurrency.in_flight("a") == 0


def test_decorator_bad_input():
    with pytest.raises(cellrate.InvalidArgument) as e:
        cellrate.concurrent(0)
    assert e.value.param == "limit"
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.concurrent()
    assert e.value.param == "limit"
    with pytest.raises(cellrate.InvalidArgumentType) as e:
        cellrate.concurrent(2, concurrency=cellrate.Concurrency(2))
    assert e.value.param == "concurrency"
