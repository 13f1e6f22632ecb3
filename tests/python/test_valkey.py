"""The Redis stores with valkey-py clients, against loopback redis-server processes as
in test_redis.py: what is valkey-py's own (its transport errors while no server
answers, its asyncio, Cluster and Sentinel clients, the concurrency store and the fleet
share on its client, a sync store refusing its asyncio client), and `import cellrate`
never imports valkey. The cases of test_redis.py that take its `client` run with a
valkey.Valkey too (its fixture is parametrized by library): decisions, the script
reloaded after NOSCRIPT, on_error while Redis cannot decide, a mistake raised."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("valkey")
pytest.importorskip("redis")

import valkey  # noqa: E402
import valkey.asyncio  # noqa: E402
import valkey.asyncio.cluster  # noqa: E402
import valkey.cluster  # noqa: E402
import valkey.sentinel  # noqa: E402
from valkey.backoff import NoBackoff  # noqa: E402
from valkey.retry import Retry  # noqa: E402

import cellrate  # noqa: E402
import cellrate.redis as cr_redis  # noqa: E402
from cellrate.redis import RedisUnavailable  # noqa: E402
from cellrate.share import ShareLimiter  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from redis_servers import (REDIS_CLI, RedisSentinel, RedisServer, free_port,  # noqa: E402
                           needs_redis, redis_server)

pytestmark = needs_redis

TIMEOUT = 5.0  # the clients' socket timeout (a busy machine's Redis is slow)
STORE_TIMEOUT = 10.0  # the stores' bound on a decision, unless a test names its own


def client_for(port: int) -> valkey.Valkey:
    return valkey.Valkey(port=port, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                         retry=Retry(NoBackoff(), 0))


def async_client_for(port: int) -> valkey.asyncio.Valkey:
    return valkey.asyncio.Valkey(port=port, socket_timeout=TIMEOUT,
                                 socket_connect_timeout=TIMEOUT,
                                 retry=valkey.asyncio.retry.Retry(NoBackoff(), 0))


@pytest.fixture(scope="module")
def server():
    with redis_server() as srv:
        yield srv


@pytest.fixture
def client(server):
    c = client_for(server.port)
    c.flushall()
    yield c
    c.close()


def test_import_cellrate_imports_no_valkey():
    """valkey-py is a client a program brings: cellrate, cellrate.redis and cellrate.share
    import it never (they recognise its clients by their class)."""
    code = ("import sys, cellrate, cellrate.redis, cellrate.share\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'valkey'], sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_an_unreachable_server_answers_by_on_error():
    dead = client_for(free_port())
    allow = cr_redis.RedisLimiter(dead, 10, on_error="allow", timeout=1.0)
    deny = cr_redis.RedisLimiter(dead, 10, on_error="deny", timeout=1.0)
    fail = cr_redis.RedisLimiter(dead, 10, on_error="raise", timeout=1.0)
    try:
        assert allow.allow("k")
        assert not deny.allow("k")
        with pytest.raises(RedisUnavailable):
            fail.check("k")
    finally:
        for store in (allow, deny, fail):
            store.close()


def test_the_concurrency_store_takes_a_valkey_client(client):
    store = cr_redis.RedisConcurrency(client, 2, lease=30, on_error="raise",
                                      timeout=STORE_TIMEOUT)
    first, second = store.try_acquire("k"), store.try_acquire("k")
    assert first is not None and second is not None and store.try_acquire("k") is None
    first.release()
    assert store.in_flight("k") == 1 and store.try_acquire("k") is not None


def test_a_fleet_share_takes_a_valkey_client(client):
    share = ShareLimiter(client, 100, name="valkey", background=False)
    try:
        assert share.allow()
        assert share.heartbeat()
    finally:
        share.close()


def test_the_asyncio_stores_take_a_valkey_asyncio_client(server):
    async def run():
        aclient = async_client_for(server.port)
        try:
            store = cr_redis.AsyncRedisLimiter(aclient, 5, burst=3, on_error="raise",
                                               prefix="async:", timeout=STORE_TIMEOUT)
            core = cellrate.KeyedLimiter(5, burst=3)
            for i in range(100):
                key, now = f"user:{i % 7}", 10.0 + i * 0.05
                assert await store.check(key, now=now) == core.check(key, now=now)
            await aclient.script_flush()
            assert (await store.check("fresh")).remaining == 2  # NOSCRIPT, then EVAL
            holds = cr_redis.AsyncRedisConcurrency(aclient, 1, lease=30, prefix="async:",
                                                   timeout=STORE_TIMEOUT)
            slot = await holds.try_acquire("k")
            assert slot is not None and await holds.try_acquire("k") is None
            await slot.release()
            assert await holds.in_flight("k") == 0
            # a full Redis (OOM, a reply valkey-py maps to an exception of its own)
            allow = cr_redis.AsyncRedisLimiter(aclient, 10, on_error="allow", prefix="oom:",
                                               timeout=STORE_TIMEOUT)
            await aclient.config_set("maxmemory", "1")
            try:
                assert await allow.allow("k")
                assert allow._availability.outage is not None
            finally:
                await aclient.config_set("maxmemory", "0")
                await allow.aclose()
        finally:
            await aclient.aclose()

    asyncio.run(run())


def test_the_sync_stores_refuse_a_valkey_asyncio_client_and_back(server):
    async def made():  # in a loop: CPython 3.9's asyncio.Lock() wants one
        return async_client_for(server.port)

    aclient = asyncio.run(made())
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cr_redis.RedisLimiter(aclient, 10)
    assert info.value.param == "client" and "valkey.Valkey" in str(info.value)
    with pytest.raises(cellrate.InvalidArgumentType):
        cr_redis.AsyncRedisLimiter(client_for(server.port), 10)


def test_a_sentinel_managed_valkey_master(server):
    watcher = RedisSentinel(server.port)
    watcher.start()
    try:
        sentinel = valkey.sentinel.Sentinel([("127.0.0.1", watcher.port)],
                                            socket_timeout=TIMEOUT)
        store = cr_redis.RedisLimiter(sentinel.master_for("cellrate"), 10, 3600,
                                      prefix="sentinel:", on_error="raise", timeout=STORE_TIMEOUT)
        assert store.check("k").remaining == 9
        assert store.check("k").remaining == 8
    finally:
        watcher.stop()


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
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def test_a_valkey_cluster_client(cluster):
    vc = valkey.cluster.ValkeyCluster(host="127.0.0.1", port=cluster[0].port,
                                      socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT)
    try:
        store = cr_redis.RedisLimiter(vc, 5, burst=3, on_error="raise", timeout=STORE_TIMEOUT)
        core = cellrate.KeyedLimiter(5, burst=3)
        for i in range(200):
            key, now = f"user:{i % 50}", 50.0 + i * 0.01
            assert store.check(key, now=now) == core.check(key, now=now)
        assert cr_redis.check_all([(store, "{u7}"), (store, "{u7}:search")], now=60.0).allowed
        with pytest.raises(cellrate.InvalidArgument) as info:
            cr_redis.check_all([(store, "a"), (store, "b")], now=60.0)
        assert info.value.param == "items"
    finally:
        vc.close()

    async def run():
        avc = valkey.asyncio.cluster.ValkeyCluster(host="127.0.0.1", port=cluster[1].port)
        try:
            store = cr_redis.AsyncRedisLimiter(avc, 5, burst=3, on_error="raise",
                                               prefix="async:", timeout=STORE_TIMEOUT)
            assert (await store.check("k", now=1.0)).remaining == 2
        finally:
            await avc.aclose()

    asyncio.run(run())
