"""Several limits in one rate string, "100/day;10/hour" or
"100/minute;1000000/month" (as flask-limiter and slowapi write them): where
the faces that accept it (the web policy and @cellrate.limit) read it, by the
core's grammar (cr_parse_rates: the parts, at most CR_RATES_MAX, each a rate
of its own or, by its unit, a calendar quota). The Limiter and KeyedLimiter
constructors take one limit, and their error for such a string names
check_all."""

from __future__ import annotations

from typing import Any, List, Tuple

from cellrate import _cellrate


def split_rates(rate: Any, zoned: bool = False) -> List[Tuple[Any, bool]]:
    """The limits `rate` names, each with whether it is a calendar quota:
    [(rate, False)] for one limit given as a number or a store, else the text
    of each part of the string, as the core reads it (or its refusal, naming
    `rate`). zoned: a zone was given (tz=), so days and weeks are calendar
    periods too."""
    if not isinstance(rate, str):
        return [(rate, False)]
    return [(text, calendar is not None)
            for _, _, text, calendar in _cellrate._parse_rates(rate, zoned)]


def part_options(calendar: bool, tz: str | None, burst: int | None) -> dict[str, Any]:
    """The constructor's options for a part: a calendar quota's algorithm and
    zone, or a rate's burst."""
    if calendar:
        return {"algorithm": "calendar", "tz": tz} if tz is not None else {"algorithm": "calendar"}
    return {"burst": burst}
