"""Several limits in one rate string, "100/day;10/hour" (as flask-limiter and
slowapi write them): where the faces that accept it (the web policy and
@cellrate.limit) split it. Each part is parsed by the core as a rate of its
own; the Limiter and KeyedLimiter constructors take one limit, and their
error for such a string names check_all."""

from __future__ import annotations

from typing import Any, List

from cellrate._errors import invalid

SEPARATOR = ";"


def split_rates(rate: Any) -> List[Any]:
    """The limits `rate` names: [rate] for one limit (a number, a store, a
    string without ';'), else the parts of the string."""
    if not isinstance(rate, str) or SEPARATOR not in rate:
        return [rate]
    parts = [part.strip() for part in rate.split(SEPARATOR)]
    if "" in parts:
        raise invalid("rate", f"rate: {rate!r} has an empty limit; several limits are "
                              "written '100/day;10/hour'")
    return parts
