"""Priority classes through the Redis store (docs/design/priorities.md): the script
decides a class with its reserve in one round trip; tests/vectors/priorities.txt runs
through it (sync and asyncio faces); under overload the bulk class is refused while
critical keeps its share, counted across processes."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
import cellrate.redis as cr_redis  # noqa: E402
from redis_servers import in_service, needs_redis  # noqa: E402
from test_priorities import BLOCKS  # noqa: E402
from test_redis import (STORE_TIMEOUT, AsyncRedisLimiter, RedisLimiter,  # noqa: E402
                        async_client_for, client_for)
from test_vectors import seconds_match  # noqa: E402

pytestmark = needs_redis


def _store(client, block, algorithm: str, name: str) -> cr_redis.RedisLimiter:
    return RedisLimiter(client, 1.0, period=block.emission / 1e9, burst=block.burst,
                        algorithm=algorithm, priorities=block.classes, name=name)


def _assert_op(d, block, lineno: int, fields: list[str], where: str) -> None:
    _name, _now, _cost, _commit, allowed, remaining, retry, reset, _after = fields
    where = f"{where}, priorities.txt:{lineno}"
    assert d.allowed == (allowed == "1"), where
    if d.allowed and fields[3] == "1" and d.remaining == 0 and d.reset_after == 0:
        return  # allow's admission: the verdict alone
    assert d.remaining == int(remaining), where
    assert seconds_match(d.retry_after, int(retry)), where
    assert seconds_match(d.reset_after, int(reset)), where
    assert d.limit == block.burst, where


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket"])
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_vectors_through_the_script(client, index: int, algorithm: str) -> None:
    """Every op of the vectors, as check (or peek), and again as allow on a second key:
    the decision, and the key's state after it (the script's value's state word)."""
    block = BLOCKS[index]
    store = _store(client, block, algorithm, f"v{index}")
    assert store.priorities == dict(sorted(block.classes.items()))
    for lineno, fields in block.ops:
        name, now, cost, commit = fields[0], int(fields[1]) / 1e9, int(fields[2]), fields[3]
        method = store.check if commit == "1" else store.peek
        d = method("k", cost, now=now, priority=name)
        _assert_op(d, block, lineno, fields, f"check {algorithm}")
        value = client.get(store.redis_key("k"))
        state = 0 if value is None else int(value.split(b" ")[1])
        assert state == int(fields[8]), f"state, priorities.txt:{lineno}"
        if commit == "1":
            got = store.allow("a", cost, now=now, priority=name)
        else:
            got = store.peek("a", cost, now=now, priority=name).allowed
        assert got == (fields[4] == "1"), f"allow {algorithm}, priorities.txt:{lineno}"


def test_vectors_through_the_asyncio_store(server) -> None:
    block = BLOCKS[0]

    async def run() -> None:
        c = async_client_for(server.port)
        await c.flushall()
        store = AsyncRedisLimiter(c, 1.0, period=block.emission / 1e9, burst=block.burst,
                                  priorities=block.classes, name="async")
        for lineno, fields in block.ops:
            name, now, cost, commit = fields[0], int(fields[1]) / 1e9, int(fields[2]), fields[3]
            method = store.check if commit == "1" else store.peek
            d = await method("k", cost, now=now, priority=name)
            _assert_op(d, block, lineno, fields, "asyncio")
            if commit == "1":
                got = await store.allow("a", cost, now=now, priority=name)
                assert got == (fields[4] == "1"), f"allow, priorities.txt:{lineno}"
        await c.aclose()

    asyncio.run(run())


def test_a_class_is_one_round_trip_and_a_refused_class_writes_nothing(client) -> None:
    store = RedisLimiter(client, 10, burst=10, priorities={"bulk": 0.5, "critical": 0},
                         name="trip")
    client.script_load(cr_redis.SCRIPT)
    before = client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    admitted = sum(store.allow("k", priority="bulk") for _ in range(8))
    assert admitted == 5  # the bulk class keeps half the burst for critical
    value = client.get(store.redis_key("k"))
    assert not store.allow("k", priority="bulk")
    assert client.get(store.redis_key("k")) == value  # refused: nothing written
    assert store.allow("k", priority="critical")
    after = client.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert after - before == 10  # one EVALSHA a decision; no deny-cache answer for a class


def test_the_deny_cache_keeps_no_class_refusal(client) -> None:
    """A bulk refusal says nothing of critical (or of a plain call), and a plain refusal
    would answer a class with the wrong wait: the cache keeps and answers neither."""
    store = RedisLimiter(client, 1, period=60, burst=4, priorities={"bulk": 0.5, "critical": 0},
                         name="cache")
    assert store.allow("k", priority="bulk") and store.allow("k", priority="bulk")
    assert not store.check("k", priority="bulk").allowed
    assert store.check("k").allowed  # a plain call is not refused by bulk's refusal
    assert store.check("k", priority="critical").allowed
    assert not store.check("k").allowed  # kept: a plain refusal
    d = store.check("k", priority="bulk")
    assert not d.allowed and d.retry_after > 150  # the class's own wait: 3 units of 60 s


def test_mistakes_name_priority_or_priorities(client) -> None:
    store = RedisLimiter(client, 10, burst=10, priorities={"bulk": 0.5, "critical": 0})
    with pytest.raises(cellrate.InvalidArgument, match="priority"):
        store.check("k", priority="nope")
    with pytest.raises(cellrate.InvalidArgumentType, match="priority"):
        store.check("k", priority=3)
    plain = RedisLimiter(client, 10, burst=10)
    assert plain.priorities == {}
    with pytest.raises(cellrate.InvalidArgument, match="priority"):
        plain.allow("k", priority="bulk")
    with pytest.raises(cellrate.InvalidArgument, match="priorities"):
        RedisLimiter(client, 10, algorithm="fixed_window", priorities={"a": 0})
    with pytest.raises(cellrate.InvalidArgument, match="priorities"):
        RedisLimiter(client, 10, priorities={"a": 0.5})


def test_a_live_change_keeps_the_classes(client) -> None:
    store = RedisLimiter(client, 10, burst=10, priorities={"bulk": 0.5, "critical": 0},
                         name="change")
    store.reconfigure(20, burst=20)
    assert store.priorities == {"bulk": 0.5, "critical": 0.0}
    assert sum(store.allow("k", priority="bulk", now=1.0) for _ in range(20)) == 10


BURST = 40
CLASSES = {"bulk": 0.5, "critical": 0.0}


def _child(port: int, priority: str, queue) -> None:
    store = cr_redis.RedisLimiter(client_for(port), 1, period=3600, burst=BURST,
                                  priorities=CLASSES, name="overload", timeout=STORE_TIMEOUT)
    queue.put((priority, sum(store.allow("k", priority=priority) for _ in range(BURST))))


def test_overload_through_redis_processes(server) -> None:
    """Done when: under overload the bulk class is refused while critical still gets its
    share (counted), four processes at once on one key."""
    with client_for(server.port) as c:
        c.flushall()
        in_service(c)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    children = [context.Process(target=_child, args=(server.port, p, queue))
                for p in ("bulk", "bulk", "bulk", "critical")]
    for child in children:
        child.start()
    results = [queue.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    bulk = sum(n for p, n in results if p == "bulk")
    critical = sum(n for p, n in results if p == "critical")
    # one unit an hour: nothing comes back during the test; bulk never spends the
    # reserved half, and whatever bulk left of its half critical may also take
    assert bulk + critical == BURST
    assert bulk <= BURST // 2 <= critical
