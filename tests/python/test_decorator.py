"""@cellrate.limit on functions, methods and async functions."""

import asyncio
import functools
import inspect
import math
import time

import pytest

import cellrate


def count_calls(func):
    """`func` with a `.calls` counter of the times its body ran."""

    @functools.wraps(func)
    def counted(*args, **kwargs):
        counted.calls += 1
        return func(*args, **kwargs)

    counted.calls = 0
    return counted


def test_blocking_function_is_spaced_and_returns_its_value():
    @cellrate.limit(20, burst=1)  # T = 50 ms
    def double(x):
        return 2 * x

    start = time.monotonic()
    results = [double(i) for i in range(4)]
    elapsed = time.monotonic() - start
    assert results == [0, 2, 4, 6]
    assert elapsed >= 3 * 0.05 - 0.001


def test_non_blocking_function_raises_and_does_not_run():
    body = count_calls(lambda: "ran")
    limited = cellrate.limit("2/second", block=False)(body)
    assert limited() == "ran" and limited() == "ran"
    with pytest.raises(cellrate.RateLimited) as caught:
        limited()
    assert body.calls == 2
    assert 0.0 < caught.value.retry_after <= 0.5
    assert caught.value.decision.allowed is False


def test_async_function_awaits_and_stays_a_coroutine_function():
    @cellrate.limit(20, burst=1)
    async def fetch(x):
        await asyncio.sleep(0)
        return x

    assert inspect.iscoroutinefunction(fetch)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.ensure_future(ticker())
        start = time.monotonic()
        results = await asyncio.gather(*(fetch(i) for i in range(4)))
        elapsed = time.monotonic() - start
        task.cancel()
        return results, elapsed, ticks

    results, elapsed, ticks = asyncio.run(main())
    assert results == [0, 1, 2, 3]
    assert elapsed >= 3 * 0.05 - 0.001
    assert ticks >= 5  # the loop ran other tasks while the calls waited


def test_async_non_blocking_raises():
    @cellrate.limit(1, block=False)
    async def once():
        return "ran"

    async def main():
        assert await once() == "ran"
        with pytest.raises(cellrate.RateLimited):
            await once()

    asyncio.run(main())


def test_timeout_raises_at_once_when_it_cannot_be_met():
    @cellrate.limit(1, burst=1, timeout=0.5)
    def call():
        return True

    assert call()
    start = time.monotonic()
    with pytest.raises(cellrate.RateLimited) as caught:
        call()
    assert time.monotonic() - start < 0.4  # it did not sleep (0.5 s) to find out
    assert caught.value.retry_after > 0.8


def test_keyed_one_limit_per_key():
    @cellrate.limit(1, key=lambda user, *_: user, block=False)
    def act(user, payload):
        return (user, payload)

    assert act("alice", 1) == ("alice", 1)
    assert act("bob", 1) == ("bob", 1)
    with pytest.raises(cellrate.RateLimited):
        act("alice", 2)
    with pytest.raises(cellrate.RateLimited):
        act("bob", 2)


def test_keyed_blocking_waits_only_on_its_own_key():
    @cellrate.limit(4, burst=1, key=lambda user: user)  # T = 250 ms per user
    def act(user):
        return time.monotonic()

    act("alice")
    start = time.monotonic()
    act("bob")
    assert time.monotonic() - start < 0.2  # not behind alice (0.25 s)
    act("alice")
    assert time.monotonic() - start >= 0.2


def test_key_reads_keyword_arguments():
    @cellrate.limit(1, key=lambda *args, user: user, block=False)
    def act(*args, user):
        return user

    assert act(user="alice") == "alice"
    assert act(user="bob") == "bob"
    with pytest.raises(cellrate.RateLimited):
        act(user="alice")


def test_cost_as_int_and_as_function():
    @cellrate.limit(5, burst=5, cost=2, block=False)
    def pair():
        return True

    assert pair() and pair()
    with pytest.raises(cellrate.RateLimited):
        pair()  # 4 of 5 spent: 2 more do not fit

    @cellrate.limit(5, burst=5, cost=lambda items: len(items), block=False)
    def send(items):
        return len(items)

    assert send([1, 2, 3]) == 3
    with pytest.raises(cellrate.RateLimited) as caught:
        send([1, 2, 3])
    assert not math.isinf(caught.value.retry_after)
    with pytest.raises(cellrate.RateLimited) as caught:
        send(list(range(6)))  # can never fit a burst of 5, even blocking
    assert math.isinf(caught.value.retry_after)


def test_unfittable_cost_raises_at_once_when_blocking():
    @cellrate.limit(5, burst=5, cost=lambda n: n)
    def send(n):
        return n

    start = time.monotonic()
    with pytest.raises(cellrate.RateLimited) as caught:
        send(6)
    assert time.monotonic() - start < 0.25
    assert caught.value.param == "cost"


class Client:
    def __init__(self, name):
        self.name = name

    @cellrate.limit(1, key=lambda self, path: self.name, block=False)
    def get(self, path):
        """Fetch path."""
        return (self.name, path)

    @cellrate.limit(1, block=False)
    async def aget(self, path):
        return path


def test_methods_keep_self_and_key_on_it():
    a, b = Client("a"), Client("b")
    assert a.get("/x") == ("a", "/x")
    assert b.get("/x") == ("b", "/x")
    with pytest.raises(cellrate.RateLimited):
        a.get("/y")
    assert Client.get.__doc__ == "Fetch path."
    assert list(inspect.signature(Client.get).parameters) == ["self", "path"]
    assert list(inspect.signature(a.get).parameters) == ["path"]
    assert inspect.iscoroutinefunction(Client.aget)
    assert asyncio.run(a.aget("/z")) == "/z"
    with pytest.raises(cellrate.RateLimited):
        asyncio.run(b.aget("/z"))  # no key: one limit for every instance


def test_wraps_keeps_name_doc_signature_and_wrapped():
    def original(a: int, b: str = "x", *, c: float = 1.0) -> str:
        """The doc."""
        return b * a

    limited = cellrate.limit(10)(original)
    assert limited.__name__ == "original"
    assert limited.__qualname__ == original.__qualname__
    assert limited.__doc__ == "The doc."
    assert limited.__wrapped__ is original
    assert inspect.signature(limited) == inspect.signature(original)
    assert limited(2, "y") == "yy"


def test_one_existing_limiter_covers_several_functions():
    shared = cellrate.Limiter(2, burst=2)
    first = cellrate.limit(limiter=shared, block=False)(lambda: 1)
    second = cellrate.limit(limiter=shared, block=False)(lambda: 2)
    assert first() == 1 and second() == 2
    with pytest.raises(cellrate.RateLimited):
        first()
    with pytest.raises(cellrate.RateLimited):
        second()


def test_shared_region_limiter(tmp_path):
    path = str(tmp_path / "limit.region")
    one = cellrate.limit(limiter=cellrate.Limiter(1, shared=path), block=False)(lambda: 1)
    other = cellrate.limit(limiter=cellrate.Limiter(1, shared=path), block=False)(lambda: 2)
    assert one() == 1
    with pytest.raises(cellrate.RateLimited):
        other()  # a second object on the same region: the same limit


def test_existing_keyed_limiter_needs_a_key():
    keyed = cellrate.KeyedLimiter(1)
    with pytest.raises(cellrate.InvalidArgumentType) as caught:
        cellrate.limit(limiter=keyed)
    assert caught.value.param == "key"
    act = cellrate.limit(limiter=keyed, key=lambda user: user, block=False)(lambda user: user)
    assert act("a") == "a"
    with pytest.raises(cellrate.RateLimited):
        act("a")
    assert not keyed.allow("a")


class CheckOnlyStore:
    """A store with check/peek and no reservations (as a remote store may be)."""

    def __init__(self, *args, **kwargs):
        self.inner = cellrate.KeyedLimiter(*args, **kwargs)
        self.checks = 0

    def check(self, key, cost=1):
        self.checks += 1
        return self.inner.check(key, cost)

    def peek(self, key, cost=1):
        return self.inner.peek(key, cost)


class AsyncCheckOnlyStore(CheckOnlyStore):
    async def check(self, key, cost=1):
        await asyncio.sleep(0)
        return CheckOnlyStore.check(self, key, cost)

    async def peek(self, key, cost=1):
        return CheckOnlyStore.peek(self, key, cost)


def test_a_store_without_reservations_waits_by_retrying():
    store = CheckOnlyStore(20, burst=1)  # T = 50 ms
    act = cellrate.limit(limiter=store, key=lambda: "k")(lambda: time.monotonic())
    start = time.monotonic()
    stamps = [act() - start for _ in range(3)]
    assert stamps[2] >= 2 * 0.05 - 0.001
    assert store.checks >= 3
    with pytest.raises(cellrate.RateLimited):
        cellrate.limit(limiter=store, key=lambda: "k", timeout=0.0)(lambda: 1)()


def test_an_async_store_is_awaited():
    store = AsyncCheckOnlyStore(20, burst=1)

    @cellrate.limit(limiter=store, key=lambda: "k")
    async def act():
        return time.monotonic()

    @cellrate.limit(limiter=store, key=lambda: "other", block=False)
    async def once():
        return True

    async def main():
        start = time.monotonic()
        stamps = [await act() - start for _ in range(3)]
        assert await once()
        with pytest.raises(cellrate.RateLimited):
            await once()
        return stamps

    stamps = asyncio.run(main())
    assert stamps[2] >= 2 * 0.05 - 0.001


def test_a_sync_function_refuses_an_async_store():
    with pytest.raises(cellrate.InvalidArgumentType) as caught:
        cellrate.limit(limiter=AsyncCheckOnlyStore(1), key=lambda: "k")(lambda: 1)
    assert caught.value.param == "limiter"


@pytest.mark.parametrize(
    "kwargs, param, error",
    [
        ({}, "rate", cellrate.InvalidArgumentType),
        ({"rate": 1, "limiter": cellrate.Limiter(1)}, "limiter", cellrate.InvalidArgumentType),
        ({"rate": 1, "key": "user"}, "key", cellrate.InvalidArgumentType),
        ({"rate": 1, "cost": "2"}, "cost", cellrate.InvalidArgumentType),
        ({"rate": 1, "cost": True}, "cost", cellrate.InvalidArgumentType),
        ({"rate": 1, "block": "yes"}, "block", cellrate.InvalidArgumentType),
        ({"rate": 1, "timeout": -1}, "timeout", cellrate.InvalidArgument),
        ({"rate": 0}, "rate", cellrate.InvalidArgument),
        ({"rate": 1, "burst": 0}, "burst", cellrate.InvalidArgument),
        ({"rate": 1, "algorithm": "leaky"}, "algorithm", cellrate.InvalidArgument),
    ],
)
def test_bad_arguments_name_the_parameter(kwargs, param, error):
    with pytest.raises(error) as caught:
        cellrate.limit(**kwargs)
    assert caught.value.param == param


def test_bad_key_and_cost_results_name_the_parameter():
    bad_key = cellrate.limit(1, key=lambda: 42)(lambda: 1)
    with pytest.raises(cellrate.InvalidArgumentType) as caught:
        bad_key()
    assert caught.value.param == "key"
    bad_cost = cellrate.limit(1, cost=lambda: -1)(lambda: 1)
    with pytest.raises(cellrate.InvalidArgument) as caught:
        bad_cost()
    assert caught.value.param == "cost"
