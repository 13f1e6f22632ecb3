"""Priorities inside one limit: the reference model (docs/design/priorities.md).

Written from the rule, not from the C: a limit (gcra or token_bucket, T and
tau = T * burst in ns) may name classes, each with a reserve r in [0, 1), the
share of the burst the class may not spend. A class's reserve in ns is
floor(r * tau + 1/2), r read exactly as its binary64 value (Fraction), ties
up. A class decides as GCRA (docs/design.md §1) with tau replaced by tau - reserve_ns:
it admits only when the new TAT leaves at least its reserve as room
(t >= new_tat - (tau - reserve_ns)); a refusal writes nothing. Integers only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

NEVER = 2**63 - 1
PRIORITIES_MAX = 8
NAME_MAX = 31  # bytes of a class name


def reserve_ns(tolerance_ns: int, reserve: float) -> int:
    """floor(reserve * tau + 1/2), exactly."""
    return math.floor(Fraction(reserve) * tolerance_ns + Fraction(1, 2))


def check_table(classes: list[tuple[bytes, float]], window: bool = False) -> str:
    """The status cr_priorities_set gives for `classes` (a list: order as given)."""
    if not 1 <= len(classes) <= PRIORITIES_MAX:
        return "E_PRIORITIES"
    seen: set[bytes] = set()
    for name, reserve in classes:
        if not 1 <= len(name) <= NAME_MAX or b"\0" in name or name in seen:
            return "E_PRIORITIES"
        seen.add(name)
        if not (reserve >= 0 and reserve < 1):  # NaN fails both
            return "E_PRIORITIES_RESERVE"
    if not any(reserve == 0 for _, reserve in classes):
        return "E_PRIORITIES_DEFAULT"
    if window:
        return "E_PRIORITIES_ALGORITHM"
    return "OK"


def sorted_table(classes: list[tuple[bytes, float]]) -> list[tuple[bytes, float]]:
    """The classes in the order a limit keeps them: by name, bytewise."""
    return sorted(classes, key=lambda item: item[0])


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    retry_after_ns: int
    reset_after_ns: int
    state_after: int


def decide(emission_ns: int, burst: int, reserve: int, tat: int, t: int, cost: int) -> Decision:
    """One decision of a class whose reserve is `reserve` ns."""
    T = emission_ns
    room = emission_ns * burst - reserve  # the class's tolerance
    base = max(tat, t)

    def away(retry: int) -> Decision:
        return Decision(False, max(0, (t + room - base) // T), retry, base - t, tat)

    if cost == 0:
        return Decision(True, max(0, (t + room - base) // T), 0, base - t, tat)
    if cost * T > room:
        return away(NEVER)
    new_tat = base + cost * T
    if t >= new_tat - room:
        return Decision(True, (t + room - new_tat) // T, 0, new_tat - t, new_tat)
    return away(new_tat - room - t)
