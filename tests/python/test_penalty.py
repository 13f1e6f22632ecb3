"""The penalty box (docs/design/penalty.md): tests/vectors/penalty.txt through
cellrate.Penalty and the in-process Limiter and KeyedLimiter (check and
allow), and the refusals the core makes, naming their parameter."""

from __future__ import annotations

import pathlib

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


def test_a_shared_region_refuses_a_penalty(tmp_path: pathlib.Path) -> None:
    with pytest.raises(cellrate.InvalidArgument, match="^penalty: a penalty box"):
        cellrate.KeyedLimiter("10/s", shared=tmp_path / "region",
                              penalty=cellrate.Penalty("5/minute", 10))


def test_repr_and_equality() -> None:
    p = cellrate.Penalty("5/minute", 10, max_ban=60)
    assert repr(p) == "Penalty('5/minute', 10, max_ban=60)"
    assert p == cellrate.Penalty("5/minute", 10, max_ban=60) != cellrate.Penalty("5/minute", 10)
