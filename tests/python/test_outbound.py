"""Calling a rate-limited API through cellrate.requests and cellrate.httpx
(docs/design.md §18), against a fake provider (fake_provider.py) under
uvicorn on loopback that enforces its own limit in one-second windows and
says so in every answer.

The script's own limit (40/second) is above the provider's (20 per window):
following the provider, the scripts (1 and 4 threads, 20 asyncio tasks, two
processes sharing a region) get no 429 after the first answer, at most one per
process when the provider cuts its limit mid-window, and use at least 90% of
what the provider allows: in every window the machine did not starve them
(judge(), one run each)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

import cellrate

pytest.importorskip("uvicorn", reason="make test installs uvicorn")
pytest.importorskip("httpx", reason="make test installs httpx")
pytest.importorskip("requests", reason="make test installs requests")

from outbound_client import run  # noqa: E402
from test_web_servers import free_port, server_env, stop, wait_until_listening  # noqa: E402

HERE = Path(__file__).resolve().parent


class Provider:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def call(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        with urllib.request.urlopen(self.url + path, data=data, timeout=10) as answer:
            return json.loads(answer.read())

    def stats(self) -> dict:
        return self.call("/admin/stats")

    def cut(self, requests: int) -> None:
        self.call("/admin/limits", {"requests": requests})

    def refused(self) -> int:
        return sum(window["refused"] for window in self.stats()["windows"].values())



@pytest.fixture
def providers(request, tmp_path):
    """start() -> a fresh provider (the last one stopped), with the test's settings."""
    settings = getattr(request, "param", {})
    running: list[subprocess.Popen] = []

    def start() -> Provider:
        while running:
            stop(running.pop())
        port = free_port()
        log = tmp_path / f"provider-{port}.log"
        env = server_env(**{f"CELLRATE_FAKE_{name.upper()}": str(value)
                            for name, value in settings.items()})
        with open(log, "wb") as out:
            running.append(subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "fake_provider:app", "--host", "127.0.0.1",
                 "--port", str(port), "--no-access-log"],
                cwd=str(HERE), env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True))
        wait_until_listening(port, running[-1], log)
        return Provider(port)

    try:
        yield start
    finally:
        while running:
            stop(running.pop())


@pytest.fixture
def provider(providers):
    return providers()


# A run is judged on the windows the machine let the script and the provider use. A
# machine busy elsewhere can starve the script's threads for a window (it sends less than
# it may), or hold a request or an answer past the next window's start (a request sent
# in one window lands in the next, and may find it full). Both watch themselves
# (stalls.py); a window is judged when neither was stalled in it, nor in the last
# MARGIN of the window before (where the requests that could land in it are sent). In
# the judged windows the provider refused nothing (but the `refusals` a cut allows), the
# application saw no 429, and the provider admitted at least 90% of what it allowed. A
# script that does not follow the provider fails in any window, starved or not.
MARGIN = 0.25  # of a window


def judge(provider: Provider, runs: list, refusals: int = 0, key: str = "requests",
          used: str = "admitted") -> None:
    stats = provider.stats()
    width, start = stats["window"], stats["start"]
    stalls = [tuple(stall) for stall in stats["stalls"]]
    stalls += [tuple(stall) for run in runs for stall in run["stalls"]]

    def bounds(index: int) -> tuple:
        return start + index * width, start + (index + 1) * width

    judged = []
    for index, window in list(stats["windows"].items())[:-1]:  # the last: part-way
        begin, end = bounds(int(index))
        if not any(a < end and b > begin - MARGIN * width for a, b in stalls):
            judged.append((int(index), window))
    if not judged:
        pytest.skip(f"the machine starved every window of the run ({len(stalls)} stalls, "
                    f"{sum(b - a for a, b in stalls):.2f} s)")
    assert sum(window["refused"] for _, window in judged) <= refusals, (judged, stats)
    seen = [at for run in runs for at in run["refused"]
            if any(bounds(index)[0] <= at < bounds(index)[1] for index, _ in judged)]
    assert not seen, (seen, judged, stats)
    share = sum(w[used] for _, w in judged) / sum(w[key] for _, w in judged)
    assert share >= 0.9, (judged, stats)


SECONDS = 4.0


@pytest.mark.parametrize("client, workers", [
    ("requests", 1), ("requests", 4), ("httpx", 4), ("httpx-async", 20)])
def test_a_script_follows_the_provider(provider, client, workers):
    judge(provider, [run(provider.url + "/v1/chat/completions", client, workers, SECONDS)])


@pytest.mark.parametrize("client, workers", [("requests", 4), ("httpx-async", 20)])
def test_a_sudden_cut_costs_at_most_one_429(provider, client, workers):
    timer = threading.Timer(SECONDS / 2 + 0.45, provider.cut, args=(10,))
    timer.start()
    try:
        done = run(provider.url + "/v1/chat/completions", client, workers, SECONDS)
    finally:
        timer.cancel()
    judge(provider, [done], refusals=1)  # a 429 is retried after its Retry-After


def test_two_processes_sharing_a_region(provider, tmp_path):
    shared = str(tmp_path / "region")
    cellrate.Limiter("40/second", burst=1, shared=shared)  # made before the two open it
    script = str(HERE / "outbound_client.py")
    url = provider.url + "/v1/chat/completions"
    timer = threading.Timer(SECONDS / 2 + 0.45, provider.cut, args=(10,))
    procs = [subprocess.Popen([sys.executable, script, url, "requests", "2", str(SECONDS),
                               shared], stdout=subprocess.PIPE, env=server_env(), cwd=str(HERE))
             for _ in range(2)]
    timer.start()
    try:
        outputs = [json.loads(proc.communicate(timeout=60)[0]) for proc in procs]
    finally:
        timer.cancel()
    assert all(proc.returncode == 0 for proc in procs)
    judge(provider, outputs, refusals=2)  # at most one per process, on the cut


@pytest.mark.parametrize("providers", [{"mode": "ietf", "window": 2.0}], indirect=True)
def test_the_ietf_fields_are_followed(provider):
    # whole seconds (t) of a two-second window: the wait a remaining of 0 asks
    # for ends up to a second late, and the window's requests still fit in it
    judge(provider, [run(provider.url + "/v1/chat/completions", "requests", 4, 2 * SECONDS)])


@pytest.mark.parametrize("providers", [{"tokens": 1500, "requests": 40}], indirect=True)
def test_a_token_budget_is_settled_from_the_usage(provider):
    # the script's token budget is above the provider's; each request asks
    # for 100 tokens (its estimate), and the answer's usage settles it
    tokens = cellrate.Limiter(3000, burst=3000)
    done = run(provider.url + "/v1/chat/completions", "httpx", 4, SECONDS, tokens=tokens)
    judge(provider, [done], key="tokens", used="used")


def test_the_example_script_calls_an_openai_compatible_api(provider):
    # examples/openai_budget.py, the script of docs/follow.md, against the fake
    script = HERE.parents[1] / "examples" / "openai_budget.py"
    env = server_env(OPENAI_BASE_URL=provider.url + "/v1", OPENAI_API_KEY="test")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["ok", "ok"]
    assert provider.refused() == 0
