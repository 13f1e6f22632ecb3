"""Calling a rate-limited API through cellrate.requests and cellrate.httpx
(docs/design.md §18), against a fake provider (fake_provider.py) under
uvicorn on loopback that enforces its own limit in one-second windows and
says so in every answer.

The script's own limit (40/second) is above the provider's (20 per window):
following the provider, the scripts (1 and 4 threads, 20 asyncio tasks, two
processes sharing a region) get no 429 after the first answer, at most one per
process when the provider cuts its limit mid-window, and use at least 90% of
what the provider allows."""

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

    def share(self, key: str = "requests", used: str = "admitted") -> float:
        """What the windows admitted, as a share of what they allowed: every
        window but the last (which the run leaves part-way)."""
        windows = list(self.stats()["windows"].values())[:-1]
        assert len(windows) >= 2
        return sum(w[used] for w in windows) / sum(w[key] for w in windows)


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


# What a run checks (no 429 refused by the provider, 90% of its allowance used) needs the
# script's threads to send when they may: a machine busy elsewhere can starve them for a
# window, or hold an answer past the next window's start. A run is tried again on a fresh
# provider, up to TRIES times; a script that does not follow the provider fails every try.
TRIES = 3


def tried(providers, scenario) -> None:
    for attempt in range(TRIES):
        try:
            scenario(providers())
            return
        except AssertionError:
            if attempt == TRIES - 1:
                raise


SECONDS = 4.0


@pytest.mark.parametrize("client, workers", [
    ("requests", 1), ("requests", 4), ("httpx", 4), ("httpx-async", 20)])
def test_a_script_follows_the_provider(providers, client, workers):
    def scenario(provider: Provider) -> None:
        statuses = run(provider.url + "/v1/chat/completions", client, workers, SECONDS)
        assert statuses.get(429, 0) == 0 and provider.refused() == 0, statuses
        assert provider.share() >= 0.9, provider.stats()

    tried(providers, scenario)


@pytest.mark.parametrize("client, workers", [("requests", 4), ("httpx-async", 20)])
def test_a_sudden_cut_costs_at_most_one_429(providers, client, workers):
    def scenario(provider: Provider) -> None:
        timer = threading.Timer(SECONDS / 2 + 0.45, provider.cut, args=(10,))
        timer.start()
        try:
            statuses = run(provider.url + "/v1/chat/completions", client, workers, SECONDS)
        finally:
            timer.cancel()
        assert provider.refused() <= 1, provider.stats()
        assert statuses.get(429, 0) == 0, statuses  # a 429 is retried after its Retry-After
        assert provider.share() >= 0.9, provider.stats()

    tried(providers, scenario)


def test_two_processes_sharing_a_region(providers, tmp_path):
    def scenario(provider: Provider) -> None:
        shared = str(tmp_path / f"region-{provider.url.rsplit(':', 1)[1]}")
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
        assert all(output.get("429", 0) == 0 for output in outputs), outputs
        assert provider.refused() <= 2, provider.stats()  # at most one per process, on the cut
        assert provider.share() >= 0.9, provider.stats()

    tried(providers, scenario)


@pytest.mark.parametrize("providers", [{"mode": "ietf", "window": 2.0}], indirect=True)
def test_the_ietf_fields_are_followed(providers):
    # whole seconds (t) of a two-second window: the wait a remaining of 0 asks
    # for ends up to a second late, and the window's requests still fit in it
    def scenario(provider: Provider) -> None:
        statuses = run(provider.url + "/v1/chat/completions", "requests", 4, 2 * SECONDS)
        assert statuses.get(429, 0) == 0 and provider.refused() == 0, statuses
        assert provider.share() >= 0.9, provider.stats()

    tried(providers, scenario)


@pytest.mark.parametrize("providers", [{"tokens": 1500, "requests": 40}], indirect=True)
def test_a_token_budget_is_settled_from_the_usage(providers):
    # the script's token budget is above the provider's; each request asks
    # for 100 tokens (its estimate), and the answer's usage settles it
    def scenario(provider: Provider) -> None:
        tokens = cellrate.Limiter(3000, burst=3000)
        statuses = run(provider.url + "/v1/chat/completions", "httpx", 4, SECONDS,
                       tokens=tokens)
        assert statuses.get(429, 0) == 0 and provider.refused() == 0, statuses
        assert provider.share("tokens", "used") >= 0.9, provider.stats()

    tried(providers, scenario)


def test_the_example_script_calls_an_openai_compatible_api(provider):
    # examples/openai_budget.py, the script of docs/follow.md, against the fake
    script = HERE.parents[1] / "examples" / "openai_budget.py"
    env = server_env(OPENAI_BASE_URL=provider.url + "/v1", OPENAI_API_KEY="test")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["ok", "ok"]
    assert provider.refused() == 0
