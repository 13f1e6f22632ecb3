"""The options of every constructor (tests/vectors/options.txt, written by the
reference model) through every Python constructor: each vector's values are
given to the constructor itself, which must take them or refuse them with the
status's class and words; and to cellrate._cellrate._check_options, which
must give the same outcome and the value normalised. Unknown names are
Python's TypeError. The Lua face reads the same lines (tests/lua/options_spec.lua),
the C tests the core's table (tests/c/test_options.c)."""

from __future__ import annotations

import asyncio
import math
import pathlib
import socket
from dataclasses import dataclass
from typing import Any, Callable

import pytest

import cellrate
from cellrate import _cellrate

pytest.importorskip("redis")
import redis  # noqa: E402
import redis.asyncio  # noqa: E402

from cellrate.redis import (  # noqa: E402
    AsyncRedisConcurrency,
    AsyncRedisLimiter,
    RedisConcurrency,
    RedisLimiter,
)
from cellrate.share import KeyedShareLimiter, ShareLimiter  # noqa: E402
from cellrate.web import Policy  # noqa: E402

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "tests" / "vectors"


def _status_table() -> dict[str, tuple[str, str]]:
    table = {}
    for line in (VECTORS / "status.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("status "):
            head, message = line.split(" |", 1)
            _, _, name, _, param = head.split(" ")
            table[name] = ("" if param == "-" else param, message)
    return table


STATUS = _status_table()


def decode(literal: str) -> bytes:
    if literal == "%":
        return b""
    out, at = bytearray(), 0
    while at < len(literal):
        if literal[at] == "%":
            out.append(int(literal[at + 1:at + 3], 16))
            at += 3
        else:
            out.append(ord(literal[at]))
            at += 1
    return bytes(out)


def function(*args: Any, **kwargs: Any) -> int:
    return 1


@dataclass
class Check:
    line: int
    face: str
    constructor: str
    outcome: str
    status: str
    expected: str
    values: list[tuple[str, str, str]]  # name, type, literal

    def __str__(self) -> str:
        return f"options.txt:{self.line} {self.constructor} {self.values}"


def read() -> tuple[list[Check], list[tuple[int, str, str, str]], list[tuple[str, int]]]:
    checks, unknown, takes_burst = [], [], []
    for number, line in enumerate((VECTORS / "options.txt").read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "check":
            values = []
            for assignment in words[6:]:
                name, _, typed = assignment.partition("=")
                value_type, _, literal = typed.partition(":")
                values.append((name, value_type, literal))
            checks.append(Check(number, *words[1:6], values))
        elif words[0] == "unknown":
            unknown.append((number, words[1], words[2], words[3]))
        elif words[0] == "takes_burst":
            takes_burst.append((words[1], int(words[2])))
    return checks, unknown, takes_burst


CHECKS, UNKNOWN, TAKES_BURST = read()
PYTHON_CHECKS = [check for check in CHECKS if check.face in ("both", "python")]


def test_the_vectors_cover_every_constructor():
    assert {check.constructor for check in PYTHON_CHECKS} == {
        "Limiter", "KeyedLimiter", "Limit", "reconfigure", "Concurrency", "RedisLimiter",
        "RedisConcurrency", "ShareLimiter", "KeyedShareLimiter", "Policy", "limit",
        "concurrent"}
    assert len(PYTHON_CHECKS) > 900


class Values:
    """A vector's values as Python gives them (None: absent), with the paths of
    this test ("@tmp": a fresh region file, or for Policy a directory)."""

    def __init__(self, tmp: pathlib.Path) -> None:
        self.tmp = tmp
        self.made = 0

    def __call__(self, value_type: str, literal: str) -> Any:
        if value_type == "absent":
            return None
        if value_type == "boolean":
            return literal == "true"
        if value_type == "integer":
            return int(literal)
        if value_type == "number":
            return float(literal)
        if value_type == "function":
            return function
        if value_type == "table":
            return []
        assert value_type == "string", value_type
        if literal == "@tmp":
            self.made += 1
            return str(self.tmp / f"region-{self.made}")
        return decode(literal).decode("utf-8")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


PORT = closed_port()


def _sync_client() -> Any:
    return redis.Redis(port=PORT, socket_connect_timeout=0.2, socket_timeout=0.2)


def _async_client() -> Any:
    return redis.asyncio.Redis(port=PORT, socket_connect_timeout=0.2, socket_timeout=0.2)


def _share(kind: type) -> Callable[..., Any]:
    def make(**options: Any) -> Any:
        options.setdefault("background", False)
        options.setdefault("timeout", 0.2)  # Redis is not there: a heartbeat fails at once
        limiter = kind(_sync_client(), 10, **options)
        limiter.close()
        return limiter

    return make


def _async(kind: type, first: Any) -> Callable[..., Any]:
    def make(**options: Any) -> Any:
        async def made() -> Any:  # in a running loop: Python 3.9's asyncio objects need one
            return kind(_async_client(), first, **options)

        return asyncio.run(made())

    return make


def _sync_redis_limiter(**options: Any) -> Any:
    """RedisLimiter; coalesce=True, the asyncio store's alone, refused in the core's words."""
    if options.get("coalesce") is True:
        with pytest.raises(cellrate.InvalidArgument, match="asyncio store alone") as refused:
            RedisLimiter(_sync_client(), 10, **options)
        assert refused.value.param == "coalesce"
        options = {**options, "coalesce": False}
    return RedisLimiter(_sync_client(), 10, **options)


# Each constructor of the table, made by every Python class or function it names.
CONSTRUCTORS: dict[str, list[Callable[..., Any]]] = {
    "Limiter": [lambda **options: cellrate.Limiter(10, **options)],
    "KeyedLimiter": [lambda **options: cellrate.KeyedLimiter(10, **options)],
    "Limit": [lambda **options: cellrate.Limit(10, **options)],
    "reconfigure": [lambda **options: cellrate.Limiter(10).reconfigure(10, **options),
                    lambda **options: cellrate.KeyedLimiter(10).reconfigure(10, **options)],
    "Concurrency": [lambda **options: cellrate.Concurrency(2, **options)],
    "RedisLimiter": [_sync_redis_limiter,
                     _async(AsyncRedisLimiter, 10)],
    "RedisConcurrency": [lambda **options: RedisConcurrency(_sync_client(), 2, **options),
                         _async(AsyncRedisConcurrency, 2)],
    "ShareLimiter": [_share(ShareLimiter)],
    "KeyedShareLimiter": [_share(KeyedShareLimiter)],
    "Policy": [lambda **options: Policy("10/s", **options)],
    # a plan is a keyed limit's: the decorator is given a key for it
    "limit": [lambda **options: cellrate.limit(
        10, **({"key": str} if "plan" in options and "key" not in options else {}), **options)],
    "concurrent": [lambda **options: cellrate.concurrent(2, **options)],
}


def expect_refusal(check: Check, error: BaseException) -> None:
    param, message = STATUS[check.status]
    assert str(error) == message, check
    assert getattr(error, "param", None) == param, check
    if check.outcome == "TYPE":
        assert isinstance(error, cellrate.InvalidArgumentType), (check, type(error))
    else:
        assert isinstance(error, cellrate.InvalidArgument), (check, type(error))
        assert not isinstance(error, cellrate.InvalidArgumentType), check


def normalised_matches(expected: str, got: Any, given: Any) -> bool:
    value_type, _, literal = expected.partition(":")
    if value_type == "absent":
        return got is None
    if value_type == "given":
        return got is given
    if value_type == "boolean":
        return got is (literal == "true")
    if value_type == "integer":
        return type(got) is int and got == int(literal)
    if value_type == "number":
        return type(got) is float and (got == float(literal) or
                                       (math.isnan(got) and literal == "nan"))
    return got == decode(literal).decode("utf-8")


def run_check(check: Check, tmp_path: pathlib.Path) -> None:
    values = Values(tmp_path)
    kwargs = {name: values(value_type, literal) for name, value_type, literal in check.values}
    # the core's judge, through the binding
    try:
        normalised = _cellrate._check_options(check.constructor, dict(kwargs))
    except (cellrate.InvalidArgument, cellrate.InvalidArgumentType) as error:
        assert check.outcome != "OK", (check, error)
        expect_refusal(check, error)
    else:
        assert check.outcome == "OK", (check, normalised)
        first = check.values[0][0]
        assert normalised_matches(check.expected, normalised[first], kwargs[first]), \
            (check, normalised[first])
    # every constructor the table's name stands for; a calendar quota's zone and
    # algorithm are judged with its rate (cr_limit_init), in test_calendar.py
    if any(name == "tz" or (name, literal) == ("algorithm", "calendar")
           for name, _, literal in check.values):
        return
    for make in CONSTRUCTORS[check.constructor]:
        try:
            made = make(**kwargs)
        except (cellrate.InvalidArgument, cellrate.InvalidArgumentType) as error:
            assert check.outcome != "OK", (check, error)
            expect_refusal(check, error)
        else:
            assert check.outcome == "OK", (check, made)
            close = getattr(made, "close", None)
            if callable(close) and not asyncio.iscoroutinefunction(close):
                close()


@pytest.mark.parametrize("constructor", sorted(CONSTRUCTORS))
def test_every_option_of(constructor, tmp_path):
    checks = [check for check in PYTHON_CHECKS if check.constructor == constructor]
    assert checks
    for check in checks:
        run_check(check, tmp_path)


@pytest.mark.parametrize("number,face,constructor,name",
                         [(n, f, c, name) for n, f, c, name, _ in
                          [(*u, None) for u in UNKNOWN] if f == "python"])
def test_an_unknown_name_is_pythons_type_error(number, face, constructor, name, tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument") as caught:
        _cellrate._check_options(constructor, {name: 1})
    assert not isinstance(caught.value, cellrate.CellrateError)
    required = {"ShareLimiter": {"name": "fleet"}, "KeyedShareLimiter": {"name": "fleet"},
                "RedisConcurrency": {"lease": 30}}.get(constructor, {})
    for make in CONSTRUCTORS[constructor]:
        with pytest.raises(TypeError) as caught:
            make(**{name: 1, **required})
        assert not isinstance(caught.value, cellrate.CellrateError), (number, constructor, name)
        assert name in str(caught.value)


def test_check_options_refuses_what_is_no_constructor():
    with pytest.raises(ValueError, match="no constructor"):
        _cellrate._check_options("Nothing", {})
    with pytest.raises(TypeError):
        _cellrate._check_options("Limiter", [])  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm,takes", TAKES_BURST)
def test_which_algorithms_take_a_burst(algorithm, takes):
    assert _cellrate._algorithm_takes_burst(algorithm) is bool(takes)
    # and the decorator gives its even-spacing burst to exactly those
    decorated = cellrate.limit(10, algorithm=algorithm, block=False)(function)
    assert decorated() == 1


# --------------------------------------------------------------------------
# rates.txt: several limits in one string


def read_rates() -> list[tuple[int, str, bool, list[tuple[float, float, int, int, str | None]],
                               str]]:
    found = []
    for number, line in enumerate((VECTORS / "rates.txt").read_text().splitlines(), 1):
        if not line.startswith("rates "):
            continue
        head, _, text = line.partition(" |")
        words = head.split()
        parts = [(float(words[4 + 5 * i]), float(words[5 + 5 * i]), int(words[6 + 5 * i]),
                  int(words[7 + 5 * i]), None if words[8 + 5 * i] == "-" else words[8 + 5 * i])
                 for i in range(int(words[3]))]
        found.append((number, words[1], words[2] == "1", parts, text))
    return found


RATES = read_rates()


@pytest.mark.parametrize("number,status,days,parts,text", RATES)
def test_rates(number, status, days, parts, text):
    if status != "OK":
        with pytest.raises(cellrate.InvalidArgument) as caught:
            _cellrate._parse_rates(text, days)
        assert str(caught.value) == STATUS[status][1]
        assert caught.value.param == "rate"
        return
    got = _cellrate._parse_rates(text, days)
    assert got == [(rate, period, text[start:start + length], calendar)
                   for rate, period, start, length, calendar in parts]


def test_several_limits_in_the_decorator_and_the_web_policy():
    """The decorator and the policy read a list of rates as the core does: one limit
    of each part (a calendar quota of a part whose unit is a calendar period), and the
    core's words for a list it refuses."""
    for number, status, days, parts, text in RATES:
        zone = {"tz": "Europe/Berlin"} if days else {}
        if status == "OK" and days and all(calendar is None for *_, calendar in parts):
            with pytest.raises(cellrate.InvalidArgument) as caught:  # no quota for the zone
                Policy(text, **zone)
            assert (caught.value.param, str(caught.value)) == STATUS["E_TZ_RATES"], number
        elif status == "OK" and len(parts) > 1 and all(rate > 0 for rate, *_ in parts):
            policy = Policy(text, **zone)
            assert len(policy.limits) == len(parts), number
            assert [limit.store.rate for limit in policy.limits] == \
                [rate for rate, *_ in parts]
            assert [limit.store.algorithm == "calendar" for limit in policy.limits] == \
                [calendar is not None for *_, calendar in parts], number
            if not days:
                cellrate.limit(text)(function)
        elif status in ("E_RATE_EMPTY", "E_RATE_TOO_MANY"):
            with pytest.raises(cellrate.InvalidArgument) as caught:
                Policy(text)
            assert str(caught.value) == "limit: " + STATUS[status][1], number
            with pytest.raises(cellrate.InvalidArgument) as caught:
                cellrate.limit(text)
            assert str(caught.value) == STATUS[status][1], number


def test_a_lease_is_judged_once_and_given_in_ns():
    """The table judges a lease (the Redis concurrency store's, required) and gives its ns
    as the core rounds them: the store asks nothing else of it."""
    got = _cellrate._check_options("RedisConcurrency", {"lease": 1.5})
    assert got["lease"] == 1.5 and got["lease_ns"] == 1_500_000_000
    assert _cellrate._check_options("RedisConcurrency", {"lease": 1e-9})["lease_ns"] == 1
    assert "lease_ns" not in _cellrate._check_options("Concurrency", {})
