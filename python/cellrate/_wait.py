"""Waiting for capacity: Limiter.wait / acquire, KeyedLimiter.wait / acquire.

Both are built on the reservation primitives of the compiled types
(docs/design.md §9): `reserve` commits the units at the earliest instant they
fit, so a waiter sleeps exactly once, to that instant, and waiters are served
in the order they reserved. A waiter that does not reach its instant
(cancelled, interrupted) gives the units back with `refund`; one that wakes
after it (as a sleep does, by a little) `anchor`s them to the real start, so
that later units are spaced from it instead of catching up. Algorithms that
can only reserve "now" (the window algorithms) return None from `reserve`
while the request does not fit; the waiter then sleeps the `retry_after` of a
`peek` and tries again.
"""

from __future__ import annotations

import math
import time
from typing import Any, Optional, Union

from cellrate import _cellrate

# `limit` below is any object with the reservation methods of Limiter (or,
# with `key` given as a one-tuple, of KeyedLimiter): reserve(*key, cost, *,
# timeout), refund(*key, cost), anchor(*key, cost) and peek(*key, cost).
# Asyncio stores may return awaitables from them.
Key = Union["tuple[()]", "tuple[Union[str, bytes]]"]


class RateLimited(_cellrate.CellrateError):
    """Refused: the limit did not admit the call (in time).

    `retry_after` is the seconds until the call could be admitted (`inf` when
    its cost can never fit the limit) and `decision` the Decision that said so.
    """

    def __init__(self, decision: _cellrate.Decision, message: Optional[str] = None) -> None:
        self.decision = decision
        self.retry_after = decision.retry_after
        if math.isinf(decision.retry_after):
            self.param = "cost"
        if message is None:
            if math.isinf(decision.retry_after):
                message = f"rate limited: the cost can never fit this limit (burst {decision.limit})"
            else:
                message = f"rate limited: retry after {decision.retry_after:.6f} s"
        super().__init__(message)

    def __reduce__(self) -> Any:
        return (type(self), (self.decision, str(self)))


def check_timeout(timeout: Optional[float]) -> Optional[float]:
    """`timeout` as seconds (None: no limit), or the core's error naming it
    (the words of Lua's wait())."""
    return None if timeout is None else _cellrate._check_timeout(timeout)


def refused(decision: _cellrate.Decision, deadline: Optional[float]) -> bool:
    """True when `decision` cannot be admitted before `deadline` (monotonic s)."""
    if math.isinf(decision.retry_after):
        return True
    return deadline is not None and time.monotonic() + decision.retry_after > deadline


def timeout_until(deadline: Optional[float]) -> Optional[float]:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def wait(limit: Any, key: Key, cost: int, timeout: Optional[float],
         delay: Optional[float]) -> None:
    """Blocks (time.sleep: the GIL is released) until `cost` is admitted.

    `delay` is what a first `reserve(*key, cost, timeout=timeout)` returned
    (`timeout` already checked): a reservation to sleep out, or None.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if delay is not None:
            if delay > 0.0:
                try:
                    time.sleep(delay)
                except BaseException:  # interrupted (KeyboardInterrupt...): spend nothing
                    limit.refund(*key, cost)
                    raise
                limit.anchor(*key, cost)  # woken late: what follows is spaced from now
            return
        decision = limit.peek(*key, cost)
        if not decision.allowed:  # (allowed: it fits now, a window rolled over)
            if refused(decision, deadline):
                raise RateLimited(decision)
            time.sleep(decision.retry_after)
        delay = limit.reserve(*key, cost, timeout=timeout_until(deadline))


async def settle(value: Any) -> Any:
    """`value`, awaited if it is awaitable (asyncio stores return coroutines)."""
    import inspect

    if inspect.isawaitable(value):
        return await value
    return value


async def acquire(limit: Any, key: Key, cost: int, timeout: Optional[float],
                  delay: Any) -> None:
    """The asyncio form of `wait`: awaits, never blocks the loop; a cancelled
    waiter refunds the units it had reserved. `delay` may be awaitable."""
    import asyncio  # here: `import cellrate` stays light for scripts without asyncio

    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        delay = await settle(delay)
        if delay is not None:
            if delay > 0.0:
                try:
                    await asyncio.sleep(delay)
                except BaseException:  # asyncio.CancelledError among others
                    await settle(limit.refund(*key, cost))
                    raise
                await settle(limit.anchor(*key, cost))
            return
        decision = await settle(limit.peek(*key, cost))
        if not decision.allowed:
            if refused(decision, deadline):
                raise RateLimited(decision)
            await asyncio.sleep(decision.retry_after)
        delay = limit.reserve(*key, cost, timeout=timeout_until(deadline))


# The bodies of the compiled methods Limiter.wait, Limiter.acquire,
# KeyedLimiter.wait and KeyedLimiter.acquire, which pass them their arguments
# (self first) and carry their documentation (bindings/python/docs.h). The
# package sets them at import (cellrate/__init__.py; docs/design.md §9).


def limiter_wait(self: _cellrate.Limiter, cost: int = 1, *,
                 timeout: Optional[float] = None) -> None:
    """Limiter.wait: reserve, then sleep (the GIL released) to the instant."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    delay = self.reserve(cost, timeout=timeout)
    if delay != 0.0:
        wait(self, (), cost, timeout, delay)


async def limiter_acquire(self: _cellrate.Limiter, cost: int = 1, *,
                          timeout: Optional[float] = None) -> None:
    """Limiter.acquire: reserve, then await the instant."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    delay = self.reserve(cost, timeout=timeout)
    if delay != 0.0:
        await acquire(self, (), cost, timeout, delay)


def keyed_wait(self: _cellrate.KeyedLimiter, key: Union[str, bytes], cost: int = 1, *,
               timeout: Optional[float] = None) -> None:
    """KeyedLimiter.wait: Limiter.wait for the limit of `key`."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    delay = self.reserve(key, cost, timeout=timeout)
    if delay != 0.0:
        wait(self, (key,), cost, timeout, delay)


async def keyed_acquire(self: _cellrate.KeyedLimiter, key: Union[str, bytes], cost: int = 1, *,
                        timeout: Optional[float] = None) -> None:
    """KeyedLimiter.acquire: Limiter.acquire for the limit of `key`."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    delay = self.reserve(key, cost, timeout=timeout)
    if delay != 0.0:
        await acquire(self, (key,), cost, timeout, delay)


METHODS = {
    "Limiter.wait": limiter_wait,
    "Limiter.acquire": limiter_acquire,
    "KeyedLimiter.wait": keyed_wait,
    "KeyedLimiter.acquire": keyed_acquire,
}
