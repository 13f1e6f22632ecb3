"""Concurrency.hold and @cellrate.concurrent: work in flight (docs/design.md §15).

The compiled Concurrency takes and gives back units (try_acquire,
Slot.release) and blocks a thread with the GIL released (_wait). What is
here only shapes that into a context manager for `with` and `async with` and
a decorator. An asyncio waiter polls try_acquire between sleeps of the loop
(0.5 ms doubling to 20 ms), so the loop never blocks; a cancelled waiter
holds nothing.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Iterator, Optional, TypeVar, Union

from cellrate import _cellrate
from cellrate._cellrate import Concurrency, Slot
from cellrate._decorator import _async_generator, _generator
from cellrate._errors import invalid_type
from cellrate._wait import RateLimited, check_timeout

F = TypeVar("F", bound=Callable[..., Any])
Key = Union[str, bytes]

FIRST_PAUSE = 0.0005
LONGEST_PAUSE = 0.02


def refusal(concurrency: Concurrency, cost: int, timeout: Optional[float]) -> RateLimited:
    """RateLimited for units not had in time (or never: a cost above the limit)."""
    never = cost > concurrency.limit
    decision = _cellrate.Decision(False, 0, float("inf") if never else 0.0, 0.0,
                                  concurrency.limit)
    if never:
        return RateLimited(decision, f"concurrency limited: a cost of {cost} can never fit "
                                     f"this limit ({concurrency.limit})")
    waited = "" if timeout is None or timeout == 0 else f" within {timeout} s"
    return RateLimited(decision, f"concurrency limited: {concurrency.limit} units in flight, "
                                 f"none free{waited}")


async def acquire_async(concurrency: Concurrency, key: Optional[Key], cost: int,
                        timeout: Optional[float]) -> Slot:
    """A Slot, awaiting (never blocking the loop) up to `timeout` seconds."""
    import asyncio  # here: `import cellrate` stays light for scripts without asyncio

    # the tries count an acquisition; a wait that gives up, one refusal
    slot = concurrency._poll(key, cost)
    if slot is not None:
        return slot
    for pause in pauses(concurrency.limit, cost, timeout):
        await asyncio.sleep(pause)
        slot = concurrency._poll(key, cost)
        if slot is not None:
            return slot
    concurrency._gave_up(cost)
    raise refusal(concurrency, cost, timeout)


def pauses(limit: int, cost: int, timeout: Optional[float]) -> Iterator[float]:
    """The sleeps of a waiter that polls between tries: 0.5 ms doubling to 20 ms,
    none past `timeout` seconds from now (None: no end), none for a cost above the
    limit (it can never fit)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = FIRST_PAUSE
    while cost <= limit:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return
        yield pause if left is None else min(pause, left)
        pause = min(pause * 2, LONGEST_PAUSE)


class Hold:
    """What Concurrency.hold() returns: `with` blocks the thread (the GIL
    released), `async with` awaits; either raises RateLimited when the units
    are not had within `timeout` seconds (None: as long as it takes), and
    releases them when the block ends, however it ends. One block at a time."""

    __slots__ = ("concurrency", "key", "cost", "timeout", "slot")

    def __init__(self, concurrency: Concurrency, key: Optional[Key], cost: int,
                 timeout: Optional[float]) -> None:
        self.concurrency = concurrency
        self.key = key
        self.cost = cost
        self.timeout = timeout
        self.slot: Optional[Slot] = None

    def __enter__(self) -> Slot:
        slot = self.concurrency._wait(self.key, self.cost, self.timeout)
        if slot is None:
            raise refusal(self.concurrency, self.cost, self.timeout)
        self.slot = slot
        return slot

    def __exit__(self, *exc_info: Any) -> None:
        if self.slot is not None:
            self.slot.release()
            self.slot = None

    async def __aenter__(self) -> Slot:
        slot = self.concurrency._poll(self.key, self.cost)  # free: no waiter's frame
        if slot is None:
            slot = await acquire_async(self.concurrency, self.key, self.cost, self.timeout)
        self.slot = slot
        return slot

    async def __aexit__(self, *exc_info: Any) -> None:
        if self.slot is not None:
            self.slot.release()
            self.slot = None


def concurrency_hold(self: Concurrency, key: Optional[Key] = None, cost: int = 1, *,
                     timeout: Optional[float] = None) -> Hold:
    """Concurrency.hold: a Hold, the context manager of `with` and `async with`."""
    return Hold(self, key, cost, None if timeout is None else check_timeout(timeout))


# the body of the compiled Concurrency.hold (as _wait.METHODS)
METHODS = {"Concurrency.hold": concurrency_hold}


def concurrent(
    limit: Optional[int] = None,
    *,
    capacity: Optional[int] = None,
    key: Optional[Callable[..., Key]] = None,
    cost: int = 1,
    block: bool = True,
    timeout: Optional[float] = None,
    shared: Any = None,
    lease: Optional[float] = None,
    concurrency: Optional[Concurrency] = None,
) -> Callable[[F], F]:
    """At most `limit` calls of the decorated function in flight at once.

    Either `limit` (with `capacity`, `shared`, `lease`, as for Concurrency) or
    `concurrency=`, an existing one. `key`: a function of the call's arguments
    returning str or bytes, one limit per key (needs capacity). `cost`: units
    a call holds. `block`: True waits (an async function awaits) at most
    `timeout` seconds; False raises RateLimited at once when none is free.

    A call holds its units until it returns or raises; an async function's
    until its coroutine ends; a generator's (sync or async) from the start of
    its iteration until it is exhausted or closed. The wrapper keeps the
    function's name, docstring, signature and kind for `inspect`.
    """
    import inspect  # here: `import cellrate` stays light

    # the core's table checks every option (cellrate/options.h)
    options = _cellrate._check_options("concurrent", {
        "capacity": capacity, "key": key, "cost": cost, "block": block, "timeout": timeout,
        "shared": shared, "lease": lease, "concurrency": concurrency})
    block, cost = options["block"], options["cost"]
    timeout = check_timeout(options["timeout"])  # as the waits take it (None: any wait)
    if concurrency is None:
        if limit is None:
            raise invalid_type("limit", "concurrent() needs a limit or a concurrency=")
        concurrency = Concurrency(limit, capacity=capacity, shared=shared, lease=lease)
    elif limit is not None or capacity is not None or shared is not None or lease is not None:
        raise invalid_type("concurrency",
                           "give either limit (capacity, shared, lease) or concurrency=")
    held = concurrency

    def hold(*args: Any, **kwargs: Any) -> Hold:
        name = None if key is None else key(*args, **kwargs)
        if block:
            return Hold(held, name, cost, timeout)
        return Hold(held, name, cost, 0.0)

    def decorate(func: F) -> F:
        if inspect.isasyncgenfunction(func):
            wrapper = _async_generator(func, hold)
        elif inspect.isgeneratorfunction(func):
            wrapper = _generator(func, hold)
        elif inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                async with hold(*args, **kwargs):
                    return await func(*args, **kwargs)
        else:
            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with hold(*args, **kwargs):
                    return func(*args, **kwargs)
        wrapper.concurrency = held  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
