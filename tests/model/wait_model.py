"""Reference model of the wait plan (docs/design/waiting.md).

Written from the design alone, sharing no code with the C core: a wait's
deadline, the answer to a refusal (refused for never, timeout past the
deadline, else sleep), and the steps of waiters of one process on one limit,
with the process's line. A step decides at its own instant: the store admits
the units now or says when it would (its retry_after); a first step behind
waiters of this process joins the line without trying the store; a waiter
woken before its turn sleeps on; a waiter refused at its turn keeps its
place. The algorithms' decisions are those of the catalogue model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import catalogue_model as catalogue
import gcra_model as gcra
from gcra_model import INT64_MAX, NEVER

NO_TURN = None


def deadline(timeout_ns: int | None, now_ns: int) -> int | None:
    """None: no deadline (any wait)."""
    if timeout_ns is None or timeout_ns > INT64_MAX - now_ns:
        return None
    return now_ns + timeout_ns


def answer(deadline_ns: int | None, now_ns: int, wait_ns: int) -> tuple[str, int]:
    """(action, sleep_ns) of a waiter refused at now whose units fit wait_ns later."""
    if wait_ns == NEVER:
        return "refused", 0
    if deadline_ns is not None and wait_ns > max(0, deadline_ns - now_ns):
        return "timeout", 0
    return "sleep", max(0, wait_ns)


@dataclass
class Waiter:
    cost: int
    deadline_ns: int | None
    turn_ns: int | None = NO_TURN


@dataclass
class Process:
    """One limit (a Limiter) and this process's line of waiters on it."""

    limit: object  # gcra.Limit or catalogue.WindowLimit
    emission_ns: int
    state: object = None  # a TAT (0: idle) or window Counts
    tail_ns: int = 0  # the line's tail: 0, or an instant passed, is an empty line
    waiters: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.limit, gcra.Limit):
            self.state = 0

    def _decide(self, now_ns: int, cost: int, commit: bool):
        if isinstance(self.limit, catalogue.WindowLimit):
            d = catalogue.window_decide(self.limit, self.state, now_ns, cost, commit)
            if commit and d.allowed:
                self.state = d.counts_after
            return d
        d = gcra.decide(self.limit, self.state, now_ns, cost, commit)
        if commit and d.allowed:
            self.state = d.tat_after
        return d

    def _span(self, cost: int) -> int:
        return cost * self.emission_ns

    def begin(self, name: str, cost: int, timeout_ns: int | None, now_ns: int) -> None:
        self.waiters[name] = Waiter(cost, deadline(timeout_ns, now_ns))

    def leave(self, name: str, now_ns: int) -> None:
        waiter = self.waiters[name]
        if waiter.turn_ns is not NO_TURN:
            span = self._span(waiter.cost)
            if self.tail_ns > now_ns:
                self.tail_ns = self.tail_ns - span if self.tail_ns - now_ns > span else now_ns
            waiter.turn_ns = NO_TURN

    def step(self, name: str, now_ns: int) -> tuple[str, int, int | None]:
        """(action, sleep_ns, retry_after_ns of a refusal or None)."""
        w = self.waiters[name]
        first = w.turn_ns is NO_TURN
        if not first and now_ns < w.turn_ns:
            return "sleep", w.turn_ns - now_ns, None
        behind = first and self.tail_ns > now_ns
        if not behind:
            d = self._decide(now_ns, w.cost, True)
            if d.allowed:
                w.turn_ns = NO_TURN
                return "go", 0, None
        d = self._decide(now_ns, w.cost, False)
        if d.retry_after_ns == NEVER:
            self.leave(name, now_ns)
            return "refused", 0, NEVER
        ready = now_ns + (0 if d.allowed else d.retry_after_ns)
        span = self._span(w.cost)
        if first:  # joins the line: after its last
            turn = max(ready, self.tail_ns)
            self.tail_ns = turn + span
        else:  # refused at its turn: keeps its place, newcomers after it
            turn = ready
            self.tail_ns = max(self.tail_ns, ready + span)
        w.turn_ns = turn
        action, sleep = answer(w.deadline_ns, now_ns, turn - now_ns)
        if action != "sleep":
            self.leave(name, now_ns)
            return action, 0, turn - now_ns
        return action, sleep, None
