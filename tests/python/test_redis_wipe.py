"""on_wipe: a Redis that lost its state (an empty restart, a FLUSHALL, a failover to a
replica that lagged) is not a fresh start (docs/redis.md, "What a wipe costs").

The script finds a key missing while the wipe marker of its slot is missing; with
on_wipe="refuse" (the default) it writes the marker and reads every missing key as fully
used at that instant, so the wipe hands out no fresh burst; "allow" gives each key its
burst again. Counted across real empty restarts (a redis-server SIGKILLed and started
again without data on the same port) with threads and asyncio, and across FLUSHALL in
both faces.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from typing import Callable, List

import pytest

redis = pytest.importorskip("redis")

import cellrate.redis as cr_redis  # noqa: E402
from redis.asyncio import Redis as AsyncRedis  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from redis_servers import RedisServer, in_service, needs_redis, redis_server  # noqa: E402

pytestmark = needs_redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THREADS = 4


def client_for(port: int) -> "redis.Redis":
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.5,
                       socket_connect_timeout=0.5)


def _until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def _excess(stamps: List[float], since: float, burst: int, rate: float) -> float:
    """The most admissions stamped in [since, t] beyond burst + rate * (t - since), over
    every admission instant t."""
    worst, count = -float(burst), 0
    for t in sorted(s for s in stamps if s >= since):
        count += 1
        worst = max(worst, count - (burst + rate * (t - since)))
    return worst


RATE, BURST = 5, 50  # the figures of the Redis page: an empty restart gave 145 against 100


def _restart_under_threads(srv: RedisServer, limiter) -> tuple:
    """THREADS threads calling allow("k") through an empty restart of `srv`: the stamps,
    the instant the run started."""
    stamps: List[float] = []
    stop = threading.Event()

    def work() -> None:
        mine = []
        while not stop.is_set():
            if limiter.allow("k"):
                mine.append(time.monotonic())
            time.sleep(0.002)
        stamps.extend(mine)

    started = time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        srv.in_service = False  # (the test servers start in service)
        srv.kill()
        srv.start()  # the same port, empty
        _until(lambda: limiter._availability.outage is None and srv.ping())
        time.sleep(2.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return stamps, started


@pytest.mark.parametrize("on_wipe", ["refuse", "allow"])
def test_an_empty_restart_under_threads(on_wipe):
    """5/s, burst 50, four threads: the key's burst is spent before the kill; after an
    empty restart, "refuse" admits at the rate (within burst + rate * t of the start,
    plus one per thread), "allow" hands the burst out again."""
    srv = RedisServer()
    try:
        srv.start()
        limiter = cr_redis.RedisLimiter(client_for(srv.port), RATE, burst=BURST,
                                        on_error="deny", on_wipe=on_wipe, name="wipe")
        assert limiter.on_wipe == on_wipe
        stamps, started = _restart_under_threads(srv, limiter)
        excess = _excess(stamps, started, BURST, RATE)
        print(f"on_wipe={on_wipe}: {len(stamps)} admitted, {excess:+.1f} over the bound")
        if on_wipe == "refuse":
            assert excess <= THREADS + 1
        else:
            assert excess >= BURST / 2  # the fresh burst: about 50 over
        limiter.close()
    finally:
        srv.stop()


def test_an_empty_restart_under_asyncio():
    """The asyncio store (the default on_wipe, "refuse"), four tasks: no fresh burst."""
    srv = RedisServer()

    async def run() -> tuple:
        client = AsyncRedis(host="127.0.0.1", port=srv.port, socket_timeout=0.5,
                            socket_connect_timeout=0.5)
        limiter = cr_redis.AsyncRedisLimiter(client, RATE, burst=BURST, on_error="deny",
                                             name="wipe")
        stamps: List[float] = []
        stop = asyncio.Event()

        async def work() -> None:
            while not stop.is_set():
                if await limiter.allow("k"):
                    stamps.append(time.monotonic())
                await asyncio.sleep(0.002)

        started = time.monotonic()
        tasks = [asyncio.ensure_future(work()) for _ in range(THREADS)]
        try:
            await asyncio.sleep(1.0)
            srv.in_service = False
            srv.kill()
            srv.start()
            deadline = time.monotonic() + 30
            while limiter._availability.outage is not None or not await limiter.peek("x"):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            await asyncio.sleep(2.0)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
            await limiter.aclose()
            await client.aclose()
        return stamps, started

    try:
        srv.start()
        stamps, started = asyncio.run(run())
        assert _excess(stamps, started, BURST, RATE) <= THREADS + 1
    finally:
        srv.stop()


@pytest.mark.parametrize("algorithm,rate,period,burst", [
    ("gcra", 10, 60, 10), ("token_bucket", 10, 60, 10),
    ("fixed_window", 10, 3600, None), ("sliding_window", 10, 3600, None)])
def test_a_flush_reads_every_key_as_fully_used(algorithm, rate, period, burst):
    """FLUSHALL after a key's units are spent: "refuse" refuses the next unit (a window
    until it ends), "allow" admits a fresh burst, and an unknown key is refused as well
    (the cost of the careful choice: every key lost its burst for one period)."""
    with redis_server() as srv:
        client = client_for(srv.port)
        careful = cr_redis.RedisLimiter(client, rate, period, burst=burst, algorithm=algorithm,
                                        name="careful", on_error="raise")
        loose = cr_redis.RedisLimiter(client, rate, period, burst=burst, algorithm=algorithm,
                                      name="loose", on_error="raise", on_wipe="allow",
                                      deny_cache=False)  # (it would answer the refusal)
        in_service(client)
        for limiter in (careful, loose):
            assert [limiter.allow("k") for _ in range(10)] == [True] * 10
            assert not limiter.allow("k")
        client.flushall()
        refused = careful.check("k")
        assert not refused.allowed and refused.remaining == 0 and refused.retry_after > 1
        assert not careful.check("never-seen").allowed
        assert [loose.allow("k") for _ in range(11)] == [True] * 10 + [False]


def test_a_key_idle_for_a_period_after_a_wipe_is_fresh():
    """The marker records the instant the wipe was found: a key fully used then has its
    burst back a tolerance later, as any key (20/s burst 4: 0.2 s)."""
    with redis_server() as srv:
        client = client_for(srv.port)
        limiter = cr_redis.RedisLimiter(client, 20, burst=4, name="idle", on_error="raise")
        client.flushall()
        peeking = cr_redis.RedisLimiter(client, 20, burst=4, name="idle", deny_cache=False)
        assert not peeking.peek("{s}k").allowed and client.dbsize() == 0  # a peek writes nothing
        first = limiter.check("{s}k")
        assert not first.allowed and 0 < first.retry_after <= 0.05
        time.sleep(0.25)
        assert [limiter.allow("{s}k") for _ in range(5)][:4] == [True] * 4
        assert limiter.allow("{s}other")  # its slot's marker is there: a new key is fresh
        assert not limiter.allow("{t}other")  # another slot's is not: that one was lost too
        markers = client.keys("cellrate{*}")
        assert markers and all(int(client.get(key)) > 1.7e18 for key in markers)
        assert client.pttl(markers[0]) == -1  # a marker never expires


def test_check_all_and_an_explicit_now():
    """check_all carries the first key's marker; an explicit now (tests' clock) skips the
    marker, as it writes no expiry."""
    with redis_server() as srv:
        client = client_for(srv.port)
        a = cr_redis.RedisLimiter(client, 10, 60, burst=10, name="a", prefix="t:")
        b = cr_redis.RedisLimiter(client, 10, 60, burst=10, name="b", prefix="t:")
        client.flushall()
        assert not cr_redis.check_all([(a, "k"), (b, "k")]).allowed  # a fresh Redis
        assert client.dbsize() == 1  # the first key's marker, written: nothing admitted
        assert a.check("new", now=100.0).remaining == 9
        client.flushall()
        assert a.check("new", now=100.0).remaining == 9


def test_check_all_reads_each_missing_key_as_fully_used():
    """After a wipe, a key that Redis holds again beside one still missing: the missing
    one is read as fully used (its own limit, its own key), not as the held one's."""
    with redis_server() as srv:
        client = client_for(srv.port)
        fast = cr_redis.RedisLimiter(client, 10, 1, burst=10, name="fast", prefix="t:")
        slow = cr_redis.RedisLimiter(client, 50, 60, burst=50, name="slow", prefix="t:")
        client.flushall()
        refused = fast.check("k")
        assert not refused.allowed  # the wipe found: fully used from now
        time.sleep(refused.retry_after + 0.05)
        assert fast.check("k").allowed  # its key is held again
        both = cr_redis.check_all([(fast, "k"), (slow, "k")])
        assert not both.allowed and both.limit == 50  # slow's key, missing: fully used
        assert both.retry_after > 0.5


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_the_lua_face_reads_a_flush_as_the_python_one(interpreter):
    """The Lua store sends the same marker: after FLUSHALL its default refuses the key it
    spent; on_wipe = "allow" hands out a fresh burst."""
    if not os.path.exists(os.path.join(ROOT, "build", interpreter, "cellrate.so")):
        pytest.skip(f"make lua builds build/{interpreter}")
    with redis_server() as srv:
        client = client_for(srv.port)
        in_service(client)
        script = f"""
            package.path = "{ROOT}/lua/?.lua;" .. package.path
                .. ";/usr/share/lua/5.1/?.lua;/usr/share/lua/5.3/?.lua"
            package.cpath = "{ROOT}/build/{interpreter}/?.so;" .. package.cpath
            local redis = require("redis")
            local store = require("cellrate.redis")
            local red = redis.connect("127.0.0.1", {srv.port})
            local careful = store.limiter(red, 10, {{ period = 60, burst = 10, name = "c" }})
            local loose = store.limiter(red, 10, {{ period = 60, burst = 10, name = "l",
                                                   on_wipe = "allow" }})
            assert(careful:info().on_wipe == "refuse")
            local out = {{}}
            for _ = 1, 10 do assert(careful:allow("k")); assert(loose:allow("k")) end
            red:flushall()
            out[#out + 1] = tostring(careful:allow("k"))
            out[#out + 1] = tostring(loose:allow("k"))
            local ok, err = pcall(store.limiter, red, 10, {{ on_wipe = "sometimes" }})
            out[#out + 1] = tostring(err)
            print(table.concat(out, "|"))
        """
        done = subprocess.run([interpreter, "-e", script], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        careful, loose, error = done.stdout.strip().split("|")
        assert (careful, loose) == ("false", "true")
        assert error.startswith("on_wipe must be 'refuse'"), error
        assert client.dbsize() >= 2  # keys and the marker written by Lua


def test_on_wipe_is_checked_by_the_core():
    with pytest.raises(cr_redis.cellrate.InvalidArgument, match="^on_wipe must be 'refuse'"):
        cr_redis.RedisLimiter(redis.Redis(), 10, on_wipe="sometimes")


def test_a_batch_reads_an_empty_restart_as_single_decisions_do():
    """check_many carries each decision's wipe marker (its first limiter's on_wipe, as
    check_all): after an empty restart the default refuses the key whose burst was spent
    and a key never seen, on_wipe="allow" hands its burst out again."""
    srv = RedisServer()
    try:
        srv.start()
        client = client_for(srv.port)
        careful = cr_redis.RedisLimiter(client, 10, 60, burst=10, name="careful",
                                        on_error="raise", deny_cache=False)
        loose = cr_redis.RedisLimiter(client, 10, 60, burst=10, name="loose",
                                      on_error="raise", on_wipe="allow", deny_cache=False)
        spent = cr_redis.check_many([(careful, "k", 10), (loose, "k", 10)])
        assert [d.allowed for d in spent] == [True, True]
        srv.in_service = False
        srv.kill()
        srv.start()  # the same port, empty
        _until(srv.ping)
        after = cr_redis.check_many([(careful, "k"), (careful, "never-seen"),
                                     ([(careful, "{t}a"), (loose, "{t}b")], 1), (loose, "k")])
        assert [d.allowed for d in after] == [False, False, False, True]
        assert after[0].retry_after > 1
        assert client.exists(*(key for key in client.keys("cellrate{*}")))  # markers written
    finally:
        srv.stop()


@pytest.mark.parametrize("coalesce", [False, True])
def test_an_asyncio_batch_reads_a_flush_as_a_decision_alone(coalesce):
    """check_many_async and a coalescing store's turn carry the wipe marker too."""
    with redis_server() as srv:

        async def run() -> list:
            client = AsyncRedis(host="127.0.0.1", port=srv.port, socket_timeout=5,
                                socket_connect_timeout=5)
            careful = cr_redis.AsyncRedisLimiter(client, 10, 60, burst=10, name="c",
                                                 on_error="raise", deny_cache=False,
                                                 coalesce=coalesce, timeout=10)
            loose = cr_redis.AsyncRedisLimiter(client, 10, 60, burst=10, name="l",
                                               on_error="raise", on_wipe="allow",
                                               deny_cache=False, coalesce=coalesce, timeout=10)
            try:
                await cr_redis.check_many_async([(careful, "k", 10), (loose, "k", 10)])
                await client.flushall()
                if coalesce:
                    answers = await asyncio.gather(careful.check("k"), careful.check("new"),
                                                   loose.check("k"))
                else:
                    answers = await cr_redis.check_many_async(
                        [(careful, "k"), (careful, "new"), (loose, "k")])
                return [d.allowed for d in answers]
            finally:
                await client.aclose()

        assert asyncio.run(run()) == [False, False, True]


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_the_lua_batch_reads_a_flush_as_a_decision_alone(interpreter):
    if not os.path.exists(os.path.join(ROOT, "build", interpreter, "cellrate.so")):
        pytest.skip(f"make lua builds build/{interpreter}")
    with redis_server() as srv:
        script = f"""
            package.path = "{ROOT}/lua/?.lua;" .. package.path
                .. ";/usr/share/lua/5.1/?.lua;/usr/share/lua/5.3/?.lua"
            package.cpath = "{ROOT}/build/{interpreter}/?.so;" .. package.cpath
            local redis = require("redis")
            local store = require("cellrate.redis")
            local red = redis.connect("127.0.0.1", {srv.port})
            local careful = store.limiter(red, 10, {{ period = 60, burst = 10, name = "c" }})
            local loose = store.limiter(red, 10, {{ period = 60, burst = 10, name = "l",
                                                   on_wipe = "allow" }})
            store.check_many({{ {{ careful, "k", 10 }}, {{ loose, "k", 10 }} }})
            red:flushall()
            local out = {{}}
            for _, answer in ipairs(store.check_many({{ {{ careful, "k" }}, {{ careful, "new" }},
                                                       {{ loose, "k" }} }})) do
                out[#out + 1] = tostring(answer[1])
            end
            print(table.concat(out, "|"))
        """
        done = subprocess.run([interpreter, "-e", script], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "false|false|true"
