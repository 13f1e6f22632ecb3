"""cellrate.nginx.charge in real nginx workers: the log phase settles what a
request really cost, read from a response header or an nginx variable, on the
key the access phase charged; the shared region shows what was settled."""

from __future__ import annotations

import pytest

import cellrate

from server import Nginx  # noqa: E402

RATE, BURST = "1/1000s", 10  # no unit comes back during a test


def left(server: Nginx, client: str) -> int:
    """The units the client's key has left, read from the shared region itself."""
    region = cellrate.KeyedLimiter(RATE, burst=BURST, capacity=1024,
                                   shared=server.region + ".per_client")
    return region.peek(client, 0).remaining


def test_the_log_phase_settles_on_a_response_header_and_a_variable():
    with Nginx(workers=2, rate=RATE, burst=BURST) as server:
        assert server.get("/charged?use=4", headers={"X-Client": "a"})[0] == 200
        assert left(server, "a") == BURST - 4  # 1 at the door, 3 more once the response went
        assert server.get("/charged?use=0", headers={"X-Client": "a"})[0] == 200
        assert left(server, "a") == BURST - 4  # the door's unit given back
        assert server.get("/charged", headers={"X-Client": "a"})[0] == 200
        assert left(server, "a") == BURST - 5  # nothing reported: as charged at the door

        assert server.get("/bytes", headers={"X-Client": "b"})[0] == 200
        status, headers, _ = server.get("/bytes", headers={"X-Client": "b"})
        assert status == 429  # 43 bytes charged for a budget of 10: in debt
        assert int(headers["Retry-After"]) == (43 - BURST + 1) * 1000


@pytest.mark.parametrize("case, words", [
    (1, "give the option header"),
    (2, "not both"),
    (3, "option header must not be a number"),
    (4, "option cost: cost must be an integer >= 0"),
    (5, "unknown option 'headers'"),
])
def test_bad_options_of_charge_are_named(case, words):
    with Nginx(workers=1, rate=RATE, burst=BURST) as server:
        status, _, body = server.get(f"/bad_charge?case={case}")
    assert status == 200 and words in body.decode(), body
