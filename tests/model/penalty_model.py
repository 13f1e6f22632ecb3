"""The penalty box (docs/design.md §15), written independently of the C code:
a penalty's validation, a refused key's strikes and bans, and a GCRA key
under a penalty as a store of this process decides it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import gcra_model as model

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Penalty:
    after: int
    within_ns: int
    strike_ns: int
    ban_ns: int
    max_ban_ns: int


@dataclass(frozen=True)
class State:
    strikes: int = 0
    ban_end: int = 0
    level: int = 0


def _duration(seconds: float) -> int | None:
    if not (isinstance(seconds, float) and math.isfinite(seconds) and seconds > 0):
        return None
    status, ns = model.seconds_to_ns(seconds)
    return ns if status == "OK" and ns >= 1 else None


def make(after: str, ban_s: float, max_ban_s: float | None) -> tuple[str, Penalty | None]:
    """cr_penalty_init: (status, penalty)."""
    status, rate, period_s = model.parse_rate(after)
    within = _duration(period_s) if status == "OK" else None
    if status != "OK" or not (1 <= rate <= 2**31 - 1) or rate != int(rate) or within is None:
        return "E_PENALTY_AFTER", None
    ban = _duration(ban_s)
    if ban is None:
        return "E_PENALTY_BAN", None
    max_ban = ban
    if max_ban_s is not None:
        got = _duration(max_ban_s)
        if got is None or got < ban:
            return "E_PENALTY_MAX_BAN", None
        max_ban = got
    n = int(rate)
    return "OK", Penalty(n, within, -(-within // n), ban, max_ban)


def refused(p: Penalty, s: State, now: int) -> tuple[int, bool, State]:
    """A turn-away at `now`: (the ban's end or 0, whether this one started it, the state)."""
    if now < s.ban_end:
        return s.ban_end, False, s  # during a ban: nothing counted
    strikes = max(s.strikes, now) + p.strike_ns
    # a GCRA of `after` strikes per `within`: the strike that leaves no room for another bans
    if strikes - now <= p.strike_ns * (p.after - 1):
        return 0, False, replace(s, strikes=strikes)
    repeat = s.ban_end != 0 and now < s.ban_end + p.max_ban_ns
    level = min(s.level + 1, 62) if repeat else 0
    length = min(p.ban_ns * 2**level, p.max_ban_ns)
    end = now + length
    return end, True, State(0, end, level)


def live(p: Penalty, s: State, now: int) -> bool:
    return s.strikes > now or (s.ban_end != 0 and s.ban_end + p.max_ban_ns > now)


def banned_tat(limit: model.Limit, tat: int, now: int, ban_ns: int) -> int:
    """The TAT that holds a GCRA key refused for ban_ns from now: one unit
    admissible at now + ban_ns (or at now + T for a ban shorter than T)."""
    beyond = max(ban_ns - limit.emission_ns, 0)
    floor = min(now + limit.tolerance_ns + beyond, now + model.HORIZON_NS)
    return max(tat, floor)


class Key:
    """One GCRA key of a limiter with a penalty, in process."""

    def __init__(self, limit: model.Limit, penalty: Penalty) -> None:
        self.limit, self.penalty = limit, penalty
        self.tat = 0
        self.state = State()

    def check(self, now: int, cost: int) -> model.Decision:
        d = model.decide(self.limit, self.tat, now, cost)
        if d.allowed:
            self.tat = d.tat_after
            return d
        end, started, self.state = refused(self.penalty, self.state, now)
        if started:
            self.tat = banned_tat(self.limit, self.tat, now, end - now)
        if end:
            left = end - now
            d = replace(d, remaining=0, retry_after_ns=max(d.retry_after_ns, left),
                        reset_after_ns=max(d.reset_after_ns, left))
        return d

    def reset(self) -> None:
        self.tat, self.state = 0, State()
