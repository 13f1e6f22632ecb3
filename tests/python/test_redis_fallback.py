"""on_error="fallback": while Redis cannot decide, each process decides locally at the
fallback limit, and goes back to Redis without a fresh burst (docs/redis.md, Fallback).

Every admission across a real outage (a redis-server SIGKILLed on loopback, then
started again empty on the same port) is counted against the limit's bound: from the
instant the server was killed, admissions by an instant t are at most burst + (t -
kill) / emission, plus one per thread for the stamps taken after the decisions. The
fleet share (cellrate.share) keeps deciding through the same outage: its bound is
checked beside.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Callable, List

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
import cellrate.redis as cr_redis  # noqa: E402
from redis.asyncio import Redis as AsyncRedis  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from redis_servers import RedisServer, needs_redis  # noqa: E402

pytestmark = needs_redis

THREADS = 4


def client_for(port: int) -> "redis.Redis":
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.5,
                       socket_connect_timeout=0.5)


def _until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def _worst_excess(stamps: List[float], since: float, burst: int, rate: float) -> float:
    """The largest count of admissions stamped in [since, t] beyond burst + rate * (t -
    since), over every admission instant t (negative: within the bound everywhere)."""
    worst = -float(burst)
    count = 0
    for t in sorted(s for s in stamps if s >= since):
        count += 1
        worst = max(worst, count - (burst + rate * (t - since)))
    return worst


def _outage(srv: RedisServer, decide: Callable[[], bool], back: Callable[[], bool],
            *, before: float = 0.5, down: float = 1.5, after: float = 1.5):
    """THREADS threads calling `decide` through a kill and an empty restart of `srv`:
    the admissions' stamps, the kill's instant, the instant Redis decided again."""
    stamps: List[float] = []
    stop = threading.Event()

    def work() -> None:
        mine = []
        while not stop.is_set():
            if decide():
                mine.append(time.monotonic())
        stamps.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(before)
        killed = time.monotonic()
        srv.kill()
        time.sleep(down)
        srv.start()  # the same port, empty
        _until(back)
        returned = time.monotonic()
        time.sleep(after)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return stamps, killed, returned


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_admissions_across_an_outage_stay_within_the_bound(share):
    """share 1: the fallback is the Redis limit, and the whole run from the kill on
    conforms to it (a fresh Redis burst on the way back would pass it by a burst).
    share 0.5: the outage holds to the fallback's bound, and the way back adds Redis's
    rate, not its burst."""
    rate, burst = 50, 50
    srv = RedisServer()
    try:
        srv.start()
        limiter = cr_redis.RedisLimiter(client_for(srv.port), rate, burst=burst,
                                        on_error="fallback", fallback=share, name="fb")
        local = limiter._fallback_limit
        assert (local.rate, local.burst) == (rate * share, int(burst * share))
        stamps, killed, returned = _outage(
            srv, lambda: limiter.allow("k"), lambda: limiter._availability.outage is None)
        during = [t for t in stamps if killed <= t <= returned]
        slack = THREADS + 1
        # the outage: at most the fallback's bound (and Redis's admissions until it died)
        assert len(during) <= local.burst + rate * (returned - killed) + slack
        assert len(during) >= local.burst  # the fallback did admit
        if share == 1.0:
            assert _worst_excess(stamps, killed, burst, rate) <= slack
        else:
            # the way back: Redis's burst less what the fallback still held
            after = [t for t in stamps if t > returned]
            assert (len(during) + len(after)
                    <= burst + local.rate * (returned - killed)
                    + rate * (stamps and max(stamps) - returned) + slack)
        assert not limiter._held  # every key went back
    finally:
        srv.stop()


def test_the_way_back_is_a_charge_of_what_the_fallback_used():
    """After the outage the first check of a key sends a charge of its cost plus the
    units the fallback still holds (the core's rule): Redis starts from them."""
    srv = RedisServer()
    try:
        srv.start()
        # 10 an hour: what the fallback holds stays while a loaded machine restarts
        # Redis (at 10 a second it gave one unit back every 100 ms)
        limiter = cr_redis.RedisLimiter(client_for(srv.port), 10, 3600, burst=10,
                                        on_error="fallback", name="fb")
        srv.kill()
        assert [limiter.allow("k") for _ in range(12)] == [True] * 10 + [False] * 2
        assert limiter.peek("other").allowed  # a peek holds no key
        assert list(limiter._held) == [limiter.redis_key("k")]
        srv.start()
        _until(lambda: limiter._availability.outage is None)
        decision = limiter.check("k")
        assert not decision.allowed  # 10 owed + 1: past the burst, charged into debt
        assert not limiter._held
        assert not limiter.check("k").allowed
        assert limiter.check("fresh").remaining == 9  # other keys: Redis alone
    finally:
        srv.stop()


def test_asyncio_admissions_across_an_outage_stay_within_the_bound():
    rate, burst = 50, 50
    srv = RedisServer()

    async def run() -> None:
        limiter = cr_redis.AsyncRedisLimiter(AsyncRedis(host="127.0.0.1", port=srv.port),
                                             rate, burst=burst, on_error="fallback",
                                             name="fb")
        stamps: List[float] = []
        stop = asyncio.Event()

        async def work() -> None:
            while not stop.is_set():
                if await limiter.allow("k"):
                    stamps.append(time.monotonic())
                await asyncio.sleep(0)

        tasks = [asyncio.ensure_future(work()) for _ in range(THREADS)]
        await asyncio.sleep(0.5)
        killed = time.monotonic()
        srv.kill()
        await asyncio.sleep(1.5)
        srv.start()
        while limiter._availability.outage is not None:
            await asyncio.sleep(0.01)
        returned = time.monotonic()
        await asyncio.sleep(1.5)
        stop.set()
        await asyncio.gather(*tasks)
        await limiter.aclose()
        during = [t for t in stamps if killed <= t <= returned]
        assert burst <= len(during) <= burst + rate * (returned - killed) + 2
        assert _worst_excess(stamps, killed, burst, rate) <= 2
        assert not limiter._held

    try:
        srv.start()
        asyncio.run(run())
    finally:
        srv.stop()


def test_a_keyed_limiter_in_a_shared_region_is_the_hosts_fallback(tmp_path):
    """Two stores (two processes' worth) on one region: their outage admissions together
    hold to the region's limit."""
    srv = RedisServer()
    try:
        srv.start()
        region = str(tmp_path / "fallback.region")
        stores = [cr_redis.RedisLimiter(
            client_for(srv.port), 100, on_error="fallback", name="fb",
            fallback=cellrate.KeyedLimiter(5, burst=5, shared=region)) for _ in range(2)]
        srv.kill()
        admitted = sum(store.allow("k") for _ in range(10) for store in stores)
        assert admitted == 5
    finally:
        srv.stop()


def _two_processes(port: int, tmp_path, rate: int) -> List[cr_redis.RedisLimiter]:
    """Two stores (two processes' worth) of `rate` an hour, whose fallback is one region."""
    region = str(tmp_path / "fallback.region")
    return [cr_redis.RedisLimiter(client_for(port), rate, 3600, on_error="fallback", name="fb",
                                  fallback=cellrate.KeyedLimiter(rate, 3600, shared=region))
            for _ in range(2)]


def test_the_processes_of_a_region_go_back_to_redis_together(tmp_path):
    """The first store (a process) whose probe finds Redis back marks the fallback's
    region (BACK_KEY); another, still held back by its own back-off, reads the mark at
    its next call and goes back to Redis at once, with what its key used."""
    srv = RedisServer()
    try:
        srv.start()
        first, second = _two_processes(srv.port, tmp_path, 100)
        srv.kill()
        assert first.allow("a") and second.allow("b")  # decided by the region
        second.close()  # its probe stopped: only the mark can bring it back now
        srv.start()  # the same port
        deadline = time.monotonic() + 30
        while first._availability.outage is not None and time.monotonic() < deadline:
            time.sleep(0.01)  # first's probe finds Redis
        assert first._availability.outage is None
        assert second._held and second._availability.outage is not None
        assert second.check("b").remaining == 98  # Redis, charged the region's unit of b
        assert not second._held and second._availability.outage is None
    finally:
        srv.stop()


def test_a_regions_use_goes_back_to_redis_once(tmp_path):
    """Two stores (two processes) spend a region's 10 units of an hour in an outage;
    the first to go back charges them to Redis and gives them back to the region, so
    the second sends nothing more: its customer waits what 10 units (and the first's
    refused unit) owe, not twice that."""
    srv = RedisServer()
    try:
        srv.start()
        first, second = _two_processes(srv.port, tmp_path, 10)
        srv.kill()
        assert sum(store.allow("k") for _ in range(6) for store in (first, second)) == 10
        srv.start()  # the same port, empty
        deadline = time.monotonic() + 30
        while (first._availability.outage or second._availability.outage) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        went = first.check("k")  # a charge of the 10 units and its own
        assert not went.allowed and went.reset_after == pytest.approx(11 * 360, abs=2)
        after = second.check("k")  # nothing owed: the check itself, refused
        assert not after.allowed and after.reset_after == pytest.approx(11 * 360, abs=2)
        assert not first._held and not second._held
    finally:
        srv.stop()


def test_check_all_falls_back_on_each_limiters_fallback():
    srv = RedisServer()
    try:
        srv.start()
        c = client_for(srv.port)
        a = cr_redis.RedisLimiter(c, 10, burst=3, on_error="fallback", name="a")
        b = cr_redis.RedisLimiter(c, 10, burst=2, on_error="fallback", name="b")
        srv.kill()
        answers = [cr_redis.check_all([(a, "k"), (b, "k")]).allowed for _ in range(4)]
        assert answers == [True, True, False, False]
    finally:
        srv.stop()


def test_fallback_options_are_judged_by_the_core():
    c = redis.Redis(port=1)
    with pytest.raises(cellrate.InvalidArgument, match="^fallback is the limit of on_error"):
        cr_redis.RedisLimiter(c, 10, fallback=0.5)
    for share in (0, 1.5, -1.0, float("nan")):
        with pytest.raises(cellrate.InvalidArgument, match="^fallback must be a share"):
            cr_redis.RedisLimiter(c, 10, on_error="fallback", fallback=share)
    with pytest.raises(cellrate.InvalidArgumentType, match="^fallback must be a share"):
        cr_redis.RedisLimiter(c, 10, on_error="fallback", fallback=[1])
    with pytest.raises(cellrate.InvalidArgument, match="^on_error must be 'allow', 'deny', "
                       "'raise' or 'fallback'"):
        cr_redis.RedisLimiter(c, 10, on_error="local")
    made = cr_redis.RedisLimiter(c, 10, burst=7, on_error="fallback", fallback="2/s")
    assert (made._fallback_limit.rate, made._fallback_limit.burst) == (2, 2)
    window = cr_redis.RedisLimiter(c, 10, algorithm="fixed_window", on_error="fallback",
                                   fallback=0.25)
    assert (window._fallback_limit.rate, window._fallback_limit.algorithm) == (2,
                                                                             "fixed_window")


def test_the_fleet_share_keeps_deciding_through_the_outage():
    """cellrate.share decides locally on every call: the outage only stops its heartbeats,
    and the last share it was given keeps holding (never more than it)."""
    share_mod = pytest.importorskip("cellrate.share")
    rate = 40
    srv = RedisServer()
    try:
        srv.start()
        limiter = share_mod.ShareLimiter(client_for(srv.port), rate, burst=rate,
                                         name="fleet", interval=0.1)
        time.sleep(0.3)
        stamps, killed, returned = _outage(srv, lambda: limiter.allow(),
                                           lambda: srv.ping(), down=1.0, after=0.5)
        assert len([t for t in stamps if t >= killed]) > 0
        assert _worst_excess(stamps, killed, rate, rate) <= THREADS + 1
        limiter.close()
    finally:
        srv.stop()


def _spent_during_an_outage(srv: RedisServer, *limiters, burst: int = 10) -> None:
    """Kills `srv`, spends each limiter's key "k" whole on its fallback, starts `srv` again
    (empty) and waits until every limiter decides on Redis again."""
    srv.kill()
    for limiter in limiters:
        assert [limiter.allow("k") for _ in range(burst + 1)] == [True] * burst + [False]
        assert list(limiter._held) == [limiter.redis_key("k")]
    srv.start()
    _until(lambda: all(limiter._availability.outage is None for limiter in limiters))


def _hourly(c, name: str = "fb", **options) -> "cr_redis.RedisLimiter":
    # 10 an hour: what the fallback holds stays while a loaded machine restarts Redis
    return cr_redis.RedisLimiter(c, 10, 3600, burst=10, on_error="fallback", name=name,
                                 **options)


@pytest.mark.parametrize("operation", ["take", "refund", "check_many", "check_many_all",
                                       "check_all"])
def test_every_operation_that_writes_a_key_carries_what_the_fallback_used(operation):
    """A key's first operation after the outage settles it, whatever the operation: a
    take, a refund, a batch's decision or several limits as one cannot carry the units,
    so the charge of what the fallback used goes first (the core's rule), then the
    operation as it is. Without it the empty Redis handed out a fresh burst."""
    srv = RedisServer()
    try:
        srv.start()
        c = client_for(srv.port)
        limiter, other = _hourly(c), _hourly(c, "other")
        _spent_during_an_outage(srv, limiter, other)
        if operation == "take":
            assert limiter.take("k", 5) == 0
        elif operation == "refund":
            limiter.refund("k", 3)  # after the 10 the fallback used: 3 come back
            assert limiter.peek("k").remaining == 2  # (a peek of 1 unit)
        elif operation == "check_many":
            assert [d.allowed for d in cr_redis.check_many([(limiter, "k"), (limiter, "j")])] \
                == [False, True]
        elif operation == "check_many_all":
            [decision] = cr_redis.check_many([([(limiter, "k"), (other, "k")], 1)])
            assert not decision.allowed
        else:
            assert not cr_redis.check_all([(limiter, "k"), (other, "k")]).allowed
        held = not limiter._held and (operation in ("take", "refund", "check_many")
                                      or not other._held)
        assert held, "every key the operation wrote went back"
        if operation != "refund":
            assert not limiter.check("k").allowed
    finally:
        srv.stop()


def test_asyncio_operations_carry_what_the_fallback_used():
    srv = RedisServer()

    async def run() -> None:
        ac = AsyncRedis(host="127.0.0.1", port=srv.port)
        limiters = [cr_redis.AsyncRedisLimiter(ac, 10, 3600, burst=10, on_error="fallback",
                                               name=f"fb{i}") for i in range(4)]
        srv.kill()
        for limiter in limiters:
            assert [await limiter.allow("k") for _ in range(11)] == [True] * 10 + [False]
        srv.start()
        while any(limiter._availability.outage is not None for limiter in limiters):
            await asyncio.sleep(0.01)
        take, refund, many, every = limiters
        assert await take.take("k", 5) == 0
        await refund.refund("k", 3)
        assert (await refund.peek("k")).remaining == 2
        [decision] = await cr_redis.check_many_async([(many, "k")])
        assert not decision.allowed
        assert not (await cr_redis.check_all_async([(every, "k")])).allowed
        assert not any(limiter._held for limiter in limiters)
        for limiter in limiters:
            await limiter.aclose()
        await ac.aclose()

    try:
        srv.start()
        asyncio.run(run())
    finally:
        srv.stop()


def test_a_share_of_the_limit_follows_reconfigure():
    """fallback=0.5 is half of whatever limit Redis decides: after reconfigure the
    outage admits half of the new burst (counted), and a fallback given as a limit
    stays as given."""
    srv = RedisServer()
    try:
        srv.start()
        c = client_for(srv.port)
        share = _hourly(c, fallback=0.5)
        given = _hourly(c, "given", fallback="4/h")
        assert (share._fallback_limit.burst, given._fallback_limit.burst) == (5, 4)
        share.reconfigure(40, 3600, burst=40)
        given.reconfigure(40, 3600, burst=40)
        assert (share._fallback_limit.rate, share._fallback_limit.burst) == (20, 20)
        assert (given._fallback_limit.rate, given._fallback_limit.burst) == (4, 4)
        srv.kill()
        assert sum(share.allow("k") for _ in range(30)) == 20
        assert sum(given.allow("k") for _ in range(30)) == 4
    finally:
        srv.stop()
