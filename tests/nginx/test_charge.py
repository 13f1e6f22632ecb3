"""cellrate.nginx.charge in real nginx workers: the log phase settles what a
request really cost, read from a response header or an nginx variable, on the
key the access phase charged; the shared region shows what was settled."""

from __future__ import annotations

import time

import pytest

import cellrate

from server import Nginx  # noqa: E402

RATE, BURST = "1/1000s", 10  # no unit comes back during a test


def eventually(read, done):
    """read(), once done(it) or 5 s have passed: the log phase settles after the
    response has gone, so a read right after it may come first."""
    deadline = time.monotonic() + 5
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.01)


def left(server: Nginx, client: str, want: int | None = None) -> int:
    """The units the client's key has left, read from the shared region itself (once
    it is `want`, or 5 s have passed)."""
    region = cellrate.KeyedLimiter(RATE, burst=BURST, capacity=1024,
                                   shared=server.region + ".per_client")
    return eventually(lambda: region.peek(client, 0).remaining,
                      lambda remaining: want is None or remaining == want)


def test_the_log_phase_settles_on_a_response_header_and_a_variable():
    with Nginx(workers=2, rate=RATE, burst=BURST) as server:
        assert server.get("/charged?use=4", headers={"X-Client": "a"})[0] == 200
        assert left(server, "a", BURST - 4) == BURST - 4  # 1 at the door, 3 more once it went
        assert server.get("/charged?use=0", headers={"X-Client": "a"})[0] == 200
        assert left(server, "a", BURST - 4) == BURST - 4  # the door's unit given back
        assert server.get("/charged", headers={"X-Client": "a"})[0] == 200
        assert left(server, "a", BURST - 5) == BURST - 5  # nothing reported: as charged at the door

        assert server.get("/bytes", headers={"X-Client": "b"})[0] == 200
        left(server, "b", 0)
        status, headers, _ = server.get("/bytes", headers={"X-Client": "b"})
        assert status == 429  # 43 bytes charged for a budget of 10: in debt, max_debt 10 deep
        assert int(headers["Retry-After"]) == (BURST + 1) * 1000


def test_one_bad_figure_is_bounded_and_logged():
    """An upstream reports 2**70 units: the key goes into debt up to the limit's
    max_debt (the burst by default) and no further, and the log says so; under
    max_cost the figure is settled as max_cost."""
    with Nginx(workers=2, rate=RATE, burst=BURST) as server:
        assert server.get(f"/charged?use={2**70}", headers={"X-Client": "c"})[0] == 200
        debt = f"{2**70} units met the debt bound (key c)"
        assert debt in eventually(server.log, lambda log: debt in log)
        status, headers, _ = server.get("/charged", headers={"X-Client": "c"})
        assert status == 429 and int(headers["Retry-After"]) == (BURST + 1) * 1000
        assert server.get(f"/metered?use={2**70}", headers={"X-Client": "m"})[0] == 200
        metered = cellrate.KeyedLimiter("1/1000s", burst=100, max_cost=50, capacity=64,
                                        shared=server.region + ".metered")
        assert eventually(lambda: metered.peek("m", 0).remaining, lambda n: n == 50) == 50
        assert f"{2**70} units, above max_cost 50: settled as 50" in server.log()


@pytest.mark.parametrize("case, words", [
    (1, "give the option header"),
    (2, "not both"),
    (3, "header must be a string: the response header that carries the request's cost"),
    (4, "cellrate.nginx: cost must be an integer >= 0"),
    (5, "unknown option 'headers'"),
])
def test_bad_options_of_charge_are_named(case, words):
    with Nginx(workers=1, rate=RATE, burst=BURST) as server:
        status, _, body = server.get(f"/bad_charge?case={case}")
    assert status == 200 and words in body.decode(), body
