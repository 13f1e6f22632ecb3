"""Calendar quotas (docs/design.md §19) through the Python face: the boundaries of
tests/vectors/calendar.txt (from Python's zoneinfo) through cellrate.calendar_period,
and algorithm="calendar" limits deciding at them; bad input in the core's words."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

cellrate = pytest.importorskip("cellrate")

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"
SECOND = 10**9
UNIT_WORDS = {"day": "day", "week": "week", "month": "month", "year": "year"}


def _status_messages() -> dict[str, str]:
    table = {}
    for line in (VECTORS / "status.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("status "):
            head, message = line.split(" |", 1)
            table[head.split(" ")[2]] = message
    return table


STATUS = _status_messages()


def _bounds() -> list[tuple[str, str, int, int, int]]:
    """The bounds lines a float `now` carries exactly (a multiple of 0.5 s)."""
    out = []
    for line in (VECTORS / "calendar.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("bounds "):
            _, zone, unit, count, now, start, end = line.split(" ")
            period = unit if count == "1" else f"{count} {unit}s"
            if int(now) % (SECOND // 2) == 0:
                out.append((zone, period, int(now), int(start), int(end)))
    return out


BOUNDS = _bounds()


def test_vectors_through_calendar_period() -> None:
    assert len(BOUNDS) > 5000
    zones = {zone for zone, *_ in BOUNDS}
    assert {"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata",
            "Pacific/Chatham", "America/Santiago"} <= zones
    wrong = []
    for zone, period, now, start, end in BOUNDS:
        got = cellrate.calendar_period(zone, period, now=now / SECOND)
        if got != (start / SECOND, end / SECOND):
            wrong.append((zone, period, now, got, start, end))
    assert not wrong, wrong[:5]


def test_a_quota_resets_at_the_boundary() -> None:
    # Berlin, 2021-03-28: a day of 23 hours (CET to CEST at 02:00)
    zone, now = "Europe/Berlin", 1616889600 + 3600  # 02:00 CET = 01:00 UTC
    start, end = cellrate.calendar_period(zone, "day", now=now)
    assert end - start == 23 * 3600
    lim = cellrate.Limiter("2/day", algorithm="calendar", tz=zone)
    assert lim.check(now=now).remaining == 1
    d = lim.check(now=now)
    assert (d.allowed, d.remaining, d.reset_after) == (True, 0, end - now)
    d = lim.check(now=now)
    assert (d.allowed, d.retry_after, d.reset_after) == (False, end - now, end - now)
    assert lim.check(now=end - 0.5).allowed is False
    d = lim.check(now=end)
    assert (d.allowed, d.remaining) == (True, 1)


def test_a_25_hour_day_and_a_month_across_an_offset_change() -> None:
    zone = "America/New_York"
    start, end = cellrate.calendar_period(zone, "day", now=1636261200)  # 2021-11-07
    assert end - start == 25 * 3600
    start, end = cellrate.calendar_period(zone, "month", now=1636261200)  # November 2021
    assert (start, end) == (1635739200, 1638334800)  # EDT midnight to EST midnight
    lim = cellrate.Limiter("1000000/month", algorithm="calendar", tz=zone)
    d = lim.check(10, now=1636261200)
    assert (d.remaining, d.reset_after, d.limit) == (999990, end - 1636261200, 1000000)


def test_iso_weeks_start_on_monday() -> None:
    start, end = cellrate.calendar_period("UTC", "week", now=1704067200)  # Mon 2024-01-01
    assert (start, end) == (1704067200, 1704672000)
    start, _ = cellrate.calendar_period("UTC", "week", now=1704067199)  # Sun 2023-12-31
    assert start == 1703462400  # Mon 2023-12-25


def test_composes_with_a_rate_as_several_limits() -> None:
    per_minute = cellrate.Limiter("2/minute", algorithm="fixed_window")
    quota = cellrate.Limiter("3/month", algorithm="calendar", tz="Asia/Kolkata")
    now = 1700000000.0
    assert cellrate.check_all([per_minute, quota], now=now).allowed
    assert cellrate.check_all([per_minute, quota], now=now).allowed
    refused = cellrate.check_all([per_minute, quota], now=now)
    assert not refused.allowed and refused.retry_after == 40.0  # the minute's end
    assert cellrate.check_all([per_minute, quota], now=now + 60).allowed
    refused = cellrate.check_all([per_minute, quota], now=now + 120)
    _, month_end = cellrate.calendar_period("Asia/Kolkata", "month", now=now)
    assert not refused.allowed and refused.retry_after == month_end - now - 120
    assert per_minute.peek(now=now + 120).remaining == 1  # the refusal took nothing (peek: 1)


def test_a_live_change_keeps_the_count_and_the_zone() -> None:
    lim = cellrate.Limiter("10/day", algorithm="calendar", tz="Pacific/Chatham")
    now = 1700000000.0
    lim.check(6, now=now)
    lim.reconfigure("8/day", now=now)
    assert lim.peek(now=now).remaining == 1  # 6 used, and the peek's 1
    _, end = cellrate.calendar_period("Pacific/Chatham", "day", now=now)
    assert lim.peek(now=now).reset_after == end - now
    assert "Pacific/Chatham" in repr(lim)


def test_default_zone_is_utc_and_repr_reads_back() -> None:
    lim = cellrate.Limiter("5/3months", algorithm="calendar")
    assert repr(lim) == "cellrate.Limiter(rate='5/3month', algorithm='calendar', tz='UTC')"
    d = lim.check(now=1700000000)  # 2023-11-14: the quarter October to December
    assert d.reset_after == 1704067200 - 1700000000


@pytest.mark.parametrize(("kwargs", "status", "param"), [
    ({"rate": "3/day", "algorithm": "calendar", "tz": "Mars/Olympus_Mons"}, "E_TZ", "tz"),
    ({"rate": "3/day", "algorithm": "calendar", "tz": "../../etc/passwd"}, "E_TZ", "tz"),
    ({"rate": "3/minute", "algorithm": "calendar"}, "E_CALENDAR_PERIOD", "rate"),
    ({"rate": "3/11years", "algorithm": "calendar"}, "E_CALENDAR_PERIOD", "rate"),
    ({"rate": "0/day", "algorithm": "calendar"}, "E_CALENDAR_AMOUNT", "rate"),
    ({"rate": "2.5/day", "algorithm": "calendar"}, "E_CALENDAR_AMOUNT", "rate"),
    ({"rate": 3, "algorithm": "calendar"}, "E_CALENDAR_PERIOD", "rate"),
    ({"rate": "3/month"}, "E_RATE_CALENDAR_ALGORITHM", "algorithm"),
    ({"rate": "3/second", "tz": "UTC"}, "E_TZ_ALONE", "tz"),
    ({"rate": "3/day", "algorithm": "calendar", "burst": 3}, "E_BURST_WINDOW", "burst"),
])
def test_bad_input_in_the_cores_words(kwargs: dict, status: str, param: str) -> None:
    with pytest.raises(cellrate.InvalidArgument) as caught:
        cellrate.Limiter(**kwargs)
    assert str(caught.value) == STATUS[status]
    assert str(caught.value).startswith(param)


def test_calendar_period_refuses_bad_input() -> None:
    with pytest.raises(cellrate.InvalidArgument, match="^tz must be"):
        cellrate.calendar_period("Nowhere/Town", "day")
    with pytest.raises(cellrate.InvalidArgument, match="^rate: a calendar quota counts"):
        cellrate.calendar_period("UTC", "fortnight")
    start, end = cellrate.calendar_period("UTC", "year")
    assert start <= cellrate.calendar_period("UTC", "day")[0] < end
    assert math.isfinite(end)


# --------------------------------------------------------------------------
# "100/minute;1000000/month": a rate and a calendar quota in one rate string


def test_a_rate_string_mixes_rates_and_calendar_quotas_in_the_web_policy():
    from cellrate.web import Policy

    policy = Policy("100/minute;1000000/month", tz="Europe/Berlin")
    per_minute, per_month = (limit.store for limit in policy.limits)
    assert per_minute.algorithm == "gcra"
    assert repr(per_month) == ("cellrate.KeyedLimiter(rate='1000000/month', algorithm='calendar', "
                               f"tz='Europe/Berlin', capacity={per_month.capacity})")
    now = 1700000000  # 2023-11-14 22:13 UTC; the month ends 2023-12-01 00:00 CET
    decision = cellrate.check_all([(per_minute, "k"), (per_month, "k")], 50, now=now)
    assert decision.allowed
    month = per_month.peek("k", now=now)
    assert (month.remaining, month.reset_after) == (999949, 1385200.0)  # after one more
    # with a zone, a day is Berlin's day; hours stay a rate
    daily = Policy("10/second;5000/day;1000/24h", tz="Europe/Berlin")
    assert [limit.store.algorithm for limit in daily.limits] == ["gcra", "calendar", "gcra"]
    # without one, a day stays a rate and a month is UTC's
    utc = Policy("5000/day;10/month")
    assert [limit.store.algorithm for limit in utc.limits] == ["gcra", "calendar"]
    assert "tz='UTC'" in repr(utc.limits[1].store)
    # reconfigure keeps the parts' kinds
    policy.reconfigure("200/minute;2000000/month")
    assert per_month.rate == 2000000 and per_month.algorithm == "calendar"


def test_the_decorator_makes_a_calendar_quota_of_a_month():
    calls = []

    @cellrate.limit("100/minute;2/month", burst=10, key=lambda user: user, block=False)
    def work(user: str) -> None:
        calls.append(user)

    work("a")
    work("a")
    with pytest.raises(cellrate.RateLimited):
        work("a")
    assert calls == ["a", "a"]


def test_a_mix_that_cannot_be_built_names_its_parameter():
    from cellrate.web import Policy

    cases = [
        (("100/minute;1.5/month",), {}, "limit", "E_CALENDAR_AMOUNT"),
        (("100/minute;10/121 months",), {}, "limit", "E_CALENDAR_PERIOD"),
        (("100/minute;1000/day",), {"tz": "Europe/Berlin", "burst": 10}, None, None),
        (("100/minute;1000/month",), {"tz": "Mars/Olympus_Mons"}, "tz", "E_TZ"),
        (("100/minute;1000/24h",), {"tz": "Europe/Berlin"}, "tz", "E_TZ_RATES"),
        (("100/minute",), {"tz": ""}, "tz", "E_TZ"),
    ]
    for args, options, param, status in cases:
        if status is None:
            Policy(*args, **options)  # burst is the rates' own
            continue
        with pytest.raises(cellrate.InvalidArgument) as caught:
            Policy(*args, **options)
        assert caught.value.param == param, (args, options)
        assert str(caught.value).endswith(STATUS[status]), (args, options, str(caught.value))


# A child whose system zoneinfo is an empty TZDIR: the zones come from the tzdata
# package (or from nowhere, with BLOCK_TZDATA) and each line of bounds it prints
# is compared with the vectors (the machine's zoneinfo, through Python's zoneinfo).
TZDATA_CHILD = """
import sys
if sys.argv[1] == "blocked":
    sys.modules["tzdata"] = None  # as if the package were not installed
import cellrate
for line in sys.stdin:
    zone, period, now = line.split("|")
    try:
        start, end = cellrate.calendar_period(zone, period, now=int(now) / 1e9)
        print(round(start * 1e9), round(end * 1e9))
    except cellrate.CellrateError as error:
        print(f"{error.param}|{error}")
"""


def _zones_without_zoneinfo(tmp_path: Path, queries: list[tuple[str, str, int]],
                            blocked: bool) -> list[str]:
    import os
    import subprocess
    import sys

    env = {**os.environ, "TZDIR": str(tmp_path)}  # an empty directory: no zone there
    lines = "".join(f"{zone}|{period}|{now}\n" for zone, period, now in queries)
    out = subprocess.run([sys.executable, "-c", TZDATA_CHILD, "blocked" if blocked else "open"],
                         input=lines, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_the_tzdata_package_serves_a_system_without_the_zone(tmp_path: Path) -> None:
    """The Python face hands the core the tzdata package's bytes of a zone the
    system's zoneinfo (TZDIR here) does not hold: the same bounds as the vectors."""
    pytest.importorskip("tzdata")
    queries = [(zone, period, now) for zone, period, now, _, _ in BOUNDS if zone != "UTC"]
    got = _zones_without_zoneinfo(tmp_path, queries, blocked=False)
    wrong = [(query, line) for query, line, (*_, start, end) in
             zip(queries, got, [b for b in BOUNDS if b[0] != "UTC"]) if line != f"{start} {end}"]
    assert len(got) == len(queries) > 5000 and not wrong, wrong[:5]
    # an unknown zone, or a name no file may have, is still an error naming tz
    unknown = _zones_without_zoneinfo(
        tmp_path, [("Mars/Olympus_Mons", "day", 0), ("../zoneinfo/UTC", "day", 0),
                   ("Europe", "day", 0)], blocked=False)
    assert unknown == [f"tz|{STATUS['E_TZ']}"] * 3


def test_without_the_tzdata_package_a_zone_the_system_lacks_names_tz(tmp_path: Path) -> None:
    assert _zones_without_zoneinfo(tmp_path, [("Europe/Berlin", "day", 0)],
                                   blocked=True) == [f"tz|{STATUS['E_TZ']}"]
