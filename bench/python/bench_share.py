"""Fleet shares benchmark: a ShareLimiter decision against an in-process Limiter decision
and a RedisLimiter decision, and a heartbeat's cost, through a real local redis-server.

Starts its own redis-server on a free loopback port (stopped on exit). One thread, every
call admitted (limits of 1e9/s); the candidates run round-robin, rep by rep, so a slow
phase of the machine hits all of them. The heartbeat is timed with 4 and with 64 members
in the fleet's record (what a heartbeat per interval costs a member: at interval=1 s,
its ns per second). Prints JSON lines (ns/op, median of --reps runs).

    python bench_share.py --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from itertools import repeat
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
from bench_redis import start_server  # noqa: E402

HIGH_RATE = 1_000_000_000
TARGET_RUN_S = 0.3


def time_calls(fn: Callable[[], Any], ops: int) -> float:
    start = time.perf_counter_ns()
    for _ in repeat(None, ops):
        fn()
    return (time.perf_counter_ns() - start) / ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    import redis

    import cellrate
    from cellrate.redis import RedisLimiter
    from cellrate.share import ShareLimiter

    process, port, directory = start_server()
    try:
        client = redis.Redis(port=port)
        local = cellrate.Limiter(HIGH_RATE, 1.0, burst=HIGH_RATE)
        share = ShareLimiter(client, HIGH_RATE, 1.0, burst=HIGH_RATE, name="bench",
                             interval=1.0)
        share.heartbeat()
        remote = RedisLimiter(client, HIGH_RATE, 1.0, burst=HIGH_RATE, name="bench")
        candidates = [("limiter", local.allow), ("share_limiter", share.allow),
                      ("redis_limiter", lambda: remote.allow("k"))]
        admitted = {name: all(fn() for _ in range(100)) for name, fn in candidates}
        ops = {name: max(200, min(2_000_000, int(TARGET_RUN_S * 1e9 / time_calls(fn, 200))))
               for name, fn in candidates}
        runs: Dict[str, List[float]] = {name: [] for name, _ in candidates}
        for rep in range(args.reps + 1):
            for name, fn in candidates:
                ns = time_calls(fn, ops[name])
                if rep:
                    runs[name].append(ns)
        for name, values in runs.items():
            print(json.dumps({"id": f"py.share.{name}.allow.1t", "lang": "python",
                              "group": "py.share",
                              "ns_per_op": round(statistics.median(values), 3), "threads": 1,
                              "runs_ns_per_op": [round(v, 3) for v in values],
                              "expect": "allow", "expect_met": admitted[name]}), flush=True)
        share.close()

        for members in (4, 64):
            fleet = [ShareLimiter(client, HIGH_RATE, 1.0, burst=HIGH_RATE,
                                  name=f"beat{members}", background=False)
                     for _ in range(members)]
            values = []
            for rep in range(args.reps + 1):
                start = time.perf_counter_ns()
                for _ in range(20):
                    for member in fleet:
                        member.heartbeat()
                ns = (time.perf_counter_ns() - start) / (20 * members)
                if rep:
                    values.append(ns)
            print(json.dumps({"id": f"py.share.heartbeat.{members}m", "lang": "python",
                              "ns_per_op": round(statistics.median(values), 3), "threads": 1,
                              "runs_ns_per_op": [round(v, 3) for v in values]}), flush=True)
            for member in fleet:
                member.close()
        client.close()
    finally:
        process.kill()
        process.wait()
        import shutil
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
