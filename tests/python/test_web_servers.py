"""Real servers on loopback: uvicorn and gunicorn, 2 worker processes each,
on one `shared=` limit at 5 per hour (a burst of 5 and, for the test's
duration, nothing restored). Requests come until each worker has answered
more than the burst; however the kernel spreads them, the 200s across both
workers number exactly the burst (and, without the region, exactly two
bursts). Each worker's answers are read from the server's access log, which
carries the worker's pid."""

import concurrent.futures
import glob
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from conftest import REPO

EXAMPLES = REPO / "examples"
BURST = 5


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(port, path="/"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


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


def hammer_until_each_worker_answers(port, access, least, rounds=30):
    """Concurrent requests, in rounds, until the access log shows two workers
    each answering at least `least` requests."""
    statuses = []
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in range(rounds):
            statuses += list(pool.map(lambda _: get(port), range(24)))
            time.sleep(0.3)  # let the access log reach the file
            counts = {}
            for pid, _ in access_log(access):
                counts[pid] = counts.get(pid, 0) + 1
            if len(counts) >= 2 and min(counts.values()) >= least:
                break
    return statuses


@pytest.fixture
def region():
    path = f"/dev/shm/cellrate-test-web-{uuid.uuid4().hex}"
    try:
        yield path
    finally:
        for leftover in glob.glob(path + "*"):  # the limit's and its routes' regions
            os.unlink(leftover)


def run_server(tmp_path, region, argv, access, shared):
    port = free_port()
    log = tmp_path / "server.log"
    env = dict(os.environ, CELLRATE_LIMIT=f"{BURST}/hour")
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
    config = tmp_path / "log.json"
    config.write_text(json.dumps({
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"access": {"()": "uvicorn.logging.AccessFormatter",
                                  "fmt": "%(process)d %(status_code)s", "use_colors": False}},
        "handlers": {"access": {"class": "logging.FileHandler", "filename": str(access),
                                "formatter": "access"}},
        "loggers": {"uvicorn.access": {"handlers": ["access"], "level": "INFO",
                                       "propagate": False}},
    }))
    run_server(tmp_path, region, lambda port: [
        "uvicorn", "starlette_app:app", "--host", "127.0.0.1", "--port", str(port),
        "--workers", "2", "--log-config", str(config), "--no-use-colors",
    ], access, shared)


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-worker"])
def test_gunicorn_two_workers(tmp_path, region, shared):
    access = tmp_path / "access.log"
    run_server(tmp_path, region, lambda port: [
        "gunicorn", "flask_app:app", "--bind", f"127.0.0.1:{port}", "--workers", "2",
        "--access-logfile", str(access), "--access-logformat", "%(p)s %(s)s",
        "--no-control-socket",
    ], access, shared)
