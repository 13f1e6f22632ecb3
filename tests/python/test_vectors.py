"""The shared conformance vectors (tests/vectors/) through the Python face.

The vectors are in integer nanoseconds; Python speaks float seconds. A vector
is replayed only where the float is exact:

* a limit (T, burst) is rebuilt as Limiter(1.0, period, burst=burst) with a
  period that the reference model proves derives exactly T;
* a time t is passed as now=float(t / 1e9) when the model proves it converts
  back to exactly t (the rule, shared with the Lua reader, is
  gcra_model.float_face_seconds).

Anything else is skipped, counted by reason, printed, and bounded. A skipped
op that stores nothing (the vectors give the TAT after each op) is skipped
alone; after one that stores, the rest of its sequence is skipped, because
its state would no longer be known. The C tests replay every vector.
"""

from __future__ import annotations

import collections
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

cellrate = pytest.importorskip("cellrate")

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"
sys.path.insert(0, str(ROOT / "tests" / "model"))

import gcra_model as model  # noqa: E402
from gcra_model import HORIZON_NS  # noqa: E402

# Skips allowed, as a share of the ops in decisions.txt.
MAX_SKIPPED_SHARE = 0.02


# --------------------------------------------------------------------------
# The status table (tests/vectors/status.txt): the messages a face must raise.


def _status_table() -> dict[str, tuple[str, str]]:
    table = {}
    for line in (VECTORS / "status.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("status "):
            head, message = line.split(" |", 1)
            _, _, name, _, param = head.split(" ")
            table[name] = ("" if param == "-" else param, message)
    assert "OK" in table and "E_RATE_SYNTAX" in table, "cannot read status.txt"
    return table


STATUS = _status_table()


# --------------------------------------------------------------------------
# Seconds as the faces return them


def seconds_match(got: float, ns: int) -> bool:
    """`got` is the face's seconds for `ns`: CR_NEVER is +inf; below 2**53 the
    one correctly rounded quotient; above, within one ulp of it."""
    if ns == model.NEVER:
        return got == math.inf
    expected = ns / 1e9
    if ns <= 2**53:
        return got == expected
    return abs(got - expected) <= math.ulp(expected)


# --------------------------------------------------------------------------
# decisions.txt


@dataclass
class Op:
    line: int
    now: int
    cost: int
    commit: bool
    allowed: bool
    remaining: int
    retry_after: int
    reset_after: int
    tat_after: int  # the key's state word after the op


@dataclass
class Reserve:
    line: int
    now: int
    cost: int
    max_wait: int  # -1: any wait
    reserved: bool
    delay: int
    tat_after: int


@dataclass
class Refund:
    line: int
    now: int
    cost: int
    given: int  # the units it gave back: what units_refunded counts
    tat_after: int


@dataclass
class Charge:
    line: int
    now: int
    cost: int
    allowed: bool
    remaining: int
    retry_after: int
    reset_after: int
    clipped: bool
    committed: int  # the units it committed: what units_admitted counts
    tat_after: int


@dataclass
class Take:
    line: int
    now: int
    max_cost: int
    taken: int
    tat_after: int


@dataclass
class Reconfigure:
    line: int
    now: int
    emission_ns: int  # windows: the window
    burst: int  # windows: the rate
    tat_after: int


@dataclass
class Sequence:
    line: int
    algorithms: tuple  # a `limit` line runs as gcra and as token_bucket
    emission_ns: int  # windows: the window
    burst: int  # windows: the rate
    steps: list  # Op, Reserve, Refund or "reset"
    max_debt: int | None = None  # None: the default


def read_decisions() -> list[Sequence]:
    sequences: list[Sequence] = []
    for number, text in enumerate((VECTORS / "decisions.txt").read_text().splitlines(), 1):
        if not text or text.startswith("#"):
            continue
        fields = text.split()
        if fields[0] == "limit":
            sequences.append(Sequence(number, ("gcra", "token_bucket"), int(fields[1]), int(fields[2]), [],
                                      int(fields[3]) if len(fields) > 3 else None))
        elif fields[0] == "window":
            sequences.append(Sequence(number, (fields[1],), int(fields[2]), int(fields[3]), [],
                                      int(fields[4]) if len(fields) > 4 else None))
        elif fields[0] == "reset":
            sequences[-1].steps.append("reset")
        elif fields[0] == "op":
            v = [int(f) for f in fields[1:]]
            sequences[-1].steps.append(Op(number, v[0], v[1], bool(v[2]), bool(v[3]), v[4], v[5], v[6], v[7]))
        elif fields[0] == "reserve":
            v = [int(f) for f in fields[1:]]
            sequences[-1].steps.append(Reserve(number, v[0], v[1], v[2], bool(v[3]), v[4], v[5]))
        elif fields[0] == "refund":
            v = [int(f) for f in fields[1:]]
            sequences[-1].steps.append(Refund(number, v[0], v[1], v[2], v[3]))
        elif fields[0] == "charge":
            v = [int(f) for f in fields[1:]]
            sequences[-1].steps.append(Charge(number, v[0], v[1], bool(v[2]), v[3], v[4], v[5], bool(v[6]),
                                              v[7], v[8]))
        elif fields[0] == "take":
            v = [int(f) for f in fields[1:]]
            sequences[-1].steps.append(Take(number, *v))
        elif fields[0] == "reconfigure":
            v = [int(f) for f in fields[1:]]
            sequences[-1].steps.append(Reconfigure(number, v[0], v[1], v[2], v[3]))
        else:
            raise AssertionError(f"decisions.txt:{number}: {text}")
    return sequences


SEQUENCES = read_decisions()


def limit_args(seq, algorithm: str):
    """(args, kwargs) that rebuild the sequence's (or a Reconfigure's) limit exactly, or None."""
    debt = {} if getattr(seq, "max_debt", None) is None else {"max_debt": seq.max_debt}
    if algorithm in ("gcra", "token_bucket"):
        period = model.float_face_period(seq.emission_ns)
        if period is None:
            return None
        return (1.0, period), {"burst": seq.burst, "algorithm": algorithm, **debt}
    period = model.float_face_seconds(seq.emission_ns)  # the model proves it derives the window
    return (float(seq.burst), period), {"algorithm": algorithm, **debt}


def counted(stats, store, field: str):
    """The counter `field` of `store`, or None when this face cannot read it (or it
    saturated: a sequence's huge units may get it there)."""
    if stats is None:
        return None
    value = stats(store)[field]
    return None if value == 2**63 - 1 else value


def replay(make_store, check, peek, reset, reserve=None, refund=None,
           reconfigure=None, charge=None, take=None, stats=None) -> tuple[collections.Counter, list[str]]:
    """Replays every sequence under each of its algorithms; returns counts of
    compared and skipped ops, and mismatches."""
    counts: collections.Counter = collections.Counter()
    mismatches: list[str] = []
    for seq in SEQUENCES:
        for algorithm in seq.algorithms:
            replay_one(seq, algorithm, make_store, check, peek, reset, reserve, refund, reconfigure,
                       charge, take, counts, mismatches, stats)
    return counts, mismatches


def replay_one(seq, algorithm, make_store, check, peek, reset, reserve, refund, reconfigure, charge,
               take, counts, mismatches, stats=None):
    ops = [s for s in seq.steps if s != "reset"]
    made = limit_args(seq, algorithm)
    if made is None:
        counts["skipped: T has no exact float period"] += len(ops)
        return
    store = make_store(*made)
    burst = seq.burst  # the limit's, as live changes move it
    tat = 0  # the key's state before each step, as the vectors say
    for index, step in enumerate(seq.steps):
        if step == "reset":
            reset(store)
            tat = 0
            continue
        now = model.float_face_seconds(step.now)
        if now is None and step.tat_after == tat:
            # it changes nothing: the rest of the sequence stays known
            counts["skipped: a time has no exact float seconds (one op that stores nothing)"] += 1
            continue
        if now is None:
            left = sum(1 for s in seq.steps[index:] if s != "reset")
            counts["skipped: a time has no exact float seconds (rest of its sequence)"] += left
            return
        if isinstance(step, Reconfigure):
            made = limit_args(step, algorithm)
            if reconfigure is None or made is None:
                left = sum(1 for s in seq.steps[index:] if s != "reset")
                counts["skipped: a live change this store or face cannot make (rest of its sequence)"] += left
                return
            (rate, period), kwargs = made
            reconfigure(store, rate, period, kwargs.get("burst"), now)
            burst = step.burst
            tat = step.tat_after
            counts["compared"] += 1
            continue
        tat = step.tat_after
        if isinstance(step, Reserve):
            if reserve is None:
                return
            max_wait = None if step.max_wait < 0 else step.max_wait / 1e9
            got = reserve(store, step.cost, max_wait, now)
            if not ((got is None and not step.reserved) or
                    (got is not None and step.reserved and seconds_match(got, step.delay))):
                mismatches.append(f"decisions.txt:{step.line} ({algorithm}): reserve gave {got!r}; "
                                  f"want reserved={step.reserved} delay_ns={step.delay}")
            counts["compared"] += 1
            continue
        if isinstance(step, Refund):
            if refund is None:
                return
            before = counted(stats, store, "units_refunded")
            refund(store, step.cost, now)
            after = counted(stats, store, "units_refunded")
            if before is not None and after is not None and after - before != step.given:
                mismatches.append(f"decisions.txt:{step.line} ({algorithm}): refund counted "
                                  f"{after - before}; want {step.given}")
            counts["compared"] += 1
            continue
        if isinstance(step, Take):
            if take is None:
                return
            got = take(store, step.max_cost, now)
            if got != step.taken:
                mismatches.append(f"decisions.txt:{step.line} ({algorithm}): take gave {got!r}; "
                                  f"want {step.taken}")
            counts["compared"] += 1
            continue
        if isinstance(step, Charge):
            if charge is None:
                return
            before = counted(stats, store, "units_admitted")
            d = charge(store, step.cost, now)
            if d.clipped is not step.clipped:
                mismatches.append(f"decisions.txt:{step.line} ({algorithm}): charge gave {d!r}; "
                                  f"want clipped={step.clipped}")
            after = counted(stats, store, "units_admitted")
            if before is not None and after is not None and after - before != step.committed:
                mismatches.append(f"decisions.txt:{step.line} ({algorithm}): charge counted "
                                  f"{after - before}; want {step.committed}")
        else:
            d = (check if step.commit else peek)(store, step.cost, now)
        if not (
            d.allowed is step.allowed
            and d.remaining == step.remaining
            and d.limit == burst
            and seconds_match(d.retry_after, step.retry_after)
            and seconds_match(d.reset_after, step.reset_after)
        ):
            mismatches.append(
                f"decisions.txt:{step.line} ({algorithm}): got {d!r}; want allowed={step.allowed} "
                f"remaining={step.remaining} retry_after_ns={step.retry_after} "
                f"reset_after_ns={step.reset_after}"
            )
        counts["compared"] += 1


def assert_no_mismatches(mismatches: list[str]) -> None:
    shown = "\n".join(mismatches[:12])
    assert not mismatches, f"{len(mismatches)} mismatches with the vectors:\n{shown}"


def report(name: str, counts: collections.Counter, mismatches: list[str]) -> None:
    total = sum(counts.values())
    skipped = total - counts["compared"]
    print(f"\n{name}: {counts['compared']} of {total} vector ops compared, {skipped} skipped")
    for reason, count in sorted(counts.items()):
        if reason != "compared":
            print(f"  {count} {reason}")
    assert total > 5000
    assert skipped <= MAX_SKIPPED_SHARE * total, counts
    assert_no_mismatches(mismatches)


def test_decisions_limiter():
    counts, mismatches = replay(
        lambda args, kwargs: cellrate.Limiter(*args, **kwargs),
        lambda lim, cost, now: lim.check(cost, now=now),
        lambda lim, cost, now: lim.peek(cost, now=now),
        lambda lim: lim.reset(),
        lambda lim, cost, max_wait, now: lim.reserve(cost, timeout=max_wait, now=now),
        lambda lim, cost, now: lim.refund(cost, now=now),
        lambda lim, rate, period, burst, now: lim.reconfigure(rate, period, burst=burst, now=now),
        lambda lim, cost, now: lim.charge(cost, now=now),
        lambda lim, max_cost, now: lim.take(max_cost, now=now),
        lambda lim: lim.stats(),
    )
    report("Limiter", counts, mismatches)


def test_decisions_keyed():
    counts, mismatches = replay(
        lambda args, kwargs: cellrate.KeyedLimiter(*args, capacity=64, **kwargs),
        lambda keyed, cost, now: keyed.check("key", cost, now=now),
        lambda keyed, cost, now: keyed.peek("key", cost, now=now),
        lambda keyed: keyed.reset("key"),
        lambda keyed, cost, max_wait, now: keyed.reserve("key", cost, timeout=max_wait, now=now),
        lambda keyed, cost, now: keyed.refund("key", cost, now=now),
        lambda keyed, rate, period, burst, now: keyed.reconfigure(rate, period, burst=burst, now=now),
        lambda keyed, cost, now: keyed.charge("key", cost, now=now),
        lambda keyed, max_cost, now: keyed.take("key", max_cost, now=now),
        lambda keyed: keyed.stats(),
    )
    report("KeyedLimiter", counts, mismatches)


def test_allow_matches_check():
    """allow() is check().allowed, replayed on the vectors' first sequences and windows."""
    chosen = SEQUENCES[:40] + [seq for seq in SEQUENCES if "window" in seq.algorithms[0]][:40]
    for seq in chosen:
        made = limit_args(seq, seq.algorithms[0])
        if made is None:
            continue
        lim = cellrate.Limiter(*made[0], **made[1])
        for step in seq.steps:
            if step == "reset":
                lim.reset()
                continue
            now = model.float_face_seconds(step.now)
            if now is None or not isinstance(step, Op):
                break
            if step.commit:
                assert lim.allow(step.cost, now=now) is step.allowed, step.line
            else:
                assert lim.peek(step.cost, now=now).allowed is step.allowed, step.line


# --------------------------------------------------------------------------
# limits.txt


def read_limits():
    for number, text in enumerate((VECTORS / "limits.txt").read_text(encoding="utf-8").splitlines(), 1):
        if text and not text.startswith("#"):
            yield number, text


def _number_args(fields):
    rate = float(fields[1])
    args = [rate] if fields[2] == "-" else [rate, float(fields[2])]
    kwargs = {} if fields[3] == "-" else {"burst": int(fields[3])}
    return args, kwargs


LIMIT_LINES = list(read_limits())

FACES = {
    "Limiter": (cellrate.Limiter, lambda lim, cost, now: lim.peek(cost, now=now)),
    "KeyedLimiter": (cellrate.KeyedLimiter, lambda lim, cost, now: lim.peek("k", cost, now=now)),
}


def raised_status(status: str, make) -> str | None:
    """None if `make()` raises the ValueError of `status`, else what went wrong."""
    param, message = STATUS[status]
    try:
        make()
    except ValueError as error:
        if message not in str(error):
            return f"raised {error!r}, want the message of {status}"
        if not isinstance(error, cellrate.CellrateError) or error.param != param:
            return f"raised {error!r} with param {getattr(error, 'param', None)!r}, want {param!r}"
        return None
    except Exception as error:  # noqa: BLE001 - reported as a mismatch
        return f"raised {error!r}, want a ValueError for {status}"
    return f"did not raise, want {status}"


def limit_mismatch(status: str, emission_ns: int, burst: int, make, peek) -> str | None:
    if status != "OK":
        return raised_status(status, make)
    try:
        lim = make()
    except Exception as error:  # noqa: BLE001 - reported as a mismatch
        return f"raised {error!r}, want OK"
    if lim.burst != burst:
        return f"burst {lim.burst}, want {burst}"
    idle = peek(lim, 0, 0.0)
    if not (idle.allowed and idle.remaining == burst and idle.limit == burst):
        return f"idle probe {idle!r}, want remaining = limit = {burst}"
    # An idle key's cost-1 peek answers reset_after = T.
    first = peek(lim, 1, 0.0)
    if not seconds_match(first.reset_after, emission_ns):
        return f"reset_after {first.reset_after!r} of a first unit, want T = {emission_ns} ns"
    return None


def algorithm_mismatch(cls, text: str) -> tuple[str, str | None]:
    """An `algorithm` or `algorithm_text` line of limits.txt: (status, problem)."""
    if text.startswith("algorithm_text "):
        head, rate_text = text.split("|", 1)
        _, name, status, emission_ns, tolerance_ns, burst = head.split()
        args, kwargs = [rate_text], {}
    else:
        fields = text.split()
        name, status, emission_ns, tolerance_ns, burst = fields[1], fields[5], fields[6], fields[7], fields[8]
        args, kwargs = _number_args(fields[1:])
    kwargs["algorithm"] = "" if name == "-" else name
    make = lambda: cls(*args, **kwargs)  # noqa: E731
    if status != "OK":
        return status, raised_status(status, make)
    try:
        lim = make()
    except Exception as error:  # noqa: BLE001 - reported as a mismatch
        return status, f"raised {error!r}, want OK"
    got = (lim.emission_ns, lim.tolerance_ns, lim.burst, lim.algorithm)
    want = (int(emission_ns), int(tolerance_ns), int(burst), name)
    return status, None if got == want else f"{got}, want {want}"


@pytest.mark.parametrize("kind", sorted(FACES))
def test_limits(kind):
    cls, peek = FACES[kind]
    seen: collections.Counter = collections.Counter()
    mismatches = []
    for number, text in LIMIT_LINES:
        if text.startswith("number "):
            fields = text.split()
            args, kwargs = _number_args(fields)
            status, emission_ns, burst = fields[4], int(fields[5]), int(fields[6])
            problem = limit_mismatch(status, emission_ns, burst,
                                     lambda: cls(*args, **kwargs), peek)  # noqa: B023 - called here
            if problem is None and status == "OK":
                lim = cls(*args, **kwargs)
                if lim.rate != args[0] or lim.period != (args[1] if len(args) > 1 else 1.0):
                    problem = f"rate {lim.rate!r} period {lim.period!r}, want them as given"
        elif text.startswith("algorithm"):
            status, problem = algorithm_mismatch(cls, text)
        else:
            head, rate_text = text.split("|", 1)
            _, status, emission_ns, burst, period_given = head.split()
            args = [rate_text, 1.0] if period_given == "1" else [rate_text]
            problem = limit_mismatch(status, int(emission_ns), int(burst),
                                     lambda: cls(*args), peek)  # noqa: B023 - called here
        if problem:
            mismatches.append(f"limits.txt:{number}: {text!r}: {problem}")
        seen[status] += 1
    assert seen["OK"] > 100 and len(seen) >= 10, seen
    assert_no_mismatches(mismatches)


def limit_arguments(text: str) -> tuple[list, dict]:
    """The arguments of a limits.txt line, as a Limiter takes them."""
    if text.startswith("algorithm_text "):
        head, rate_text = text.split("|", 1)
        name = head.split()[1]
        return [rate_text], {"algorithm": "" if name == "-" else name}
    if text.startswith("algorithm "):
        fields = text.split()
        args, kwargs = _number_args(fields[1:])
        kwargs["algorithm"] = "" if fields[1] == "-" else fields[1]
        return args, kwargs
    if text.startswith("number "):
        return _number_args(text.split())
    head, rate_text = text.split("|", 1)
    return ([rate_text, 1.0] if head.split()[4] == "1" else [rate_text]), {}


def outcome(make):
    """What make() gives, comparable across types: the limit's fields, or the
    error's type, words and parameter."""
    try:
        lim = make()
    except Exception as error:  # noqa: BLE001 - compared, not hidden
        return (type(error), str(error), getattr(error, "param", None))
    return (lim.rate, lim.period, lim.burst, lim.algorithm, lim.emission_ns, lim.tolerance_ns,
            repr(lim).replace("cellrate.Limiter(", "cellrate.Limit(", 1))


def test_limit_refuses_and_accepts_what_limiter_does():
    # cellrate.Limit is the limit a Limiter is made with: every line of
    # limits.txt gives both the same fields, or the same error in the same words.
    mismatches, refused = [], 0
    for number, text in LIMIT_LINES:
        args, kwargs = limit_arguments(text)
        want = outcome(lambda args=args, kwargs=kwargs: cellrate.Limiter(*args, **kwargs))
        got = outcome(lambda args=args, kwargs=kwargs: cellrate.Limit(*args, **kwargs))
        refused += isinstance(want[0], type)
        if got != want:
            mismatches.append(f"limits.txt:{number}: {text!r}: Limit {got}, Limiter {want}")
    assert refused > 100 and len(LIMIT_LINES) - refused > 100, refused
    assert_no_mismatches(mismatches)


def test_limit_against_the_model():
    mismatches = []
    for number, text in LIMIT_LINES:
        if text.startswith("algorithm"):
            _, problem = algorithm_mismatch(cellrate.Limit, text)
            if problem:
                mismatches.append(f"limits.txt:{number}: {text!r}: {problem}")
    assert_no_mismatches(mismatches)


# --------------------------------------------------------------------------
# seconds.txt: `now` in seconds to ns, seen through `remaining`
#
# With T = 1 ns and burst = 2**62 (the largest tau), a check of cost 2**62 at
# t = 0 leaves TAT = 2**62; then a cost-0 peek at t answers remaining = t.


def read_seconds():
    for number, text in enumerate((VECTORS / "seconds.txt").read_text().splitlines(), 1):
        if text and not text.startswith("#"):
            _, seconds, status, ns = text.split()
            yield number, float(seconds), status, int(ns)


@pytest.mark.parametrize("kind", sorted(FACES))
def test_seconds(kind):
    cls, peek = FACES[kind]
    period = model.float_face_period(1)
    assert period is not None
    lim = cls(1.0, period, burst=HORIZON_NS)
    assert peek(lim, HORIZON_NS, 0.0).allowed
    if kind == "Limiter":
        assert lim.check(HORIZON_NS, now=0.0).allowed
    else:
        assert lim.check("k", HORIZON_NS, now=0.0).allowed
    lines = list(read_seconds())
    assert len(lines) > 50
    mismatches = []
    for number, seconds, status, ns in lines:
        if status == "OK":
            try:
                got = peek(lim, 0, seconds).remaining
            except Exception as error:  # noqa: BLE001 - reported as a mismatch
                got = error
            if got != ns:
                mismatches.append(f"seconds.txt:{number}: now={seconds!r} is {got!r} ns, want {ns}")
        else:
            problem = raised_status(status, lambda: peek(lim, 0, seconds))  # noqa: B023 - called here
            if problem:
                mismatches.append(f"seconds.txt:{number}: now={seconds!r}: {problem}")
    assert_no_mismatches(mismatches)
