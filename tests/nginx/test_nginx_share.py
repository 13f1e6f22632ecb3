"""cellrate.share in OpenResty (docs/share.md, "In OpenResty the host is the member"): an
nginx of four workers deciding on one region is one member of a fleet limit, beside a
Python member (tests/python/share_member.py) on one redis-server, both asked for more than
the fleet admits. Worker 0 heartbeats from ngx.timer.every and applies the share to the
region; it is killed mid-run (the master starts a new worker 0, whose init_worker starts
the heartbeats again), Redis's scripts are flushed (the heartbeat's EVALSHA is then
answered NOSCRIPT, as lua-resty-redis answers an error: false and its text), and nginx
is reloaded (the region opened again at the start share). Every admission is counted
here against the bound of docs/design/share.md."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
from redis_servers import needs_redis, redis_server  # noqa: E402
from share_bound import busiest  # noqa: E402

from server import Nginx  # noqa: E402

redis = pytest.importorskip("redis")

import cellrate  # noqa: E402
from cellrate._cellrate import _share_limit  # noqa: E402
from cellrate.share import ShareLimiter  # noqa: E402

pytestmark = needs_redis

TEMPLATE = HERE / "share.conf.in"
DOC = HERE.parents[1] / "docs" / "share.md"
RATE, BURST, INTERVAL, TTL, TIMEOUT = 2000, 100, 0.5, 1.5, 0.25  # ttl, timeout: the defaults
RUN = 14.0  # seconds of load
NAME, HOST = "fleet", "nginx-host"
KEY = f"cellrate:share:{NAME}"
FLEET = cellrate.Limit(RATE, burst=BURST)


def local_limit(share: float) -> tuple[float, int]:
    """The rate per second and burst the core gives a share of the fleet."""
    rate, period, burst = _share_limit(FLEET, share)
    return rate / period, burst


def record(client) -> dict[str, list[str]]:
    """The fleet's hash: member -> its record's words (seen_us demand share [held until])."""
    return {field.decode(): value.decode().split()
            for field, value in client.hgetall(KEY).items()}


def members_of(fields: dict[str, list[str]]) -> set[str]:
    """The members of a record: its fields but the fleet's own (":fleet", ":quiet")."""
    return {field for field in fields if not field.startswith(":")}


def inspect(region: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "cellrate", "inspect", region, "--json"],
                         env=env, check=True, capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)


def applied(client, region: str) -> tuple[float, dict]:
    """The host's share in Redis and its region's limit, read while the share stood still."""
    for _ in range(50):
        fields = record(client)
        assert HOST in fields, f"the host dropped out: {fields}"
        info = inspect(region)
        if record(client).get(HOST, [None] * 3)[2] == fields[HOST][2]:
            return float(fields[HOST][2]), info
        time.sleep(0.05)
    raise AssertionError("the host's share never stood still")


def until(condition, what: str, within: float = 30.0) -> None:
    """Waits for `condition()`, which a busy machine may take a while to bring."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def code_lines(text: str) -> list[str]:
    """The lines of a config without comments, indentation and blank lines."""
    lines = (re.sub(r"\s*(--|#).*$", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


def test_the_documented_pattern_is_the_tested_config():
    """Every line of docs/share.md's OpenResty config is in share.conf.in, in order, with
    the test's values (the Redis client, the address, the limit, the names, the location)."""
    doc = re.search(r"```nginx\n(.*?)```", DOC.read_text(), re.S).group(1)
    for ours, theirs in [('"1000/s"', '"@FLEET_RATE@/s"'), ("burst = 100", "burst = @FLEET_BURST@"),
                         ('"api"', '"@NAME@"'), ("interval = 1,", "interval = @INTERVAL@,"),
                         ("every(1,", "every(@INTERVAL@,"), ('"/dev/shm/api"', '"@REGION@.fleet"'),
                         ('"web-1"', '"@MEMBER@"'), ('"resty.redis"', '"resp"'),
                         ('"redis.internal", 6379', '"127.0.0.1", @REDIS_PORT@'),
                         ("location / {", "location = /fleet {")]:
        assert ours in doc, ours
        doc = doc.replace(ours, theirs)
    config = iter(code_lines(TEMPLATE.read_text()))
    missing = [line for line in code_lines(doc) if line not in config]
    assert not missing, missing


def test_the_host_is_one_member_and_keeps_the_bound_through_a_respawn_and_a_reload(tmp_path):
    with redis_server() as redis_srv, Nginx(
            workers=4, listen_options="reuseport", template=TEMPLATE,
            fields={"REDIS_PORT": str(redis_srv.port), "FLEET_RATE": str(RATE),
                    "FLEET_BURST": str(BURST), "INTERVAL": repr(INTERVAL), "NAME": NAME,
                    "MEMBER": HOST}) as server:
        host_joined = time.monotonic()  # its first heartbeat runs at once (ngx.timer.at(0))
        region = server.region + ".fleet"
        client = redis.Redis(port=redis_srv.port)
        samples: list[tuple[float, dict[str, list[str]]]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.05):
                samples.append((time.monotonic(), record(client)))

        sampler = threading.Thread(target=sample)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        member = subprocess.Popen(
            [sys.executable, str(HERE.parent / "python" / "share_member.py"),
             str(redis_srv.port), NAME, repr(RATE), str(BURST), repr(INTERVAL), repr(TTL),
             repr(RUN), str(tmp_path / "m")], env=env)
        load = subprocess.Popen(["wrk", "-t1", "-c8", f"-d{RUN:.0f}s",
                                 f"http://127.0.0.1:{server.port}/fleet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            sampler.start()
            # both members in, and the host's share cut to make room for the other's
            until(lambda: len(members_of(record(client))) == 2
                  and float(record(client).get(HOST, [0, 0, 1])[2]) < 1,
                  f"the fleet never held both members: {record(client)}")
            # the share in Redis is the region's limit (every worker decides on it)
            share, info = applied(client, region)
            assert (info["rate"] / info["period"], info["burst"]) == local_limit(share)

            beating = int(server.get("/beating")[2])
            assert beating in server.worker_pids()
            os.kill(beating, signal.SIGKILL)
            killed = time.monotonic()
            until(lambda: len(server.worker_pids()) == 4 and beating not in server.worker_pids(),
                  "no new worker")
            until(lambda: int(server.get("/beating")[2]) not in (beating, 0),
                  "the heartbeats did not start again")
            respawned = int(server.get("/beating")[2])
            assert respawned != beating and respawned in server.worker_pids()

            time.sleep(1)
            redis_srv.cli("SCRIPT", "FLUSH")  # the next heartbeats: NOSCRIPT, then EVAL
            flushed = time.monotonic()
            time.sleep(2)
            share, info = applied(client, region)
            assert (info["rate"] / info["period"], info["burst"]) == local_limit(share)

            # a reload opens the region again at the start share, until the new worker 0's
            # first heartbeat (its share growing back: a change of the bound's)
            server.reload()
            reloaded = time.monotonic()
            time.sleep(2 * INTERVAL)
            share, info = applied(client, region)
            assert (info["rate"] / info["period"], info["burst"]) == local_limit(share)
            assert share > 1 / 8
            assert member.wait(timeout=RUN + 30) == 0
            assert load.wait(timeout=30) == 0
            stop.set()
            sampler.join()
            seconds, micros = client.time()
            now_us = seconds * 1_000_000 + micros  # the server's clock, as the records'
        finally:
            stop.set()
            for proc in (member, load):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if sampler.is_alive():
                sampler.join()
            client.close()
        body = server.get("/admitted")[2].decode()
        log = server.log()

    # the host is one member: its one field beside the Python member's, in every sample
    # while both ran (from the Python member's first share: its start may take a second
    # on a loaded machine), and never silent for ttl (its beating worker killed, Redis's
    # scripts flushed)
    python_joined = float((tmp_path / "m.shares").read_text().split()[0])
    joined = max(host_joined, python_joined)  # the member's start: the machine's affair
    during = [fields for at, fields in samples if joined + 1 < at < host_joined + RUN - 1]
    assert during
    for fields in during:
        members = members_of(fields)
        assert HOST in members and len(members) == 2, members
    seen = sorted({int(fields[HOST][0]) for _, fields in samples if HOST in fields})
    assert max(b - a for a, b in zip(seen + [now_us], seen[1:] + [now_us])) < TTL * 1e6
    assert "[error]" not in log, log
    assert "Redis does not answer" not in log, log
    assert log.count("limit changed from") == 1, log  # the reload's open, a live change

    # every admission of the fleet, in every window of 1 s: within the bound
    host = [int(line) / 1e9 for line in body.split()]
    python = [t for (t,) in struct.iter_unpack("d", (tmp_path / "m.admitted").read_bytes())]
    admitted = sorted(host + python)
    assert len(host) > RATE * RUN / 8 and len(python) > RATE * RUN / 8
    events = [(host_joined, "join", HOST), (python_joined, "join", "python"),
              (reloaded, "reload", HOST)]
    at, worst = busiest(admitted, events, members=2, rate=RATE, burst=BURST, interval=INTERVAL,
                        ttl=TTL, timeout=TIMEOUT)
    print(f"the busiest window: {worst:.3f} of the bound, {at - killed:+.1f} s from the kill, "
          f"{at - flushed:+.1f} s from the flush, {at - reloaded:+.1f} s from the reload")
    assert worst > 0.8  # the fleet ran near its limit, so the check could fail


def test_the_host_undoes_a_region_widened_by_hand_and_is_refused_at_another_interval():
    """The share is applied to the region at every heartbeat (a region widened by hand
    runs so for an interval at most); a host whose interval is not the fleet's is refused
    as a Python member is, and holds nothing (the same script, the same words)."""
    with redis_server() as redis_srv:
        client = redis.Redis(port=redis_srv.port)
        python = ShareLimiter(client, RATE, burst=BURST, name=NAME, interval=INTERVAL,
                              member="python")  # makes the fleet: interval 0.5 s, ttl 1.5 s
        try:
            with Nginx(workers=2, template=TEMPLATE,
                       fields={"REDIS_PORT": str(redis_srv.port), "FLEET_RATE": str(RATE),
                               "FLEET_BURST": str(BURST), "INTERVAL": repr(INTERVAL),
                               "NAME": NAME, "MEMBER": HOST}) as server:
                region = server.region + ".fleet"
                # the share's rules, as nginx runs them: every line of the vectors
                head, *failures = server.get("/share_vectors")[2].decode().split("\n")
                checked, skipped = head.split()
                assert failures == [""] and int(checked) > 300, failures
                assert int(skipped) <= int(checked) / 10  # LuaJIT: beyond 2^53 (C checks them)
                time.sleep(2 * INTERVAL)
                share, info = applied(client, region)
                assert 0 < share < 1
                for _ in range(3):  # an unchanged share, heartbeat after heartbeat
                    assert float(server.get("/widen")[2]) == RATE * 10  # the region's now
                    time.sleep(2 * INTERVAL)
                    share, info = applied(client, region)
                    assert (info["rate"] / info["period"], info["burst"]) == local_limit(share)

                # the host at another interval: refused, its region at nothing
                server.fields["INTERVAL"] = "1"
                server.conf.write_text(server.fill(TEMPLATE.read_text()))
                server.reload()
                deadline = time.monotonic() + 10
                while inspect(region)["burst"] != 1:
                    assert time.monotonic() < deadline, server.log()
                    time.sleep(0.05)
                assert inspect(region)["rate"] < 1e-9
                assert sum(server.get("/fleet")[0] == 200 for _ in range(20)) <= 1
                log = server.log()
                assert ("cellrate.share fleet: refused: interval must be that of the fleet "
                        "(0.5 s, fixed when it was created), not 1 s") in log, log
                assert python.heartbeat()  # the fleet goes on without it
        finally:
            python.close()
            client.close()
