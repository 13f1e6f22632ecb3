"""Calendar quotas through the Redis store (docs/design/calendar.md, "Through Redis"): the
client sends the bounds of the periods around its clock, the script decides in the one
holding the server's now. Against a real redis-server on loopback: the boundary vectors
(tests/vectors/calendar.txt, from Python's zoneinfo) through the script; every decision the
same as the in-process store's (check, peek, charge, refund, take, a live change of amount,
zone and period, several limits); clients whose clocks are seconds or an hour off the
server's count into one window; a clock off by more than a period is refused; a year's
quota; counts kept across a SIGKILL of redis-server with AOF on."""

from __future__ import annotations

import asyncio
import random
import time
import zlib

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
import cellrate.redis  # noqa: E402
from cellrate.redis import CHECK, SCRIPT, SHA, check_all, check_many  # noqa: E402
from cellrate.redis._protocol import _core  # noqa: E402
from redis_servers import RedisServer, needs_redis  # noqa: E402
from test_calendar import BOUNDS, SECOND  # noqa: E402
from test_redis import AsyncRedisLimiter, RedisLimiter, async_client_for, client_for  # noqa: E402

pytestmark = needs_redis

BERLIN = "Europe/Berlin"
# 2021-03-01 00:00 in Berlin (CET, +01:00): a month that ends in CEST
MARCH_2021 = 1614553200
APRIL_2021 = 1617228000


def _pair(client, rate: str, tz: str, name: str, **options):
    """A Redis quota and the in-process one it must agree with."""
    store = RedisLimiter(client, rate, algorithm="calendar", tz=tz, name=name, **options)
    local = cellrate.KeyedLimiter(rate, algorithm="calendar", tz=tz, **options)
    return store, local


def test_the_boundary_vectors_through_the_script(client) -> None:
    """Every bounds line a float carries: a quota of 2 per the line's period decided at its
    now through Redis admits with reset_after to the period's end, as the in-process one."""
    stores = {}
    wrong = []
    for i, (zone, period, now, start, end) in enumerate(BOUNDS):
        rate = f"2/{period}"
        if (zone, rate) not in stores:
            stores[(zone, rate)] = _pair(client, rate, zone, f"v{len(stores)}")
        store, local = stores[(zone, rate)]
        got = store.check(f"k{i}", now=now / SECOND)
        want = local.check(f"k{i}", now=now / SECOND)
        if got != want or got.reset_after != (end - now) / SECOND:
            wrong.append((zone, period, now, start, end, got, want))
    assert len(BOUNDS) > 5000 and not wrong, wrong[:3]


def _words(store, key: str, client_now: float, server_now: float | None) -> list:
    """A check's words as the core writes them at the client's clock `client_now`; the
    script then reads `server_now` (None: the server's own TIME) as its now."""
    words = _core._redis_request(CHECK, 1, client_now, store.limit, store._prefix,
                                 store._name, key)
    words = words[:-1]  # the explicit now the core wrote last
    if server_now is not None:
        words.append(b"%d" % round(server_now * SECOND))
    return words


def _decide(client, store, words):
    return _core._redis_reply(CHECK, client.evalsha(SHA, *words), store.limit)


def test_the_servers_clock_decides_at_the_boundary(client) -> None:
    """A client a second before a boundary and a server a second after it (and the other
    way round): the key counts in the server's period, with reset_after to its end."""
    client.script_load(SCRIPT)
    store, local = _pair(client, "2/month", BERLIN, "edge")
    for lag in (-3600.0, -1.0, 1.0, 3600.0):  # the client's clock minus the server's
        for server_now in (APRIL_2021 - 1.0, APRIL_2021 - 0.5, APRIL_2021, APRIL_2021 + 1.0):
            key = f"k{lag}:{server_now}"
            got = _decide(client, store, _words(store, key, server_now + lag, server_now))
            assert got == local.check(key, now=server_now), (lag, server_now)
    # the whole month of clients, each off by up to an hour, counts into one window
    key = "one"
    for lag in (-3600.0, -2.0, 0.0, 2.0):
        _decide(client, store, _words(store, key, APRIL_2021 - 0.5 + lag, APRIL_2021 - 0.5))
    assert local.check(key, 2, now=APRIL_2021 - 0.5).allowed
    last = _decide(client, store, _words(store, key, APRIL_2021 - 0.5 + 3600, APRIL_2021 - 0.5))
    assert (last.allowed, last.reset_after) == (False, 0.5)


def test_clients_seconds_or_an_hour_off_count_into_one_window(client) -> None:
    """Against the server's own clock (TIME): clients whose clocks are 2 s or an hour off
    each way, each taking 2 of a yearly 10, spend exactly the 10 in one window."""
    client.script_load(SCRIPT)
    store = RedisLimiter(client, "10/year", algorithm="calendar", tz="Pacific/Chatham",
                         name="skew")
    admitted = 0
    for lag in (-3600.0, -2.0, 0.0, 2.0, 3600.0, -3600.0):
        for _ in range(2):
            decision = _decide(client, store, _words(store, "k", time.time() + lag, None))
            admitted += decision.allowed
    assert admitted == 10
    value = client.get(store.redis_key("k"))
    assert value.endswith(b" %d" % (int(value.split(b":")[3].split()[0]) * SECOND + 10))
    assert store.peek("k").remaining == 0


def test_a_clock_off_by_more_than_a_period_is_refused(client) -> None:
    """The server's now outside every period sent: an error naming tz, never a decision."""
    client.script_load(SCRIPT)
    store = RedisLimiter(client, "10/day", algorithm="calendar", tz=BERLIN, name="far")
    for lag in (3 * 86400.0, -3 * 86400.0):
        with pytest.raises(redis.ResponseError, match="tz: the server's clock is outside"):
            client.evalsha(SHA, *_words(store, "k", time.time() + lag, None))
    assert client.get(store.redis_key("k")) is None
    # through the face: an error naming tz, whatever on_error says (a mistake, not an outage)
    far = time.time() + 3 * 86400.0
    store._request = lambda mode, key, cost, now, limit, priority=None: \
        _words(store, key, far, None)  # type: ignore[method-assign]
    with pytest.raises(cellrate.redis.RedisUnavailable, match="tz: the server's clock"):
        store.check("k")


def _ops(seed: int, start: float, span: float, count: int) -> list:
    """Random decisions at rising instants from `start` over `span` seconds."""
    rng = random.Random(seed)
    nows = sorted(start + rng.randrange(int(span * 2)) / 2 for _ in range(count))
    return [(rng.choice(["check", "check", "peek", "charge", "refund", "take"]),
             rng.choice(["a", "b"]), rng.randint(0, 4), now) for now in nows]


def _apply(store, op: str, key: str, cost: int, now: float):
    if op == "take":
        return store.take(key, cost, now=now)
    if op == "refund":
        store.refund(key, cost, now=now)
        return store.peek(key, 0, now=now)
    return getattr(store, op)(key, cost, now=now)


@pytest.mark.parametrize("rate, tz, start, span", [
    ("7/month", BERLIN, MARCH_2021 - 3 * 86400, 40 * 86400),  # across March, 31 days of 23h
    ("5/day", "America/Santiago", 1617505200 - 86400, 4 * 86400),  # a change at midnight
    ("9/week", "Australia/Lord_Howe", 1617458400 - 8 * 86400, 20 * 86400),
    ("40/year", "Asia/Kolkata", 1609439400 - 40 * 86400, 400 * 86400),  # a year: > 104 days
    ("11/3 months", "UTC", 1609459200 - 10 * 86400, 200 * 86400),
])
def test_every_decision_agrees_with_the_in_process_store(client, rate, tz, start, span) -> None:
    store, local = _pair(client, rate, tz, "diff", max_debt=3)
    for op, key, cost, now in _ops(zlib.crc32(f"{rate} {tz}".encode()), start, span, 300):
        got, want = _apply(store, op, key, cost, now), _apply(local, op, key, cost, now)
        assert got == want, (op, key, cost, now, got, want)


def test_a_live_change_carries_as_in_process(client) -> None:
    """reconfigure: another amount keeps the period's count; another zone or period moves
    it to the new period holding now, up to the amount; tz stays unless given."""
    store, local = _pair(client, "10/month", BERLIN, "live")
    now = MARCH_2021 + 86400.0
    for key, cost in (("a", 6), ("b", 2)):
        assert store.check(key, cost, now=now) == local.check(key, cost, now=now)
    steps = [("4/month", None), ("10/month", "America/New_York"), ("10/day", None),
             ("3/week", "Asia/Kolkata"), ("10/month", BERLIN)]
    for rate, tz in steps:
        now += 3600.0
        store.reconfigure(rate, tz=tz)
        local.reconfigure(rate, tz=tz, now=now)  # in process the keys carry here
        assert store.tz == (tz or store.tz)
        for key in ("a", "b", "c"):
            assert store.peek(key, now=now) == local.peek(key, now=now), (rate, tz, key)
            assert store.check(key, now=now) == local.check(key, now=now), (rate, tz, key)


def test_a_rate_and_a_quota_as_one_and_in_a_batch(client) -> None:
    """"100/minute;1000000/month" as two limits decided as one (check_all, check_many):
    the month's count and the minute's both spent by each admission."""
    minute = RedisLimiter(client, "100/minute", name="minute")
    month = RedisLimiter(client, "3/month", algorithm="calendar", tz=BERLIN, name="month")
    local = cellrate.KeyedLimiter("3/month", algorithm="calendar", tz=BERLIN)
    now = APRIL_2021 - 10.0
    got = [check_all([(minute, "u"), (month, "u")], now=now) for _ in range(4)]
    want = [local.check("u", now=now) for _ in range(4)]
    assert [d.allowed for d in got] == [True, True, True, False]
    assert got[3] == want[3]
    assert minute.peek("u", 0, now=now).remaining == 97
    batch = check_many([(month, "v"), (month, "v", 2), (month, "w"), (minute, "v")], now=now)
    assert [d.allowed for d in batch] == [True, True, True, True]
    assert month.peek("v", 0, now=now).remaining == 0
    assert month.check("v", now=APRIL_2021).remaining == 2  # a new month


def test_asyncio_decides_a_quota(server) -> None:
    async def run() -> list:
        aclient = async_client_for(server.port)
        try:
            store = AsyncRedisLimiter(aclient, "2/day", algorithm="calendar", tz=BERLIN,
                                      name="async")
            await store.reset("k")
            return [(await store.check("k")).allowed for _ in range(3)] + \
                [await store.take("k", 5), (await store.peek("k")).remaining]
        finally:
            await aclient.aclose()
    assert asyncio.run(run()) == [True, True, False, 0, 0]


def test_a_year_expires_at_its_end_not_before(client) -> None:
    """Nothing in a quota expires before its period ends: PX to the end, a year's too
    (beyond the 104 days a window may have)."""
    store = RedisLimiter(client, "1000/year", algorithm="calendar", tz=BERLIN, name="year")
    decision = store.check("k", 3)
    ttl_ms = client.pttl(store.redis_key("k"))
    assert decision.allowed and abs(ttl_ms / 1000 - decision.reset_after) < 60
    start, end = cellrate.calendar_period(BERLIN, "year")
    assert ttl_ms / 1000 <= end - time.time() + 60
    spent = store.charge("k", 2000)  # into debt: max_debt is the amount
    assert (spent.allowed, spent.clipped, store.peek("k").remaining) == (False, True, 0)
    assert client.pttl(store.redis_key("k")) / 1000 > end - time.time() - 60


def test_a_penalty_bans_a_quota_key(client) -> None:
    """A quota under a penalty: refused `after` times, banned (the period full), as the
    in-process store decides at the same instants."""
    penalty = cellrate.Penalty("2/hour", 3600.0)
    store, local = _pair(client, "1/day", "UTC", "pen", penalty=penalty)
    now = 1609459200.0 + 3600
    for step in range(5):
        assert store.check("k", now=now + step) == local.check("k", now=now + step), step


class _AofServer(RedisServer):
    """A redis-server with the append-only file on, fsynced at every write."""

    def _arguments(self) -> list:
        return super()._arguments() + ["--appendonly", "yes", "--appendfsync", "always"]


def test_counts_survive_a_sigkill_with_aof_on() -> None:
    """The counts a quota relies on survive a crash of redis-server (SIGKILL, nothing
    saved on the way down) and a restart from the append-only file."""
    server = _AofServer()
    try:
        server.start()
        client = client_for(server.port)
        store = RedisLimiter(client, "25/month", algorithm="calendar", tz=BERLIN, name="aof")
        admitted = sum(store.allow("k") for _ in range(10)) + store.take("k", 7)
        ttl_before = client.pttl(store.redis_key("k"))
        client.close()
        server.kill()
        server.start()
        client = client_for(server.port)
        store = RedisLimiter(client, "25/month", algorithm="calendar", tz=BERLIN, name="aof")
        assert admitted == 17
        assert store.peek("k", 0).remaining == 25 - 17
        assert client.pttl(store.redis_key("k")) > ttl_before - 60_000
        assert sum(store.allow("k") for _ in range(10)) == 8
        client.close()
    finally:
        server.stop()


def test_a_quota_has_no_local_fallback(client) -> None:
    """on_error="fallback" would count a period afresh locally: refused naming on_error,
    whatever the fallback given; the other on_error answer as for any limit."""
    for fallback in (None, 0.5, "10/month",
                     cellrate.KeyedLimiter("10/month", algorithm="calendar", tz=BERLIN)):
        with pytest.raises(cellrate.InvalidArgument, match="^on_error: a calendar quota") as err:
            RedisLimiter(client, "10/month", algorithm="calendar", tz=BERLIN,
                         on_error="fallback", fallback=fallback)
        assert err.value.param == "on_error"
    with pytest.raises(cellrate.InvalidArgument) as err:
        RedisLimiter(client, "10/month", tz=BERLIN)
    assert err.value.param == "tz"  # a zone for no calendar, in the core's words


def test_another_algorithm_under_the_name_is_refused_both_ways(client) -> None:
    """A quota's keys are no rate's, nor the other way round: InvalidArgument naming
    algorithm, the value left as it was."""
    rate = RedisLimiter(client, "10/minute", name="shared-name")
    quota = RedisLimiter(client, "10/month", algorithm="calendar", tz=BERLIN, name="shared-name")
    assert rate.allow("a") and quota.allow("b")
    for store, key in ((quota, "a"), (rate, "b")):
        held = client.get(store.redis_key(key))
        with pytest.raises(cellrate.InvalidArgument, match="^algorithm: the keys of this name"):
            store.check(key)
        assert client.get(store.redis_key(key)) == held
