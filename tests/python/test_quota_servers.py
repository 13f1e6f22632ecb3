"""Done when (calendar quotas kept across restarts): a FastAPI app with
"100/minute;1000000/month" per API key in Europe/Berlin, under uvicorn with 2
workers on a disk-backed shared directory, keeps its monthly count across a
SIGKILL of the server and both workers and a restart, counted through the
RateLimit header's remaining; the month resets at local midnight on the 1st
(an explicit clock on the app's own region)."""

from __future__ import annotations

import datetime
import http.client
import os
import signal
import subprocess
import sys
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import cellrate  # noqa: E402
from conftest import REPO  # noqa: E402
from test_web_servers import free_port, server_env, wait_until_listening  # noqa: E402

QUOTA = 1_000_000
LEFT = 50  # the monthly units the key has left when the app's requests start
KEY = "customer-1"


def request(port: int, key: str = KEY) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/", headers={"X-API-Key": key})
        response = conn.getresponse()
        response.read()
        return response.status, {name.lower(): value for name, value in response.getheaders()}
    finally:
        conn.close()


def remaining(headers: dict[str, str]) -> int:
    """r= of the RateLimit field ('"name";r=49;t=1385200')."""
    fields = dict(part.split("=", 1) for part in headers["ratelimit"].split(";")[1:])
    return int(fields["r"])


@pytest.fixture
def servers():
    """Starts uvicorn servers (their own process groups) and kills every one at the
    end, even when the test fails."""
    started: list[subprocess.Popen] = []

    def start(tmp_path: Path, shared: Path, port: int) -> subprocess.Popen:
        log = tmp_path / f"server-{len(started)}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "quota_app:app", "--host", "127.0.0.1",
                 "--port", str(port), "--workers", "2", "--no-access-log", "--no-use-colors"],
                cwd=str(REPO / "tests" / "python"), env=server_env(CELLRATE_REGION=str(shared)),
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        wait_until_listening(port, proc, log)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def month_region(shared: Path) -> tuple[str, dict]:
    """The path of the policy's calendar region under the shared directory."""
    for name in sorted(os.listdir(shared)):
        info = cellrate._cellrate.inspect_region(str(shared / name))
        if info["algorithm"] == "calendar":
            return str(shared / name), info
    raise AssertionError(f"no calendar region in {os.listdir(shared)}")


def test_uvicorn_keeps_the_month_across_sigkill_and_restart(tmp_path, servers):
    shared = tmp_path / "limits"  # tmp_path: a disk path, not /dev/shm
    port = free_port()
    server = servers(tmp_path, shared, port)
    status, headers = request(port)  # the first request makes the regions
    assert status == 200
    path, info = month_region(shared)
    month = cellrate.KeyedLimiter(f"{QUOTA}/month", algorithm="calendar", tz="Europe/Berlin",
                                  capacity=info["capacity"], shared=path)
    # this process spends the month down to LEFT units (a charge into the app's region)
    assert month.check(KEY, QUOTA - LEFT - 1).allowed
    before = []
    for _ in range(20):
        status, headers = request(port)
        assert status == 200
        before.append(remaining(headers))
    assert before == list(range(LEFT - 1, LEFT - 21, -1))  # the month is the tightest limit

    os.killpg(server.pid, signal.SIGKILL)  # the server and both workers, mid-month
    server.wait(30)
    server = servers(tmp_path, shared, free_port())
    port = int(server.args[server.args.index("--port") + 1])
    after = []
    while True:
        status, headers = request(port)
        if status != 200:
            break
        after.append(remaining(headers))
    assert after == list(range(LEFT - 21, -1, -1))  # not one unit handed out afresh
    assert len(before) + len(after) == LEFT
    assert status == 429
    _, end = cellrate.calendar_period("Europe/Berlin", "month")
    assert abs(float(headers["retry-after"]) - (end - datetime.datetime.now().timestamp())) < 120

    # the month resets at local midnight on the 1st: an explicit clock on the app's region
    start_local = datetime.datetime.fromtimestamp(end, ZoneInfo("Europe/Berlin"))
    assert (start_local.day, start_local.hour, start_local.minute) == (1, 0, 0)
    assert not month.peek(KEY, now=end - 0.5).allowed
    fresh = month.check(KEY, now=end)
    assert fresh.allowed and fresh.remaining == QUOTA - 1
