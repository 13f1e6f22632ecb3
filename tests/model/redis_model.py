"""The reference model of the Redis store's protocol (docs/design.md §11), from its
specification alone: what a face sends to the server script (redis/decide.lua)
after EVALSHA and its SHA, the name of a key, how a reply reads, what an error
reply means, the answers of the deny cache and of on_error, the probe's back-off.

Independent of the C code (core/redis_protocol.c); make_vectors.py writes
tests/vectors/redis.txt from it, which the C tests, pytest and busted read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gcra_model import HORIZON_NS, NEVER, STATUSES

# The script's constants (its protocol paragraph's `local` lines say the same).
MAX_TOLERANCE_NS = 9 * 10**15  # a tolerance or window the script carries exactly: below
MAX_DEBT_NS = 9 * 10**15  # a gcra TAT at most this far after now after a charge
FIRST_BACKOFF_NS = 50 * 10**6
MAX_BACKOFF_NS = 10**9
DENY_CACHE_MAX_NS = 10**9  # the longest a kept refusal answers, whatever its wait
ALGORITHM_REPLY = "cellrate: algorithm:"
MODES = {"peek": 0, "check": 1, "allow": 2, "refund": 3, "charge": 4, "take": 5}
# The first words of the error replies that mean "Redis cannot decide now".
UNAVAILABLE_REPLIES = ("OOM", "BUSY", "LOADING", "READONLY", "MASTERDOWN", "NOREPLICAS",
                       "TRYAGAIN", "CLUSTERDOWN")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def message(name: str) -> str:
    return next(text for _, status, _, _, text in STATUSES if status == name)


@dataclass(frozen=True)
class Limit:
    """A limit as the core derives it (cr_limit): for windows, tolerance is the window
    and burst the rate."""

    algorithm: str
    emission_ns: int
    tolerance_ns: int
    burst: int
    max_debt: int


def signature(limit: Limit) -> str:
    """What the script writes with each value, and an unnamed limit's name."""
    return f"{limit.algorithm}:{limit.tolerance_ns}:{limit.burst}"


def key(prefix: bytes, name: bytes, of: bytes | None) -> bytes:
    """prefix + name + ':' + key; a concurrency limit without keys: prefix + name."""
    return prefix + name if of is None else prefix + name + b":" + of


@dataclass(frozen=True)
class Item:
    limit: Limit
    prefix: bytes
    name: bytes
    key: bytes


def crc16(data: bytes) -> int:
    """Redis Cluster's CRC16 (XMODEM), bit by bit."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def slot(key: bytes) -> int:
    """A key's hash slot: its hash tag's (between the first '{' and the next '}', when not
    empty), else the whole key's."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return crc16(key) & 0x3FFF


def _tag(x: int) -> bytes:
    return bytes(0x40 | (x >> shift) & 15 for shift in (12, 8, 4, 0))


def wipe_marker(of: bytes) -> bytes:
    """The wipe marker of the Redis key `of`: 'cellrate{' + the least tag of four letters
    '@'..'O' (0x40 | a hex digit) of the key's slot + '}', found by search."""
    target = slot(of)
    return b"cellrate{" + next(_tag(x) for x in range(1 << 16)
                                if crc16(_tag(x)) & 0x3FFF == target) + b"}"


def request(mode: str, cost: int, now_ns: int | None, items: list[Item],
            marked: bool = False) -> tuple[str, list[bytes]]:
    """('OK', the words after the SHA) or (a status name, []). `marked` (on_wipe="refuse"):
    the first item's wipe marker follows the keys."""
    if cost < 0:
        return ("E_MAX_COST" if mode == "take" else "E_COST"), []
    if now_ns is not None and not 0 <= now_ns < HORIZON_NS:
        return "E_NOW", []
    if not items or (MODES[mode] >= MODES["refund"] and len(items) != 1):
        return "E_ITEMS", []
    if any(item.limit.tolerance_ns >= MAX_TOLERANCE_NS for item in items):
        return "E_REDIS_TOLERANCE", []
    words = [b"%d" % (len(items) + marked)]
    words += [key(item.prefix, item.name, item.key) for item in items]
    if marked:
        words.append(wipe_marker(words[1]))
    words += [b"%d" % MODES[mode], b"%d" % cost]
    for item in items:
        limit = item.limit
        words += [limit.algorithm.encode(), b"%d" % limit.emission_ns,
                  b"%d" % limit.tolerance_ns, b"%d" % limit.burst]
    if mode == "charge":
        words.append(b"%d" % items[0].limit.max_debt)
    if now_ns is not None:
        words.append(b"%d" % now_ns)
    return "OK", words


# The most decisions of one batch script call (redis/batch.lua).
BATCH_MAX = 256


def batch(calls: list[tuple[str, int, list[Item]]], now_ns: int | None) -> tuple[str, list[bytes]]:
    """('OK', a batch's words after the batch script's SHA) or (a status name, []): every
    call's keys as KEYS (a marked call's wipe marker after its keys), then ARGV: the number
    of calls, per call its number of keys, its number of ARGV words and those words (the
    call's own request's)."""
    if not calls:
        return "E_ITEMS", []
    if len(calls) > BATCH_MAX:
        return "E_REDIS_BATCH", []
    requests = []
    for mode, cost, items in calls:
        # 'check+marker': the mode with the wipe marker (on_wipe='refuse'), as request
        status, words = request(mode.removesuffix("+marker"), cost, now_ns, items,
                                mode.endswith("+marker"))
        if status != "OK":
            return status, []
        requests.append(words)
    keys = [key for words in requests for key in words[1:1 + int(words[0])]]
    out = [b"%d" % len(keys), *keys, b"%d" % len(calls)]
    for words in requests:
        nkeys = int(words[0])
        argv = words[1 + nkeys:]
        out += [b"%d" % nkeys, b"%d" % len(argv), *argv]
    return "OK", out


def batch_reply(ncalls: int, is_list: bool, nelements: int) -> str:
    """A batch's reply: a list of one element per call."""
    return "OK" if is_list and ncalls > 0 and nelements == ncalls else "E_REDIS_REPLY"


@dataclass(frozen=True)
class Answer:
    allowed: bool = False
    remaining: int = 0
    retry_after_ns: int = 0
    reset_after_ns: int = 0
    limit: int = 0
    index: int = 0  # from 0
    clipped: bool = False
    count: int = 0  # take: units taken; refund: 1 when the state changed


def parse_integer(text: bytes) -> int | None:
    """A reply's decimal string: [-]digits within int64."""
    digits = text[1:] if text[:1] == b"-" else text
    if not digits or not digits.isdigit():
        return None
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else None


def read_reply(mode: str, reply: int | list, limits: list[Limit]) -> tuple[str, Answer | None]:
    """A reply: an integer, or a list of integers and decimal strings (bytes)."""
    bad = ("E_REDIS_REPLY", None)
    if not isinstance(reply, list):
        if mode == "allow" and reply == 1:
            return "OK", Answer(True, 0, 0, 0, limits[0].burst)
        if mode == "refund" and reply in (0, 1):
            return "OK", Answer(count=reply)
        if mode == "take" and reply >= 0:
            return "OK", Answer(count=reply)
        return bad
    fields = []
    for field in reply:
        value = parse_integer(field) if isinstance(field, bytes) else field
        if value is None:
            return bad
        fields.append(value)
    if mode in ("refund", "take") or len(fields) != (6 if mode == "charge" else 5):
        return bad
    allowed, remaining, retry, reset, index = fields[:5]
    if (allowed not in (0, 1) or remaining < 0 or retry < -1 or reset < 0
            or (allowed == 1 and retry != 0) or not 1 <= index <= len(limits)
            or (mode == "allow" and allowed == 1)):
        return bad
    clipped = False
    if mode == "charge":
        if fields[5] not in (0, 1):
            return bad
        clipped = fields[5] == 1
    return "OK", Answer(allowed == 1, remaining, NEVER if retry == -1 else retry, reset,
                        limits[index - 1].burst, index - 1, clipped)


def classify(word: str | None, text: str) -> tuple[str, int | None]:
    """What a failure means, and for a key held under another algorithm the offset of
    the mistake's words in `text` ("algorithm: ...")."""
    at = text.find(ALGORITHM_REPLY)
    if at >= 0:
        return "wrong_algorithm", at + len("cellrate: ")
    if not word or word in UNAVAILABLE_REPLIES:
        return "cannot_decide", None
    return {"CROSSSLOT": "cross_slot", "NOSCRIPT": "no_script"}.get(word, "mistake"), None


def slots_message(keys: list[bytes], slots: list[int]) -> str:
    """The words of E_REDIS_SLOTS, then each key once, quoted (bytes outside printable
    ASCII, and a backslash, as \\xNN), and its slot ("?": not known)."""
    named, seen = [], set()
    for of, slot in zip(keys, slots):
        if of in seen:
            continue
        seen.add(of)
        text = "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in of)
        named.append(f"'{text}' {'?' if slot < 0 else slot}")
    return message("E_REDIS_SLOTS") + " " + ", ".join(named)


@dataclass(frozen=True)
class Refusal:
    asked_ns: int
    cost: int
    remaining: int
    retry_after_ns: int
    reset_after_ns: int


def _cached(mode: str, nlimits: int, now_ns: int | None) -> bool:
    """The requests the deny cache answers and remembers: one limit, on the server's
    clock, a decision that commits nothing when refused (a charge commits whatever
    the state)."""
    return mode in ("peek", "check", "allow") and nlimits == 1 and now_ns is None


def remember(mode: str, nlimits: int, now_ns: int | None, cost: int, answer: Answer,
             asked_ns: int) -> Refusal | None:
    if not _cached(mode, nlimits, now_ns) or answer.allowed:
        return None
    if not 0 < answer.retry_after_ns < NEVER:
        return None
    return Refusal(asked_ns, cost, answer.remaining, answer.retry_after_ns, answer.reset_after_ns)


def recall(limit: Limit, refusal: Refusal, mode: str, nlimits: int, now_ns: int | None,
           cost: int, clock_ns: int) -> tuple[str, Answer | None]:
    """("recalled", the answer), ("ask", None) or ("expired", None)."""
    if not _cached(mode, nlimits, now_ns):
        return "ask", None
    aged = clock_ns - refusal.asked_ns
    if aged >= min(refusal.retry_after_ns, DENY_CACHE_MAX_NS):
        return "expired", None
    later = 0
    if cost != refusal.cost:
        if cost < refusal.cost or cost > limit.burst:
            return "ask", None
        if limit.algorithm in ("gcra", "token_bucket"):
            later = (cost - refusal.cost) * limit.emission_ns
        elif limit.algorithm != "fixed_window":
            return "ask", None
    return "recalled", Answer(False, refusal.remaining, refusal.retry_after_ns - aged + later,
                              max(refusal.reset_after_ns - aged, 0), limit.burst)


def unavailable(limit: Limit, allow: bool, cost: int, probe_in_ns: int) -> tuple[Answer, int]:
    """on_error's answer and a take's count: allow admits; deny refuses until the
    next probe, at least the first back-off."""
    if allow:
        return Answer(True, 0, 0, 0, limit.burst), cost
    wait = max(probe_in_ns, FIRST_BACKOFF_NS)
    return Answer(False, 0, wait, wait, limit.burst), 0


def backoff(previous_ns: int) -> int:
    return FIRST_BACKOFF_NS if previous_ns <= 0 else min(2 * previous_ns, MAX_BACKOFF_NS)


def fallback_check(on_error: str, given: bool) -> str:
    """on_error="fallback"'s option: a fallback given with another on_error is refused."""
    return "E_REDIS_FALLBACK_UNUSED" if given and on_error != "fallback" else "OK"


def nginx_items(count: int, redis: bool, client: bool) -> str:
    """A Redis limit in nginx: decided alone (`count` limits as one), with the option
    client; a limit kept in nginx takes no client. The first offence in that order."""
    if redis and count != 1:
        return "E_NGINX_REDIS_SEVERAL"
    if redis and not client:
        return "E_NGINX_CLIENT"
    if client and not redis:
        return "E_NGINX_CLIENT_UNUSED"
    return "OK"


def check_items(clients: list[int | None]) -> str:
    """A Redis check_all's items, each named by its client (None: not a pair of a Redis
    rate limiter and a key): at least one, every one a pair, all on the first's client;
    the first offence in order."""
    if not clients:
        return "E_REDIS_ITEMS"
    for client in clients:
        if client is None:
            return "E_REDIS_ITEMS"
        if client != clients[0]:
            return "E_REDIS_CLIENT"
    return "OK"


def check_change(named: bool, algorithm: str, given: str | None) -> str:
    """A live change: a limit without a name cannot; the algorithm stays."""
    if not named:
        return "E_REDIS_NAME_NEEDED"
    return "E_REDIS_ALGORITHM_KEPT" if given is not None and given != algorithm else "OK"


def fallback_args(algorithm: str, rate: float, burst: int, share: float
                  ) -> tuple[str, float, int | None]:
    """The arguments of the fallback limit that is `share` of a limit (its rate as given,
    its derived burst): the rate times share and the burst floor(burst * share), at least
    1; a window, its rate floor(rate * share), at least 1. A share outside (0, 1]:
    E_REDIS_FALLBACK."""
    if not 0 < share <= 1:
        return "E_REDIS_FALLBACK", 0.0, None
    if algorithm in ("gcra", "token_bucket"):
        return "OK", rate * share, max(1, math.floor(burst * share))
    return "OK", float(max(1, math.floor(rate * share))), None


def going_back(mode: str, cost: int, fallback_burst: int, held_remaining: int
               ) -> tuple[str, int, bool]:
    """A key decided locally going back to Redis: a check, allow or charge goes as a charge
    of cost plus what the local state holds (burst - remaining); a take or a refund (they
    cannot carry it) after the charge of what the local state holds alone, the cost
    returned that charge's; a peek as it is, the key still held."""
    if mode == "peek":
        return mode, cost, False
    owed = fallback_burst - min(max(held_remaining, 0), fallback_burst)
    if mode in ("take", "refund"):
        return "charge", owed, True
    if owed == 0:
        return mode, cost, True
    return "charge", min(cost + owed, 2**63 - 1), True
