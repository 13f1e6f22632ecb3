"""The cellrate command (python -m cellrate, and the console script when the
package is installed): inspect reads a live region and changes none of its
bytes; reset resets a key, or a limiter, with the region's own limit; a file
that is not a region, and a usage mistake, exit with status 2 and a message
naming the path, the file left byte for byte as it was."""

import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import uuid

import pytest

import cellrate
from test_web_servers import server_env


def run(*args, command=None):
    argv = command or [sys.executable, "-m", "cellrate"]
    return subprocess.run([*argv, *map(str, args)], capture_output=True, text=True,
                          env=server_env(), timeout=60)


@pytest.fixture
def shm():
    directory = pathlib.Path(f"/dev/shm/cellrate-test-cli-{uuid.uuid4().hex}")
    directory.mkdir()
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_inspect_a_keyed_region(shm):
    path = shm / "api"
    keyed = cellrate.KeyedLimiter("2/hour", capacity=64, shared=path)
    admitted = sum(keyed.allow(key) for key in ["a", "a", "a", "b", "c"])
    before = path.read_bytes()
    result = run("inspect", path, "--json")
    assert result.returncode == 0, result.stderr
    assert path.read_bytes() == before  # inspect never writes
    info = json.loads(result.stdout)
    assert info["kind"] == "keyed" and info["algorithm"] == "gcra"
    assert info["capacity"] == keyed.capacity and info["live_keys"] == 3 == len(keyed)
    assert isinstance(info["layout_version"], int) and isinstance(info["limit"], str)
    assert info["stats"]["admitted"] == admitted == 4
    assert info["stats"]["refused"] == 1
    assert info["stats"] == keyed.stats()
    text = run("inspect", path)
    assert text.returncode == 0, text.stderr
    assert path.read_bytes() == before
    assert str(path) in text.stdout and info["limit"] in text.stdout
    for words in ("live keys", "layout version", "capacity", "admitted", "refused"):
        assert words in text.stdout, text.stdout


def test_inspect_shows_the_plans_and_a_keys_plan_and_units(shm):
    path = shm / "tiers"
    keyed = cellrate.KeyedLimiter("5/hour", capacity=64, shared=path, plans={"pro": "20/hour"})
    assert all(keyed.allow("free") for _ in range(5))
    assert all(keyed.allow("paid", plan="pro") for _ in range(3))
    before = path.read_bytes()
    info = json.loads(run("inspect", path, "--json").stdout)
    assert info["plans"] == {"default": {"rate": 5.0, "period": 3600.0, "burst": 5},
                             "pro": {"rate": 20.0, "period": 3600.0, "burst": 20}}
    text = run("inspect", path).stdout
    assert re.search(r"pro +20 per 3600s, burst 20", text), text
    free = json.loads(run("inspect", path, "--key", "free", "--json").stdout)
    assert (free["plan"], free["used"], free["remaining"]) == ("default", 5, 0)
    assert free["limit"]["burst"] == 5
    paid = run("inspect", path, "--key", "paid")
    assert paid.returncode == 0, paid.stderr
    assert re.search(r"plan +pro \(20 per 3600s, burst 20\)", paid.stdout), paid.stdout
    assert re.search(r"used +3 of 20", paid.stdout) and re.search(r"remaining +17", paid.stdout)
    idle = json.loads(run("inspect", path, "--key", "never", "--json").stdout)
    assert idle["plan"] is None and idle["used"] == 0
    assert path.read_bytes() == before  # inspect --key never writes either
    # upgraded: the key carries its 5 units into pro (15 left before this one)
    assert keyed.allow("free", plan="pro")
    free = json.loads(run("inspect", path, "--key", "free", "--json").stdout)
    assert (free["plan"], free["used"], free["remaining"]) == ("pro", 6, 14)
    plain = shm / "plain"
    cellrate.Limiter("5/hour", shared=plain)
    refused = run("inspect", plain, "--key", "k")
    assert refused.returncode == 2 and "only a keyed rate limit's region" in refused.stderr
    assert "plans" not in json.loads(run("inspect", plain, "--json").stdout)


def test_inspect_a_limiter_and_a_concurrency_region(shm):
    lim = cellrate.Limiter("3/hour", shared=shm / "global")
    assert [lim.allow() for _ in range(4)] == [True] * 3 + [False]
    info = json.loads(run("inspect", shm / "global", "--json").stdout)
    assert info["kind"] == "limiter" and info["stats"]["refused"] == 1
    conc = cellrate.Concurrency(2, shared=shm / "workers")
    slot = conc.try_acquire()
    info = json.loads(run("inspect", shm / "workers", "--json").stdout)
    assert info["kind"] == "concurrency" and info["stats"]["in_flight"] == 1
    assert info["peak"] is False and info["stats"]["peak"] is None
    text = run("inspect", shm / "workers").stdout
    assert re.search(r"^  peak +no$", text, re.M) and not re.search(r"^    peak ", text, re.M)
    slot.release()
    tracked = cellrate.Concurrency(2, shared=shm / "tracked", peak=True)
    slots = [tracked.try_acquire(), tracked.try_acquire()]
    slots[0].release()
    info = json.loads(run("inspect", shm / "tracked", "--json").stdout)
    assert (info["peak"], info["stats"]["in_flight"], info["stats"]["peak"]) == (True, 1, 2)
    text = run("inspect", shm / "tracked").stdout
    assert re.search(r"^  peak +yes$", text, re.M) and re.search(r"^    peak +2$", text, re.M)
    slots[1].release()


def test_reset_a_key_and_a_limiter(shm):
    keyed = cellrate.KeyedLimiter("2/hour", shared=shm / "api")
    assert [keyed.allow("a") for _ in range(3)] == [True, True, False]
    assert not keyed.allow("b", 3)
    result = run("reset", shm / "api", "a")
    assert result.returncode == 0, result.stderr
    assert keyed.allow("a") and keyed.allow("a") and not keyed.allow("a")
    lim = cellrate.Limiter("1/hour", shared=shm / "global")
    assert lim.allow() and not lim.allow()
    assert run("reset", shm / "global").returncode == 0
    assert lim.allow()
    # the limit the region records is kept: a reset never changes it
    assert keyed.rate == 2 and lim.rate == 1
    # without KEY, every key of a keyed region
    keyed.allow("b", 2)
    assert len(keyed) == 2 and not keyed.allow("a") and not keyed.allow("b")
    result = run("reset", shm / "api")
    assert result.returncode == 0 and "every key" in result.stdout, result.stderr
    assert len(keyed) == 0 and keyed.allow("a", 2) and keyed.allow("b", 2)
    assert keyed.rate == 2


def test_inspect_lists_the_penalty_box_and_reset_lets_a_key_out(shm):
    path = shm / "api"
    keyed = cellrate.KeyedLimiter("1/hour", capacity=64, shared=path,
                                  penalty=cellrate.Penalty("2/hour", 600))
    long_key = "an-api-key-of-more-than-thirty-two-bytes"
    for key in ("abuser", long_key):
        assert [keyed.allow(key) for _ in range(3)] == [True, False, False]
    assert keyed.check("abuser").retry_after > 590  # banned: 600 s
    assert keyed.allow("fine") and not keyed.allow("fine")  # one refusal: no ban
    info = json.loads(run("inspect", path, "--json").stdout)
    assert info["penalty"] == {"after": 2, "within": 3600.0, "ban": 600.0, "max_ban": 600.0}
    assert info["stats"]["bans"] == 2 == keyed.stats()["bans"]
    banned = {entry["key"]: entry for entry in info["banned"]}
    assert set(banned) == {"abuser", long_key[:32]}
    assert banned[long_key[:32]]["key_length"] == len(long_key)
    assert 590 < banned["abuser"]["ban_left"] <= 600 and banned["abuser"]["level"] == 0
    text = run("inspect", path).stdout
    assert "a ban of 600s after 2 refusals within 3600s" in text, text
    assert "in the penalty box (2 keys banned now)" in text and "'abuser': " in text, text
    assert run("reset", path, "abuser").returncode == 0
    info = json.loads(run("inspect", path, "--json").stdout)
    assert [entry["key"] for entry in info["banned"]] == [long_key[:32]]
    assert keyed.allow("abuser")  # out of the box, its allowance back
    plain = json.loads(run("inspect", shm / "plain", "--json").stdout) if cellrate.Limiter(
        5, shared=shm / "plain") else None
    assert plain["penalty"] is None and plain["banned"] == [] and plain["stats"]["bans"] == 0


def test_reset_refuses_a_key_of_a_limiter_and_a_concurrency_region(shm):
    cellrate.KeyedLimiter(5, shared=shm / "api")
    cellrate.Limiter(5, shared=shm / "global")
    cellrate.Concurrency(2, shared=shm / "workers")
    for args in (("global", "key"), ("workers",)):
        path = shm / args[0]
        before = path.read_bytes()
        result = run("reset", path, *args[1:])
        assert result.returncode == 2, result
        assert str(path) in result.stderr and result.stderr.startswith("cellrate: error: ")
        assert path.read_bytes() == before


def test_inspect_a_shared_directory_lists_each_region_inside(shm):
    """The directory given to a web policy's shared= holds a region per limit:
    inspect lists each with its summary, names what is no region and skips it,
    and writes nothing."""
    import cellrate.web

    site = shm / "site"
    policy = cellrate.web.Policy("5/minute", routes={"POST /login": "2/minute"},
                                 shared=str(site), concurrency=3)
    assert policy.limits
    (site / "notes").write_text("not a region\n")
    (site / "old").mkdir()
    regions = sorted(path for path in site.iterdir() if path.name not in ("notes", "old"))
    assert [path.name for path in regions] == [
        "default", "default POST %2Flogin", "default concurrency"]
    before = {path: path.read_bytes() for path in [*regions, site / "notes"]}
    result = run("inspect", site)
    assert result.returncode == 0, result.stderr
    for path in regions:
        one = json.loads(run("inspect", path, "--json").stdout)
        assert f"region {path}\n" in result.stdout, result.stdout
        assert one["limit"] in result.stdout
    assert result.stdout.index(f"region {regions[0]}\n") < result.stdout.index(
        f"region {regions[1]}\n")
    assert re.search(rf"^skipped {re.escape(str(site / 'notes'))}: .*cellrate region",
                     result.stdout + result.stderr, re.M), result
    assert re.search(rf"^skipped {re.escape(str(site / 'old'))}: a directory",
                     result.stdout + result.stderr, re.M), result
    listed = run("inspect", site, "--json")
    assert listed.returncode == 0, listed.stderr
    info = json.loads(listed.stdout)
    assert info["directory"] == str(site)
    assert list(info["regions"]) == [str(path) for path in regions]
    for path in regions:
        assert info["regions"][str(path)] == json.loads(run("inspect", path, "--json").stdout)
    assert set(info["skipped"]) == {str(site / "notes"), str(site / "old")}
    assert "cellrate region" in info["skipped"][str(site / "notes")]
    assert {path: path.read_bytes() for path in before} == before


def test_inspect_a_directory_with_no_region_is_refused(shm):
    (shm / "notes").write_text("not a region\n")
    for directory in (shm, shm / "empty"):
        directory.mkdir(exist_ok=True)
        for extra in ([], ["--json"]):
            result = run("inspect", directory, *extra)
            assert result.returncode == 2, result
            assert result.stdout == ""
            assert result.stderr.startswith(f"cellrate: error: {directory}: ")
            assert "no cellrate region" in result.stderr, result.stderr


def test_reset_refuses_a_directory_naming_one_region(shm):
    keyed = cellrate.KeyedLimiter("1/hour", shared=shm / "api")
    assert keyed.allow("a") and not keyed.allow("a")
    before = (shm / "api").read_bytes()
    for extra in ([], ["a"]):
        result = run("reset", shm, *extra)
        assert result.returncode == 2, result
        assert result.stderr.startswith(f"cellrate: error: {shm}: a directory"), result.stderr
        assert "one region" in result.stderr and "cellrate inspect" in result.stderr
    assert (shm / "api").read_bytes() == before and not keyed.allow("a")


def not_regions(directory, region):
    """Files that are no region, each made once (path, its bytes or None)."""
    (directory / "empty").write_bytes(b"")
    (directory / "text").write_text("not a region\n" * 100)
    (directory / "noise").write_bytes(os.urandom(1 << 16))
    damaged = bytearray(region.read_bytes())
    damaged[20] ^= 0xFF  # the header, under its checksum
    (directory / "damaged").write_bytes(bytes(damaged))
    (directory / "truncated").write_bytes(region.read_bytes()[:100])
    (directory / "subdir").mkdir()
    return ["empty", "text", "noise", "damaged", "truncated", "subdir", "missing"]


@pytest.mark.parametrize("command", ["inspect", "reset"])
def test_a_file_that_is_no_region_is_refused_and_left_as_it_was(shm, command):
    cellrate.KeyedLimiter(5, shared=shm / "api")
    other = shm / "others"
    other.mkdir()
    for name in not_regions(other, shm / "api"):
        path = other / name
        before = path.read_bytes() if path.is_file() else None
        extra = ["key"] if command == "reset" else []
        result = run(command, path, *extra)
        assert result.returncode == 2, (name, result)
        assert result.stderr.startswith("cellrate: error: ") and str(path) in result.stderr, (
            name, result.stderr)
        assert result.stdout == ""
        assert (path.read_bytes() if path.is_file() else None) == before, name
        assert path.exists() == (name != "missing"), name


@pytest.mark.parametrize("args", [[], ["inspect"], ["frob", "/dev/shm/x"],
                                  ["inspect", "a", "b"], ["reset"], ["inspect", "--yaml", "x"]])
def test_usage_mistakes_exit_2(args):
    result = run(*args)
    assert result.returncode == 2, result
    assert "usage: cellrate" in result.stderr


def test_the_console_script(shm):
    try:
        entry = [point for point in importlib.metadata.entry_points(group="console_scripts")
                 if point.name == "cellrate"]
    except TypeError:  # Python 3.9: entry_points() takes no group
        entry = [point for point in importlib.metadata.entry_points().get("console_scripts", [])
                 if point.name == "cellrate"]
    script = shutil.which("cellrate", path=sysconfig.get_path("scripts"))
    if not entry or script is None:
        pytest.skip("cellrate is not installed (an in-place build has no console script)")
    assert entry[0].value == "cellrate._cli:run"
    cellrate.Limiter(5, shared=shm / "global")
    result = run("inspect", shm / "global", "--json", command=[script])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kind"] == "limiter"
    assert run("inspect", shm / "nothing", command=[script]).returncode == 2


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket", "fixed_window", "sliding_window"])
def test_reset_opens_every_algorithm_with_its_own_limit(shm, algorithm):
    keyed = cellrate.KeyedLimiter("3/7s", algorithm=algorithm, shared=shm / "api")
    while keyed.allow("k"):
        pass
    result = run("reset", shm / "api", "k")
    assert result.returncode == 0, result.stderr
    assert keyed.allow("k")
    info = json.loads(run("inspect", shm / "api", "--json").stdout)
    assert info["algorithm"] == algorithm and info["generation"] == 0  # no live change
