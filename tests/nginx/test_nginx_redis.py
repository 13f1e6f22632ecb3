"""cellrate.nginx.limit on a Redis limit (docs/nginx.md, "A Redis limit"): four nginx workers decide
one Redis limit with two tiers (free 5 an hour, pro 20 an hour: nothing comes back while the
test runs) and two classes (critical 0, bulk 0.5), each request under the plan its API key
maps to ($plan) or a function names, on a connection the client option gives per request.
Counted over concurrent requests on their own connections, spread across the workers: each
tier admits exactly its burst per key, an upgraded key carries the units it used, bulk is
refused once half the burst is spent while critical still gets the rest; the log phase
settles a request's real cost under its plan; a Redis outage is answered by on_error
("deny": 429) and the workers survive it and go back to Redis."""

from __future__ import annotations

import pathlib
import sys
import time

import redis

import cellrate
from cellrate.redis import RedisLimiter

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
from redis_servers import RedisServer, needs_redis  # noqa: E402

from server import Nginx  # noqa: E402
from test_nginx_plans import (  # noqa: E402
    FREE, PRO, WORKERS, _admitted, _statuses, count_tiers_and_classes)

pytestmark = needs_redis

TEMPLATE = HERE / "redis_nginx.conf.in"
FREE_KEY, PRO_KEY = {"X-Api-Key": "free-secret"}, {"X-Api-Key": "pro-secret"}


def _nginx(srv: RedisServer, workers: int = WORKERS) -> Nginx:
    return Nginx(workers=workers, template=TEMPLATE,
                 fields={"REDIS_PORT": str(srv.port), "FREE": str(FREE), "PRO": str(PRO)})


def test_four_workers_each_tier_its_burst_an_upgrade_carries_bulk_yields():
    srv = RedisServer()
    srv.start()
    try:
        with _nginx(srv) as server:
            count_tiers_and_classes(server)
            # the connections went back to nginx's pools: far fewer than the 300 requests
            clients = int(srv.cli("INFO", "stats").split("total_connections_received:")[1]
                          .split()[0])
            assert clients < 3 * PRO + 4 * FREE
    finally:
        srv.stop()


def test_the_fields_name_the_plan_and_a_refusal_says_when():
    """RateLimit-Policy names the plan with its own numbers (as for a limit kept in nginx);
    a refusal is a 429 with Retry-After; a dry run admits it with the fields."""
    srv = RedisServer()
    srv.start()
    try:
        with _nginx(srv, workers=2) as server:
            _, fields, _ = server.get("/by_variable?key=h1", headers=PRO_KEY)
            assert fields["RateLimit-Policy"] == f'"pro";q={PRO};w=3600'
            assert fields["RateLimit"].startswith(f'"pro";r={PRO - 1};')
            _, fields, _ = server.get("/by_variable?key=h2")
            assert fields["RateLimit-Policy"] == f'"default";q={FREE};w=3600'
            assert _admitted(server, "/by_function?key=h3&plan=free", FREE) == FREE
            status, fields, _ = server.get("/by_function?key=h3&plan=free")
            assert status == 429
            assert fields["RateLimit-Policy"] == f'"free";q={FREE};w=3600'
            assert 0 < int(fields["Retry-After"]) <= 3600 // FREE
            # a dry run admits what it would refuse: the fields, no Retry-After
            status, fields, _ = server.get("/dry_run?key=h3&plan=free")
            assert status == 200 and "Retry-After" not in fields
            assert fields["RateLimit-Policy"] == f'"free";q={FREE};w=3600'
            assert "cellrate dry run: would refuse" in server.log()
    finally:
        srv.stop()


def test_the_log_phase_settles_under_the_requests_plan():
    """The door charges 1 unit of a pro key, the log phase (in a timer: nginx's log phase
    has no sockets) settles the X-Usage the response carries, under the same plan."""
    srv = RedisServer()
    srv.start()
    try:
        with _nginx(srv, workers=2) as server:
            store = RedisLimiter(
                redis.Redis(port=srv.port), FREE, period=3600, burst=FREE, name="metered",
                on_error="raise", plans={"pro": cellrate.Limit(PRO, period=3600, burst=PRO)})

            def left(key: str, want: int) -> int:
                deadline = time.monotonic() + 30  # the settlement follows the response
                while True:
                    remaining = store.peek(key, 0, plan="pro").remaining
                    if remaining == want or time.monotonic() > deadline:
                        return remaining
                    time.sleep(0.02)

            assert server.get("/charged?key=c&use=4", headers=PRO_KEY)[0] == 200
            assert left("c", PRO - 4) == PRO - 4  # 1 at the door, 3 more once it went
            assert server.get("/charged?key=c&use=0", headers=PRO_KEY)[0] == 200
            assert left("c", PRO - 4) == PRO - 4  # the door's unit given back
            # the key stayed on pro: a peek under "default" would carry it there
            assert store.peek("c", 0, plan="pro").limit == PRO
    finally:
        srv.stop()


def test_an_outage_is_answered_by_on_error_and_the_workers_survive():
    """Redis killed: every request is a 429 (on_error = "deny"), none a 500, the same
    workers answer; Redis started again (empty, the same port), the limiter goes back to it
    after its back-off."""
    srv = RedisServer()
    srv.start()
    try:
        with _nginx(srv) as server:
            pids = sorted(server.worker_pids())
            assert _admitted(server, "/by_variable?key=o1", 2, PRO_KEY) == 2
            srv.kill()
            statuses, _ = _statuses(server, "/by_variable?key=o1", 200, PRO_KEY)
            assert statuses.count(429) == 200, statuses
            assert sorted(server.worker_pids()) == pids
            srv.start()
            deadline = time.monotonic() + 60  # every worker probes after its back-off
            admitted = 0
            while admitted < WORKERS and time.monotonic() < deadline:
                admitted += server.get("/by_variable?key=o2", headers=PRO_KEY)[0] == 200
                time.sleep(0.05)
            assert admitted == WORKERS
            assert sorted(server.worker_pids()) == pids
            log = server.log()
            assert "Redis cannot decide" in log and "Redis decides again" in log
    finally:
        srv.stop()


def test_mistakes_are_server_errors_naming_the_option():
    """A Redis limit without client, a client for a limit kept in nginx, a client function
    giving no client, a Redis limit in a list, an unknown plan: each a 500 whose log line
    names it, and nothing spent."""
    srv = RedisServer()
    srv.start()
    try:
        with _nginx(srv, workers=2) as server:
            for path in ("/no_client?key=x", "/not_redis?key=x", "/bad_client?key=x",
                         "/several?key=x", "/by_function?key=x&plan=gold"):
                assert server.get(path)[0] == 500, path
            assert _admitted(server, "/by_function?key=x", 2 * FREE) == FREE
            log = server.log()
    finally:
        srv.stop()
    assert "cellrate.nginx: client must be a function returning each request's Redis" in log
    assert "cellrate.nginx: client is the Redis client of a Redis limit" in log
    assert "cellrate.nginx: option client: the function returned a string" in log
    assert "cellrate.nginx: limits: a Redis limit is decided alone in nginx" in log
    assert "plan must be 'default' or the name of one of the plans" in log
