"""Plans through the Redis store (docs/design/plans.md): RedisLimiter(plans=...) and
plan= on check, allow and peek, sync and asyncio. The stored value's signature is the
limit, so the plan, a key was last decided under; a key decided under another plan
carries what it used in the script, as a live change (§8's rule, exact).
tests/vectors/plans.txt runs through the script; four processes on one Redis admit
exactly each tier's burst per key, and an upgraded key carries its units."""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
import cellrate.redis as cr_redis  # noqa: E402
from redis_servers import needs_redis  # noqa: E402
from test_plans import BLOCKS, CHECKS, FINDS, Block  # noqa: E402
from test_redis import AsyncRedisLimiter, RedisLimiter, async_client_for, client_for  # noqa: E402
from test_vectors import STATUS, seconds_match  # noqa: E402

pytestmark = needs_redis


def limit_of(emission: int, burst: int, algorithm: str) -> cellrate.Limit:
    return cellrate.Limit(1.0, emission / 1e9, burst=burst, algorithm=algorithm)


def _plans_of(block: Block, algorithm: str) -> tuple[cellrate.Limit, dict[str, cellrate.Limit]]:
    (_, emission, burst), *others = block.plans
    return limit_of(emission, burst, algorithm), {
        n: limit_of(e, b, algorithm) for n, e, b in others}


def _store(make, client, block: Block, algorithm: str, name: str):
    default, plans = _plans_of(block, algorithm)
    return make(client, 1.0, default.period, burst=default.burst, algorithm=algorithm,
                name=name, plans=plans, on_error="raise")


def _assert_op(d, rest: list[str], where: str) -> None:
    _key, _plan, _now, _cost, _commit, allowed, remaining, retry, reset = rest
    assert d.allowed == (allowed == "1"), where
    assert d.remaining == int(remaining), where
    assert seconds_match(d.retry_after, int(retry)), where
    assert seconds_match(d.reset_after, int(reset)), where


def _replay(store, block: Block, algorithm: str, call) -> int:
    """The block's steps through `store` (call: runs a decision, awaiting it or not). An
    edit is reconfigure(plan=) and, at its instant, a probe (check of cost 0) of every
    key on that plan, as the keyed table converts them then; a key's plan is the one it
    was last checked under (a peek moves nothing)."""
    plan_of: dict[str, str] = {}
    compared = 0
    for lineno, word, rest in block.steps:
        where = f"{algorithm}, plans.txt:{lineno}"
        if word == "edit":
            plan, now, emission, burst = rest[0], int(rest[1]), int(rest[2]), int(rest[3])
            store.reconfigure(1.0, emission / 1e9, burst=burst, plan=plan)
            for key, on in plan_of.items():
                if on == plan:
                    call(store.check, key, 0, now / 1e9, plan)
            continue
        key, plan, now, cost, commit = rest[:5]
        method = store.check if commit == "1" else store.peek
        d = call(method, key, int(cost), int(now) / 1e9, plan)
        _assert_op(d, rest, where)
        if commit == "1":
            plan_of[key] = plan
        compared += 1
    return compared


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket"])
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_vectors_through_the_script(client, index: int, algorithm: str) -> None:
    """Every op of plans.txt through RedisLimiter(plans=...): each plan move is the
    script's carry of the key's value, written under the plan it was last decided
    under."""
    store = _store(RedisLimiter, client, BLOCKS[index], algorithm, f"v{index}")
    compared = _replay(store, BLOCKS[index], algorithm,
                       lambda method, key, cost, now, plan: method(key, cost, now=now, plan=plan))
    assert compared == sum(word == "op" for _, word, _ in BLOCKS[index].steps)


@pytest.mark.parametrize("coalesce", [False, True])
def test_vectors_through_the_asyncio_store(server, coalesce: bool) -> None:
    async def main() -> int:
        client = async_client_for(server.port)
        try:
            await client.flushall()
            compared = 0
            for index, block in enumerate(BLOCKS):
                store = _store(AsyncRedisLimiter, client, block, "gcra", f"a{index}")
                store.coalesce = coalesce
                compared += await _replay_async(store, block)
            return compared
        finally:
            await client.aclose()

    assert asyncio.run(main()) > 900


async def _replay_async(store, block: Block) -> int:
    plan_of: dict[str, str] = {}
    compared = 0
    for lineno, word, rest in block.steps:
        if word == "edit":
            plan, now, emission, burst = rest[0], int(rest[1]), int(rest[2]), int(rest[3])
            store.reconfigure(1.0, emission / 1e9, burst=burst, plan=plan)
            for key, on in plan_of.items():
                if on == plan:
                    await store.check(key, 0, now=now / 1e9, plan=plan)
            continue
        key, plan, now, cost, commit = rest[:5]
        method = store.check if commit == "1" else store.peek
        d = await method(key, int(cost), now=int(now) / 1e9, plan=plan)
        _assert_op(d, rest, f"asyncio, plans.txt:{lineno}")
        if commit == "1":
            plan_of[key] = plan
        compared += 1
    return compared


def test_a_plan_move_writes_the_plans_limit_as_the_values_signature(client) -> None:
    """The value says the limit (so the plan) a key was last decided under: the carry's
    other side. 6 of 10/s burst 10 used, moved to pro (100/s burst 20): 14 left (§8's
    first reference vector); a peek moves nothing, a refused check moves the key."""
    store = RedisLimiter(client, 10, burst=10, name="tiers", on_error="raise",
                         plans={"pro": cellrate.Limit(100, burst=20)})
    assert store.check("k", 6, now=5.0).remaining == 4
    assert client.get(store.redis_key("k")).startswith(b"gcra:1000000000:10 ")
    assert store.peek("k", 0, now=5.0, plan="pro").remaining == 14
    assert client.get(store.redis_key("k")).startswith(b"gcra:1000000000:10 ")
    assert not store.check("k", 15, now=5.0, plan="pro").allowed
    assert client.get(store.redis_key("k")).startswith(b"gcra:200000000:20 ")
    assert store.check("k", 14, now=5.0, plan="pro").remaining == 0
    assert store.check("k", 0, now=5.0).remaining == 0  # carried back: never fresh
    assert store.allow("k", 1, now=5.0, plan="default") is False


def test_a_charge_and_a_refund_go_under_the_keys_plan(client) -> None:
    """charge and refund take plan= as check does (the web policy's settlement passes
    the plan that decided): the key stays on its plan; an unknown name raises naming plan."""
    store = RedisLimiter(client, 10, burst=10, name="settled", on_error="raise",
                         plans={"pro": cellrate.Limit(100, burst=20)})
    assert store.check("k", 1, now=5.0, plan="pro").remaining == 19
    assert store.charge("k", 3, now=5.0, plan="pro").remaining == 16
    store.refund("k", 2, now=5.0, plan="pro")
    assert client.get(store.redis_key("k")).startswith(b"gcra:200000000:20 ")
    assert store.peek("k", 0, now=5.0, plan="pro").remaining == 18
    for settle in (store.charge, store.refund):
        with pytest.raises(cellrate.InvalidArgument) as raised:
            settle("k", 1, now=5.0, plan="gold")
        assert raised.value.param == "plan"


def test_an_asyncio_charge_and_refund_go_under_the_keys_plan(server) -> None:
    async def main() -> int:
        client = async_client_for(server.port)
        try:
            await client.flushall()
            store = AsyncRedisLimiter(client, 10, burst=10, name="settled", on_error="raise",
                                      plans={"pro": cellrate.Limit(100, burst=20)})
            await store.charge("k", 3, now=5.0, plan="pro")
            await store.refund("k", 1, now=5.0, plan="pro")
            return (await store.peek("k", 0, now=5.0, plan="pro")).remaining
        finally:
            await client.aclose()

    assert asyncio.run(main()) == 18


def test_plans_and_priorities(client) -> None:
    """Every plan takes the limit's classes, each reserve of its own plan's burst."""
    store = RedisLimiter(client, 10, burst=10, name="cls", on_error="raise",
                         priorities={"critical": 0, "bulk": 0.5}, plans={"pro": "100/s"})
    assert store.plans["pro"].priorities == {"bulk": 0.5, "critical": 0.0}
    assert store.check("k", 50, now=5.0, plan="pro", priority="bulk").allowed
    assert not store.check("k", 1, now=5.0, plan="pro", priority="bulk").allowed
    assert store.check("k", 50, now=5.0, plan="pro", priority="critical").allowed


@pytest.mark.parametrize("lineno,status,pairs", CHECKS)
def test_plan_tables(client, lineno: int, status: str, pairs: list[tuple[object, str]]) -> None:
    """The plan tables of plans.txt: the core's checks, the same words as KeyedLimiter."""
    plans = {name: cellrate.Limit(100, burst=20, algorithm=algorithm)
             if not algorithm.endswith("_window") else cellrate.Limit(100, algorithm=algorithm)
             for name, algorithm in pairs}
    if len(plans) != len(pairs) or any(isinstance(n, bytes) or "\0" in n for n, _ in pairs):
        pytest.skip("a duplicate name or one that is not a str: no Python mapping holds it")
    if status == "OK":
        store = RedisLimiter(client, 10, burst=10, name="t", plans=plans)
        for name in plans:
            assert store.peek("k", plan=name, now=0).limit == 20
        return
    with pytest.raises(cellrate.InvalidArgument) as info:
        RedisLimiter(client, 10, burst=10, name="t", plans=plans)
    param, message = STATUS[status]
    assert str(info.value) == message and info.value.param == param, f"plans.txt:{lineno}"


@pytest.mark.parametrize("lineno,status,name", FINDS)
def test_plan_names(client, lineno: int, status: str, name: str | bytes) -> None:
    default, plans = _plans_of(BLOCKS[-1], "gcra")
    store = RedisLimiter(client, 1.0, default.period, burst=default.burst, name="f",
                         plans=plans)
    if status == "OK":
        assert store.peek("k", plan=name, now=0).allowed
        return
    if isinstance(name, bytes):
        pytest.skip("not a str")
    for call in (store.allow, store.check, store.peek):
        with pytest.raises(cellrate.InvalidArgument) as info:
            call("k", plan=name)
        assert str(info.value) == STATUS[status][1], f"plans.txt:{lineno}"
        assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgument) as info:
        store.reconfigure("5/s", plan=name)
    assert info.value.param == "plan"


def test_bad_input(client) -> None:
    """A limit with plans needs a name (its keys move between the plans' limits as in a
    live change; an unnamed limit's keys may hold the layout before names); a plan the
    script cannot carry is refused naming burst; a plan name that is not a str."""
    with pytest.raises(cellrate.InvalidArgument) as info:
        RedisLimiter(client, 10, plans={"pro": "100/s"})
    assert info.value.param == "name" and "plans" in str(info.value)
    with pytest.raises(cellrate.InvalidArgument) as info:
        RedisLimiter(client, 10, name="n", plans={"slow": cellrate.Limit(1, 86400 * 200)})
    assert info.value.param == "burst"
    with pytest.raises(cellrate.InvalidArgument) as info:
        RedisLimiter(client, 10, name="n", plans={})
    assert info.value.param == "plans"
    with pytest.raises(cellrate.InvalidArgument) as info:
        RedisLimiter(client, 10, name="n", plans={"w": cellrate.Limit(10, algorithm="fixed_window")})
    assert info.value.param == "plans"
    store = RedisLimiter(client, 10, name="n", plans={"pro": "100/s"})
    with pytest.raises(cellrate.InvalidArgumentType) as type_info:
        store.check("k", plan=5)  # type: ignore[arg-type]
    assert type_info.value.param == "plan"
    plain = RedisLimiter(client, 10, name="p")
    assert plain.check("k", plan="default").allowed
    with pytest.raises(cellrate.InvalidArgument) as info:
        plain.check("k", plan="pro")
    assert info.value.param == "plan"


def test_reconfigure_a_plan(client) -> None:
    """reconfigure(plan=) changes that plan alone: its keys carry at their next decision,
    keys on other plans are untouched."""
    store = RedisLimiter(client, 10, burst=10, name="r", on_error="raise",
                         plans={"pro": cellrate.Limit(100, burst=20)})
    assert store.check("p", 10, now=5.0, plan="pro").remaining == 10
    assert store.check("d", 5, now=5.0).remaining == 5
    store.reconfigure(200, burst=40, plan="pro")
    assert store.plans["pro"].burst == 40 and store.limit.burst == 10
    assert store.peek("p", 0, now=5.0, plan="pro").remaining == 30  # 10 used of 40
    assert store.peek("d", 0, now=5.0).remaining == 5
    store.reconfigure(20, burst=20)
    assert store.plans["default"].burst == 20 and store.plans["pro"].burst == 40
    assert store.peek("d", 0, now=5.0).remaining == 15


# --------------------------------------------------------------------------
# Four processes, two tiers (the slow rates give nothing back while they run)

FREE, PRO = 5, 20  # per hour, burst = rate


def _tiered(c) -> cr_redis.RedisLimiter:
    return RedisLimiter(c, FREE, 3600, burst=FREE, name="tiers", on_error="raise",
                        plans={"pro": cellrate.Limit(PRO, 3600, burst=PRO)})


def _tier_worker(port: int, ready, results) -> None:
    c = client_for(port)
    limiter = _tiered(c)
    counts = {"free": 0, "pro": 0, "upgraded_free": 0, "upgraded_pro": 0}
    ready.wait()
    for _ in range(3 * PRO):
        counts["free"] += limiter.allow("free-key")
        counts["pro"] += limiter.allow("pro-key", plan="pro")
        counts["upgraded_free"] += limiter.allow("upgraded")
    ready.wait()  # every process has used the free tier of "upgraded": it upgrades now
    for _ in range(3 * PRO):
        counts["upgraded_pro"] += limiter.allow("upgraded", plan="pro")
    results.put(counts)


def test_four_processes_admit_each_tiers_burst_and_an_upgrade_carries(client, server):
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(4)
    results = context.Queue()
    workers = [context.Process(target=_tier_worker, args=(server.port, ready, results))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    counts = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    total = {name: sum(c[name] for c in counts) for name in counts[0]}
    print(f"4 processes, two tiers: {total}")
    assert total["free"] == FREE and total["pro"] == PRO
    assert total["upgraded_free"] == FREE
    # the upgrade carries the 5 units used: 15 of pro's 20 left, not a fresh 20
    assert total["upgraded_pro"] == PRO - FREE
    store = _tiered(client)
    assert client.get(store.redis_key("upgraded")).startswith(b"gcra:3600000000000:20 ")


def test_check_all_and_check_many_name_a_keys_plan(client) -> None:
    """A pair may name its key's plan, (limiter, key, plan); a batch's single decision
    (limiter, key, cost, plan): each is what check(key, cost, plan=) alone answers."""
    store = RedisLimiter(client, 10, burst=10, name="items", on_error="raise",
                         plans={"pro": cellrate.Limit(100, burst=20)})
    other = RedisLimiter(client, 1000, burst=1000, name="wide", on_error="raise")
    d = cr_redis.check_all([(store, "k", "pro"), (other, "k")], 6, now=5.0)
    assert d.allowed and d.remaining == 14 and d.limit == 20
    assert client.get(store.redis_key("k")).startswith(b"gcra:200000000:20 ")
    answers = cr_redis.check_many([(store, "k", 4, "pro"), (store, "k", 0),
                                   ([(store, "j", "pro"), (other, "j")], 2),
                                   (store, "k", 1, None)], now=5.0)
    assert [(a.allowed, a.remaining, a.limit) for a in answers] == [
        (True, 10, 20), (True, 0, 10), (True, 18, 20), (False, 0, 10)]
    with pytest.raises(cellrate.InvalidArgument) as info:
        cr_redis.check_all([(store, "k", "gold")], now=5.0)
    assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cr_redis.check_many([(store, "k", 1, "gold")], now=5.0)
    assert info.value.param == "plan"
    with pytest.raises(cellrate.InvalidArgumentType) as type_info:
        cr_redis.check_all([(store, "k", "pro", 1)], now=5.0)
    assert type_info.value.param == "items"
