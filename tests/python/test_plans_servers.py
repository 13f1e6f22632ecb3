"""Done when (plans): a FastAPI app with two tiers behind one dependency, under
uvicorn with 2 worker processes on one shared directory, admits exactly each tier's
burst per key, and a key upgraded from free to pro (its tier changed in the
server's table, the server restarted) carries what it used: exactly 15 more of pro's
20, not a fresh 20. Counted over concurrent requests however the kernel spreads
the connections over the workers; per hour, so nothing is restored meanwhile."""

import concurrent.futures
import json

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from test_web_servers import (access_log, free_port, get,  # noqa: E402
                              hammer_until_each_worker_answers, region,  # noqa: F401
                              server_env, start_uvicorn, stop, uvicorn_log_config,
                              wait_until_listening)

FREE, PRO = 5, 20


def serve(tmp_path, region, tiers, run):  # noqa: F811
    """Runs uvicorn with 2 workers on `region` with the key table `tiers`; the pids
    of the workers that answered."""
    port = free_port()
    access, log = tmp_path / f"access-{port}.log", tmp_path / f"server-{port}.log"
    config = uvicorn_log_config(tmp_path / f"log-{port}.json", access)
    env = server_env(CELLRATE_LIMIT=f"{FREE}/hour", CELLRATE_PRO=f"{PRO}/hour",
                     CELLRATE_REGION=region, CELLRATE_TIERS=json.dumps(tiers))
    proc = start_uvicorn("plans_app:app", port, env, config, log)
    try:
        wait_until_listening(port, proc, log)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            counts = {key: list(pool.map(lambda _, k=key: get(port, headers={"X-API-Key": k}),
                                         range(times)))
                      for key, times in run.items()}
        hammer_until_each_worker_answers(port, access, 1)  # keyless: "anonymous"
    finally:
        stop(proc)
    return counts, {pid for pid, _ in access_log(access)}, log


def test_uvicorn_two_workers_admit_each_tiers_burst_and_an_upgrade_carries(tmp_path, region):  # noqa: F811,E501
    tiers = {"k-free": "default", "k-pro": "pro", "k-upgraded": "default"}
    counts, workers, log = serve(tmp_path, region, tiers,
                                 {"k-free": 3 * FREE, "k-pro": 3 * PRO, "k-upgraded": 3 * FREE,
                                  "k-unknown": 3 * FREE})
    admitted = {key: statuses.count(200) for key, statuses in counts.items()}
    print(f"first server: admitted {admitted}; workers {len(workers)}")
    assert len(workers) == 2, log.read_text()
    assert admitted == {"k-free": FREE, "k-pro": PRO, "k-upgraded": FREE, "k-unknown": FREE}
    assert all(statuses.count(429) == len(statuses) - admitted[key]
               for key, statuses in counts.items())
    # the customer upgrades: the server's table changes, the server restarts
    counts, workers, log = serve(tmp_path, region, {**tiers, "k-upgraded": "pro"},
                                 {"k-upgraded": 3 * PRO, "k-free": FREE})
    admitted = {key: statuses.count(200) for key, statuses in counts.items()}
    print(f"after the upgrade: admitted {admitted}")
    assert admitted == {"k-upgraded": PRO - FREE, "k-free": 0}  # carried, not a fresh 20
