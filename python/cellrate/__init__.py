"""cellrate: GCRA rate limiting on a compiled core.

    >>> import cellrate
    >>> limiter = cellrate.Limiter("300/minute", burst=60)
    >>> limiter.allow()
    True

Limiter holds one limit; KeyedLimiter applies one limit to each key (str or
bytes) separately. check() and peek() return a Decision with allowed,
remaining, retry_after, reset_after (seconds) and limit. Bad arguments raise
InvalidArgument (a ValueError) or InvalidArgumentType (a TypeError), both
CellrateError, whose `param` names the parameter at fault.

Concurrency counts work in flight instead of a rate: try_acquire() gives a
Slot to release(), hold() is a context manager for `with` and `async with`,
and @cellrate.concurrent(limit) limits a function's calls in flight.

Scripts wait for capacity with lim.wait() (threads) or await lim.acquire()
(asyncio), or put @cellrate.limit(...) on a function; a call that is refused
raises RateLimited (.retry_after, .decision).
"""

from cellrate import _cellrate, _concurrency, _wait
from cellrate._cellrate import (
    CellrateError,
    Concurrency,
    Decision,
    InvalidArgument,
    InvalidArgumentType,
    KeyedLimiter,
    Limit,
    Limiter,
    Slot,
    __version__,
    calendar_period,
    check_all,
    check_policy_name,
    read_signal,
)
from cellrate._concurrency import concurrent
from cellrate._decorator import limit
from cellrate._penalty import Penalty
from cellrate._wait import RateLimited

# wait(), acquire() and hold() are compiled methods whose bodies are these
# Python functions (docs/design.md §9), named as the methods they are the
# bodies of, for tracebacks and argument errors; the core's wait plan raises
# RateLimited
_methods = {**_wait.METHODS, **_concurrency.METHODS}
for _name, _function in _methods.items():
    _function.__qualname__ = _name
    _function.__name__ = _name.rpartition(".")[2]
_cellrate._set_waits({**_methods, "RateLimited": RateLimited})
del _methods, _name, _function

__all__ = [
    "CellrateError",
    "Concurrency",
    "Decision",
    "InvalidArgument",
    "InvalidArgumentType",
    "KeyedLimiter",
    "Limit",
    "Limiter",
    "Penalty",
    "RateLimited",
    "Slot",
    "__version__",
    "calendar_period",
    "check_all",
    "check_policy_name",
    "concurrent",
    "limit",
    "read_signal",
]
