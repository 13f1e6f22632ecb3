"""Several limits in one rate string, "100/day;10/hour" (as flask-limiter and
slowapi write them): where the faces that accept it (the web policy and
@cellrate.limit) read it, by the core's grammar (cr_parse_rates: the parts, at
most CR_RATES_MAX, each a rate of its own). The Limiter and KeyedLimiter
constructors take one limit, and their error for such a string names
check_all."""

from __future__ import annotations

from typing import Any, List

from cellrate import _cellrate


def split_rates(rate: Any) -> List[Any]:
    """The limits `rate` names: [rate] for one limit given as a number or a
    store, else the text of each part of the string, as the core reads it (or
    its refusal, naming `rate`)."""
    if not isinstance(rate, str):
        return [rate]
    return [text for _, _, text in _cellrate._parse_rates(rate)]
