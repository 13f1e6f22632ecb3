"""Plans through Redis in OpenResty (docs/redis.md, "Plans"): four nginx workers decide
one Redis limit with two tiers (free 5 an hour, pro 20 an hour: nothing comes back while
the test runs), each request under the plan it names. Each tier admits exactly its burst
per key, and a key upgraded from free to pro carries the 5 units it used: 15 more, not a
fresh 20."""

from __future__ import annotations

import pathlib
import sys
import threading

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
from redis_servers import RedisServer, needs_redis  # noqa: E402

from server import Nginx  # noqa: E402

pytestmark = needs_redis

TEMPLATE = HERE / "redis_plans.conf.in"
FREE, PRO, CLIENTS = 5, 20, 4


def _admitted(server: Nginx, path: str, each: int) -> int:
    """Requests of `path` from CLIENTS threads (each its own connection, so the workers
    share them), `each` per thread: the count admitted."""
    statuses: list[int] = []

    def hammer() -> None:
        connection = server.connection("127.0.0.1")
        for _ in range(each):
            statuses.append(server.get(path, connection)[0])
        connection.close()

    threads = [threading.Thread(target=hammer) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(statuses) <= {200, 429}, statuses
    return statuses.count(200)


def test_four_workers_admit_each_tiers_burst_and_an_upgrade_carries():
    srv = RedisServer()
    srv.start()
    try:
        with Nginx(workers=4, template=TEMPLATE,
                   fields={"REDIS_PORT": str(srv.port), "FREE": str(FREE),
                           "PRO": str(PRO)}) as server:
            assert _admitted(server, "/limited?key=f", 2 * FREE) == FREE
            assert _admitted(server, "/limited?key=p&plan=pro", 2 * PRO) == PRO
            assert _admitted(server, "/limited?key=u&plan=default", 2 * FREE) == FREE
            # upgraded: the 5 units used carry into pro (never a fresh allowance)
            assert _admitted(server, "/limited?key=u&plan=pro", 2 * PRO) == PRO - FREE
            assert len(set(server.worker_pids())) == 4
    finally:
        srv.stop()
