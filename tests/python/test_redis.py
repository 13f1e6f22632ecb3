"""The Redis store (cellrate.redis) against real redis-server processes.

Every server is started here on a free loopback port and stopped in a
`finally`. Decisions are compared with the core's (the shared vectors, and
random sequences against cellrate.KeyedLimiter), exactly: the store works in
whole nanoseconds like the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
import cellrate.redis as cr_redis  # noqa: E402
from cellrate.redis import RedisUnavailable  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

try:  # valkey-py, when installed: the `client` cases run with its client too
    import valkey
    import valkey.backoff
    import valkey.retry
    import valkey.exceptions
except ImportError:
    valkey = None

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "model"))
sys.path.insert(0, str(HERE))

import gcra_model as model  # noqa: E402
from conftest import Books, books_fewest  # noqa: E402
from redis_servers import (MARKERS, REDIS_CLI, RedisServer, in_service,  # noqa: E402
                           needs_redis, redis_server, watched_master)

pytestmark = needs_redis

TIMEOUT = 5.0  # the clients' socket timeout in these tests (a busy machine's Redis is slow)
# A store bounds each decision by 0.25 s unless told otherwise, less than a busy machine
# may keep Redis from answering: here a store waits STORE_TIMEOUT unless it names its
# own bound (as the tests of that bound do).
STORE_TIMEOUT = 10.0
# The last commit whose script wrote the layout before names (bare state words, keys by
# the limit's parameters): its script writes the old keys in the test that reads them.
OLD_LAYOUT = "51d8de7"


def RedisLimiter(*args, timeout=STORE_TIMEOUT, **kwargs) -> cr_redis.RedisLimiter:
    return cr_redis.RedisLimiter(*args, timeout=timeout, **kwargs)


def AsyncRedisLimiter(*args, timeout=STORE_TIMEOUT, **kwargs) -> cr_redis.AsyncRedisLimiter:
    return cr_redis.AsyncRedisLimiter(*args, timeout=timeout, **kwargs)


def client_for(port: int, library: str = "redis-py", **kwargs) -> redis.Redis:
    """A client with short timeouts and no retries of its own (the store bounds every
    decision by its own timeout; these keep the tests' direct commands short): redis-py's
    redis.Redis, or valkey-py's valkey.Valkey (the same commands, the same answers)."""
    if library == "valkey-py":
        return valkey.Valkey(port=port, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                             retry=valkey.retry.Retry(valkey.backoff.NoBackoff(), 0), **kwargs)
    return redis.Redis(port=port, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                       retry=Retry(NoBackoff(), 0), **kwargs)


def errors_of(c) -> tuple:
    """The exceptions module of `c`'s library, and its base exception."""
    if valkey is not None and isinstance(c, valkey.Valkey):
        return valkey.exceptions, valkey.exceptions.ValkeyError
    return redis.exceptions, redis.exceptions.RedisError


class ScriptCalls:
    """The script calls (EVALSHA, EVAL) the server ran from now on: len() counts them."""

    def __init__(self, c: redis.Redis):
        self.client = c
        c.script_load(cr_redis.SCRIPT)  # no NOSCRIPT on the first call
        self.start = self.total()

    def total(self) -> int:
        stats = self.client.info("commandstats")
        return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))

    def __len__(self) -> int:
        return self.total() - self.start


def counting(c: redis.Redis) -> ScriptCalls:
    return ScriptCalls(c)


def async_client_for(port: int) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(port=port, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                               retry=redis.asyncio.retry.Retry(NoBackoff(), 0))


@pytest.fixture(scope="module")
def server():
    with redis_server() as srv:
        yield srv


# Each case that takes `client` runs with each client library's blocking client.
LIBRARIES = ["redis-py", pytest.param("valkey-py", marks=pytest.mark.skipif(
    valkey is None, reason="valkey-py is not installed"))]


@pytest.fixture(params=LIBRARIES)
def client(server, request):
    c = client_for(server.port, request.param)
    c.flushall()
    in_service(c)  # not a wiped Redis: keys have their burst (test_redis_wipe.py)
    yield c
    c.close()


# --------------------------------------------------------------------------
# One script, two faces


def test_script_is_the_one_file_both_faces_send():
    source = (ROOT / "redis" / "decide.lua").read_bytes()
    assert cr_redis.SCRIPT == source
    lua = subprocess.run(
        ["lua5.4", "-e",
         f'package.path = "{ROOT}/lua/?.lua;" .. package.path; '
         f'package.cpath = "{ROOT}/build/lua5.4/?.so;" .. package.cpath; '
         'io.write(require("cellrate.redis").script)'],
        capture_output=True, check=True)
    assert hashlib.sha1(lua.stdout).hexdigest() == hashlib.sha1(source).hexdigest()


def test_now_converts_as_the_core_does():
    """The store's explicit now (seconds -> ns) is the core's cr_seconds_to_ns (vectors/seconds.txt)."""
    compared = 0
    for line in (ROOT / "tests" / "vectors" / "seconds.txt").read_text().splitlines():
        fields = line.split()
        if not fields or fields[0] != "seconds" or fields[2] != "OK":
            continue
        assert cellrate._cellrate._check_request(b"", 0, float(fields[1])) == int(fields[3]), line
        compared += 1
    assert compared >= 20


# --------------------------------------------------------------------------
# The shared vectors through the script, in nanoseconds


NEVER = 2**63 - 1


def read_vectors():
    """decisions.txt as [(algorithm, emission_ns, tolerance_ns, rate or burst, steps)].

    A step is ("op", fields), ("refund", [now, cost, state_after]), ("set",
    state) for a reservation (which the Redis store does not make: the test
    writes the state it leaves), ("reconfigure", [now, T or window, burst or
    rate, state_after]) for a live change, ("charge", [now, cost, allowed, remaining,
    retry_after, reset_after, clipped, state_after]), ("take", [now, max_cost, taken,
    state_after]), or ("reset",). gcra sequences are also run as token_bucket. The
    sixth field is the sequence's max_debt, None for the default (the burst; a
    window: its rate).
    """
    sequences = []
    for text in (ROOT / "tests" / "vectors" / "decisions.txt").read_text().splitlines():
        fields = text.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "limit":
            emission_ns, burst = int(fields[1]), int(fields[2])
            sequences.append(["gcra", emission_ns, emission_ns * burst, burst, [],
                              int(fields[3]) if len(fields) > 3 else None])
        elif fields[0] == "window":
            sequences.append([fields[1], 0, int(fields[2]), int(fields[3]), [],
                              int(fields[4]) if len(fields) > 4 else None])
        elif fields[0] == "reset":
            sequences[-1][4].append(("reset",))
        elif fields[0] == "reserve":
            sequences[-1][4].append(("set", int(fields[-1])))
        elif fields[0] == "refund":  # (the units given back left out)
            sequences[-1][4].append(("refund", [int(f) for f in fields[1:3] + fields[4:]]))
        elif fields[0] == "reconfigure":
            sequences[-1][4].append(("reconfigure", [int(f) for f in fields[1:]]))
        elif fields[0] == "charge":  # (the units committed left out)
            sequences[-1][4].append((fields[0], [int(f) for f in fields[1:8] + fields[9:]]))
        elif fields[0] == "take":
            sequences[-1][4].append((fields[0], [int(f) for f in fields[1:]]))
        else:
            sequences[-1][4].append(("op", [int(f) for f in fields[1:]]))
    return sequences


def stored_state(client, key) -> int:
    """The state word of a key's value ('<algorithm>:<tolerance_ns>:<burst> <state>'), 0
    for an absent key."""
    value = client.get(key)
    return int(value.split()[-1]) if value else 0


def beyond_the_debt_bound(algorithm: str, step) -> bool:
    """Whether a vector's charge meets a gcra TAT past the script's ceiling
    (MAX_DEBT_NS after now; the core's, its horizon, is further): the script clips
    there instead, so the rest of the sequence is not the vectors' (the bound has its
    own test)."""
    if step[0] != "charge" or algorithm != "gcra":
        return False
    now, *_, after = step[1]
    return after - now > cr_redis.MAX_DEBT_NS


def test_vectors_through_the_script_give_the_cores_decisions(client):
    """Every vector through the script, a live change, charges and takes included: at a
    reconfigure line the calls that follow send the new limit, and a probe (cost 0,
    check) at the change's instant carries the key in the script, which writes the
    carried state."""
    script = client.register_script(cr_redis.SCRIPT)
    compared, refunds, changes, charges, takes = {}, {}, {}, {}, {}
    outside = bounded = own_debts = 0
    for algorithm, emission_ns, tolerance_ns, burst, steps, max_debt in read_vectors():
        if tolerance_ns >= cr_redis.MAX_TOLERANCE_NS:
            outside += sum(step[0] == "op" for step in steps)
            continue
        first_limit = emission_ns, tolerance_ns, burst
        for name in (["gcra", "token_bucket"] if algorithm == "gcra" else [algorithm]):
            client.delete("v")
            limit = first_limit
            for step in steps:
                emission_ns, tolerance_ns, burst = limit
                if beyond_the_debt_bound(algorithm, step):
                    bounded += 1
                    break
                if step[0] == "charge":
                    now, cost, *expected, after = step[1]
                    # max_debt: the sequence's, or the default, the burst (a window: its rate)
                    debt = burst if max_debt is None else max_debt
                    reply = script(keys=["v"], args=[4, cost, name, *limit, debt, now])
                    got_retry = int(reply[2])
                    assert [reply[0], reply[1], got_retry if got_retry >= 0 else NEVER,
                            int(reply[3]), reply[5]] == expected, (name, step)
                    assert stored_state(client, "v") == after, (name, step)
                    charges[name] = charges.get(name, 0) + 1
                    own_debts += max_debt is not None
                    continue
                if step[0] == "take":
                    now, max_cost, taken, after = step[1]
                    assert script(keys=["v"], args=[5, max_cost, name, *limit, now]) == taken, (
                        name, step)
                    assert stored_state(client, "v") == after, (name, step)
                    takes[name] = takes.get(name, 0) + 1
                    continue
                if step[0] == "reconfigure":
                    now, first, second, after = step[1]
                    limit = (first, first * second, second) if algorithm == "gcra" else (
                        0, first, second)
                    if limit[1] >= cr_redis.MAX_TOLERANCE_NS:
                        break
                    script(keys=["v"], args=[1, 0, name, *limit, now])
                    assert stored_state(client, "v") == after, (name, step)
                    changes[name] = changes.get(name, 0) + 1
                    continue
                if step[0] == "reset" or step == ("set", 0):
                    client.delete("v")
                    continue
                if step[0] == "set":
                    client.set("v", f"{name}:{tolerance_ns}:{burst} {step[1]}")
                    continue
                if step[0] == "refund":
                    now, cost, after = step[1]
                    script(keys=["v"], args=[3, cost, name, emission_ns, tolerance_ns, burst, now])
                    assert stored_state(client, "v") == after, (name, step)
                    refunds[name] = refunds.get(name, 0) + 1
                    continue
                now, cost, commit, allowed, remaining, retry_after, reset_after, after = step[1]
                reply = script(keys=["v"], args=[commit, cost, name, emission_ns, tolerance_ns,
                                                 burst, now])
                got_retry = int(reply[2])
                assert (reply[0], reply[1], got_retry if got_retry >= 0 else NEVER,
                        int(reply[3])) == (allowed, remaining, retry_after, reset_after), (name, step)
                assert stored_state(client, "v") == after, (name, step)
                compared[name] = compared.get(name, 0) + 1
    print(f"vectors: ops compared exactly {compared}, refunds {refunds}, live changes {changes}, "
          f"charges {charges} ({own_debts} under a max_debt of their own), takes {takes}, "
          f"{outside} beyond 9e15 ns, {bounded} sequences stopped at the debt bound")
    assert own_debts >= 500
    assert compared["gcra"] >= 9000 and outside < compared["gcra"] / 10
    assert all(charges.get(name, 0) >= 100 and takes.get(name, 0) >= 50 for name in ALGORITHMS), (
        charges, takes)
    assert bounded <= 40  # of some 1,400 sequences
    assert all(refunds.get(name, 0) >= 5 for name in ALGORITHMS), refunds
    assert all(changes.get(name, 0) >= 20 for name in ALGORITHMS), changes


def _core_takes_algorithms() -> bool:
    try:
        cellrate.KeyedLimiter(1, algorithm="fixed_window")  # type: ignore[call-arg]
    except TypeError:
        return False
    return True


def face_limit(algorithm: str, emission_or_window_ns: int, burst_or_rate: int):
    """(rate, period, burst) giving a limit of exactly these ns through a float face, or
    None where a float cannot."""
    if algorithm == "gcra":
        period = model.float_face_period(emission_or_window_ns)
        return None if period is None else (1.0, period, burst_or_rate)
    period = model.float_face_seconds(emission_or_window_ns)
    return None if period is None else (burst_or_rate, period, None)


def test_vectors_through_the_python_face(client):
    """The same vectors through RedisLimiter where a float face can pass them (as
    test_vectors), each live change by reconfigure() and a probe at its instant, charges
    and takes by charge() and take()."""
    compared = refunds = changes = charges = takes = 0
    windows = _core_takes_algorithms()
    for algorithm, emission_ns, tolerance_ns, burst, steps, max_debt in read_vectors():
        if tolerance_ns >= cr_redis.MAX_TOLERANCE_NS or (algorithm != "gcra" and not windows):
            continue
        given = face_limit(algorithm, emission_ns if algorithm == "gcra" else tolerance_ns, burst)
        if given is None:
            continue
        rate, period, burst_given = given
        limiter = RedisLimiter(client, rate, period, burst=burst_given, algorithm=algorithm,
                               max_debt=max_debt, name="vectors", on_error="raise")
        if limiter.tolerance_ns != tolerance_ns:
            continue
        client.delete(limiter.redis_key("v"))
        for step in steps:
            if beyond_the_debt_bound(algorithm, step):
                break
            if step[0] == "reset" or step == ("set", 0):
                limiter.reset("v")
                continue
            if step[0] == "set":
                client.set(limiter.redis_key("v"), step[1])  # a bare word: read under the limit sent
                continue
            now = step[1][0]
            seconds = model.float_face_seconds(now)
            if seconds is None:
                break  # the rest of this sequence depends on a time a float cannot carry
            if step[0] == "reconfigure":
                _, first, second, after = step[1]
                given = face_limit(algorithm, first, second)
                tolerance_ns = first * second if algorithm == "gcra" else first
                if given is None or tolerance_ns >= cr_redis.MAX_TOLERANCE_NS:
                    break
                limiter.reconfigure(given[0], given[1], burst=given[2])
                if limiter.tolerance_ns != tolerance_ns:
                    break
                burst = limiter.burst
                limiter.check("v", 0, now=seconds)  # carries, at the change's instant
                assert stored_state(client, limiter.redis_key("v")) == after, step
                changes += 1
                continue
            if step[0] == "refund":
                limiter.refund("v", step[1][1], now=seconds)
                assert stored_state(client, limiter.redis_key("v")) == step[1][2], step
                refunds += 1
                continue
            if step[0] == "charge":
                _, cost, allowed, remaining, retry_after, reset_after, clipped, after = step[1]
                got = limiter.charge("v", cost, now=seconds)
                assert (got.allowed, got.remaining, got.retry_after, got.reset_after,
                        got.clipped) == (bool(allowed), remaining, retry_after / 1e9,
                                         reset_after / 1e9, bool(clipped)), step
                assert stored_state(client, limiter.redis_key("v")) == after, step
                charges += 1
                continue
            if step[0] == "take":
                _, max_cost, taken, after = step[1]
                assert limiter.take("v", max_cost, now=seconds) == taken, step
                assert stored_state(client, limiter.redis_key("v")) == after, step
                takes += 1
                continue
            now, cost, commit, allowed, remaining, retry_after, reset_after, _ = step[1]
            got = (limiter.check if commit else limiter.peek)("v", cost, now=seconds)
            assert (got.allowed, got.remaining, got.retry_after, got.reset_after, got.limit) == (
                bool(allowed), remaining, math.inf if retry_after == NEVER else retry_after / 1e9,
                reset_after / 1e9, burst), step
            compared += 1
    print(f"python face: ops {compared}, refunds {refunds}, live changes {changes}, "
          f"charges {charges}, takes {takes}")
    assert compared >= 8000 and refunds >= 300 and changes >= 200
    assert charges >= 300 and takes >= 200


# --------------------------------------------------------------------------
# Live changes: keys by name, carried in the script


T0 = 5.0  # seconds: the instant of the reference vectors' changes


def test_reference_vectors_of_a_live_change(client):
    """docs/design.md §4's three reference vectors, each by reconfigure() and by a new store
    started with the new limit under the same name (a restarted process)."""
    for restart in (False, True):
        def change(store, *args, restart=restart, **kwargs):
            if restart:
                return RedisLimiter(client, *args, name=store.name, on_error="raise", **kwargs)
            store.reconfigure(*args, **{k: v for k, v in kwargs.items() if k != "algorithm"})
            return store

        client.flushall()
        # gcra 10/s burst 10, 6 used at t0, changed to 100/s burst 20 at t0 -> remaining 14
        store = RedisLimiter(client, 10, burst=10, name="up", on_error="raise")
        assert store.check("k", 6, now=T0).remaining == 4
        store = change(store, 100, burst=20)
        assert store.check("k", 0, now=T0).remaining == 14
        assert store.check("k", 14, now=T0).allowed and not store.check("k", 1, now=T0).allowed
        # gcra 100/s burst 100, 80 used, changed to 10/s burst 10 -> refused; the first
        # admission of cost 1 at t0 + 7.1 s
        store = RedisLimiter(client, 100, burst=100, name="down", on_error="raise")
        assert store.check("k", 80, now=T0).allowed
        store = change(store, 10, burst=10)
        refused = store.check("k", 1, now=T0)
        assert not refused.allowed and refused.retry_after == 7.1
        assert not store.check("k", 1, now=T0 + 7.099999999).allowed
        assert store.check("k", 1, now=T0 + 7.1).allowed
        # fixed_window 100/minute, 60 used in this minute, changed to 80/minute -> 20 more
        # this minute; changed to 50/minute -> refused until the next minute
        minute = 1_700_000_000.0  # a minute boundary of the epoch: 28333333 * 60 + 20
        minute -= minute % 60
        store = RedisLimiter(client, "100/minute", algorithm="fixed_window", name="window",
                             on_error="raise")
        assert store.check("k", 60, now=minute + 10).allowed
        store = change(store, "80/minute", algorithm="fixed_window")
        assert store.check("k", 0, now=minute + 20).remaining == 20
        assert not store.check("k", 21, now=minute + 20).allowed
        store = change(store, "50/minute", algorithm="fixed_window")
        refused = store.check("k", 1, now=minute + 30)
        assert not refused.allowed and refused.retry_after == 30.0
        assert store.check("k", 50, now=minute + 60).allowed
        # a change to the same parameters changes nothing
        store = RedisLimiter(client, 10, burst=10, name="same", on_error="raise")
        store.check("k", 4, now=T0)
        before = client.get(store.redis_key("k"))
        store = change(store, 10, burst=10)
        assert store.check("k", 0, now=T0 + 0.05).remaining == 6
        assert client.get(store.redis_key("k")) == before


@pytest.mark.parametrize("admitted, changed", [(10.0, 10.000000001),
                                               (3e9, 3e9 - 200 * 86400.0)])
def test_a_carry_matches_the_core_where_the_product_passes_2_53(client, admitted, changed):
    """The carry's exact division past 2^53 (lead * T_new): the core's, to the ns, with
    times of months (decimal strings), past the horizon (clipped there), and for a lead
    of months (the clock stepped back 200 days between the admission and the change)."""
    for old, new in [((1e9 / 3, 1.0, 10**13), (1e5 / 1.0001, 1.0, 10)),
                     ((1e9 / 7, 1.0, 10**14), (1, 1000.0, 3)),
                     ((1e9, 1.0, 8 * 10**15), (1, 1e6, 1)),
                     ((10, 1.0, 10), (1, 7.0, 5)), ((10, 1.0, 10), (1000, 1.0, 3))]:
        store = RedisLimiter(client, old[0], old[1], burst=old[2], name="big", on_error="raise")
        core = cellrate.KeyedLimiter(old[0], old[1], burst=old[2])
        client.flushall()
        used = old[2] - 2
        assert store.check("k", used, now=admitted) == core.check("k", used, now=admitted)
        store.reconfigure(new[0], new[1], burst=new[2])
        core.reconfigure(new[0], new[1], burst=new[2], now=changed)
        assert store.check("k", 0, now=changed) == core.peek("k", 0, now=changed), (old, new)
        for later in (changed + 0.5, changed + 1e5, changed + 1e7, admitted + 1e7):
            assert store.peek("k", 1, now=later) == core.peek("k", 1, now=later), (old, later)


def test_a_carry_to_a_slower_limit_keeps_the_key_as_long_as_it_matters(client):
    """On the server's clock a carried state is written with its own expiry, refused or not:
    a key carried to a slower rate outlives the old one's expiry, so it never comes back
    idle (a fresh burst) before its units are restored."""
    fast = RedisLimiter(client, 100, burst=10, name="slow-down", on_error="raise")
    slow = RedisLimiter(client, 1, burst=10, name="slow-down", on_error="raise")
    for attempt in range(100):  # a pause as long as the old expiry in between: again
        key = f"k{attempt}"
        started = time.monotonic()
        assert fast.check(key, 10).allowed  # expires in 100 ms under this limit
        refused = slow.check(key, 1)
        if time.monotonic() - started < 0.1:
            break
    assert not refused.allowed and refused.reset_after > 9.0
    assert client.pttl(slow.redis_key(key)) > 9_000
    time.sleep(0.15)  # past the old expiry: still refused
    assert not slow.check(key, 1).allowed


def test_two_clients_share_one_name_across_a_change(server):
    """Two processes' stores (two clients) under one name, one changed live: every decision
    is the core's for a key carried at each change of the limit that decides it."""
    first, second = client_for(server.port), client_for(server.port)
    first.flushall()
    a = RedisLimiter(first, 10, burst=10, name="shared", on_error="raise")
    b = RedisLimiter(second, 10, burst=10, name="shared", on_error="raise")
    core = cellrate.KeyedLimiter(10, burst=10)
    rng = random.Random(5)
    now, limits = 100.0, [(10, 10), (100, 20), (2, 5)]
    current = {id(a): limits[0], id(b): limits[0]}
    core_limit = limits[0]
    admitted = 0
    for step in range(600):
        now += rng.choice([0.0, 0.01, 0.05, 0.2])
        store = rng.choice([a, b])
        if step % 50 == 49:
            rate, burst = rng.choice(limits)
            store.reconfigure(rate, burst=burst)
            current[id(store)] = (rate, burst)
            continue
        if current[id(store)] != core_limit:  # the key is carried by this store's call, now
            core_limit = current[id(store)]
            core.reconfigure(core_limit[0], burst=core_limit[1], now=now)
        cost = rng.choice([0, 1, 1, 2, 3])
        decision = store.check("k", cost, now=now)
        assert decision == core.check("k", cost, now=now), step
        admitted += decision.allowed
    assert admitted > 100


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_a_python_and_a_lua_process_share_one_name_across_a_change(client, server, interpreter):
    """A Python store uses 6 of 10/s burst 10; a Lua process starts with 100/s burst 20
    under the same name and finds 14 left (the first reference vector); Python, still on
    the old limit, carries the key back on its next call."""
    python = RedisLimiter(client, 10, burst=10, name="cross", on_error="raise")
    assert python.check("k", 6, now=T0).remaining == 4
    lua = lua_run(interpreter, f"""
        package.path = package.path .. ";/usr/share/lua/5.3/?.lua"
        local client = require("redis").connect("127.0.0.1", {server.port})
        local store = require("cellrate.redis").limiter(client, 100,
            {{ burst = 20, name = "cross", on_error = "raise" }})
        print((select(2, store:check("k", 0, {T0}))))
        print((select(2, store:check("k", 4, {T0}))))
    """).split()
    assert lua == ["14", "10"]  # 10 used of 20
    assert python.check("k", 0, now=T0).remaining == 0  # 10 used of 10, carried back


def test_a_key_of_the_layout_before_names_is_read_or_expires(client):
    """Keys written by the script of the layout before names (its text from git) are read
    by a store without a name (the same key: the limit's parameters) exactly as the core
    reads their state, and rewritten in the new layout; a named store makes keys of its
    own, and the old ones expire by their own TTL."""
    old = subprocess.run(["git", "-C", str(ROOT), "show",
                          f"{OLD_LAYOUT}:lua/cellrate/redis_decide.lua"],
                         capture_output=True, check=True).stdout
    unnamed = RedisLimiter(client, 10, burst=10, on_error="raise")
    core = cellrate.KeyedLimiter(10, burst=10)
    key = unnamed.redis_key("k")
    assert key == b"cellrate:gcra:1000000000:10:k"  # the layout before names
    now_ns = int(T0 * 1e9)
    limit = unnamed.limit
    args = (limit.algorithm, limit.emission_ns, limit.tolerance_ns, limit.burst)
    assert client.eval(old, 1, key, 1, 7, *args, now_ns)[:2] == [1, 3]
    assert client.get(key) == str(now_ns + 7 * 10**8).encode()  # a bare state word
    core.check("k", 7, now=T0)
    for later in (T0, T0 + 0.05, T0 + 0.35):
        assert unnamed.peek("k", 1, now=later) == core.peek("k", 1, now=later)
    assert unnamed.check("k", 2, now=T0 + 0.35) == core.check("k", 2, now=T0 + 0.35)
    assert client.get(key) == f"gcra:1000000000:10 {now_ns + 9 * 10**8}".encode()
    # on the server's clock: a named store has keys of its own, the old key expires
    old_key = b"cellrate:gcra:1000000000:10:j"
    client.eval(old, 1, old_key, 1, 1, *args)
    pttl = client.pttl(old_key)
    assert pttl == -2 or 0 < pttl <= 100  # expiring (or gone, after a pause): never kept
    named = RedisLimiter(client, 10, burst=10, name="api", on_error="raise")
    assert named.redis_key("j") == b"cellrate:api:j"
    assert named.check("j", 1).remaining == 9  # a key never seen: the layout's one fresh start
    time.sleep(0.15)
    assert client.get(old_key) is None


def test_another_algorithm_under_one_name_is_refused(client):
    """A key held under another algorithm: InvalidArgument naming algorithm, whatever
    on_error says, and the key untouched; reconfigure(algorithm=) refuses before sending."""
    gcra = RedisLimiter(client, 10, name="algo", on_error="raise")
    gcra.check("k", 3, now=T0)
    before = client.get(gcra.redis_key("k"))
    for on_error in ("allow", "deny", "raise"):
        for algorithm in ("token_bucket", "fixed_window"):
            other = RedisLimiter(client, 10, algorithm=algorithm, name="algo", on_error=on_error)
            for call in (other.check, other.peek, other.allow, other.refund):
                with pytest.raises(cellrate.InvalidArgument) as info:
                    call("k", 1, now=T0)
                assert info.value.param == "algorithm"
                assert str(info.value) == (
                    f"algorithm: the keys of this name hold gcra, not {algorithm}; "
                    f"{protocol_paragraph()['ALGORITHM_KEPT']}")
    assert client.get(gcra.redis_key("k")) == before
    with pytest.raises(cellrate.InvalidArgument) as info:
        gcra.reconfigure(10, algorithm="fixed_window")
    assert info.value.param == "algorithm"
    assert gcra.algorithm == "gcra"


def test_asyncio_store_reconfigures(server):
    async def run():
        aclient = async_client_for(server.port)
        try:
            store = AsyncRedisLimiter(aclient, 10, burst=10, name="async", on_error="raise")
            assert (await store.check("k", 6, now=T0)).remaining == 4
            store.reconfigure(100, burst=20)
            assert (await store.check("k", 0, now=T0)).remaining == 14
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_a_remembered_refusal_is_dropped_by_a_change(client):
    store = RedisLimiter(client, 1, 3600, burst=1, name="cache")
    assert store.check("k").allowed and not store.check("k").allowed  # remembered
    calls = counting(client)
    store.reconfigure(1000, 3600, burst=1000)
    assert store.check("k").allowed and len(calls) == 1


# --------------------------------------------------------------------------
# Random sequences, store against core


ALGORITHMS = ["gcra", "token_bucket", "fixed_window", "sliding_window"]


def random_limit(rng: random.Random, algorithm: str):
    """rate, period, burst for `algorithm` (windows: a whole rate, no burst)."""
    period = rng.choice([None, 1.0, 0.3, 60.0, 0.0123456789])
    if algorithm.endswith("window"):
        return rng.choice([1, 3, 7, 10, 100, 1000]), period, None
    return rng.choice([1, 3, 7, 10, 100, 0.5, 2.5, 1000]), period, rng.choice([None, 1, 2, 5, 50])


def test_random_sequences_match_the_core(client):
    rng = random.Random(11)
    ops = 0
    counts: list = []
    while ops < 10_000 or len(set(counts)) < 4:
        algorithm = ALGORITHMS[len(counts) % 4] if len(counts) < 4 else rng.choice(ALGORITHMS)
        rate, period, burst = random_limit(rng, algorithm)
        store = RedisLimiter(client, rate, period, burst=burst, algorithm=algorithm,
                             on_error="raise", prefix=f"seq{ops}:")
        core = cellrate.KeyedLimiter(rate, period, burst=burst, algorithm=algorithm)
        counts.append(algorithm)
        now = rng.uniform(0, 1e6)
        keys = [f"k{i}" for i in range(3)] + [b"\xff\x00bytes"]
        for _ in range(rng.randint(20, 200)):
            now = max(0.0, now + rng.choice([0.0, rng.expovariate(rate / store.period),
                                             rng.uniform(0, 2 * store.period), -rng.uniform(0, 0.1)]))
            key = rng.choice(keys)
            cost = rng.choice([0, 1, 1, 1, 2, store.burst, store.burst + 1])
            kind = rng.random()
            if kind < 0.05:
                store.reset(key)
                core.reset(key)
                continue
            if kind < 0.25:
                assert store.peek(key, cost, now=now) == core.peek(key, cost, now=now)
            elif kind < 0.4:
                assert store.allow(key, cost, now=now) == core.allow(key, cost, now=now)
            else:
                assert store.check(key, cost, now=now) == core.check(key, cost, now=now)
            ops += 1


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket"])
def test_a_clock_stepped_back_by_months_matches_the_core(client, algorithm):
    """A TAT 9e15 ns (104 days) or more ahead of now: the script's exact-string path."""
    later = 3e9  # seconds since the epoch: the admissions are made then
    for rate, period, burst in [(1, 1.0, 1), (10, 60.0, 5), (0.5, 1.0, 3)]:
        store = RedisLimiter(client, rate, period, burst=burst, algorithm=algorithm,
                             on_error="raise", prefix=f"far{rate}:")
        core = cellrate.KeyedLimiter(rate, period, burst=burst, algorithm=algorithm)
        assert store.check("a", burst, now=later) == core.check("a", burst, now=later)
        # 9e6 s is 9e15 ns: the TAT just past it, a retry just short of it, and far beyond
        for back in (104.0 * 86400, 8_999_980.0, 8_999_995.0, 105 * 86400.0, later - 1):
            now = later - back
            for cost in (0, 1, burst, burst + 1):
                assert store.peek("a", cost, now=now) == core.peek("a", cost, now=now), back
                assert store.check("a", cost, now=now) == core.check("a", cost, now=now), back


def test_random_sequences_match_the_core_asyncio(server):
    async def run():
        aclient = async_client_for(server.port)
        rng = random.Random(12)
        ops = 0
        try:
            while ops < 2_000:
                algorithm = rng.choice(ALGORITHMS)
                rate, period, burst = random_limit(rng, algorithm)
                store = AsyncRedisLimiter(aclient, rate, period, burst=burst, algorithm=algorithm,
                                          on_error="raise", prefix=f"aseq{ops}:")
                core = cellrate.KeyedLimiter(rate, period, burst=burst, algorithm=algorithm)
                now = rng.uniform(0, 1e6)
                for _ in range(rng.randint(20, 200)):
                    now += rng.uniform(0, store.period / store.rate * 2)
                    cost = rng.choice([0, 1, 1, 2, store.burst + 1])
                    if rng.random() < 0.2:
                        assert await store.peek("k", cost, now=now) == core.peek("k", cost, now=now)
                    else:
                        assert await store.check("k", cost, now=now) == core.check("k", cost, now=now)
                    ops += 1
                await store.reset("k")
                assert (await store.peek("k", 1, now=now)).remaining == store.burst - 1
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_server_clock_decides_when_now_is_not_given(client):
    limiter = RedisLimiter(client, 10, burst=3, on_error="raise")
    assert [limiter.allow("x") for _ in range(3)] == [True, True, True]  # a fresh burst
    refused = limiter.check("x")
    while refused.allowed:  # (a pause of the machine refilled a unit)
        refused = limiter.check("x")
    assert 0 < refused.retry_after <= 0.1
    time.sleep(refused.retry_after + 0.01)
    assert limiter.allow("x")


def test_unfittable_cost_and_probe(client):
    # per hour: a busy machine's pauses between these calls restore nothing
    limiter = RedisLimiter(client, 10, 3600, burst=3, on_error="raise")
    never = limiter.check("x", 4)
    assert never == cellrate.Decision(False, 3, math.inf, 0.0, 3, 1080.0)
    assert never.headers() == cellrate.KeyedLimiter(10, 3600, burst=3).peek(
        "x", 4, now=0.0).headers()
    assert client.exists(limiter.redis_key("x")) == 0
    limiter.check("x", 3)
    probe = limiter.check("x", 0)
    assert probe.allowed and probe.remaining == 0 and probe.retry_after == 0
    assert not limiter.peek("x", 1).allowed


def test_check_all_is_one_decision(client):
    per_ip = RedisLimiter(client, 10, burst=5, prefix="ip:", on_error="raise")
    per_user = RedisLimiter(client, 10, burst=2, prefix="user:", on_error="raise")
    items = [(per_ip, "{u1}:1.2.3.4"), (per_user, "{u1}")]
    first = cr_redis.check_all(items, now=100.0)
    assert first.allowed and first.remaining == 1 and first.limit == 2
    assert cr_redis.check_all(items, now=100.0).allowed
    refused = cr_redis.check_all(items, now=100.0)
    assert not refused.allowed and refused.limit == 2 and refused.retry_after == pytest.approx(0.1)
    # the refusal took nothing from per_ip: 3 of 5 left there
    assert per_ip.peek("{u1}:1.2.3.4", now=100.0).remaining == 2
    assert per_ip.check("{u1}:1.2.3.4", 3, now=100.0).allowed


def test_check_all_matches_the_cores(client):
    """cellrate.redis.check_all against cellrate.check_all on the same limits and times."""
    rng = random.Random(8)
    outcomes = {True: 0, False: 0}
    for round_ in range(60):
        pairs = []
        for index in range(rng.randint(1, 3)):
            algorithm = rng.choice(ALGORITHMS)
            rate, period, burst = random_limit(rng, algorithm)
            pairs.append((RedisLimiter(client, rate, period, burst=burst, algorithm=algorithm,
                                       prefix=f"all{round_}.{index}:", on_error="raise"),
                          cellrate.KeyedLimiter(rate, period, burst=burst, algorithm=algorithm)))
        now = rng.uniform(0, 1e6)
        for _ in range(50):
            now += rng.uniform(0, 0.5)
            cost = rng.choice([0, 1, 1, 2, 3])
            keys = [f"{{k}}:{i}" for i in range(len(pairs))]
            got = cr_redis.check_all([(store, key) for (store, _), key in zip(pairs, keys)],
                                     cost, now=now)
            expected = cellrate.check_all([(core, key) for (_, core), key in zip(pairs, keys)],
                                          cost, now=now)
            assert got == expected
            outcomes[got.allowed] += 1
    assert min(outcomes.values()) > 300, outcomes


def test_check_all_naming_a_key_twice_admits_once(client):
    limiter = RedisLimiter(client, 1, 60, burst=1, on_error="raise")
    assert not cr_redis.check_all([(limiter, "k"), (limiter, "k")], now=10.0).allowed
    assert limiter.check("k", now=10.0).allowed  # the refusal took nothing


# --------------------------------------------------------------------------
# Expiry


def test_key_expires_when_its_state_stops_mattering(client):
    limiter = RedisLimiter(client, 2, burst=3, on_error="raise")
    started = time.monotonic()
    decision = limiter.check("e", 2)
    pttl = client.pttl(limiter.redis_key("e"))
    since_ms = (time.monotonic() - started) * 1000 + 1
    reset_ms = math.ceil(decision.reset_after * 1000)
    assert reset_ms - since_ms <= pttl <= reset_ms  # less the time since the decision
    short = RedisLimiter(client, 100, burst=1, on_error="raise")
    started = time.monotonic()
    short.check("idle")
    exists = client.exists(short.redis_key("idle"))
    assert exists == 1 or time.monotonic() - started >= 0.01  # (gone after a pause)
    time.sleep(0.05)
    assert client.exists(short.redis_key("idle")) == 0
    # windows: the key lives until its counts stop mattering (the end of the
    # window for fixed, of the next window for sliding)
    for algorithm in ("fixed_window", "sliding_window"):
        window = RedisLimiter(client, 10, 2.0, algorithm=algorithm, on_error="raise")
        started = time.monotonic()
        decision = window.check("w")
        pttl = client.pttl(window.redis_key("w"))
        since_ms = (time.monotonic() - started) * 1000 + 1
        reset_ms = math.ceil(decision.reset_after * 1000)
        assert 0 < reset_ms <= (2000 if algorithm == "fixed_window" else 4000)
        assert reset_ms - since_ms <= pttl <= reset_ms
    # a turn-away and a peek leave the expiry as it was
    limiter.check("e", 1)
    started = time.monotonic()
    before = client.pttl(limiter.redis_key("e"))
    assert not limiter.check("e", 3).allowed
    limiter.peek("e", 1)
    after = client.pttl(limiter.redis_key("e"))
    assert 0 <= before - after <= (time.monotonic() - started) * 1000 + 1


def test_a_flood_of_keys_leaves_memory_bounded_by_live_keys(client):
    limiter = RedisLimiter(client, 20, burst=1, on_error="raise")  # each key lives 50 ms
    baseline = client.info("memory")["used_memory"]
    sha = client.script_load(cr_redis.SCRIPT)
    for start in range(0, 100_000, 5_000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, start + 5_000):  # the script call of limiter.check(f"flood:{i}")
            pipe.execute_command("EVALSHA", sha,
                                 *limiter._request(cr_redis.CHECK, f"flood:{i}", 1, None,
                                                   limiter.limit))
        assert all(reply[0] == 1 for reply in pipe.execute())
    deadline = time.monotonic() + 30
    while client.dbsize() - MARKERS > 100 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.dbsize() - MARKERS <= 100  # 10^5 keys written, all expired
    assert client.info("memory")["used_memory"] - baseline < 1_000_000


# --------------------------------------------------------------------------
# Processes on one key, the server's clock


def _server_seconds(c) -> float:
    seconds, micros = c.time()
    return seconds + micros / 1e6


def _hammer(port: int, seconds: float, ready, results, since: float) -> None:
    c = client_for(port)
    limiter = RedisLimiter(c, 200, burst=10, on_error="raise")
    # each decision bracketed by CLOCK_REALTIME, the clock of the server's TIME here
    books = Books(since, 1 / 200, 10 / 200)
    ready.wait()
    admitted = 0
    started = _server_seconds(c)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        before = time.time()
        allowed = limiter.allow("shared")
        books.record(before, time.time(), allowed)
        admitted += allowed
    results.put((admitted, started, _server_seconds(c), books))


def test_four_processes_on_one_key_stay_within_the_bound(client, server):
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(4)
    results = context.Queue()
    since = _server_seconds(client)
    workers = [context.Process(target=_hammer, args=(server.port, 3.0, ready, results, since))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    counts, starts, ends, books = zip(*(results.get(timeout=120) for _ in workers))
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    admitted = int(sum(counts))
    rate, burst = 200, 10
    span = max(ends) - min(starts)  # every admission happened in here (server clock)
    print(f"4 processes: {admitted} admitted in {span:.3f} s of the server's clock")
    assert admitted <= burst + rate * span + 1
    # at least what the key's books say, whatever the machine let them run
    assert admitted >= books_fewest(list(books), slack=1 / rate)
    assert all(count > 0 for count in counts)


# --------------------------------------------------------------------------
# Faults


def _slow_calls(call, n: int, threshold: float) -> int:
    slow = 0
    for _ in range(n):
        started = time.monotonic()
        call()
        slow += time.monotonic() - started >= threshold
    return slow


def _request_path_calls(limiter) -> list:
    """The commands `limiter` sends from this thread from now on (the probe's are its own)."""
    run, sent = limiter._run, []
    caller = threading.current_thread()

    def counted(*command):
        if threading.current_thread() is caller:
            sent.append(command[0])
        return run(*command)

    limiter._run = counted
    return sent


def _probes() -> list:
    return [t for t in threading.enumerate() if t.name == "cellrate.redis probe"]


def _until(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


@pytest.mark.parametrize("on_error", ["allow", "deny", "raise"])
def test_redis_killed_and_restarted(on_error, caplog):
    srv = RedisServer()
    try:
        srv.start()
        c = client_for(srv.port)
        limiter = RedisLimiter(c, 1000, burst=1000, on_error=on_error)
        assert limiter.check("k").remaining == 999
        attempts = _request_path_calls(limiter)
        srv.kill()
        caplog.set_level(logging.WARNING, logger="cellrate.redis")
        for _ in range(50):
            if on_error == "raise":
                with pytest.raises(RedisUnavailable) as info:
                    limiter.check("k")
                assert isinstance(info.value.__cause__, redis.exceptions.ConnectionError)
                assert isinstance(info.value, cellrate.CellrateError)
            else:
                assert limiter.allow("k") is (on_error == "allow")
        # Redis was tried by the first call alone: the probe tries it off the request path
        assert attempts == ["EVALSHA"]
        assert len(_probes()) == 1
        srv.start()  # the same port, an empty server: no key, no script
        _until(lambda: limiter._availability.outage is None)
        assert limiter.check("k").remaining == 999  # decided by the new server
        assert attempts[1:] == ["EVALSHA"]  # the probe loaded the script
        _until(lambda: not _probes())  # the probe ended with the outage
        assert c.script_exists(hashlib.sha1(cr_redis.SCRIPT).hexdigest()) == [True]
        messages = [r.getMessage() for r in caplog.records if r.name == "cellrate.redis"]
        assert sum(m.startswith("Redis cannot decide") for m in messages) == 1, messages
        assert sum(m.startswith("Redis decides again") for m in messages) == 1, messages
    finally:
        srv.stop()


def test_the_probe_stops_with_close_and_with_the_store():
    srv = RedisServer()
    try:
        srv.start()
        port = srv.port
        srv.kill()
        closed = RedisLimiter(client_for(port), 10)
        assert closed.allow("k") and len(_probes()) == 1
        closed.close()
        assert not _probes()
        dropped = RedisLimiter(client_for(port), 10)
        assert dropped.allow("k") and len(_probes()) == 1
        del dropped
        _until(lambda: not _probes())
    finally:
        srv.stop()


def test_a_default_client_on_a_dead_server_is_not_retried():
    """redis-py's default client retries ten times with back-off (seconds per call): the
    store never uses the client's retries, and answers on_error after one try."""
    retries = []

    class Spy(Retry):
        def call_with_retry(self, *args, **kwargs):
            retries.append(args)
            return super().call_with_retry(*args, **kwargs)

    with redis_server() as srv:
        port = srv.port
    default = redis.Redis(port=port)  # no server there any more
    default.connection_pool.connection_kwargs["retry"] = Spy(NoBackoff(), 10)
    limiter = RedisLimiter(default, 10, on_error="deny")
    try:
        decision = limiter.check("k")
        assert not decision.allowed and retries == []
    finally:
        limiter.close()


def test_a_stalled_server_answers_by_on_error_within_the_timeout():
    """SIGSTOP: the server accepts connections and never answers. The client has no
    timeout at all; the store's own answers while the server is still stopped."""
    srv = RedisServer()
    try:
        srv.start()
        c = redis.Redis(port=srv.port, socket_timeout=None, socket_connect_timeout=None)
        limiter = RedisLimiter(c, 1000, burst=1000, on_error="deny", timeout=0.1)
        _until(lambda: limiter.allow("k"))  # (a busy machine's server may miss 0.1 s once)
        srv.process.send_signal(signal.SIGSTOP)
        answers: list = []
        calls = threading.Thread(target=lambda: answers.extend(
            limiter.allow("k") for _ in range(100)))
        calls.start()
        calls.join(30)  # the server stays stopped for all of it
        assert not calls.is_alive() and answers == [False] * 100
        srv.process.send_signal(signal.SIGCONT)
        _until(lambda: limiter._availability.outage is None)
        _until(lambda: limiter.allow("k"))
    finally:
        srv.process and srv.process.send_signal(signal.SIGCONT)
        srv.stop()


@contextlib.contextmanager
def _watched_master(sentinels: int = 2):
    """A master and `sentinels` Sentinels watching it as "cellrate" (redis_servers)."""
    with watched_master(sentinels) as (master, watchers, _):
        yield master, watchers


def _timed(call):
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


def test_a_frozen_sentinel_holds_no_decision_past_the_timeout():
    """redis-py's Sentinel with its defaults asks each Sentinel with a 5 s socket timeout
    before it connects to the master. The store asks them within its own timeout: a
    frozen first Sentinel (SIGSTOP: connections accepted, never answered) costs it a
    share of the time, and the next one answers; all of them frozen, on_error answers
    within the timeout, and the store decides again when one answers."""
    timeout = 0.25
    with _watched_master() as (master, watchers):
        watchers[0].pause()
        sentinel = redis.sentinel.Sentinel([("127.0.0.1", w.port) for w in watchers])
        limiter = RedisLimiter(sentinel.master_for("cellrate"), 10, 3600, on_error="deny",
                               timeout=timeout)
        try:
            decision, took = _timed(lambda: limiter.check("k"))
            assert took < 8 * timeout, took  # 5.0 s before (the first Sentinel's socket timeout)
            assert decision.allowed and decision.remaining == 9  # Redis decided
        finally:
            limiter.close()
        watchers[1].pause()
        fresh = RedisLimiter(sentinel.master_for("cellrate"), 10, 3600, on_error="deny",
                             timeout=timeout)  # new connections: the master is asked for
        try:
            decision, took = _timed(lambda: fresh.check("k"))
            assert took < 8 * timeout, took
            assert not decision.allowed and fresh._availability.outage is not None  # on_error
            watchers[1].resume()
            _until(lambda: fresh._availability.outage is None)
            assert fresh.check("k").remaining == 8
        finally:
            fresh.close()


def test_a_frozen_sentinel_and_the_asyncio_store():
    """The asyncio store bounds the whole call, the Sentinel lookup included; behind a
    frozen first Sentinel it decides only when the Sentinel clients' own socket timeout
    leaves the next one time to answer (sentinel_kwargs), as the Redis page says."""

    async def decide(timeout, sentinel_kwargs):
        # made in the loop that runs it (Python 3.9's asyncio objects bind to it)
        sentinel = redis.asyncio.sentinel.Sentinel(addresses, **sentinel_kwargs)
        limiter = AsyncRedisLimiter(sentinel.master_for("cellrate"), 10, 3600,
                                    on_error="deny", timeout=timeout)
        try:
            return await limiter.check("k")
        finally:
            await limiter.aclose()

    with _watched_master() as (master, watchers):
        watchers[0].pause()
        addresses = [("127.0.0.1", w.port) for w in watchers]
        # redis-py's defaults: the frozen Sentinel holds the lookup; the store answers
        # on_error within its timeout (8 times it: a loaded machine's slack)
        decision, took = _timed(lambda: asyncio.run(decide(0.25, {})))
        assert took < 8 * 0.25 and not decision.allowed
        # a Sentinel socket timeout well inside the store's: the second Sentinel answers
        # (a store timeout of many seconds, so that a loaded machine's pauses fit in it)
        bounded = {"sentinel_kwargs": {"socket_timeout": 0.3}}
        assert asyncio.run(decide(15.0, bounded)).allowed


def test_debug_sleep_beyond_the_timeout(client, server):
    limiter = RedisLimiter(client, 1000, burst=1000, on_error="deny", timeout=0.1)
    sleeper = subprocess.Popen([REDIS_CLI, "-p", str(server.port), "DEBUG", "SLEEP", "2"],
                               stdout=subprocess.DEVNULL)
    try:
        # admitted until the server is asleep (redis-cli's start is the machine's affair),
        # then refused (on_error="deny") while it lasts
        while limiter.allow("k"):
            assert sleeper.poll() is None, "the server's sleep ended before a call met it"
            time.sleep(0.01)
        assert limiter._availability.outage is not None
    finally:
        sleeper.wait(10)
    _until(lambda: limiter._availability.outage is None)
    _until(lambda: limiter.check("k").allowed)


@pytest.mark.parametrize("pool_class", [redis.ConnectionPool, redis.BlockingConnectionPool])
def test_a_capped_pool_waits_for_a_connection_and_is_no_outage(server, pool_class):
    """More threads than max_connections: redis-py's pool refuses the others
    (MaxConnectionsError, a ConnectionError); they wait for a connection instead of
    answering on_error="allow" for everyone."""
    pool = pool_class(port=server.port, max_connections=2)
    # (480 calls queue for 2 connections: a busy machine's Redis may take seconds for them)
    limiter = RedisLimiter(redis.Redis(connection_pool=pool), 1, 3600, burst=10,
                           on_error="allow", prefix=f"pool{pool_class.__name__}:", timeout=60.0)
    admitted = []

    def hammer():
        admitted.extend(limiter.allow("k") for _ in range(30))

    threads = [threading.Thread(target=hammer) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(admitted) == 16 * 30
    assert sum(admitted) == 10
    assert limiter._availability.outage is None


def test_a_capped_async_pool_waits_for_a_connection(server):
    async def run():
        aclient = redis.asyncio.Redis(port=server.port, max_connections=2)
        limiter = AsyncRedisLimiter(aclient, 1, 3600, burst=10, on_error="allow",
                                    prefix="apool:", timeout=60.0, deny_cache=False)
        try:
            answers = await asyncio.gather(*(limiter.allow("k") for _ in range(200)))
            assert sum(answers) == 10
            assert limiter._availability.outage is None
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_the_asyncio_store_decides_through_its_own_connections(server):
    """A plain asyncio client's pool is not asked for a connection per decision (its
    lock, checks and retries): the store keeps connections of its own, made with the
    pool's settings, as the blocking store does."""
    async def run():
        pool = redis.asyncio.ConnectionPool(port=server.port)
        asked = []
        get_connection = pool.get_connection

        async def counted(*args, **kwargs):
            asked.append(args)
            return await get_connection(*args, **kwargs)
        pool.get_connection = counted
        aclient = redis.asyncio.Redis(connection_pool=pool)
        limiter = AsyncRedisLimiter(aclient, 1, 3600, burst=5, prefix="own:")
        try:
            answers = [await limiter.allow("k") for _ in range(8)]
            assert answers == [True] * 5 + [False] * 3
            assert (await limiter.peek("k")).remaining == 0
            await limiter.reset("k")
            assert (await limiter.check("k")).remaining == 4
            assert asked == []
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_aclose_closes_the_asyncio_stores_connections(server, client):
    """The store's own connections are closed by its aclose() (no transport left for
    the event loop's end), and made again by a later decision."""
    def connected() -> int:
        return int(client.info("clients")["connected_clients"])

    async def run():
        aclient = async_client_for(server.port)
        limiter = AsyncRedisLimiter(aclient, 1, 3600, burst=5, prefix="aclose:")
        try:
            before = connected()
            await asyncio.gather(*(limiter.allow("k") for _ in range(3)))
            assert connected() == before + 3
            await limiter.aclose()
            _until(lambda: connected() == before)
            assert (await limiter.check("k")).remaining == 1
            await limiter.aclose()
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_cancelled_asyncio_decisions_give_their_connections_back(server):
    """Decisions cancelled while they wait for a connection of a capped pool, or while
    Redis answers, neither leak a connection nor keep one that still has a reply to
    read: the store's connections stay within max_connections and the next decisions
    read their own replies."""
    async def run():
        aclient = redis.asyncio.Redis(port=server.port, max_connections=2)
        limiter = AsyncRedisLimiter(aclient, 1, 3600, burst=1000, prefix="cancelled:",
                                    timeout=60.0, deny_cache=False)
        try:
            for _ in range(5):
                tasks = [asyncio.ensure_future(limiter.check(f"k{i}")) for i in range(20)]
                await asyncio.sleep(0)  # some sent, the others waiting for a connection
                for task in tasks[::2]:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            connections = limiter._connections
            assert connections._count <= 2
            for i in range(20):  # each reads its own reply: k{i} has its own count
                expected = (await limiter.peek(f"k{i}")).remaining  # check()'s answer
                assert (await limiter.check(f"k{i}")).remaining == expected
                assert (await limiter.peek(f"k{i}")).remaining == expected - 1
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_an_asyncio_store_decides_in_a_second_event_loop(server):
    """A store's connections belong to the event loop that made them: a store used from
    one asyncio.run() and then another decides in each."""
    limiter = None

    async def decide():
        nonlocal limiter
        if limiter is None:
            limiter = AsyncRedisLimiter(async_client_for(server.port), 1, 3600, burst=5,
                                        prefix="loops:", on_error="raise")
        return (await limiter.check("k")).remaining

    assert asyncio.run(decide()) == 4
    assert asyncio.run(decide()) == 3


@pytest.mark.parametrize("on_error", ["allow", "deny", "raise"])
def test_a_full_redis_answers_by_on_error(client, on_error):
    """maxmemory with noeviction: OOM for every script, which is "cannot decide now"."""
    limiter = RedisLimiter(client, 10, on_error=on_error, prefix=f"oom{on_error}:")
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", "1")
    try:
        if on_error == "raise":
            with pytest.raises(RedisUnavailable) as info:
                limiter.check("k")
            assert isinstance(info.value.__cause__, errors_of(client)[0].OutOfMemoryError)
        else:
            assert limiter.allow("k") is (on_error == "allow")
            decision = limiter.check("k")
            assert decision.allowed is (on_error == "allow")
    finally:
        client.config_set("maxmemory", "0")
    _until(lambda: limiter._availability.outage is None)
    assert limiter.check("k").remaining == 9


@pytest.mark.parametrize("on_error", ["allow", "deny"])
def test_a_master_short_of_its_replicas_answers_by_on_error(client, on_error):
    """min-replicas-to-write (a master that bounds what a failover can lose) refuses
    writes with NOREPLICAS while too few replicas follow it: "cannot decide now",
    as a failed-over primary's READONLY is, not a mistake."""
    limiter = RedisLimiter(client, 10, on_error=on_error, prefix=f"noreplicas{on_error}:")
    client.config_set("min-replicas-to-write", 1)
    try:
        assert limiter.check("k").allowed is (on_error == "allow")
        assert limiter._availability.outage is not None
    finally:
        client.config_set("min-replicas-to-write", 0)
    _until(lambda: limiter._availability.outage is None)
    assert limiter.check("k").remaining == 9


def test_a_full_redis_answers_by_on_error_in_asyncio(server):
    async def run():
        aclient = async_client_for(server.port)
        limiter = AsyncRedisLimiter(aclient, 10, on_error="allow", prefix="aoom:")
        await aclient.config_set("maxmemory", "1")
        try:
            assert await limiter.allow("k")
        finally:
            await aclient.config_set("maxmemory", "0")
            await limiter.aclose()
            await aclient.aclose()

    asyncio.run(run())


def test_a_busy_redis_answers_by_on_error(client, server):
    """BUSY: another client's script runs past busy-reply-threshold."""
    limiter = RedisLimiter(client, 10, on_error="allow", prefix="busy:")
    deny = RedisLimiter(client, 10, on_error="deny", prefix="busy:")
    client.config_set("busy-reply-threshold", "20")
    spin = ("local t = redis.call('TIME'); local stop = t[1] * 1e6 + t[2] + 3e6; "
            "repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] > stop; return 1")
    busy = threading.Thread(target=_quietly,
                            args=(redis.Redis(port=server.port, socket_timeout=10).eval, spin, 0))
    busy.start()
    try:
        _until(lambda: _busy(client))
        assert limiter.allow("k") and not deny.allow("k")
    finally:
        with contextlib.suppress(errors_of(client)[1]):
            client.script_kill()
        busy.join(10)
        client.config_set("busy-reply-threshold", "5000")
    _until(lambda: limiter._availability.outage is None)
    assert limiter.check("k").remaining == 9


def _quietly(call, *args):
    with contextlib.suppress(redis.exceptions.RedisError):
        call(*args)


def _busy(c) -> bool:
    try:
        c.ping()
    except errors_of(c)[0].ResponseError as error:
        return str(error).startswith("BUSY")
    except errors_of(c)[0].TimeoutError:
        return False  # the server had not answered BUSY yet (a loaded machine): ask again
    return False


def test_a_data_error_raises_whatever_on_error_says(client):
    """WRONGTYPE is a mistake, not an outage: RedisUnavailable, never "allow"."""
    for on_error in ("allow", "deny", "raise"):
        limiter = RedisLimiter(client, 10, on_error=on_error)
        client.delete(limiter.redis_key("list"))
        client.lpush(limiter.redis_key("list"), "x")
        with pytest.raises(RedisUnavailable) as info:
            limiter.check("list")
        assert "WRONGTYPE" in str(info.value)
        assert isinstance(info.value.__cause__, errors_of(client)[0].ResponseError)
        assert limiter._availability.outage is None
        assert limiter.check("other").allowed  # the store decides on


def lua_run(interpreter: str, source: str) -> str:
    """The output of `source` run by `interpreter` with this tree's cellrate modules."""
    prelude = (f'package.path = "{ROOT}/lua/?.lua;" .. package.path; '
               f'package.cpath = "{ROOT}/build/{interpreter}/?.so;" .. package.cpath\n')
    return subprocess.run([interpreter, "-e", prelude + source], capture_output=True,
                          check=True, text=True).stdout


def protocol_paragraph() -> dict:
    """The script's protocol lines, read here apart from either face."""
    script = (ROOT / "redis" / "decide.lua").read_text()
    start = script.index("\n-- The protocol:")
    paragraph = script[start:script.index("\n\n", start)]
    return {name: value.strip("'") for name, value in
            re.findall(r"^(?:local|--) ([A-Z][A-Z_]*) = (.*)$", paragraph, re.M)}


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_the_faces_refuse_a_store_in_the_same_words(interpreter):
    """The protocol's constants and rules are the core's (test_redis_protocol.py and
    tests/lua/redis_protocol_spec.lua read its vectors); a store's options are refused
    in the same words by both faces."""
    # the options' words and defaults are the core's table's (cellrate/options.h)
    table = cellrate._cellrate._options("RedisLimiter")
    assert (cr_redis.ON_ERROR, cr_redis.DEFAULT_PREFIX) == (table["on_error"]["words"],
                                                            table["prefix"]["default"])
    lua = lua_run(interpreter, """
        local store = require("cellrate.redis")
        local client = { evalsha = print, eval = print, script = print }
        for _, opts in ipairs({ { prefix = "a{b" }, { prefix = "a}b" }, { on_error = "x" },
                                { rate = "1/day", burst = 200 }, { max_debt = -1 } }) do
            print((select(2, pcall(store.limiter, client, opts.rate or 10, opts))))
        end
        print(store.limiter(client, 10):redis_key("k"))
        print(store.limiter(client, 10).on_error)
    """).splitlines()
    python_errors = []
    for options in ({"prefix": "a{b"}, {"prefix": "a}b"}, {"on_error": "x"}, {"burst": 200},
                    {"max_debt": -1}):
        with pytest.raises(cellrate.CellrateError) as info:
            RedisLimiter(redis.Redis(port=1), "1/day" if "burst" in options else 10, **options)
        python_errors.append(str(info.value))
    # the same words in both faces, the core's
    assert [re.sub(r"^.*?:\d+: ", "", line) for line in lua[:5]] == python_errors
    assert python_errors[2] == ("on_error must be 'allow', 'deny', 'raise' or 'fallback' "
                                "(a Redis rate limit)")
    assert lua[5] == table["prefix"]["default"] + "gcra:1000000000:10:k"
    default_on_error = table["on_error"]["default"]
    assert lua[6] == RedisLimiter(redis.Redis(port=1), 10).on_error == default_on_error


BAD_NAMES = ["a{b", "a}b", "api:v2", "", "x" * 65, "caf\u00e9", "tab\there"]


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_a_bad_name_or_change_gets_the_same_words_in_both_faces(interpreter):
    """A bad name (the core's options table: a policy name without '{', '}' or ':'),
    a change of a limit without a name, a change of algorithm, a change to an
    invalid limit: raised naming the parameter, the same words in both faces, nothing
    changed."""
    python = []
    for name in BAD_NAMES:
        with pytest.raises(cellrate.InvalidArgument) as info:
            RedisLimiter(redis.Redis(port=1), 10, name=name)
        assert info.value.param == "name"
        python.append(str(info.value))
    changes = [(None, (20,), {}, "name"), ("n", (20,), {"algorithm": "fixed_window"}, "algorithm"),
               ("n", (-1,), {}, "rate"), ("n", ("1/day",), {"burst": 200}, "burst")]
    for name, args, kwargs, param in changes:
        store = RedisLimiter(redis.Redis(port=1), 10, name=name)
        with pytest.raises(cellrate.InvalidArgument) as info:
            store.reconfigure(*args, **kwargs)
        assert info.value.param == param
        assert store.limit == cellrate.Limit(10)  # nothing changed
        python.append(str(info.value))
    lua = lua_run(interpreter, f"""
        local store = require("cellrate.redis")
        local client = {{ evalsha = print, eval = print, script = print }}
        local function show(ok, err)
            assert(not ok)
            print(tostring(err))
        end
        for _, name in ipairs({lua_literal(BAD_NAMES)}) do
            show(pcall(store.limiter, client, 10, {{ name = name }}))
        end
        show(pcall(store.limiter(client, 10).reconfigure, store.limiter(client, 10), 20))
        local named = store.limiter(client, 10, {{ name = "n" }})
        show(pcall(named.reconfigure, named, 20, {{ algorithm = "fixed_window" }}))
        show(pcall(named.reconfigure, named, -1))
        show(pcall(named.reconfigure, named, "1/day", {{ burst = 200 }}))
        assert(named.limit.rate == 10 and named.burst == 10)
    """).splitlines()
    assert [re.sub(r"^[^:]*:\d+: ", "", line) for line in lua] == python


# The requests both faces make for the same limits and calls: every word of
# KEYS and ARGV, as the client sends it. Limits: (rate, period, burst,
# algorithm, prefix, name); calls: (method, limits, key, cost, now), and
# ("reconfigure", [limit], rate, burst, None): a live change of a named limit.
WIRE_LIMITS = [
    ("10/s", None, 20, "gcra", "cellrate:", None),
    (7, 3, 5, "token_bucket", "t:", "api"),
    (100, 60, None, "fixed_window", "w:", None),
    (5, 0.3, None, "sliding_window", "", "free_name.v2"),
    ("1/day", None, 100, "gcra", "d:", "daily"),
]
WIRE_NOWS = [None, 0.0, 1.5, 1234567.0000000005, 1.7e9 + 0.123456789]
WIRE_CALLS = [
    (method, [limit], key, cost, now)
    for limit in range(len(WIRE_LIMITS))
    for method in ("check", "allow", "peek", "refund", "charge", "take")
    for key, cost in (("user:42", 1), ("ключ", 3))
    for now in WIRE_NOWS
] + [("check_all", limits, "{user:7}", cost, now)
     for limits in ([0, 1, 2, 3], [4, 0], [2])
     for cost in (1, 2)
     for now in WIRE_NOWS]
# After a live change, each limit sends its new limit under its keys of old.
WIRE_CALLS += [("reconfigure", [1], "30/minute", 7, None), ("reconfigure", [4], 2.5, 3, None),
               ("reconfigure", [3], 9, None, None)]
WIRE_CALLS += [call for call in WIRE_CALLS
               if call[0] in ("check", "refund", "charge", "take") and set(call[1]) <= {1, 3, 4}]
# Costs past 2^53, which only Lua 5.4's integers carry (a LuaJIT number cannot).
WIRE_CALLS_INT64 = [("check", [0], "big", 2**53 + 1, None),
                    ("charge", [2], "big", 2**63 - 1, None), ("take", [3], "big", 2**53 + 1, 1.5),
                    ("check_all", [0, 1], "big", 2**53 + 1, 2.5)]


def lua_literal(value) -> str:
    if value is None:
        return "nil"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(v) for v in value) + "}"
    return repr(value)


def python_wire(calls: list) -> list:
    encode = redis.connection.Encoder("utf-8", "strict", False).encode
    sent: list = []

    def recorder(*command):
        assert command[0] == "EVALSHA"
        sent.append(" ".join(encode(word).hex() for word in command[2:]))
        mode = int(command[3 + int(command[2])])
        if mode in (cr_redis.ALLOW, cr_redis.TAKE, cr_redis.REFUND):
            return 1
        return [1, 0, 0, 0, 1, 0] if mode == cr_redis.CHARGE else [1, 0, 0, 0, 1]

    limiters, client = [], redis.Redis(port=1)  # never connected
    for rate, period, burst, algorithm, prefix, name in WIRE_LIMITS:
        limiter = RedisLimiter(client, rate, period, burst=burst,
                               algorithm=algorithm, prefix=prefix, name=name)
        limiter._run = recorder  # type: ignore[method-assign]
        limiters.append(limiter)
    for method, limits, key, cost, now in calls:
        if method == "reconfigure":
            limiters[limits[0]].reconfigure(key, burst=cost)
        elif method == "check_all":
            cr_redis.check_all([(limiters[i], key) for i in limits], cost, now=now)
        else:
            getattr(limiters[limits[0]], method)(key, cost, now=now)
    return sent


# Lua: `client`, which prints the words of each EVALSHA after the SHA in hex, one call a
# line, and answers what `reply(...)` (defined before) returns for them.
LUA_RECORDING_CLIENT = """
        local client = { script = function() return "sha" end, eval = error }
        function client:evalsha(_, ...)
            local words = {}
            for i = 1, select("#", ...) do
                words[i] = tostring((select(i, ...))):gsub(".", function(c)
                    return string.format("%02x", c:byte())
                end)
            end
            print(table.concat(words, " "))
            return reply(...)
        end
"""


def lua_wire(interpreter: str, calls: list) -> list:
    limits = ", ".join(
        f"store.limiter(client, {lua_literal(rate)}, {{ period = {lua_literal(period)}, "
        f"burst = {lua_literal(burst)}, algorithm = {lua_literal(algorithm)}, "
        f"prefix = {lua_literal(prefix)}, name = {lua_literal(name)} }})"
        for rate, period, burst, algorithm, prefix, name in WIRE_LIMITS)
    listed = ",\n".join(
        f"{{ {lua_literal(method)}, {lua_literal([i + 1 for i in limits])}, {lua_literal(key)}, "
        f"{lua_literal(cost)}, {lua_literal(now)} }}" for method, limits, key, cost, now in calls)
    return lua_run(interpreter, f"""
        local store = require("cellrate.redis")
        -- admits (allow answers 1 alone, a refund and a take a count; a charge
        -- answers a sixth field, clipped)
        local function reply(...)
            local mode = select(2 + ..., ...)
            if mode == "2" or mode == "3" or mode == "5" then
                return 1
            end
            return mode == "4" and {{ 1, 0, 0, 0, 1, 0 }} or {{ 1, 0, 0, 0, 1 }}
        end
        {LUA_RECORDING_CLIENT}
        local limiters = {{ {limits} }}
        for _, call in ipairs({{ {listed} }}) do
            local method, limits, key, cost, now = call[1], call[2], call[3], call[4], call[5]
            if method == "reconfigure" then
                limiters[limits[1]]:reconfigure(key, {{ burst = cost }})
            elseif method == "check_all" then
                local items = {{}}
                for i, index in ipairs(limits) do
                    items[i] = {{ limiters[index], key }}
                end
                assert(store.check_all(items, cost, now))
            else
                assert(limiters[limits[1]][method](limiters[limits[1]], key, cost, now))
            end
        end
    """).splitlines()


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_the_faces_send_the_same_keys_and_argv(interpreter):
    calls = WIRE_CALLS + (WIRE_CALLS_INT64 if interpreter == "lua5.4" else [])
    sent = [call for call in calls if call[0] != "reconfigure"]  # a change sends nothing
    python = python_wire(calls)
    assert len(python) == len(sent)
    lua = lua_wire(interpreter, calls)
    assert len(lua) == len(sent)
    for call, (python_words, lua_words) in enumerate(zip(python, lua)):
        assert lua_words == python_words, sent[call]


class _ProbeSucceedsAfterRead:
    """A store's availability whose probe succeeds (Redis decides again) right after the
    decision's `nth` read of it: the worst moment for a decision that reads it more than
    once, forced instead of hoped for."""

    def __init__(self, real, nth: int):
        vars(self).update(real=real, left=nth)

    def __getattr__(self, name):
        value = getattr(self.real, name)
        vars(self)["left"] -= 1
        if self.left == 0:
            self.real.probed(None)  # what the probe thread does when Redis answers
        return value

    def __setattr__(self, name, value):
        setattr(self.real, name, value)


# (store class, the call, whether it is awaited) for every store that decides
_DECISIONS = [
    ("limiter check", RedisLimiter, lambda s: s.check("k"), False),
    ("limiter take", RedisLimiter, lambda s: s.take("k", 2), False),
    ("async limiter check", AsyncRedisLimiter, lambda s: s.check("k"), True),
    ("async limiter take", AsyncRedisLimiter, lambda s: s.take("k", 2), True),
    ("concurrency try_acquire", cr_redis.RedisConcurrency, lambda s: s.try_acquire("k"), False),
    ("async concurrency try_acquire", cr_redis.AsyncRedisConcurrency,
     lambda s: s.try_acquire("k"), True),
]


def _on_errors_answer(on_error: str, answer) -> bool:
    """`answer` (a Decision, a take's count, a slot or None) is what on_error says."""
    if isinstance(answer, cellrate.Decision):
        return answer.allowed is (on_error == "allow")
    if isinstance(answer, int):
        return answer == (2 if on_error == "allow" else 0)
    return (answer is not None) is (on_error == "allow")


def test_a_probe_succeeding_during_a_decision_never_escapes_it():
    """Redis comes back (the probe succeeds) between the decision's reads of whether Redis
    is down: the decision answers what it read, by on_error, and the next one asks Redis.
    Every store, every on_error, the probe landing after each of the decision's reads."""
    with redis_server() as srv:
        port = srv.port  # nothing listens there now: every call Redis is asked fails
    escaped, forced = [], 0
    for label, kind, call, awaited in _DECISIONS:
        for on_error in ("allow", "deny", "raise"):
            # an asyncio store lives in one loop, made in it (Python 3.9's asyncio objects
            # bind to the loop of their making)
            loop = asyncio.new_event_loop() if awaited else None
            try:
                forced += _force_the_probe(label, kind, call, on_error, port, loop, escaped)
            finally:
                if loop is not None:
                    loop.close()
    assert forced == len(_DECISIONS) * 3 * 4
    assert escaped == [], f"{len(escaped)} of {forced} escaped: {escaped[:6]}"


def _force_the_probe(label, kind, call, on_error, port, loop, escaped) -> int:
    """The probe forced to succeed after each of a decision's first four reads of the
    outage, for one store; each escape noted in `escaped`; returns the count forced."""
    options = {"lease": 30} if "concurrency" in label else {}

    def made():
        client = (redis.asyncio.Redis(port=port, retry=redis.asyncio.retry.Retry(NoBackoff(), 0))
                  if loop is not None else client_for(port))
        return kind(client, 10, on_error=on_error, timeout=0.5, **options)

    store = made() if loop is None else loop.run_until_complete(_made_in_loop(made))
    store._start_probe = lambda: None  # the test plays the probe
    real = store._availability
    for nth in range(1, 5):
        with contextlib.suppress(RedisUnavailable):
            _answer_of(call, store, loop)  # Redis is asked, fails: the store is down
        store._availability = _ProbeSucceedsAfterRead(real, nth)
        try:
            answer = _answer_of(call, store, loop)
        except RedisUnavailable:
            answer = "raised"
        except Exception as error:  # noqa: BLE001 - what must never reach a caller
            escaped.append((label, on_error, nth, repr(error)))
            continue
        finally:
            store._availability = real
        if on_error == "raise":
            assert answer == "raised", (label, nth, answer)
        else:
            assert _on_errors_answer(on_error, answer), (label, on_error, nth, answer)
    return 4


async def _made_in_loop(make):
    return make()


def _answer_of(call, store, loop):
    answer = call(store)
    return answer if loop is None else loop.run_until_complete(_awaited(answer))


async def _awaited(awaitable):
    return await awaitable


def test_an_invented_refusal_says_the_same_in_every_field():
    with redis_server() as srv:
        port = srv.port
    limiter = RedisLimiter(client_for(port), 10, on_error="deny")
    try:
        for _ in range(3):
            decision = limiter.check("k")
            assert not decision.allowed and decision.reset_after == decision.retry_after > 0
            # the time to the next probe, never below the first back-off (the core's
            # answer, the Lua store's too): a client told to retry sooner would find
            # Redis not yet tried again
            assert cr_redis.FIRST_BACKOFF_S <= decision.retry_after <= cr_redis.MAX_BACKOFF_S
            headers = decision.headers()
            assert headers["RateLimit"].endswith(f";t={headers['Retry-After']}"), headers
    finally:
        limiter.close()


def test_a_script_flush_storm_never_reaches_the_caller(client, server):
    limiter = RedisLimiter(client, 1000, burst=10_000, on_error="raise")
    flusher = client_for(server.port)
    stop = threading.Event()

    def storm():
        while not stop.is_set():
            flusher.script_flush()
            time.sleep(0.0005)

    thread = threading.Thread(target=storm)
    thread.start()
    try:
        for i in range(300):
            assert limiter.check("k", now=1.0).remaining == 9_999 - i
    finally:
        stop.set()
        thread.join(10)


def test_script_flush_mid_run(client):
    limiter = RedisLimiter(client, 10, burst=100, on_error="raise")
    for i in range(10):
        assert limiter.check("k", now=1.0).remaining == 99 - i
        if i == 4:
            client.script_flush()
    assert limiter.check("k", now=1.0).remaining == 89


def test_async_store_honours_on_error():
    async def run(srv):
        aclient = async_client_for(srv.port)
        try:
            deny = AsyncRedisLimiter(aclient, 10, on_error="deny")
            rais = AsyncRedisLimiter(aclient, 10, on_error="raise")
            assert await deny.allow("k")
            srv.kill()
            assert not await deny.allow("k")
            with pytest.raises(RedisUnavailable):
                await rais.check("k")
            srv.start()
            await asyncio.sleep(cr_redis.MAX_BACKOFF_S + 0.1)
            deadline = time.monotonic() + 30
            while True:  # the first calls may meet connections the crash broke
                try:
                    decision = await rais.check("k")
                    break
                except RedisUnavailable:
                    assert time.monotonic() < deadline, "Redis never decided again"
                    await asyncio.sleep(0.1)
            assert decision.allowed
        finally:
            await aclient.aclose()

    srv = RedisServer()
    try:
        srv.start()
        asyncio.run(run(srv))
    finally:
        srv.stop()


# --------------------------------------------------------------------------
# Redis Cluster: three masters


@pytest.fixture(scope="module")
def cluster():
    nodes = [RedisServer(cluster=True) for _ in range(3)]
    try:
        for node in nodes:
            node.start()
        subprocess.run([REDIS_CLI, "--cluster", "create",
                        *[f"127.0.0.1:{n.port}" for n in nodes],
                        "--cluster-replicas", "0", "--cluster-yes"],
                       check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 20
        while not all("cluster_state:ok" in n.cli("cluster", "info") for n in nodes):
            assert time.monotonic() < deadline, "the cluster did not come up"
            time.sleep(0.1)
        seeding = redis.cluster.RedisCluster(host="127.0.0.1", port=nodes[0].port,
                                             socket_timeout=10)
        in_service(seeding)  # every slot's wipe marker, on its node
        seeding.close()
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def test_cluster_spreads_keys_and_decides_exactly(cluster):
    rc = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port,
                                    socket_timeout=2, socket_connect_timeout=2)
    try:
        store = RedisLimiter(rc, 5, burst=3, on_error="raise")
        core = cellrate.KeyedLimiter(5, burst=3)
        rng = random.Random(3)
        now = 50.0
        for _ in range(1500):
            key = f"user:{rng.randrange(300)}"
            now += rng.uniform(0, 0.02)
            cost = rng.choice([0, 1, 1, 2, 4])
            assert store.check(key, cost, now=now) == core.check(key, cost, now=now)
        sizes = [int(n.cli("dbsize")) for n in cluster]
        assert all(size > 20 for size in sizes), sizes
        ip = RedisLimiter(rc, 10, burst=2, prefix="ip:", on_error="raise")
        assert cr_redis.check_all([(store, "{u7}"), (ip, "{u7}:1.2.3.4")], now=now).allowed
        for node in cluster:
            node.cli("script", "flush")
        assert store.check("user:1", 0, now=now).allowed  # reloaded on whichever node
    finally:
        rc.close()


def test_cluster_through_the_asyncio_client(cluster):
    async def run():
        rc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster[1].port)
        try:
            # a generous timeout: the first call also discovers the cluster (a loaded machine)
            store = AsyncRedisLimiter(rc, 5, burst=3, on_error="raise", prefix="async:", timeout=5)
            core = cellrate.KeyedLimiter(5, burst=3)
            for i in range(300):
                key, now = f"user:{i % 60}", 10.0 + i * 0.01
                assert await store.check(key, now=now) == core.check(key, now=now)
            decision = await cr_redis.check_all_async(
                [(store, "{u8}"), (store, "{u8}:search")], now=20.0)
            assert decision.allowed and decision.remaining == 2
        finally:
            await rc.aclose()

    asyncio.run(run())


def _slot_words(keys) -> list:
    """What a refusal of keys in several slots names: each key and its slot."""
    return [f"'{key}' {redis.crc.key_slot(key.encode())}" for key in keys]


CROSS_SLOT_LUA = """
    package.path = package.path .. ";/usr/share/lua/5.3/?.lua"
    local store = require("cellrate.redis")
    local client = require("redis").connect("127.0.0.1", %d)
    local user = store.limiter(client, 10, { name = "user", on_error = "allow" })
    local ip = store.limiter(client, 10, { name = "ip", on_error = "allow" })
    print(select(2, pcall(function()
        local allowed = store.check_all({ { user, "u1" }, { ip, "1.2.3.4" } })
        return allowed
    end)))
    print(store.check_all({ { user, "{u1}" }, { ip, "{u1}:1.2.3.4" } }))
"""


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_keys_in_several_cluster_slots_are_a_mistake_not_an_outage(cluster, interpreter):
    """check_all over keys of several hash slots cannot run in a Cluster (one script call's
    keys must share a slot): it raises, naming the keys' slots and the hash-tag fix,
    whatever on_error says, and Redis is not taken for down. A cluster client refuses
    it before sending (the store first); a plain client meets the node's CROSSSLOT
    reply; the Lua face too, in the same words."""
    keys = ["cellrate:user:u1", "cellrate:ip:1.2.3.4"]
    rc = redis.cluster.RedisCluster(host="127.0.0.1", port=cluster[0].port,
                                    socket_timeout=2, socket_connect_timeout=2)
    plain = client_for(cluster[0].port)
    messages = []
    try:
        for client in (rc, plain):
            user = RedisLimiter(client, 10, name="user", on_error="allow")
            ip = RedisLimiter(client, 10, name="ip", on_error="allow")
            with pytest.raises(cellrate.InvalidArgument) as info:
                cr_redis.check_all([(user, "u1"), (ip, "1.2.3.4")])
            assert info.value.param == "items"
            messages.append(str(info.value))
            assert user._availability.outage is None
        assert cr_redis.check_all([(user, "{u1}"), (ip, "{u1}:1.2.3.4")]).allowed
    finally:
        rc.close()
        plain.close()

    async def asyncio_cluster():
        arc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster[1].port)
        try:
            user = AsyncRedisLimiter(arc, 10, name="user", on_error="allow", timeout=5)
            ip = AsyncRedisLimiter(arc, 10, name="ip", on_error="allow", timeout=5)
            with pytest.raises(cellrate.InvalidArgument) as info:
                await cr_redis.check_all_async([(user, "u1"), (ip, "1.2.3.4")])
            messages.append(str(info.value))
        finally:
            await arc.aclose()

    asyncio.run(asyncio_cluster())
    lua = lua_run(interpreter, CROSS_SLOT_LUA % cluster[0].port).splitlines()
    assert lua[1].startswith("true"), lua  # a hash tag: decided
    assert re.match(r"\(command line\):\d+: ", lua[0]), lua[0]  # raised at the caller's line
    messages.append(lua[0].split(": ", 1)[1])
    assert messages[0].startswith("items must name keys of one Redis Cluster hash slot")
    assert "hash tag" in messages[0] and messages[0].endswith(", ".join(_slot_words(keys)))
    assert messages == [messages[0]] * 4, messages


# --------------------------------------------------------------------------
# Bad input


# --------------------------------------------------------------------------
# The deny cache


def test_a_refusal_is_answered_locally_until_its_retry_after_passes(client):
    limiter = RedisLimiter(client, 20, burst=2, on_error="raise")  # 50 ms per unit
    for attempt in range(100):  # a pause as long as the refusal's wait in between: again
        key = f"k{attempt}"
        sent = counting(client)
        assert limiter.allow(key, 2)
        asked = time.monotonic()
        refused = limiter.check(key)
        answers = [limiter.check(key) for _ in range(20)] + [limiter.peek(key, 2)]
        if not refused.allowed and time.monotonic() < asked + refused.retry_after:
            break  # every answer came while the refusal stood
    assert not refused.allowed and 0 < refused.retry_after <= 0.05
    assert len(sent) == 2  # no round trip: the state only grows, Redis would refuse too
    assert not any(a.allowed for a in answers)
    assert all(0 < a.retry_after <= refused.retry_after for a in answers[:-1])
    # a larger cost waits one emission interval (50 ms) more per unit
    assert refused.retry_after < answers[-1].retry_after <= refused.retry_after + 0.05
    assert answers[-2].retry_after <= answers[0].retry_after  # aged, not frozen
    assert answers[0].limit == refused.limit and answers[0].remaining == 0
    assert limiter.peek(key, 0).allowed and len(sent) == 3  # a smaller cost asks Redis
    time.sleep(refused.retry_after + 0.01)
    assert limiter.allow(key) and len(sent) == 4  # asked again once retry_after passed


def test_a_remembered_refusal_answers_only_what_it_implies(client):
    """A cost-1 refusal (retry 3600 s) must not answer an unfittable cost (never) nor
    a larger one with its own wait; the answers are those of Redis without the cache."""
    cached = RedisLimiter(client, 1, 3600, burst=3, on_error="raise")
    plain = RedisLimiter(client, 1, 3600, burst=3, on_error="raise", deny_cache=False)
    assert cached.allow("k", 3)
    assert not cached.check("k").allowed  # remembered
    assert cached.check("k", 4).retry_after == math.inf == plain.peek("k", 4).retry_after
    one, two = cached.check("k", 1), cached.check("k", 2)
    truth = plain.peek("k", 2)
    assert not two.allowed and two.remaining == truth.remaining
    # one more emission interval, less the real time between the two calls (a loaded machine)
    assert abs(two.retry_after - one.retry_after - 3600) < 0.05
    assert abs(two.retry_after - truth.retry_after) < 1.0
    window = RedisLimiter(client, 2, 3600, algorithm="fixed_window", on_error="raise")
    assert window.allow("w", 2) and not window.check("w").allowed
    assert window.check("w", 3).retry_after == math.inf


def test_a_decorator_on_a_redis_limiter_refuses_an_unfittable_cost_at_once(client):
    limiter = RedisLimiter(client, 1, 3600, burst=1, on_error="raise")
    assert limiter.allow("k") and not limiter.allow("k")  # a cost-1 refusal, remembered

    @cellrate.limit(limiter=limiter, key=lambda: "k", cost=4)
    def work():
        return "done"

    with pytest.raises(cellrate.RateLimited) as info:
        work()
    assert info.value.retry_after == math.inf


def test_refund_gives_back_what_was_taken(client):
    limiter = RedisLimiter(client, 10, burst=5, on_error="raise")
    assert limiter.check("k", 5).remaining == 0
    assert not limiter.check("k").allowed  # remembered: the refund must forget it
    limiter.refund("k", 2)
    assert limiter.check("k").remaining == 1
    limiter.refund("k", 100)  # never better than idle
    assert limiter.peek("k").remaining == 4
    limiter.refund("never-seen")  # an absent key has nothing to give back
    assert client.exists(limiter.redis_key("never-seen")) == 0
    ttl = client.pttl(limiter.redis_key("k"))
    assert limiter.check("k", 3).allowed
    limiter.refund("k", 1)
    assert 0 < client.pttl(limiter.redis_key("k")) <= max(ttl, 1000)  # the key still expires


def test_refund_in_asyncio(server):
    async def run():
        aclient = async_client_for(server.port)
        limiter = AsyncRedisLimiter(aclient, 10, burst=5, on_error="raise", prefix="arefund:")
        try:
            assert (await limiter.check("k", 5)).remaining == 0
            await limiter.refund("k", 3)
            assert (await limiter.peek("k", 0)).remaining == 3
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_reset_forgets_a_remembered_refusal(client):
    limiter = RedisLimiter(client, 1, 3600, burst=1, on_error="raise")
    assert limiter.allow("k") and not limiter.allow("k")
    limiter.reset("k")
    assert limiter.allow("k")


def test_a_reset_elsewhere_is_seen_within_a_second(client):
    """A refusal with an hour's wait (a quota's lasts to the period's end) answers
    locally for at most CR_REDIS_DENY_CACHE_MAX_NS: then Redis is asked again, and a
    reset made by another host admits."""
    here = RedisLimiter(client, 1, 3600, burst=1, on_error="raise")
    elsewhere = RedisLimiter(client, 1, 3600, burst=1, on_error="raise")
    assert here.allow("k") and not here.allow("k")
    sent = counting(client)
    elsewhere.reset("k")
    assert not here.allow("k") and len(sent) == 0  # kept: no script call
    time.sleep(1.0)
    assert here.allow("k") and len(sent) == 1


def test_refusals_are_not_remembered_without_the_cache_or_off_the_servers_clock(client):
    off = RedisLimiter(client, 1, 3600, burst=1, on_error="raise", deny_cache=False)
    explicit = RedisLimiter(client, 1, 3600, burst=1, on_error="raise", prefix="now:")
    sent = counting(client)
    for limiter, now in ((off, None), (explicit, 100.0)):
        assert limiter.allow("k", now=now)
        for _ in range(3):
            assert not limiter.allow("k", now=now)
    assert len(sent) == 8
    # several limits in one call: asked every time, each remembered refusal left alone
    assert not cr_redis.check_all([(off, "k"), (explicit, "k")]).allowed
    assert len(sent) == 9


def test_remembered_refusals_stay_bounded(client, monkeypatch):
    monkeypatch.setattr(cr_redis, "MAX_REFUSALS", 50)
    limiter = RedisLimiter(client, 1, 3600, burst=1, on_error="raise")
    for i in range(120):
        assert limiter.allow(f"k{i}") and not limiter.allow(f"k{i}")
        assert len(limiter._refusals) <= 50


def test_a_remembered_refusal_agrees_with_redis_under_contention(server):
    """Two limiters (two hosts) on one key, one remembering refusals: Redis refuses
    every call it refuses locally, and admissions stay within the limit."""
    a = RedisLimiter(client_for(server.port), 20, burst=2, on_error="raise", prefix="two:")
    b = RedisLimiter(client_for(server.port), 20, burst=2, on_error="raise", prefix="two:",
                     deny_cache=False)
    started, admitted, compared = time.monotonic(), 0, 0
    books = Books(time.time(), 1 / 20, 2 / 20)  # CLOCK_REALTIME: the server's TIME here
    while time.monotonic() - started < 1.0 or compared <= 10:
        assert time.monotonic() - started < 60, "never compared"
        for limiter in (a, b):
            asked, before = time.monotonic(), time.time()
            decision = limiter.check("k")
            books.record(before, time.time(), decision.allowed)
            admitted += decision.allowed
            if limiter is a and not decision.allowed:
                probe = b.peek("k")
                if time.monotonic() < asked + decision.retry_after:  # still within it
                    assert not probe.allowed
                    compared += 1
    elapsed = time.monotonic() - started
    # at least what the key's books say (a pause of the machine forfeits time)
    assert books_fewest([books], slack=1 / 20) <= admitted <= 2 + 20 * elapsed + 1
    assert compared > 10


def test_bad_input_names_the_parameter(client, server):
    async def made_in_a_loop():  # an asyncio client wants a loop to be made in (3.9)
        return async_client_for(server.port)

    async_client = asyncio.run(made_in_a_loop())
    cases = [
        (lambda: RedisLimiter(object(), 10), cellrate.InvalidArgumentType, "client"),
        (lambda: RedisLimiter(async_client, 10), cellrate.InvalidArgumentType, "client"),
        (lambda: AsyncRedisLimiter(client, 10), cellrate.InvalidArgumentType, "client"),
        (lambda: RedisLimiter(client, 10, on_error="ignore"), cellrate.InvalidArgument, "on_error"),
        (lambda: RedisLimiter(client, 10, deny_cache=1), cellrate.InvalidArgumentType, "deny_cache"),
        (lambda: RedisLimiter(client, 10, timeout="1"), cellrate.InvalidArgumentType, "timeout"),
        (lambda: RedisLimiter(client, 10, timeout=True), cellrate.InvalidArgumentType, "timeout"),
        (lambda: RedisLimiter(client, 10, timeout=0), cellrate.InvalidArgument, "timeout"),
        (lambda: RedisLimiter(client, 10, timeout=math.inf), cellrate.InvalidArgument, "timeout"),
        (lambda: RedisLimiter(client, 10, timeout=math.nan), cellrate.InvalidArgument, "timeout"),
        (lambda: RedisLimiter(client, 10).refund("k", -1), cellrate.InvalidArgument, "cost"),
        (lambda: RedisLimiter(client, 10, prefix=b"x:"), cellrate.InvalidArgumentType, "prefix"),
        (lambda: RedisLimiter(client, 10, prefix="{x}:"), cellrate.InvalidArgument, "prefix"),
        (lambda: RedisLimiter(client, "1/day", burst=200), cellrate.InvalidArgument, "burst"),
        (lambda: RedisLimiter(client, -1), cellrate.InvalidArgument, "rate"),
        (lambda: RedisLimiter(client, 10, algorithm="leaky"), cellrate.InvalidArgument, "algorithm"),
        (lambda: RedisLimiter(client, 10, name=5), cellrate.InvalidArgumentType, "name"),
        (lambda: RedisLimiter(client, 10, name="{tag}"), cellrate.InvalidArgument, "name"),
        (lambda: RedisLimiter(client, 10).reconfigure(20), cellrate.InvalidArgument, "name"),
        (lambda: RedisLimiter(client, 10, name="n").reconfigure(20, burst=0),
         cellrate.InvalidArgument, "burst"),
        (lambda: RedisLimiter(client, 10).allow(3), cellrate.InvalidArgumentType, "key"),
        (lambda: RedisLimiter(client, 10).allow("k", -1), cellrate.InvalidArgument, "cost"),
        (lambda: RedisLimiter(client, 10).allow("k", now=-1.0), cellrate.InvalidArgument, "now"),
        (lambda: cr_redis.check_all([]), cellrate.InvalidArgument, "items"),
        (lambda: cr_redis.check_all([(cellrate.KeyedLimiter(1), "k")]), cellrate.InvalidArgumentType,
         "items"),
    ]
    for make, error, param in cases:
        with pytest.raises(error) as info:
            make()
        assert info.value.param == param, info.value
        assert param in str(info.value)
    assert client.dbsize() == MARKERS  # nothing reached Redis (the markers in_service wrote)


def test_import_cellrate_does_not_import_redis():
    code = "import sys, cellrate; assert 'redis' not in sys.modules; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout == "ok\n"


def test_the_store_passes_mypy_strict(tmp_path):
    pytest.importorskip("mypy")
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "-p", "cellrate.redis"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_asgi_middleware_fails_open_on_a_full_redis(server):
    """AsyncRedisLimiter(on_error="allow") behind the middleware: OOM serves requests."""
    import cellrate.asgi

    async def endpoint(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def request(app) -> int:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": "/", "raw_path": b"/",
                 "query_string": b"", "root_path": "", "headers": [],
                 "client": ("192.0.2.1", 40000), "server": ("testserver", 80)}
        statuses = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        await app(scope, receive, send)
        return statuses[0]

    async def run():
        aclient = async_client_for(server.port)
        limiter = AsyncRedisLimiter(aclient, "100/minute", on_error="allow", prefix="asgi:")
        app = cellrate.asgi.RateLimitMiddleware(endpoint, limiter)
        try:
            assert await request(app) == 200
            await aclient.config_set("maxmemory", "1")
            assert [await request(app) for _ in range(5)] == [200] * 5
        finally:
            await aclient.config_set("maxmemory", "0")
            await limiter.aclose()
            await aclient.aclose()

    asyncio.run(run())


# --------------------------------------------------------------------------
# The store's refusals are the core's


def _refused_limits():
    """(args, kwargs) of each refused limit of tests/vectors/limits.txt, as cellrate.Limit
    takes them."""
    for line in (ROOT / "tests" / "vectors" / "limits.txt").read_text().splitlines():
        fields = line.split("|", 1)[0].split()
        if not fields or fields[0] not in ("number", "text", "algorithm"):
            continue
        if fields[0] == "text" and fields[1] != "OK":
            yield (line.split("|", 1)[1], None if fields[4] == "0" else 1.0), {}
        elif fields[0] == "number" and fields[4] != "OK":
            yield ((float(fields[1]), None if fields[2] == "-" else float(fields[2])),
                   {} if fields[3] == "-" else {"burst": int(fields[3])})
        elif fields[0] == "algorithm" and fields[1] != "-" and fields[5] != "OK":
            yield ((float(fields[2]), None if fields[3] == "-" else float(fields[3])),
                   {"algorithm": fields[1],
                    **({} if fields[4] == "-" else {"burst": int(fields[4])})})


def _error_of(call):
    try:
        call()
    except cellrate.CellrateError as error:
        return type(error), error.param, str(error)
    return None


@pytest.mark.parametrize("store", [RedisLimiter, AsyncRedisLimiter])
def test_a_bad_limit_is_refused_in_the_cores_words(store):
    """No server: the limit is refused before any call, exactly as cellrate.Limit refuses it."""
    async def made_in_a_loop():  # an asyncio client wants a loop to be made in (3.9)
        return redis.asyncio.Redis(port=1)

    client = redis.Redis(port=1) if store is RedisLimiter else asyncio.run(made_in_a_loop())
    compared = 0
    for args, kwargs in _refused_limits():
        expected = _error_of(lambda args=args, kwargs=kwargs: cellrate.Limit(*args, **kwargs))
        assert expected is not None, (args, kwargs)
        made = _error_of(lambda args=args, kwargs=kwargs: store(client, *args, **kwargs))
        assert made == expected, (args, kwargs)
        compared += 1
    assert compared >= 30


@pytest.mark.parametrize("key, cost, now", [
    (5, 1, None), (None, 1, None), ("k", -1, None), ("k", 1.5, None), ("k", True, None),
    ("k", 1, -1.0), ("k", 1, math.nan), ("k", 1, "0"), ("k", 1, 2.0**62 / 1e9),
])
def test_a_bad_key_cost_or_now_is_refused_in_the_cores_words(key, cost, now):
    """No server: refused before any call, exactly as a core store refuses it."""
    limiter = RedisLimiter(redis.Redis(port=1), 10, on_error="raise")
    expected = _error_of(lambda: cellrate.KeyedLimiter(10).peek(key, cost, now=now))
    assert expected is not None
    for call in (limiter.check, limiter.allow, limiter.peek, limiter.refund):
        assert _error_of(lambda call=call: call(key, cost, now=now)) == expected


# --------------------------------------------------------------------------
# Costs known after the fact: charge and take in the script (docs/cost.md)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_debt_drains_at_exactly_the_rate(client, algorithm):
    """A charge into debt through Redis, then checks 1 ns before and at each instant the
    core's own limiter admits: the same decisions, every one, and the first admission
    at the charge's retry_after."""
    burst = 5 if algorithm in ("gcra", "token_bucket") else None
    store = RedisLimiter(client, 10, 1, burst=burst, algorithm=algorithm, on_error="raise")
    core = cellrate.KeyedLimiter(10, 1, burst=burst, algorithm=algorithm)
    start_ns = 250_000_000  # times below 2^50 ns: a float carries each to the ns
    charged = store.charge("d", 42, now=start_ns / 1e9)
    assert charged == core.charge("d", 42, now=start_ns / 1e9) and not charged.allowed
    at_ns = start_ns + round(charged.retry_after * 1e9)
    assert not store.peek("d", now=(at_ns - 1) / 1e9).allowed
    admissions = []
    for step in range(12):
        now = (at_ns + step * 50_000_000) / 1e9
        got = store.check("d", now=now)
        assert got == core.check("d", now=now), now
        admissions += [now] if got.allowed else []
    assert admissions[0] == at_ns / 1e9 and len(admissions) >= 2


def test_a_charge_past_the_debt_bound_is_clipped_there(client):
    """The script's bound, the core's default max_debt: a charge commits at most one
    burst (a window's rate) beyond the limit, in whole units; past it, clipped there and
    says so: one bad figure (2**63 - 1) costs a key one more burst, not 104 days. A gcra
    TAT also stays within MAX_DEBT_NS after now (a burst whose two taus pass it)."""
    store = RedisLimiter(client, 1, 1, burst=1, on_error="raise", name="bound")
    key = store.redis_key("b")
    got = store.charge("b", 2**63 - 1, now=0)
    assert (got.allowed, got.clipped, got.retry_after, stored_state(client, key)) == (
        False, True, 2.0, 2 * 10**9)
    assert got == cellrate.KeyedLimiter(1, 1, burst=1).charge("b", 2**63 - 1, now=0)
    assert not store.check("b", now=1.999).allowed and store.check("b", now=2).allowed
    wide = RedisLimiter(client, 1, 1, burst=5_000_000, on_error="raise", name="ceiling")
    key = wide.redis_key("b")
    to_bound = cr_redis.MAX_DEBT_NS // 10**9
    got = wide.charge("b", to_bound, now=0)  # exactly to the ceiling: not clipped
    assert (got.allowed, got.clipped, stored_state(client, key)) == (False, False, cr_redis.MAX_DEBT_NS)
    got = wide.charge("b", 1, now=0)
    assert (got.allowed, got.clipped, stored_state(client, key)) == (False, True, cr_redis.MAX_DEBT_NS)
    assert not wide.check("b", now=1).allowed and wide.take("b", 10, now=1) == 0
    got = store.charge("server clock", 2**63 - 1)  # written with an expiry: the bound's
    assert got.clipped and 1_000 < client.pttl(store.redis_key("server clock")) <= 2_000
    window = RedisLimiter(client, 100, 1e-6, algorithm="fixed_window", on_error="raise")
    got = window.charge("w", 2**63 - 1, now=1.0)
    assert got.clipped and got.remaining == 0 and not got.allowed
    assert stored_state(client, window.redis_key("w")) == 10**9 + 1000 + 200  # twice the rate


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("max_debt", [0, 3, 40, None])
def test_a_charge_owes_at_most_the_limits_max_debt(client, algorithm, max_debt):
    """max_debt, as in process: a charge leaves a key owing at most that many units
    beyond its limit (the script reads it from the request); the same decisions as the
    core's at each instant, and the same after a live change that keeps it."""
    options = {"burst": 5} if algorithm in ("gcra", "token_bucket") else {}
    store = RedisLimiter(client, 10, 1, algorithm=algorithm, max_debt=max_debt,
                         on_error="raise", name=f"debt-{algorithm}-{max_debt}", **options)
    core = cellrate.KeyedLimiter(10, 1, algorithm=algorithm, max_debt=max_debt, **options)
    assert store.limit.max_debt == core.max_debt
    for now, cost in ((0.0, 2), (0.0, 30), (0.05, 100), (0.3, 1), (2.5, 7), (2.5, 2**62)):
        assert store.charge("k", cost, now=now) == core.charge("k", cost, now=now), (now, cost)
        assert store.peek("k", 1, now=now) == core.peek("k", 1, now=now), (now, cost)
    store.reconfigure(20, 1, **options)  # max_debt stays
    assert store.limit.max_debt == (core.max_debt if max_debt is not None else
                                    cellrate.Limit(20, 1, algorithm=algorithm, **options).max_debt)


def test_take_admits_what_fits_up_to_max_cost(client):
    store = RedisLimiter(client, 10, 1, burst=5, on_error="raise")
    assert [store.take("t", 3, now=0), store.take("t", 3, now=0), store.take("t", 3, now=0)] == [3, 2, 0]
    assert store.take("t", 3, now=0.25) == 2 and store.take("t", 0, now=9) == 0
    assert store.peek("t", 0, now=9).remaining == 5  # a take of 0 takes nothing


def _taker(port: int, ready, results, index: int) -> None:
    c = client_for(port)
    store = RedisLimiter(c, 1, 3600, burst=1000, name="take", on_error="raise")
    rng = random.Random(index)
    ready.wait()
    taken = calls = 0
    while True:
        got = store.take("shared", rng.randint(1, 7), now=100.0)  # no unit comes back
        calls += 1
        if got == 0:
            break
        taken += got
    results[2 * index: 2 * index + 2] = [taken, calls]


def test_take_under_four_processes_never_admits_more_than_fits(client, server):
    """Four processes take from one key at a frozen instant (nothing refills): the units
    taken, counted, add up to the burst exactly."""
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(4)
    results = context.Array("q", 8)
    workers = [context.Process(target=_taker, args=(server.port, ready, results, i))
               for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    taken, calls = results[0::2], results[1::2]
    print(f"take, 4 processes: {list(taken)} units in {list(calls)} calls")
    assert sum(taken) == 1000


def test_the_deny_cache_never_answers_a_charge_or_a_take(client):
    """A remembered refusal answers checks, never a charge (which commits whatever the
    state) or a take; a charge's refusal is not remembered."""
    store = RedisLimiter(client, 10, 1, burst=2)
    calls = counting(client)
    assert store.check("k", 2).allowed and not store.check("k", 2).allowed
    assert not store.check("k", 2).allowed and len(calls) == 2  # the cache answered
    assert not store.charge("k", 2).allowed and len(calls) == 3
    assert store.take("k", 2) == 0 and len(calls) == 4
    fresh = RedisLimiter(client, 10, 1, burst=2, name="fresh")
    assert not fresh.charge("f", 5).allowed and not fresh.check("f").allowed and len(calls) == 6
    assert stored_state(client, fresh.redis_key("f")) > 0


@pytest.mark.parametrize("on_error", ["allow", "deny", "raise"])
def test_a_charge_or_a_take_redis_cannot_decide_is_on_errors(on_error):
    """Where Redis cannot decide, on_error answers a charge as a check (the charge is
    lost) and a take as allow: max_cost, deny: 0, raise: RedisUnavailable."""
    with redis_server() as srv:
        port = srv.port
    store = RedisLimiter(client_for(port), 10, on_error=on_error)
    try:
        if on_error == "raise":
            for call in (lambda: store.charge("k", 3), lambda: store.take("k", 3)):
                with pytest.raises(RedisUnavailable):
                    call()
        else:
            assert store.charge("k", 3).allowed == (on_error == "allow")
            assert store.take("k", 3) == (3 if on_error == "allow" else 0)
    finally:
        store.close()


def test_the_async_store_charges_and_takes(server):
    async def run():
        c = async_client_for(server.port)
        store = AsyncRedisLimiter(c, 10, 1, burst=5, name="async", on_error="raise")
        core = cellrate.KeyedLimiter(10, 1, burst=5)
        try:
            for now in (0.0, 0.0, 0.3, 1.0):
                assert await store.charge("a", 4, now=now) == core.charge("a", 4, now=now)
                assert await store.take("a", 2, now=now) == core.take("a", 2, now=now)
            with pytest.raises(cellrate.InvalidArgument) as info:
                await store.take("a", -1)
            assert info.value.param == "max_cost"
        finally:
            await c.aclose()
    asyncio.run(run())


def test_the_script_charges_and_takes_one_key_only(client):
    script = client.register_script(cr_redis.SCRIPT)
    for mode in (cr_redis.CHARGE, cr_redis.TAKE):
        with pytest.raises(errors_of(client)[0].ResponseError, match="one limit"):
            script(keys=["a", "b"], args=[mode, 1, *([b"gcra", 1000, 5000, 5] * 2), 0])


BAD_AFTER_THE_FACT = [  # (the call, its arguments, the parameter named)
    ("charge", ("k", -1), "cost"), ("charge", ("k", 1.5), "cost"),
    ("take", ("k", -1), "max_cost"), ("take", ("k", 2.5), "max_cost"),
    ("take", ("k", True), "max_cost"),
]
BAD_MAX_COSTS = [  # (rate, burst, algorithm, max_cost, the parameter named)
    (10, 5, "gcra", 6, "burst"), (10, None, "fixed_window", 11, "rate"),
    (10, None, "sliding_window", 11, "rate"), (10, 5, "gcra", -1, "max_cost"),
]


@pytest.mark.parametrize("interpreter", ["lua5.4", "luajit"])
def test_bad_charges_takes_and_max_costs_get_the_same_words_in_both_faces(interpreter):
    python = []
    store = RedisLimiter(redis.Redis(port=1), 10, 1, burst=5, max_cost=5, name="n")
    for method, args, param in BAD_AFTER_THE_FACT:
        with pytest.raises((cellrate.InvalidArgument, cellrate.InvalidArgumentType)) as info:
            getattr(store, method)(*args)
        assert info.value.param == param
        python.append(str(info.value))
    for rate, burst, algorithm, max_cost, param in BAD_MAX_COSTS:
        with pytest.raises(cellrate.InvalidArgument) as info:
            RedisLimiter(redis.Redis(port=1), rate, 1, burst=burst, algorithm=algorithm,
                         max_cost=max_cost)
        assert info.value.param == param
        python.append(str(info.value))
    with pytest.raises(cellrate.InvalidArgument) as info:
        store.reconfigure(10, 1, burst=4)  # below the max_cost given
    assert info.value.param == "burst" and store.burst == 5
    python.append(str(info.value))
    lua = lua_run(interpreter, f"""
        local store = require("cellrate.redis")
        local client = {{ evalsha = print, eval = print, script = print }}
        local function show(ok, err)
            assert(not ok)
            print(tostring(err))
        end
        local rl = store.limiter(client, 10, {{ period = 1, burst = 5, max_cost = 5, name = "n" }})
        for _, call in ipairs({lua_literal([[m, list(a)] for m, a, _ in BAD_AFTER_THE_FACT])}) do
            show(pcall(rl[call[1]], rl, call[2][1], call[2][2]))
        end
        for _, bad in ipairs({lua_literal([[r, b if b is not None else "none", a, m]
                                            for r, b, a, m, _ in BAD_MAX_COSTS])}) do
            show(pcall(store.limiter, client, bad[1], {{ period = 1,
                burst = bad[2] ~= "none" and bad[2] or nil, algorithm = bad[3], max_cost = bad[4] }}))
        end
        show(pcall(rl.reconfigure, rl, 10, {{ period = 1, burst = 4 }}))
        assert(rl.burst == 5)
    """).splitlines()
    assert [re.sub(r"^[^:]*:\d+: ", "", line) for line in lua] == python


def test_the_web_policy_settles_through_a_redis_store(client):
    """charge= with a RedisLimiter: the response's usage settled in Redis (WSGI); an
    asyncio store is refused for charge=, naming it (its settling is not awaited yet)."""
    import test_web_charge as web_charge
    tokens = RedisLimiter(client, "100/minute", burst=100, name="web", on_error="raise")
    wsgi = web_charge.wsgi_client(tokens, cost=10, charge=web_charge.used)
    assert web_charge.get(wsgi, "/?use=25")[0] == 200
    assert tokens.peek("k", 0, now=web_charge.NOW).remaining == 75  # 10 checked, 15 charged
    assert web_charge.get(wsgi, "/?use=4")[0] == 200
    assert tokens.peek("k", 0, now=web_charge.NOW).remaining == 71  # 6 given back

    async def refused():  # an asyncio client is made in a loop (Python 3.9)
        with pytest.raises(cellrate.InvalidArgumentType) as info:
            cellrate.web.Policy(AsyncRedisLimiter(redis.asyncio.Redis(port=1), 10),
                                charge=web_charge.used)
        return info.value.param

    assert asyncio.run(refused()) == "charge"
