"""Batches of the Redis store (cellrate.redis.check_many, coalesce=True) against real
redis-server processes started here: each decision of a batch answers exactly what the
same decision sent alone answers (differential, state compared too), in fewer round
trips (counted), and bad batches (empty, duplicate keys, too long for one call, keys of
several Cluster slots) are each handled. The words are the core's (tests/vectors/redis.txt,
batch lines)."""

from __future__ import annotations

import asyncio
import random
import re
import sys
import time
from pathlib import Path

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
import cellrate.redis as cr_redis  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from redis_servers import RedisServer, in_service, needs_redis  # noqa: E402

pytestmark = needs_redis

TIMEOUT = 5.0
STORE_TIMEOUT = 10.0  # a busy machine's Redis is slow: no decision here is cut short


def client_for(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                       retry=Retry(NoBackoff(), 0))


def async_client_for(port: int) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(port=port, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                               retry=redis.asyncio.retry.Retry(NoBackoff(), 0))


class ScriptCalls:
    """The script calls (EVALSHA, EVAL) the server ran from now on: len() counts them."""

    def __init__(self, c: redis.Redis):
        self.client = c
        for script in (cr_redis.SCRIPT, cr_redis.BATCH_SCRIPT):
            c.script_load(script)  # no NOSCRIPT on the first call
        self.start = self.total()

    def total(self) -> int:
        stats = self.client.info("commandstats")
        return sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))

    def __len__(self) -> int:
        return self.total() - self.start


LIMITS = [
    dict(rate=5, burst=3, name="g"),
    dict(rate=2, burst=4, algorithm="token_bucket", name="t"),
    dict(rate=4, period=1, algorithm="fixed_window", name="f"),
    dict(rate=6, period=2, algorithm="sliding_window", name="s"),
]


def limiters(client, kind=cr_redis.RedisLimiter, **extra):
    return [kind(client, **limit, on_error="raise", timeout=STORE_TIMEOUT, **extra)
            for limit in LIMITS]


def random_items(rng: random.Random, stores, n: int):
    """n decisions over few keys (duplicates are the rule), one limit or two as one."""
    items = []
    for _ in range(n):
        cost = rng.choice([0, 1, 1, 2, 3])
        if rng.random() < 0.2:
            key = f"{{k{rng.randrange(3)}}}"
            items.append(([(stores[0], key), (stores[1], key + ":b")], cost))
        else:
            items.append((rng.choice(stores), f"k{rng.randrange(5)}", cost))
    return items


def alone(item, now):
    """What the item's decision answers sent alone."""
    if isinstance(item[0], list):
        return cr_redis.check_all(item[0], item[1], now=now)
    limiter, key, cost = item
    return limiter.check(key, cost, now=now)


def state(c: redis.Redis):
    return {key: c.get(key) for key in sorted(c.keys("cellrate:*"))}  # the wipe markers aside


def test_a_batch_answers_what_each_decision_alone_answers(client):
    stores = limiters(client)
    rng = random.Random(7)
    now = 100.0
    for round_ in range(12):
        items = random_items(rng, stores, rng.randrange(1, 40))
        now += rng.uniform(0, 0.6)
        before = state(client)
        calls = ScriptCalls(client)
        batch = cr_redis.check_many(items, now=now)
        assert len(calls) == 1
        after_batch = state(client)
        # the same decisions one by one, from the same state
        for key in client.keys("cellrate:*"):
            client.delete(key)
        for key, value in before.items():
            client.set(key, value)
        one_by_one = [alone(item, now) for item in items]
        assert batch == one_by_one, round_
        assert state(client) == after_batch


def test_duplicate_keys_decide_in_order_each_on_the_one_before(client):
    store = cr_redis.RedisLimiter(client, 1, burst=2, name="d", on_error="raise")
    answers = cr_redis.check_many([(store, "k"), (store, "k"), (store, "k", 0), (store, "k")],
                                  now=10.0)
    assert [d.allowed for d in answers] == [True, True, True, False]
    assert [d.remaining for d in answers] == [1, 0, 0, 0]


def test_an_empty_batch_answers_nothing_without_a_call(client):
    calls = ScriptCalls(client)
    assert cr_redis.check_many([]) == []
    assert asyncio.run(cr_redis.check_many_async([])) == []
    assert len(calls) == 0


def test_a_batch_longer_than_one_call_goes_as_several_in_order(client):
    store = cr_redis.RedisLimiter(client, 1, burst=300, name="long", on_error="raise")
    n = cr_redis.BATCH_MAX + 44
    calls = ScriptCalls(client)
    answers = cr_redis.check_many([(store, "k")] * n, now=5.0)
    assert len(calls) == 2
    assert [d.remaining for d in answers] == list(range(299, 299 - n, -1))
    with pytest.raises(cellrate.InvalidArgument, match="at most 256") as raised:
        cellrate._cellrate._redis_batch(None, [(1, 1, store.limit, b"p", b"n", b"k")] * (n))
    assert raised.value.param == "items"


def test_a_mistake_in_one_decision_raises_after_all_were_decided(client):
    gcra = cr_redis.RedisLimiter(client, 5, burst=3, name="same", on_error="raise")
    window = cr_redis.RedisLimiter(client, 5, algorithm="fixed_window", name="same",
                                   on_error="raise")
    assert gcra.check("held", now=1.0).allowed
    other = cr_redis.RedisLimiter(client, 5, burst=3, name="other", on_error="raise")
    with pytest.raises(cellrate.InvalidArgument) as raised:
        cr_redis.check_many([(other, "a"), (window, "held"), (other, "b")], now=1.0)
    assert raised.value.param == "algorithm"
    assert other.peek("a", 0, now=1.0).remaining == 2  # committed
    assert other.peek("b", 0, now=1.0).remaining == 2


def test_bad_items_name_items(client):
    store = cr_redis.RedisLimiter(client, 5, name="bad")
    for items in ([store], [(store,)], [("x", "k")], [([], 1)]):
        with pytest.raises(cellrate.CellrateError) as raised:
            cr_redis.check_many(items)
        assert raised.value.param == "items", items
    with pytest.raises(cellrate.InvalidArgument) as raised:
        cr_redis.check_many([(store, "k", -1)])
    assert raised.value.param == "cost"
    other = cr_redis.RedisLimiter(client_for(client.connection_pool.connection_kwargs["port"]),
                                  5, name="bad")
    with pytest.raises(cellrate.InvalidArgument, match="same Redis client"):
        cr_redis.check_many([(store, "k"), (other, "k")])


def test_while_redis_cannot_decide_on_error_answers_each_decision():
    port_server = RedisServer().start()
    try:
        c = client_for(port_server.port)
        allow = cr_redis.RedisLimiter(c, 1, burst=1, name="a", on_error="allow", timeout=2)
        deny = cr_redis.RedisLimiter(c, 1, burst=1, name="b", on_error="deny", timeout=2)
        port_server.stop()
        answers = cr_redis.check_many([(allow, "k"), (deny, "k"), (allow, "k", 5)])
        assert [d.allowed for d in answers] == [True, False, True]
        allow.close()
        deny.close()
    finally:
        port_server.stop()


def test_the_asyncio_batch_and_the_sync_one_agree(server, client):
    async def run():
        ac = async_client_for(server.port)
        try:
            stores = limiters(ac, cr_redis.AsyncRedisLimiter)
            items = random_items(random.Random(3), stores, 60)
            return [(d.allowed, d.remaining, d.retry_after)
                    for d in await cr_redis.check_many_async(items, now=20.0)]
        finally:
            await ac.aclose()
    got = asyncio.run(run())
    client.flushall()
    in_service(client)
    sync = [(d.allowed, d.remaining, d.retry_after) for d in cr_redis.check_many(
        random_items(random.Random(3), limiters(client), 60), now=20.0)]
    assert got == sync


def test_coalesce_sends_one_turn_in_one_call_each_task_its_own_answer(server, client):
    n = 64
    rng = random.Random(11)
    plan = [(f"k{rng.randrange(8)}", rng.choice([0, 1, 2])) for _ in range(n)]

    async def run(coalesce):
        ac = async_client_for(server.port)
        try:
            store = cr_redis.AsyncRedisLimiter(ac, 5, burst=4, name="c", on_error="raise",
                                               timeout=STORE_TIMEOUT, coalesce=coalesce)
            await store.check("warm", now=30.0)  # connections made, script loaded
            calls = ScriptCalls(client)
            if coalesce:  # concurrent tasks, started in the plan's order
                answers = await asyncio.gather(*(store.check(key, cost, now=30.0)
                                                 for key, cost in plan))
            else:  # one after the other
                answers = [await store.check(key, cost, now=30.0) for key, cost in plan]
            return answers, len(calls)
        finally:
            await ac.aclose()

    coalesced, coalesced_calls = asyncio.run(run(True))
    after = state(client)
    client.flushall()
    in_service(client)
    alone_answers, alone_calls = asyncio.run(run(False))
    assert coalesced == alone_answers  # gather's order: each task its own answer
    assert state(client) == after
    assert alone_calls == n
    assert coalesced_calls == 1


def test_coalesced_allow_peek_and_the_deny_cache(server):
    async def run():
        ac = async_client_for(server.port)
        try:
            store = cr_redis.AsyncRedisLimiter(ac, 1, burst=1, name="ap", on_error="raise",
                                               timeout=STORE_TIMEOUT, coalesce=True)
            await ac.delete(store.redis_key("k"))
            got = await asyncio.gather(store.allow("k"), store.peek("k"), store.allow("k"))
            assert got[0] is True and got[2] is False
            assert not got[1].allowed
            calls_before = (await ac.info("commandstats")).get("cmdstat_evalsha", {})
            assert not await store.allow("k")  # the deny cache answers, no call
            calls_after = (await ac.info("commandstats")).get("cmdstat_evalsha", {})
            assert calls_before.get("calls") == calls_after.get("calls")
        finally:
            await ac.aclose()
    asyncio.run(run())


def test_coalesce_is_a_boolean_of_the_asyncio_store(client):
    with pytest.raises(cellrate.InvalidArgument) as raised:
        cr_redis.RedisLimiter(client, 5, coalesce=True)
    assert raised.value.param == "coalesce"
    assert "asyncio store alone" in str(raised.value)

    async def wrong_type():
        ac = redis.asyncio.Redis()
        with pytest.raises(cellrate.CellrateError) as raised:
            cr_redis.AsyncRedisLimiter(ac, 5, coalesce="yes")
        assert raised.value.param == "coalesce"
    asyncio.run(wrong_type())


@pytest.fixture(scope="module")
def one_node_cluster():
    node = RedisServer(cluster=True).start()
    try:
        node.cli("cluster", "addslotsrange", "0", "16383")
        deadline = time.monotonic() + 20
        while "cluster_state:ok" not in node.cli("cluster", "info"):
            assert time.monotonic() < deadline, "the cluster did not come up"
            time.sleep(0.1)
        yield node
    finally:
        node.stop()


def test_keys_of_several_cluster_slots_are_a_mistake_naming_the_hash_tag(one_node_cluster):
    rc = redis.cluster.RedisCluster(host="127.0.0.1", port=one_node_cluster.port,
                                    socket_timeout=TIMEOUT)
    plain = client_for(one_node_cluster.port)
    try:
        for c in (rc, plain):
            store = cr_redis.RedisLimiter(c, 5, name="cl", on_error="allow",
                                          timeout=STORE_TIMEOUT)
            with pytest.raises(cellrate.InvalidArgument, match="hash tag") as raised:
                cr_redis.check_many([(store, "{u1}"), (store, "{u2}")], now=1.0)
            assert raised.value.param == "items"
            assert "cl:{u1}" in str(raised.value)
            assert store._availability.outage is None  # never an outage
            answers = cr_redis.check_many([(store, "{u1}"), (store, "{u1}:x")], now=1.0)
            assert [d.allowed for d in answers] == [True, True]
    finally:
        rc.close()
        plain.close()


def test_coalesce_groups_a_cluster_turn_by_slot(one_node_cluster):
    async def run():
        rc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=one_node_cluster.port)
        try:
            store = cr_redis.AsyncRedisLimiter(rc, 5, burst=2, name="cc", on_error="raise",
                                               timeout=STORE_TIMEOUT, coalesce=True)
            got = await asyncio.gather(*(store.check(f"{{u{i % 3}}}", now=2.0)
                                         for i in range(9)))
            return [d.allowed for d in got]
        finally:
            await rc.aclose()
    assert asyncio.run(run()) == [True] * 6 + [False] * 3


def without_script(error: BaseException) -> str:
    return re.sub(r"script: [0-9a-f]+, on @user_script:\d+|user_script:\d+", "", str(error)).rstrip(" .")


def test_a_key_of_another_type_is_its_decisions_error_alone(client):
    """A key holding no string (a list: WRONGTYPE), or a value of the limit's signature
    whose state word is no number: that decision raises what it raises alone, after
    the others were decided."""
    store = cr_redis.RedisLimiter(client, 5, burst=3, name="typed", on_error="raise")
    client.rpush(store.redis_key("list"), "x")
    client.set(store.redis_key("junk"), b"gcra:600000000:3 x")
    for bad in ("list", "junk"):
        with pytest.raises(Exception) as alone_raised:
            store.check(bad, now=1.0)
        with pytest.raises(Exception) as raised:
            cr_redis.check_many([(store, "a" + bad), (store, bad), (store, "b" + bad)], now=1.0)
        assert type(raised.value) is type(alone_raised.value), raised.value
        # the same words but the script's name and line (the batch is another script)
        assert without_script(raised.value) == without_script(alone_raised.value)
        assert store.peek("a" + bad, 0, now=1.0).remaining == 2  # committed
        assert store.peek("b" + bad, 0, now=1.0).remaining == 2


def test_every_decision_vector_through_the_batch_script(client):
    """Every step of every decision vector as a decision of a batch call (its own now):
    a sequence's steps go in one call up to a reset or a reservation, and each answer
    and the state each call leaves are the core's."""
    from test_redis import NEVER, beyond_the_debt_bound, read_vectors, stored_state

    batch = client.register_script(cr_redis.BATCH_SCRIPT)
    compared: dict = {}
    calls: list = []  # (step kind, expected, words)

    def send(name):
        if not calls:
            return
        argv = [len(calls)]
        for _kind, _expected, words in calls:
            argv += [1, len(words), *words]
        replies = batch(keys=["v"] * len(calls), args=argv)
        assert len(replies) == len(calls)
        for (kind, expected, words), reply in zip(calls, replies):
            if kind == "op":
                retry = int(reply[2])
                got = (reply[0], reply[1], retry if retry >= 0 else NEVER, int(reply[3]))
            elif kind == "charge":
                retry = int(reply[2])
                got = (reply[0], reply[1], retry if retry >= 0 else NEVER, int(reply[3]),
                       reply[5])
            elif kind == "take":
                got = reply
            else:  # a refund or a live change's probe: the state alone
                got = expected
            assert got == expected, (name, kind, words)
            compared[name] = compared.get(name, 0) + 1
        after = calls[-1][1] if calls[-1][0] in ("refund", "probe") else state_after[0]
        assert stored_state(client, "v") == after, (name, calls[-1])
        calls.clear()

    state_after = [0]
    for algorithm, emission_ns, tolerance_ns, burst, steps, max_debt in read_vectors():
        if tolerance_ns >= cr_redis.MAX_TOLERANCE_NS:
            continue
        first_limit = emission_ns, tolerance_ns, burst
        for name in (["gcra", "token_bucket"] if algorithm == "gcra" else [algorithm]):
            client.delete("v")
            limit = first_limit
            for step in steps:
                emission_ns, tolerance_ns, burst = limit
                if beyond_the_debt_bound(algorithm, step):
                    break
                kind = step[0]
                if kind in ("reset", "set"):
                    send(name)
                    if kind == "reset" or step[1] == 0:
                        client.delete("v")
                    else:
                        client.set("v", f"{name}:{tolerance_ns}:{burst} {step[1]}")
                    continue
                if kind == "charge":
                    now, cost, *expected, after = step[1]
                    debt = burst if max_debt is None else max_debt
                    calls.append(("charge", tuple(expected), [4, cost, name, *limit, debt, now]))
                elif kind == "take":
                    now, max_cost, taken, after = step[1]
                    calls.append(("take", taken, [5, max_cost, name, *limit, now]))
                elif kind == "reconfigure":
                    now, first, second, after = step[1]
                    limit = (first, first * second, second) if algorithm == "gcra" else (
                        0, first, second)
                    if limit[1] >= cr_redis.MAX_TOLERANCE_NS:
                        break
                    calls.append(("probe", after, [1, 0, name, *limit, now]))
                elif kind == "refund":
                    now, cost, after = step[1]
                    calls.append(("refund", after, [3, cost, name, *limit, now]))
                else:
                    now, cost, commit, *expected, after = step[1]
                    calls.append(("op", tuple(expected), [commit, cost, name, *limit, now]))
                state_after[0] = after
                if len(calls) == cr_redis.BATCH_MAX:
                    send(name)
            send(name)
    print(f"vectors through the batch script: steps compared {compared}")
    assert compared.get("gcra", 0) >= 9000 and compared.get("token_bucket", 0) >= 9000
    assert all(compared.get(name, 0) >= 500 for name in ("fixed_window", "sliding_window"))


def test_a_batch_reads_the_servers_clock_once(server, client):
    """One TIME per batch call, however many decisions it holds (MONITOR lists the
    commands the script ran)."""
    store = cr_redis.RedisLimiter(client, 1, period=3600, burst=5, name="m", on_error="raise",
                                  timeout=STORE_TIMEOUT)
    cr_redis.check_many([(store, f"k{i}") for i in range(3)])  # each key present
    items = [(store, f"k{i}") for i in range(3)] + [(store, "{f}1"), (store, "{f}2")]  # one slot
    watcher = client_for(server.port)
    with watcher.monitor() as monitor:
        answers = cr_redis.check_many(items)
        cr_redis.check_many([(store, "done")])  # the end of the batch's commands
        commands = []
        for seen in monitor.listen():
            words = seen["command"].split()
            if words[0] == "EVALSHA" and any(w.endswith("m:done") for w in words):
                break
            commands.append(words[0])
    watcher.close()
    assert [a.remaining for a in answers] == [3, 3, 3, 4, 4]
    assert commands.count("TIME") == 1, commands
    assert commands.count("SET") == 5, commands


def test_a_full_server_answers_each_decision_with_on_error():
    """A redis-server at maxmemory (noeviction) refuses the writes with OOM: each
    decision of a batch answers its on_error ("allow" admits, "deny" refuses), and
    "raise" raises RedisUnavailable; nothing else escapes."""
    server = RedisServer().start()
    try:
        client = client_for(server.port)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)
        for on_error, allowed in (("allow", True), ("deny", False)):
            store = cr_redis.RedisLimiter(client, 10, 1, name=f"full-{on_error}",
                                          on_error=on_error, timeout=STORE_TIMEOUT)
            answers = cr_redis.check_many([(store, f"k{i}") for i in range(5)])
            assert [answer.allowed for answer in answers] == [allowed] * 5
        store = cr_redis.RedisLimiter(client, 10, 1, name="full-raise", on_error="raise",
                                      timeout=STORE_TIMEOUT)
        with pytest.raises(cr_redis.RedisUnavailable):
            cr_redis.check_many([(store, f"k{i}") for i in range(5)])
    finally:
        server.stop()
