"""Waiting for capacity: Limiter.wait / acquire, KeyedLimiter.wait / acquire,
and the decorators' waits.

A wait is the core's plan (docs/design/waiting.md): `_cellrate._wait_plan`
yields the seconds to sleep before each next step, stops once the units are
admitted at a step's real instant, and raises RateLimited when they cannot be
in time. Here there is only the sleeping: time.sleep (the GIL released,
Ctrl-C let through) or asyncio.sleep (the loop runs on). A waiter that stops
(interrupted, cancelled) gives its place back. A store outside the core (the
decorator's CheckOnly over a Redis store or several limits) admits only
"now": the plan's retry() says how long to sleep before trying it again, by
the same rule.
"""

from __future__ import annotations

import math
import time
from typing import Any, Optional, Union

from cellrate import _cellrate

# `limit` below is a Limiter or KeyedLimiter (with `key` given as a
# one-tuple), or a store outside the core with peek, reserve(*key, cost, *,
# timeout) and, if it reserves ahead, refund (the decorator's CheckOnly
# reserves only "now"); asyncio stores may return awaitables from them.
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


COMPILED = (_cellrate.Limiter, _cellrate.KeyedLimiter)


def wait(limit: Any, key: Key, cost: int, timeout: Optional[float],
         delay: Optional[float] = None, plan_name: Optional[str] = None) -> None:
    """Blocks (time.sleep: the GIL is released) until `cost` is admitted.

    `delay` is what a first `reserve(*key, cost, timeout=timeout)` of the
    decorator returned: a reservation ahead of now, given back to take its
    turn in line instead, or None (refused now). `plan_name`: a
    KeyedLimiter's plan the key waits under (None: "default").
    """
    if type(limit) in COMPILED:
        if delay:
            limit.refund(*key, cost, **({"plan": plan_name} if plan_name else {}))
        plan = _cellrate._wait_plan(limit, key[0] if key else None, cost, timeout, None,
                                    plan_name)
        try:
            for seconds in plan:
                time.sleep(seconds)
        except BaseException:  # interrupted (KeyboardInterrupt...): its place given back
            plan.leave()
            raise
        return
    if delay:  # a store outside the core: a reservation ahead given back, "now" retried
        limit.refund(*key, cost)
    plan = _cellrate._wait_plan(None, None, cost, timeout)
    while delay != 0.0:
        time.sleep(plan.retry(limit.peek(*key, cost)))
        delay = limit.reserve(*key, cost, timeout=0.0)


async def settle(value: Any) -> Any:
    """`value`, awaited if it is awaitable (asyncio stores return coroutines)."""
    import inspect

    if inspect.isawaitable(value):
        return await value
    return value


async def acquire(limit: Any, key: Key, cost: int, timeout: Optional[float],
                  delay: Any = None, plan_name: Optional[str] = None) -> None:
    """The asyncio form of `wait`: awaits, never blocks the loop; a cancelled
    waiter gives its place back. `delay` may be awaitable."""
    import asyncio  # here: `import cellrate` stays light for scripts without asyncio

    if type(limit) in COMPILED:
        if delay:
            limit.refund(*key, cost, **({"plan": plan_name} if plan_name else {}))
        plan = _cellrate._wait_plan(limit, key[0] if key else None, cost, timeout, None,
                                    plan_name)
        try:
            for seconds in plan:
                await asyncio.sleep(seconds)
        except BaseException:  # asyncio.CancelledError among others
            plan.leave()
            raise
        return
    plan = _cellrate._wait_plan(None, None, cost, timeout)
    delay = await settle(delay)
    if delay:
        await settle(limit.refund(*key, cost))
    while delay != 0.0:
        await asyncio.sleep(plan.retry(await settle(limit.peek(*key, cost))))
        delay = await settle(limit.reserve(*key, cost, timeout=0.0))


# The bodies of the compiled methods Limiter.wait, Limiter.acquire,
# KeyedLimiter.wait and KeyedLimiter.acquire, which pass them their arguments
# (self first) and carry their documentation (bindings/python/docs.h). The
# package sets them at import (cellrate/__init__.py; docs/design.md §9).


def limiter_wait(self: _cellrate.Limiter, cost: int = 1, *,
                 timeout: Optional[float] = None) -> None:
    """Limiter.wait: the core's plan, slept out (the GIL released)."""
    wait(self, (), cost, timeout)


async def limiter_acquire(self: _cellrate.Limiter, cost: int = 1, *,
                          timeout: Optional[float] = None) -> None:
    """Limiter.acquire: the core's plan, awaited."""
    await acquire(self, (), cost, timeout)


def keyed_wait(self: _cellrate.KeyedLimiter, key: Union[str, bytes], cost: int = 1, *,
               timeout: Optional[float] = None, plan: Optional[str] = None) -> None:
    """KeyedLimiter.wait: Limiter.wait for the limit of `key` under `plan`."""
    wait(self, (key,), cost, timeout, None, plan)


async def keyed_acquire(self: _cellrate.KeyedLimiter, key: Union[str, bytes], cost: int = 1, *,
                        timeout: Optional[float] = None, plan: Optional[str] = None) -> None:
    """KeyedLimiter.acquire: Limiter.acquire for the limit of `key` under `plan`."""
    await acquire(self, (key,), cost, timeout, None, plan)


METHODS = {
    "Limiter.wait": limiter_wait,
    "Limiter.acquire": limiter_acquire,
    "KeyedLimiter.wait": keyed_wait,
    "KeyedLimiter.acquire": keyed_acquire,
}
