"""Reference model of the options every constructor takes (docs/design.md §3).

Written from the contract (docs/contract.md) alone: for each constructor, each
option's name, kind, the faces that take it, its range or words, its default
and the status whose message a refusal carries; and the judge of one value,
of a set of values (the relations between options), of an unknown name (the
near name suggested) and of a list of rates ("100/day;10/hour"). The core's
table (core/options.c) is checked against this one, row for row
(tests/vectors/options.txt), and every face constructs each constructor with
each vector's values.

A value is given to the judge as (type, value): the types are a face's values
seen from the core: "absent" (None, nil), "boolean", "integer" (a whole
number: Python int, a Lua integer or integral float), "number" (any other
number: Python float, a Lua float), "string", "function" (Python callable, a
Lua function), "table" (anything else).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import gcra_model

INT64_MAX = 2**63 - 1
INF = math.inf

# Every constructor's options, as each face spells them: Python keyword
# arguments, Lua fields of the options table.
FACES = ("both", "python", "lua")
KINDS = ("number", "integer", "boolean", "string", "word", "seconds", "path", "name",
         "function", "object", "refused")
VALUE_TYPES = ("absent", "boolean", "integer", "number", "string", "function", "table")

# A refused name suggests an option within this many edits (Levenshtein).
SUGGEST_EDITS = 2
# A policy name (and a Redis limit's): bytes of printable ASCII.
NAME_MAX = 64
# The most limits one rate string may name ("100/day;10/hour" is two).
RATES_MAX = 8


@dataclass(frozen=True)
class Option:
    name: str
    kind: str
    status: str
    faces: str = "both"
    default: object = None  # None: none (for "absent": the constructor's own)
    low: float = -INF  # numbers, integers and seconds: the range
    low_open: bool = False
    high: float = INF
    high_open: bool = False
    words: tuple[str, ...] = ()  # words: the words taken
    refuses: str = ""  # strings and names: the characters refused
    min_len: int = 0  # strings: the shortest
    or_function: bool = False  # a function is taken too
    required: bool = False  # absent is refused with the status
    binary: bool = False  # strings: any bytes (Python: bytes too)
    any_case: bool = False  # words: compared without case
    ns: bool = False  # seconds: at least 1 ns and below 2^62 ns once rounded to ns


def _number(name, status, low, low_open, high, high_open, **extra):
    return Option(name, "number", status, low=low, low_open=low_open, high=high,
                  high_open=high_open, **extra)


def _integer(name, status, low, high=INT64_MAX, **extra):
    return Option(name, "integer", status, low=low, high=high, **extra)


def _seconds(name, status, low, low_open, high, high_open, **extra):
    return Option(name, "seconds", status, low=low, low_open=low_open, high=high,
                  high_open=high_open, **extra)


def _boolean(name, status, **extra):
    return Option(name, "boolean", status, **extra)


# Options several constructors take, alike.
PERIOD = _number("period", "E_PERIOD", 0, True, INF, True)
BURST = _integer("burst", "E_BURST", 1)
ALGORITHM = Option("algorithm", "word", "E_ALGORITHM", default="gcra",
                   words=("gcra", "token_bucket", "fixed_window", "sliding_window"))
# in process, a calendar quota too (docs/design.md §19), with its zone
LOCAL_ALGORITHM = Option("algorithm", "word", "E_ALGORITHM", default="gcra",
                         words=ALGORITHM.words + ("calendar",))
TZ = Option("tz", "string", "E_TZ", min_len=1)
CLOCK = Option("clock", "word", "E_CLOCK", words=("fast", "monotonic", "realtime"))
SHARED = Option("shared", "path", "E_SHARED_PATH")
SHARED_MODE = _integer("shared_mode", "E_SHARED_MODE", 0, 0o777, default=0o600)
ON_CHANGE = Option("on_change", "word", "E_ON_CHANGE", default="apply", words=("apply", "refuse"))
MAX_COST = _integer("max_cost", "E_MAX_COST", 0)
MAX_DEBT = _integer("max_debt", "E_MAX_DEBT", 0)
CAPACITY = _integer("capacity", "E_CAPACITY", 1, 2**32)
KEYED_CAPACITY = _integer("capacity", "E_CAPACITY", 1, 2**32, default=100000)
LEASE = _seconds("lease", "E_LEASE", 0, True, INF, True, ns=True)
STORE_NAME = Option("name", "name", "E_STORE_NAME", refuses="{}:")
PREFIX = Option("prefix", "string", "E_PREFIX", default="cellrate:", refuses="{}")
ON_ERROR = Option("on_error", "word", "E_ON_ERROR", default="allow",
                  words=("allow", "deny", "raise"))
# a Redis rate limit's on_error, with its fallback (design/redis.md: Fallback)
LIMIT_ON_ERROR = Option("on_error", "word", "E_REDIS_ON_ERROR", default="allow",
                        words=("allow", "deny", "raise", "fallback"))
STORE_TIMEOUT = _seconds("timeout", "E_STORE_TIMEOUT", 0, True, INF, True, default=0.25,
                         faces="python")
WAIT_TIMEOUT = _seconds("timeout", "E_TIMEOUT", 0, False, INF, False, faces="python")
KEY_FUNCTION = Option("key", "function", "E_KEY_FUNCTION", faces="python")
BLOCK = _boolean("block", "E_BLOCK", default=True, faces="python")
PRIORITIES = Option("priorities", "object", "OK")  # the classes: the core's cr_priorities_set judges
PENALTY = Option("penalty", "object", "OK")  # the penalty: the core's cr_penalty_init judges
SYNC = Option("sync", "object", "OK")  # a region's msync interval: cr_limiter_set_sync judges
LIMITER_OPTIONS = (PERIOD, BURST, CLOCK, LOCAL_ALGORITHM, SHARED, SHARED_MODE, ON_CHANGE, MAX_COST,
                   MAX_DEBT, TZ, PRIORITIES, PENALTY)


def _python(option: Option) -> Option:
    return Option(**{**option.__dict__, "faces": "python"})


def _share(keyed: bool) -> tuple[Option, ...]:
    return (
        PERIOD, BURST,
        Option("name", "name", "E_FLEET_NAME", refuses="{}:", required=True),
        _seconds("interval", "E_INTERVAL", 0, True, INF, True, default=1.0),
        _seconds("ttl", "E_TTL", 0, True, INF, True),  # absent: TTL_INTERVALS intervals
        Option("member", "string", "E_MEMBER", min_len=1, refuses=":"),
        PREFIX,
        _seconds("timeout", "E_STORE_TIMEOUT", 0, True, INF, True, default=0.25),
        _boolean("background", "E_BACKGROUND", default=True, faces="python"),
        SHARED, SHARED_MODE, CLOCK, MAX_DEBT,
        *((KEYED_CAPACITY,) if keyed else ()),
        Option("max_cost", "refused", "E_SHARE_MAX_COST"),
        Option("algorithm", "refused", "E_SHARE_ALGORITHM"),
        Option("on_change", "refused", "E_SHARE_ON_CHANGE"),
        Option("plans", "refused", "E_PLANS_STORE"),
    )


# A share's ttl, absent: this many intervals.
TTL_INTERVALS = 3

CONSTRUCTORS: dict[str, tuple[Option, ...]] = {
    # the compiled ones: Python cellrate.Limiter(rate, ...), Lua cellrate.limiter(rate, opts)
    "Limiter": LIMITER_OPTIONS + (SYNC,),
    "KeyedLimiter": LIMITER_OPTIONS[:2] + (KEYED_CAPACITY,) + LIMITER_OPTIONS[2:]
    + (Option("plans", "object", "OK"), SYNC),  # the plans: the core's cr_plans_set judges
    "Limit": (PERIOD, BURST, LOCAL_ALGORITHM, MAX_DEBT, TZ, PRIORITIES),  # Lua: cellrate.limit_spec
    "reconfigure": (PERIOD, BURST, Option("algorithm", "word", "E_ALGORITHM",
                                          words=LOCAL_ALGORITHM.words), MAX_DEBT, TZ,
                    Option("plan", "object", "OK")),  # a name of the store's plans: it judges
    "Concurrency": (CAPACITY, SHARED, SHARED_MODE, LEASE,
                    _boolean("peak", "E_PEAK", default=False)),
    # the Redis stores: cellrate.redis.RedisLimiter (and AsyncRedisLimiter),
    # Lua require("cellrate.redis").limiter
    "RedisLimiter": (PERIOD, BURST, LOCAL_ALGORITHM, STORE_NAME, PREFIX, LIMIT_ON_ERROR,
                     Option("fallback", "object", "OK"),
                     _boolean("deny_cache", "E_DENY_CACHE", default=True, faces="python"),
                     STORE_TIMEOUT, MAX_COST, MAX_DEBT,
                     _boolean("coalesce", "E_REDIS_COALESCE", default=False, faces="python"),
                     Option("priorities", "object", "OK"),
                     Option("on_wipe", "word", "E_REDIS_ON_WIPE", default="refuse",
                            words=("refuse", "allow")),
                     Option("plans", "object", "OK"),  # the core's cr_plans_set judges
                     Option("penalty", "object", "OK"), TZ),
    "RedisConcurrency": (_seconds("lease", "E_STORE_LEASE", 0, True, INF, True, ns=True,
                                  required=True),
                         STORE_NAME, PREFIX, ON_ERROR, STORE_TIMEOUT),
    # the fleet shares: cellrate.share.ShareLimiter, Lua require("cellrate.share").limiter
    "ShareLimiter": _share(False),
    "KeyedShareLimiter": _share(True),
    # the web policy: Python cellrate.web.Policy (every adapter), Lua cellrate.nginx's opts
    "Policy": (
        Option("limit", "object", "OK", faces="python"),
        Option("routes", "object", "OK", faces="python"),
        KEY_FUNCTION,
        Option("key", "string", "E_KEY_OPTION", faces="lua", or_function=True),
        _integer("cost", "E_COST_FUNCTION", 0, default=1, faces="python", or_function=True),
        _integer("cost", "E_COST", 0, default=1, faces="lua"),
        _python(BURST), _python(MAX_COST), _python(MAX_DEBT),
        Option("shared", "path", "E_SHARED_DIRECTORY", faces="python"),
        Option("trusted_proxies", "object", "OK", faces="python"),
        Option("proxy_header", "word", "E_PROXY_HEADER", faces="python",
               default="X-Forwarded-For", words=("X-Forwarded-For", "Forwarded"), any_case=True),
        _integer("ipv4_prefix", "E_IPV4_PREFIX", 0, 32, default=32),
        _integer("ipv6_prefix", "E_IPV6_PREFIX", 0, 128, default=64),
        Option("exempt_paths", "object", "OK", faces="python"),
        Option("exempt_methods", "object", "OK", faces="python"),
        Option("exempt", "function", "E_EXEMPT", faces="python"),
        _integer("status", "E_STATUS", 400, 599, default=429),
        Option("body", "string", "E_BODY", binary=True),
        Option("content_type", "string", "E_CONTENT_TYPE"),
        Option("name", "name", "E_HEADER_NAME"),
        _boolean("legacy_headers", "E_LEGACY_HEADERS", default=False),
        _boolean("admitted_headers", "E_ADMITTED_HEADERS", default=False),
        _boolean("dry_run", "E_DRY_RUN", default=False),
        Option("now", "function", "E_NOW_FUNCTION", faces="python"),
        Option("charge", "function", "E_CHARGE_FUNCTION", faces="python"),
        Option("concurrency", "object", "OK", faces="python"),
        _seconds("wait", "E_WAIT", 0, False, INF, False, faces="lua"),
        Option("header", "string", "E_CHARGE_HEADER", faces="lua"),
        Option("variable", "string", "E_CHARGE_VARIABLE", faces="lua"),
        Option("priority", "string", "E_PRIORITY", or_function=True),
        Option("priorities", "object", "OK", faces="python"),
        _python(TZ),
        Option("plans", "object", "OK", faces="python"),
        Option("plan", "name", "E_PLAN", or_function=True),  # it names the RateLimit fields
        Option("client", "function", "E_NGINX_CLIENT", faces="lua"),
        _python(SYNC),  # the shared= directory's regions: their stores judge it
    ),
    # the decorators (Python): @cellrate.limit(rate, ...), @cellrate.concurrent(limit, ...)
    "limit": (_python(PERIOD), _python(BURST), _python(ALGORITHM), KEY_FUNCTION,
              _integer("cost", "E_COST_FUNCTION", 0, default=1, faces="python",
                       or_function=True),
              BLOCK, WAIT_TIMEOUT, Option("limiter", "object", "OK", faces="python"),
              Option("priority", "string", "E_PRIORITY", faces="python"),
              Option("priorities", "object", "OK", faces="python"),
              Option("plans", "object", "OK", faces="python"),
              Option("plan", "string", "E_PLAN", faces="python")),
    "concurrent": (_python(CAPACITY), KEY_FUNCTION,
                   _integer("cost", "E_HOLD_COST", 1, default=1, faces="python"),
                   BLOCK, WAIT_TIMEOUT, _python(SHARED), _python(LEASE),
                   Option("concurrency", "object", "OK", faces="python")),
}


def options_of(constructor: str, face: str) -> list[Option]:
    """The options `face` ("python" or "lua") takes, in the table's order."""
    return [option for option in CONSTRUCTORS[constructor] if option.faces in ("both", face)]


def find(constructor: str, face: str, name: str) -> Option | None:
    for option in options_of(constructor, face):
        if option.name == name:
            return option
    return None


def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def suggest(constructor: str, face: str, name: str) -> str | None:
    """The option nearest `name` within SUGGEST_EDITS edits (the first in the
    table's order among equals), or None."""
    best, best_distance = None, SUGGEST_EDITS + 1
    for option in options_of(constructor, face):
        distance = edit_distance(name, option.name)
        if distance < best_distance:
            best, best_distance = option.name, distance
    return best


# --------------------------------------------------------------------------
# Judging values


@dataclass(frozen=True)
class Outcome:
    outcome: str  # "OK", "TYPE" (a type the option never takes) or "VALUE"
    status: str  # "OK" or the status of the refusal
    value: tuple[str, object] = ("absent", None)  # OK: the value normalised (type, value)


def _refused(kind: str, option: Option) -> Outcome:
    return Outcome(kind, option.status)


def _in_range(option: Option, value: float) -> bool:
    if math.isnan(value):
        return False
    low_ok = value > option.low if option.low_open else value >= option.low
    high_ok = value < option.high if option.high_open else value <= option.high
    return low_ok and high_ok


def _text(value: bytes) -> bytes:
    return value


def judge(option: Option, value_type: str, value: object) -> Outcome:
    """One value of one option: its outcome, and the value normalised."""
    assert value_type in VALUE_TYPES, value_type
    if value_type == "absent":
        if option.required:
            return _refused("TYPE", option)
        if option.default is None:
            return Outcome("OK", "OK")
        kind = {bool: "boolean", int: "integer", float: "number", str: "string"}[
            type(option.default)]
        return Outcome("OK", "OK", (kind, option.default))
    kind = option.kind
    if kind == "refused":
        return _refused("VALUE", option)
    if kind == "object":
        return Outcome("OK", "OK", ("given", None))
    if value_type == "function":
        if kind == "function" or option.or_function:
            return Outcome("OK", "OK", ("given", None))
        return _refused("TYPE", option)
    if kind == "function":
        return _refused("TYPE", option)
    if kind in ("number", "seconds"):
        if value_type not in ("integer", "number"):
            return _refused("TYPE", option)
        number = float(value)  # type: ignore[arg-type]
        if not _in_range(option, number):
            return _refused("VALUE", option)
        if option.ns:
            status, ns = gcra_model.seconds_to_ns(number)
            if status != "OK" or ns < 1:
                return _refused("VALUE", option)
        return Outcome("OK", "OK", ("number", number))
    if kind == "integer":
        if value_type != "integer":
            return _refused("TYPE", option)
        integer = int(value)  # type: ignore[call-overload]
        if not option.low <= integer <= option.high:
            return _refused("VALUE", option)
        return Outcome("OK", "OK", ("integer", integer))
    if kind == "boolean":
        if value_type != "boolean":
            return _refused("TYPE", option)
        return Outcome("OK", "OK", ("boolean", value))
    if value_type != "string":
        return _refused("TYPE", option)
    text: bytes = value  # type: ignore[assignment]
    if kind == "word":
        for word in option.words:
            given = text.decode("latin-1")
            if given == word or (option.any_case and given.lower() == word.lower()):
                return Outcome("OK", "OK", ("string", word if not option.any_case else given))
        return _refused("VALUE", option)
    if kind == "path":
        if b"\0" in text:
            return _refused("VALUE", option)
        return Outcome("OK", "OK", ("given", None))
    if kind == "name":
        if not 1 <= len(text) <= NAME_MAX or any(not 0x20 <= byte <= 0x7E for byte in text):
            return _refused("VALUE", option)
    elif len(text) < option.min_len:
        return _refused("VALUE", option)
    if any(chr(byte) in option.refuses for byte in text):
        return _refused("VALUE", option)
    return Outcome("OK", "OK", ("string", text))


def judge_all(constructor: str, face: str,
              values: list[tuple[str, str, object]]) -> tuple[Outcome, dict[str, tuple[str, object]]]:
    """Several options of one constructor at once, [(name, type, value)]: the
    first refusal in the table's order, else the relations between options;
    and every option's normalised value (absent ones: their default)."""
    given = {name: (value_type, value) for name, value_type, value in values}
    normalised: dict[str, tuple[str, object]] = {}
    for option in options_of(constructor, face):
        outcome = judge(option, *given.get(option.name, ("absent", None)))
        if outcome.outcome != "OK":
            return outcome, {}
        normalised[option.name] = outcome.value
    # a region's mode without a region
    if "shared_mode" in given and given["shared_mode"][0] != "absent" and \
            "shared" in normalised and normalised["shared"][0] == "absent":
        return Outcome("VALUE", "E_SHARED_MODE_ALONE"), {}
    # a share's ttl: absent, TTL_INTERVALS intervals; and longer than one interval
    if "ttl" in normalised and "interval" in normalised:
        interval = float(normalised["interval"][1])  # type: ignore[arg-type]
        if normalised["ttl"][0] == "absent":
            normalised["ttl"] = ("number", TTL_INTERVALS * interval)
        if not float(normalised["ttl"][1]) > interval:  # type: ignore[arg-type]
            return Outcome("VALUE", "E_TTL_SHORT"), {}
    return Outcome("OK", "OK"), normalised


# --------------------------------------------------------------------------
# Which algorithms take a burst


def takes_burst(algorithm: str) -> bool:
    """gcra and token_bucket read a burst; the window algorithms refuse one
    (their amount is the rate: docs/design.md §7)."""
    return algorithm in ("gcra", "token_bucket")


# --------------------------------------------------------------------------
# A list of rates


@dataclass
class Rates:
    status: str
    # rate (a quota's amount), period (0 for a quota), text, calendar period
    # ("<count><unit>", "1month", for a quota's part; None for a rate)
    rates: list[tuple[float, float, str, str | None]] = field(default_factory=list)


# A calendar quota's periods (docs/design/calendar.md): the unit's words, and
# the most of each (about ten years).
PERIOD_WORDS = {
    "day": ("d", "day", "days"),
    "week": ("w", "wk", "wks", "week", "weeks"),
    "month": ("mo", "mon", "month", "months"),
    "year": ("y", "yr", "yrs", "year", "years"),
}
PERIOD_COUNT_MAX = {"day": 3660, "week": 522, "month": 120, "year": 10}
CALENDAR_AMOUNT_MAX = 2 ** 40


def period_unit(word: str) -> str | None:
    for unit, words in PERIOD_WORDS.items():
        if word.lower() in words:
            return unit
    return None


def parse_calendar_rate(text: str) -> tuple[str, int, str]:
    """A calendar quota's rate, "1000000/month": (status, amount, "<count><unit>")."""
    match = gcra_model._RATE_TEXT.fullmatch(text)
    if match is None:
        return "E_RATE_SYNTAX", 0, ""
    amount = gcra_model._number_value(match["rate"])
    count = 1.0 if match["count"] is None else gcra_model._number_value(match["count"])
    if amount is None or count is None:
        return "E_RATE_SYNTAX", 0, ""
    unit = period_unit(match["unit"])
    if unit is None or count != math.floor(count) or not 1 <= count <= PERIOD_COUNT_MAX[unit]:
        return "E_CALENDAR_PERIOD", 0, ""
    if amount != math.floor(amount) or not 1 <= amount <= CALENDAR_AMOUNT_MAX:
        return "E_CALENDAR_AMOUNT", 0, ""
    return "OK", int(amount), f"{int(count)}{unit}"


def is_calendar_part(text: str, zoned: bool) -> bool:
    """A part whose last word is a month or a year (zoned, a day or a week
    too) is a calendar quota's."""
    word = re.search(r"[A-Za-z]*$", text)
    unit = period_unit(word[0]) if word else None
    return unit in ("month", "year") or (zoned and unit in ("day", "week"))


def parse_rates(text: str, zoned: bool = False) -> Rates:
    """Several limits in one string, "100/day;10/hour" or
    "100/minute;1000000/month" (as flask-limiter and slowapi write them): each
    part a rate of gcra_model.parse_rate's grammar, or, when its unit is a
    calendar period (months and years; days and weeks with zoned), a
    calendar quota of parse_calendar_rate's; spaces around a part ignored; an
    empty part among several, or more than RATES_MAX parts, is refused; the
    first part refused gives its status (a string without ';' is one part);
    `zoned`: a zone was given, days and weeks count in it."""
    parts = text.split(";")
    if len(parts) > RATES_MAX:
        return Rates("E_RATE_TOO_MANY")
    found = Rates("OK")
    for part in parts:
        trimmed = part.strip(" ")
        if not trimmed and len(parts) > 1:
            return Rates("E_RATE_EMPTY")
        if is_calendar_part(trimmed, zoned):
            status, amount, period = parse_calendar_rate(trimmed)
            if status != "OK":
                return Rates(status)
            found.rates.append((float(amount), 0.0, trimmed, period))
            continue
        status, rate, seconds = gcra_model.parse_rate(trimmed)
        if status != "OK":
            return Rates(status)
        found.rates.append((rate, seconds, trimmed, None))
    return found
