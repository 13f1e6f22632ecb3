"""One limit across hosts: cellrate's decisions kept in Redis.

    >>> import redis
    >>> from cellrate.redis import RedisLimiter
    >>> client = redis.Redis(socket_timeout=0.1, socket_connect_timeout=0.1)
    >>> limiter = RedisLimiter(client, "100/minute", burst=20)
    >>> limiter.allow("user:42")
    True

Each decision is one round trip: a server-side script (redis_decide.lua, the
same file the Lua module sends) reads the key's state, decides with the
server's clock (TIME) and writes the new state with an expiry, atomically.
The limit's parameters come from the core (cellrate.KeyedLimiter), which also
validates every argument, so both stores refuse the same inputs with the same
words. While Redis is unreachable, `on_error` decides: "allow" (fail open),
"deny" (fail closed) or "raise" (RedisUnavailable). Design: docs/design.md §11.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from fractions import Fraction
from importlib import resources
from typing import Any, Dict, Iterable, List, Literal, Sequence, Tuple, Union

import cellrate

try:
    import redis
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.cluster
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cellrate.redis needs the redis package: pip install 'cellrate[redis]'") from exc

__all__ = [
    "AsyncRedisLimiter",
    "MAX_TOLERANCE_NS",
    "RedisLimiter",
    "RedisUnavailable",
    "SCRIPT",
    "check_all",
    "check_all_async",
]

#: The server-side script, byte for byte as shipped (the Lua module sends the same bytes).
SCRIPT: bytes = resources.files("cellrate").joinpath("redis_decide.lua").read_bytes()
SHA = hashlib.sha1(SCRIPT).hexdigest()

#: The largest tolerance (burst * emission interval) the script carries exactly, exclusive:
#: 9e15 ns, about 104 days. Larger limits are refused with an error naming burst.
MAX_TOLERANCE_NS = 9_000_000_000_000_000

ON_ERROR = ("allow", "deny", "raise")

# The script's modes (its ARGV[1]).
PEEK, CHECK, ALLOW = b"0", b"1", b"2"

# EVALSHA's words after the SHA (numkeys, the key, mode, cost, the limit's four
# arguments) for one limit on the server's clock: the only requests whose
# refusals are remembered.
_ONE_LIMIT_SERVER_CLOCK = 8

#: Refusals a limiter remembers at most (a full memory starts over).
MAX_REFUSALS = 10_000

#: Failures that mean "Redis cannot answer now" (down, stalled, failing over),
#: as opposed to a mistake, which is raised whatever on_error says.
UNAVAILABLE = (
    redis.exceptions.ConnectionError,  # also BusyLoadingError
    redis.exceptions.TimeoutError,
    redis.exceptions.ClusterError,  # ClusterDownError, MasterDownError
    redis.exceptions.TryAgainError,
    redis.exceptions.ReadOnlyError,  # a failed-over primary answering as a replica
    redis.exceptions.RedisClusterException,  # no node reachable for the slot
)

# While Redis is unreachable, calls answer by on_error without trying it; one
# call tries again (a probe) after a delay that doubles from FIRST_BACKOFF_S
# up to MAX_BACKOFF_S.
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0

log = logging.getLogger("cellrate.redis")

Key = Union[str, bytes]
Algorithm = Literal["gcra", "token_bucket", "fixed_window", "sliding_window"]


class RedisUnavailable(cellrate.CellrateError):
    """Redis could not decide (unreachable, stalled or failing over) and on_error is "raise".

    The client's own exception is the __cause__.
    """


def _invalid(exc_type: type, param: str, message: str) -> Exception:
    error: Exception = exc_type(message)
    setattr(error, "param", param)
    return error


def _now_ns(now: float) -> int:
    """Seconds (already validated by the core) to the nearest ns, halves away from zero,
    as the core's cr_seconds_to_ns."""
    return math.floor(Fraction(now) * 1_000_000_000 + Fraction(1, 2))


class _Availability:
    """Whether Redis answered lately; the back-off schedule and its log lines."""

    def __init__(self) -> None:
        self.down_since: float | None = None
        self.retry_at = 0.0
        self.backoff = 0.0
        self.error: BaseException | None = None

    def skip(self) -> bool:
        """True while Redis is down and no probe is due; else claims the probe."""
        if self.down_since is None:
            return False
        now = time.monotonic()
        if now < self.retry_at:
            return True
        self.retry_at = now + self.backoff  # the others wait while this call probes
        return False

    def failed(self, error: BaseException, on_error: str) -> None:
        now = time.monotonic()
        self.error = error
        if self.down_since is None:
            self.down_since = now
            self.backoff = FIRST_BACKOFF_S
            log.warning("Redis unreachable (%s: %s); answering on_error=%r until it answers again",
                        type(error).__name__, error, on_error)
        else:
            self.backoff = min(self.backoff * 2, MAX_BACKOFF_S)
        self.retry_at = now + self.backoff

    def answered(self) -> None:
        if self.down_since is not None:
            log.warning("Redis answers again after %.3f s unreachable",
                        time.monotonic() - self.down_since)
            self.down_since = None
            self.error = None


class _RedisLimit:
    """What the sync and asyncio stores share: arguments, keys, replies, refusals, on_error."""

    _clients: Tuple[type, ...] = ()
    _client_names = ""

    def __init__(
        self,
        client: Any,
        rate: float | str,
        period: float | None = None,
        *,
        burst: int | None = None,
        algorithm: Algorithm = "gcra",
        prefix: str = "cellrate:",
        on_error: str = "allow",
        deny_cache: bool = True,
    ) -> None:
        if not isinstance(client, self._clients):
            raise _invalid(cellrate.InvalidArgumentType, "client",
                           f"client must be {self._client_names}, not {type(client).__name__}")
        if not isinstance(prefix, str):
            raise _invalid(cellrate.InvalidArgumentType, "prefix",
                           f"prefix must be a str, not {type(prefix).__name__}")
        if "{" in prefix or "}" in prefix:
            raise _invalid(cellrate.InvalidArgument, "prefix",
                           "prefix must not contain '{' or '}': a hash tag in the prefix would put "
                           "every key in one Redis Cluster slot (put hash tags in keys)")
        if on_error not in ON_ERROR:
            raise _invalid(cellrate.InvalidArgument, "on_error",
                           f"on_error must be 'allow', 'deny' or 'raise', not {on_error!r}")
        if not isinstance(deny_cache, bool):
            raise _invalid(cellrate.InvalidArgumentType, "deny_cache",
                           f"deny_cache must be a bool, not {type(deny_cache).__name__}")
        # The core parses, defaults and validates the limit, and later each key,
        # cost and now (a peek on this table stores nothing).
        self._core = cellrate.KeyedLimiter(rate, period, burst=burst, algorithm=algorithm,
                                           capacity=1)
        emission_ns, tolerance_ns = self._core.emission_ns, self._core.tolerance_ns
        if tolerance_ns >= MAX_TOLERANCE_NS:
            raise _invalid(cellrate.InvalidArgument, "burst",
                           "burst is too large for the Redis store: burst * (period/rate), or a "
                           "window, must be below 9e15 ns (about 104 days)")
        self.client: Any = client
        self.prefix = prefix
        self.algorithm: str = self._core.algorithm
        self.on_error = on_error
        self.deny_cache = deny_cache
        self._key_prefix = f"{prefix}{self.algorithm}:{tolerance_ns}:{self.burst}:".encode()
        # encoded once: redis-py passes bytes through as they are
        self._limit_args = tuple(str(v).encode() for v in (
            self.algorithm, emission_ns, tolerance_ns, self.burst))
        # the seconds in which the limit restores its units, for Decision.headers(),
        # as the core computes it
        self._window = self._core.peek(b"", 0, now=0.0).window
        # the answer to an admission in ALLOW mode (the script replies 1 alone)
        self._admitted = cellrate.Decision(True, 0, 0.0, 0.0, self.burst, self._window)
        self._availability = _Availability()
        # Refusals answered here until their retry_after passes (docs/design.md §11):
        # Redis key -> (monotonic ns it ends, cost, monotonic ns it was asked, reply).
        self._refusals: Dict[bytes, Tuple[int, int, int, List[Any]]] = {}

    rate = property(lambda self: self._core.rate, doc="Units admitted per period, per key.")
    period = property(lambda self: self._core.period, doc="Seconds.")
    burst = property(lambda self: self._core.burst, doc="Units an idle key may spend at once.")
    emission_ns = property(lambda self: self._core.emission_ns, doc="Nanoseconds per unit.")
    tolerance_ns = property(lambda self: self._core.tolerance_ns, doc="burst * emission_ns.")

    def redis_key(self, key: Key) -> bytes:
        """The Redis key holding `key`'s state: prefix, the limit, then the key."""
        return self._key(key, 0, None)

    def _forget(self, key: Key) -> bytes:
        """redis_key(key), the key's remembered refusal dropped (for reset)."""
        redis_key = self.redis_key(key)
        self._refusals.pop(redis_key, None)
        return redis_key

    def _key(self, key: Key, cost: int, now: float | None) -> bytes:
        """The Redis key, once the core has validated key, cost and now."""
        if now is None:
            self._core.peek(key, cost)
        else:
            self._core.peek(key, cost, now=now)
        return self._key_prefix + (key.encode() if isinstance(key, str) else key)

    def _words(self, mode: bytes, key: Key, cost: int, now: float | None) -> Tuple[Any, ...]:
        """EVALSHA's words after the SHA for one limit: numkeys, KEYS, ARGV."""
        words = (1, self._key(key, cost, now), mode, cost, *self._limit_args)
        return words if now is None else (*words, _now_ns(now))

    def _refused(self, words: Sequence[Any]) -> List[Any] | None:
        """The reply of a refusal still standing for this key at this cost or more, aged
        to now; None when there is none (the store asks Redis)."""
        refusals = self._refusals
        if not refusals or len(words) != _ONE_LIMIT_SERVER_CLOCK:
            return None
        entry = refusals.get(words[1])
        if entry is None or words[3] < entry[1]:
            return None
        now = time.monotonic_ns()
        if now >= entry[0]:
            refusals.pop(words[1], None)
            return None
        _, _, asked, reply = entry
        aged = now - asked
        return [0, reply[1], int(reply[2]) - aged, max(int(reply[3]) - aged, 0), 1]

    def _answer(self, words: Sequence[Any], reply: Any, asked: int,
                limits: Sequence[_RedisLimit], cost: int) -> cellrate.Decision:
        """The decision of a reply (None: Redis could not answer, on_error decides).
        A refusal on the server's clock is remembered until its retry_after passes,
        counted from `asked`, the instant before the request (Redis decided later, so
        the refusal holds at least that long, absent a reset on another host)."""
        if reply is None:
            return self._fallback(cost)
        self._availability.answered()
        if (isinstance(reply, list) and reply[0] == 0 and self.deny_cache
                and len(words) == _ONE_LIMIT_SERVER_CLOCK):
            retry_after_ns = int(reply[2])
            if retry_after_ns > 0:  # not never (-1: no wait helps)
                if len(self._refusals) >= MAX_REFUSALS:
                    self._refusals.clear()
                self._refusals[words[1]] = (asked + retry_after_ns, words[3], asked, reply)
        return _decision(reply, limits)

    def _fallback(self, cost: int) -> cellrate.Decision:
        """The answer of on_error while Redis cannot decide."""
        if self.on_error == "raise":
            raise RedisUnavailable("Redis cannot decide now (on_error='raise')") \
                from self._availability.error
        if self.on_error == "allow":
            return cellrate.Decision(True, 0, 0.0, 0.0, self.burst, self._window)
        retry_after = max(self._availability.retry_at - time.monotonic(), 0.0)
        return cellrate.Decision(False, 0, retry_after or FIRST_BACKOFF_S, 0.0, self.burst,
                                 self._window)


def _decision(reply: Any, limits: Sequence[_RedisLimit]) -> cellrate.Decision:
    if not isinstance(reply, list):  # ALLOW, admitted: the verdict alone
        return limits[0]._admitted
    allowed, remaining, retry_after_ns, reset_after_ns, index = reply
    retry_after_ns = int(retry_after_ns)
    limit = limits[index - 1]
    return cellrate.Decision(
        allowed == 1,
        remaining,
        math.inf if retry_after_ns < 0 else retry_after_ns / 1e9,
        int(reset_after_ns) / 1e9,
        limit.burst,
        limit._window,
    )


class RedisLimiter(_RedisLimit):
    """A limit per key, kept in Redis (redis-py's redis.Redis or redis.cluster.RedisCluster).

    RedisLimiter(client, rate, period=None, *, burst=None, algorithm="gcra",
                 prefix="cellrate:", on_error="allow", deny_cache=True)

    The limit's arguments are those of cellrate.KeyedLimiter. Keys live in Redis
    as prefix + "<algorithm>:<tolerance_ns>:<burst>:" + key, so two limits never
    share a key's state. Timeouts and retries are the client's: give it a short
    socket_timeout. Thread-safe, as the client is.

    deny_cache: a key refused with retry_after r is refused again, for that cost
    or more, without a round trip until r has passed (a key's state only grows,
    so Redis would refuse too), unless reset() on this limiter forgets it. A
    reset() on another host reaches this cache only when the refusal expires.
    """

    _clients = (redis.Redis, redis.cluster.RedisCluster)
    _client_names = "a redis.Redis or redis.cluster.RedisCluster (asyncio: AsyncRedisLimiter)"

    def _reply(self, words: Sequence[Any]) -> Any:
        """The script's reply (EVALSHA, the script loaded again after NOSCRIPT), or None
        when Redis cannot answer now."""
        availability = self._availability
        if availability.skip():
            return None
        client = self.client
        try:
            try:
                return client.execute_command("EVALSHA", SHA, *words)
            except redis.exceptions.NoScriptError:
                client.script_load(SCRIPT)
                return client.execute_command("EVALSHA", SHA, *words)
        except UNAVAILABLE as error:
            availability.failed(error, self.on_error)
            return None

    def _decide(self, words: Sequence[Any], limits: Sequence[_RedisLimit],
                cost: int) -> cellrate.Decision:
        reply = self._refused(words)
        if reply is not None:
            return _decision(reply, limits)
        asked = time.monotonic_ns()
        return self._answer(words, self._reply(words), asked, limits, cost)

    def check(self, key: Key, cost: int = 1, *, now: float | None = None) -> cellrate.Decision:
        """Decides for `cost` units of `key` and commits an admission."""
        return self._decide(self._words(CHECK, key, cost, now), (self,), cost)

    def allow(self, key: Key, cost: int = 1, *, now: float | None = None) -> bool:
        """check(...).allowed."""
        return self._decide(self._words(ALLOW, key, cost, now), (self,), cost).allowed

    def peek(self, key: Key, cost: int = 1, *, now: float | None = None) -> cellrate.Decision:
        """The answer check() would give now; commits nothing."""
        return self._decide(self._words(PEEK, key, cost, now), (self,), cost)

    def reset(self, key: Key) -> None:
        """Forgets `key` (back to a full burst). Raises RedisUnavailable when Redis cannot
        answer, whatever on_error says: a reset is not a decision."""
        try:
            self.client.delete(self._forget(key))
        except UNAVAILABLE as error:
            raise RedisUnavailable("Redis cannot reset the key now") from error


class AsyncRedisLimiter(_RedisLimit):
    """RedisLimiter for asyncio (redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster):
    the same arguments; check, allow, peek and reset are coroutines."""

    _clients = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
    _client_names = ("a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster "
                     "(blocking clients: RedisLimiter)")

    async def _reply(self, words: Sequence[Any]) -> Any:
        """RedisLimiter._reply, awaited."""
        availability = self._availability
        if availability.skip():
            return None
        client = self.client
        try:
            try:
                return await client.execute_command("EVALSHA", SHA, *words)
            except redis.exceptions.NoScriptError:
                await client.script_load(SCRIPT)
                return await client.execute_command("EVALSHA", SHA, *words)
        except UNAVAILABLE as error:
            availability.failed(error, self.on_error)
            return None

    async def _decide(self, words: Sequence[Any], limits: Sequence[_RedisLimit],
                      cost: int) -> cellrate.Decision:
        reply = self._refused(words)
        if reply is not None:
            return _decision(reply, limits)
        asked = time.monotonic_ns()
        return self._answer(words, await self._reply(words), asked, limits, cost)

    async def check(self, key: Key, cost: int = 1, *,
                    now: float | None = None) -> cellrate.Decision:
        """Decides for `cost` units of `key` and commits an admission."""
        return await self._decide(self._words(CHECK, key, cost, now), (self,), cost)

    async def allow(self, key: Key, cost: int = 1, *, now: float | None = None) -> bool:
        """(await check(...)).allowed."""
        return (await self._decide(self._words(ALLOW, key, cost, now), (self,), cost)).allowed

    async def peek(self, key: Key, cost: int = 1, *, now: float | None = None) -> cellrate.Decision:
        """The answer check() would give now; commits nothing."""
        return await self._decide(self._words(PEEK, key, cost, now), (self,), cost)

    async def reset(self, key: Key) -> None:
        """Forgets `key`; raises RedisUnavailable when Redis cannot answer."""
        try:
            await self.client.delete(self._forget(key))
        except UNAVAILABLE as error:
            raise RedisUnavailable("Redis cannot reset the key now") from error


def _check_all_request(items: Iterable[Tuple[_RedisLimit, Key]], cost: int, now: float | None,
                       kind: type) -> Tuple[List[_RedisLimit], List[Any]]:
    pairs = list(items)
    if not pairs:
        raise _invalid(cellrate.InvalidArgument, "items", "items must name at least one limit")
    limits: List[_RedisLimit] = []
    keys: List[Any] = []
    args: List[Any] = [CHECK, cost]
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], kind)):
            raise _invalid(cellrate.InvalidArgumentType, "items",
                           f"items must be (limiter, key) pairs of {kind.__name__}")
        limit, key = pair
        if limit.client is not pairs[0][0].client:
            raise _invalid(cellrate.InvalidArgument, "items",
                           "items: every limiter must use the same Redis client")
        limits.append(limit)
        keys.append(limit._key(key, cost, now))
        args += limit._limit_args
    if now is not None:
        args.append(_now_ns(now))
    return limits, [len(keys), *keys, *args]


def check_all(items: Iterable[Tuple[RedisLimiter, Key]], cost: int = 1, *,
              now: float | None = None) -> cellrate.Decision:
    """Decides several Redis limits as one, in one script call: admitted only if every
    limit admits, and a refusal takes nothing from any. Returns the tightest Decision
    (refused: the longest retry_after; admitted: the fewest remaining). In a Cluster the
    keys must share a slot (hash tags, e.g. "{user:42}"). on_error is the first limiter's."""
    limits, words = _check_all_request(items, cost, now, RedisLimiter)
    first = limits[0]
    assert isinstance(first, RedisLimiter)
    return first._decide(words, limits, cost)


async def check_all_async(items: Iterable[Tuple[AsyncRedisLimiter, Key]], cost: int = 1, *,
                          now: float | None = None) -> cellrate.Decision:
    """check_all for AsyncRedisLimiter."""
    limits, words = _check_all_request(items, cost, now, AsyncRedisLimiter)
    first = limits[0]
    assert isinstance(first, AsyncRedisLimiter)
    return await first._decide(words, limits, cost)
