"""tests/vectors/wait.txt from the wait plan's reference model (wait_model.py)."""

from __future__ import annotations

import random

import catalogue_model as catalogue
import gcra_model as gcra
import wait_model as model
from gcra_model import NEVER

SECOND = 10**9
MS = 10**6
BASE = 1000 * SECOND + 470 * MS  # 0.53 s before a window of a second ends

HEADER = """\
# The wait plan (docs/design/waiting.md; core/cellrate/stores.h, core/plan.c), as every
# face drives it. Times in ns; one clock serves the deadline and the store (a face passes
# the same now to both). A `limit` line starts a scenario: a new limiter, an empty line.
# limit <algorithm> <rate> <period_ns> <burst|->
# begin <waiter> <cost> <timeout_ns|never> <now_ns>       the waiter's plan
# step <waiter> <now_ns> <action> <sleep_ns> <retry_ns|never|->
#   action go | sleep | refused (never) | timeout; a refusal's retry_after (the wait the
#   units would have taken); after go, refused or timeout the waiter holds no place
# leave <waiter> <now_ns>                                  a waiter that stops (its place back)
# answer <deadline_ns|never> <now_ns> <wait_ns|never> <action> <sleep_ns>   the pure rule
"""


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.process: model.Process | None = None

    def comment(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def limit(self, algorithm: str, rate: int, period_ns: int, burst: int | None) -> None:
        derived = catalogue.limit_for(algorithm, rate, period_ns / SECOND,
                                      None if algorithm in catalogue.WINDOWS else burst)
        assert derived.status == "OK", derived
        assert round(period_ns / SECOND * SECOND) == period_ns
        if algorithm in catalogue.WINDOWS:
            limit: object = catalogue.WindowLimit(algorithm, derived.tolerance_ns, derived.burst)
            burst_text = "-"
        else:
            limit = gcra.Limit(derived.emission_ns, derived.burst)
            burst_text = str(burst)
        self.process = model.Process(limit, derived.emission_ns)
        self.lines.append(f"limit {algorithm} {rate} {period_ns} {burst_text}")

    def begin(self, name: str, cost: int, timeout_ns: int | None, now_ns: int) -> None:
        assert self.process is not None and now_ns % MS == 0
        self.process.begin(name, cost, timeout_ns, now_ns)
        timeout = "never" if timeout_ns is None else str(timeout_ns)
        self.lines.append(f"begin {name} {cost} {timeout} {now_ns}")

    def step(self, name: str, now_ns: int) -> tuple[str, int, int | None]:
        assert self.process is not None and now_ns % MS == 0
        action, sleep, retry = self.process.step(name, now_ns)
        retry_text = "-" if retry is None else ("never" if retry == NEVER else str(retry))
        self.lines.append(f"step {name} {now_ns} {action} {sleep} {retry_text}")
        return action, sleep, retry

    def leave(self, name: str, now_ns: int) -> None:
        assert self.process is not None
        self.process.leave(name, now_ns)
        self.lines.append(f"leave {name} {now_ns}")

    def turn(self, name: str) -> int:
        """The waiter's turn, rounded up to the ms (every time here is whole ms:
        a face's seconds hold it exactly)."""
        assert self.process is not None
        turn = self.process.waiters[name].turn_ns
        assert turn is not None
        return -(-turn // MS) * MS


def answers(w: Writer) -> None:
    w.comment("the pure rule: never, past the deadline, within it, no deadline")
    cases = [(None, 0, NEVER), (None, 5, 10**15), (100, 0, 100), (100, 0, 101),
             (100, 40, 60), (100, 40, 61), (100, 150, 0), (100, 150, 1), (0, 0, 0),
             (10 * SECOND, 3 * SECOND, NEVER), (None, 0, 0)]
    for deadline, now, wait in cases:
        action, sleep = model.answer(deadline, now, wait)
        text = lambda v: "never" if v is None or v == NEVER else str(v)  # noqa: E731
        w.lines.append(f"answer {text(deadline)} {now} {text(wait)} {action} {sleep}")


def algorithm_scenario(w: Writer, algorithm: str) -> None:
    """Two a second: two admitted at once, a third waits (a window: for the next
    window, 0.53 s on), a fourth queues behind it; a timeout met and one that
    cannot be; a cost above the burst; an early wake-up; a late one."""
    w.comment(f"{algorithm}: admitted at once, waiting, the line, timeouts, never")
    w.limit(algorithm, 2, SECOND, 2)
    now = BASE
    for name in ("a", "b"):
        w.begin(name, 1, None, now)
        w.step(name, now)
    w.begin("c", 1, 2 * SECOND, now)
    w.step("c", now)
    w.begin("d", 1, None, now)
    w.step("d", now)  # behind c
    w.begin("e", 1, 100 * MS, now)
    w.step("e", now)  # not within 100 ms
    w.begin("f", 3, None, now)
    w.step("f", now)  # never: above the rate/burst
    w.begin("g", 1, 0, now)
    w.step("g", now)  # timeout 0 with waiters ahead
    early = (now + w.turn("c")) // 2 // MS * MS
    w.step("c", early)  # woken early: sleeps on
    if w.step("c", w.turn("c"))[0] == "sleep":
        w.step("c", w.turn("c"))
    late = w.turn("d") + 300 * MS
    w.step("d", late)  # woken late: admitted at its real instant
    w.begin("h", 1, None, late)
    if w.step("h", late)[0] == "sleep":
        w.step("h", w.turn("h"))


def late_wakeups(w: Writer, algorithm: str) -> None:
    """One a second, burst 1: a waiter that wakes late starts late, and the
    next, at its turn, is refused by the store and keeps its place until one
    interval after that real start (re-anchoring)."""
    w.comment(f"{algorithm}: a late start pushes the waiter behind it")
    w.limit(algorithm, 1, SECOND, 1)
    now = BASE
    w.begin("a", 1, None, now)
    w.step("a", now)
    w.begin("b", 1, None, now + MS)
    w.step("b", now + MS)
    w.begin("c", 1, 10 * SECOND, now + 2 * MS)
    w.step("c", now + 2 * MS)
    b_late = w.turn("b") + 700 * MS
    w.step("b", b_late)
    if w.step("c", w.turn("c"))[0] == "sleep":  # on time, refused at its turn: kept its place
        w.step("c", w.turn("c"))
    w.comment(f"{algorithm}: a place given back is taken by the next newcomer")
    now = b_late + 2 * SECOND
    w.begin("d", 1, None, now)
    w.step("d", now)
    w.begin("e", 1, None, now)
    w.step("e", now)
    w.begin("f", 1, None, now)
    w.step("f", now)
    w.leave("e", now + MS)
    w.begin("g", 1, None, now + 2 * MS)
    w.step("g", now + 2 * MS)


def costs(w: Writer, algorithm: str) -> None:
    w.comment(f"{algorithm}: costs 0, at the burst, above it")
    w.limit(algorithm, 3, 2 * SECOND, 3)
    now = BASE
    for name, cost, timeout in (("a", 0, None), ("b", 3, None), ("c", 3, 5 * SECOND),
                                ("d", 4, None), ("e", 4, 0), ("f", 2, SECOND)):
        w.begin(name, cost, timeout, now)
        w.step(name, now)
    if w.step("c", w.turn("c"))[0] == "sleep":
        w.step("c", w.turn("c"))


def random_scenarios(w: Writer, rng: random.Random, algorithm: str, count: int) -> None:
    for index in range(count):
        rate = rng.choice([1, 2, 3, 5])
        period = rng.choice([SECOND // 2, SECOND, 2 * SECOND])
        burst = rng.randint(1, 4)
        w.comment(f"{algorithm}: random sequence {index + 1}")
        w.limit(algorithm, rate, period, burst)
        now = BASE + rng.randrange(0, 1000) * MS
        active: dict[str, int | None] = {}  # waiter -> its turn (None: not stepped yet)
        serial = 0
        for _ in range(rng.randint(6, 24)):
            choice = rng.random()
            if choice < 0.35 or not active:
                serial += 1
                name = f"w{serial}"
                cap = burst if algorithm not in catalogue.WINDOWS else rate
                cost = rng.choice([1, 1, 1, 2, cap, cap + 1, 0])
                timeout = rng.choice([None, None, 0, 300 * MS, SECOND, 3 * SECOND])
                w.begin(name, cost, timeout, now)
                active[name] = None
            elif choice < 0.92:
                name = rng.choice(sorted(active))
                turn = active[name]
                if turn is not None:
                    # on time, early or late
                    target = turn + rng.choice([0, 0, -200 * MS, 100 * MS, 600 * MS])
                    now = max(now, -(-target // MS) * MS)
                action, _, _ = w.step(name, now)
                if action == "sleep":
                    active[name] = w.turn(name)
                else:
                    del active[name]
            else:
                name = rng.choice(sorted(active))
                w.leave(name, now)
                del active[name]
            now += rng.choice([0, 0, MS, 50 * MS, 300 * MS])


def make_wait() -> str:
    w = Writer()
    answers(w)
    for algorithm in catalogue.ALGORITHMS:
        algorithm_scenario(w, algorithm)
        late_wakeups(w, algorithm)
        costs(w, algorithm)
    rng = random.Random(20261206)
    for algorithm in catalogue.ALGORITHMS:
        random_scenarios(w, rng, algorithm, 12)
    return HEADER + "\n".join(w.lines) + "\n"
