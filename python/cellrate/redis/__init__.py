"""One limit across hosts: cellrate's decisions kept in Redis.

    >>> import redis
    >>> from cellrate.redis import RedisLimiter
    >>> client = redis.Redis()
    >>> limiter = RedisLimiter(client, "100/minute", burst=20, timeout=0.1)
    >>> limiter.allow("user:42")
    True

Each decision is one round trip: a server-side script (redis/decide.lua in the
repository, the one file both faces send) reads the key's
state, decides with the server's clock (TIME) and writes the new state with an
expiry, atomically. The limit is the core's (cellrate.Limit), and the core
validates every key, cost and now too, so both stores refuse the same inputs
with the same words. No call holds a decision longer than `timeout`, whatever
the client's own retries. While Redis cannot decide (unreachable, or a reply such as OOM or
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
import contextlib
import hashlib
import logging
import math
import os
import re
import sys
import threading
import time
import weakref
from importlib import resources
from typing import Any, Callable, Dict, Iterable, List, Literal, Sequence, Tuple, Union, cast

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
    import redis.sentinel
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cellrate.redis needs the redis package: pip install 'cellrate[redis]'") from exc

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


def _read_script(filename: str) -> bytes:
    """A server script's bytes: one of the files of redis/ in the repository, which
    the package ships as its scripts/ folder (setup.py)."""
    return (resources.files("cellrate.redis") / "scripts" / filename).read_bytes()


#: The server-side script, byte for byte as the Lua module sends it.
SCRIPT: bytes = _read_script("decide.lua")
SHA = hashlib.sha1(SCRIPT).hexdigest()
#: The concurrency limits' script (RedisConcurrency), byte for byte as the Lua module sends it.
HOLD_SCRIPT: bytes = _read_script("hold.lua")
HOLD_SHA = hashlib.sha1(HOLD_SCRIPT).hexdigest()


def _protocol(script: bytes) -> Dict[str, str]:
    """The settings of the script's protocol paragraph ("-- The protocol:" up to the first
    blank line): NAME -> its value's text, a 'string' unquoted. The Lua face reads the
    same lines."""
    text = script.decode()
    start = text.index("\n-- The protocol:")
    paragraph = text[start:text.index("\n\n", start)]
    return {name: value.strip("'") for name, value in
            re.findall(r"^(?:local|--) ([A-Z][A-Z_]*) = (.*)$", paragraph, re.M)}


_PROTOCOL = _protocol(SCRIPT)
_HOLD_PROTOCOL = _protocol(HOLD_SCRIPT)

#: The largest tolerance (burst * emission interval) the script carries exactly, exclusive:
#: 9e15 ns, about 104 days. Larger limits are refused with an error naming burst.
MAX_TOLERANCE_NS = int(_PROTOCOL["MAX_TOLERANCE_NS"])

ON_ERROR = tuple(_PROTOCOL["ON_ERROR"].split())
_ON_ERROR_WORDS = ", ".join(f"'{word}'" for word in ON_ERROR[:-1]) + f" or '{ON_ERROR[-1]}'"
DEFAULT_PREFIX = _PROTOCOL["PREFIX"]
# A name's refused characters and the words of the refusals; what a live change says of
# another algorithm (also the start of the script's reply for a key held under one).
_NAME_REFUSES = _PROTOCOL["NAME_REFUSES"].split()
_ALGORITHM_REPLY = _PROTOCOL["ALGORITHM_REPLY"]

# The script's modes (its ARGV[1]).
PEEK, CHECK, ALLOW, REFUND, CHARGE, TAKE = (
    _PROTOCOL[mode].encode() for mode in ("PEEK", "CHECK", "ALLOW", "REFUND", "CHARGE", "TAKE"))

#: How far after now a charge can leave a gcra key's TAT (its debt bound), in ns:
#: 9e15 ns, about 104 days (the core's bound is beyond what the script carries
#: exactly). A charge past it is clipped there (Decision.clipped). A window's count
#: is bounded by its packed ceiling, as in process.
MAX_DEBT_NS = int(_PROTOCOL["MAX_DEBT_NS"])

# EVALSHA's words after the SHA (numkeys, the key, mode, cost, the limit's four
# arguments) for one limit on the server's clock: the only requests whose
# refusals are remembered.
_ONE_LIMIT_SERVER_CLOCK = 8


class _Sent:
    """The limit a store sends, with what is derived from it: one object, replaced whole
    by reconfigure(), so that a call never mixes two limits."""

    __slots__ = ("limit", "args", "admitted", "window", "retry_per_unit_ns")

    def __init__(self, limit: Any) -> None:
        if limit.tolerance_ns >= MAX_TOLERANCE_NS:
            raise invalid("burst", "burst " + _PROTOCOL["BURST_TOO_LARGE"])
        self.limit = limit
        # the limit as the script takes it
        self.args = _limit_words(limit)
        # the seconds in which the limit restores its units, for Decision.headers()
        self.window: float = limit.window
        # the answer to an admission in ALLOW mode (the script replies 1 alone)
        self.admitted = cellrate.Decision(True, 0, 0.0, 0.0, limit.burst, self.window)
        # How a refusal's retry_after grows per unit of cost above the remembered
        # one (gcra: one emission interval; fixed window: not at all; sliding
        # window: not known here, so Redis is asked).
        self.retry_per_unit_ns: int | None = (
            limit.emission_ns if limit.algorithm in ("gcra", "token_bucket")
            else 0 if limit.algorithm == "fixed_window" else None)

#: Refusals a limiter remembers at most (a full memory starts over).
MAX_REFUSALS = 10_000

#: The first words of the Redis error replies that mean "Redis cannot decide
#: now" (full, busy with another script, loading, a read-only replica, failing
#: over): answered by on_error like an unreachable server. Any other error reply
#: (WRONGTYPE, a script error) is a mistake, raised as RedisUnavailable whatever
#: on_error says. The script's protocol paragraph holds them for both faces.
UNAVAILABLE_REPLIES = tuple(_PROTOCOL["UNAVAILABLE_REPLIES"].split())

# Failures that are not replies: the server cannot be reached or did not answer
# in time (a pool's wait for a connection included).
_TRANSPORT = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ClusterError,  # no node answered for the slot
    redis.exceptions.RedisClusterException,
    asyncio.TimeoutError,
    OSError,
)

# The prefixes redis-py strips from the replies it maps to exceptions of its own
# (redis-py 7 on keeps it as .status_code).
try:
    from redis._parsers.base import BaseParser as _Parser
except ImportError:  # pragma: no cover - redis-py 4
    from redis.connection import BaseParser as _Parser  # type: ignore[attr-defined,no-redef,unused-ignore]
_STRIPPED = {kind: word for word, kind in _Parser.EXCEPTION_CLASSES.items()
             if isinstance(kind, type)}

#: The store's default bound on one decision, in seconds (timeout=).
DEFAULT_TIMEOUT_S = 0.25


def _reply_word(error: redis.exceptions.ResponseError) -> str:
    """The first word of the error reply behind `error` ("OOM", "WRONGTYPE", ...)."""
    word = getattr(error, "status_code", None) or _STRIPPED.get(type(error))
    return word if word else str(error).split(" ", 1)[0]


def _cannot_decide(error: BaseException) -> bool:
    """The one classification of failures: True when Redis cannot decide now
    (on_error answers), False for a mistake (raised as RedisUnavailable)."""
    if isinstance(error, redis.exceptions.ResponseError):
        return _reply_word(error) in UNAVAILABLE_REPLIES
    return isinstance(error, _TRANSPORT)


class _PoolExhausted(redis.exceptions.ConnectionError):
    """No connection of the pool came free before the call's deadline: this call
    only cannot decide (Redis is not down)."""


# While Redis cannot decide, calls answer by on_error without trying it, and a
# probe (a thread, or an asyncio task) tries it after a delay that doubles
# from FIRST_BACKOFF_S up to MAX_BACKOFF_S, until it decides again.
FIRST_BACKOFF_S = float(_PROTOCOL["FIRST_BACKOFF_S"])
MAX_BACKOFF_S = float(_PROTOCOL["MAX_BACKOFF_S"])

log = logging.getLogger("cellrate.redis")

Key = Union[str, bytes]
Algorithm = Literal["gcra", "token_bucket", "fixed_window", "sliding_window"]


class RedisUnavailable(cellrate.CellrateError):
    """Redis could not decide (unreachable, stalled or failing over) and on_error is "raise".

    The client's own exception is the __cause__.
    """


def _detached(error: BaseException) -> BaseException:
    """`error` kept for later (the cause of RedisUnavailable) without the tracebacks of
    its chain: their frames would keep the store, and so its probe, alive."""
    seen = error
    while seen is not None:
        seen.with_traceback(None)
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    return error


class _Outage:
    """Redis cannot decide: since when (monotonic s), the last failure (without its
    tracebacks) and when the probe tries next (monotonic s; 0: no probe, a call that
    found no free connection). Never changed, replaced whole: a decision reads the
    availability once and answers from that, whatever the probe does meanwhile."""

    __slots__ = ("since", "error", "retry_at")

    def __init__(self, since: float, error: BaseException, retry_at: float) -> None:
        self.since = since
        self.error = error
        self.retry_at = retry_at


class _Availability:
    """Whether Redis decides lately; the back-off schedule of the probe, its log lines.

    A call reads `outage` once (None: ask Redis) and answers from what it read;
    failed() starts the probe (start_probe, given by the store: a thread or an
    asyncio task), which calls probed() after each try until one succeeds. No
    request ever waits for a probe.
    """

    def __init__(self) -> None:
        self.outage: _Outage | None = None
        self.backoff = 0.0
        self.probing = False
        self.lock = threading.Lock()

    def failed(self, error: BaseException, on_error: str) -> Tuple[_Outage, bool]:
        """Redis cannot decide: the outage, and True when the caller must start the probe."""
        error = _detached(error)
        with self.lock:
            outage = self.outage
            if outage is None:
                since = time.monotonic()
                self.backoff = FIRST_BACKOFF_S
                outage = _Outage(since, error, since + self.backoff)
                log.warning("Redis cannot decide (%s: %s); answering on_error=%r until it "
                            "decides again", type(error).__name__, error, on_error)
            else:
                outage = _Outage(outage.since, error, outage.retry_at)
            self.outage = outage
            start, self.probing = not self.probing, True
            return outage, start

    def probed(self, error: BaseException | None) -> float | None:
        """A probe's outcome (None: Redis decided); the delay to the next one, or None
        when probing stops."""
        with self.lock:
            outage = self.outage
            if error is None or outage is None:
                if outage is not None:
                    log.warning("Redis decides again after %.3f s",
                                time.monotonic() - outage.since)
                self.outage, self.probing = None, False
                return None
            self.backoff = min(self.backoff * 2, MAX_BACKOFF_S)
            self.outage = _Outage(outage.since, _detached(error),
                                  time.monotonic() + self.backoff)
            return self.backoff

    def stopped(self) -> None:
        with self.lock:
            self.probing = False


class _Store:
    """What every Redis store shares: its client, prefix, on_error and timeout, the one
    handling of failures (on_error while Redis cannot decide, and the probe)."""

    _clients: Tuple[type, ...] = ()
    _client_names = ""
    _script, _sha = SCRIPT, SHA
    _probe_words: List[Any]  # what the probe sends: a call that writes nothing

    def _open_store(self, client: Any, prefix: str, on_error: str, timeout: float) -> None:
        if on_error not in ON_ERROR:
            raise invalid("on_error", f"on_error must be {_ON_ERROR_WORDS}, not {on_error!r}")
        self._open_client(client, prefix, timeout)
        self.on_error = on_error

    def _open_client(self, client: Any, prefix: str, timeout: float) -> None:
        """The client, prefix and timeout checked and kept (every store, the share store
        too, which has no on_error)."""
        if not isinstance(client, self._clients):
            raise invalid_type("client",
                               f"client must be {self._client_names}, not {type(client).__name__}")
        if not isinstance(prefix, str):
            raise invalid_type("prefix", f"prefix must be a str, not {type(prefix).__name__}")
        if any(refused in prefix for refused in _PROTOCOL["PREFIX_REFUSES"].split()):
            raise invalid("prefix", "prefix " + _PROTOCOL["PREFIX_REFUSED"])
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise invalid_type("timeout",
                               f"timeout must be a number of seconds, not {type(timeout).__name__}")
        if not 0 < timeout < math.inf:
            raise invalid("timeout", f"timeout must be finite and > 0 (seconds), not {timeout!r}")
        self.client: Any = client
        self.prefix = prefix
        self.timeout = float(timeout)
        self._availability = _Availability()

    def _failed(self, error: Exception, keys: Sequence[bytes] = ()) -> Any:
        """The answer to a call of `keys` that failed: on_error's when Redis cannot decide
        now (and, unless the call only found no free connection, the store answers
        on_error from then on while a probe tries Redis); a mistake raises
        RedisUnavailable, or InvalidArgument where it is one."""
        if not _cannot_decide(error):
            _raise_mistake(error, keys)
            raise RedisUnavailable(f"Redis refused the decision: {error}") from error
        if isinstance(error, _PoolExhausted):
            return self._fallback(_Outage(time.monotonic(), error, 0.0))
        outage, start = self._availability.failed(error, self.on_error)
        if start:
            self._start_probe()
        return self._fallback(outage)

    def _while_down(self, outage: _Outage) -> Any:
        """The answer while Redis cannot decide, from the outage the call read (the
        probe restarted if it had stopped, as when its event loop ended)."""
        availability = self._availability
        if not availability.probing:
            with availability.lock:
                start, availability.probing = not availability.probing, True
            if start:
                self._start_probe()
        return self._fallback(outage)

    def _fallback(self, outage: _Outage) -> Any:  # pragma: no cover - each store has its own
        raise NotImplementedError

    def _start_probe(self) -> None:  # pragma: no cover - each face has its own
        raise NotImplementedError

    def _unavailable(self, what: str, error: Exception) -> RedisUnavailable:
        """The error of a reset or a refund that Redis did not make (not a decision:
        raised whatever on_error says)."""
        return RedisUnavailable(f"Redis cannot {what} now: {error}")


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
        self._open_store(client, prefix, on_error, timeout)
        if not isinstance(deny_cache, bool):
            raise invalid_type("deny_cache",
                               f"deny_cache must be a bool, not {type(deny_cache).__name__}")
        if name is not None:
            _check_name(name)
        # The core parses, defaults and validates the limit (and, per call, each key,
        # cost and now: _request).
        self.max_cost = max_cost
        self._sent = _Sent(_limit_of(rate, period, burst, algorithm, max_cost))
        self.named = name is not None
        #: The name of the limit's keys: given, or the first limit's parameters.
        self.name: str = name if name is not None else _default_name(self._sent.limit)
        self.algorithm: str = self._sent.limit.algorithm
        self.deny_cache = deny_cache
        self._key_prefix = f"{prefix}{self.name}:".encode()
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


def _limit_words(limit: Any) -> Tuple[bytes, ...]:
    """The script's four ARGV words of a limit with the fields algorithm, emission_ns,
    tolerance_ns and burst. Encoded once: redis-py sends bytes as they are."""
    fields = (limit.algorithm, limit.emission_ns, limit.tolerance_ns, limit.burst)
    return tuple(str(field).encode() for field in fields)


def _default_name(limit: Any) -> str:
    """The name of a limit given none: its parameters, "<algorithm>:<tolerance_ns>:<burst>"
    (the signature the script records with each value), so that two limits without a
    name never share a key, and the keys are those of the layout before names."""
    return f"{limit.algorithm}:{limit.tolerance_ns}:{limit.burst}"


def _check_name(name: Any) -> None:
    """A name as the core takes a policy name, without the characters of NAME_REFUSES."""
    cellrate.check_policy_name(name)
    if any(refused in name for refused in _NAME_REFUSES):
        raise invalid("name", "name " + _PROTOCOL["NAME_REFUSED"])


def _raise_mistake(error: Exception, keys: Sequence[bytes] = ()) -> None:
    """An error reply that is an argument mistake, raised as one: a key held under another
    algorithm (InvalidArgument naming algorithm), keys in several Cluster slots (CROSSSLOT,
    naming items); anything else returns."""
    if not isinstance(error, redis.exceptions.ResponseError):
        return
    text = str(error)
    at = text.find(_ALGORITHM_REPLY)
    if at >= 0:
        raise invalid("algorithm", text[at + len("cellrate: "):]) from error
    if _reply_word(error) == "CROSSSLOT":
        raise _slots_differ(keys) from error


def _slots_differ(keys: Sequence[bytes]) -> Exception:
    """The mistake of one call's keys in several Redis Cluster hash slots, naming each
    key and its slot (the client's own rule, redis.crc.key_slot)."""
    named = ", ".join(f"'{key.decode('utf-8', 'backslashreplace')}' {redis.crc.key_slot(key)}"
                      for key in dict.fromkeys(keys))
    return invalid("items", f"items {_PROTOCOL['SLOTS_DIFFER']} {named}")


_CLUSTER_CLIENTS = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)


# The core's checks of a decision's key, cost and now, without a store.
_check_request = cellrate._cellrate._check_request


def _request(mode: bytes, pairs: Sequence[Tuple["_RedisLimit", Key]], cost: int,
             now: float | None) -> Tuple[List[Any], List[_Sent]]:
    """The one builder of the script's words after the SHA: numkeys, KEYS (a key per
    limit), ARGV (mode, cost, each limit's four words, then now in ns when given, as
    the core rounds it); and the limits sent, which answer the reply. Each key, cost
    and now is validated by the core first."""
    now_ns = None
    for _, key in pairs:
        now_ns = _check_request(key, cost, now)
    keys = [limit._key(key) for limit, key in pairs]
    sents = [limit._sent for limit, _ in pairs]
    args: List[Any] = [mode, cost]
    for sent in sents:
        args += sent.args
    if now_ns is not None:
        args.append(now_ns)
    return [len(keys), *keys, *args], sents


def _decision(reply: Any, sents: Sequence[_Sent]) -> cellrate.Decision:
    if not isinstance(reply, list):  # ALLOW, admitted: the verdict alone
        return sents[0].admitted
    allowed, remaining, retry_after_ns, reset_after_ns, index = reply[:5]
    retry_after_ns = int(retry_after_ns)
    sent = sents[index - 1]
    return cellrate.Decision(
        allowed == 1,
        remaining,
        math.inf if retry_after_ns < 0 else retry_after_ns / 1e9,
        int(reset_after_ns) / 1e9,
        sent.limit.burst,
        sent.window,
        clipped=len(reply) > 5 and reply[5] == 1,  # a charge's sixth field
    )


class _SentinelMaster:
    """The master's address, asked of the Sentinels of a pool that redis-py's
    Sentinel.master_for() made, within the time a call has left. redis-py's own
    lookup asks each Sentinel in turn with that Sentinel client's socket timeout (5 s
    by default), before the store could bound it. Here each Sentinel gets an equal
    share of the time left (so a frozen one costs a share and the next still
    answers), through the store's own connections to it; the reply is read and the
    master's state judged as redis-py does; a Sentinel that failed is asked last from
    then on, one that answered first (redis-py keeps the one that answered first too)."""

    def __init__(self, pool: Any) -> None:
        self._manager = pool.sentinel_manager
        self.service_name: str = pool.service_name
        self.check_connection: bool = pool.check_connection
        self._order: List[Any] = list(self._manager.sentinels)
        self._lock = threading.Lock()

    def _move(self, sentinel: Any, first: bool) -> None:
        with self._lock:
            if sentinel in self._order:
                self._order.remove(sentinel)
                self._order.insert(0 if first else len(self._order), sentinel)

    def address(self, deadline: float) -> Tuple[str, int]:
        with self._lock:
            sentinels = list(self._order)
        errors = []
        for index, sentinel in enumerate(sentinels):
            left = deadline - time.monotonic()
            if left <= 0:
                errors.append("no time left")
                break
            try:
                reply = _Connections.of(sentinel.connection_pool).run(
                    ("SENTINEL MASTERS",), time.monotonic() + left / (len(sentinels) - index))
                masters = sentinel.response_callbacks["SENTINEL MASTERS"](reply)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    redis.exceptions.ResponseError) as error:
                where = sentinel.connection_pool.connection_kwargs
                errors.append(f"{where.get('host')}:{where.get('port')}: {error}")
                self._move(sentinel, first=False)
                continue
            state = masters.get(self.service_name)
            if state and self._manager.check_master_state(state, self.service_name):
                self._move(sentinel, first=True)
                forced = getattr(self._manager, "_force_master_ip", None)
                return (forced if forced is not None else state["ip"]), state["port"]
        raise redis.sentinel.MasterNotFoundError(
            f"No master found for {self.service_name!r} within the store's timeout: "
            + "; ".join(errors))


class _AskedWithin:
    """What a Sentinel-managed connection asks its pool (redis-py's proxy), answered
    within the deadline of the call that connects it: the master's address, then the
    connection's timeouts cut to the time still left."""

    is_master = True

    def __init__(self, master: _SentinelMaster) -> None:
        self.master = master
        self.service_name = master.service_name
        self.check_connection = master.check_connection
        self.deadline = 0.0
        self.connection: Any = None

    def get_master_address(self) -> Tuple[str, int]:
        address = self.master.address(self.deadline)
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise redis.exceptions.TimeoutError(
                "the master's address came with no time left within the store's timeout")
        self.connection.socket_connect_timeout = self.connection.socket_timeout = left
        return address


class _Connections:
    """The sync store's own connections to the client's server, shared by every store
    on one connection pool: the pool's settings (host, port, db, credentials, TLS,
    protocol) without the client's retries, at most the pool's max_connections at
    once; a call waits for a free one until its deadline. redis-py's own
    get_connection() cannot serve here: it connects, and so retries with back-off,
    before the caller can bound it. A pool of Sentinel.master_for() has its master's
    address asked of the Sentinels within the call's deadline too (_SentinelMaster)."""

    _by_pool: "weakref.WeakKeyDictionary[Any, _Connections]" = weakref.WeakKeyDictionary()
    _by_pool_lock = threading.Lock()

    @classmethod
    def of(cls, pool: Any) -> "_Connections":
        with cls._by_pool_lock:
            connections = cls._by_pool.get(pool)
            if connections is None:
                connections = cls._by_pool[pool] = cls(pool)
            return connections

    def __init__(self, pool: Any) -> None:
        kwargs = dict(pool.connection_kwargs)
        kwargs.update(retry=Retry(NoBackoff(), 0), health_check_interval=0)
        kwargs.pop("retry_on_timeout", None)
        self._kwargs = kwargs
        self._connection_class = pool.connection_class
        self._sentinel_master = (
            _SentinelMaster(pool)
            if isinstance(pool, redis.sentinel.SentinelConnectionPool) and pool.is_master
            else None)
        self.max_connections: int = getattr(pool, "max_connections", None) or 2**31
        self._idle: List[Any] = []
        self._count = 0
        self._free = threading.Condition(threading.Lock())
        self._pid = os.getpid()

    def _made(self) -> Any:
        """A new connection, not connected."""
        if self._sentinel_master is None:
            return self._connection_class(**self._kwargs)
        asked = _AskedWithin(self._sentinel_master)
        asked.connection = self._connection_class(**dict(self._kwargs, connection_pool=asked))
        return asked.connection

    def _get(self, deadline: float) -> Any:
        with self._free:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
                self._idle, self._count, self._pid = [], 0, os.getpid()
            while not self._idle and self._count >= self.max_connections:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _PoolExhausted(
                        f"no connection of the pool came free within the store's timeout "
                        f"(max_connections={self.max_connections})")
                self._free.wait(remaining)
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return self._made()
        except BaseException:
            with self._free:
                self._count -= 1
                self._free.notify()
            raise

    def _put(self, connection: Any, healthy: bool) -> None:
        if not healthy:
            connection.disconnect()
        with self._free:
            if self._pid == os.getpid():
                if healthy:
                    self._idle.append(connection)
                else:
                    self._count -= 1
                self._free.notify()

    def run(self, command: Tuple[Any, ...], deadline: float) -> Any:
        """`command`'s reply, or the error of the reply; raises TimeoutError at the
        deadline. A connection found closed (a server restarted since) is made again
        once, while time remains."""
        connection = self._get(deadline)
        healthy = False
        try:
            for attempt in (0, 1):
                fresh = getattr(connection, "_sock", None) is None
                if fresh:
                    remaining = max(deadline - time.monotonic(), 0.001)
                    connection.socket_connect_timeout = connection.socket_timeout = remaining
                    if self._sentinel_master is not None:
                        connection.connection_pool.deadline = deadline
                    connection.connect()
                try:
                    connection.send_command(*command)
                    if not connection.can_read(timeout=max(deadline - time.monotonic(), 0)):
                        raise redis.exceptions.TimeoutError(
                            "Redis did not answer within the store's timeout")
                    reply = connection.read_response()
                except redis.exceptions.ResponseError:
                    healthy = True
                    raise
                except redis.exceptions.ConnectionError:
                    if fresh or attempt or time.monotonic() >= deadline:
                        raise
                    connection.disconnect()
                    continue
                healthy = True
                return reply
        finally:
            self._put(connection, healthy)


class _SyncStore(_Store):
    """The transport of the blocking stores: the store's own connections (a cluster client:
    its own machinery), the script's calls, the probe thread."""

    _clients = (redis.Redis, redis.cluster.RedisCluster)

    def _open_connections(self) -> None:
        client = self.client
        self._connections = (None if isinstance(client, redis.cluster.RedisCluster)
                             else _Connections.of(client.connection_pool))
        self._probe_stop: threading.Event | None = None
        self._prober: threading.Thread | None = None

    def _run(self, *command: Any) -> Any:
        """One command's reply, within the store's timeout (a cluster client: its own)."""
        connections = self._connections
        if connections is None:
            return self.client.execute_command(*command)
        return connections.run(command, time.monotonic() + self.timeout)

    def _call(self, words: Sequence[Any]) -> Any:
        """The script's reply. After NOSCRIPT (a restart, SCRIPT FLUSH, a failover) EVAL
        sends the script with the call, so no flush between a load and a call can
        fail it again."""
        try:
            return self._run("EVALSHA", self._sha, *words)
        except redis.exceptions.NoScriptError:
            return self._run("EVAL", self._script, *words)

    def _start_probe(self) -> None:
        stop = self._probe_stop = threading.Event()
        self._prober = threading.Thread(
            target=_probe_thread, args=(weakref.ref(self), self._availability, stop),
            name="cellrate.redis probe", daemon=True)
        self._prober.start()

    def close(self) -> None:
        """Stops the probe of a store that Redis failed (it stops by itself once Redis
        decides again, or when the store is collected)."""
        if self._probe_stop is not None:
            self._probe_stop.set()
        if self._prober is not None and self._prober is not threading.current_thread():
            self._prober.join()


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


def _probe_thread(store_ref: "weakref.ref[_SyncStore]", availability: _Availability,
                  stop: threading.Event) -> None:
    """Tries Redis after each back-off until it decides, the store is collected or closed."""
    delay: float | None = availability.backoff
    while delay is not None:
        if stop.wait(delay):
            availability.stopped()
            return
        store = store_ref()
        if store is None:
            return
        delay = availability.probed(_probe_error(store._call, store._probe_words))
        del store


def _probe_error(call: Callable[[Sequence[Any]], Any], words: Sequence[Any]) -> Exception | None:
    """What a probe met: None when Redis decided (a mistake is an answer too)."""
    try:
        call(words)
    except Exception as error:
        return error if _cannot_decide(error) else None
    return None


def _pool_exhausted(error: BaseException) -> bool:
    """A capped asyncio pool with no free connection: MaxConnectionsError where the
    asyncio pool raises it (redis-py 8), a plain ConnectionError with redis-py's own
    words before."""
    max_connections = getattr(redis.exceptions, "MaxConnectionsError", None)
    return ((max_connections is not None and isinstance(error, max_connections))
            or (type(error) is redis.exceptions.ConnectionError
                and str(error) == "Too many connections"))


async def _bounded(awaitable: Any, seconds: float) -> Any:
    """`awaitable`'s result; asyncio.TimeoutError after `seconds`."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # pragma: no cover - Python 3.9, 3.10


class _AsyncStore(_Store):
    """The transport of the asyncio stores: the client's commands within the store's
    timeout, the script's calls, the probe task."""

    _clients = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
    _probe_task: "asyncio.Task[None] | None" = None

    async def _run(self, *command: Any) -> Any:
        """One command's reply within the store's timeout; a capped pool's refusal of a
        connection is waited out, and is this call's failure alone at the deadline."""
        waited: List[bool] = []
        try:
            return await _bounded(self._command(command, waited), self.timeout)
        except asyncio.TimeoutError as error:
            if waited:
                raise _PoolExhausted("no connection of the pool came free within the "
                                     "store's timeout") from error
            raise redis.exceptions.TimeoutError(
                "Redis did not answer within the store's timeout") from error

    async def _command(self, command: Tuple[Any, ...], waited: List[bool]) -> Any:
        while True:
            try:
                return await self.client.execute_command(*command)
            except redis.exceptions.ConnectionError as error:
                if not _pool_exhausted(error):
                    raise
                waited.append(True)
                await asyncio.sleep(0.001)

    async def _call(self, words: Sequence[Any]) -> Any:
        """RedisLimiter._call, awaited."""
        try:
            return await self._run("EVALSHA", self._sha, *words)
        except redis.exceptions.NoScriptError:
            return await self._run("EVAL", self._script, *words)

    def _start_probe(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - a decision is always awaited in a loop
            self._availability.stopped()
            return
        self._probe_task = loop.create_task(
            _probe_task(weakref.ref(self), self._availability), name="cellrate.redis probe")

    async def aclose(self) -> None:
        """Stops the probe of a store that Redis failed (it stops by itself once Redis
        decides again, when the store is collected, or with its event loop)."""
        task, self._probe_task = self._probe_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


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


async def _probe_task(store_ref: "weakref.ref[_AsyncStore]",
                      availability: _Availability) -> None:
    """_probe_thread, as an asyncio task."""
    delay: float | None = availability.backoff
    try:
        while delay is not None:
            await asyncio.sleep(delay)
            store = store_ref()
            if store is None:
                return
            try:
                await store._call(store._probe_words)
                error: Exception | None = None
            except Exception as failure:
                error = failure if _cannot_decide(failure) else None
            delay = availability.probed(error)
            del store
    finally:
        availability.stopped()

# The concurrency limits' script: its modes (ARGV[1]), the name of a limit given none,
# and what a store without a lease says.
COUNT, ACQUIRE, RELEASE = (_HOLD_PROTOCOL[mode].encode() for mode in ("COUNT", "ACQUIRE", "RELEASE"))
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
        self._open_store(client, prefix, on_error, timeout)
        if lease is None:
            raise invalid_type("lease", "lease " + _HOLD_PROTOCOL["LEASE_REQUIRED"])
        # the core's checks of a concurrency limit, and its lease in ns
        lease_ns = cast(int, _check_hold(limit, None, 1, lease))
        if name is not None:
            _check_name(name)
        #: The units that may be held at once, per key.
        self.limit: int = int(limit)
        #: Seconds after which a holding not released is given back.
        self.lease: float = lease_ns / 1e9
        #: The name of the limit's keys: given, or DEFAULT_NAME and the limit.
        self.name: str = name if name is not None else f"{_HOLD_PROTOCOL['DEFAULT_NAME']}:{limit}"
        self._key_prefix = f"{prefix}{self.name}".encode()
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
