"""cellrate.redis.RedisConcurrency and its asyncio twin against real redis-servers
(tests/python/redis_servers.py), and the Lua face's words on the wire and for bad input."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
import cellrate.redis as cr_redis  # noqa: E402
from cellrate.redis import RedisUnavailable  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from redis_servers import needs_redis, redis_server  # noqa: E402
from test_redis import (LUA_RECORDING_CLIENT, STORE_TIMEOUT, async_client_for,  # noqa: E402,F401
                        client, client_for, lua_literal, lua_run, server)

pytestmark = needs_redis


def RedisConcurrency(*args, timeout=STORE_TIMEOUT, **kwargs) -> cr_redis.RedisConcurrency:
    """A store that waits out a busy machine's slow Redis (test_redis.STORE_TIMEOUT)
    unless it names its own bound."""
    return cr_redis.RedisConcurrency(*args, timeout=timeout, **kwargs)


def AsyncRedisConcurrency(*args, timeout=STORE_TIMEOUT, **kwargs):
    return cr_redis.AsyncRedisConcurrency(*args, timeout=timeout, **kwargs)

LIMIT = 5
ROOT = Path(__file__).resolve().parents[2]
# The last commit whose redis_hold.lua kept one member a unit ('<holder>:<unit>'): its
# script writes the keys of that layout in the test that reads them.
OLD_HOLD_LAYOUT = "fb76339"
# The most holdings whose lease ended one acquire gives back (the script's bound).
RECLAIM_MAX = int(re.search(rb"^local RECLAIM_MAX = (\d+)$", cr_redis.HOLD_SCRIPT, re.M)[1])


def test_holds_at_most_the_limit_and_gives_units_back(client):
    c = RedisConcurrency(client, 3, lease=30)
    slots = [c.try_acquire("k") for _ in range(3)]
    assert all(slots) and c.try_acquire("k") is None and c.in_flight("k") == 3
    assert c.try_acquire("other") is not None  # one limit per key
    assert slots[0].release() is True
    assert slots[0].release() is False  # idempotent
    assert c.in_flight("k") == 2
    assert c.try_acquire("k", 2) is None  # 2 + 2 > 3: refused, takes nothing
    two = c.try_acquire("k", 1)
    assert two is not None and c.in_flight("k") == 3
    for slot in (two, *slots[1:]):
        assert slot.release()
    assert c.in_flight("k") == 0 and client.exists(c.redis_key("k")) == 0
    big = c.try_acquire(None, 3)
    assert big is not None and c.in_flight() == 3 and big.cost == 3
    assert big.release() and c.in_flight() == 0


def test_keys_are_prefix_name_and_key_and_expire_with_their_last_lease(client):
    c = RedisConcurrency(client, 2, lease=30, name="api", prefix="app:")
    assert c.redis_key("u1") == b"app:api:u1" and c.redis_key() == b"app:api"
    assert RedisConcurrency(client, 7, lease=1).name == "concurrency:7"
    slot = c.try_acquire("u1")
    assert client.type(b"app:api:u1") == b"zset"
    assert 29_000 < client.pttl(b"app:api:u1") <= 30_001
    assert slot is not None and slot.release()


def test_a_release_of_a_foreign_or_expired_holding_releases_nothing(client):
    short = RedisConcurrency(client, 1, lease=0.05, name="short")
    steady = RedisConcurrency(client, 1, lease=30, name="short")  # its holdings outlast pauses
    slot = short.try_acquire("k")
    assert slot is not None
    while short.in_flight("k"):  # the lease ends on the server's clock
        time.sleep(0.01)
    taker = steady.try_acquire("k")
    assert taker is not None
    assert slot.release() is False and short.in_flight("k") == 1  # the new holding stays
    assert taker.release() is True
    # a slot of another limit under another name names another key: nothing of this one
    other = RedisConcurrency(client, 1, lease=30, name="other")
    held = other.try_acquire("k")
    assert steady.try_acquire("k") is not None and held is not None
    assert held.release() is True and other.in_flight("k") == 0 and short.in_flight("k") == 1


def test_hold_waits_or_raises_rate_limited(client):
    c = RedisConcurrency(client, 1, lease=30)
    with c.hold("k") as slot:
        assert c.in_flight("k") == 1 and slot.key == "k"
        with pytest.raises(cellrate.RateLimited, match="none free within 0.05 s"):
            with c.hold("k", timeout=0.05):
                pass
    assert c.in_flight("k") == 0
    with pytest.raises(cellrate.RateLimited, match="can never fit"):
        with c.hold("k", 2):
            pass


def test_the_asyncio_store_holds_as_the_blocking_one(server):
    async def main():
        client = async_client_for(server.port)
        await client.flushall()
        c = AsyncRedisConcurrency(client, 2, lease=30)
        async with c.hold("k") as slot:
            assert await c.in_flight("k") == 1 and isinstance(slot, cr_redis.AsyncRedisSlot)
            second = await c.try_acquire("k")
            assert second is not None and await c.try_acquire("k") is None
            waiter = asyncio.ensure_future(c.hold("k", timeout=5).__aenter__())
            await asyncio.sleep(0.01)
            assert not waiter.done()  # waits, without blocking the loop
            assert await second.release() is True and await second.release() is False
            third = await waiter
        assert await c.in_flight("k") == 1 and await third.release()
        with pytest.raises(cellrate.RateLimited, match="can never fit"):
            async with c.hold("k", 3):
                pass
        await client.aclose()

    asyncio.run(main())


def test_a_client_that_decodes_replies_holds_as_one_that_does_not(server):
    """decode_responses=True hands a holder back as text: the stores hold and release
    with it as with bytes, sync and asyncio."""
    sync = client_for(server.port, decode_responses=True)
    sync.flushall()
    c = RedisConcurrency(sync, 1, lease=30)
    slot = c.try_acquire("k")
    assert slot is not None and c.try_acquire("k") is None and c.in_flight("k") == 1
    assert slot.release() is True and c.in_flight("k") == 0

    async def main():
        client = redis.asyncio.Redis(port=server.port, decode_responses=True)
        a = AsyncRedisConcurrency(client, 1, lease=30)
        held = await a.try_acquire("a")
        assert held is not None and await a.try_acquire("a") is None
        assert await held.release() is True and await a.in_flight("a") == 0
        await client.aclose()

    asyncio.run(main())


# --- a holding costs the same at any size; exact for any costs ----------------------------

def test_a_holding_costs_redis_the_same_at_any_cost(client):
    """One member per holding, whatever its units: 65,536 units are one member (and the
    member counting units beyond one each), as small as a holding of one unit."""
    c = RedisConcurrency(client, 65536, lease=30, name="sizes")
    small, big = c.try_acquire("small", 1), c.try_acquire("big", 65536)
    assert small is not None and big is not None
    assert client.zcard(c.redis_key("small")) == 1
    assert client.zcard(c.redis_key("big")) == 2
    assert client.memory_usage(c.redis_key("big")) < 2 * client.memory_usage(c.redis_key("small"))
    assert c.in_flight("big") == 65536 and c.try_acquire("big") is None
    assert big.release() is True and big.release() is False
    assert c.in_flight("big") == 0 and client.exists(c.redis_key("big")) == 0
    assert c.try_acquire("big", 65536) is not None


def test_holdings_of_any_costs_are_exact(client):
    """Random acquires (costs 1 to the limit) and releases against a model: admitted
    exactly when what is held and the cost fit, never more than the limit held."""
    rng = random.Random(5)
    limit = 10
    c = RedisConcurrency(client, limit, lease=30, name="exact")
    held: list = []
    for _ in range(600):
        if held and rng.random() < 0.45:
            slot = held.pop(rng.randrange(len(held)))
            assert slot.release() is True
        else:
            cost = rng.randint(1, limit)
            fits = sum(slot.cost for slot in held) + cost <= limit
            slot = c.try_acquire("k", cost)
            assert (slot is not None) is fits
            if slot is not None:
                held.append(slot)
        assert c.in_flight("k") == sum(slot.cost for slot in held) <= limit
    for slot in held:
        assert slot.release()
    assert client.exists(c.redis_key("k")) == 0


def test_holdings_of_several_units_come_back_with_their_lease(client):
    short = RedisConcurrency(client, 5, lease=0.2, name="mixed")
    long = RedisConcurrency(client, 5, lease=30, name="mixed")
    assert short.try_acquire("k", 3) is not None and long.try_acquire("k", 2) is not None
    assert long.try_acquire("k") is None and long.in_flight("k") == 5
    while long.in_flight("k") > 2:  # the short lease ends on the server's clock
        time.sleep(0.02)
    assert long.in_flight("k") == 2
    assert long.try_acquire("k", 3) is not None and long.try_acquire("k") is None
    assert client.zcard(long.redis_key("k")) == 3  # the reclaimed holding is gone


def test_an_acquire_gives_back_at_most_reclaim_max_ended_holdings(client):
    """The script's work per call is bounded: the holdings whose lease ended come back
    RECLAIM_MAX per acquire; the units of the others stay counted meanwhile (an early
    refusal, never an admission over the limit), and the next acquire takes them back."""
    hold_sha = client.script_load(cr_redis.HOLD_SCRIPT)
    key = RedisConcurrency(client, 65536, lease=30, name="many").redis_key("k")
    extra = 30
    pipe = client.pipeline(transaction=False)
    for _ in range(RECLAIM_MAX + extra):  # two units each, a lease of 0.3 s
        pipe.evalsha(hold_sha, 1, key, cr_redis.ACQUIRE, 65536, 2, 300_000_000)
    assert all(isinstance(holder, bytes) for holder in pipe.execute())
    limit = 2 * (RECLAIM_MAX + extra) + 2
    live = RedisConcurrency(client, limit, lease=30, name="many")
    first = live.try_acquire("k", 2)
    assert first is not None and live.try_acquire("k") is None  # full
    time.sleep(0.4)
    members = client.zcard(key)  # the holdings, and the member counting units beyond one
    assert members == RECLAIM_MAX + extra + 2
    assert live.in_flight("k") >= 2  # the ended ones beyond the bound may still count
    # 2 held, and the 2 * extra units of the ended holdings beyond the bound still counted
    assert live.try_acquire("k", limit - 2 - 2 * extra + 1) is None
    assert client.zcard(key) == members - RECLAIM_MAX
    second = live.try_acquire("k", 1)  # the rest given back
    assert second is not None and client.zcard(key) == 3  # two holdings, and the counter
    assert live.in_flight("k") == 3
    assert live.try_acquire("k", limit - 3) is not None


def test_a_key_of_the_layout_of_a_member_per_unit_is_read(client):
    """Holdings written by the earlier script (one member a unit, '<holder>:<unit>')
    are read as they are: counted, respected, released by that script, and given back
    one unit each when their lease ends."""
    old = subprocess.run(["git", "-C", str(ROOT), "show",
                          f"{OLD_HOLD_LAYOUT}:lua/cellrate/redis_hold.lua"],
                         capture_output=True, check=True).stdout
    assert b"'<holder>:<unit>'" in old
    c = RedisConcurrency(client, 5, lease=30, name="before")
    key = c.redis_key("k")
    three = client.eval(old, 1, key, 1, 5, 3, 30_000_000_000)
    client.eval(old, 1, key, 1, 5, 1, 200_000_000)  # a unit whose lease ends in 0.2 s
    assert client.zcard(key) == 4 and c.in_flight("k") == 4
    assert c.try_acquire("k", 2) is None
    one = c.try_acquire("k", 1)
    assert one is not None and c.in_flight("k") == 5
    assert client.eval(old, 1, key, 2, three, 3) == 3  # released by the script that took it
    assert c.in_flight("k") == 2
    while c.in_flight("k") > 1:
        time.sleep(0.02)
    assert c.try_acquire("k", 4) is not None and c.try_acquire("k") is None
    assert one.release() and c.in_flight("k") == 4


# --- 4 processes, each counting what it holds in a counter the test keeps ---------------

def _cycles(port: int, cycles: int, held, most, lock, done, most_cost: int) -> None:
    c = RedisConcurrency(client_for(port), LIMIT, lease=30, name=f"cycles{most_cost}",
                         timeout=2.0)
    rng = random.Random(os.getpid())
    for _ in range(cycles):
        cost = rng.randint(1, most_cost)
        with c.hold("k", cost):
            with lock:
                held.value += cost
                most.value = max(most.value, held.value)
            time.sleep(0.0002)
            with lock:
                held.value -= cost
        with lock:
            done.value += 1


@pytest.mark.parametrize("most_cost", [1, 3])
def test_four_processes_never_hold_more_than_the_limit(client, server, most_cost):
    context = multiprocessing.get_context("fork")
    lock = context.Lock()
    held, most, done = (context.Value("i", 0, lock=False) for _ in range(3))
    cycles = 300
    workers = [context.Process(target=_cycles,
                               args=(server.port, cycles, held, most, lock, done, most_cost))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert done.value == 4 * cycles  # every cycle acquired and released
    assert 1 <= most.value <= LIMIT, most.value
    assert held.value == 0
    assert RedisConcurrency(client, LIMIT, lease=30, name=f"cycles{most_cost}").in_flight("k") == 0


# --- a holder killed without release: its units come back with its lease ---------------

def _hold_all_then_wait(port: int, lease: float, ready) -> None:
    c = RedisConcurrency(client_for(port), LIMIT, lease=lease, name="killed")
    slot = c.try_acquire("k", LIMIT)  # every unit in one holding: one lease for all
    assert slot is not None
    ready.set()
    time.sleep(600)  # killed before this ends


def test_a_holder_killed_without_release_frees_its_units_after_the_lease(client, server):
    lease = 2.0
    context = multiprocessing.get_context("fork")
    ready = context.Event()
    started = time.monotonic()
    holder = context.Process(target=_hold_all_then_wait, args=(server.port, lease, ready))
    holder.start()
    try:
        assert ready.wait(30)
        os.kill(holder.pid, signal.SIGKILL)
        holder.join()
    finally:
        if holder.is_alive():
            holder.kill()
    c = RedisConcurrency(client, LIMIT, lease=lease, name="killed")
    assert c.in_flight("k") == LIMIT
    assert c.try_acquire("k") is None  # not before the lease
    while (slot := c.try_acquire("k")) is None:
        time.sleep(0.02)
    admitted = time.monotonic()
    assert admitted - started >= lease  # the dead holder's units came back, not earlier
    assert c.in_flight("k") == 1 and slot.release()
    assert all(c.try_acquire("k") for _ in range(LIMIT))  # a full limit admits again


# --- Redis down: on_error -----------------------------------------------------------------

def test_on_error_answers_while_redis_is_down():
    with redis_server() as srv:
        port = srv.port
    client = client_for(port)  # nothing listens there now
    allow = RedisConcurrency(client, 1, lease=30, on_error="allow", timeout=0.1)
    deny = RedisConcurrency(client, 1, lease=30, on_error="deny", timeout=0.1)
    raises = RedisConcurrency(client, 1, lease=30, on_error="raise", timeout=0.1)
    try:
        for _ in range(2):  # the first call fails; the next answers without trying
            unheld = allow.try_acquire("k")
            assert unheld is not None and unheld.release() is False  # held nothing
            assert deny.try_acquire("k") is None
            with pytest.raises(RedisUnavailable):
                raises.try_acquire("k")
        with pytest.raises(cellrate.RateLimited):
            with deny.hold("k", timeout=0.01):
                pass
        with allow.hold("k"):
            pass
        with pytest.raises(RedisUnavailable):
            allow.in_flight("k")  # a count is no decision
    finally:
        for store in (allow, deny, raises):
            store.close()


def test_a_release_redis_cannot_make_is_left_to_the_lease_unless_on_error_raises():
    with redis_server() as srv:
        stores = [RedisConcurrency(client_for(srv.port), 1, lease=30, on_error=word,
                                   timeout=0.1, name=word) for word in ("allow", "raise")]
        slots = [store.try_acquire("k") for store in stores]
        srv.kill()
        assert slots[0].release() is False
        with pytest.raises(RedisUnavailable):
            slots[1].release()
        for store in stores:
            store.close()


def test_the_store_decides_again_when_redis_is_back():
    with redis_server() as srv:
        client = client_for(srv.port)
        c = RedisConcurrency(client, 1, lease=30, on_error="deny", timeout=0.1)
        try:
            srv.kill()
            assert c.try_acquire("k") is None
            srv.start()
            deadline = time.monotonic() + 20
            while (slot := c.try_acquire("k")) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert slot is not None and c.in_flight("k") == 1 and slot.release()
        finally:
            c.close()


# --- both faces: the same words on the wire and for bad input ----------------------------

HOLDER = b"1796173109980388.2"
WIRE_STORES = [(5, 2.5, None, None), (1, 1e-9, "api", "app:"), (65536, 4e9, None, "x")]
WIRE_CALLS = [(0, "k", None), (0, None, 3), (1, "user:42", 1), (2, "", 65536), (0, "ü", 2)]


def python_wire() -> list:
    encode = redis.connection.Encoder("utf-8", "strict", False).encode
    sent: list = []

    def recorder(*command):
        assert command[0] == "EVALSHA" and command[1] == cr_redis.HOLD_SHA
        sent.append(" ".join(encode(word).hex() for word in command[2:]))
        mode = command[4]
        return HOLDER if mode == cr_redis.ACQUIRE else 1

    stores = []
    for limit, lease, name, prefix in WIRE_STORES:
        options = {"name": name} if name else {}
        if prefix:
            options["prefix"] = prefix
        store = RedisConcurrency(redis.Redis(port=1), limit, lease=lease, **options)
        store._run = recorder  # type: ignore[method-assign]
        stores.append(store)
    for index, key, cost in WIRE_CALLS:
        store = stores[index]
        slot = store.try_acquire(key) if cost is None else store.try_acquire(key, cost)
        assert slot is not None and slot.release()
        store.in_flight(key)
    return sent


def lua_wire(interpreter: str) -> list:
    stores = ", ".join(
        f"store.concurrency(client, {limit}, {{ lease = {lease!r}, name = {lua_literal(name)}, "
        f"prefix = {lua_literal(prefix)} }})" for limit, lease, name, prefix in WIRE_STORES)
    calls = ", ".join(f"{{ {index + 1}, {lua_literal(key)}, {lua_literal(cost)} }}"
                      for index, key, cost in WIRE_CALLS)
    return lua_run(interpreter, f"""
        local store = require("cellrate.redis")
        -- an acquire's holder, else 1
        local function reply(...)
            return (select(3, ...)) == "1" and {lua_literal(HOLDER.decode())} or 1
        end
        {LUA_RECORDING_CLIENT}
        local stores = {{ {stores} }}
        for _, call in ipairs({{ {calls} }}) do
            local c = stores[call[1]]
            local slot = assert(c:acquire(call[2], call[3]))
            assert(c:release(slot) == true)
            assert(c:in_flight(call[2]))
        end
    """).splitlines()


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_the_faces_send_the_same_keys_and_argv(interpreter):
    python = python_wire()
    assert len(python) == 3 * len(WIRE_CALLS)
    assert lua_wire(interpreter) == python


def test_the_faces_send_the_script_the_package_ships():
    script = ROOT / "redis" / "hold.lua"
    assert cr_redis.HOLD_SCRIPT == script.read_bytes()
    assert lua_run("lua5.4", 'io.write(require("cellrate.redis").hold_script)') == \
        script.read_text()


# (Python arguments, Lua arguments, the parameter named)
BAD = [
    ("0, lease=1", "0, { lease = 1 }", "limit"),
    ("65537, lease=1", "65537, { lease = 1 }", "limit"),
    ("'5', lease=1", "'5', { lease = 1 }", "limit"),
    ("5, lease=None", "5, {}", "lease"),
    ("5, lease=0", "5, { lease = 0 }", "lease"),
    ("5, lease=-1", "5, { lease = -1 }", "lease"),
    ("5, lease='1'", "5, { lease = '1' }", "lease"),
    ("5, lease=1, name='a:b'", "5, { lease = 1, name = 'a:b' }", "name"),
    ("5, lease=1, name=''", "5, { lease = 1, name = '' }", "name"),
    ("5, lease=1, prefix='{x}'", "5, { lease = 1, prefix = '{x}' }", "prefix"),
    ("5, lease=1, on_error='maybe'", "5, { lease = 1, on_error = 'maybe' }", "on_error"),
]
BAD_CALLS = [
    ("try_acquire('k', 0)", "acquire('k', 0)", "cost"),
    ("try_acquire('k', -1)", "acquire('k', -1)", "cost"),
    ("try_acquire('k', 1.5)", "acquire('k', 1.5)", "cost"),
    ("try_acquire(5)", "acquire(5)", "key"),
    ("in_flight(5)", "in_flight(5)", "key"),
]


def python_words(expression: str, param: str) -> str:
    with pytest.raises((cellrate.InvalidArgument, cellrate.InvalidArgumentType)) as info:
        eval(expression, {"cr_redis": cr_redis, "client": redis.Redis(port=1)})
    assert info.value.param == param, (expression, info.value)
    return str(info.value)


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_bad_input_gets_the_same_words_in_both_faces(interpreter):
    python, lua = [], []
    for python_args, lua_args, param in BAD:
        python.append(python_words(f"cr_redis.RedisConcurrency(client, {python_args})", param))
        lua.append(f"store.concurrency(client, {lua_args})")
    for python_call, lua_call, param in BAD_CALLS:
        python.append(python_words(f"cr_redis.RedisConcurrency(client, 5, lease=1).{python_call}",
                                   param))
        lua.append(f"store.concurrency(client, 5, {{ lease = 1 }}):{lua_call}")
    listed = ",\n".join(f"function() local made = {call}; return made end" for call in lua)
    words = lua_run(interpreter, f"""
        local store = require("cellrate.redis")
        local client = {{ script = error, eval = error, evalsha = error }}
        for _, call in ipairs({{ {listed} }}) do
            local ok, err = pcall(call)
            assert(not ok, "no error")
            -- raised at the caller's line: the chunk's own
            assert(tostring(err):match("^%(command line%):%d+: "), err)
            print((tostring(err):gsub("^[^:]*:%d+: ", "")))
        end
    """).splitlines()
    # a wrong type's own name is each language's ("int", "number")
    assert [word.split(", not ")[0] for word in words] == \
        [word.split(": str or bytes, not ")[0].split(", not ")[0] for word in python]
    # a release of what no concurrency limit gave out
    assert "slot must be a slot that a concurrency limit gave out" in lua_run(interpreter, """
        local c = require("cellrate.redis").concurrency(
            { script = error, eval = error, evalsha = error }, 5, { lease = 1 })
        print(select(2, pcall(c.release, c, {})))
    """)
