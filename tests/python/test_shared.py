"""Shared regions from Python: one limit across processes (Python and Lua),
refusals that name what differs, file modes, fork inheritance."""

import os
import pathlib
import shutil
import stat
import subprocess
import sys
import warnings

import pytest

import cellrate
from conftest import reap, run_forked

REPO = pathlib.Path(__file__).resolve().parents[2]
LUA_MODULE = REPO / "build" / "lua5.4" / "cellrate.so"
FROZEN = 5000.0  # seconds: every process decides at this one instant


def count_admissions(kind, path, burst, key, attempts, queue):
    if kind == "keyed":
        lim = cellrate.KeyedLimiter(1, burst=burst, capacity=64, shared=path)
        admitted = sum(lim.allow(key, now=FROZEN) for _ in range(attempts))
    else:
        lim = cellrate.Limiter(1, burst=burst, shared=path)
        admitted = sum(lim.allow(now=FROZEN) for _ in range(attempts))
    queue.put(admitted)


@pytest.mark.parametrize("kind", ["limiter", "keyed"])
def test_four_processes_admit_exactly_burst(region_dir, kind):
    path = str(region_dir / kind)
    counts = run_forked(count_admissions, [(kind, path, 37, "k", 500)] * 4)
    assert sum(counts) == 37


def test_two_objects_in_one_process_share(region_dir):
    path = region_dir / "same"
    a = cellrate.KeyedLimiter("10/s", burst=3, capacity=10, shared=path)
    b = cellrate.KeyedLimiter("600/minute", burst=3, capacity=10, shared=str(path))
    results = [x.allow("k", now=FROZEN) for x in (a, b, a, b, a)]
    assert results == [True, True, True, False, False]
    assert len(a) == len(b) == 1
    b.reset("k")
    assert a.allow("k", now=FROZEN)


@pytest.mark.skipif(shutil.which("lua5.4") is None, reason="lua5.4 is not installed")
def test_python_and_lua_processes_share_one_region(region_dir):
    assert LUA_MODULE.exists(), "build the Lua module first (make lua)"
    path = str(region_dir / "mixed")
    burst = 29
    script = (
        f'package.cpath = "{LUA_MODULE.parent}/?.so;" .. package.cpath\n'
        'local cellrate = require "cellrate"\n'
        f'local keyed = cellrate.keyed(1, {{ burst = {burst}, capacity = 64, shared = "{path}" }})\n'
        'local n = 0\n'
        f'for _ = 1, 500 do if keyed:allow("shared-key", 1, {FROZEN}) then n = n + 1 end end\n'
        'print(n)\n'
    )
    # Create the region first from Python, then race two Lua and two Python processes.
    cellrate.KeyedLimiter(1, burst=burst, capacity=64, shared=path)
    lua = [subprocess.Popen(["lua5.4", "-e", script], stdout=subprocess.PIPE, text=True)
           for _ in range(2)]
    python_counts = run_forked(count_admissions, [("keyed", path, burst, "shared-key", 500)] * 2)
    lua_counts = []
    for proc in lua:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        lua_counts.append(int(out))
    assert sum(python_counts) + sum(lua_counts) == burst


def test_fork_inherits_an_open_region(region_dir):
    lim = cellrate.Limiter(1, burst=4, shared=region_dir / "forked")
    children = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            admitted = sum(lim.allow(now=FROZEN) for _ in range(10))
            os._exit(admitted)
        children.append(pid)
    total = 0
    for pid in children:
        status = reap(pid)
        total += os.waitstatus_to_exitcode(status)
    assert total == 4
    assert not lim.allow(now=FROZEN)


def test_modes(region_dir):
    cellrate.Limiter(1, shared=region_dir / "default")
    assert stat.S_IMODE(os.stat(region_dir / "default").st_mode) == 0o600
    cellrate.Limiter(1, shared=region_dir / "group", shared_mode=0o640)
    assert stat.S_IMODE(os.stat(region_dir / "group").st_mode) == 0o640


def expect_refusal(words, make):
    with pytest.raises(cellrate.InvalidArgument) as info:
        make()
    assert info.value.param == "shared"
    assert words in str(info.value)
    return info.value


def test_refusals_name_what_differs(region_dir):
    path = region_dir / "refuse"
    cellrate.KeyedLimiter(10, burst=5, capacity=100, shared=path)
    err = expect_refusal("another burst", lambda: cellrate.KeyedLimiter(
        10, burst=6, capacity=100, shared=path, on_change="refuse"))
    assert str(path) in str(err)
    expect_refusal("another rate", lambda: cellrate.KeyedLimiter(
        20, burst=5, capacity=100, shared=path, on_change="refuse"))
    expect_refusal("another algorithm", lambda: cellrate.KeyedLimiter(
        10, capacity=100, shared=path, algorithm="fixed_window"))
    expect_refusal("another capacity", lambda: cellrate.KeyedLimiter(
        10, burst=5, capacity=101, shared=path))
    expect_refusal("another kind", lambda: cellrate.Limiter(10, burst=5, shared=path))


def test_refusals_of_damaged_files(region_dir):
    path = region_dir / "damaged"
    make = lambda: cellrate.KeyedLimiter(10, burst=5, capacity=100, shared=path)  # noqa: E731
    make()
    data = bytearray(path.read_bytes())

    path.write_bytes(bytes(data[:100]))
    expect_refusal("too short", make)

    path.write_bytes(b"x" * len(data))
    expect_refusal("not a cellrate region", make)

    wrong_version = bytearray(data)
    wrong_version[8] = 99
    path.write_bytes(bytes(wrong_version))
    expect_refusal("another layout version", make)

    corrupt = bytearray(data)
    corrupt[40] ^= 0xFF  # inside the checksummed header
    path.write_bytes(bytes(corrupt))
    expect_refusal("corrupt", make)

    path.write_bytes(bytes(data))
    make()  # the original bytes open again


def test_system_refusals_are_os_errors(region_dir):
    with pytest.raises(FileNotFoundError):
        cellrate.Limiter(1, shared=region_dir / "no-such-dir" / "region")
    if os.geteuid() != 0:
        pytest.skip("the permission check needs root to become another user")
    path = region_dir / "private"
    cellrate.Limiter(1, shared=path)  # mode 0600, owned by root
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            cellrate.Limiter(1, shared=path)
        except PermissionError:
            code = 0
        except BaseException:
            code = 2
        os._exit(code)
    status = reap(pid)
    assert os.waitstatus_to_exitcode(status) == 0


def test_bad_shared_arguments(region_dir):
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.Limiter(1, shared=42)
    assert info.value.param == "shared"
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.KeyedLimiter(1, shared=region_dir / "m", shared_mode="rw")
    assert info.value.param == "shared_mode"
    for mode in (-1, 0o1000, 10**30):
        with pytest.raises(cellrate.InvalidArgument) as info:
            cellrate.Limiter(1, shared=region_dir / "m", shared_mode=mode)
        assert info.value.param == "shared_mode"
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.KeyedLimiter(1, capacity=0, shared=region_dir / "c")
    assert info.value.param == "capacity"


def test_opening_with_another_limit_changes_the_regions(region_dir):
    path = region_dir / "change"
    # per hour: a busy machine's pauses between these lines refill nothing
    a = cellrate.KeyedLimiter(10, 3600, burst=10, capacity=100, shared=path)
    for _ in range(6):
        a.allow("k")
    with pytest.warns(RuntimeWarning, match=r"change's limit changed from cellrate.KeyedLimiter"
                      r"\(rate=10, period=3600, burst=10, capacity=100\) to cellrate.KeyedLimiter"
                      r"\(rate=100, period=3600, burst=20, capacity=100\)"):
        b = cellrate.KeyedLimiter(100, 3600, burst=20, capacity=100, shared=path)
    # the first object follows from its next decision: 6 of 20 used, this one more
    d = a.check("k")
    assert (d.allowed, d.limit, d.remaining) == (True, 20, 13)
    assert (a.rate, a.burst) == (100, 20)
    assert repr(a) == repr(b)
    # the same limit again changes nothing and says nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cellrate.KeyedLimiter(100, 3600, burst=20, capacity=100, shared=path)


def test_on_change_refuse_keeps_the_region(region_dir):
    path = region_dir / "kept"
    a = cellrate.Limiter(10, burst=10, shared=path)
    expect_refusal("another rate", lambda: cellrate.Limiter(
        20, burst=10, shared=path, on_change="refuse"))
    assert a.burst == 10 and a.rate == 10
    assert a.check(now=FROZEN).limit == 10
    with pytest.raises(cellrate.InvalidArgument, match="on_change must be 'apply' or 'refuse'") as info:
        cellrate.Limiter(10, shared=path, on_change="keep")
    assert info.value.param == "on_change"
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        cellrate.Limiter(10, shared=path, on_change=True)
    assert info.value.param == "on_change"


PHASED_PY = """
import sys, cellrate
lim = cellrate.KeyedLimiter(1, burst=10, capacity=64, shared=sys.argv[1])
for line in sys.stdin:
    print(sum(lim.allow("k", now=%r) for _ in range(300)), flush=True)
""" % FROZEN

PHASED_LUA = """
package.cpath = "%s/?.so;" .. package.cpath
local cellrate = require "cellrate"
local keyed = cellrate.keyed(1, { burst = 10, capacity = 64, shared = arg[1] })
for _ in io.lines() do
   local n = 0
   for _ = 1, 300 do if keyed:allow("k", 1, %r) then n = n + 1 end end
   print(n); io.stdout:flush()
end
""" % (LUA_MODULE.parent, FROZEN)


@pytest.mark.skipif(shutil.which("lua5.4") is None, reason="lua5.4 is not installed")
def test_python_and_lua_processes_follow_a_live_change(region_dir):
    """Two Python and two Lua processes keep deciding on one region while the
    limit changes under them: what they used carries, so the totals are
    exact (docs/design.md §5)."""
    assert LUA_MODULE.exists(), "build the Lua module first (make lua)"
    path = str(region_dir / "live")
    # this interpreter, and its environment: the cellrate these tests import
    procs = [subprocess.Popen([sys.executable, "-c", PHASED_PY, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    lua = PHASED_LUA.replace("arg[1]", '"%s"' % path)
    procs += [subprocess.Popen(["lua5.4", "-e", lua], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        def phase():
            for proc in procs:
                proc.stdin.write("go\n")
                proc.stdin.flush()
            return sum(int(proc.stdout.readline()) for proc in procs)

        assert phase() == 10  # everyone opened with burst 10: exactly 10
        changer = cellrate.KeyedLimiter(1, burst=10, capacity=64, shared=path)
        changer.reconfigure(2, burst=25, now=FROZEN)
        assert phase() == 15  # 10 used carry into a burst of 25
        changer.reconfigure(1, burst=12, now=FROZEN)
        assert phase() == 0  # 25 used of 12 at that instant: nothing more
        assert not changer.allow("k", now=FROZEN + 12.9)
        assert changer.allow("k", now=FROZEN + 14)  # 25 used at 1/s, 12 tolerated
    finally:
        for proc in procs:
            proc.stdin.close()
            proc.wait(timeout=60)
