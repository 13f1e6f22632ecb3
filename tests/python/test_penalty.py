"""The penalty box (docs/design/penalty.md): tests/vectors/penalty.txt through
cellrate.Penalty and the in-process Limiter and KeyedLimiter (check and
allow), and the refusals the core makes, naming their parameter."""

from __future__ import annotations

import multiprocessing
import pathlib
from typing import Any

import pytest

import cellrate
from test_vectors import STATUS, seconds_match  # noqa: E402

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "penalty.txt"


def read_vectors() -> tuple[list[tuple[int, str, float, float | None, str]], list[dict]]:
    """The penalties given (line, after, ban, max_ban, status) and the keys:
    each a penalty, a limit and its operations."""
    given, keys = [], []
    current = None
    for lineno, line in enumerate(VECTORS.read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        word, *rest = line.split()
        if word == "penalty":
            after, ban, max_ban, status = rest[:4]
            current = (after, float(ban), None if max_ban == "-" else float(max_ban))
            given.append((lineno, *current, status))
        elif word == "limit":
            keys.append({"penalty": current, "emission": int(rest[0]), "burst": int(rest[1]),
                         "ops": []})
        elif word in ("check", "reset"):
            keys[-1]["ops"].append((lineno, word, [int(x) for x in rest]))
    return given, keys


GIVEN, KEYS = read_vectors()


def test_vectors_are_read() -> None:
    assert len(GIVEN) > 15 and len(KEYS) >= 3
    assert sum(len(k["ops"]) for k in KEYS) > 25


@pytest.mark.parametrize("lineno, after, ban, max_ban, status", GIVEN)
def test_penalty_given(lineno: int, after: str, ban: float, max_ban: float | None,
                       status: str) -> None:
    if status == "OK":
        penalty = cellrate.Penalty(after, ban, max_ban=max_ban)
        assert (penalty.after, penalty.ban, penalty.max_ban) == (after, ban, max_ban)
        return
    with pytest.raises(cellrate.InvalidArgument) as raised:
        cellrate.Penalty(after, ban, max_ban=max_ban)
    param, message = STATUS[status]
    assert str(raised.value) == message and message.startswith(param), f"penalty.txt:{lineno}"


@pytest.mark.parametrize("key", KEYS, ids=lambda k: f"{k['penalty'][0]}")
@pytest.mark.parametrize("store", ["Limiter", "KeyedLimiter"])
def test_keys(key: dict, store: str) -> None:
    after, ban, max_ban = key["penalty"]
    penalty = cellrate.Penalty(after, ban, max_ban=max_ban)
    period = key["emission"] / 1e9
    made = [getattr(cellrate, store)(1, period, burst=key["burst"], penalty=penalty)
            for _ in range(2)]
    checked, allowing = made
    keyed = store == "KeyedLimiter"
    head = ("k",) if keyed else ()
    for lineno, word, values in key["ops"]:
        if word == "reset":
            checked.reset(*head)
            allowing.reset(*head)
            continue
        now_ns, cost, allowed, remaining, retry, reset = values
        now = now_ns / 1e9
        assert now * 1e9 == now_ns
        d = checked.check(*head, cost=cost, now=now)
        where = f"penalty.txt:{lineno}"
        assert (d.allowed, d.remaining) == (bool(allowed), remaining), where
        assert seconds_match(d.retry_after, retry), (where, d.retry_after)
        assert seconds_match(d.reset_after, reset), (where, d.reset_after)
        assert allowing.allow(*head, cost=cost, now=now) is bool(allowed), where


def test_bad_penalties_name_their_parameter() -> None:
    cases = [
        (lambda: cellrate.Penalty("5/minute", 0), cellrate.InvalidArgument, "ban"),
        (lambda: cellrate.Penalty("5/minute", -3), cellrate.InvalidArgument, "ban"),
        (lambda: cellrate.Penalty("5/minute", "10"), cellrate.InvalidArgumentType, "ban"),
        (lambda: cellrate.Penalty("5/minute", 10, max_ban=0), cellrate.InvalidArgument,
         "max_ban"),
        (lambda: cellrate.Penalty(5, 10), cellrate.InvalidArgumentType, "after"),
        (lambda: cellrate.Penalty("often", 10), cellrate.InvalidArgument, "after"),
        (lambda: cellrate.Limiter(10, penalty="5/minute"), cellrate.InvalidArgumentType,
         "penalty"),
    ]
    for make, kind, name in cases:
        with pytest.raises(kind) as raised:
            make()
        assert str(raised.value).startswith(name + " "), str(raised.value)


def _hammer(path: str, store: str, conn: Any) -> None:
    """A process of its own: the region opened without a penalty (it follows
    the region's), one key refused at one instant; its strikes (the limit's
    refusals, not a ban's) and admissions sent back."""
    limiter = getattr(cellrate, store)(1, burst=1, shared=path)
    head = ("hammered",) if store == "KeyedLimiter" else ()
    strikes = admitted = 0
    for _ in range(40):
        d = limiter.check(*head, now=5000.0)
        admitted += d.allowed
        strikes += not d.allowed and d.retry_after <= 1
        assert d.allowed or d.retry_after <= 1 or d.retry_after == 100
    conn.send((strikes, admitted))


@pytest.mark.parametrize("store", ["Limiter", "KeyedLimiter"])
def test_a_shared_region_counts_every_process(tmp_path: pathlib.Path, store: str) -> None:
    """Four processes refused on one key: the 37th refusal in total starts
    the ban, counted across them."""
    path = str(tmp_path / "region")
    penalty = cellrate.Penalty("37/hour", 100)
    made = getattr(cellrate, store)(1, burst=1, shared=path, penalty=penalty)
    head = ("hammered",) if store == "KeyedLimiter" else ()
    context = multiprocessing.get_context("fork")
    pipes = [context.Pipe(duplex=False) for _ in range(4)]
    workers = [context.Process(target=_hammer, args=(path, store, sender))
               for _, sender in pipes]
    for worker in workers:
        worker.start()
    results = [receiver.recv() for receiver, _ in pipes]
    for worker in workers:
        worker.join()
        assert worker.exitcode == 0
    assert sum(admitted for _, admitted in results) == 1
    assert sum(strikes for strikes, _ in results) == 36
    d = made.check(*head, now=5050.0)
    assert not d.allowed and d.retry_after == 50
    assert made.check(*head, now=5100.0).allowed


def test_a_shared_region_takes_the_newest_penalty(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "region"
    first = cellrate.KeyedLimiter(1, burst=1, shared=path, penalty=cellrate.Penalty("5/hour", 10))
    cellrate.KeyedLimiter(1, burst=1, shared=path, penalty=cellrate.Penalty("1/hour", 30))
    assert first.check("k", now=1.0).allowed
    d = first.check("k", now=1.0)
    assert not d.allowed and d.retry_after == 30
    first.reset("k")
    assert first.check("k", now=1.0).allowed


def test_repr_and_equality() -> None:
    p = cellrate.Penalty("5/minute", 10, max_ban=60)
    assert repr(p) == "Penalty('5/minute', 10, max_ban=60)"
    assert p == cellrate.Penalty("5/minute", 10, max_ban=60) != cellrate.Penalty("5/minute", 10)
