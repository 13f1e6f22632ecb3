"""Reference model of a fleet share's member rules (docs/design/share.md).

Written from the design page alone, in Python floats (IEEE doubles, the
arithmetic the page states: `rate * s`, `floor(burst * s)`) and exact
integers, sharing no code with core/share.c. A member runs its local limiter
at its share of the fleet; each heartbeat reports what it asked and what it
holds, reads the script's reply and then applies, confirms or keeps its share.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import gcra_model as gcra
from gcra_model import HORIZON_NS

#: The script's FLOOR_DIVISOR: the smallest share among n members is 1 / (8 n).
FLOOR_DIVISOR = 8
#: A member's share before Redis first answers it.
COLD_START = 1 / FLOOR_DIVISOR
#: The slowest local limit: a unit per 2^61 ns (the core refuses beyond 2^62).
SLOWEST_NS = 2**61
#: A demand not known (as much as it may).
UNKNOWN = -1.0
#: The largest count a counter reports (saturated).
COUNT_MAX = 2**63 - 1

OUTCOMES = ("answered", "confirmed", "unavailable", "refused", "left")


def fraction(share: float) -> float:
    """A share as a fraction of the fleet: NaN and below 0 are 0, above 1 is 1."""
    if share > 1:
        return 1.0
    return share if share > 0 else 0.0


@dataclass(frozen=True)
class Local:
    status: str
    rate: float = 0.0
    period: float = 0.0
    burst: int = 0
    emission_ns: int = 0


def local_limit(rate: float, period: float, burst: int, share: float) -> Local:
    """The local limit of `share` of the fleet (rate units per period, burst): rate * share
    per period, but at least a unit per 2^61 ns (or the fleet's rate, when it is slower:
    never more than the fleet); floor(burst * share), at least 1, at most the fleet's burst
    and at most what keeps T * burst within the horizon."""
    share = fraction(share)
    local_rate = rate * share
    slowest = min(period * 1e9 / SLOWEST_NS, rate)
    if local_rate < slowest:
        local_rate = slowest
    local_burst = min(burst, max(1, math.floor(burst * share)))
    status, emission, _ = gcra.limit_from_number(local_rate, period, 1)
    if status != "OK":
        return Local(status)
    local_burst = min(local_burst, HORIZON_NS // emission)
    status, emission, local_burst = gcra.limit_from_number(local_rate, period, local_burst)
    assert status == "OK"
    return Local("OK", local_rate, period, local_burst, emission)


def share_of_rate(fleet_rate: float, fleet_period: float, rate: float, period: float) -> float:
    """The fraction of the fleet a local limit of `rate` per `period` is."""
    return fraction((rate / period) / (fleet_rate / fleet_period))


def asked(admitted: int, refused: int, refunded: int, baseline: int) -> tuple[int, int]:
    """(units asked since `baseline`, the count now): admitted + refused - refunded (what
    was refunded was not used), at most COUNT_MAX; nothing when the count fell."""
    counted = min(COUNT_MAX, max(0, admitted + refused - refunded))
    return max(0, counted - baseline), counted


@dataclass(frozen=True)
class Report:
    demand: float
    held: float
    fleet_rate: float


def report(rate: float, period: float, asked_units: float, elapsed: float, known: bool,
           share: float, joined: bool) -> Report:
    """A heartbeat's numbers: the demand (units per second, at most the fleet's rate; UNKNOWN
    until known, and for an elapsed time or a count that is not a number >= 0, > 0), what
    the member holds (0 until joined) and the fleet's rate per second."""
    fleet_rate = rate / period
    demand = UNKNOWN
    if known and 0 < elapsed < math.inf and 0 <= asked_units < math.inf:
        demand = min(asked_units / elapsed, fleet_rate)
    return Report(demand, fraction(share) if joined else 0.0, fleet_rate)


_DECIMAL = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: Significant digits a reply's number may carry (%.17g writes 17).
REPLY_DIGITS_MAX = 40


def _fraction_text(text: str) -> float | None:
    if not _DECIMAL.fullmatch(text):
        return None
    mantissa = re.match(r"[0-9.]*", text).group(0).replace(".", "").lstrip("0")  # type: ignore[union-attr]
    if len(mantissa) > REPLY_DIGITS_MAX:
        return None
    value = float(text)  # correctly rounded
    return value if 0 <= value <= 1 else None


@dataclass(frozen=True)
class Reply:
    status: str
    share: float = 0.0
    members: int = 0
    target: float = 0.0


def read_reply(share: str, members: int, target: str) -> Reply:
    """The script's reply { share, members, target }: two fractions from 0 to 1 as decimal
    texts and at least one member; anything else is not the script's."""
    share_value, target_value = _fraction_text(share), _fraction_text(target)
    if share_value is None or target_value is None or members < 1:
        return Reply("E_SHARE_REPLY")
    return Reply("OK", share_value, members, target_value)


@dataclass(frozen=True)
class Step:
    share: float
    apply: bool
    confirm: bool


def after(outcome: str, share: float, joined: bool, held: float, answered: float) -> Step:
    """What a member does after a heartbeat's outcome (docs/design/share.md, "Faces")."""
    if outcome in ("answered", "confirmed"):
        new = fraction(answered)
        return Step(new, True, outcome == "answered" and new < held)
    if outcome == "unavailable":  # its last share again once joined, never more
        return Step(share, joined, False)
    assert outcome in ("refused", "left")
    return Step(0.0, True, False)
