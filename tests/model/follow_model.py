"""Reference model of following a provider (docs/design.md §18).

Written from the contract and the fields' own specifications (RFC 9110's
Retry-After and HTTP-date, RFC 3339, RFC 8941 Structured Fields with RFC
9651's dates and display strings, draft-ietf-httpapi-ratelimit-headers 06 to
11, the x-ratelimit-* and anthropic-ratelimit-* families), in exact Python
integers and fractions, sharing no code with the C core.

What a response says of a quota is a list of bounds (remaining, within_ns):
at most `remaining` more units in [now, now + within_ns). A follow makes a
key's state the least strict one (gcra: found by search over the TAT) that
leaves no more than `remaining` units now and, for a wait (remaining 0), none
until its end; never less strict than it was. The window algorithms keep a
bound within the key's window, and a wait beyond it fills every window up to
the one holding its last instant.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Optional

import catalogue_model as catalogue
import gcra_model as gcra
from gcra_model import HORIZON_NS, INT64_MAX

SECOND = 10**9
MAX_WAIT_NS = 3600 * SECOND  # CR_FOLLOW_MAX_NS
MAX_BOUNDS = 8  # CR_BOUNDS_MAX
DEBT_MAX_NS = HORIZON_NS
QUOTAS = ("requests", "tokens")
FRACTION_DIGITS_MAX = 18

Bound = tuple[int, int]


# --------------------------------------------------------------------------
# Numbers


def count(text: str) -> Optional[int]:
    """1*DIGIT, at most 2**63 - 1."""
    if not re.fullmatch(r"[0-9]+", text):
        return None
    value = int(text)
    return value if value <= INT64_MAX else None


def decimal_ns(text: str, unit_ns: int) -> Optional[int]:
    """DIGITS ["." DIGITS] or "." DIGITS (some digit), times unit_ns, rounded up."""
    match = re.fullmatch(r"([0-9]*)(?:\.([0-9]*))?", text)
    if not match or not (match[1] or match[2]):
        return None
    whole, fraction = match[1], match[2] or ""
    if whole and int(whole) > INT64_MAX or len(fraction) > FRACTION_DIGITS_MAX:
        return None
    value = Fraction(int(whole or "0")) + Fraction(int(fraction or "0"), 10 ** len(fraction))
    ns = math.ceil(value * unit_ns)
    return ns if ns <= INT64_MAX else None


GO_UNITS = {"ns": 1, "us": 1000, "\u00b5s": 1000, "\u03bcs": 1000, "ms": 10**6,
            "s": SECOND, "m": 60 * SECOND, "h": 3600 * SECOND}


def duration_ns(text: str) -> Optional[int]:
    """A Go duration (one or more number-unit pairs), or a bare decimal in seconds."""
    bare = decimal_ns(text, SECOND)
    if bare is not None:
        return bare
    raw = text.encode("utf-8", "surrogateescape")
    units = sorted(((name.encode(), ns) for name, ns in GO_UNITS.items()),
                   key=lambda unit: -len(unit[0]))
    total, at = 0, 0
    if not raw:
        return None
    while at < len(raw):
        start = at
        while at < len(raw) and raw[at:at + 1] in b"0123456789.":
            at += 1
        for name, unit_ns in units:
            if raw.startswith(name, at):
                part = decimal_ns(raw[start:at].decode(), unit_ns)
                if part is None:
                    return None
                total += part
                if total > INT64_MAX:
                    return None
                at += len(name)
                break
        else:
            return None
    return total


# --------------------------------------------------------------------------
# Times


MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
LONG_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def civil_ns(year: int, month: int, day: int, hour: int, minute: int, second: int
             ) -> Optional[int]:
    """Unix ns of a valid UTC date and time (second 60 allowed), from 1970 to 2**63 ns."""
    if not (1 <= month <= 12) or year < 1970:
        return None
    if not (1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    if hour > 23 or minute > 59 or second > 60:
        return None
    days = (calendar.timegm((year, month, day, 0, 0, 0)) // 86400)
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    if seconds * SECOND > INT64_MAX:
        return None
    return seconds * SECOND


_CLOCK = r"([0-9]{2}):([0-9]{2}):([0-9]{2})"
_MONTH = "(" + "|".join(MONTHS) + ")"


def http_date_ns(text: str, realtime_ns: Callable[[], int]) -> Optional[int]:
    """RFC 9110 HTTP-date: IMF-fixdate, rfc850-date, asctime-date."""
    imf = re.fullmatch(r"(?:" + "|".join(DAYS) + r"), ([0-9]{2}) " + _MONTH + r" ([0-9]{4}) "
                       + _CLOCK + " GMT", text)
    if imf:
        day, month, year, hh, mm, ss = imf.groups()
        return civil_ns(int(year), MONTHS.index(month) + 1, int(day), int(hh), int(mm), int(ss))
    asctime = re.fullmatch(r"(?:" + "|".join(DAYS) + r") " + _MONTH + r" ( [0-9]|[0-9]{2}) "
                           + _CLOCK + r" ([0-9]{4})", text)
    if asctime:
        month, day, hh, mm, ss, year = asctime.groups()
        return civil_ns(int(year), MONTHS.index(month) + 1, int(day.strip()), int(hh), int(mm),
                        int(ss))
    rfc850 = re.fullmatch(r"(?:" + "|".join(LONG_DAYS) + r"), ([0-9]{2})-" + _MONTH
                          + r"-([0-9]{2}) " + _CLOCK + " GMT", text)
    if rfc850:
        day, month, short, hh, mm, ss = rfc850.groups()
        # the latest year with these two digits not more than 50 years after now
        this_year = 1970 + realtime_ns() // SECOND // 31556952
        year = next(y for y in range(this_year + 50, this_year - 60, -1) if y % 100 == int(short))
        return civil_ns(year, MONTHS.index(month) + 1, int(day), int(hh), int(mm), int(ss))
    return None


def rfc3339_ns(text: str) -> Optional[int]:
    match = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]" + _CLOCK
                         + r"(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})", text)
    if not match:
        return None
    year, month, day, hh, mm, ss, fraction, zone = match.groups()
    local = civil_ns(int(year), int(month), int(day), int(hh), int(mm), int(ss))
    if local is None:
        return None
    fraction_ns = 0
    if fraction:
        fraction_ns = decimal_ns(fraction, SECOND)
        if fraction_ns is None:
            return None
    offset = 0
    if zone not in ("Z", "z"):
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            return None
        offset = (oh * 3600 + om * 60) * (-1 if zone[0] == "-" else 1)
    utc = local // SECOND - offset
    if utc < 0 or utc * SECOND + fraction_ns > INT64_MAX:
        return None
    return utc * SECOND + fraction_ns


# --------------------------------------------------------------------------
# Structured Fields (RFC 8941 §4.2, and RFC 9651's Date and Display String)


class SFError(Exception):
    pass


@dataclass
class Item:
    kind: str  # integer decimal string token bytes boolean date display
    value: object
    params: dict


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self) -> str:
        ch = self.peek()
        if not ch:
            raise SFError("end")
        self.i += 1
        return ch

    def spaces(self) -> None:
        while self.peek() == " ":
            self.i += 1

    def ows(self) -> None:
        while self.peek() in (" ", "\t") and self.peek():
            self.i += 1

    def bare(self) -> tuple[str, object]:
        ch = self.peek()
        if ch == "-" or ch.isdigit() and ch.isascii():
            return self.number()
        if ch == '"':
            return "string", self.string()
        if ch == "*" or (ch.isascii() and ch.isalpha()):
            start = self.i
            self.i += 1
            while self.peek() and (self.peek().isascii() and (self.peek().isalnum())
                                   or self.peek() in "!#$%&'*+-.^_`|~:/"):
                self.i += 1
            return "token", self.s[start:self.i]
        if ch == ":":
            self.i += 1
            start = self.i
            while self.peek() != ":":
                c = self.take()
                if not (c.isascii() and c.isalnum() or c in "+/="):
                    raise SFError("bytes")
            value = self.s[start:self.i]
            self.i += 1
            return "bytes", value
        if ch == "?":
            self.i += 1
            c = self.take()
            if c not in "01":
                raise SFError("boolean")
            return "boolean", c == "1"
        if ch == "@":
            self.i += 1
            kind, value = self.number()
            if kind != "integer":
                raise SFError("date")
            return "date", value
        if ch == "%":
            self.i += 1
            if self.take() != '"':
                raise SFError("display")
            while self.peek() != '"':
                c = self.take()
                if c == "%":
                    for _ in range(2):
                        h = self.take()
                        if h not in "0123456789abcdef":
                            raise SFError("display")
                elif not (0x20 <= ord(c) <= 0x7E):
                    raise SFError("display")
            self.i += 1
            return "display", None
        raise SFError("item")

    def number(self) -> tuple[str, object]:
        match = re.compile(r"(-?)([0-9]+)(?:\.([0-9]*))?").match(self.s, self.i)
        if not match:
            raise SFError("number")
        sign, whole, fraction = match.groups()
        if fraction is None:
            if len(whole) > 15:
                raise SFError("integer")
            self.i = match.end()
            return "integer", int(sign + whole)
        if len(whole) > 12 or not (1 <= len(fraction) <= 3):
            raise SFError("decimal")
        self.i = match.end()
        return "decimal", Fraction(sign + whole + "." + fraction)

    def string(self) -> str:
        self.take()
        out = []
        while True:
            c = self.take()
            if c == "\\":
                n = self.take()
                if n not in '"\\':
                    raise SFError("escape")
                out.append("\\" + n)  # kept as written: the canonical form
            elif c == '"':
                return "".join(out)
            elif not (0x20 <= ord(c) <= 0x7E):
                raise SFError("string")
            else:
                out.append(c)

    def key(self) -> str:
        match = re.compile(r"[a-z*][a-z0-9_.*-]*").match(self.s, self.i)
        if not match:
            raise SFError("key")
        self.i = match.end()
        return match.group()

    def params(self) -> dict:
        params: dict = {}
        while self.peek() == ";":
            self.i += 1
            self.spaces()
            name = self.key()
            value: tuple[str, object] = ("boolean", True)
            if self.peek() == "=":
                self.i += 1
                value = self.bare()
            params.pop(name, None)
            params[name] = value
        return params

    def member(self) -> Optional[Item]:
        """An item, or None for an inner list (read and dropped)."""
        if self.peek() == "(":
            self.i += 1
            while True:
                self.spaces()
                if self.peek() == ")":
                    self.i += 1
                    self.params()
                    return None
                self.bare()
                self.params()
                if self.peek() not in (" ", ")") or not self.peek():
                    raise SFError("inner list")
        kind, value = self.bare()
        return Item(kind, value, self.params())

    def separator(self) -> bool:
        """After a member: True if another follows."""
        self.ows()
        if self.i == len(self.s):
            return False
        if self.take() != ",":
            raise SFError("comma")
        self.ows()
        if self.i == len(self.s):
            raise SFError("trailing comma")
        return True


def sf_list(text: str) -> Optional[list]:
    parser = _Parser(text)
    parser.spaces()
    members: list = []
    try:
        more = parser.i < len(text)
        while more:
            members.append(parser.member())
            more = parser.separator()
    except SFError:
        return None
    return members


def sf_dictionary(text: str) -> Optional[list]:
    parser = _Parser(text)
    parser.spaces()
    members: list = []
    try:
        more = parser.i < len(text)
        while more:
            name = parser.key()
            if parser.peek() == "=":
                parser.i += 1
                member = parser.member()
            else:
                member = Item("boolean", True, parser.params())
            members.append((name, member))
            more = parser.separator()
    except SFError:
        return None
    return members


# --------------------------------------------------------------------------
# Reading a response


def ascii_lower(name: str) -> str:
    return name.translate({c: c + 32 for c in range(ord("A"), ord("Z") + 1)})


class Reading:
    def __init__(self, fields, status: int, quota: str, realtime_ns: Optional[int]) -> None:
        self.fields = [(ascii_lower(name), value.strip(" \t")) for name, value in fields]
        self.status, self.quota, self.realtime_ns = status, quota, realtime_ns
        self.bounds: list[Bound] = []

    def now(self) -> int:
        if self.realtime_ns is None:
            raise LookupError("an absolute time needs the realtime clock")
        return self.realtime_ns

    def until(self, at_ns: Optional[int]) -> Optional[int]:
        if at_ns is None or at_ns <= self.now():
            return None
        return at_ns - self.now()

    def add(self, remaining: int, within_ns: int) -> None:
        within_ns = min(within_ns, MAX_WAIT_NS)
        if len(self.bounds) < MAX_BOUNDS:
            self.bounds.append((remaining, within_ns))
        else:
            r, w = self.bounds[-1]
            self.bounds[-1] = (min(r, remaining), max(w, within_ns))


def _policy_unit(reading: Reading, name: str):
    """(kind, value) of the qu of the last RateLimit-Policy item named `name`,
    ("string", "requests") when it has none or there is none."""
    unit: tuple = ("string", "requests")
    for field, value in reading.fields:
        if field != "ratelimit-policy":
            continue
        for item in sf_list(value) or []:
            if item is not None and item.kind == "string" and item.value == name:
                unit = item.params.get("qu", ("string", "requests"))
    return unit


def _service_limits(reading: Reading, value: str) -> None:
    items = sf_list(value)
    if items is not None:
        for item in items:
            if item is None or item.kind != "string":
                continue
            r = item.params.get("r")
            if r is None or r[0] != "integer" or r[1] < 0:
                continue
            t = item.params.get("t")
            within = 0
            if t is not None and t[0] == "integer" and 0 <= t[1] and t[1] * SECOND <= INT64_MAX:
                within = t[1] * SECOND
            kind, unit = _policy_unit(reading, item.value)
            if kind == "string" and unit == reading.quota:
                reading.add(r[1], within)
        return
    members = sf_dictionary(value)
    if members is None:
        return
    remaining = reset = None
    for name, member in members:
        ok = member is not None and member.kind == "integer" and member.value >= 0
        if name == "remaining":
            remaining = member.value if ok else None
        elif name == "reset":
            reset = member.value if ok else None
    if remaining is None:
        return
    if reading.quota == "requests":
        reading.add(remaining, reset * SECOND if reset is not None and reset * SECOND <= INT64_MAX
                    else 0)


def _retry_after(reading: Reading, value: str) -> Optional[int]:
    wait = decimal_ns(value, SECOND)
    if wait is not None:
        return wait
    if value and not value[0].isdigit():
        return reading.until(http_date_ns(value, reading.now))
    return None


def _generic_reset(reading: Reading, value: str) -> Optional[int]:
    number = count(value)
    if number is not None and number >= 10**12:
        return reading.until(number * 10**6) if number * 10**6 <= INT64_MAX else None
    seconds = decimal_ns(value, SECOND)
    if seconds is not None and seconds >= 10**9 * SECOND:
        return reading.until(seconds)
    return duration_ns(value)


FAMILIES: list[tuple[str, str, str, Callable]] = [
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests", "requests",
     lambda reading, value: duration_ns(value)),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens", "tokens",
     lambda reading, value: duration_ns(value)),
    ("x-ratelimit-remaining", "x-ratelimit-reset", "requests", _generic_reset),
    ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset", "requests",
     lambda reading, value: reading.until(rfc3339_ns(value))),
    ("anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset", "tokens",
     lambda reading, value: reading.until(rfc3339_ns(value))),
    ("ratelimit-remaining", "ratelimit-reset", "requests",
     lambda reading, value: (None if count(value) is None or count(value) * SECOND > INT64_MAX
                             else count(value) * SECOND)),
]


def read_signal(fields, status: int, quota: str, realtime_ns: Optional[int]) -> list[Bound]:
    """cr_signal_read: the bounds a response's fields say of `quota`, in the
    order: RateLimit fields as they come, the wait (retry-after-ms in the place
    of Retry-After), the families of FAMILIES in that order, a bare 429's."""
    assert quota in QUOTAS and (status == 0 or 100 <= status <= 599)
    reading = Reading(fields, status, quota, realtime_ns)
    applies = status in (0, 429, 503)
    remaining: dict[int, int] = {}
    reset: dict[int, int] = {}
    waits: dict[str, int] = {}
    for name, value in reading.fields:
        if name in ("retry-after", "retry-after-ms"):
            wait = (_retry_after(reading, value) if name == "retry-after"
                    else decimal_ns(value, 10**6))
            if wait is not None:
                waits[name] = max(waits.get(name, wait), wait)
            continue
        if name == "ratelimit":
            _service_limits(reading, value)
            continue
        for index, (remaining_name, reset_name, _, read_reset) in enumerate(FAMILIES):
            if name == remaining_name:
                number = count(value)
                if number is not None:
                    remaining[index] = min(remaining.get(index, number), number)
            elif name == reset_name:
                wait = read_reset(reading, value)
                if wait is not None:
                    reset[index] = max(reset.get(index, wait), wait)
    # the milliseconds, when they are said, in the place of the seconds
    wait = waits.get("retry-after-ms", waits.get("retry-after"))
    if applies and wait:
        reading.add(0, wait)
    for index, (_, _, family_quota, _) in enumerate(FAMILIES):
        if index in remaining and family_quota == quota:
            reading.add(remaining[index], reset.get(index, 0))
    # a 429 that carries none of these fields, valid or not: nothing is left now
    carries = any(name in ("retry-after", "retry-after-ms") or
                  name.startswith(("ratelimit", "x-ratelimit-", "anthropic-ratelimit-"))
                  for name, _ in reading.fields)
    if status == 429 and not carries and quota == "requests":
        reading.add(0, 0)
    return reading.bounds


# --------------------------------------------------------------------------
# The state a signal asks for


def ours(remaining: int, pending: int, share: float) -> int:
    return max(0, math.floor(Fraction(remaining) * Fraction(share)) - pending)


def gcra_unit_at(limit: gcra.Limit, tat: int, now: int, k: int) -> int:
    """When the k-th of units admitted one after the other, as early as they
    fit from `now`, is admitted, from state `tat`."""
    return max(now, max(tat, now) + k * limit.emission_ns - limit.emission_ns * limit.burst)


def gcra_follow(limit: gcra.Limit, tat: int, now: int, remaining: int, within: int) -> int:
    """The least state from which the unit after `remaining` comes no earlier
    than now + T (`remaining` left now), and for a wait (remaining 0) no
    earlier than now + within either."""
    due = now + (max(within, limit.emission_ns) if remaining == 0 else limit.emission_ns)
    if gcra_unit_at(limit, tat, now, remaining + 1) >= due:
        return tat
    lo, hi = max(tat, now), due + limit.emission_ns * limit.burst
    while lo < hi:
        mid = (lo + hi) // 2
        if gcra_unit_at(limit, mid, now, remaining + 1) >= due:
            hi = mid
        else:
            lo = mid + 1
    return max(tat, min(lo, now + DEBT_MAX_NS))


def window_follow(limit: catalogue.WindowLimit, counts, now: int, remaining: int,
                  within: int):
    P, rate = limit.window_ns, limit.rate
    last = now + max(within - 1, 0)
    window, prev, curr, _ = catalogue._seen(limit, counts, now)
    if limit.algorithm == "fixed_window":
        prev = 0
    if last >= (window + 1) * P and remaining == 0:
        target = max(last // P, window)
        if limit.algorithm == "fixed_window":
            full = catalogue.Counts(target, 0, max(curr, rate))
        else:
            full = catalogue.Counts(target, rate, rate)
        before = catalogue.pack(limit, counts)
        return full if catalogue.pack(limit, full) > before else counts
    until = now if remaining > 0 else min(last, (window + 1) * P - 1)
    elapsed = max(0, until - window * P)
    held = math.ceil(Fraction(prev * (P - elapsed), P)) if limit.algorithm == "sliding_window" \
        else 0
    if remaining >= rate or rate - held - remaining <= curr:
        return counts
    return catalogue.Counts(window, prev, rate - held - remaining)


def follow(limit, state, now: int, bounds: list[Bound], pending: int, share: float):
    """cr_follow: `limit` a gcra.Limit (state: the TAT) or a WindowLimit
    (state: Counts or None)."""
    for remaining, within in bounds:
        mine = ours(remaining, pending, share)
        within = min(within, MAX_WAIT_NS)
        if isinstance(limit, catalogue.WindowLimit):
            state = window_follow(limit, state, now, mine, within)
        else:
            state = gcra_follow(limit, state, now, mine, within)
    return state


# --------------------------------------------------------------------------
# Retrying a refused request


def retry_wait(status: int, attempt: int, retries: int, backoff: int, max_backoff: int,
               random64: int) -> Optional[int]:
    """cr_retry_wait: the wait before try `attempt` after a 429 or 503, or
    None: exponential back-off, capped, half of it fixed and half spread."""
    if status not in (429, 503) or not 1 <= attempt <= retries:
        return None
    if retries < 0 or backoff <= 0 or max_backoff < backoff:
        return None
    doublings = min(attempt - 1, max_backoff.bit_length())  # enough to reach the cap
    wait = min(max_backoff, backoff * 2 ** doublings)
    fixed = wait // 2
    return fixed + (random64 * (wait - fixed + 1) >> 64)
