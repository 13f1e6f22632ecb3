"""The penalty box through the Redis store (docs/design/penalty.md): the script keeps a
key's strikes in a second key beside its state, read only when it refuses, and writes a
ban into the state as the core does. tests/vectors/penalty.txt runs through the script
(sync and asyncio faces); the windows' bans agree with the in-process store's; a key
refused `after` times is banned on the server's clock for the stated duration."""

from __future__ import annotations

import asyncio
import time

import pytest

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
from redis_servers import needs_redis  # noqa: E402
from test_penalty import KEYS, VECTORS  # noqa: E402
from test_redis import AsyncRedisLimiter, RedisLimiter, async_client_for  # noqa: E402
from test_vectors import STATUS, seconds_match  # noqa: E402

pytestmark = needs_redis


def read_refusals() -> list[dict]:
    """The vectors' runs of refusals: a penalty and, per turn-away, now and the state
    after it (strikes, ban_end, level)."""
    runs: list[dict] = []
    current = None
    for lineno, line in enumerate(VECTORS.read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        word, *rest = line.split()
        if word == "penalty" and rest[3] == "OK":
            current = {"penalty": (rest[0], float(rest[1]),
                                   None if rest[2] == "-" else float(rest[2])), "ops": []}
            runs.append(current)
        elif word == "refused":
            assert current is not None
            now, _ban_end, _started, strikes, ban_end, level = (int(x) for x in rest)
            current["ops"].append((lineno, now, (strikes, ban_end, level)))
    return [run for run in runs if run["ops"]]


REFUSALS = read_refusals()


def _penalty(given: tuple) -> cellrate.Penalty:
    after, ban, max_ban = given
    return cellrate.Penalty(after, ban, max_ban=max_ban)


def _strikes(client, store, key: str) -> tuple[int, int, int]:
    value = client.get(store.penalty_key(key))
    return (0, 0, 0) if value is None else tuple(int(x) for x in value.split())


def test_vectors_are_read() -> None:
    assert len(REFUSALS) >= 4 and sum(len(run["ops"]) for run in REFUSALS) > 40


@pytest.mark.parametrize("run", REFUSALS, ids=lambda r: r["penalty"][0])
def test_refusals_through_the_script(client, run: dict) -> None:
    """Each turn-away of the vectors (a cost the burst never fits: always refused) is a
    strike or, in a ban, nothing: the strikes' key after it is the core's state."""
    store = RedisLimiter(client, 1, 1.0, burst=1, name="r", penalty=_penalty(run["penalty"]))
    for lineno, now_ns, state in run["ops"]:
        d = store.check("k", 2, now=now_ns / 1e9)
        assert not d.allowed and d.retry_after == float("inf"), f"penalty.txt:{lineno}"
        assert _strikes(client, store, "k") == state, f"penalty.txt:{lineno}"


def _assert_check(d, values: list[int], where: str) -> None:
    _now, _cost, allowed, remaining, retry, reset = values
    assert (d.allowed, d.remaining) == (bool(allowed), remaining), where
    assert seconds_match(d.retry_after, retry), (where, d.retry_after)
    assert seconds_match(d.reset_after, reset), (where, d.reset_after)


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket"])
@pytest.mark.parametrize("key", KEYS, ids=lambda k: f"{k['penalty'][0]}")
def test_keys_through_the_script(client, key: dict, algorithm: str) -> None:
    """The vectors' decisions of gcra keys under a penalty, as check on one key and as
    allow on another; a reset lets the key out (its strikes' key deleted too)."""
    store = RedisLimiter(client, 1, key["emission"] / 1e9, burst=key["burst"], name="v",
                         algorithm=algorithm, penalty=_penalty(key["penalty"]))
    for lineno, word, values in key["ops"]:
        where = f"penalty.txt:{lineno}"
        if word == "reset":
            store.reset("k")
            store.reset("a")
            assert client.get(store.penalty_key("k")) is None
            continue
        now, cost = values[0] / 1e9, values[1]
        _assert_check(store.check("k", cost, now=now), values, where)
        assert store.allow("a", cost, now=now) is bool(values[2]), where


@pytest.mark.parametrize("key", KEYS, ids=lambda k: f"{k['penalty'][0]}")
def test_keys_through_the_asyncio_store(server, key: dict) -> None:
    async def run() -> None:
        client = async_client_for(server.port)
        await client.flushall()
        try:
            for coalesce in (False, True):
                store = AsyncRedisLimiter(client, 1, key["emission"] / 1e9, burst=key["burst"],
                                          name=f"a{int(coalesce)}", coalesce=coalesce,
                                          penalty=_penalty(key["penalty"]))
                for lineno, word, values in key["ops"]:
                    where = f"penalty.txt:{lineno} coalesce={coalesce}"
                    if word == "reset":
                        await store.reset("k")
                        await store.reset("a")
                        continue
                    now, cost = values[0] / 1e9, values[1]
                    _assert_check(await store.check("k", cost, now=now), values, where)
                    assert await store.allow("a", cost, now=now) is bool(values[2]), where
        finally:
            await client.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window", "gcra"])
def test_a_ban_in_any_algorithm_is_the_core_s(client, algorithm: str) -> None:
    """Refusals, bans and their repeats through the script answer as the in-process
    store under the same penalty (the ban written by the core's rule, cr_ban_core),
    at instants inside and across windows and bans."""
    penalty = cellrate.Penalty("3/10s", 2.5, max_ban=9)
    store = RedisLimiter(client, 4, 2.0, algorithm=algorithm, name="w", penalty=penalty)
    local = cellrate.Limiter(4, 2.0, algorithm=algorithm, penalty=penalty)
    now_ns, step, banned = 10**9 * 1000, 0, 0
    for i in range(400):
        step = (step * 7 + 3 + i) % 11
        now_ns += (step * 137_000_001) % 900_000_000
        cost = 1 + (i % 3 == 0) + (i % 17 == 0) * 4
        want = local.check(cost=cost, now=now_ns / 1e9)
        got = store.check("k", cost, now=now_ns / 1e9)
        where = f"{algorithm} {i} at {now_ns}"
        assert (got.allowed, got.remaining) == (want.allowed, want.remaining), where
        assert got.retry_after == want.retry_after, where
        assert got.reset_after == want.reset_after, where
        banned += not got.allowed and got.retry_after >= 2.0 and cost <= 4
    assert banned > 20  # the run meets bans (and repeats)


def test_a_key_refused_n_times_is_banned_on_the_server_clock(client) -> None:
    """Done-when, counted: after `after` refusals the key is refused for the ban on
    Redis's own clock (retry_after to its end), its strikes' key expires, and once the
    ban has passed the key is admitted again. Only what holds under any load is
    asserted (a refusal only while the measured time is inside the ban)."""
    ban = 1.0
    store = RedisLimiter(client, "100/s", burst=5, name="d",
                         penalty=cellrate.Penalty("3/minute", ban, max_ban=8))
    assert store.allow("k")
    for _ in range(2):  # two strikes: no ban yet (a cost above the burst never fits)
        assert not store.check("k", 6).allowed
    assert store.check("k").allowed
    started = time.monotonic()
    d = store.check("k", 6)  # the third: a ban of `ban` seconds
    assert not d.allowed and d.retry_after == float("inf")
    strikes, ban_end, level = _strikes(client, store, "k")
    assert (strikes, level) == (0, 0) and ban_end > 0
    assert 0 < client.pttl(store.penalty_key("k")) <= (ban + 8) * 1000
    d = store.check("k")
    elapsed = time.monotonic() - started
    if elapsed < ban:
        assert not d.allowed and d.remaining == 0
        assert ban - elapsed - 0.05 <= d.retry_after <= ban, d
        assert not store.allow("k")  # a refusal during a ban spends nothing
    assert _strikes(client, store, "k") == (0, ban_end, 0)  # counts nothing
    time.sleep(max(0.0, ban + 0.05 - (time.monotonic() - started)))
    assert store.check("k").allowed
    # a repeat offence within ban_end + max_ban: twice the ban
    for _ in range(3):
        store.check("k", 6)
    assert _strikes(client, store, "k")[2] == 1
    assert store.check("k").retry_after > ban * 0.5 or time.monotonic() - started > 2 * ban
    store.reset("k")  # lets it out
    assert client.get(store.penalty_key("k")) is None and store.check("k").allowed


def test_an_admission_reads_no_strikes(client) -> None:
    """An admitted decision under a penalty reads and writes only the state key (the
    strikes' key is touched only by a refusal): counted on the server."""
    store = RedisLimiter(client, "100/s", burst=50, name="c",
                         penalty=cellrate.Penalty("3/minute", 10))
    store.allow("k")
    before = client.info("commandstats")
    for _ in range(20):
        assert store.allow("k")
    after = client.info("commandstats")
    calls = {name: after[name]["calls"] - before.get(name, {"calls": 0})["calls"]
             for name in after if name.startswith("cmdstat_")}
    assert calls.get("cmdstat_get") == 20 and calls.get("cmdstat_set") == 20, calls
    assert client.get(store.penalty_key("k")) is None


def test_penalty_keys_share_the_state_key_s_slot() -> None:
    """The strikes' key is in its key's Cluster slot (redis-py's own rule), any key."""
    store = RedisLimiter(redis.Redis(), "10/s", name="n", penalty=cellrate.Penalty("3/s", 1))
    for key in ("k", "{user}:1", "a{b", "}x{y}z", "{}", "x" * 300, "tenant{42}:" + "y" * 300):
        redis_key, penalty_key = store.redis_key(key), store.penalty_key(key)
        assert penalty_key != redis_key and penalty_key.startswith(b"cellrate:n{")
        assert redis.crc.key_slot(penalty_key) == redis.crc.key_slot(redis_key), key


def test_a_penalty_the_script_cannot_carry_is_refused_naming_penalty() -> None:
    client = redis.Redis()
    for penalty in (cellrate.Penalty("3/200d", 1), cellrate.Penalty("3/s", 1, max_ban=9e6)):
        with pytest.raises(cellrate.InvalidArgument) as raised:
            RedisLimiter(client, "10/s", penalty=penalty)
        assert str(raised.value) == STATUS["E_REDIS_PENALTY"][1]
    with pytest.raises(cellrate.InvalidArgumentType) as raised:
        RedisLimiter(client, "10/s", penalty="3/minute")
    assert str(raised.value).startswith("penalty ")


def test_the_deny_cache_keeps_no_refusal_under_a_penalty(client) -> None:
    """Each refusal must reach the server to count as a strike."""
    store = RedisLimiter(client, "1/minute", name="dc", penalty=cellrate.Penalty("3/minute", 30))
    assert store.allow("k")
    for _ in range(3):
        assert not store.allow("k")
    assert not store._refusals
    assert _strikes(client, store, "k")[1] > 0  # banned: three strikes counted
    plain = RedisLimiter(client, "1/minute", name="dc2")
    plain.allow("k")
    plain.allow("k")
    assert plain._refusals  # the plain store keeps it


def test_a_batch_call_carries_its_wipe_marker_then_its_penalty_key() -> None:
    """A call of a batch is the request it stands for: its key, the wipe marker
    (on_wipe="refuse"), then the penalty key, and the same ARGV."""
    store = RedisLimiter(redis.Redis(), "10/s", name="b", penalty=cellrate.Penalty("3/s", 1))
    for mode in (cellrate.redis.CHECK, cellrate.redis.ALLOW):
        words = store._request(mode, "k", 1, 5.0, store.limit)
        batch = cellrate._cellrate._redis_batch(5.0, [store._batch_call(mode, 1, store.limit, "k")])
        keys, argv = words[1:4], words[4:]
        assert words[0] == b"3" and keys[1].startswith(b"cellrate{")
        assert keys[2] == store.penalty_key("k")
        assert batch == [b"3", *keys, b"1", b"3", str(len(argv)).encode(), *argv]


def test_a_penalized_batch_honours_on_wipe(client) -> None:
    """check_many under a penalty after Redis lost its state: the key reads as fully
    used (on_wipe="refuse"), not a fresh burst, and the refusal is a strike."""
    store = RedisLimiter(client, "5/minute", name="w", penalty=cellrate.Penalty("3/minute", 30))
    client.flushall()  # every wipe marker gone
    [decision] = cellrate.redis.check_many([(store, "k", 1)])
    assert not decision.allowed
    assert _strikes(client, store, "k")[0] > 0
