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
import functools
import threading
import time
from typing import Any, Dict, Iterable, List, Literal, Mapping, Sequence, Tuple, cast

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
    ACQUIRE as ACQUIRE,
    ALLOW as ALLOW,
    ALLOW_CLASS as ALLOW_CLASS,
    BACK_KEY,
    BATCH_MAX as BATCH_MAX,
    BATCH_SCRIPT as BATCH_SCRIPT,
    BATCH_SHA,
    CHARGE as CHARGE,
    CHECK as CHECK,
    CHECK_CLASS as CHECK_CLASS,
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
    PEEK_CLASS as PEEK_CLASS,
    REFUND as REFUND,
    RELEASE as RELEASE,
    SCRIPT,
    SHA as SHA,
    TAKE as TAKE,
    UNAVAILABLE_REPLIES,
    Key as Key,
    _CONSTANTS,
    _cannot_decide,
    _core,
    _failure,
    _default_name,
    _raise_mistake,
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
    "check_many",
    "check_many_async",
]


# The core's protocol (core/cellrate/redis.h): a request's words, a reply's reading,
# the deny cache's answers, a key's name.
_request = _core._redis_request
_reply = _core._redis_reply
_remember = _core._redis_remember
_recall = _core._redis_recall
_redis_key = _core._redis_key

# on_wipe="refuse": or'ed into a request's mode, the core adds the wipe marker.
_WIPE_MARKER: int = _core._redis_protocol()["WIPE_MARKER"]
# penalty=: or'ed into a request's mode, its last argument the penalty (the core sends
# it with a check or an allow of one key), and into the deny cache's (it keeps none).
_PENALTY: int = _core._redis_protocol()["PENALTY"]

#: Refusals a limiter remembers at most (a full memory starts over).
MAX_REFUSALS = 10_000

#: The store's default bound on one decision, in seconds (timeout=): the core's table's.
DEFAULT_TIMEOUT_S: float = cellrate._cellrate._options("RedisLimiter")["timeout"]["default"]

_check_options = cellrate._cellrate._check_options

Algorithm = Literal["gcra", "token_bucket", "fixed_window", "sliding_window", "calendar"]


class _RedisLimit(_Store):
    """What the sync and asyncio stores share: arguments, keys, replies, refusals, on_error.
    The words of each request and the reading of each reply are the core's
    (_redis_request, _redis_reply); so are the deny cache's answers and on_error's."""

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
        fallback: Any = None,
        deny_cache: bool = True,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_cost: int | None = None,
        max_debt: int | None = None,
        coalesce: bool = False,
        priorities: Mapping[str, float] | None = None,
        on_wipe: str = "refuse",
        plans: Mapping[str, float | str | cellrate.Limit] | None = None,
        penalty: Any = None,
        tz: str | None = None,
    ) -> None:
        # The core parses, defaults and validates the limit first, as cellrate.Limit (and,
        # per call, each key, cost and now: _redis_request); its table checks the options
        # (cellrate/options.h).
        limit = _limit_of(rate, period, burst, algorithm, max_cost, max_debt, priorities, tz)
        #: A calendar quota's time zone (algorithm="calendar"; None: UTC), kept by
        #: reconfigure unless another is given.
        self.tz: str | None = tz
        options = _check_options("RedisLimiter", {
            "period": period, "burst": burst, "algorithm": algorithm, "name": name,
            "prefix": prefix, "on_error": on_error, "fallback": fallback,
            "deny_cache": deny_cache, "timeout": timeout, "max_cost": max_cost,
            "max_debt": max_debt, "coalesce": coalesce, "on_wipe": on_wipe,
            "priorities": priorities, "plans": plans, "penalty": penalty, "tz": tz})
        if options["coalesce"] and self._kind != "async":
            raise invalid("coalesce", _CONSTANTS["COALESCE_REFUSED"])
        #: coalesce=True (asyncio): the decisions of one event-loop turn go as one batch.
        self.coalesce: bool = options["coalesce"]
        #: "refuse": a key Redis lost (found by the script: its wipe marker) reads as fully
        #: used for one period; "allow": a fresh burst. The flag or'ed into each decision's
        #: mode (the request then carries the marker).
        self.on_wipe: str = options["on_wipe"]
        self._wipe = _WIPE_MARKER if self.on_wipe == "refuse" else 0
        #: The penalty box (a cellrate.Penalty, or None): a key refused `after` times is
        #: banned, its strikes in a second key beside its state (penalty_key), read by the
        #: script only when it refuses. As the core sends it (judged there).
        self.penalty: Any = penalty
        self._penalty = None if penalty is None else _core._redis_penalty(penalty)
        self._penalized = 0 if penalty is None else _PENALTY
        _core._redis_fallback_check(options["on_error"], fallback is not None)
        self._open_store(client, options["prefix"], options["on_error"], options["timeout"])
        #: on_error="fallback": the local limiter deciding while Redis cannot (None: made
        #: when first needed, from `fallback`), its limit, and the Redis keys it decided
        #: since Redis last answered for them (going back carries their use to Redis).
        self.fallback: Any = None
        self._fallback_limit: Any = None
        self._held: Dict[bytes, None] = {}
        self._held_lock = threading.Lock()
        self._fallback_given = fallback
        self._fallback_share: Any = None
        #: The outage this store last fell back in (its `since`) and the mark of Redis
        #: found back read from the fallback's store as it began (_outage).
        self._back_seen: Tuple[int, Any] = (0, None)
        if options["on_error"] == "fallback":
            self._fallback_store(limit)
        deny_cache = options["deny_cache"]
        self.max_cost = max_cost
        self.max_debt = max_debt
        #: The limit sent (cellrate.Limit), replaced whole by reconfigure(): a call reads
        #: it once, so that a decision never mixes two limits.
        self.limit: cellrate.Limit = limit
        self.named = name is not None
        #: The name of the limit's keys: given, or the first limit's parameters.
        self.name: str = name if name is not None else _default_name(self.limit)
        self.algorithm: str = self.limit.algorithm
        self.deny_cache = deny_cache
        self._prefix = self.prefix.encode()
        self._name = self.name.encode()
        # a probe: a peek of cost 0 on the limit's empty key, which writes nothing
        self._probe_words = _request(PEEK, 0, None, self.limit, self._prefix, self._name, b"")
        # Refusals answered here until their retry_after passes (docs/design.md §11):
        # Redis key -> (the core's refusal, the limit it was made under).
        self._refusals: Dict[bytes, Tuple[Any, cellrate.Limit]] = {}
        #: The plans (docs/design/plans.md): {name: the limit sent}, "default" (the limit)
        #: first; None without plans. The core's table, replaced whole by reconfigure.
        self._plans: Dict[str, cellrate.Limit] | None = None
        if plans is not None:
            self._plans = _core._redis_plans(limit, plans, self.named, max_cost, max_debt)

    plans = property(lambda self: dict(self._plans or {"default": self.limit}),
                     doc="The plans, {name: Limit}, 'default' (the limit) first.")

    def _plan_limit(self, plan: str) -> cellrate.Limit:
        """The limit a decision under `plan` sends (read once): the core's error naming
        plan for a name no plan has."""
        plans = self._plans
        if plans is None:
            plans = {"default": self.limit}
        limit = plans.get(plan) if isinstance(plan, str) else None
        return limit if limit is not None else _core._redis_plan(plans, plan)

    def reconfigure(self, rate: float | str, period: float | None = None, *,
                    burst: int | None = None, algorithm: Algorithm | None = None,
                    max_debt: int | None = None, plan: str | None = None,
                    tz: str | None = None) -> None:
        """Changes the limit this store sends, live: the next check (or allow) of each key
        carries what the key used to the new limit (docs/design.md §4), in the script, at
        that decision's instant; processes still sending the old limit carry it back on
        their own calls. The algorithm stays (an error naming `algorithm`), and a limit
        without a name cannot change (an error naming `name`: its keys are named by its
        parameters). A max_debt given before stays unless given again. An invalid limit
        raises and changes nothing. `plan`: the plan changed (default: "default"); each
        key on it carries at its next decision under it, keys on other plans are
        untouched. A calendar quota keeps its zone unless `tz` is given; another zone or
        period carries each key's count to the new period holding now, as in process."""
        _core._redis_check_change(self.named, self.algorithm, None)
        if plan is not None:
            self._plan_limit(plan)  # a name of the plans, else the core's error naming plan
        tz = self.tz if tz is None else tz
        if algorithm is not None:
            # the core's checks first
            cellrate.Limit(rate, period, burst=burst, algorithm=algorithm,
                           tz=tz if algorithm == "calendar" else None)
            _core._redis_check_change(True, self.algorithm, algorithm)
        max_debt = self.max_debt if max_debt is None else max_debt
        changed = _limit_of(rate, period, burst, cast(Algorithm, self.algorithm),
                            self.max_cost, max_debt, self.limit.priorities or None, tz)
        if self._plans is not None:
            given = {name: limit for name, limit in self._plans.items() if name != "default"}
            default = changed if plan in (None, "default") else self.limit
            if plan is not None and plan != "default":
                given[plan] = changed
            self._plans = _core._redis_plans(default, given, True, self.max_cost, max_debt)
            changed = default
        self._follow(changed)
        self.limit = changed
        self.max_debt = max_debt
        self.tz = tz
        self._refusals.clear()

    rate = property(lambda self: self.limit.rate, doc="Units admitted per period, per key.")
    period = property(lambda self: self.limit.period, doc="Seconds.")
    burst = property(lambda self: self.limit.burst, doc="Units an idle key may spend at once.")
    emission_ns = property(lambda self: self.limit.emission_ns, doc="Nanoseconds per unit.")
    tolerance_ns = property(lambda self: self.limit.tolerance_ns, doc="burst * emission_ns.")

    def redis_key(self, key: Key) -> bytes:
        """The Redis key holding `key`'s state: prefix, the name, ':', then the key."""
        return _redis_key(self._prefix, self._name, key)

    def _forget(self, key: Key) -> List[bytes]:
        """redis_key(key) and its penalty key, the key's remembered refusal dropped (for
        reset: the key is let out of the penalty box too)."""
        redis_key = self.redis_key(key)
        self._refusals.pop(redis_key, None)
        if self._penalty is None:
            return [redis_key]
        return [redis_key, self.penalty_key(key)]

    priorities = property(lambda self: self.limit.priorities,
                          doc="The priority classes, {name: reserve} (empty: none).")

    def _request(self, mode: int, key: Key, cost: int, now: float | None,
                 limit: cellrate.Limit, priority: str | None = None) -> List[bytes]:
        """EVALSHA's words after the SHA for one limit (numkeys, KEYS, ARGV): the core's;
        a class's mode ends with the class's name; a decision's carry the wipe marker
        with on_wipe="refuse"."""
        flag = self._wipe if mode != REFUND else 0
        if self._penalty is not None:
            more: Tuple[Any, ...] = (self._penalty,) if priority is None \
                else (priority, self._penalty)
            return _request(mode | flag | _PENALTY, cost, now, limit, self._prefix, self._name,
                            key, *more)
        if priority is None:
            return _request(mode | flag, cost, now, limit, self._prefix, self._name, key)
        return _request(mode | flag, cost, now, limit, self._prefix, self._name, key, priority)

    def _batch_call(self, mode: int, cost: int, limit: cellrate.Limit, key: Key) -> Tuple[Any, ...]:
        """A decision of one key in a batch call (_redis_batch's), with the wipe marker
        (on_wipe="refuse") and the penalty."""
        if self._penalty is None:
            return (mode | self._wipe, cost, limit, self._prefix, self._name, key)
        return (mode | self._wipe | _PENALTY, cost, limit, self._prefix, self._name, key,
                self._penalty)

    def penalty_key(self, key: Key) -> bytes:
        """The Redis key holding `key`'s strikes under a penalty (in its Cluster slot)."""
        return _core._redis_penalty_key(self._prefix, self._name, key)

    def _refund_words(self, key: Key, cost: int, now: float | None,
                      plan: str | None = None) -> Tuple[cellrate.Limit, List[bytes]]:
        """A refund's limit (the plan's, read once) and words."""
        limit = self.limit if plan is None else self._plan_limit(plan)
        words = self._request(REFUND, key, cost, now, limit)
        self._refusals.pop(words[1], None)  # a refund makes the key better than its refusal
        return limit, words

    def _recalled(self, mode: int, words: Sequence[bytes], limits: Sequence[cellrate.Limit],
                  cost: int, now: float | None) -> cellrate.Decision | None:
        """The answer of a refusal this limiter keeps for the request's key, if the core
        says it answers (for that cost, aged to now); None: Redis is asked."""
        entry = self._refusals.get(words[1])
        if entry is None or entry[1] is not limits[0] or len(limits) != 1:
            return None  # none, or under a limit changed since, or several limits
        answer = _recall(mode, now, cost, time.monotonic_ns(), entry[0], limits[0])
        if answer is False:  # its retry_after has passed
            self._refusals.pop(words[1], None)
            return None
        return cast("cellrate.Decision | None", answer)

    def _unasked(self, mode: int, words: Sequence[bytes], limits: Sequence[cellrate.Limit],
                 cost: int, now: float | None,
                 stores: Sequence["_RedisLimit"]) -> cellrate.Decision | None:
        """The head of every decision, sync or asyncio: the answer of a refusal the deny
        cache keeps, or of on_error while Redis is down; None: Redis is asked."""
        if self._refusals:
            answer = self._recalled(mode, words, limits, cost, now)
            if answer is not None:
                return answer
        outage = self._outage()
        if outage is None:
            return None
        keys = words[1:1 + len(limits)]
        return cast(cellrate.Decision, self._while_down(outage, mode, cost, keys, now, stores))

    def _outage(self) -> _Outage | None:
        """The outage a call reads (None: Redis is asked). With a fallback, None too once
        another process of the fallback's region found Redis back since this outage began
        (the mark, BACK_KEY, changed): every process goes back at once, rather than each
        at its own probe (up to MAX_BACKOFF_S apart)."""
        outage = self._availability.outage
        if outage is None or self._back_seen[0] != outage.since \
                or self._back_mark() == self._back_seen[1]:
            return outage
        return self._availability.resumed(outage)

    def _back_mark(self) -> Tuple[int, float]:
        """The mark of Redis found back: the fallback's state of BACK_KEY read at instant
        0 (a function of what was written alone), changed by each process that charges it
        (_found_back)."""
        decision = self.fallback.peek(BACK_KEY, 0, now=0)
        return decision.remaining, decision.reset_after

    def _found_back(self) -> None:
        """The probe found Redis back: the fallback's region learns it."""
        if self.fallback is not None:
            self.fallback.charge(BACK_KEY, 1)

    def _unanswered(self, error: Exception, mode: int, words: Sequence[bytes],
                    limits: Sequence[cellrate.Limit], cost: int, now: float | None,
                    stores: Sequence["_RedisLimit"]) -> cellrate.Decision:
        """The answer of a decision's call that failed (_failed: on_error, or raised)."""
        keys = words[1:1 + len(limits)]
        return cast(cellrate.Decision, self._failed(error, keys, mode, cost, keys, now, stores))

    def _one_words(self, mode: int, key: Key, cost: int, now: float | None,
                   priority: str | None = None,
                   plan: str | None = None) -> Tuple[cellrate.Limit, List[bytes], bool]:
        """The limit read once (the plan's), the request's words, and whether the key goes
        back to Redis from an outage decided locally (_back) rather than as any decision."""
        limit = self.limit if plan is None else self._plan_limit(plan)
        words = self._request(mode, key, cost, now, limit, priority)
        back = bool(self._held) and words[1] in self._held and self._outage() is None
        return limit, words, back

    def _back_answer(self, sent: int, sent_words: List[bytes], redis_key: bytes,
                     owed: int | None, reply: Any, asked: int, limit: cellrate.Limit, cost: int,
                     now: float | None) -> Any:
        """The answer of a key gone back to Redis (_back): the key no longer held once
        Redis took the `owed` units of its local state (None: a peek, still held), and
        the reply read."""
        if owed is not None:
            self._went_back(redis_key, owed, now)
        if sent == TAKE:
            return _read(TAKE, reply, (limit,))
        return self._answer(sent, sent_words, reply, asked, (limit,), cost, now)

    def _take_words(self, key: Key, max_cost: int,
                    now: float | None) -> Tuple[cellrate.Limit, List[bytes], int | None]:
        """A take's limit (read once) and words, and on_error's count while Redis is
        down (None: Redis is asked)."""
        limit = self.limit
        words = self._request(TAKE, key, max_cost, now, limit)
        outage = self._outage()
        if outage is None:
            return limit, words, None
        return limit, words, cast(int, self._while_down(outage, TAKE, max_cost, words[1:2], now))

    def _answer(self, mode: int, words: Sequence[bytes], reply: Any, asked: int,
                limits: Sequence[cellrate.Limit], cost: int,
                now: float | None) -> cellrate.Decision:
        """The decision of a reply. A refusal the core says the deny cache keeps (one
        limit on the server's clock) is kept, asked at `asked`, the instant before the
        request (Redis decided later, so the refusal holds at least that long, absent a
        reset on another host)."""
        decision = _read(mode, reply, limits)
        if not decision.allowed and self.deny_cache and len(limits) == 1:
            refusal = _remember(mode | self._penalized, now, cost, asked, reply, limits[0])
            if refusal is not None:
                if len(self._refusals) >= MAX_REFUSALS:
                    self._refusals.clear()
                self._refusals[words[1]] = (refusal, limits[0])
        return cast(cellrate.Decision, decision)

    def _fallback(self, outage: _Outage, mode: int = CHECK, cost: int = 1,
                  keys: Sequence[bytes] = (), now: float | None = None,
                  stores: Sequence["_RedisLimit"] = ()) -> Any:
        """The answer of on_error while Redis cannot decide (the core's): an admission, a
        refusal until the next probe (its fields agree), a take's count, or the local
        limiter's decision (on_error="fallback")."""
        if self.on_error == "raise":
            raise RedisUnavailable("Redis cannot decide now (on_error='raise')") \
                from outage.error
        if self.on_error == "fallback" and keys:
            if self._back_seen[0] != outage.since and outage.retry_at:  # (0: no free connection)
                self._back_seen = (outage.since, self._back_mark())  # the mark as it began
            return _locally(mode, cost, keys, now, stores or (self,))
        return _core._redis_unavailable(mode, self.limit, self.on_error == "allow", cost,
                                        outage.retry_at - time.monotonic_ns())

    def _fallback_store(self, limit: cellrate.Limit) -> Any:
        """The local limiter of on_error="fallback", made once from `fallback`: a share of
        the Redis limit (the core's derivation; None: the whole limit), a rate or a
        cellrate.Limit, or a cellrate.KeyedLimiter of the caller's (one in a shared region
        decides for the host)."""
        if self.fallback is not None:
            return self.fallback
        if limit.algorithm == "calendar":
            _core._redis_fallback_limit(limit, 1.0)  # the core's refusal, naming on_error
        given = self._fallback_given
        if isinstance(given, cellrate.KeyedLimiter):
            store = given
            local = cellrate.Limit(given.rate, given.period,
                                   algorithm=cast(Algorithm, given.algorithm),
                                   burst=given.burst if _takes_burst(given.algorithm) else None)
        else:
            if isinstance(given, str):
                local = cellrate.Limit(given, algorithm=cast(Algorithm, limit.algorithm))
            elif isinstance(given, cellrate.Limit):
                local = given
            else:  # a share (None: 1), judged by the core, followed by reconfigure (_follow)
                share = 1.0 if given is None else given
                local = _core._redis_fallback_limit(limit, share)
                self._fallback_share = share
            made: Dict[str, Any] = {
                "algorithm": local.algorithm,
                "burst": local.burst if _takes_burst(local.algorithm) else None}
            store = cellrate.KeyedLimiter(local.rate, local.period, **made)
        self._fallback_limit = local
        self.fallback = store
        return store

    def _follow(self, limit: cellrate.Limit) -> None:
        """reconfigure: a fallback that is a share of the Redis limit (given as a number,
        or absent) follows the new `limit` (the core's derivation), its keys carrying what
        they used (KeyedLimiter.reconfigure); a fallback given as a limit stays."""
        if self._fallback_share is None:
            return
        local = _core._redis_fallback_limit(limit, self._fallback_share)
        self.fallback.reconfigure(local.rate, local.period,
                                  burst=local.burst if _takes_burst(local.algorithm) else None)
        self._fallback_limit = local

    def _going_back(self, mode: int, key: Key, words: List[bytes], cost: int,
                    now: float | None,
                    limit: cellrate.Limit) -> Tuple[int, List[bytes], int | None]:
        """The request for a key this store decided locally during an outage, now that
        Redis answers: the core's (a check, allow or charge goes as a charge of what the
        local state still holds, plus the cost): the mode sent, its words, and the units
        of the local state Redis takes with it (None: a peek, the key stays held)."""
        kwargs = {} if now is None else {"now": now}
        held = self.fallback.peek(words[1], 0, **kwargs).remaining
        sent, sent_cost, settled = _core._redis_going_back(mode, cost, self._fallback_limit,
                                                           held)
        if sent != mode or sent_cost != cost:
            words = self._request(sent, key, sent_cost, now, limit)
        if not settled:
            return sent, words, None
        # the units alone: what a take would settle first (the core's)
        return sent, words, _core._redis_going_back(TAKE, 0, self._fallback_limit, held)[1]

    def _settling(self, mode: int, key: Key, redis_key: bytes, now: float | None,
                  limit: cellrate.Limit) -> Tuple[List[bytes], int] | None:
        """A take, a refund (`mode`) or a decision that cannot carry a held key's units
        (several limits as one, a batch's: as a take) settles the key first: None when it
        is not held (or Redis cannot decide); else the words of the charge of the units its
        local state still holds (the core's; empty: none to send) and their count, the key
        no longer held once Redis took them (_went_back)."""
        if not self._held or redis_key not in self._held or self._outage() is not None:
            return None
        kwargs = {} if now is None else {"now": now}
        held = self.fallback.peek(redis_key, 0, **kwargs).remaining
        sent, owed, _ = _core._redis_going_back(mode, 0, self._fallback_limit, held)
        return (self._request(sent, key, owed, now, limit) if owed else []), owed

    def _went_back(self, redis_key: bytes, owed: int, now: float | None) -> None:
        """Redis took the `owed` units the local state held for `redis_key`: the key is
        no longer held, and the local state gives them back (a refund), so that another
        process of a region, going back with the same key, sends only what it admitted
        since rather than the same units again. What the region's others admit until
        they read the mark (one call each) goes back with them."""
        with self._held_lock:
            self._held.pop(redis_key, None)
        if owed:
            kwargs = {} if now is None else {"now": now}
            self.fallback.refund(redis_key, owed, **kwargs)


def _takes_burst(algorithm: str) -> bool:
    return bool(cellrate._cellrate._algorithm_takes_burst(algorithm))


# (the fallback limiter has no classes: a class's decision is its plain one there)
_LOCAL_METHODS = {PEEK: "peek", CHECK: "check", ALLOW: "check", CHARGE: "charge", TAKE: "take",
                  PEEK_CLASS: "peek", CHECK_CLASS: "check", ALLOW_CLASS: "check"}


def _locally(mode: int, cost: int, keys: Sequence[bytes], now: float | None,
             stores: Sequence[_RedisLimit]) -> Any:
    """on_error="fallback": the decision of each store's local limiter for its Redis key
    (several: as one, as check_all), each key then held until Redis takes its use."""
    kwargs = {} if now is None else {"now": now}
    first = stores[0]
    with first._held_lock:
        if len(keys) == 1:
            local = first._fallback_store(first.limit)
            answer = getattr(local, _LOCAL_METHODS[mode])(keys[0], cost, **kwargs)
        else:
            answer = cellrate.check_all(
                [(store._fallback_store(store.limit), key) for store, key in zip(stores, keys)],
                cost, **kwargs)
        if mode not in (PEEK, PEEK_CLASS):
            for store, key in zip(stores, keys):
                store._held[key] = None
    return answer


def _read(mode: int, reply: Any, limits: Sequence[cellrate.Limit]) -> Any:
    """The core's reading of a reply: a Decision, or a take's count. A reply the script
    never gives is Redis refusing the decision."""
    try:
        return _reply(mode, reply, *limits)
    except cellrate.CellrateError as error:
        raise RedisUnavailable(f"Redis refused the decision: {error}") from error


def _limit_of(rate: float | str, period: float | None, burst: int | None,
              algorithm: Algorithm, max_cost: int | None, max_debt: int | None,
              priorities: Mapping[str, float] | None = None, tz: str | None = None) -> Any:
    """The limit, parsed, defaulted and validated by the core (max_debt too); with
    max_cost, refused as in process where its burst (a window: its rate) could never fit
    max_cost units (the core's checks, on a limiter made for them alone); refused where
    the script cannot carry it exactly (the core's words, naming burst)."""
    limit = cellrate.Limit(rate, period, burst=burst, algorithm=algorithm, max_debt=max_debt,
                           priorities=priorities, tz=tz)
    if max_cost is not None:
        cellrate.Limiter(rate, period, burst=burst, algorithm=algorithm,  # type: ignore[arg-type, misc]
                         max_cost=max_cost, tz=tz)
    _core._redis_check_limit(limit)
    return limit



class RedisLimiter(_SyncStore, _RedisLimit):
    """A limit per key, kept in Redis (redis-py's redis.Redis or redis.cluster.RedisCluster).

    RedisLimiter(client, rate, period=None, *, burst=None, algorithm="gcra", name=None,
                 prefix="cellrate:", on_error="allow", deny_cache=True, timeout=0.25,
                 max_cost=None, max_debt=None, on_wipe="refuse", tz=None)

    algorithm="calendar" with tz (an IANA zone; None: UTC): a quota per day, week, month
    or year of the zone ("1000000/month"), decided in the calendar period that holds the
    server's clock (the client sends the bounds of the periods around its own); a client
    more than a period off the server's clock is refused (RedisUnavailable, naming tz).
    Its counts rely on Redis's persistence (docs/calendar.md).

    The limit's arguments are those of cellrate.Limit, and `limit` is that value;
    max_cost, as in process, refuses a burst (a window: a rate) that could never fit
    it, naming burst (rate); max_debt, as in process, bounds what a charge may leave a
    key owing beyond its limit (default: the burst; a window: its rate).
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

    on_wipe: when Redis lost its state (an empty restart, a failover to a replica that
    lagged, a flush: the script finds a key missing while its slot's wipe marker is
    missing), "refuse" reads every key missing as fully used at that instant, so the
    wipe hands out no fresh burst (each key regains its units at the rate); "allow"
    gives each a fresh burst, as before.

    deny_cache: a key refused with retry_after r is refused again, for that cost
    (or a larger one the refusal implies), without a round trip until r has
    passed (a key's state only grows, so Redis would refuse too), unless reset()
    or refund() on this limiter forgets it. A reset() on another host reaches
    this cache only when the refusal expires.
    """

    _client_names = ("a redis.Redis or redis.cluster.RedisCluster, or a valkey.Valkey or "
                     "valkey.cluster.ValkeyCluster (asyncio: AsyncRedisLimiter)")

    def __init__(self, client: Any, rate: float | str, period: float | None = None,
                 **options: Any) -> None:
        super().__init__(client, rate, period, **options)
        self._open_connections()

    def _decide(self, mode: int, words: List[bytes], limits: Sequence[cellrate.Limit],
                cost: int, now: float | None,
                stores: Sequence[_RedisLimit] = ()) -> cellrate.Decision:
        answer = self._unasked(mode, words, limits, cost, now, stores)
        if answer is not None:
            return answer
        asked = time.monotonic_ns()
        try:
            reply = self._call(words)
        except Exception as error:
            return self._unanswered(error, mode, words, limits, cost, now, stores)
        return self._answer(mode, words, reply, asked, limits, cost, now)

    def _one(self, mode: int, key: Key, cost: int, now: float | None,
             priority: str | None = None, plan: str | None = None) -> cellrate.Decision:
        limit, words, back = self._one_words(mode, key, cost, now, priority, plan)
        if back:
            return cast(cellrate.Decision, self._back(mode, key, words, cost, now, limit))
        return self._decide(mode, words, (limit,), cost, now)

    def _back(self, mode: int, key: Key, words: List[bytes], cost: int, now: float | None,
              limit: cellrate.Limit) -> Any:
        """A decision of a key decided locally during the outage: the core's request for
        going back (_going_back); the local state forgotten once Redis answers."""
        sent, sent_words, owed = self._going_back(mode, key, words, cost, now, limit)
        asked = time.monotonic_ns()
        try:
            reply = self._call(sent_words)
        except Exception as error:
            return self._unanswered(error, mode, words, (limit,), cost, now, ())
        return self._back_answer(sent, sent_words, words[1], owed, reply, asked, limit, cost,
                                 now)

    def _settle(self, key: Key, redis_key: bytes, now: float | None, limit: cellrate.Limit,
                mode: int = TAKE) -> None:
        """A held key settled before an operation that cannot carry its units (_settling)."""
        settling = self._settling(mode, key, redis_key, now, limit)
        if settling is None:
            return
        charge, owed = settling
        if charge:
            self._call(charge)
        self._went_back(redis_key, owed, now)

    def check(self, key: Key, cost: int = 1, *, now: float | None = None,
              priority: str | None = None, plan: str | None = None) -> cellrate.Decision:
        """Decides for `cost` units of `key` and commits an admission; `priority`: the
        class decided in (a name of priorities; the script decides with its reserve);
        `plan`: the plan of `key` (a name of plans; default "default"), a key last
        decided under another carrying what it used, in the script."""
        if priority is None:
            if plan is None:
                return self._one(CHECK, key, cost, now)
            return self._one(CHECK, key, cost, now, None, plan)
        return self._one(CHECK_CLASS, key, cost, now, priority, plan)

    def allow(self, key: Key, cost: int = 1, *, now: float | None = None,
              priority: str | None = None, plan: str | None = None) -> bool:
        """check(...).allowed."""
        if priority is None:
            if plan is None:
                return self._one(ALLOW, key, cost, now).allowed
            return self._one(ALLOW, key, cost, now, None, plan).allowed
        return self._one(ALLOW_CLASS, key, cost, now, priority, plan).allowed

    def peek(self, key: Key, cost: int = 1, *, now: float | None = None,
             priority: str | None = None, plan: str | None = None) -> cellrate.Decision:
        """The answer check() would give now; commits nothing."""
        if priority is None:
            if plan is None:
                return self._one(PEEK, key, cost, now)
            return self._one(PEEK, key, cost, now, None, plan)
        return self._one(PEEK_CLASS, key, cost, now, priority, plan)

    def charge(self, key: Key, cost: int, *, now: float | None = None,
               plan: str | None = None) -> cellrate.Decision:
        """Commits `cost` units of `key` whatever its state (docs/cost.md): where they fit,
        this is check(); else the key goes into debt, refused, with the retry_after of
        one more unit, and Decision.clipped where the debt met its bound (max_debt units
        beyond the limit, and MAX_DEBT_NS after now; a window: its packed ceiling).
        Where Redis cannot decide, on_error answers and the charge is lost (nothing
        retries it). `plan`: the plan of `key`, as check()'s."""
        if plan is None:
            return self._one(CHARGE, key, cost, now)
        return self._one(CHARGE, key, cost, now, None, plan)

    def take(self, key: Key, max_cost: int, *, now: float | None = None) -> int:
        """Admits as many units of `key` as fit now, up to `max_cost`, in one script call
        (atomic), and returns their count (0: none fits). Where Redis cannot decide,
        on_error answers: allow max_cost, deny 0, raise RedisUnavailable."""
        limit, words, count = self._take_words(key, max_cost, now)
        if count is not None:
            return count
        try:
            self._settle(key, words[1], now, limit)
            reply = self._call(words)
        except Exception as error:
            return cast(int, self._failed(error, (), TAKE, max_cost, words[1:2], now))
        return cast(int, _read(TAKE, reply, (limit,)))

    def refund(self, key: Key, cost: int = 1, *, now: float | None = None,
               plan: str | None = None) -> None:
        """Gives back `cost` units of `key` taken earlier (a call that was cancelled or
        timed out after Redis admitted it; an estimate settled lower), exactly as the
        core's refund: never better than idle, and units of a window that ended are
        gone. Raises RedisUnavailable when Redis cannot answer, whatever on_error says.
        `plan`: the plan of `key`, as check()'s."""
        limit, words = self._refund_words(key, cost, now, plan)
        try:
            self._settle(key, words[1], now, limit, REFUND)
            self._call(words)
        except Exception as error:
            _raise_mistake(error)
            raise self._unavailable("refund", error) from error

    def reset(self, key: Key) -> None:
        """Forgets `key` (back to a full burst). Raises RedisUnavailable when Redis cannot
        answer, whatever on_error says: a reset is not a decision."""
        try:
            self._run("DEL", *self._forget(key))
        except Exception as error:
            raise self._unavailable("reset the key", error) from error


class AsyncRedisLimiter(_AsyncStore, _RedisLimit):
    """RedisLimiter for asyncio (redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster):
    the same arguments; check, allow, peek, refund and reset are coroutines. Each call
    is bounded by `timeout` (asyncio's own timeout around the client's command, its
    retries included); a call waits for a free connection of a capped pool until then.
    A call cancelled, or timed out, after it was sent may still have been admitted by
    Redis: refund() settles it."""

    _client_names = ("a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster, or a "
                     "valkey.asyncio.Valkey or valkey.asyncio.cluster.ValkeyCluster "
                     "(blocking clients: RedisLimiter)")

    def __init__(self, client: Any, rate: float | str, period: float | None = None,
                 **options: Any) -> None:
        super().__init__(client, rate, period, **options)
        self._probe_task: asyncio.Task[None] | None = None
        self._coalescer: _Coalescer | None = None

    async def _decide(self, mode: int, words: List[bytes], limits: Sequence[cellrate.Limit],
                      cost: int, now: float | None,
                      stores: Sequence[_RedisLimit] = ()) -> cellrate.Decision:
        answer = self._unasked(mode, words, limits, cost, now, stores)
        if answer is not None:
            return answer
        asked = time.monotonic_ns()
        try:
            reply = await self._call(words)
        except Exception as error:
            return self._unanswered(error, mode, words, limits, cost, now, stores)
        return self._answer(mode, words, reply, asked, limits, cost, now)

    async def _one(self, mode: int, key: Key, cost: int, now: float | None,
                   priority: str | None = None, plan: str | None = None) -> cellrate.Decision:
        limit, words, back = self._one_words(mode, key, cost, now, priority, plan)
        if back:
            return cast(cellrate.Decision, await self._back(mode, key, words, cost, now, limit))
        if self.coalesce and mode <= ALLOW:
            return await self._coalesced(mode, key, cost, now, limit, words)
        return await self._decide(mode, words, (limit,), cost, now)

    async def _coalesced(self, mode: int, key: Key, cost: int, now: float | None,
                         limit: cellrate.Limit, words: List[bytes]) -> cellrate.Decision:
        """A peek, check or allow sent with the other decisions of this event-loop turn
        in one batch call (coalesce=True), answered as if alone."""
        decision = _Decision(mode, (self,), (limit,), cost, now, words,
                             self._batch_call(mode, cost, limit, key))
        if decision.early():
            if decision.error is not None:
                raise decision.error
            return cast(cellrate.Decision, decision.answer)
        loop = asyncio.get_running_loop()
        coalescer = self._coalescer
        if coalescer is None or coalescer.loop is not loop:
            coalescer = self._coalescer = _Coalescer(self, loop)
        return cast(cellrate.Decision, await coalescer.submit(decision))

    async def _back(self, mode: int, key: Key, words: List[bytes], cost: int,
                    now: float | None, limit: cellrate.Limit) -> Any:
        """A decision of a key decided locally during the outage: the core's request for
        going back (_going_back); the local state forgotten once Redis answers."""
        sent, sent_words, owed = self._going_back(mode, key, words, cost, now, limit)
        asked = time.monotonic_ns()
        try:
            reply = await self._call(sent_words)
        except Exception as error:
            return self._unanswered(error, mode, words, (limit,), cost, now, ())
        return self._back_answer(sent, sent_words, words[1], owed, reply, asked, limit, cost,
                                 now)

    async def _settle(self, key: Key, redis_key: bytes, now: float | None,
                      limit: cellrate.Limit, mode: int = TAKE) -> None:
        """RedisLimiter._settle, awaited."""
        settling = self._settling(mode, key, redis_key, now, limit)
        if settling is None:
            return
        charge, owed = settling
        if charge:
            await self._call(charge)
        self._went_back(redis_key, owed, now)

    async def check(self, key: Key, cost: int = 1, *, now: float | None = None,
                    priority: str | None = None, plan: str | None = None) -> cellrate.Decision:
        """Decides for `cost` units of `key` and commits an admission (priority=, plan=:
        as RedisLimiter.check)."""
        if priority is None:
            if plan is None:
                return await self._one(CHECK, key, cost, now)
            return await self._one(CHECK, key, cost, now, None, plan)
        return await self._one(CHECK_CLASS, key, cost, now, priority, plan)

    async def allow(self, key: Key, cost: int = 1, *, now: float | None = None,
                    priority: str | None = None, plan: str | None = None) -> bool:
        """(await check(...)).allowed."""
        if priority is None:
            if plan is None:
                return (await self._one(ALLOW, key, cost, now)).allowed
            return (await self._one(ALLOW, key, cost, now, None, plan)).allowed
        return (await self._one(ALLOW_CLASS, key, cost, now, priority, plan)).allowed

    async def peek(self, key: Key, cost: int = 1, *, now: float | None = None,
                   priority: str | None = None, plan: str | None = None) -> cellrate.Decision:
        """The answer check() would give now; commits nothing."""
        if priority is None:
            if plan is None:
                return await self._one(PEEK, key, cost, now)
            return await self._one(PEEK, key, cost, now, None, plan)
        return await self._one(PEEK_CLASS, key, cost, now, priority, plan)

    async def charge(self, key: Key, cost: int, *, now: float | None = None,
                     plan: str | None = None) -> cellrate.Decision:
        """RedisLimiter.charge, awaited."""
        if plan is None:
            return await self._one(CHARGE, key, cost, now)
        return await self._one(CHARGE, key, cost, now, None, plan)

    async def take(self, key: Key, max_cost: int, *, now: float | None = None) -> int:
        """RedisLimiter.take, awaited."""
        limit, words, count = self._take_words(key, max_cost, now)
        if count is not None:
            return count
        try:
            await self._settle(key, words[1], now, limit)
            reply = await self._call(words)
        except Exception as error:
            return cast(int, self._failed(error, (), TAKE, max_cost, words[1:2], now))
        return cast(int, _read(TAKE, reply, (limit,)))

    async def refund(self, key: Key, cost: int = 1, *, now: float | None = None,
                     plan: str | None = None) -> None:
        """RedisLimiter.refund, awaited."""
        limit, words = self._refund_words(key, cost, now, plan)
        try:
            await self._settle(key, words[1], now, limit, REFUND)
            await self._call(words)
        except Exception as error:
            _raise_mistake(error)
            raise self._unavailable("refund", error) from error

    async def reset(self, key: Key) -> None:
        """Forgets `key`; raises RedisUnavailable when Redis cannot answer."""
        try:
            await self._run("DEL", *self._forget(key))
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
        # the core's checks of a concurrency limit (the table judged the lease: its ns)
        _check_hold(limit, None, 1, None)
        lease_ns: int = options["lease_ns"]
        #: The units that may be held at once, per key.
        self.limit: int = int(limit)
        #: Seconds after which a holding not released is given back.
        self.lease: float = lease_ns / 1e9
        #: The name of the limit's keys: given, or DEFAULT_NAME and the limit.
        self.name: str = name if name is not None else f"{_HOLD_PROTOCOL['DEFAULT_NAME']}:{limit}"
        self._prefix, self._name = self.prefix.encode(), self.name.encode()
        self._limit_words = (b"%d" % self.limit, b"%d" % lease_ns)
        self._probe_words = self._count_words(None)

    def redis_key(self, key: Key | None = None) -> bytes:
        """The sorted set holding `key`'s units: prefix, the name, then ':' and the key
        (None: the limit's one key, prefix and name alone)."""
        _check_hold(self.limit, key, 1, None)
        return self._key(key)

    def _key(self, key: Key | None) -> bytes:
        return _redis_key(self._prefix, self._name, key)

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
        """The slot of an acquire's reply (a holder: bytes, or text from a client that
        decodes replies), None for a refusal (0)."""
        if isinstance(reply, str):
            reply = reply.encode()
        elif not isinstance(reply, bytes):
            return None
        return cast(RedisSlot, self._slot(self, [1, words[1], RELEASE, reply, words[4]], key,
                                          cost))

    def _acquire_unasked(self, key: Key | None,
                         cost: int) -> Tuple[List[Any], bool, RedisSlot | None]:
        """The head of an acquire, sync or asyncio: its words, and whether on_error
        answered it (Redis is down) with that slot (None: refused)."""
        words = self._acquire_words(key, cost)
        outage = self._availability.outage
        if outage is None:
            return words, False, None
        return words, True, self._unheld(self._while_down(outage), key, cost)

    def _unheld(self, answer: Any, key: Key | None, cost: int) -> RedisSlot | None:
        """on_error's answer to an acquire Redis did not decide: a slot holding nothing
        ("allow"), or None ("deny"); "raise" raised in _fallback."""
        return cast(RedisSlot, self._slot(self, None, key, cost)) if answer else None

    def _fallback(self, outage: _Outage, *request: Any) -> bool:
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

    _client_names = ("a redis.Redis or redis.cluster.RedisCluster, or a valkey.Valkey or "
                     "valkey.cluster.ValkeyCluster (asyncio: AsyncRedisConcurrency)")

    def __init__(self, client: Any, limit: int, **options: Any) -> None:
        super().__init__(client, limit, **options)
        self._open_connections()

    def try_acquire(self, key: Key | None = None, cost: int = 1) -> RedisSlot | None:
        """A RedisSlot holding `cost` units of `key`, or None when they are not free."""
        words, answered, slot = self._acquire_unasked(key, cost)
        if answered:
            return slot
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

    _client_names = ("a redis.asyncio.Redis or redis.asyncio.cluster.RedisCluster, or a "
                     "valkey.asyncio.Valkey or valkey.asyncio.cluster.ValkeyCluster "
                     "(blocking clients: RedisConcurrency)")
    _slot = AsyncRedisSlot

    async def try_acquire(self, key: Key | None = None, cost: int = 1) -> AsyncRedisSlot | None:
        """RedisConcurrency.try_acquire, awaited."""
        words, answered, slot = self._acquire_unasked(key, cost)
        if not answered:
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
                       kind: type) -> Tuple[Any, "_Decision"]:
    pairs = list(items)
    _core._redis_check_items([
        pair[0].client if isinstance(pair, tuple) and len(pair) in (2, 3)
        and isinstance(pair[0], kind) else None for pair in pairs])
    limits = [_pair_limit(pair) for pair in pairs]  # each read once
    groups: List[Any] = []
    for pair, limit in zip(pairs, limits):
        groups += (limit, pair[0]._prefix, pair[0]._name, pair[1])
    store = pairs[0][0]
    words = _request(CHECK | store._wipe, cost, now, *groups)
    if isinstance(store.client, (store._library.cluster, store._library.async_cluster)):
        keys = words[1:1 + len(pairs)]
        if len({redis.crc.key_slot(key) for key in keys}) > 1:
            raise _slots_differ(keys)  # the client would refuse it: no outage
    return pairs[0][0], _Decision(CHECK, [pair[0] for pair in pairs], limits, cost, now, words,
                                  (), [pair[1] for pair in pairs])


def _pair_limit(pair: Tuple[Any, ...]) -> cellrate.Limit:
    """The limit an item's (limiter, key) or (limiter, key, plan) sends."""
    if len(pair) == 2 or pair[2] is None:
        return cast(cellrate.Limit, pair[0].limit)
    return cast(cellrate.Limit, pair[0]._plan_limit(pair[2]))


def check_all(items: Iterable[Tuple[Any, ...]], cost: int = 1, *,
              now: float | None = None) -> cellrate.Decision:
    """Decides several Redis limits as one, in one script call (items: (limiter, key), or
    (limiter, key, plan) for a key under a plan of the limiter's): admitted only if every
    limit admits, and a refusal takes nothing from any. Returns the tightest Decision
    (refused: the longest retry_after; admitted: the fewest remaining). In a Cluster the
    keys must share a slot (hash tags, e.g. "{user:42}"). on_error is the first limiter's."""
    first, decision = _check_all_request(items, cost, now, RedisLimiter)
    assert isinstance(first, RedisLimiter)
    try:
        for store, key, redis_key, limit in decision.held():
            store._settle(key, redis_key, now, limit)
    except Exception as error:
        return first._unanswered(error, CHECK, decision.words, decision.limits, cost, now,
                                 decision.stores)
    return first._decide(CHECK, decision.words, decision.limits, cost, now, decision.stores)


async def check_all_async(items: Iterable[Tuple[Any, ...]], cost: int = 1, *,
                          now: float | None = None) -> cellrate.Decision:
    """check_all for AsyncRedisLimiter."""
    first, decision = _check_all_request(items, cost, now, AsyncRedisLimiter)
    assert isinstance(first, AsyncRedisLimiter)
    try:
        for store, key, redis_key, limit in decision.held():
            await store._settle(key, redis_key, now, limit)
    except Exception as error:
        return first._unanswered(error, CHECK, decision.words, decision.limits, cost, now,
                                 decision.stores)
    return await first._decide(CHECK, decision.words, decision.limits, cost, now,
                               decision.stores)


# Batches: several decisions in one script call (redis/batch.lua; the words are the
# core's cr_redis_batch). Each decision is answered exactly as if sent alone: the
# script runs decide.lua once per decision, in order, so a key named twice decides
# the second time on what the first wrote, as two calls one after the other would.
_batch_words = _core._redis_batch
_batch_reply = _core._redis_batch_reply
_batch_command = functools.partial(_core._redis_batch_command, BATCH_SHA.encode())


def _batch_of(now: float | None, chunk: Sequence["_Decision"]) -> Tuple[bytes, Any]:
    """A batch call's whole EVALSHA as bytes (the core packs it: redis-py packing a
    hundred decisions' words cost more than the round trip), and the maker of its words
    (a cluster client's path, EVAL after NOSCRIPT)."""
    calls = _calls(chunk)
    return _batch_command(now, calls), lambda: _batch_words(now, calls)


class _Decision:
    """One decision of a batch (or of check_all): what it sends, and its answer (or its
    error) once settled. `stores`, `limits`, `keys` (Redis keys) and `given` (the
    caller's keys; empty: not needed) run in parallel."""

    __slots__ = ("mode", "stores", "limits", "keys", "given", "cost", "now", "words", "call",
                 "answer", "error")

    def __init__(self, mode: int, stores: Sequence[_RedisLimit], limits: Sequence[Any],
                 cost: int, now: float | None, words: List[bytes],
                 call: Tuple[Any, ...], given: Sequence[Key] = ()) -> None:
        self.mode, self.stores, self.limits, self.cost, self.now = mode, stores, limits, cost, now
        self.words, self.call, self.given = words, call, given
        self.keys = words[1:1 + len(limits)]
        self.answer: Any = None
        self.error: BaseException | None = None

    def held(self) -> Sequence[Tuple[Any, Key, bytes, cellrate.Limit]]:
        """(store, key, Redis key, limit) of each key a fallback decided during an outage,
        to settle before the decision is sent (it cannot carry their units)."""
        if len(self.stores) == 1 and not self.stores[0]._held:
            return ()  # (nothing held: what a decision meets while Redis answers)
        return [(store, key, redis_key, limit) for store, key, redis_key, limit
                in zip(self.stores, self.given, self.keys, self.limits)
                if store._held and redis_key in store._held]

    def settle(self, store_call: Any, *args: Any) -> None:
        """The answer of `store_call(*args)`, or the error it raises."""
        try:
            self.answer = store_call(*args)
        except Exception as error:
            self.error = error

    def failed(self, error: Exception) -> None:
        """Redis did not decide: on_error's answer (the store marks Redis down), or the
        mistake raised, as for the call alone."""
        store = self.stores[0]
        self.settle(store._failed, error, self.keys, self.mode, self.cost, self.keys,
                    self.now, self.stores)

    def replied(self, reply: Any, asked: int) -> None:
        if isinstance(reply, list) and len(reply) == 1:  # its error reply's words alone
            text = reply[0].decode("utf-8", "replace") if isinstance(reply[0], bytes) \
                else str(reply[0])
            self.failed(self.stores[0]._library.exceptions.ResponseError(text))
            return
        self.settle(self.stores[0]._answer, self.mode, self.words, reply, asked, self.limits,
                    self.cost, self.now)

    def early(self) -> bool:
        """Answered without Redis, as the call alone would be: a refusal the deny cache
        keeps, or on_error while Redis cannot decide."""
        store = self.stores[0]
        if store._refusals and len(self.limits) == 1:
            answer = store._recalled(self.mode, self.words, self.limits, self.cost, self.now)
            if answer is not None:
                self.answer = answer
                return True
        outage = store._outage()
        if outage is not None:
            self.settle(store._while_down, outage, self.mode, self.cost, self.keys, self.now,
                        self.stores)
            return True
        return False


def _sent(chunk: Sequence[_Decision], error: Exception | None, reply: Any, asked: int) -> None:
    """Settles each decision of one batch call from its reply (or its failure)."""
    if error is None:
        try:
            _batch_reply(len(chunk), reply)
        except cellrate.CellrateError as wrong:
            error = RedisUnavailable(f"Redis refused the decision: {wrong}")
            for decision in chunk:
                decision.error = error
            return
        for decision, element in zip(chunk, reply):
            decision.replied(element, asked)
        return
    if _failure(error)[0] == "cross_slot":  # a plain client on a Cluster node
        mistake = _slots_differ([key for decision in chunk for key in decision.keys])
        mistake.__cause__ = error
        for decision in chunk:
            decision.error = mistake
        return
    for decision in chunk:
        decision.failed(error)


def _calls(chunk: Sequence[_Decision]) -> List[Tuple[Any, ...]]:
    return [decision.call for decision in chunk]


def _many(items: Iterable[Any], now: float | None, kind: type) -> Tuple[Any, List[_Decision]]:
    """The decisions of check_many's items, checked: each (limiter, key), (limiter, key,
    cost), (limiter, key, cost, plan) or ([(limiter, key) or (limiter, key, plan), ...],
    cost) (several limits as one, as check_all), every limiter of `kind` on one client;
    in a Cluster every key in one slot."""
    decisions: List[_Decision] = []
    client = None
    for item in items:
        if not isinstance(item, tuple) or not 1 <= len(item) <= 4:
            raise invalid_type("items", _CONSTANTS["BATCH_ITEM"])
        limiter = cast(Any, item[0])
        if (2 <= len(item) <= 3 and isinstance(item[0], kind) and client is not None
                and limiter.client is client and limiter._penalty is None):
            # (limiter, key [, cost]) of a limiter on the batch's client: what the
            # loop below makes of it, without its lists
            key, cost = item[1], item[2] if len(item) == 3 else 1
            limit, prefix, name, sent = limiter.limit, limiter._prefix, limiter._name, \
                CHECK | limiter._wipe
            decisions.append(_Decision(
                CHECK, (limiter,), (limit,), cost, now,
                _request(sent, cost, now, limit, prefix, name, key),
                (sent, cost, limit, prefix, name, key), (key,)))
            continue
        pairs: List[Any]
        if isinstance(item[0], (list, tuple)):
            pairs, cost = list(item[0]), item[1] if len(item) > 1 else 1
        else:
            pairs, cost = [item[:2] + item[3:4]], item[2] if len(item) > 2 else 1
        # each decision's pairs, and every pair of the batch, on one client: the core's rule
        clients = [cast(Any, pair[0]).client if isinstance(pair, tuple) and len(pair) in (2, 3)
                   and isinstance(pair[0], kind) else None for pair in pairs]
        _core._redis_check_items(clients)
        if client is None:
            client = clients[0]
        _core._redis_check_items([client, *clients])
        stores: List[_RedisLimit] = []
        limits: List[Any] = []
        groups: List[Any] = []
        for pair in pairs:
            limiter, limit = pair[0], _pair_limit(pair)  # read once
            stores.append(limiter)
            limits.append(limit)
            groups += (limit, limiter._prefix, limiter._name, pair[1])
        if len(stores) == 1 and stores[0]._penalty is not None:  # with its penalty
            call = stores[0]._batch_call(CHECK, cost, limits[0], pairs[0][1])
            words = stores[0]._request(CHECK, pairs[0][1], cost, now, limits[0])
        else:
            sent = CHECK | stores[0]._wipe  # the first limiter's on_wipe, as check_all
            call = (sent, cost, *groups)
            words = _request(sent, cost, now, *groups)
        decisions.append(_Decision(CHECK, stores, limits, cost, now, words, call,
                                   [pair[1] for pair in pairs]))
    if decisions:
        store = decisions[0].stores[0]
        if isinstance(client, (store._library.cluster, store._library.async_cluster)):
            keys = [key for decision in decisions for key in decision.keys]
            if len({redis.crc.key_slot(key) for key in keys}) > 1:
                raise _slots_differ(keys)  # the client would refuse it: no outage
    return client, decisions


def _answers(decisions: Sequence[_Decision]) -> List[cellrate.Decision]:
    for decision in decisions:
        if decision.error is not None:
            raise decision.error
    return [decision.answer for decision in decisions]


def check_many(items: Iterable[Any], *, now: float | None = None) -> List[cellrate.Decision]:
    """Decides several keys (each with its cost, and one limit or several as one) in one
    script call, and returns each Decision in order, each exactly what the call alone
    (limiter.check(key, cost), or check_all) would answer.

    items: (limiter, key), (limiter, key, cost), (limiter, key, cost, plan) or
    ([(limiter, key) or (limiter, key, plan), ...], cost) tuples of RedisLimiter on one
    Redis client (plan: the key's plan, a name of the limiter's plans). The decisions
    run in order in the script, so a key named twice decides the second time on what
    the first committed, as two calls one after the other. An empty batch answers []
    without a call; more than BATCH_MAX decisions go as several calls, in order. In a
    Cluster every key must share one slot
    (hash tags, e.g. "{user:42}"): keys of several slots are a mistake naming items, never
    an outage. The deny cache and on_error answer each decision as for the call alone;
    a mistake (a key held under another algorithm) raises after every decision was made."""
    client, decisions = _many(items, now, RedisLimiter)
    send = [decision for decision in decisions if not decision.early()]
    for decision in send:
        try:
            for store, key, redis_key, limit in decision.held():
                store._settle(key, redis_key, now, limit)
        except Exception as unsettled:
            decision.failed(unsettled)
    send = [decision for decision in send if decision.answer is None and decision.error is None]
    for at in range(0, len(send), BATCH_MAX):
        chunk = send[at:at + BATCH_MAX]
        store = chunk[0].stores[0]
        assert isinstance(store, RedisLimiter)
        command, words_of = _batch_of(now, chunk)
        asked = time.monotonic_ns()
        try:
            reply, error = store._call_batch(command, words_of), None
        except Exception as failure:
            reply, error = None, failure
        _sent(chunk, error, reply, asked)
    return _answers(decisions)


async def check_many_async(items: Iterable[Any], *,
                           now: float | None = None) -> List[cellrate.Decision]:
    """check_many for AsyncRedisLimiter."""
    client, decisions = _many(items, now, AsyncRedisLimiter)
    send = [decision for decision in decisions if not decision.early()]
    for decision in send:
        try:
            for store, key, redis_key, limit in decision.held():
                await store._settle(key, redis_key, now, limit)
        except Exception as unsettled:
            decision.failed(unsettled)
    send = [decision for decision in send if decision.answer is None and decision.error is None]
    for at in range(0, len(send), BATCH_MAX):
        chunk = send[at:at + BATCH_MAX]
        store = chunk[0].stores[0]
        assert isinstance(store, AsyncRedisLimiter)
        command, words_of = _batch_of(now, chunk)
        asked = time.monotonic_ns()
        try:
            reply, error = await store._call_batch(command, words_of), None
        except Exception as failure:
            reply, error = None, failure
        _sent(chunk, error, reply, asked)
    return _answers(decisions)


class _Coalescer:
    """coalesce=True: the decisions an asyncio store's tasks ask within one event-loop
    turn, sent as one batch call (one per Cluster slot, and per explicit now) when the
    turn ends, each task awaiting its own answer."""

    def __init__(self, store: "AsyncRedisLimiter", loop: asyncio.AbstractEventLoop) -> None:
        self.store, self.loop = store, loop
        self.pending: Dict[Any, List[Tuple[_Decision, "asyncio.Future[Any]"]]] = {}
        self.cluster = isinstance(store.client, store._library.async_cluster)

    def submit(self, decision: _Decision) -> "asyncio.Future[Any]":
        future = self.loop.create_future()
        group = (decision.now, redis.crc.key_slot(decision.keys[0]) if self.cluster else 0)
        if not self.pending:
            self.loop.call_soon(self.flush)
        self.pending.setdefault(group, []).append((decision, future))
        return future

    def flush(self) -> None:
        pending, self.pending = self.pending, {}
        for (now, _), entries in pending.items():
            for at in range(0, len(entries), BATCH_MAX):
                self.loop.create_task(self.send(now, entries[at:at + BATCH_MAX]))

    async def send(self, now: float | None,
                   entries: List[Tuple[_Decision, "asyncio.Future[Any]"]]) -> None:
        chunk = [decision for decision, _ in entries]
        try:
            command, words_of = _batch_of(now, chunk)
            asked = time.monotonic_ns()
            try:
                reply, error = await self.store._call_batch(command, words_of), None
            except Exception as failure:
                reply, error = None, failure
            _sent(chunk, error, reply, asked)
        except BaseException as failure:  # cancelled with the loop: every task learns it
            for decision in chunk:
                if decision.answer is None and decision.error is None:
                    decision.error = failure
            if not isinstance(failure, Exception):
                raise
        finally:
            for decision, future in entries:
                if future.done():
                    continue
                if isinstance(decision.error, Exception):
                    future.set_exception(decision.error)
                elif decision.error is not None:
                    future.cancel()
                else:
                    future.set_result(decision.answer)
