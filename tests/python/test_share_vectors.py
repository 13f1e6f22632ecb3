"""The fleet share's member rules (tests/vectors/share.txt) through the Python face: every
line, through the functions cellrate.share calls (cellrate._cellrate._share_*), and the
server script's FLOOR_DIVISOR pinned to the core's."""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path

import pytest

import cellrate
from cellrate import _cellrate

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "vectors"


def lines(kind: str) -> list[list[str]]:
    found = []
    for line in (VECTORS / "share.txt").read_text(encoding="utf-8").splitlines():
        words = line.split()
        if words and words[0] == kind:
            found.append(words[1:])
    assert found, f"no {kind} lines in share.txt"
    return found


def same(got: float, want: float) -> bool:
    """The same double, bit for bit (any NaN as any other)."""
    if math.isnan(got) or math.isnan(want):
        return math.isnan(got) and math.isnan(want)
    return struct.pack("<d", got) == struct.pack("<d", want)


def flag(word: str) -> bool:
    return word == "1"


def fleet(rate: str, period: str, burst: str, algorithm: str | None = None) -> cellrate.Limit:
    if algorithm is not None:
        return cellrate.Limit(float(rate), float(period), algorithm=algorithm)
    return cellrate.Limit(float(rate), float(period), burst=int(burst))


CONSTANTS = {words[0]: words[1] for words in lines("constant")}


def test_constants():
    assert _cellrate._SHARE_FLOOR_DIVISOR == int(CONSTANTS["floor_divisor"])
    assert same(_cellrate._SHARE_COLD_START, float(CONSTANTS["cold_start"]))


def test_the_server_script_floors_shares_as_the_core():
    """redis/share.lua runs inside Redis, self-contained: its FLOOR_DIVISOR is the core's."""
    script = (ROOT / "redis" / "share.lua").read_text(encoding="utf-8")
    said = re.findall(r"^local FLOOR_DIVISOR = (\d+)$", script, flags=re.M)
    assert said == [CONSTANTS["floor_divisor"]]


@pytest.mark.parametrize("words", lines("local"), ids=" ".join)
def test_local_limit(words):
    rate, period, burst, share, status, local_rate, local_period, local_burst, _ = words
    if status != "OK":
        with pytest.raises(cellrate.CellrateError):
            _cellrate._share_limit(fleet(rate, period, burst), float(share))
        return
    got = _cellrate._share_limit(fleet(rate, period, burst), float(share))
    assert same(got[0], float(local_rate)) and same(got[1], float(local_period)), got
    assert got[2] == int(local_burst)


@pytest.mark.parametrize("words", lines("algorithm"), ids=" ".join)
def test_algorithms(words):
    name, rate, period, share, status = words
    limit = fleet(rate, period, "", algorithm=name)
    if status == "OK":
        _cellrate._share_limit(limit, float(share))
    else:
        from conftest import core_status

        with pytest.raises(cellrate.InvalidArgument, match=re.escape(core_status(status)[1])):
            _cellrate._share_limit(limit, float(share))


def test_share_of_a_local_limit():
    for rate, period, burst, local_rate, local_period, share in lines("of"):
        got = _cellrate._share_of(fleet(rate, period, burst), float(local_rate),
                                  float(local_period))
        assert same(got, float(share)), (rate, local_rate, got)


def test_units_asked_from_the_counters():
    for admitted, refused, refunded, baseline, asked, counted in lines("asked"):
        stats = {"units_admitted": int(admitted), "units_refused": int(refused),
                 "units_refunded": int(refunded)}
        assert _cellrate._share_asked(stats, int(baseline)) == (int(asked), int(counted))


def test_report():
    for rate, period, burst, asked, elapsed, known, share, joined, *want in lines("report"):
        got = _cellrate._share_report(fleet(rate, period, burst), float(asked), float(elapsed),
                                      flag(known), float(share), flag(joined))
        assert all(same(g, float(w)) for g, w in zip(got, want)), (asked, elapsed, got, want)


def test_reply():
    message = None
    for share, members, target, status, want_share, want_target in lines("reply"):
        texts = ["" if text == "-" else text for text in (share, target)]
        for kind in (str.encode, str):  # redis-py gives bytes, or str when it decodes
            reply = [kind(texts[0]), int(members), kind(texts[1])]
            if status == "OK":
                got = _cellrate._share_reply(reply)
                assert same(got[0], float(want_share)) and same(got[2], float(want_target))
                assert got[1] == int(members)
            else:
                with pytest.raises(cellrate.CellrateError) as raised:
                    _cellrate._share_reply(reply)
                message = str(raised.value)
    from conftest import core_status

    assert message == core_status("E_SHARE_REPLY")[1]


@pytest.mark.parametrize("reply", [None, b"0.5", [b"0.5", 2], [b"0.5", 2, b"0.5", 1],
                                   [b"0.5", b"2", b"0.5"], [b"0.5", 2.0, b"0.5"],
                                   [0.5, 2, b"0.5"], {1, 2, 3}, [b"0.5", True, b"0.5"]])
def test_a_reply_of_another_shape_is_not_the_scripts(reply):
    with pytest.raises(cellrate.CellrateError):
        _cellrate._share_reply(reply)


def test_after():
    for outcome, share, joined, held, answered, want_share, apply, confirm in lines("after"):
        got = _cellrate._share_after(outcome, float(share), flag(joined), float(held),
                                     float(answered))
        assert same(got[0], float(want_share)) and got[1:] == (flag(apply), flag(confirm)), (
            outcome, share, joined, held, answered, got)
