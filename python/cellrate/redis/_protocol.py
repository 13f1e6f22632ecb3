"""The protocol of the Redis server scripts both faces send (redis/ in the repository,
this package's scripts/ folder once installed): each script's bytes and the settings
of its protocol paragraph, the words of a request, the reading of a reply and of an
error reply, the checks of a name. The stores of cellrate.redis and the fleet share
(cellrate.share) build on it; private.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from importlib import resources
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Tuple, Union

import redis
import redis.crc
import redis.exceptions

import cellrate
from cellrate._errors import invalid

if TYPE_CHECKING:
    from cellrate.redis import _RedisLimit


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

# The stores' options (their words, defaults and refusals): the core's table.
_OPTIONS = cellrate._cellrate._options("RedisLimiter")
ON_ERROR: Tuple[str, ...] = _OPTIONS["on_error"]["words"]
DEFAULT_PREFIX: str = _OPTIONS["prefix"]["default"]
# What a live change says of another algorithm (also the start of the script's reply
# for a key held under one).
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

# The concurrency limits' script: its modes (ARGV[1]), the name of a limit given none,
# and what a store without a lease says.
COUNT, ACQUIRE, RELEASE = (_HOLD_PROTOCOL[mode].encode() for mode in ("COUNT", "ACQUIRE", "RELEASE"))

# While Redis cannot decide, calls answer by on_error without trying it, and a
# probe (a thread, or an asyncio task) tries it after a delay that doubles
# from FIRST_BACKOFF_S up to MAX_BACKOFF_S, until it decides again.
FIRST_BACKOFF_S = float(_PROTOCOL["FIRST_BACKOFF_S"])
MAX_BACKOFF_S = float(_PROTOCOL["MAX_BACKOFF_S"])

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

Key = Union[str, bytes]


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
