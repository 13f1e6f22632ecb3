"""cellrate.nginx.hold / leave: a concurrency limit across nginx workers,
acquired in the access phase and released in the log phase (also when the
client goes away or the worker dies). The handler counts the requests it
runs at once itself (a shared dict), never asking the limit."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import signal
import socket
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server import Nginx  # noqa: E402

LIMIT = 2  # limits.in_flight in tests/nginx/limits.lua.in


def test_never_more_than_the_limit_in_flight_across_workers():
    with Nginx(workers=4, listen_options="reuseport") as server:
        def client(_):
            statuses = []
            connection = server.connection()
            try:
                for _ in range(10):
                    status, headers, _ = server.get("/in_flight?sleep=0.02", connection)
                    statuses.append((status, headers))
            finally:
                connection.close()
            return statuses

        # The limit full for certain: two requests held until the test lets
        # them go (how many of the clients' requests overlap is the machine's
        # affair), and a third refused meanwhile.
        holders = [hold(server, 3) for _ in range(LIMIT)]
        assert server.until_held(LIMIT) == LIMIT
        refused = server.get("/in_flight?sleep=0")
        for sock in holders:
            sock.close()
        assert server.until_held(0) == 0
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = [r for batch in pool.map(client, range(8)) for r in batch]
        replies.append(refused[:2])
        stats = server.in_flight_stats()
        assert server.until_held(0) == 0  # every log phase gave its unit back
    statuses = [status for status, _ in replies]
    assert 1 <= stats["most"] <= LIMIT  # counted by the handler itself
    assert refused[0] == 429 and statuses.count(200) >= 1
    assert set(statuses) <= {200, 429}
    assert all("Retry-After" not in headers for status, headers in replies if status == 429)
    assert len({headers["X-Worker"] for _, headers in replies}) >= 2


def hold(server: Nginx, seconds: float) -> socket.socket:
    """A request to /in_flight whose handler sleeps `seconds` (long enough to
    be seen holding its unit on a busy machine); its client may go away."""
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(f"GET /in_flight?sleep={seconds} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def test_a_client_that_goes_away_gives_its_unit_back():
    with Nginx(workers=2) as server:
        sockets = [hold(server, 3) for _ in range(LIMIT)]
        assert server.until_held(LIMIT) == LIMIT
        for sock in sockets:
            sock.close()  # gone before the response
        assert server.until_held(0) == 0


def test_a_worker_killed_mid_request_leaks_nothing():
    with Nginx(workers=2) as server:
        sock = hold(server, 30)
        assert server.until_held(1) == 1
        before = set(server.worker_pids())
        for pid in before:  # the holder among them
            os.kill(pid, signal.SIGKILL)
        sock.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the master reaps them and starts new workers
            pids = set(server.worker_pids())
            if len(pids) == 2 and not pids & before:
                break
            time.sleep(0.01)
        assert len(pids) == 2 and not pids & before
        # the dead worker's unit is reclaimed (in_flight reclaims, as would an
        # acquire finding the limit full)
        assert server.in_flight_stats()["held"] == 0
        statuses = []
        for _ in range(3):  # one after another: each after the last one's log phase
            statuses.append(server.get("/in_flight?sleep=0")[0])
            assert server.until_held(0) == 0
        assert statuses == [200, 200, 200]


def test_every_holding_of_a_request_is_released_once():
    """One request holding three units (one limit once, another twice): each
    is held while the request runs and given back by its log phase."""
    with Nginx(workers=2, listen_options="reuseport") as server:
        for _ in range(5):
            status, _, body = server.get("/in_flight_three")
            assert (status, body.split()) == (200, [b"1", b"2"])
            assert server.until_held(0) == 0
            # released by the same log phase, after in_flight's
            assert server.until_held(0, limit="pair") == 0
