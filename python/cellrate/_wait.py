"""Waiting for capacity: Limiter.wait / acquire, KeyedLimiter.wait / acquire.

A wait is the core's steps (cr_wait_step, docs/design.md §9), slept out here
(time.sleep releases the GIL and lets Ctrl-C through; asyncio.sleep yields to
the loop): each step admits the units at its real instant, or says how long to
sleep before the next one, or refuses. So starts keep the limit's spacing
however late a sleeper wakes, a block that a provider's 429 puts on the limit
holds every waiter, and this process's waiters are served in line, first come,
first served. A waiter that stops (cancelled, interrupted) gives its place
back; it holds no units. Other stores (the decorator's CheckOnly over a store
with check/peek alone) are waited on through their reservations, which for
CheckOnly admit only "now": its waiters retry at their retry_after.
"""

from __future__ import annotations

import math
import time
from typing import Any, Optional, Union

from cellrate import _cellrate

# `limit` below is a Limiter or KeyedLimiter (with `key` given as a
# one-tuple), or any object with the reservation methods (reserve(*key, cost,
# *, timeout), refund, anchor, peek; the decorator's CheckOnly reserves only
# "now"); asyncio stores may return awaitables from them.
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


COMPILED = (_cellrate.Limiter, _cellrate.KeyedLimiter)


def wait(limit: Any, key: Key, cost: int, timeout: Optional[float],
         delay: Optional[float]) -> None:
    """Blocks (time.sleep: the GIL is released) until `cost` is admitted.

    `delay` is what a first `reserve(*key, cost, timeout=timeout)` returned
    (`timeout` already checked): a reservation ahead of now, which a compiled
    store gives back to take its turn in line instead, or None.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    if isinstance(limit, COMPILED):
        if delay:
            limit.refund(*key, cost)  # type: ignore[call-arg]
        name = key[0] if key else None
        turn = None
        while True:
            step = _cellrate._wait_step(limit, name, cost, timeout_until(deadline), turn)
            if step is None:
                return
            if not isinstance(step, tuple):
                raise RateLimited(step)
            seconds, turn = step
            try:
                time.sleep(seconds)
            except BaseException:  # interrupted (KeyboardInterrupt...): its place given back
                _cellrate._wait_leave(limit, name, cost, turn)
                raise
    while True:  # another store: its own reservations, or "now" alone (CheckOnly)
        if delay is not None:
            if delay > 0.0:
                try:
                    time.sleep(delay)
                except BaseException:  # interrupted: spend nothing
                    limit.refund(*key, cost)
                    raise
                limit.anchor(*key, cost)
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
    waiter gives its place back. `delay` may be awaitable."""
    import asyncio  # here: `import cellrate` stays light for scripts without asyncio

    deadline = None if timeout is None else time.monotonic() + timeout
    delay = await settle(delay)
    if isinstance(limit, COMPILED):
        if delay:
            limit.refund(*key, cost)  # type: ignore[call-arg]
        name = key[0] if key else None
        turn = None
        while True:
            step = _cellrate._wait_step(limit, name, cost, timeout_until(deadline), turn)
            if step is None:
                return
            if not isinstance(step, tuple):
                raise RateLimited(step)
            seconds, turn = step
            try:
                await asyncio.sleep(seconds)
            except BaseException:  # asyncio.CancelledError among others
                _cellrate._wait_leave(limit, name, cost, turn)
                raise
    while True:
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
        delay = await settle(limit.reserve(*key, cost, timeout=timeout_until(deadline)))


# The bodies of the compiled methods Limiter.wait, Limiter.acquire,
# KeyedLimiter.wait and KeyedLimiter.acquire, which pass them their arguments
# (self first) and carry their documentation (bindings/python/docs.h). The
# package sets them at import (cellrate/__init__.py; docs/design.md §9).


def limiter_wait(self: _cellrate.Limiter, cost: int = 1, *,
                 timeout: Optional[float] = None) -> None:
    """Limiter.wait: the core's steps, slept out (the GIL released)."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    wait(self, (), cost, timeout, None)


async def limiter_acquire(self: _cellrate.Limiter, cost: int = 1, *,
                          timeout: Optional[float] = None) -> None:
    """Limiter.acquire: the core's steps, awaited."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    await acquire(self, (), cost, timeout, None)


def keyed_wait(self: _cellrate.KeyedLimiter, key: Union[str, bytes], cost: int = 1, *,
               timeout: Optional[float] = None) -> None:
    """KeyedLimiter.wait: Limiter.wait for the limit of `key`."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    wait(self, (key,), cost, timeout, None)


async def keyed_acquire(self: _cellrate.KeyedLimiter, key: Union[str, bytes], cost: int = 1, *,
                        timeout: Optional[float] = None) -> None:
    """KeyedLimiter.acquire: Limiter.acquire for the limit of `key`."""
    if timeout is not None:
        timeout = check_timeout(timeout)
    await acquire(self, (key,), cost, timeout, None)


METHODS = {
    "Limiter.wait": limiter_wait,
    "Limiter.acquire": limiter_acquire,
    "KeyedLimiter.wait": keyed_wait,
    "KeyedLimiter.acquire": keyed_acquire,
}
