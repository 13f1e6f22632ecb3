"""One limit across hosts: cellrate's decisions kept in Redis.

    >>> import redis
    >>> from cellrate.redis import RedisLimiter
    >>> client = redis.Redis()
    >>> limiter = RedisLimiter(client, "100/minute", burst=20, timeout=0.1)
    >>> limiter.allow("user:42")
    True

Each decision is one round trip: a server-side script (redis/decide.lua in the
repository, the one file both faces send) reads the key's state, decides with
the server's clock (TIME) and writes the new state with an expiry, atomically.
The limit is the core's (cellrate.Limit), and the core validates every key,
cost and now too, so both stores refuse the same inputs with the same words.
No call holds a decision longer than `timeout`, whatever the client's own
retries. While Redis cannot decide (unreachable, or a reply such as OOM or
BUSY: UNAVAILABLE_REPLIES), `on_error` decides: "allow" (fail open), "deny"
(fail closed) or "raise" (RedisUnavailable), and a probe off the request path
tries Redis until it decides again; any other error reply raises
RedisUnavailable. refund() gives back units a call took.

A limit's keys are named by its `name` (default: its parameters), and each
value records the limit it was written under, so reconfigure() and a process
started with another limit under the same name carry what each key used,
exactly as the in-process store (each key on its first check after the
change). Design: docs/design.md §11.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Dict, Iterable, List, Literal, Sequence, Tuple, cast

import cellrate
from cellrate import _concurrency
from cellrate._errors import invalid, invalid_type
from cellrate._wait import check_timeout

try:
    import redis
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.cluster
    import redis.crc
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cellrate.redis needs the redis package: pip install 'cellrate[redis]'") from exc

# The script's protocol and the stores' transport are modules of their own (the fleet
# share builds on them too); the names of theirs that users know are this module's.
from cellrate.redis._protocol import (
    _HOLD_PROTOCOL,
    _ONE_LIMIT_SERVER_CLOCK,
    _PROTOCOL,
    ACQUIRE as ACQUIRE,
    ALLOW as ALLOW,
    CHARGE as CHARGE,
    CHECK as CHECK,
    COUNT as COUNT,
    DEFAULT_PREFIX as DEFAULT_PREFIX,
    FIRST_BACKOFF_S as FIRST_BACKOFF_S,
    HOLD_SCRIPT,
    HOLD_SHA as HOLD_SHA,
    MAX_BACKOFF_S as MAX_BACKOFF_S,
    MAX_DEBT_NS as MAX_DEBT_NS,
    MAX_TOLERANCE_NS,
    ON_ERROR as ON_ERROR,
    PEEK as PEEK,
    REFUND as REFUND,
    RELEASE as RELEASE,
    SCRIPT,
    SHA as SHA,
    TAKE as TAKE,
    UNAVAILABLE_REPLIES,
    Key as Key,
    _cannot_decide,
    _check_request,
    _decision,
    _default_name,
    _raise_mistake,
    _request,
    _Sent,
    _slots_differ,
)
from cellrate.redis._store import (
    RedisUnavailable,
    _AsyncStore,
    _Outage,
    _Store,
    _SyncStore,
    log as log,
)

__all__ = [
    "AsyncRedisConcurrency",
    "AsyncRedisLimiter",
    "AsyncRedisSlot",
    "HOLD_SCRIPT",
    "MAX_TOLERANCE_NS",
    "RedisConcurrency",
    "RedisLimiter",
    "RedisSlot",
    "RedisUnavailable",
    "SCRIPT",
    "UNAVAILABLE_REPLIES",
    "check_all",
    "check_all_async",
]


#: Refusals a limiter remembers at most (a full memory starts over).
MAX_REFUSALS = 10_000

#: The store's default bound on one decision, in seconds (timeout=): the core's table's.
DEFAULT_TIMEOUT_S: float = cellrate._cellrate._options("RedisLimiter")["timeout"]["default"]

_check_options = cellrate._cellrate._check_options

Algorithm = Literal["gcra", "token_bucket", "fixed_window", "sliding_window"]


class _RedisLimit(_Store):
    """What the sync and asyncio stores share: arguments, keys, replies, refusals, on_error."""

    def __init__(
        self,
        client: Any,
        rate: float | str,
        period: float | None = None,
        *,
        burst: int | None = None,
        algorithm: Algorithm = "gcra",
        name: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        on_error: str = ON_ERROR[0],
        deny_cache: bool = True,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_cost: int | None = None,
    ) -> None:
        # The core parses, defaults and validates the limit first, as cellrate.Limit (and,
        # per call, each key, cost and now: _request); its table checks the options
        # (cellrate/options.h).
        limit = _limit_of(rate, period, burst, algorithm, max_cost)
        options = _check_options("RedisLimiter", {
            "period": period, "burst": burst, "algorithm": algorithm, "name": name,
            "prefix": prefix, "on_error": on_error, "deny_cache": deny_cache,
            "timeout": timeout, "max_cost": max_cost})
        self._open_store(client, options["prefix"], options["on_error"], options["timeout"])
        deny_cache = options["deny_cache"]
        self.max_cost = max_cost
        self._sent = _Sent(limit)
        self.named = name is not None
        #: The name of the limit's keys: given, or the first limit's parameters.
        self.name: str = name if name is not None else _default_name(self._sent.limit)
        self.algorithm: str = self._sent.limit.algorithm
        self.deny_cache = deny_cache
        self._key_prefix = f"{self.prefix}{self.name}:".encode()
        # a probe: a peek of cost 0 on the limit's empty key, which writes nothing
        self._probe_words = _request(PEEK, ((self, b""),), 0, None)[0]
        # Refusals answered here until their retry_after passes (docs/design.md §11):
        # Redis key -> (monotonic ns it ends, cost, monotonic ns it was asked, reply,
        # the limit sent).
        self._refusals: Dict[bytes, Tuple[int, int, int, List[Any], _Sent]] = {}

    def reconfigure(self, rate: float | str, period: float | None = None, *,
                    burst: int | None = None, algorithm: Algorithm | None = None) -> None:
        """Changes the limit this store sends, live: the next check (or allow) of each key
        carries what the key used to the new limit (docs/design.md §4), in the script, at
        that decision's instant; processes still sending the old limit carry it back on
        their own calls. The algorithm stays (an error naming `algorithm`), and a limit
        without a name cannot change (an error naming `name`: its keys are named by its
        parameters). An invalid limit raises and changes nothing."""
        if not self.named:
            raise invalid("name", "name: " + _PROTOCOL["NAME_NEEDED"])
        if algorithm is not None and algorithm != self.algorithm:
            cellrate.Limit(rate, period, burst=burst, algorithm=algorithm)  # the core's checks first
            raise invalid("algorithm", "algorithm: " + _PROTOCOL["ALGORITHM_KEPT"])
        self._sent = _Sent(_limit_of(rate, period, burst, cast(Algorithm, self.algorithm),
                                     self.max_cost))
        self._refusals.clear()

    limit = property(lambda self: self._sent.limit, doc="The limit sent (cellrate.Limit).")
    rate = property(lambda self: self.limit.rate, doc="Units admitted per period, per key.")
    period = property(lambda self: self.limit.period, doc="Seconds.")
    burst = property(lambda self: self.limit.burst, doc="Units an idle key may spend at once.")
    emission_ns = property(lambda self: self.limit.emission_ns, doc="Nanoseconds per unit.")
    tolerance_ns = property(lambda self: self.limit.tolerance_ns, doc="burst * emission_ns.")

    def redis_key(self, key: Key) -> bytes:
        """The Redis key holding `key`'s state: prefix, the name, ':', then the key."""
        _check_request(key, 0, None)
        return self._key(key)

    def _forget(self, key: Key) -> bytes:
        """redis_key(key), the key's remembered refusal dropped (for reset and refund)."""
        redis_key = self.redis_key(key)
        self._refusals.pop(redis_key, None)
        return redis_key

    def _key(self, key: Key) -> bytes:
        """The Redis key of a key the core has validated."""
        return self._key_prefix + (key.encode() if isinstance(key, str) else key)

    def _words(self, mode: bytes, key: Key, cost: int,
               now: float | None) -> Tuple[List[Any], List[_Sent]]:
        """EVALSHA's words after the SHA for one limit (numkeys, KEYS, ARGV), and the
        limit sent."""
        return _request(mode, ((self, key),), cost, now)

    def _refund_words(self, key: Key, cost: int, now: float | None) -> List[Any]:
        self._forget(key)  # a refund makes the key better than its remembered refusal
        return self._words(REFUND, key, cost, now)[0]

    def _refused(self, words: Sequence[Any], sent: _Sent) -> List[Any] | None:
        """The reply of a refusal still standing for this key, aged to now, for the cost
        asked: the remembered cost, or a larger one that the refusal implies (gcra: its
        retry_after later by the units added; fixed window: the same; an unfittable cost
        never, as its answer is not a wait). None when there is none (Redis is asked)."""
        refusals = self._refusals
        if not refusals or len(words) != _ONE_LIMIT_SERVER_CLOCK or words[2] is CHARGE:
            return None  # a charge commits whatever the state: Redis is always asked
        entry = refusals.get(words[1])
        if entry is None or entry[4] is not sent:  # none, or under a limit changed since
            return None
        cost, refused_cost = words[3], entry[1]
        extra_ns = 0
        if cost != refused_cost:
            per_unit = sent.retry_per_unit_ns
            # cost > burst never fits (gcra: cost * T > tau = burst * T; a fixed
            # window admits burst units): its answer is no wait
            if cost < refused_cost or per_unit is None or cost > sent.limit.burst:
                return None
            extra_ns = (cost - refused_cost) * per_unit
        now = time.monotonic_ns()
        if now >= entry[0]:
            refusals.pop(words[1], None)
            return None
        _, _, asked, reply, _ = entry
        aged = now - asked
        return [0, reply[1], int(reply[2]) - aged + extra_ns, max(int(reply[3]) - aged, 0), 1]

    def _answer(self, words: Sequence[Any], reply: Any, asked: int,
                sents: Sequence[_Sent]) -> cellrate.Decision:
        """The decision of a reply. A refusal on the server's clock is remembered until
        its retry_after passes, counted from `asked`, the instant before the request
        (Redis decided later, so the refusal holds at least that long, absent a reset
        on another host)."""
        if (isinstance(reply, list) and reply[0] == 0 and self.deny_cache
                and len(words) == _ONE_LIMIT_SERVER_CLOCK and words[2] is not CHARGE):
            retry_after_ns = int(reply[2])
            if retry_after_ns > 0:  # not never (-1: no wait helps)
                if len(self._refusals) >= MAX_REFUSALS:
                    self._refusals.clear()
                self._refusals[words[1]] = (asked + retry_after_ns, words[3], asked, reply,
                                            sents[0])
        return _decision(reply, sents)

    def _fallback(self, outage: _Outage) -> cellrate.Decision:
        """The answer of on_error while Redis cannot decide. A refusal it invents says
        the same thing in every field: retry after the next probe, reset then too."""
        if self.on_error == "raise":
            raise RedisUnavailable("Redis cannot decide now (on_error='raise')") \
                from outage.error
        sent = self._sent
        if self.on_error == "allow":
            return sent.admitted
        retry_after = max(outage.retry_at - time.monotonic(), 0.0) or FIRST_BACKOFF_S
        return cellrate.Decision(False, 0, retry_after, retry_after, sent.limit.burst,
                                 sent.window)

    def _taken(self, reply: Any, max_cost: int) -> int:
        """A take's count: the script's, or where Redis cannot decide on_error's (allow:
        max_cost, as an admission; deny: 0)."""
        if isinstance(reply, cellrate.Decision):
            return max_cost if reply.allowed else 0
        return int(reply)


def _limit_of(rate: float | str, period: float | None, burst: int | None,
              algorithm: Algorithm, max_cost: int | None) -> Any:
    """The limit, parsed, defaulted and validated by the core; with max_cost, refused as
    in process where its burst (a window: its rate) could never fit max_cost units (the
    core's checks, on a limiter made for them alone)."""
    limit = cellrate.Limit(rate, period, burst=burst, algorithm=algorithm)
    if max_cost is not None:
        cellrate.Limiter(rate, period, burst=burst, algorithm=algorithm,  # type: ignore[arg-type]
                         max_cost=max_cost)
    return limit


def _take_words(limiter: "_RedisLimit", key: Key, max_cost: int,
                now: float | None) -> List[Any]:
    """The script's words of a take; max_cost checked by the core as a cost, in its
    own name."""
    try:
        return limiter._words(TAKE, key, max_cost, now)[0]
    except (cellrate.InvalidArgument, cellrate.InvalidArgumentType) as error:
        if error.param != "cost":
            raise
        make = invalid_type if isinstance(error, cellrate.InvalidArgumentType) else invalid
        raise make("max_cost", "max_cost" + str(error)[len("cost"):]) from None

_CLUSTER_CLIENTS = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)


class RedisLimiter(_SyncStore, _RedisLimit):
    """A limit per key, kept in Redis (redis-py's redis.Redis or redis.cluster.RedisCluster).

    RedisLimiter(client, rate, period=None, *, burst=None, algorithm="gcra", name=None,
                 prefix="cellrate:", on_error="allow", deny_cache=True, timeout=0.25,
                 max_cost=None)

    The limit's arguments are those of cellrate.Limit, and `limit` is that value;
    max_cost, as in process, refuses a burst (a window: a rate) that could never fit
    it, naming burst (rate).
    Keys live in Redis as prefix + name + ":" + key. `name` (1 to 64 printable ASCII
    characters, no '{', '}' or ':') is what ties a limit's keys across changes: a
    process started with another rate under the same name, or reconfigure(), carries
    what each key used. Without a name the keys are named by the limit's parameters
    ("<algorithm>:<tolerance_ns>:<burst>", the layout before names): two limits never
    share a key's state, and such a limit cannot change live. Thread-safe.

    timeout: no call holds a decision longer (seconds), whatever the client's
    own timeouts and retries: with a redis.Redis client the store sends through
    connections of its own, made with the client's settings and no retries. A
    redis.cluster.RedisCluster client decides through its own machinery: its
    timeouts and retries apply (give it short ones).

    deny_cache: a key refused with retry_after r is refused again, for that cost
    (or a larger one the refusal implies), without a round trip until r has
    passed (a key's state only grows, so Redis would refuse too), unless reset()
    or refund() on this limiter forgets it. A reset() on another host reaches
    this cache only when the refusal expires.
    """

    _client_names = "a redis.Redis or redis.cluster.RedisCluster (asyncio: AsyncRedisLimiter)"

    def __init__(self, client: Any, rate: float | str, period: float | None = None,
                 **options: Any) -> None:
        super().__init__(client, rate, period, **options)
        self._open_connections()

    def _decide(self, request: Tuple[List[Any], List[_Sent]]) -> cellrate.Decision:
        words, sents = request
        reply = self._refused(words, sents[0])
        if reply is not None:
            return _decision(reply, sents)
        outage = self._availability.outage
        if outage is not None:
            return cast(cellrate.Decision, self._while_down(outage))
        asked = time.monotonic_ns()
        try:
            reply = self._call(words)
        except Exception as error:
            return cast(cellrate.Decision, self._failed(error, words[1:1 + words[0]]))
        return self._answer(words, reply, asked, sents)

    def check(self, key: Key, cost: int = 1, *, now: float | None = None) -> cellrate.Decision:
        """Decides for `cost` units of `key` and commits an admission."""
        return self._decide(self._words(CHECK, key, cost, now))

    def allow(self, key: Key, cost: int = 1, *, now: float | None = None) -> bool:
        """check(...).allowed."""
        return self._decide(self._words(ALLOW, key, cost, now)).allowed

    def peek(self, key: Key, cost: int = 1, *, now: float | None = None) -> cellrate.Decision:
        """The answer check() would give now; commits nothing."""
        return self._decide(self._words(PEEK, key, cost, now))

    def charge(self, key: Key, cost: int, *, now: float | None = None) -> cellrate.Decision:
        """Commits `cost` units of `key` whatever its state (docs/cost.md): where they fit,
        this is check(); else the key goes into debt, refused, with the retry_after of
        one more unit, and Decision.clipped where the debt met its bound (MAX_DEBT_NS;
        a window: its packed ceiling). Where Redis cannot decide, on_error answers and
        the charge is lost (nothing retries it)."""
        return self._decide(self._words(CHARGE, key, cost, now))

    def take(self, key: Key, max_cost: int, *, now: float | None = None) -> int:
        """Admits as many units of `key` as fit now, up to `max_cost`, in one script call
        (atomic), and returns their count (0: none fits). Where Redis cannot decide,
        on_error answers: allow max_cost, deny 0, raise RedisUnavailable."""
        words = _take_words(self, key, max_cost, now)
        outage = self._availability.outage
        if outage is not None:
            return self._taken(self._while_down(outage), max_cost)
        try:
            return self._taken(self._call(words), max_cost)
        except Exception as error:
            return self._taken(self._failed(error), max_cost)

    def refund(self, key: Key, cost: int = 1, *, now: float | None = None) -> None:
        """Gives back `cost` units of `key` taken earlier (a call that was cancelled or
        timed out after Redis admitted it; an estimate settled lower), exactly as the
        core's refund: never better than idle, and units of a window that ended are
        gone. Raises RedisUnavailable when Redis cannot answer, whatever on_error says."""
        words = self._refund_words(key, cost, now)
        try:
            self._call(words)
        except Exception as error:
            _raise_mistake(error)
            raise self._unavailable("refund", error) from error

    def reset(self, key: Key) -> None:
        """Forgets `key` (back to a full burst). Raises RedisUnavailable when Redis cannot
        answer, whatever on_error says: a reset is not a decision."""
        try:
            self._run("DEL", self._forget(key))
        except Exception as error:
            raise self._unavailable("reset the key", error) from error


class AsyncRedisLimiter(_AsyncStore, _RedisLimit):
    """RedisLimiter for asyncio (redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster):
    the same arguments; check, allow, peek, refund and reset are coroutines. Each call
    is bounded by `timeout` (asyncio's own timeout around the client's command, its
    retries included); a call waits for a free connection of a capped pool until then.
    A call cancelled, or timed out, after it was sent may still have been admitted by
    Redis: refund() settles it."""

    _client_names = ("a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster "
                     "(blocking clients: RedisLimiter)")

    def __init__(self, client: Any, rate: float | str, period: float | None = None,
                 **options: Any) -> None:
        super().__init__(client, rate, period, **options)
        self._probe_task: asyncio.Task[None] | None = None

    async def _decide(self, request: Tuple[List[Any], List[_Sent]]) -> cellrate.Decision:
        words, sents = request
        reply = self._refused(words, sents[0])
        if reply is not None:
            return _decision(reply, sents)
        outage = self._availability.outage
        if outage is not None:
            return cast(cellrate.Decision, self._while_down(outage))
        asked = time.monotonic_ns()
        try:
            reply = await self._call(words)
        except Exception as error:
            return cast(cellrate.Decision, self._failed(error, words[1:1 + words[0]]))
        return self._answer(words, reply, asked, sents)

    async def check(self, key: Key, cost: int = 1, *,
                    now: float | None = None) -> cellrate.Decision:
        """Decides for `cost` units of `key` and commits an admission."""
        return await self._decide(self._words(CHECK, key, cost, now))

    async def allow(self, key: Key, cost: int = 1, *, now: float | None = None) -> bool:
        """(await check(...)).allowed."""
        return (await self._decide(self._words(ALLOW, key, cost, now))).allowed

    async def peek(self, key: Key, cost: int = 1, *, now: float | None = None) -> cellrate.Decision:
        """The answer check() would give now; commits nothing."""
        return await self._decide(self._words(PEEK, key, cost, now))

    async def charge(self, key: Key, cost: int, *,
                     now: float | None = None) -> cellrate.Decision:
        """RedisLimiter.charge, awaited."""
        return await self._decide(self._words(CHARGE, key, cost, now))

    async def take(self, key: Key, max_cost: int, *, now: float | None = None) -> int:
        """RedisLimiter.take, awaited."""
        words = _take_words(self, key, max_cost, now)
        outage = self._availability.outage
        if outage is not None:
            return self._taken(self._while_down(outage), max_cost)
        try:
            return self._taken(await self._call(words), max_cost)
        except Exception as error:
            return self._taken(self._failed(error), max_cost)

    async def refund(self, key: Key, cost: int = 1, *, now: float | None = None) -> None:
        """RedisLimiter.refund, awaited."""
        words = self._refund_words(key, cost, now)
        try:
            await self._call(words)
        except Exception as error:
            _raise_mistake(error)
            raise self._unavailable("refund", error) from error

    async def reset(self, key: Key) -> None:
        """Forgets `key`; raises RedisUnavailable when Redis cannot answer."""
        try:
            await self._run("DEL", self._forget(key))
        except Exception as error:
            raise self._unavailable("reset the key", error) from error

_check_hold = cellrate._cellrate._check_hold


class RedisSlot:
    """A holding of RedisConcurrency: release() gives its units back once (later calls,
    and a holding whose lease ended, give back nothing)."""

    __slots__ = ("_store", "_words", "key", "cost")

    def __init__(self, store: "_RedisHoldings", words: List[Any] | None, key: Key | None,
                 cost: int) -> None:
        self._store = store
        self._words = words  # RELEASE's words; None: released, or held nothing (on_error)
        self.key = key
        self.cost = cost

    def _take_words(self) -> List[Any] | None:
        words, self._words = self._words, None
        return words

    def release(self) -> bool:
        """True when the units came back; False when they had already (released
        before, reclaimed by the lease) or Redis could not answer and on_error is not
        "raise" (the lease gives them back)."""
        words = self._take_words()
        if words is None:
            return False
        store = cast(RedisConcurrency, self._store)
        try:
            return int(store._call(words)) > 0
        except Exception as error:
            return store._release_failed(error)

    def __enter__(self) -> "RedisSlot":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()


class AsyncRedisSlot(RedisSlot):
    """RedisSlot of AsyncRedisConcurrency: release() is a coroutine."""

    __slots__ = ()

    async def release(self) -> bool:  # type: ignore[override]
        """RedisSlot.release, awaited."""
        words = self._take_words()
        if words is None:
            return False
        store = cast(AsyncRedisConcurrency, self._store)
        try:
            return int(await store._call(words)) > 0
        except Exception as error:
            return store._release_failed(error)

    async def __aenter__(self) -> "AsyncRedisSlot":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.release()


class _RedisHoldings(_Store):
    """What the sync and asyncio concurrency stores share: arguments, keys, replies,
    on_error."""

    _script, _sha = HOLD_SCRIPT, HOLD_SHA
    _slot: type = RedisSlot

    def __init__(self, client: Any, limit: int, *, lease: float, name: str | None = None,
                 prefix: str = DEFAULT_PREFIX, on_error: str = ON_ERROR[0],
                 timeout: float = DEFAULT_TIMEOUT_S) -> None:
        options = _check_options("RedisConcurrency", {
            "lease": lease, "name": name, "prefix": prefix, "on_error": on_error,
            "timeout": timeout})
        self._open_store(client, options["prefix"], options["on_error"], options["timeout"])
        # the core's checks of a concurrency limit, and its lease in ns
        lease_ns = cast(int, _check_hold(limit, None, 1, lease))
        #: The units that may be held at once, per key.
        self.limit: int = int(limit)
        #: Seconds after which a holding not released is given back.
        self.lease: float = lease_ns / 1e9
        #: The name of the limit's keys: given, or DEFAULT_NAME and the limit.
        self.name: str = name if name is not None else f"{_HOLD_PROTOCOL['DEFAULT_NAME']}:{limit}"
        self._key_prefix = f"{self.prefix}{self.name}".encode()
        self._limit_words = (b"%d" % self.limit, b"%d" % lease_ns)
        self._probe_words = self._count_words(None)

    def redis_key(self, key: Key | None = None) -> bytes:
        """The sorted set holding `key`'s units: prefix, the name, then ':' and the key
        (None: the limit's one key, prefix and name alone)."""
        _check_hold(self.limit, key, 1, None)
        return self._key(key)

    def _key(self, key: Key | None) -> bytes:
        if key is None:
            return self._key_prefix
        return self._key_prefix + b":" + (key.encode() if isinstance(key, str) else key)

    def _acquire_words(self, key: Key | None, cost: int) -> List[Any]:
        """EVALSHA's words after the SHA of an acquire, the key and cost checked by the core."""
        _check_hold(self.limit, key, cost, None)
        limit_word, lease_word = self._limit_words
        return [1, self._key(key), ACQUIRE, limit_word, b"%d" % cost, lease_word]

    def _count_words(self, key: Key | None) -> List[Any]:
        _check_hold(self.limit, key, 1, None)
        return [1, self._key(key), COUNT]

    def _slot_of(self, words: List[Any], reply: Any, key: Key | None,
                 cost: int) -> RedisSlot | None:
        """The slot of an acquire's reply (a holder), None for a refusal (0)."""
        if not isinstance(reply, bytes):
            return None
        return cast(RedisSlot, self._slot(self, [1, words[1], RELEASE, reply, words[4]], key,
                                          cost))

    def _unheld(self, answer: Any, key: Key | None, cost: int) -> RedisSlot | None:
        """on_error's answer to an acquire Redis did not decide: a slot holding nothing
        ("allow"), or None ("deny"); "raise" raised in _fallback."""
        return cast(RedisSlot, self._slot(self, None, key, cost)) if answer else None

    def _fallback(self, outage: _Outage) -> bool:
        if self.on_error == "raise":
            raise RedisUnavailable("Redis cannot decide now (on_error='raise')") \
                from outage.error
        return self.on_error == "allow"

    def _release_failed(self, error: Exception) -> bool:
        """A release Redis did not make: False (the lease gives the units back) while
        Redis cannot decide, unless on_error is "raise"; a mistake raises."""
        if _cannot_decide(error) and self.on_error != "raise":
            log.warning("Redis cannot release a holding now (%s); its lease gives it back",
                        error)
            return False
        raise self._unavailable("release the units", error) from error

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(limit={self.limit}, lease={self.lease!r}, "
                f"name={self.name!r})")


class RedisConcurrency(_SyncStore, _RedisHoldings):
    """A concurrency limit per key kept in Redis: at most `limit` units held at once,
    across every process and host that names the same limit.

    RedisConcurrency(client, limit, *, lease, name=None, prefix="cellrate:",
                     on_error="allow", timeout=0.25)

    The same names and answers as cellrate.Concurrency: try_acquire(key=None, cost=1)
    -> a RedisSlot or None, hold(...) for `with`, in_flight(key=None). Each acquire and
    each release is one round trip: a script (hold.lua) keeps a key's holdings in
    a sorted set, one member a holding whatever its units, scored by the instant its
    lease ends on the server's clock (TIME), and gives back the ended ones before it
    counts. `lease` (seconds, required) is what
    frees the units of a holder that never releases (a process killed, a host lost):
    they come back `lease` seconds after they were taken. Keys are prefix + name +
    ":" + key (the name's rules are RedisLimiter's; default "concurrency:<limit>").
    While Redis cannot decide, on_error answers an acquire as for rate limits:
    "allow" (a slot that holds nothing), "deny" (None), "raise" (RedisUnavailable).
    Thread-safe.
    """

    _client_names = ("a redis.Redis or redis.cluster.RedisCluster "
                     "(asyncio: AsyncRedisConcurrency)")

    def __init__(self, client: Any, limit: int, **options: Any) -> None:
        super().__init__(client, limit, **options)
        self._open_connections()

    def try_acquire(self, key: Key | None = None, cost: int = 1) -> RedisSlot | None:
        """A RedisSlot holding `cost` units of `key`, or None when they are not free."""
        words = self._acquire_words(key, cost)
        outage = self._availability.outage
        if outage is not None:
            return self._unheld(self._while_down(outage), key, cost)
        try:
            reply = self._call(words)
        except Exception as error:
            return self._unheld(self._failed(error), key, cost)
        return self._slot_of(words, reply, key, cost)

    def _wait(self, key: Key | None, cost: int, timeout: float | None) -> RedisSlot | None:
        """try_acquire, sleeping between tries (as Concurrency.hold's asyncio waiter)
        up to `timeout` seconds; None when the time ran out."""
        slot = self.try_acquire(key, cost)
        if slot is not None:
            return slot
        for pause in _concurrency.pauses(self.limit, cost, timeout):
            time.sleep(pause)
            slot = self.try_acquire(key, cost)
            if slot is not None:
                return slot
        return None

    def hold(self, key: Key | None = None, cost: int = 1, *,
             timeout: float | None = None) -> Any:
        """Holds `cost` units of `key` for a `with` block, waiting at most `timeout`
        seconds (None: as long as it takes), else raises RateLimited."""
        return _concurrency.concurrency_hold(self, key, cost, timeout=timeout)  # type: ignore[arg-type]

    def in_flight(self, key: Key | None = None) -> int:
        """The units of `key` held now (their lease not ended). Raises RedisUnavailable
        when Redis cannot answer, whatever on_error says: a count is not a decision."""
        words = self._count_words(key)
        try:
            return int(self._call(words))
        except Exception as error:
            raise self._unavailable("count the units held", error) from error


class _AsyncHold:
    """What AsyncRedisConcurrency.hold() returns, for `async with`: awaits the units
    (never blocking the loop) up to `timeout` seconds or raises RateLimited, and
    releases them when the block ends, however it ends."""

    __slots__ = ("store", "key", "cost", "timeout", "slot")

    def __init__(self, store: "AsyncRedisConcurrency", key: Key | None, cost: int,
                 timeout: float | None) -> None:
        self.store, self.key, self.cost, self.timeout = store, key, cost, timeout
        self.slot: AsyncRedisSlot | None = None

    async def __aenter__(self) -> AsyncRedisSlot:
        store, key, cost = self.store, self.key, self.cost
        slot = await store.try_acquire(key, cost)
        if slot is None:
            for pause in _concurrency.pauses(store.limit, cost, self.timeout):
                await asyncio.sleep(pause)
                slot = await store.try_acquire(key, cost)
                if slot is not None:
                    break
            else:
                raise _concurrency.refusal(store, cost, self.timeout)  # type: ignore[arg-type]
        self.slot = slot
        return slot

    async def __aexit__(self, *exc_info: Any) -> None:
        slot, self.slot = self.slot, None
        if slot is not None:
            await slot.release()


class AsyncRedisConcurrency(_AsyncStore, _RedisHoldings):
    """RedisConcurrency for asyncio (redis.asyncio.Redis or RedisCluster): the same
    arguments; try_acquire, in_flight and AsyncRedisSlot.release are coroutines, and
    hold(...) serves `async with`. An acquire cancelled, or timed out, after it was
    sent may hold units in Redis that no slot names: its lease gives them back."""

    _client_names = ("a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster "
                     "(blocking clients: RedisConcurrency)")
    _slot = AsyncRedisSlot

    async def try_acquire(self, key: Key | None = None, cost: int = 1) -> AsyncRedisSlot | None:
        """RedisConcurrency.try_acquire, awaited."""
        words = self._acquire_words(key, cost)
        outage = self._availability.outage
        if outage is not None:
            slot = self._unheld(self._while_down(outage), key, cost)
        else:
            try:
                reply = await self._call(words)
            except Exception as error:
                slot = self._unheld(self._failed(error), key, cost)
            else:
                slot = self._slot_of(words, reply, key, cost)
        return cast("AsyncRedisSlot | None", slot)

    def hold(self, key: Key | None = None, cost: int = 1, *,
             timeout: float | None = None) -> _AsyncHold:
        """RedisConcurrency.hold, for `async with`."""
        return _AsyncHold(self, key, cost, None if timeout is None else check_timeout(timeout))

    async def in_flight(self, key: Key | None = None) -> int:
        """RedisConcurrency.in_flight, awaited."""
        words = self._count_words(key)
        try:
            return int(await self._call(words))
        except Exception as error:
            raise self._unavailable("count the units held", error) from error


def _check_all_request(items: Iterable[Tuple[_RedisLimit, Key]], cost: int, now: float | None,
                       kind: type) -> Tuple[_RedisLimit, Tuple[List[Any], List[_Sent]]]:
    pairs = list(items)
    if not pairs:
        raise invalid("items", "items must name at least one limit")
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], kind)):
            raise invalid_type("items", f"items must be (limiter, key) pairs of {kind.__name__}")
        if pair[0].client is not pairs[0][0].client:
            raise invalid("items", "items: every limiter must use the same Redis client")
    request = _request(CHECK, pairs, cost, now)
    if isinstance(pairs[0][0].client, _CLUSTER_CLIENTS):
        keys = request[0][1:1 + len(pairs)]
        if len({redis.crc.key_slot(key) for key in keys}) > 1:
            raise _slots_differ(keys)  # the client would refuse it: no outage
    return pairs[0][0], request


def check_all(items: Iterable[Tuple[RedisLimiter, Key]], cost: int = 1, *,
              now: float | None = None) -> cellrate.Decision:
    """Decides several Redis limits as one, in one script call: admitted only if every
    limit admits, and a refusal takes nothing from any. Returns the tightest Decision
    (refused: the longest retry_after; admitted: the fewest remaining). In a Cluster the
    keys must share a slot (hash tags, e.g. "{user:42}"). on_error is the first limiter's."""
    first, request = _check_all_request(items, cost, now, RedisLimiter)
    assert isinstance(first, RedisLimiter)
    return first._decide(request)


async def check_all_async(items: Iterable[Tuple[AsyncRedisLimiter, Key]], cost: int = 1, *,
                          now: float | None = None) -> cellrate.Decision:
    """check_all for AsyncRedisLimiter."""
    first, request = _check_all_request(items, cost, now, AsyncRedisLimiter)
    assert isinstance(first, AsyncRedisLimiter)
    return await first._decide(request)
