"""@cellrate.limit: a limit on a function, a method or an async function."""

from __future__ import annotations

import contextlib
import functools
from typing import (Any, AsyncIterator, Callable, Iterator, List, Literal, Mapping, Optional,
                    TypeVar, Union)

from cellrate import _cellrate, _outbound
from cellrate._cellrate import KeyedLimiter, Limiter
from cellrate._errors import invalid_type
from cellrate._rates import part_options, split_rates
from cellrate._wait import RateLimited, acquire, check_timeout, wait

F = TypeVar("F", bound=Callable[..., Any])
Key = Union[str, bytes]
Algorithm = Literal["gcra", "token_bucket", "fixed_window", "sliding_window"]


class CheckOnly:
    """Reservation methods over a store that only has check/peek (no reserve):
    it reserves only "now", so its waiters retry on `retry_after` instead of
    queueing (docs/design.md §9)."""

    __slots__ = ("store",)

    def __init__(self, store: Any) -> None:
        self.store = store

    def reserve(self, *args: Any, timeout: Optional[float] = None) -> Any:
        import inspect

        decision = self.store.check(*args)
        if inspect.isawaitable(decision):
            return self._reserve_async(decision)
        return 0.0 if decision.allowed else None

    @staticmethod
    async def _reserve_async(pending: Any) -> Optional[float]:
        decision = await pending
        return 0.0 if decision.allowed else None

    def peek(self, *args: Any) -> Any:
        return self.store.peek(*args)


class Classed:
    """A store's decisions in one priority class and/or under one plan:
    check() and peek() name them. It has no reserve(): its waiters go through
    CheckOnly, retrying on `retry_after`, which is the class's and plan's."""

    __slots__ = ("store", "named")

    def __init__(self, store: Any, priority: Optional[str], plan: Optional[str] = None) -> None:
        self.store = store
        self.named = {name: value for name, value in (("priority", priority), ("plan", plan))
                      if value is not None}

    def check(self, *args: Any) -> Any:
        return self.store.check(*args, **self.named)

    def peek(self, *args: Any) -> Any:
        return self.store.peek(*args, **self.named)


class CheckAll:
    """Several limits as one store (a rate such as "10/second;100/minute"):
    check() decides them as one (cellrate.check_all: a refusal spends nothing
    of any), peek() gives the tightest. It has no reserve(): its waiters go
    through CheckOnly, retrying on `retry_after`."""

    __slots__ = ("stores",)

    def __init__(self, stores: List[Any]) -> None:
        self.stores = stores

    def check(self, *args: Any) -> Any:
        *key, cost = args
        items = self.stores if not key else [(store, key[0]) for store in self.stores]
        return _cellrate.check_all(items, cost)

    def peek(self, *args: Any) -> Any:
        decisions = [store.peek(*args) for store in self.stores]
        refusals = [decision for decision in decisions if not decision.allowed]
        if refusals:
            return max(refusals, key=lambda decision: decision.retry_after)
        return min(decisions, key=lambda decision: decision.remaining)


def limit(
    rate: Union[float, str, None] = None,
    period: Optional[float] = None,
    *,
    burst: Optional[int] = None,
    algorithm: Algorithm = "gcra",
    key: Optional[Callable[..., Key]] = None,
    cost: Union[int, Callable[..., int]] = 1,
    block: bool = True,
    timeout: Optional[float] = None,
    limiter: Any = None,
    follow: Union[bool, Callable[[Any], Any]] = False,
    priorities: Optional[Mapping[str, float]] = None,
    priority: Optional[str] = None,
    plans: Optional[Mapping[str, Any]] = None,
    plan: Optional[str] = None,
) -> Callable[[F], F]:
    """Limits how often the decorated function runs.

    Either `rate` (with `period`, `burst`, `algorithm`, as for Limiter; a
    string may name several limits, "10/second;100/minute", decided as one) or
    `limiter=`: any existing limiter or store (Limiter, KeyedLimiter, a
    `shared=` one, RedisLimiter / AsyncRedisLimiter).

    burst:   defaults here to the cost of a call (1), not to the rate as for
             Limiter: calls start evenly spaced, so that at most `rate` of
             them start in any window of one `period` (ceil(rate) for a
             fractional rate), the pace a provider's "N per period" asks for
             (docs/design.md §9). Give burst= to allow bursts. With `cost` a
             function (costs that vary) the default is Limiter's.
    key:     a function of the call's arguments returning str or bytes: one limit
             per key (a KeyedLimiter, or the keyed store given as `limiter=`).
    cost:    units each call spends: an int, or a function of the call's arguments.
    block:   True: wait (an async function awaits) until admitted, at most
             `timeout` seconds; False: raise RateLimited at once when refused.
    follow:  True for a function that returns an HTTP response (.headers and
             .status_code or .status): the limit follows what it says of the
             provider's own (Limiter.follow: a 429's Retry-After holds every
             call until then); or a function of the result returning
             (headers, status).
    priorities: priority classes of the limit made from `rate` ({name:
             reserve}, as for Limiter); priority: the class every call is
             decided in (a name of the limit's priorities; one limit, not
             several parts). A blocked call retries on the class's
             retry_after.
    plans:   plans of the keyed limit made from `rate` ({name: rate or
             Limit}, as for KeyedLimiter); plan: the plan every call's key is
             decided under (a name of the keyed limit's plans; one limit, not
             several parts). A blocked call retries on the plan's retry_after.

    A call that is not admitted raises RateLimited (.retry_after, .decision).
    Functions, methods, async functions, generators and async generators (these
    two are charged when their iteration starts, at the first next() or
    __anext__()), and classmethod / staticmethod objects (above or below
    @classmethod). The wrapper keeps the function's name, docstring, signature
    and `__wrapped__`, and its kind for `inspect` (a coroutine function, a
    generator function, an async generator function stays one).
    """
    import inspect  # here: `import cellrate` stays light

    # the core's table checks every option (cellrate/options.h)
    options = _cellrate._check_options("limit", {
        "period": period, "burst": burst, "algorithm": algorithm, "key": key, "cost": cost,
        "block": block, "timeout": timeout, "limiter": limiter, "priority": priority,
        "priorities": priorities, "plans": plans, "plan": plan})
    block, cost = options["block"], options["cost"]
    timeout = check_timeout(options["timeout"])  # as the waits take it (None: any wait)
    if limiter is None:
        if rate is None:
            raise invalid_type("rate", "limit() needs a rate or a limiter=")
        algorithm = options["algorithm"]
        if burst is None and isinstance(cost, int) and _cellrate._algorithm_takes_burst(algorithm):
            burst = max(1, cost)  # even spacing: the window bound of docs/design.md §9
        kind: Any = Limiter if key is None else KeyedLimiter  # its overloads split algorithms
        classes: Any = {} if priorities is None else {"priorities": priorities}
        if plans is not None:
            _cellrate._check_plan_items(1, key is not None, False)  # a keyed limit's
            classes["plans"] = plans
        # "100/minute;1000000/month": a calendar quota (UTC) of a part per month or year
        stores = [kind(part, **part_options(True, None, None), **classes) if calendar else
                  kind(part, period, burst=burst, algorithm=algorithm, **classes)
                  for part, calendar in split_rates(rate)]
        store: Any = stores[0] if len(stores) == 1 else CheckAll(stores)
    elif (rate is not None or period is not None or burst is not None or algorithm != "gcra"
          or priorities is not None or plans is not None):
        raise invalid_type("limiter", "give either rate (period, burst, algorithm, priorities) or "
                                      "limiter=")
    elif isinstance(limiter, _cellrate.KeyedLimiter) and key is None:
        raise invalid_type("key", "a KeyedLimiter needs key=, a function of the call's arguments")
    else:
        store = limiter
    if follow is not False and not (follow is True or callable(follow)):
        raise invalid_type("follow", "follow must be True or a function of the result "
                                     "returning (headers, status)")
    if follow is not False and not _outbound.can_follow(store):
        raise invalid_type("limiter", "limiter: follow= needs a store that follows a "
                                      "provider: a Limiter, a KeyedLimiter or a fleet share's")
    if priority is not None:
        _cellrate._check_priority_items(len(store.stores) if isinstance(store, CheckAll) else 1)
    if plan is not None:  # one keyed limit's: several parts as one take none
        _cellrate._check_plan_items(len(store.stores) if isinstance(store, CheckAll) else 1,
                                    key is not None, True)
    decider = store if priority is None and plan is None else Classed(store, priority, plan)
    waiter = decider if hasattr(decider, "reserve") else CheckOnly(decider)
    reserve, check = waiter.reserve, decider.check
    store_is_async = inspect.iscoroutinefunction(check)
    fixed_cost, cost_of = (cost, None) if isinstance(cost, int) else (0, cost)

    # Each wrapper spells its calls out (no `*prefix`, no keyword unless a
    # timeout is set): an admitted call costs one compiled reserve (or check)
    # and the wrapper's own frame.
    def limit_async(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        async def limited_async(*args: Any, **kwargs: Any) -> Any:
            units = fixed_cost if cost_of is None else cost_of(*args, **kwargs)
            prefix = () if key is None else (key(*args, **kwargs),)
            if block:
                delay = reserve(*prefix, units, timeout=timeout)
                if delay != 0.0:
                    await acquire(waiter, prefix, units, timeout, delay)
            else:
                decision = check(*prefix, units)
                if store_is_async:
                    decision = await decision
                if not decision.allowed:
                    raise RateLimited(decision)
            return await func(*args, **kwargs)

        return limited_async

    def limit_sync(func: Callable[..., Any]) -> Callable[..., Any]:
        if store_is_async:
            raise invalid_type("limiter", "an asyncio store limits async functions only")

        @functools.wraps(func)
        def limited(*args: Any, **kwargs: Any) -> Any:
            units = fixed_cost if cost_of is None else cost_of(*args, **kwargs)
            if key is None:
                if block:
                    delay = reserve(units) if timeout is None else reserve(units, timeout=timeout)
                    if delay != 0.0:
                        wait(waiter, (), units, timeout, delay)
                else:
                    decision = check(units)
                    if not decision.allowed:
                        raise RateLimited(decision)
            else:
                name = key(*args, **kwargs)
                if block:
                    delay = (reserve(name, units) if timeout is None
                             else reserve(name, units, timeout=timeout))
                    if delay != 0.0:
                        wait(waiter, (name,), units, timeout, delay)
                else:
                    decision = check(name, units)
                    if not decision.allowed:
                        raise RateLimited(decision)
            return func(*args, **kwargs)

        return limited

    def decorate(func: F) -> F:
        # A classmethod or staticmethod object (@limit above it) is not the
        # function: limit the function inside and wrap it again the same way.
        if isinstance(func, (classmethod, staticmethod)):
            return type(func)(decorate(func.__func__))
        if not callable(func):
            raise invalid_type(
                "func", f"limit() decorates a function, not {type(func).__name__}")
        target: Callable[..., Any] = func
        if follow is not False:
            if inspect.isasyncgenfunction(func) or inspect.isgeneratorfunction(func):
                raise invalid_type("follow", "follow: a generator returns no response to follow")
            target = _following(func, store, key, follow)
        if inspect.isasyncgenfunction(target):
            limited = _async_generator(target, _async_gate(limit_async(_admitted_async)))
        elif inspect.isgeneratorfunction(target):
            limited = _generator(target, _gate(limit_sync(_admitted)))
        elif inspect.iscoroutinefunction(target):
            limited = limit_async(target)
        else:
            limited = limit_sync(target)
        return limited  # type: ignore[return-value]

    return decorate


def _response_parts(result: Any) -> Any:
    """(headers, status) of an HTTP response of httpx, requests, aiohttp or urllib."""
    headers = getattr(result, "headers", None)
    if headers is None:
        raise invalid_type("follow", f"follow: the function returned {type(result).__name__}, "
                                     "not a response; give follow= a function of the result "
                                     "returning (headers, status)")
    status = getattr(result, "status_code", None)
    return headers, getattr(result, "status", None) if status is None else status


def _following(func: Callable[..., Any], store: Any, key: Optional[Callable[..., Key]],
               follow: Any) -> Callable[..., Any]:
    """`func`, whose result the limit follows (docs/design.md §18)."""
    import inspect

    parts = _response_parts if follow is True else follow

    def pulled(result: Any, args: Any, kwargs: Any) -> None:
        headers, status = parts(result)
        prefix = () if key is None else (key(*args, **kwargs),)
        _outbound.follow_store(store, prefix, headers, status)

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def followed_async(*args: Any, **kwargs: Any) -> Any:
            result = await func(*args, **kwargs)
            pulled(result, args, kwargs)
            return result

        return followed_async

    @functools.wraps(func)
    def followed(*args: Any, **kwargs: Any) -> Any:
        result = func(*args, **kwargs)
        pulled(result, args, kwargs)
        return result

    return followed


# A generator's call only creates it: the limit is charged when its iteration
# starts, inside a context (for a rate limit, a gate: the wrapper of a function
# that does nothing; for a concurrency limit, its hold for the whole iteration)
# entered from inside the generator wrapper. The wrappers delegate everything
# else to the generator (send, throw, close), so they are generators of the
# same kind.


def _admitted(*args: Any, **kwargs: Any) -> None:
    return None


async def _admitted_async(*args: Any, **kwargs: Any) -> None:
    return None


def _gate(gate: Callable[..., None]) -> Callable[..., Any]:
    @contextlib.contextmanager
    def gated(*args: Any, **kwargs: Any) -> Iterator[None]:
        gate(*args, **kwargs)
        yield

    return gated


def _async_gate(gate: Callable[..., Any]) -> Callable[..., Any]:
    @contextlib.asynccontextmanager
    async def gated(*args: Any, **kwargs: Any) -> AsyncIterator[None]:
        await gate(*args, **kwargs)
        yield

    return gated


def _generator(func: Callable[..., Any], context: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def limited_generator(*args: Any, **kwargs: Any) -> Any:
        with context(*args, **kwargs):
            return (yield from func(*args, **kwargs))

    return limited_generator


def _async_generator(func: Callable[..., Any], context: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    async def limited_async_generator(*args: Any, **kwargs: Any) -> Any:
        async with context(*args, **kwargs):
            inner = func(*args, **kwargs)
            # `yield from` for an async generator (there is none): what the caller
            # sends or throws goes to `inner`, and closing this closes it.
            try:
                value = await inner.__anext__()
            except StopAsyncIteration:
                return
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    await inner.aclose()
                    raise
                except BaseException as error:  # thrown in by athrow()
                    try:
                        value = await inner.athrow(error)
                    except StopAsyncIteration:
                        return
                else:
                    try:
                        value = await inner.asend(sent)
                    except StopAsyncIteration:
                        return

    return limited_async_generator
