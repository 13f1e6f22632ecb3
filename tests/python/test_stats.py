"""Counters: stats() and reset_stats() count exactly what was decided, in one
process, across threads, and across Python and Lua processes sharing a region."""

import os
import pathlib
import random
import shutil
import subprocess
import threading

import pytest

import cellrate
from conftest import reap, run_forked

REPO = pathlib.Path(__file__).resolve().parents[2]
LUA_MODULE = REPO / "build" / "lua5.4" / "cellrate.so"
FROZEN = 5000.0
RATE_KEYS = ("admitted", "refused", "units_admitted", "units_refused", "units_refunded",
             "unfittable", "would_refuse", "evicted", "bans")
GAUGE_KEYS = ("acquired", "refused", "units_acquired", "units_refused", "released", "reclaimed",
              "in_flight", "peak", "evicted")


def expect(**counts):
    return {key: counts.get(key, 0) for key in RATE_KEYS}


@pytest.mark.parametrize("shared", [False, True])
def test_what_each_call_counts(region_dir, shared):
    opts = {"shared": region_dir / "limiter"} if shared else {}
    lim = cellrate.Limiter(1, burst=5, **opts)
    assert lim.stats() == expect()
    assert [lim.allow(now=FROZEN) for _ in range(3)] == [True] * 3
    assert not lim.allow(3, now=FROZEN)          # refused: 2 left
    assert not lim.check(6, now=FROZEN).allowed  # refused and unfittable (burst 5)
    lim.peek(1, now=FROZEN)                      # counts nothing
    assert lim.take(5, now=FROZEN) == 2          # admitted, the units taken
    assert lim.take(5, now=FROZEN) == 0          # refused: max_cost units
    lim.charge(4, now=FROZEN)                    # admitted: charged units, in debt
    lim.refund(1, now=FROZEN)                    # units_refunded: what it gave back
    assert lim.stats() == expect(admitted=5, refused=3, units_admitted=3 + 2 + 4,
                                 units_refused=3 + 6 + 5, units_refunded=1, unfittable=1)
    lim._would_refuse(3)  # what a dry run does to the refusal it let through
    assert lim.stats() == expect(admitted=5, refused=2, units_admitted=9, units_refused=11,
                                 units_refunded=1, unfittable=1, would_refuse=1)
    lim.reset_stats()
    assert lim.stats() == expect()
    assert not lim.allow(now=FROZEN)
    assert lim.stats() == expect(refused=1, units_refused=1)


@pytest.mark.parametrize("shared", [False, True])
def test_counters_count_what_was_committed_and_never_fall(region_dir, shared):
    """A refund counts what it gave back (units_refunded), never taking units_admitted
    below what was admitted; a clipped charge counts what it committed; a counter
    saturates at 2**63 - 1 rather than wrap."""
    opts = (lambda name: {"shared": region_dir / name}) if shared else (lambda name: {})
    lim = cellrate.Limiter("10/s", burst=10, **opts("limiter"))
    lim.refund(5, now=FROZEN)  # a fresh key holds nothing to give back
    keyed = cellrate.KeyedLimiter("10/s", burst=10, **opts("keyed"))
    keyed.refund("a", 3, now=FROZEN)
    assert lim.stats() == keyed.stats() == expect()
    assert lim.check(4, now=FROZEN).allowed
    lim.refund(10, now=FROZEN)  # only the 4 taken come back
    assert lim.stats() == expect(admitted=1, units_admitted=4, units_refunded=4)
    lim.reset_stats()
    for _ in range(3):  # each clipped: 20 units (burst + max_debt), then none
        assert lim.charge(2**62, now=FROZEN).clipped
    assert lim.stats() == expect(admitted=3, units_admitted=20)
    for _ in range(3):  # three refusals of 2**62 - 1 units each: saturated, not wrapped
        assert not lim.check(2**62 - 1, now=FROZEN).allowed
    stats = lim.stats()
    assert stats["units_refused"] == 2**63 - 1 and stats["refused"] == 3
    assert all(0 <= value <= 2**63 - 1 for value in stats.values())


@pytest.mark.parametrize("shared", [False, True])
def test_keyed_counts_and_evictions(region_dir, shared):
    opts = {"shared": region_dir / "keyed"} if shared else {}
    keyed = cellrate.KeyedLimiter("1/hour", burst=2, capacity=4, **opts)
    for key in ("a", "b"):
        assert [keyed.allow(key, now=FROZEN) for _ in range(3)] == [True, True, False]
    keyed.peek("a", now=FROZEN)
    assert keyed.stats() == expect(admitted=4, refused=2, units_admitted=4, units_refused=2)
    for i in range(200):  # more live keys than the table holds: some are evicted
        keyed.allow(f"k{i}", now=FROZEN)
    stats = keyed.stats()
    assert stats["admitted"] == 204 and stats["evicted"] == keyed.evictions > 0
    keyed.reset_stats()
    assert keyed.stats() == expect()


def test_check_all_counts_one_refusal_at_the_item_it_returns():
    wide = cellrate.Limiter(1, burst=10)
    narrow = cellrate.KeyedLimiter(1, burst=1, capacity=10)
    assert cellrate.check_all([wide, (narrow, "k")], now=FROZEN).allowed
    refused = cellrate.check_all([wide, (narrow, "k")], now=FROZEN)
    assert not refused.allowed and refused.limit == 1
    assert wide.stats() == expect(admitted=1, units_admitted=1)
    assert narrow.stats() == expect(admitted=1, refused=1, units_admitted=1, units_refused=1)
    # refused at the first item's peek: the last commits nothing, counts nothing
    refused = cellrate.check_all([(narrow, "k"), wide], now=FROZEN)
    assert not refused.allowed
    assert wide.stats()["admitted"] == 1 and narrow.stats()["refused"] == 2
    cellrate.check_all([(narrow, "k"), wide], now=FROZEN, _dry_run=True)
    assert narrow.stats() == expect(admitted=1, refused=2, units_admitted=1, units_refused=2,
                                    would_refuse=1)


def test_concurrency_counts():
    c = cellrate.Concurrency(3, peak=True)
    assert c.peak and repr(c) == "Concurrency(limit=3, lease=None, peak=True)"
    assert c.stats() == {key: 0 for key in GAUGE_KEYS}
    slots = [c.try_acquire(cost=1), c.try_acquire(cost=2)]
    assert c.try_acquire() is None and c.try_acquire(cost=4) is None
    slots[0].release()
    slots[0].release()  # idempotent: counted once
    assert c.stats() == dict(acquired=2, refused=2, units_acquired=3, units_refused=5, released=1,
                             reclaimed=0, in_flight=2, peak=3, evicted=0)
    c.reset_stats()
    assert c.stats() == dict({key: 0 for key in GAUGE_KEYS}, in_flight=2, peak=2)
    slots[1].release()
    assert c.stats()["in_flight"] == 0


@pytest.mark.parametrize("shared", [False, True])
def test_the_peak_is_opt_in(region_dir, shared):
    one = cellrate.Concurrency(3, shared=region_dir / "one" if shared else None)
    keyed = cellrate.Concurrency(2, capacity=8, shared=region_dir / "keyed" if shared else None)
    assert not one.peak and "peak" not in repr(one)
    assert one.stats() == dict({key: 0 for key in GAUGE_KEYS}, peak=None)
    slots = [one.try_acquire(cost=2), one.try_acquire()]
    assert one.try_acquire() is None
    slots[0].release()
    assert one.stats() == dict({key: 0 for key in GAUGE_KEYS}, acquired=2, refused=1,
                               units_acquired=3, units_refused=1, released=2, in_flight=1,
                               peak=None)
    held = [keyed.try_acquire(key, cost=2) for key in "abc"] + [keyed.try_acquire("d")]
    assert all(held)
    held[1].release()
    assert (keyed.stats()["in_flight"], keyed.stats()["peak"]) == (5, None)  # the whole table
    one.reset_stats()
    assert one.stats() == dict({key: 0 for key in GAUGE_KEYS}, in_flight=1, peak=None)


def test_four_threads_count_exactly():
    lim = cellrate.Limiter(1, burst=5000)
    keyed = cellrate.KeyedLimiter(1, burst=50, capacity=1000)
    mine = [[0, 0, 0, 0] for _ in range(4)]  # limiter admitted, refused; keyed admitted, refused
    start = threading.Barrier(4)

    def run(t):
        rng = random.Random(t)
        start.wait()
        for _ in range(3000):
            cost = rng.randint(1, 3)
            if lim.allow(cost, now=FROZEN):
                mine[t][0] += cost
            else:
                mine[t][1] += cost
            if keyed.allow(f"k{rng.randrange(20)}", now=FROZEN):
                mine[t][2] += 1
            else:
                mine[t][3] += 1

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats, kstats = lim.stats(), keyed.stats()
    assert stats["units_admitted"] == sum(m[0] for m in mine) == 5000
    assert stats["units_refused"] == sum(m[1] for m in mine)
    assert stats["admitted"] + stats["refused"] == 12000
    assert kstats["admitted"] == sum(m[2] for m in mine) == 20 * 50
    assert kstats["refused"] == sum(m[3] for m in mine)


def count_in_process(path, seed, queue):
    keyed = cellrate.KeyedLimiter(1, burst=40, capacity=64, shared=path)
    rng = random.Random(seed)
    admitted = refused = 0
    for _ in range(2000):
        if keyed.allow(f"k{rng.randrange(16)}", now=FROZEN):
            admitted += 1
        else:
            refused += 1
    queue.put((admitted, refused))


LUA_COUNT = """
package.cpath = "{cpath}/?.so;" .. package.cpath
local cellrate = require "cellrate"
local keyed = cellrate.keyed(1, {{ burst = 40, capacity = 64, shared = "{path}" }})
math.randomseed({seed})
local admitted, refused = 0, 0
for _ = 1, 2000 do
    if keyed:allow("k" .. math.random(0, 15), 1, {now}) then
        admitted = admitted + 1
    else
        refused = refused + 1
    end
end
local s = keyed:stats()
print(admitted, refused, s.admitted + s.refused <= 8000 and "ok" or "over")
"""


@pytest.mark.skipif(shutil.which("lua5.4") is None, reason="lua5.4 is not installed")
def test_python_and_lua_processes_count_the_hosts_totals(region_dir):
    assert LUA_MODULE.exists(), "build the Lua module first (make lua)"
    path = str(region_dir / "counted")
    mine = cellrate.KeyedLimiter(1, burst=40, capacity=64, shared=path)
    lua = [subprocess.Popen(["lua5.4", "-e", LUA_COUNT.format(
        cpath=LUA_MODULE.parent, path=path, seed=seed, now=FROZEN)], stdout=subprocess.PIPE,
        text=True) for seed in (1, 2)]
    counts = run_forked(count_in_process, [(path, 3), (path, 4)])
    for proc in lua:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        admitted, refused, bound = out.split()
        assert bound == "ok"
        counts.append((int(admitted), int(refused)))
    stats = mine.stats()
    assert stats["admitted"] == sum(a for a, _ in counts) == 16 * 40
    assert stats["refused"] == sum(r for _, r in counts) == 4 * 2000 - 16 * 40
    assert stats["units_admitted"] == stats["admitted"]
    # every process reads the region's totals, and a reset is the region's
    again = cellrate.KeyedLimiter(1, burst=40, capacity=64, shared=path)
    assert again.stats() == stats
    again.reset_stats()
    assert mine.stats() == expect()


def test_an_opening_after_many_others_still_counts(region_dir):
    # more openings than the region has lanes: the later ones share the overflow
    path = region_dir / "lanes"
    many = [cellrate.Limiter(1, burst=100, shared=path) for _ in range(12)]
    for lim in many:
        assert lim.allow(now=FROZEN)
    assert many[0].stats()["admitted"] == 12
    del many
    assert cellrate.Limiter(1, burst=100, shared=path).stats()["admitted"] == 12


def test_inspect_region_reads_each_kind_without_changing_it(region_dir):
    from cellrate._cellrate import inspect_region
    keyed = cellrate.KeyedLimiter("100/minute", capacity=50, shared=region_dir / "keyed")
    keyed.allow("a", now=FROZEN)
    keyed.allow("b", 200, now=FROZEN)
    before = (region_dir / "keyed").read_bytes()
    mtime = os.stat(region_dir / "keyed").st_mtime_ns
    info = inspect_region(region_dir / "keyed")
    assert (region_dir / "keyed").read_bytes() == before
    assert os.stat(region_dir / "keyed").st_mtime_ns == mtime
    assert info == {
        "layout_version": 12, "kind": "keyed", "algorithm": "gcra",
        "limit": repr(keyed), "rate": 100.0, "period": 60.0, "burst": 100,
        "max_in_flight": None, "lease": None, "peak": None, "capacity": 50, "live_keys": 1, "generation": 0,
        "size": len(before), "this_boot": True, "penalty": None, "banned": [],
        "stats": keyed.stats()}
    assert info["stats"]["unfittable"] == 1

    lim = cellrate.Limiter(5, algorithm="fixed_window", shared=str(region_dir / "limiter"))
    lim.reconfigure(6)
    info = inspect_region(str(region_dir / "limiter"))
    assert (info["kind"], info["algorithm"], info["limit"], info["generation"]) == (
        "limiter", "fixed_window", repr(lim), 1)
    assert (info["burst"], info["capacity"], info["live_keys"]) == (6, None, 0)

    c = cellrate.Concurrency(4, capacity=10, lease=30, shared=region_dir / "concurrency")
    slot = c.try_acquire("x", cost=2)
    info = inspect_region(os.fsencode(region_dir / "concurrency"))
    assert (info["kind"], info["algorithm"], info["max_in_flight"], info["lease"]) == (
        "concurrency", None, 4, 30.0)
    assert info["live_keys"] == 1 and info["stats"] == c.stats()
    assert (info["stats"]["in_flight"], info["peak"], info["stats"]["peak"]) == (2, False, None)
    slot.release()
    assert inspect_region(region_dir / "limiter")["peak"] is None  # a rate limit's

    c = cellrate.Concurrency(3, shared=region_dir / "peak", peak=True)
    slots = [c.try_acquire(), c.try_acquire()]
    slots[0].release()
    info = inspect_region(region_dir / "peak")
    assert (info["peak"], info["stats"]["in_flight"], info["stats"]["peak"]) == (True, 1, 2)
    assert info["limit"] == "cellrate.Concurrency(limit=3, peak=True)"


def test_inspect_region_refuses_what_is_not_a_region(region_dir):
    from cellrate._cellrate import inspect_region
    cellrate.Limiter(1, shared=region_dir / "region")
    data = (region_dir / "region").read_bytes()
    (region_dir / "text").write_text("hello, world\n" * 100)
    (region_dir / "short").write_bytes(data[:100])
    old = bytearray(data)
    old[8] = 4  # the layout before the counters
    (region_dir / "old").write_bytes(bytes(old))
    os.symlink(region_dir / "nothing", region_dir / "dangling")
    cases = [("missing", "no file at the path"), ("text", "not a cellrate region"),
             ("short", "too short"), ("old", "another layout version"),
             ("dangling", "symbolic link to nothing"), (".", "not a cellrate region")]
    for name, words in cases:
        path = region_dir / name
        with pytest.raises(cellrate.InvalidArgument) as raised:
            inspect_region(path)
        assert words in str(raised.value) and str(path) in str(raised.value), name
        assert raised.value.param == "shared"
    assert (region_dir / "old").read_bytes() == bytes(old)  # never repaired, never reset
    assert not (region_dir / "missing").exists()  # never created
    with pytest.raises(cellrate.InvalidArgumentType):
        inspect_region(None)


def test_a_fork_child_counts_through_its_parents_handle(region_dir):
    lim = cellrate.Limiter(1, burst=1000, shared=region_dir / "forked")
    assert lim.allow(now=FROZEN)
    pids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:  # the parent's handle: its lane is the parent's; a child counts in the overflow
            code = 0 if all(lim.allow(now=FROZEN) for _ in range(100)) else 1
            os._exit(code)
        pids.append(pid)
    for _ in range(100):
        lim.allow(now=FROZEN)
    for pid in pids:
        assert reap(pid) == 0
    assert lim.stats()["admitted"] == 1 + 300 + 100


def test_a_wait_for_units_in_flight_is_one_verdict():
    import asyncio
    c = cellrate.Concurrency(1)
    held = c.try_acquire()
    with pytest.raises(cellrate.RateLimited):
        with c.hold(timeout=0.02):
            pass
    with pytest.raises(cellrate.RateLimited):
        asyncio.run(c.hold(timeout=0.02).__aenter__())
    assert (c.stats()["acquired"], c.stats()["refused"]) == (1, 2)
    held.release()
    with c.hold(timeout=1):
        pass
    assert (c.stats()["acquired"], c.stats()["refused"], c.stats()["released"]) == (2, 2, 2)
