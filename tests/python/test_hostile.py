"""Shared regions and arguments under hostile conditions, from Python: a
dangling link at the path, a full file system, a damaged stripe lock, huge
rate strings, and bad arguments that must name their parameter.

Cases that could hang or kill the interpreter (they did, before they were
fixed) run in a child interpreter under a timeout, so a regression is a
failed test, not a stuck or dead test run."""

import errno
import pathlib
import subprocess
import sys
import textwrap

import pytest

import cellrate

REPO = pathlib.Path(__file__).resolve().parents[2]
LOCKS_OFFSET = 320  # the first stripe lock of a region (docs/design.md §5)


def run_child(code, timeout=30):
    """Runs `code` in a fresh interpreter; returns (returncode, stdout+stderr)."""
    try:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung for {timeout} s")
    return done.returncode, done.stdout + done.stderr


def test_dangling_link_is_refused_naming_shared(region_dir):
    link = region_dir / "r"
    link.symlink_to(region_dir / "nowhere")
    code, out = run_child(f"""
        import cellrate
        try:
            cellrate.Limiter("10/s", shared={str(link)!r})
        except ValueError as exc:
            print("REFUSED", exc.param, exc)
        """)
    assert code == 0, out
    assert "REFUSED shared" in out and "symbolic link" in out, out
    assert sorted(p.name for p in region_dir.iterdir()) == ["r"]  # no temp file


@pytest.fixture
def small_fs(region_dir):
    """A 1 MB tmpfs, mounted for the test (skipped where mounting is not permitted)."""
    mount_point = region_dir / "small-fs"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "none", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a 1 MB tmpfs (needs root or CAP_SYS_ADMIN): "
                    + done.stderr.strip())
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def test_full_file_system_is_oserror_enospc(small_fs):
    path = small_fs / "r"
    code, out = run_child(f"""
        import cellrate
        try:
            cellrate.KeyedLimiter("10/s", capacity=100000, shared={str(path)!r})
        except OSError as exc:
            print("OSERROR", exc.errno, exc.filename)
        """)
    assert code == 0, f"the child died (exit {code}): {out}"
    assert f"OSERROR {errno.ENOSPC} {path}" in out, out
    assert list(small_fs.iterdir()) == []  # nothing holds the space
    small = cellrate.Limiter("10/s", shared=str(small_fs / "small"))  # a small one fits
    assert small.allow()


def test_damaged_stripe_lock_does_not_hang(region_dir):
    path = region_dir / "lock"
    cellrate.KeyedLimiter("10/s", capacity=1, shared=str(path))
    with open(path, "r+b") as region:
        region.seek(LOCKS_OFFSET)
        region.write(b"\x01")
    code, out = run_child(f"""
        import cellrate
        keyed = cellrate.KeyedLimiter("10/s", capacity=1, shared={str(path)!r})
        print("ADMITTED", keyed.allow("a-new-key", now=5.0))
        """, timeout=20)
    assert code == 0, out
    assert "ADMITTED True" in out, out


def test_long_region_names(region_dir):
    for length in range(245, 256):
        path = region_dir / ("n" * length)
        lim = cellrate.Limiter("10/s", shared=str(path))
        assert lim.allow(now=1.0)
        path.unlink()


def test_huge_decimals_are_refused_naming_rate():
    text = "0." + "0" * 1_000_000 + "1/s"
    with pytest.raises(ValueError) as info:
        cellrate.Limiter(text)
    assert info.value.param == "rate"


def holder_word(pid):
    """A stripe lock held by process `pid` (docs/design.md §5)."""
    return ((pid << 32) | (~pid & 0xFFFFFFFF)).to_bytes(8, "little")


def test_living_lock_holder_is_a_bounded_timeout(region_dir):
    path = region_dir / "held"
    keyed = cellrate.KeyedLimiter("10/s", capacity=1, shared=str(path))
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(path, "r+b") as region:
            region.seek(LOCKS_OFFSET)
            region.write(holder_word(holder.pid))
        with pytest.raises(TimeoutError) as info:
            keyed.allow("a-new-key", now=5.0)
        assert info.value.param == "shared"
        assert "lock" in str(info.value)
        # check_all reports it too, never the admission it could not store,
        # and gives back the unit it took from the other limit.
        other = cellrate.Limiter(10, burst=10)
        with pytest.raises(TimeoutError):
            cellrate.check_all([(keyed, "a-new-key"), other], now=5.0)
        assert other.peek(0, now=5.0).remaining == 10
    finally:
        holder.kill()
        holder.wait()
    assert keyed.allow("a-new-key", now=5.0)  # its holder is gone: taken over


@pytest.mark.parametrize("shared", ["/dev/shm/a\0b", b"/dev/shm/a\0b", "/dev/shm/\ud800"])
def test_unusable_shared_path_names_shared(shared):
    with pytest.raises(ValueError) as info:
        cellrate.Limiter("10/s", shared=shared)
    assert info.value.param == "shared"
    assert "NUL" in str(info.value) or "surrogate" in str(info.value)


def test_surrogates_name_their_parameter():
    keyed = cellrate.KeyedLimiter("10/s")
    cases = [
        ("key", lambda: keyed.allow("\ud800")),
        ("rate", lambda: cellrate.Limiter("10/\ud800s")),
        ("clock", lambda: cellrate.Limiter("10/s", clock="\udfff")),
        ("algorithm", lambda: cellrate.Limiter("10/s", algorithm="gcra\ud800")),
    ]
    for param, call in cases:
        with pytest.raises(ValueError) as info:
            call()
        assert info.value.param == param
        assert isinstance(info.value.__cause__, UnicodeEncodeError)


def test_shared_mode_without_shared_is_an_error():
    for make in (cellrate.Limiter, cellrate.KeyedLimiter):
        with pytest.raises(ValueError) as info:
            make("10/s", shared_mode=0o600)
        assert info.value.param == "shared_mode"
        assert "shared" in str(info.value)


@pytest.mark.parametrize("args, exc, param", [
    ((1, 1, 0.0, 0.0, 1), TypeError, "allowed"),
    (("yes", 1, 0.0, 0.0, 1), TypeError, "allowed"),
    ((True, -1, 0.0, 0.0, 1), ValueError, "remaining"),
    ((True, 1, -0.5, 0.0, 1), ValueError, "retry_after"),
    ((True, 1, float("nan"), 0.0, 1), ValueError, "retry_after"),
    ((True, 1, 0.0, -1.0, 1), ValueError, "reset_after"),
    ((True, 1, 0.0, float("inf"), 1), ValueError, "reset_after"),
    ((True, 1, 0.0, 0.0, -1), ValueError, "limit"),
    ((True, 1, 0.0, 0.0, 1, -1.0), ValueError, "window"),
    ((True, 1, 0.0, 0.0, 1, float("nan")), ValueError, "window"),
])
def test_decision_fields_are_checked(args, exc, param):
    with pytest.raises(exc) as info:
        cellrate.Decision(*args)
    assert info.value.param == param


def test_decision_accepts_what_a_store_returns():
    d = cellrate.Decision(False, 0, float("inf"), 0.0, 0)
    assert d.allowed is False and d.retry_after == float("inf")
