"""Real servers on loopback. uvicorn and gunicorn (Flask, and Django's
middleware configured by its CELLRATE setting), 2 worker processes each, on
one `shared=` limit at 5 per hour (a burst of 5 and, for the test's duration,
nothing restored). Requests come until each worker has answered more than
the burst; however the kernel spreads them, the 200s across both workers
number exactly the burst (and, without the region, exactly two bursts). Each
worker's answers are read from the server's access log, which carries the
worker's pid. And uvicorn in front of the client address: its rewrite of the
peer from X-Forwarded-For, and a dual-stack listener."""

import contextlib

import concurrent.futures
import http.client
import json
import os
import shutil
import pathlib
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

import cellrate
from conftest import REPO

EXAMPLES = REPO / "examples"
BURST = 5


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port, path="/", headers=None, body=False):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return (response.status, response.read().decode()) if body else response.status
    finally:
        conn.close()


def server_env(**variables):
    """The environment of a server: ours, with the cellrate under test first on
    the path (an in-place build's PYTHONPATH=python is relative to the repo)."""
    env = dict(os.environ, **variables)
    package_parent = str(pathlib.Path(cellrate.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([package_parent] + [
        entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry])
    return env


def wait_until_listening(port, proc, log, deadline=60.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"server did not listen on {port}:\n{log.read_text()}")


def stop(proc):
    """The server and its workers (one process group), even on failure."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(15)


def access_log(path):
    """[(pid, status)] from lines "<pid> <status> ..." (gunicorn writes the
    pid in angle brackets, uvicorn the status with its phrase)."""
    entries = []
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split()
        if len(parts) >= 2 and parts[0].strip("<>").isdigit() and parts[1].isdigit():
            entries.append((int(parts[0].strip("<>")), int(parts[1])))
    return entries


def hammer_until_each_worker_answers(port, access, least, within=90.0):
    """Concurrent requests, in rounds, until the access log shows two workers
    each answering at least `least` requests (or `within` seconds on: how the
    kernel spreads the connections over a busy machine's workers is its own
    affair)."""
    statuses = []
    deadline = time.monotonic() + within
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        while time.monotonic() < deadline:
            statuses += list(pool.map(lambda _: get(port), range(24)))
            time.sleep(0.3)  # let the access log reach the file
            counts = {}
            for pid, _ in access_log(access):
                counts[pid] = counts.get(pid, 0) + 1
            if len(counts) >= 2 and min(counts.values()) >= least:
                break
    return statuses


def uvicorn_log_config(path, access):
    """A --log-config file for uvicorn: its access log goes to `access`, a line
    "<pid> <status>" a request (what access_log reads)."""
    path.write_text(json.dumps({
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"access": {"()": "uvicorn.logging.AccessFormatter",
                                  "fmt": "%(process)d %(status_code)s", "use_colors": False}},
        "handlers": {"access": {"class": "logging.FileHandler", "filename": str(access),
                                "formatter": "access"}},
        "loggers": {"uvicorn.access": {"handlers": ["access"], "level": "INFO",
                                       "propagate": False}},
    }))
    return path


def start_uvicorn(app, port, env, config, log):
    """uvicorn with 2 workers serving `app` of tests/python on loopback, logging by
    `config`, its output in `log`: one process group, which stop() ends."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
             "--workers", "2", "--log-config", str(config), "--no-use-colors"],
            cwd=str(REPO / "tests" / "python"), env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)


@pytest.fixture
def region():
    path = f"/dev/shm/cellrate-test-web-{uuid.uuid4().hex}"
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)  # the directory of the limits' regions


def run_server(tmp_path, region, argv, access, shared):
    port = free_port()
    log = tmp_path / "server.log"
    env = server_env(CELLRATE_LIMIT=f"{BURST}/hour")
    env.pop("CELLRATE_REGION", None)
    if shared:
        env["CELLRATE_REGION"] = region
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", *argv(port)], cwd=str(EXAMPLES), env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_listening(port, proc, log)
        # each worker past its own burst: per-worker limits would admit 2 bursts
        statuses = hammer_until_each_worker_answers(port, access, BURST + 1)
    finally:
        stop(proc)
    entries = access_log(access)
    by_worker = {}
    for pid, status in entries:
        by_worker.setdefault(pid, []).append(status)
    summary = {pid: (s.count(200), s.count(429)) for pid, s in by_worker.items()}
    admitted = BURST if shared else 2 * BURST
    print(f"{argv(0)[0]}, {'one shared limit' if shared else 'a limit per worker'}: "
          f"{len(statuses)} requests; per worker (200s, 429s): {summary}")
    assert len(by_worker) == 2 and min(map(len, by_worker.values())) > BURST, (
        f"expected 2 workers each past the burst: {summary}\n{log.read_text()}")
    assert statuses.count(200) == admitted, (statuses.count(200), summary)
    assert statuses.count(429) == len(statuses) - admitted
    assert sorted(s for _, s in entries) == sorted(statuses)


# shared=False is the control: the same servers without the region admit a
# burst per worker, the silent multiplication that `shared=` removes.
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-worker"])
def test_uvicorn_two_workers(tmp_path, region, shared):
    access = tmp_path / "access.log"
    config = uvicorn_log_config(tmp_path / "log.json", access)
    run_server(tmp_path, region, lambda port: [
        "uvicorn", "starlette_app:app", "--host", "127.0.0.1", "--port", str(port),
        "--workers", "2", "--log-config", str(config), "--no-use-colors",
    ], access, shared)


def gunicorn_without_control_socket():
    """--no-control-socket where this gunicorn has a control socket (newer
    releases; the release pip picks for an older Python has none)."""
    usage = subprocess.run([sys.executable, "-m", "gunicorn", "--help"], capture_output=True,
                           text=True).stdout
    return ["--no-control-socket"] if "--no-control-socket" in usage else []


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-worker"])
@pytest.mark.parametrize("app", ["flask_app:app", "django_app:application"],
                         ids=["flask", "django"])  # Django: the middleware from CELLRATE
def test_gunicorn_two_workers(tmp_path, region, shared, app):
    access = tmp_path / "access.log"
    run_server(tmp_path, region, lambda port: [
        "gunicorn", app, "--bind", f"127.0.0.1:{port}", "--workers", "2",
        "--access-logfile", str(access), "--access-logformat", "%(p)s %(s)s",
        *gunicorn_without_control_socket(),
    ], access, shared)


# -- uvicorn and the client address ---------------------------------------------------

HERE = REPO / "tests" / "python"


@contextlib.contextmanager
def uvicorn_proxy_app(tmp_path, flags, trusted_proxies, host="127.0.0.1", region=None):
    """uvicorn with `flags` serving web_proxy_app at 5/hour; yields the port."""
    port = free_port()
    log = tmp_path / f"uvicorn-{port}.log"
    env = server_env(CELLRATE_LIMIT=f"{BURST}/hour",
                     CELLRATE_TRUSTED_PROXIES=",".join(trusted_proxies))
    env.pop("CELLRATE_REGION", None)
    if region is not None:
        env["CELLRATE_REGION"] = region
    env.pop("FORWARDED_ALLOW_IPS", None)  # uvicorn's own default, as a user gets it
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "web_proxy_app:app", "--host", host,
             "--port", str(port), "--no-access-log", *flags],
            cwd=str(HERE), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_listening(port, proc, log)
        yield port
    finally:
        stop(proc)


SPOOFS = [{"X-Forwarded-For": f"198.51.100.{i}"} for i in range(1, 31)]


@pytest.mark.parametrize("flags, trusted_proxies, headers", [
    ([], [], SPOOFS),  # the hole: uvicorn's default rewrite
    (["--no-proxy-headers"], [], SPOOFS),
    (["--no-proxy-headers"], ["127.0.0.1"],  # the proxy on loopback appends the client
     [{"X-Forwarded-For": spoof["X-Forwarded-For"] + ", 203.0.113.7"} for spoof in SPOOFS]),
    (["--forwarded-allow-ips", "192.0.2.250"], [], SPOOFS),  # uvicorn told the proxy's address
], ids=["default-flags", "no-proxy-headers", "no-proxy-headers+trusted_proxies",
        "forwarded-allow-ips"])
def test_uvicorn_proxy_headers_and_trusted_proxies(tmp_path, flags, trusted_proxies, headers):
    """30 requests over loopback, each with a made-up X-Forwarded-For. With
    uvicorn's default flags it trusts the header from 127.0.0.1 and rewrites
    the peer before cellrate sees it: all 30 pass. With the flags docs/web.md
    gives (--no-proxy-headers, then cellrate's trusted_proxies; or
    --forwarded-allow-ips naming the real proxy), one client gets its burst."""
    with uvicorn_proxy_app(tmp_path, flags, trusted_proxies) as port:
        statuses = [get(port, headers=one) for one in headers]
    admitted = len(statuses) if not flags else BURST
    assert statuses == [200] * admitted + [429] * (len(statuses) - admitted)


def test_uvicorn_dual_stack_peer_is_a_trusted_proxy(tmp_path, region):
    """uvicorn --host :: --workers 2 (which binds one dual-stack socket; a
    single worker's asyncio socket is IPv6 only) reached over 127.0.0.1: the
    peer is ::ffff:127.0.0.1, which trusted_proxies=["127.0.0.1"] covers. 20
    clients behind the proxy each get their own limit; one client its burst."""
    if not socket.has_ipv6 or open("/proc/sys/net/ipv6/bindv6only").read().strip() != "0":
        pytest.skip("no dual-stack IPv6 socket here")
    flags = ["--no-proxy-headers", "--workers", "2"]
    with uvicorn_proxy_app(tmp_path, flags, ["127.0.0.1"], host="::", region=region) as port:
        assert get(port, "/peer", body=True) == (200, "::ffff:127.0.0.1")
        clients = [get(port, headers={"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(1, 21)]
        one = [get(port, headers={"X-Forwarded-For": "198.51.100.1"}) for _ in range(BURST + 2)]
    assert clients == [200] * 20
    assert one == [200] * BURST + [429] * 2
