"""Done when (priorities inside one limit): under overload the bulk class is refused
while critical still gets its share, counted. FastAPI under uvicorn, 2 worker
processes on one shared directory, one limit of BURST per hour (nothing restored
during the test): bulk requests come until both workers have refused bulk, then
critical ones. Bulk is admitted exactly its half of the burst and no more, however
the kernel spreads the connections; critical then gets the half bulk may not spend."""

import concurrent.futures

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from test_web_servers import (access_log, free_port, get, region,  # noqa: E402,F401
                              server_env, start_uvicorn, stop, uvicorn_log_config,
                              wait_until_listening)
import time  # noqa: E402

BURST = 10


def test_uvicorn_two_workers_bulk_refused_critical_served(tmp_path, region):  # noqa: F811
    port = free_port()
    access, log = tmp_path / "access.log", tmp_path / "server.log"
    config = uvicorn_log_config(tmp_path / "log.json", access)
    env = server_env(CELLRATE_LIMIT=f"{BURST}/hour", CELLRATE_REGION=region)
    proc = start_uvicorn("priority_app:app", port, env, config, log)
    try:
        wait_until_listening(port, proc, log)
        bulk: list[int] = []
        deadline = time.monotonic() + 90
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            while time.monotonic() < deadline:  # overload: until both workers refused bulk
                bulk += list(pool.map(lambda _: get(port), range(24)))
                time.sleep(0.3)
                refusers = {pid for pid, status in access_log(access) if status == 429}
                if len(refusers) >= 2:
                    break
            critical = list(pool.map(lambda _: get(port, headers={"X-Class": "critical"}),
                                     range(2 * BURST)))
    finally:
        stop(proc)
    workers = {pid for pid, _ in access_log(access)}
    print(f"bulk (200s, 429s): {bulk.count(200), bulk.count(429)}; "
          f"critical: {critical.count(200), critical.count(429)}; workers {len(workers)}")
    assert len(workers) == 2, log.read_text()
    assert bulk.count(200) == BURST // 2  # bulk never spends the reserved half
    assert bulk.count(429) == len(bulk) - BURST // 2
    assert critical.count(200) == BURST - BURST // 2  # critical gets the half left
    assert critical.count(429) == len(critical) - (BURST - BURST // 2)
