"""@cellrate.limit on functions, methods and async functions.

None may fail on a busy machine, where any line can pause for a while: a
limit that must still refuse after a pause has an interval of an hour, a
wait is timed from before the admission it waits behind, and a call that
must refuse at once is seen not to sleep (never_sleeps), not timed."""

import asyncio
import bisect
import functools
import inspect
import math
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import cellrate
from conftest import Recording, ticks_during


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
    limited = cellrate.limit("2/hour", burst=2, block=False)(body)
    assert limited() == "ran" and limited() == "ran"
    with pytest.raises(cellrate.RateLimited) as caught:
        limited()
    assert body.calls == 2
    assert 0.0 < caught.value.retry_after <= 1800
    assert caught.value.decision.allowed is False


def test_several_limits_in_one_rate_string_decide_as_one():
    """"10/second;2/minute": each part its own limit, decided as one (check_all):
    the tighter refuses, and a refusal spends nothing of the other."""
    body = count_calls(lambda: "ran")
    limited = cellrate.limit("10/second;2/minute", burst=2, block=False)(body)
    assert [limited(), limited()] == ["ran", "ran"]
    with pytest.raises(cellrate.RateLimited) as caught:
        limited()
    assert body.calls == 2 and caught.value.retry_after > 1  # the minute's: 30 s a unit
    blocking = cellrate.limit("1000/second;1/hour", timeout=0)(body)
    assert blocking() == "ran"
    with pytest.raises(cellrate.RateLimited) as caught:  # waits on the tightest peek: too long
        blocking()
    assert body.calls == 3 and caught.value.retry_after > 1

    keyed = cellrate.limit("1/hour;5/day", key=lambda user: user, block=False)(lambda user: user)
    assert keyed("alice") == "alice" and keyed("bob") == "bob"
    with pytest.raises(cellrate.RateLimited):
        keyed("alice")

    @cellrate.limit("10/second; 1/hour", block=False)
    async def fetch():
        return "fetched"

    assert asyncio.run(fetch()) == "fetched"
    with pytest.raises(cellrate.RateLimited):
        asyncio.run(fetch())


def test_several_limits_elsewhere_name_check_all():
    for make in (cellrate.Limiter, cellrate.KeyedLimiter):
        with pytest.raises(cellrate.InvalidArgument, match="decide them as one with check_all"):
            make("100/day;10/hour")
    with pytest.raises(cellrate.InvalidArgument, match="has an empty part") as caught:
        cellrate.limit("1/second;;1/minute")
    assert caught.value.param == "rate"


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
    # The loop ran other tasks while the calls waited: the ticker's next turn
    # (5 ms) is due before the last call's (150 ms), and comes round even when
    # a pause ate the wait (each call yields once); a wait that blocked the
    # loop would have let it run once.
    assert ticks >= 2


def test_async_non_blocking_raises():
    @cellrate.limit("1/hour", block=False)
    async def once():
        return "ran"

    async def main():
        assert await once() == "ran"
        with pytest.raises(cellrate.RateLimited):
            await once()

    asyncio.run(main())


def test_timeout_raises_at_once_when_it_cannot_be_met(never_sleeps):
    @cellrate.limit("1/hour", burst=1, timeout=0.5)
    def call():
        return True

    assert call()
    with pytest.raises(cellrate.RateLimited) as caught:
        call()  # (never_sleeps: it did not sleep 0.5 s to find out)
    assert caught.value.retry_after > 0.5


def test_keyed_one_limit_per_key():
    @cellrate.limit("1/hour", key=lambda user, *_: user, block=False)
    def act(user, payload):
        return (user, payload)

    assert act("alice", 1) == ("alice", 1)
    assert act("bob", 1) == ("bob", 1)
    with pytest.raises(cellrate.RateLimited):
        act("alice", 2)
    with pytest.raises(cellrate.RateLimited):
        act("bob", 2)


def test_keyed_blocking_waits_only_on_its_own_key():
    store = Recording(cellrate.KeyedLimiter(4, burst=1))  # T = 250 ms per user

    @cellrate.limit(limiter=store, key=lambda user: user)
    def act(user):
        return time.monotonic()

    start = time.monotonic()  # before alice's first: her second is at least T after it
    act("alice")
    act("bob")
    assert store.delays[1] == 0.0  # bob reserved no wait behind alice
    assert act("alice") - start >= 0.25 - 0.001


def test_key_reads_keyword_arguments():
    @cellrate.limit("1/hour", key=lambda *args, user: user, block=False)
    def act(*args, user):
        return user

    assert act(user="alice") == "alice"
    assert act(user="bob") == "bob"
    with pytest.raises(cellrate.RateLimited):
        act(user="alice")


def test_cost_as_int_and_as_function():
    @cellrate.limit(5, 3600, burst=5, cost=2, block=False)
    def pair():
        return True

    assert pair() and pair()
    with pytest.raises(cellrate.RateLimited):
        pair()  # 4 of 5 spent: 2 more do not fit

    @cellrate.limit(5, 3600, burst=5, cost=lambda items: len(items), block=False)
    def send(items):
        return len(items)

    assert send([1, 2, 3]) == 3
    with pytest.raises(cellrate.RateLimited) as caught:
        send([1, 2, 3])
    assert not math.isinf(caught.value.retry_after)
    with pytest.raises(cellrate.RateLimited) as caught:
        send(list(range(6)))  # can never fit a burst of 5, even blocking
    assert math.isinf(caught.value.retry_after)


def test_unfittable_cost_raises_at_once_when_blocking(never_sleeps):
    @cellrate.limit(5, burst=5, cost=lambda n: n)
    def send(n):
        return n

    with pytest.raises(cellrate.RateLimited) as caught:
        send(6)
    assert caught.value.param == "cost"


class Client:
    def __init__(self, name):
        self.name = name

    @cellrate.limit("1/hour", key=lambda self, path: self.name, block=False)
    def get(self, path):
        """Fetch path."""
        return (self.name, path)

    @cellrate.limit("1/hour", block=False)
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
    shared = cellrate.Limiter(2, 3600, burst=2)
    first = cellrate.limit(limiter=shared, block=False)(lambda: 1)
    second = cellrate.limit(limiter=shared, block=False)(lambda: 2)
    assert first() == 1 and second() == 2
    with pytest.raises(cellrate.RateLimited):
        first()
    with pytest.raises(cellrate.RateLimited):
        second()


def test_shared_region_limiter(tmp_path):
    path = str(tmp_path / "limit.region")
    one = cellrate.limit(limiter=cellrate.Limiter(1, 3600, shared=path), block=False)(lambda: 1)
    other = cellrate.limit(limiter=cellrate.Limiter(1, 3600, shared=path), block=False)(lambda: 2)
    assert one() == 1
    with pytest.raises(cellrate.RateLimited):
        other()  # a second object on the same region: the same limit


def test_existing_keyed_limiter_needs_a_key():
    keyed = cellrate.KeyedLimiter(1, 3600)
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
    slow = CheckOnlyStore(1, 3600, burst=1)
    assert cellrate.limit(limiter=slow, key=lambda: "k")(lambda: 1)() == 1
    with pytest.raises(cellrate.RateLimited):
        cellrate.limit(limiter=slow, key=lambda: "k", timeout=0.0)(lambda: 1)()


def test_an_async_store_is_awaited():
    store = AsyncCheckOnlyStore(20, burst=1)

    @cellrate.limit(limiter=store, key=lambda: "k")
    async def act():
        return time.monotonic()

    @cellrate.limit(limiter=AsyncCheckOnlyStore(1, 3600, burst=1), key=lambda: "k",
                    block=False)
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


# --------------------------------------------------------------------------
# The pace of a limit the decorator builds: at most N calls start in any
# window of one period (docs/design.md §9).


def most_in_a_window(stamps_ns, window_ns):
    """The most of `stamps_ns` (sorted) in any half-open window [t, t + window)."""
    return max(bisect.bisect_left(stamps_ns, start + window_ns) - index
               for index, start in enumerate(stamps_ns))


@pytest.mark.parametrize("rate, most", [("20/0.2s", 20), ("12.5/0.2s", 13)])
def test_at_most_the_rate_in_any_window_of_the_period_at_full_speed(rate, most):
    stamps = []

    @cellrate.limit(rate)
    def call():
        stamps.append(time.monotonic_ns())

    period_ns = 200_000_000
    while len(stamps) <= 2 * most:  # as fast as it will go, over 2 periods at least
        call()
    # "20/second" used to let the burst through at once and then the rate:
    # 2 * N in the first period
    assert most_in_a_window(stamps, period_ns) <= most


@settings(max_examples=300, deadline=None)
@given(emission_ns=st.integers(1, 10**9), period_ns=st.integers(1, 10**10),
       lateness_ns=st.lists(st.integers(0, 3 * 10**9), min_size=1, max_size=60))
def test_burst_1_puts_at_most_ceil_period_over_t_in_any_window(emission_ns, period_ns,
                                                                lateness_ns):
    """The proof of docs/design.md §9 on a stand-in clock: with burst 1, calls
    that come as fast as they are let through (each arrival is the previous
    admission, plus any lateness) are admitted at least T apart, so any
    half-open window of length d holds at most ceil(d / T) of them: the rate
    per period (ceil(rate) for a fractional one) when d is the period."""
    limiter = cellrate.Limiter(period_ns / emission_ns, period_ns / 1e9, burst=1)
    assume(limiter.emission_ns == emission_ns)
    admitted, now_ns = [], 10**12
    for late_ns in lateness_ns:
        delay = limiter.reserve(now=now_ns / 1e9)
        admitted.append(now_ns + round(delay * 1e9))
        now_ns = admitted[-1] + late_ns
    assert most_in_a_window(admitted, period_ns) <= -(-period_ns // emission_ns)


# --------------------------------------------------------------------------
# Generators, async generators, classmethod and staticmethod.


def test_an_async_generator_awaits_without_blocking_the_loop():
    store = Recording(cellrate.Limiter(4, burst=1))  # T = 250 ms

    @cellrate.limit(limiter=store)
    async def numbers(count):
        for number in range(count):
            yield number

    assert inspect.isasyncgenfunction(numbers)
    assert numbers.__name__ == "numbers" and numbers.__wrapped__ is not None

    async def collect(count):
        return [n async for n in numbers(count)]

    async def main():
        for _ in range(100):  # a pause as long as T after the first leaves no wait: again
            first = await collect(2)
            mark = len(store.delays)
            second, during = await ticks_during(collect(3))  # waits up to 250 ms for its turn
            if store.delays[mark] >= 0.05:
                return first, second, during, store.delays[mark]

    first, second, during, delay = asyncio.run(main())
    assert (first, second) == ([0, 1], [0, 1, 2]) and delay >= 0.05
    # a wait that blocked the loop (time.sleep) would have let it tick once at
    # most; the ticker's next turn (10 ms) is due before the waiter's
    assert during >= 2


def test_an_async_generator_is_charged_when_iteration_starts_and_delegates():
    limiter = cellrate.Limiter(10, 3600, burst=2)

    @cellrate.limit(limiter=limiter, block=False)
    async def echo():
        received = yield "ready"
        while True:
            try:
                received = yield received
            except KeyError as error:
                received = f"caught {error.args[0]}"

    async def main():
        generators = [echo(), echo(), echo()]
        assert limiter.peek(0).remaining == 2  # creating them charged nothing
        first = generators[0]
        assert await first.__anext__() == "ready"
        assert limiter.peek(0).remaining == 1
        assert await first.asend("a") == "a"
        assert await first.athrow(KeyError("k")) == "caught k"
        await first.aclose()
        assert await generators[1].__anext__() == "ready"
        with pytest.raises(cellrate.RateLimited):
            await generators[2].__anext__()

    asyncio.run(main())


def test_a_generator_is_charged_at_its_first_next_and_delegates():
    limiter = cellrate.Limiter(10, 3600, burst=2)

    @cellrate.limit(limiter=limiter, block=False)
    def running_total():
        total = 0
        while True:
            value = yield total
            if value is None:
                return total
            total += value

    assert inspect.isgeneratorfunction(running_total)
    generators = [running_total() for _ in range(3)]
    assert limiter.peek(0).remaining == 2  # creating them charged nothing
    first = generators[0]
    assert next(first) == 0
    assert limiter.peek(0).remaining == 1
    assert first.send(5) == 5 and first.send(2) == 7
    with pytest.raises(StopIteration) as done:
        next(first)
    assert done.value.value == 7  # the return value comes through
    assert next(generators[1]) == 0
    with pytest.raises(cellrate.RateLimited):
        next(generators[2])


class Catalogue:
    @cellrate.limit("1/hour", key=lambda cls, name: cls.__name__, block=False)
    @classmethod
    def find(cls, name):
        """Find by name."""
        return (cls.__name__, name)

    @cellrate.limit("1/hour", block=False)
    @staticmethod
    def ping():
        return "pong"


class Shelf(Catalogue):
    pass


def test_limit_above_classmethod_and_staticmethod_charges_each_call():
    assert Catalogue.find("a") == ("Catalogue", "a")
    assert Shelf().find("b") == ("Shelf", "b")  # its own key: the class
    with pytest.raises(cellrate.RateLimited):
        Catalogue.find("c")
    assert Catalogue.find.__doc__ == "Find by name."
    assert list(inspect.signature(Catalogue.find).parameters) == ["name"]
    assert Catalogue.ping() == "pong"
    with pytest.raises(cellrate.RateLimited):
        Catalogue().ping()


def test_something_that_is_not_a_function_is_refused():
    with pytest.raises(cellrate.InvalidArgumentType) as caught:
        cellrate.limit(1)(42)
    assert caught.value.param == "func"
