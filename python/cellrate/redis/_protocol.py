"""The protocol of the Redis server scripts both faces send (redis/ in the repository,
this package's scripts/ folder once installed): each script's bytes and the settings
of its protocol paragraph, and the translation of redis-py's errors for the core,
whose rules (core/cellrate/redis.h) build each request and read each reply. The
stores of cellrate.redis and the fleet share (cellrate.share) build on it; private.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from importlib import resources
from typing import Any, Dict, Sequence, Tuple, Union, cast

import redis.crc

import cellrate
from cellrate._errors import invalid
from cellrate.redis import _clients


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


def _batch_script(wrapper: bytes, decide: bytes) -> bytes:
    """The batch script as both faces send it: batch.lua with its line '--@decide.lua'
    replaced by decide.lua's bytes (each decision runs the script a call alone runs)."""
    head, tail = wrapper.split(b"--@decide.lua\n", 1)
    return head + decide + tail


#: The batch script (check_many, coalesced decisions), byte for byte as the Lua module sends it.
BATCH_SCRIPT: bytes = _batch_script(_read_script("batch.lua"), SCRIPT)
BATCH_SHA = hashlib.sha1(BATCH_SCRIPT).hexdigest()


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

# The protocol's rules are the core's (core/cellrate/redis.h): a request's words, a
# reply's reading, what a failure means, the deny cache's and on_error's answers. This
# module passes redis-py's values to them and back.
_core = cellrate._cellrate
_CONSTANTS = _core._redis_protocol()

#: The largest tolerance (burst * emission interval) the script carries exactly, exclusive:
#: 9e15 ns, about 104 days. Larger limits are refused with an error naming burst.
MAX_TOLERANCE_NS: int = _CONSTANTS["MAX_TOLERANCE_NS"]

# The stores' options (their words, defaults and refusals): the core's table.
_OPTIONS = _core._options("RedisLimiter")
ON_ERROR: Tuple[str, ...] = _OPTIONS["on_error"]["words"]
DEFAULT_PREFIX: str = _OPTIONS["prefix"]["default"]

# The script's modes (its ARGV[1]), as the core's request builder takes them.
PEEK, CHECK, ALLOW, REFUND, CHARGE, TAKE = (
    _CONSTANTS[mode] for mode in ("PEEK", "CHECK", "ALLOW", "REFUND", "CHARGE", "TAKE"))
# peek, check and allow in a priority class (priority=): the class's name ends the request.
PEEK_CLASS, CHECK_CLASS, ALLOW_CLASS = (
    _CONSTANTS[mode] for mode in ("PEEK_CLASS", "CHECK_CLASS", "ALLOW_CLASS"))

#: The most decisions one batch script call decides (check_many and coalesced decisions
#: send a longer batch as several calls, in order): the core's.
BATCH_MAX: int = _CONSTANTS["BATCH_MAX"]

#: How far after now a charge can leave a gcra key's TAT (its debt bound beside the
#: limit's max_debt), in ns: 9e15 ns, about 104 days (the core's bound is beyond what
#: the script carries exactly). A charge past it is clipped there (Decision.clipped).
MAX_DEBT_NS: int = _CONSTANTS["MAX_DEBT_NS"]

# The concurrency limits' script: its modes (ARGV[1]), the name of a limit given none,
# and what a store without a lease says.
COUNT, ACQUIRE, RELEASE = (_HOLD_PROTOCOL[mode].encode() for mode in ("COUNT", "ACQUIRE", "RELEASE"))

# While Redis cannot decide, calls answer by on_error without trying it, and a
# probe (a thread, or an asyncio task) tries it after a delay that doubles
# from FIRST_BACKOFF_S up to MAX_BACKOFF_S (the core's _redis_backoff), until it
# decides again.
FIRST_BACKOFF_S: float = _CONSTANTS["FIRST_BACKOFF_S"]
MAX_BACKOFF_S: float = _CONSTANTS["MAX_BACKOFF_S"]

# on_error="fallback": the key of the fallback's store (no Redis key can be it) that
# a process finding Redis back charges, so that the other processes of its region go
# back at once rather than each at its own probe (_RedisLimit._outage).
BACK_KEY: bytes = _CONSTANTS["BACK_KEY"]

#: The first words of the Redis error replies that mean "Redis cannot decide
#: now" (full, busy with another script, loading, a read-only replica, failing
#: over): answered by on_error like an unreachable server. Any other error reply
#: (WRONGTYPE, a script error) is a mistake, raised as RedisUnavailable whatever
#: on_error says. The core holds them for both faces.
UNAVAILABLE_REPLIES: Tuple[str, ...] = _CONSTANTS["UNAVAILABLE_REPLIES"]


def _reply_word(error: BaseException) -> str:
    """The first word of the error reply behind `error` ("OOM", "WRONGTYPE", ...), as
    its client library reports it."""
    word = getattr(error, "status_code", None) or _clients.STRIPPED.get(type(error))
    return word if word else str(error).split(" ", 1)[0]


def _failure(error: BaseException) -> Tuple[str, str | None]:
    """What a failure means (the core's classification): "cannot_decide" (on_error
    answers), "mistake", "wrong_algorithm" (with its words), "cross_slot" or
    "no_script". A failure that is no reply (a client library's transport exceptions,
    asyncio's timeout, the socket's) cannot decide."""
    if isinstance(error, _clients.RESPONSE_ERRORS):
        return _core._redis_classify(_reply_word(error), str(error))
    transport = isinstance(error, (_clients.TRANSPORT_ERRORS, asyncio.TimeoutError, OSError))
    return ("cannot_decide" if transport else "mistake"), None


def _cannot_decide(error: BaseException) -> bool:
    """True when Redis cannot decide now (on_error answers), False for a mistake
    (raised as RedisUnavailable)."""
    return _failure(error)[0] == "cannot_decide"

Key = Union[str, bytes]


def _default_name(limit: Any) -> str:
    """The name of a limit given none: the signature the script records with each
    value, "<algorithm>:<tolerance_ns>:<burst>" (the core's), so that two limits without
    a name never share a key, and the keys are those of the layout before names."""
    return _core._redis_signature(limit)


def _raise_mistake(error: Exception, keys: Sequence[bytes] = ()) -> None:
    """An error reply that is an argument mistake, raised as one: a key held under another
    algorithm (InvalidArgument naming algorithm), keys in several Cluster slots (CROSSSLOT,
    naming items); anything else returns."""
    kind, words = _failure(error)
    if kind == "wrong_algorithm":
        raise invalid("algorithm", cast(str, words)) from error
    if kind == "cross_slot":
        raise _slots_differ(keys) from error


def _slots_differ(keys: Sequence[bytes]) -> Exception:
    """The mistake of one call's keys in several Redis Cluster hash slots, naming each
    key and its slot (the client's own rule, redis.crc.key_slot) in the core's words."""
    return invalid("items", _core._redis_slots_message(
        list(keys), [redis.crc.key_slot(key) for key in keys]))
