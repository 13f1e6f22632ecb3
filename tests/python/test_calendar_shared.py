"""Calendar quotas in shared regions (docs/design/calendar.md, docs/shared.md): the
region's records name the zone and the period, an opener with another calendar is
a live change (or refused), the counts are wall time and survive a reboot and a
SIGKILL of the processes deciding on a region on a disk path."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

cellrate = pytest.importorskip("cellrate")

NOW = 1700000000  # 2023-11-14 22:13 UTC; Berlin's month ends 2023-12-01 00:00 CET
BERLIN_MONTH_END = 1701385200
VERSION_OFFSET = 8
BOOT_OFFSET = 88


def test_a_shared_limiter_holds_a_monthly_quota(tmp_path: Path) -> None:
    path = str(tmp_path / "month")
    a = cellrate.Limiter("5/month", algorithm="calendar", tz="Europe/Berlin", shared=path)
    b = cellrate.Limiter("5/month", algorithm="calendar", tz="Europe/Berlin", shared=path)
    assert a.check(3, now=NOW).allowed
    decision = b.check(2, now=NOW)
    assert decision.allowed and decision.remaining == 0
    assert decision.reset_after == BERLIN_MONTH_END - NOW
    refused = a.check(1, now=NOW)
    assert not refused.allowed and refused.retry_after == BERLIN_MONTH_END - NOW
    # the month resets at local midnight on the 1st: 23:00 UTC on 2023-11-30
    assert not b.check(1, now=BERLIN_MONTH_END - 1).allowed
    assert b.check(5, now=BERLIN_MONTH_END).allowed
    assert repr(b) == "cellrate.Limiter(rate='5/month', algorithm='calendar', tz='Europe/Berlin')"


def test_a_shared_keyed_table_holds_a_quota_per_key(tmp_path: Path) -> None:
    path = str(tmp_path / "keys")
    one = cellrate.KeyedLimiter("3/day", algorithm="calendar", tz="Asia/Kolkata", capacity=64,
                                shared=path)
    two = cellrate.KeyedLimiter("3/day", algorithm="calendar", tz="Asia/Kolkata", capacity=64,
                                shared=path)
    assert one.check("k", 3, now=NOW).allowed
    assert not two.check("k", 1, now=NOW).allowed
    assert two.check("other", 1, now=NOW).remaining == 2
    start, end = cellrate.calendar_period("Asia/Kolkata", "day", now=NOW)
    assert two.check("k", 1, now=end).allowed  # local midnight at +05:30


def test_several_limits_as_one_in_regions(tmp_path: Path) -> None:
    from cellrate.web import Policy

    shared = str(tmp_path / "app")
    os.mkdir(shared)
    first = Policy("100/minute;1000/month", tz="Europe/Berlin", shared=shared)
    second = Policy("100/minute;1000/month", tz="Europe/Berlin", shared=shared)
    first_month = first.limits[1].store
    second_month = second.limits[1].store
    assert first_month.algorithm == "calendar"
    assert cellrate.check_all([(limit.store, "key") for limit in first.limits], 60,
                              now=NOW).allowed
    assert cellrate.check_all([(limit.store, "key") for limit in second.limits], 30,
                              now=NOW).allowed
    assert second_month.peek("key", 0, now=NOW).remaining == 910
    assert first_month.peek("key", 0, now=NOW).remaining == 910


def test_another_zone_is_a_live_change_that_carries_the_count(tmp_path: Path) -> None:
    # a change happens at the opener's clock: this test decides on it too
    path = str(tmp_path / "zone")
    berlin = cellrate.KeyedLimiter("10/month", algorithm="calendar", tz="Europe/Berlin",
                                   capacity=16, shared=path)
    assert berlin.check("k", 4).allowed
    with pytest.warns(RuntimeWarning, match="tz='Europe/Berlin'"):
        york = cellrate.KeyedLimiter("10/month", algorithm="calendar", tz="America/New_York",
                                     capacity=16, shared=path)
    # the count moves to the new calendar's period holding now (§8, as reconfigure does)
    decision = york.peek("k", 0)
    _, york_end = cellrate.calendar_period("America/New_York", "month")
    assert decision.remaining == 6
    assert abs(decision.reset_after - (york_end - time.time())) < 600
    # the first opener follows the region from its next decision
    assert abs(berlin.peek("k", 0).reset_after - (york_end - time.time())) < 600
    assert "America/New_York" in repr(berlin)
    with warnings.catch_warnings():  # the same calendar again: no change
        warnings.simplefilter("error")
        cellrate.KeyedLimiter("10/month", algorithm="calendar", tz="America/New_York",
                              capacity=16, shared=path)


@pytest.mark.parametrize("kwargs", [
    {"rate": "10/month", "tz": "Asia/Kolkata"},
    {"rate": "10/3 months", "tz": "Europe/Berlin"},
    {"rate": "10/year", "tz": "Europe/Berlin"},
])
def test_another_calendar_is_refused_with_on_change_refuse(tmp_path: Path, kwargs: dict) -> None:
    path = str(tmp_path / "refuse")
    cellrate.Limiter("10/month", algorithm="calendar", tz="Europe/Berlin", shared=path)
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.Limiter(algorithm="calendar", shared=path, on_change="refuse", **kwargs)
    assert info.value.param == "shared"
    assert str(info.value).startswith(
        "shared: the region was made with another time zone or calendar period")
    with pytest.raises(cellrate.InvalidArgument, match="another rate"):
        cellrate.Limiter("11/month", algorithm="calendar", tz="Europe/Berlin", shared=path,
                         on_change="refuse")


def test_a_region_names_at_most_16_zones(tmp_path: Path) -> None:
    path = str(tmp_path / "zones")
    zones = ["UTC", "Europe/Berlin", "Europe/Paris", "Europe/London", "Europe/Madrid",
             "Europe/Rome", "Europe/Vienna", "Europe/Oslo", "Asia/Kolkata", "Asia/Tokyo",
             "America/New_York", "America/Chicago", "America/Denver", "America/Santiago",
             "Australia/Lord_Howe", "Pacific/Chatham"]
    limiter = cellrate.Limiter("10/day", algorithm="calendar", shared=path)
    assert limiter.check(4).allowed  # each change carries the count, on the clock
    for zone in zones[1:]:
        limiter.reconfigure("10/day", tz=zone)
    with pytest.raises(cellrate.InvalidArgument) as info:
        limiter.reconfigure("10/day", tz="Asia/Singapore")
    assert str(info.value).startswith("shared: a region holds at most 16 time zones")
    limiter.reconfigure("10/day", tz="Europe/Berlin")  # a zone it names: fine
    assert limiter.check().remaining == 5


def test_a_region_of_layout_10_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old"
    cellrate.Limiter("10/day", algorithm="calendar", shared=str(path))
    data = bytearray(path.read_bytes())
    data[VERSION_OFFSET:VERSION_OFFSET + 4] = (10).to_bytes(4, sys.byteorder)
    path.write_bytes(bytes(data))
    with pytest.raises(cellrate.InvalidArgument, match="another layout version"):
        cellrate.Limiter("10/day", algorithm="calendar", shared=str(path))


def _other_boot(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(BOOT_OFFSET)
        f.write(b"00000000-0000-0000-0000-000000000000\n".ljust(48, b"\0"))


def test_a_reboot_keeps_a_calendar_regions_counts(tmp_path: Path) -> None:
    keyed_path, single_path = tmp_path / "keyed", tmp_path / "single"
    keyed = cellrate.KeyedLimiter("10/month", algorithm="calendar", tz="Europe/Berlin",
                                  capacity=16, shared=str(keyed_path))
    single = cellrate.Limiter("10/month", algorithm="calendar", shared=str(single_path))
    assert keyed.check("k", 7, now=NOW).allowed and single.check(6, now=NOW).allowed
    del keyed, single
    _other_boot(keyed_path)
    _other_boot(single_path)
    keyed = cellrate.KeyedLimiter("10/month", algorithm="calendar", tz="Europe/Berlin",
                                  capacity=16, shared=str(keyed_path))
    single = cellrate.Limiter("10/month", algorithm="calendar", shared=str(single_path))
    assert keyed.peek("k", 0, now=NOW).remaining == 3
    assert single.peek(0, now=NOW).remaining == 4
    # a rate limit's region is still reset (its times are the old boot's clock)
    gcra_path = tmp_path / "gcra"
    gcra = cellrate.KeyedLimiter(10, capacity=16, shared=str(gcra_path))
    assert gcra.check("k", 10).allowed
    del gcra
    _other_boot(gcra_path)
    assert cellrate.KeyedLimiter(10, capacity=16, shared=str(gcra_path)).check("k", 10).allowed


CHILD = textwrap.dedent("""
    import os, sys, cellrate
    keyed = cellrate.KeyedLimiter("{rate}", algorithm="calendar", tz="Europe/Berlin",
                                  capacity=64, shared=sys.argv[1])
    out = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    print("ready", file=sys.stderr, flush=True)
    while True:
        if keyed.allow("key"):
            os.write(out, b"1\\n")  # one write(2), after the admission
""")


def test_a_sigkilled_process_loses_no_admission(tmp_path: Path) -> None:
    quota = 50_000
    path, log = tmp_path / "disk-region", tmp_path / "admitted"
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(rate=f"{quota}/month"),
                              str(path), str(log)], stderr=subprocess.PIPE)
    try:
        assert child.stderr is not None
        assert child.stderr.readline().strip() == b"ready"
        while not log.exists() or log.stat().st_size < 2 * 2000:  # mid-traffic
            pass
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    by_child = log.read_text().count("1\n")  # at most one admission has no line yet
    keyed = cellrate.KeyedLimiter(f"{quota}/month", algorithm="calendar", tz="Europe/Berlin",
                                  capacity=64, shared=str(path))
    used = quota - keyed.peek("key", 0).remaining
    assert by_child <= used <= by_child + 1 and used < quota
    after = 0
    while keyed.allow("key"):
        after += 1
    assert used + after == quota and by_child + after <= quota


def test_sync_writes_the_region_out_and_is_judged_by_the_core(tmp_path: Path) -> None:
    path = str(tmp_path / "synced")
    keyed = cellrate.KeyedLimiter("100/month", algorithm="calendar", capacity=16, shared=path,
                                  sync=0.001)
    single = cellrate.Limiter("100/month", algorithm="calendar", shared=path + "-one", sync=5)
    for _ in range(3):
        time.sleep(0.002)
        assert keyed.allow("k") and single.allow()
    del keyed, single  # each msyncs as it closes
    again = cellrate.KeyedLimiter("100/month", algorithm="calendar", capacity=16, shared=path)
    assert again.peek("k", 0).remaining == 97
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(cellrate.InvalidArgument) as info:
            cellrate.Limiter("100/month", algorithm="calendar", shared=path + "-one", sync=bad)
        assert str(info.value).startswith("sync must be a number of seconds > 0")
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.KeyedLimiter("100/month", algorithm="calendar", shared=path, sync="1s")
    assert info.value.param == "sync"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.Limiter(10, sync=1)
    assert str(info.value) == "sync is given only with shared= (a region on a disk path)"


# A child that decides 40 times on a region with sync=argv[2] at argv[1]: a
# keyed store made by hand, or one a web policy made in its shared= directory.
SYNCED_DECIDERS = {
    "KeyedLimiter": """
        keyed = cellrate.KeyedLimiter("1000/month", algorithm="calendar", capacity=16,
                                      shared=sys.argv[1], sync=float(sys.argv[2]))
    """,
    "Policy": """
        import cellrate.web
        policy = cellrate.web.Policy("1000/month", shared=sys.argv[1], sync=float(sys.argv[2]))
        keyed = policy.limits[0].store
    """,
}


@pytest.mark.parametrize("maker", sorted(SYNCED_DECIDERS))
def test_a_decision_makes_the_msync_when_it_is_due(tmp_path: Path, maker: str) -> None:
    """strace counts the msync(2) calls of a child that decides with sync=."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    script = "import sys, time, cellrate\n" + textwrap.dedent(SYNCED_DECIDERS[maker]) + \
        textwrap.dedent("""
        for _ in range(40):
            keyed.allow("k")
            time.sleep(0.005)
        keyed.reset("k")
        sys.exit(0)
    """)
    counts = {}
    for sync in ("0.001", "3600"):
        out = subprocess.run([strace, "-f", "-e", "trace=msync", "-o", str(tmp_path / sync),
                              sys.executable, "-c", script, str(tmp_path / f"r{sync}"), sync],
                             capture_output=True, timeout=120)
        if out.returncode != 0:
            pytest.skip(f"strace cannot trace here: {out.stderr.decode()[-200:]}")
        counts[sync] = (tmp_path / sync).read_text().count("msync(")
    assert counts["0.001"] >= 20  # about one per decision 5 ms apart (and one at the close)
    assert counts["3600"] <= 1  # the close's, if the object was freed before exit


def test_a_policy_gives_sync_to_the_stores_of_its_shared_directory(tmp_path: Path) -> None:
    """sync= of a web policy reaches the stores it makes in its shared= directory:
    the core judges it there (E_SYNC, E_SYNC_SHARED), naming sync."""
    from cellrate.web import Policy

    shared = str(tmp_path / "policy")
    policy = Policy("5/month;100/minute", shared=shared, sync=3600)
    first, second = (one.store for one in policy.limits)
    assert first.allow("k") and second.allow("k")
    assert sorted(os.listdir(shared)) == ["default", "default#1"]
    for bad in (0, -1, float("nan")):
        with pytest.raises(cellrate.InvalidArgument) as info:
            Policy("5/month", shared=str(tmp_path / f"bad{bad}"), sync=bad)
        assert info.value.param == "sync"
        assert str(info.value).startswith("sync must be a number of seconds > 0")
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        Policy("5/month", shared=shared, sync="1h")
    assert info.value.param == "sync"
    with pytest.raises(cellrate.InvalidArgument) as info:
        Policy("5/month", sync=60)
    assert str(info.value) == "sync is given only with shared= (a region on a disk path)"
    with pytest.raises(cellrate.InvalidArgument) as info:  # no limit here is made from a rate
        Policy(cellrate.KeyedLimiter(5), sync=60)
    assert info.value.param == "sync" and "applies to limits given as a rate" in str(info.value)
