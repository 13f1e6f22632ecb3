"""cellrate.nginx.limit's `wait` option drives the core's wait plan (docs/design/
waiting.md), as Lua's lim:wait and Python's wait() do: every algorithm waits,
and a start is decided at its real instant (a late wake-up pushes the next).
And the plan's vectors (tests/vectors/wait.txt) as this nginx runs them."""

from __future__ import annotations

import pathlib
import threading
import time

from server import Nginx  # noqa: E402

TEMPLATE = pathlib.Path(__file__).with_name("wait.conf.in")


def start(headers) -> float:
    return float(headers["X-Start"])


def test_a_fixed_window_waits_for_its_next_window():
    """fixed_window, 1 per second, wait 5: the second request is held until
    the next window and admitted (it was refused at once: a window reserves
    nothing ahead, and the helper only reserved), as lim:wait(1, 5) admits."""
    with Nginx(workers=1, template=TEMPLATE) as server:
        first, second = server.get("/window"), server.get("/window")
        assert first[0] == 200
        assert second[0] == 200, second
        assert int(start(second[1])) > int(start(first[1]))  # in a later window


def test_a_late_start_pushes_the_next_one():
    """1/s, burst 1, wait 5. A admitted at once; B waits for its turn (1 s);
    the worker is kept busy past it, so B starts late; D, sent after, starts
    at least one interval after B's real start (it was B's reserved instant
    plus one interval: D started within 0.2 s of B)."""
    with Nginx(workers=1, template=TEMPLATE) as server:
        results = {}

        def get(name, path):
            results[name] = server.get(path)

        assert server.get("/spaced")[0] == 200  # A
        b = threading.Thread(target=get, args=("B", "/spaced"))
        b.start()
        time.sleep(0.2)
        assert server.get("/busy?seconds=1.5")[0] == 200  # B's timer fires late
        d = threading.Thread(target=get, args=("D", "/spaced"))
        d.start()
        b.join(timeout=20)
        d.join(timeout=20)
        assert results["B"][0] == 200 and results["D"][0] == 200, results
        assert start(results["D"][1]) - start(results["B"][1]) >= 0.9, results


def test_the_wait_vectors_run_inside_nginx():
    with Nginx(workers=1, template=TEMPLATE) as server:
        status, _, body = server.get("/wait_vectors")
        assert status == 200
        checked, *failures = body.decode().split("\n")
        assert failures == [""] or failures == [], failures
        assert int(checked) > 100
