import os
from typing import Final, Literal, Sequence, Union, final, overload

_Path = Union[str, bytes, os.PathLike[str], os.PathLike[bytes]]
_Algorithm = Literal["gcra", "token_bucket", "fixed_window", "sliding_window"]
# The clocks each kind of algorithm takes: the runtime refuses any other pair.
_PacedAlgorithm = Literal["gcra", "token_bucket"]
_WindowAlgorithm = Literal["fixed_window", "sliding_window"]
_PacedClock = Literal["monotonic", "fast"]

__version__: Final[str]

class CellrateError(Exception):
    param: str

class InvalidArgument(CellrateError, ValueError): ...
class InvalidArgumentType(CellrateError, TypeError): ...

@final
class Decision:
    def __new__(
        cls,
        allowed: bool,
        remaining: int,
        retry_after: float,
        reset_after: float,
        limit: int,
        window: float = 0.0,
        clipped: bool = False,
    ) -> Decision: ...
    @property
    def allowed(self) -> bool: ...
    @property
    def remaining(self) -> int: ...
    @property
    def retry_after(self) -> float: ...
    @property
    def reset_after(self) -> float: ...
    @property
    def limit(self) -> int:
        """The burst: units an idle key may spend at once (not the rate)."""
    @property
    def window(self) -> float: ...
    @property
    def clipped(self) -> bool:
        """A charge that met the debt bound: committed up to it, the rest dropped."""
    def headers(self, name: str | None = None, *, legacy: bool = False) -> dict[str, str]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

# The limit's read-only fields, the same on Limit, Limiter and KeyedLimiter. A
# name of this stub alone: at runtime each type has the fields itself.
class _LimitFields:
    @property
    def rate(self) -> float: ...
    @property
    def period(self) -> float: ...
    @property
    def burst(self) -> int: ...
    @property
    def emission_ns(self) -> int: ...
    @property
    def tolerance_ns(self) -> int: ...
    @property
    def algorithm(self) -> str: ...

@final
class Limit(_LimitFields):
    def __new__(
        cls,
        rate: float | str,
        period: float | None = None,
        *,
        burst: int | None = None,
        algorithm: _Algorithm | None = "gcra",
    ) -> Limit: ...
    @property
    def window(self) -> float: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

# A store's limit: the fields and its clock.
class _Limit(_LimitFields):
    @property
    def clock(self) -> str: ...

@final
class Limiter(_Limit):
    @overload
    def __new__(
        cls,
        rate: float | str,
        period: float | None = None,
        *,
        burst: int | None = None,
        shared: _Path | None = None,
        shared_mode: int | None = None,
        on_change: Literal["apply", "refuse"] | None = None,
        clock: _PacedClock | None = None,
        algorithm: _PacedAlgorithm | None = None,
        max_cost: int | None = None,
    ) -> Limiter: ...
    @overload
    def __new__(
        cls,
        rate: float | str,
        period: float | None = None,
        *,
        burst: None = None,
        shared: _Path | None = None,
        shared_mode: int | None = None,
        on_change: Literal["apply", "refuse"] | None = None,
        clock: Literal["realtime"] | None = None,
        algorithm: _WindowAlgorithm,
        max_cost: int | None = None,
    ) -> Limiter: ...
    def allow(self, cost: int = 1, *, now: float | None = None) -> bool: ...
    def check(self, cost: int = 1, *, now: float | None = None) -> Decision: ...
    def peek(self, cost: int = 1, *, now: float | None = None) -> Decision: ...
    def reserve(
        self, cost: int = 1, *, timeout: float | None = None, now: float | None = None
    ) -> float | None: ...
    def refund(self, cost: int = 1, *, now: float | None = None) -> None: ...
    def anchor(self, cost: int = 1, *, now: float | None = None) -> None: ...
    def charge(self, cost: int, *, now: float | None = None) -> Decision: ...
    def take(self, max_cost: int, *, now: float | None = None) -> int: ...
    def reset(self) -> None: ...
    def reconfigure(
        self,
        rate: float | str,
        period: float | None = None,
        *,
        burst: int | None = None,
        algorithm: str | None = None,
        now: float | None = None,
    ) -> None: ...
    # Python functions the package attaches at import (cellrate._wait)
    def wait(self, cost: int = 1, *, timeout: float | None = None) -> None: ...
    async def acquire(self, cost: int = 1, *, timeout: float | None = None) -> None: ...

@final
class KeyedLimiter(_Limit):
    @overload
    def __new__(
        cls,
        rate: float | str,
        period: float | None = None,
        *,
        burst: int | None = None,
        capacity: int | None = None,
        shared: _Path | None = None,
        shared_mode: int | None = None,
        on_change: Literal["apply", "refuse"] | None = None,
        clock: _PacedClock | None = None,
        algorithm: _PacedAlgorithm | None = None,
        max_cost: int | None = None,
    ) -> KeyedLimiter: ...
    @overload
    def __new__(
        cls,
        rate: float | str,
        period: float | None = None,
        *,
        burst: None = None,
        capacity: int | None = None,
        shared: _Path | None = None,
        shared_mode: int | None = None,
        on_change: Literal["apply", "refuse"] | None = None,
        clock: Literal["realtime"] | None = None,
        algorithm: _WindowAlgorithm,
        max_cost: int | None = None,
    ) -> KeyedLimiter: ...
    @property
    def capacity(self) -> int: ...
    @property
    def evictions(self) -> int: ...
    def allow(self, key: str | bytes, cost: int = 1, *, now: float | None = None) -> bool: ...
    def check(self, key: str | bytes, cost: int = 1, *, now: float | None = None) -> Decision: ...
    def peek(self, key: str | bytes, cost: int = 1, *, now: float | None = None) -> Decision: ...
    def reserve(
        self,
        key: str | bytes,
        cost: int = 1,
        *,
        timeout: float | None = None,
        now: float | None = None,
    ) -> float | None: ...
    def refund(self, key: str | bytes, cost: int = 1, *, now: float | None = None) -> None: ...
    def anchor(self, key: str | bytes, cost: int = 1, *, now: float | None = None) -> None: ...
    def charge(self, key: str | bytes, cost: int, *, now: float | None = None) -> Decision: ...
    def take(self, key: str | bytes, max_cost: int, *, now: float | None = None) -> int: ...
    def reset(self, key: str | bytes, /) -> None: ...
    def reconfigure(
        self,
        rate: float | str,
        period: float | None = None,
        *,
        burst: int | None = None,
        algorithm: str | None = None,
        now: float | None = None,
    ) -> None: ...
    def wait(self, key: str | bytes, cost: int = 1, *, timeout: float | None = None) -> None: ...
    async def acquire(
        self, key: str | bytes, cost: int = 1, *, timeout: float | None = None
    ) -> None: ...
    def __len__(self) -> int: ...
    def __bool__(self) -> bool: ...

@final
class Slot:
    @property
    def cost(self) -> int: ...
    @property
    def concurrency(self) -> Concurrency: ...
    def release(self) -> bool: ...

class _Hold:
    def __enter__(self) -> Slot: ...
    def __exit__(self, *exc_info: object) -> None: ...
    async def __aenter__(self) -> Slot: ...
    async def __aexit__(self, *exc_info: object) -> None: ...

@final
class Concurrency:
    def __new__(
        cls,
        limit: int,
        *,
        capacity: int | None = None,
        shared: _Path | None = None,
        shared_mode: int | None = None,
        lease: float | None = None,
    ) -> Concurrency: ...
    @property
    def limit(self) -> int: ...
    @property
    def capacity(self) -> int | None: ...
    @property
    def lease(self) -> float | None: ...
    def try_acquire(self, key: str | bytes | None = None, cost: int = 1) -> Slot | None: ...
    def _wait(
        self, key: str | bytes | None = None, cost: int = 1, timeout: float | None = None
    ) -> Slot | None: ...
    def hold(
        self, key: str | bytes | None = None, cost: int = 1, *, timeout: float | None = None
    ) -> _Hold: ...
    def in_flight(self, key: str | bytes | None = None) -> int: ...

def _attach_method(type: type, function: object, /) -> None: ...
def _check_timeout(timeout: float, /) -> float | None: ...
def _check_request(key: str | bytes, cost: int, now: float | None, /) -> int | None: ...
def _check_hold(limit: int, key: str | bytes | None, cost: int, lease: float | None, /) -> int | None: ...
def check_all(
    items: Sequence[Limiter | tuple[KeyedLimiter, str | bytes]],
    cost: int = 1,
    *,
    now: float | None = None,
) -> Decision: ...
def check_policy_name(name: str | None, /) -> None: ...
