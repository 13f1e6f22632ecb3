"""The reference model of calendar periods (docs/design.md §19), written from the
specification alone with Python's zoneinfo: an implementation of TZif and of the
POSIX footer rules that is not cellrate's.

A period of a zone is a run of local dates: a day, an ISO week (Monday to Sunday),
a month or a year, or a whole multiple of one, multiples aligned to 1970-01-01
(days), Monday 1969-12-29 (weeks), January of year 0 (months) and year 0 (years).
It starts at the first instant whose local time is midnight of its first date or
later: zoneinfo's reading of that local time with fold=0 (the earlier instant of a
repeated midnight; at a gap that skips midnight, the instant the gap ends). The
period holding an instant t is the one with start <= t < the next one's start.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

UNITS = ("day", "week", "month", "year")
EPOCH = dt.date(1970, 1, 1)
WEEK_ORIGIN = dt.date(1969, 12, 29)  # a Monday
UTC = dt.timezone.utc


def first_date(unit: str, count: int, k: int) -> dt.date:
    """The first local date of the k-th period."""
    if unit == "day":
        return EPOCH + dt.timedelta(days=k * count)
    if unit == "week":
        return WEEK_ORIGIN + dt.timedelta(weeks=k * count)
    if unit == "month":
        month = k * count
        return dt.date(month // 12, month % 12 + 1, 1)
    return dt.date(k * count, 1, 1)


def index_of(unit: str, count: int, date: dt.date) -> int:
    """The k of the period whose dates hold `date`."""
    if unit == "day":
        return (date - EPOCH).days // count
    if unit == "week":
        return (date - WEEK_ORIGIN).days // (7 * count)
    if unit == "month":
        return (date.year * 12 + date.month - 1) // count
    return date.year // count


def midnight(zone: ZoneInfo, date: dt.date) -> int:
    """The instant (s) a local date starts."""
    local = dt.datetime(date.year, date.month, date.day, tzinfo=zone, fold=0)
    return int(local.timestamp())


def bounds(zone: ZoneInfo, unit: str, count: int, now_ns: int) -> tuple[int, int]:
    """(start_ns, end_ns) of the period holding now_ns."""
    t = now_ns // 1_000_000_000
    local_date = dt.datetime.fromtimestamp(t, zone).date()
    k = index_of(unit, count, local_date)
    while True:
        start = midnight(zone, first_date(unit, count, k))
        end = midnight(zone, first_date(unit, count, k + 1))
        if t < start:
            k -= 1
        elif t >= end:
            k += 1
        else:
            return start * 1_000_000_000, end * 1_000_000_000


def transitions(zone: ZoneInfo, first_year: int, last_year: int) -> list[int]:
    """Every instant (s) in [first_year, last_year] at which the zone's offset changes."""
    start = int(dt.datetime(first_year, 1, 1, tzinfo=UTC).timestamp())
    stop = int(dt.datetime(last_year + 1, 1, 1, tzinfo=UTC).timestamp())

    def offset(t: int) -> dt.timedelta | None:
        return dt.datetime.fromtimestamp(t, zone).utcoffset()

    found = []
    step = 3600
    t, previous = start, offset(start)
    while t < stop:
        current = offset(t + step)
        if current != previous:
            lo, hi = t, t + step  # offset(lo) == previous != offset(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if offset(mid) == previous:
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
            previous = current
        t += step
    return found
