"""throttled-py's published benchmark, in its own shape, with cellrate in the same loop.

throttled-py (PyPI) publishes a table of throughputs (its README, "Benchmarks"; the
code: tests/benchmarks/test_throttled.py in its repository). Its shape, reproduced
here in code of our own: one key, "/ping"; a quota of per_sec(1000), whose burst is
1000; `limit("/ping", cost=1)` called 100,000 times one after another, each call
wrapped, as it is made, in a fresh timing function that reads perf_counter_ns before
and after it and appends both readings and their difference to lists; throughput =
calls / (last end - first start). The baselines are timed the same way:
`table[key] = table.get(key, 0) + 1` in memory, `INCRBY key 1` through Redis. At
1000 per second and this loop's speed, most calls are refused: the load is the one
its README shows.

Here each library runs every algorithm both have (throttled-py's leaking bucket
against cellrate's gcra, which is the leaky bucket as a meter), in memory (throttled's
MemoryStore; cellrate's KeyedLimiter) and through a local redis-server (gcra and token
bucket, the two defaults: throttled-py's RedisStore; cellrate's RedisLimiter with
deny_cache=False, one round trip a call, and with its default deny cache), cellrate
calling check("/ping", cost=1) (a full Decision, as limit() returns a full result).
The same calls are also timed in a bare `for` loop, without the per-call timing.
Every scenario of a group runs once per round, round-robin, with a fresh limiter (and
a flushed server) each run; one untimed warm-up round first.

    python bench_throttled.py [--reps N] [--batch N] [--redis-batch N]

One JSON object per line: ns_per_op is 1e9 / throughput (wall time per call, the
timing wrapper included in the timed shape), runs_ns_per_op each run's, latency_ns the
mean of the per-call timings, refused the share of calls refused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_redis import start_server  # noqa: E402

KEY = "/ping"
LIMIT = 1000  # per second; throttled's per_sec(1000) has a burst of 1000, as cellrate's default
BASELINE_KEY = "throttled:v2"
# throttled-py's algorithm -> cellrate's
ALGORITHMS = {
    "fixed_window": "fixed_window",
    "sliding_window": "sliding_window",
    "token_bucket": "token_bucket",
    "leaking_bucket": "gcra",
    "gcra": "gcra",
}
REDIS_ALGORITHMS = ("gcra", "token_bucket")


# ---------------------------------------------------------------------------
# The two loop shapes. `task(subject)` returns whether the call was refused.


def timed_serial(task: Callable[[Any], bool], subject: Any, batch: int) -> Tuple[float, float, int]:
    """Each call wrapped, as it is made, in a new function that times it and appends
    the readings to lists; returns (ns per call from the first start to the last end,
    mean ns inside the wrapper, calls refused)."""
    starts: List[int] = []
    ends: List[int] = []
    handled: List[int] = []

    def wrap(fn: Callable[[Any], bool]) -> Callable[[Any], bool]:
        def timed(arg: Any) -> bool:
            start = time.perf_counter_ns()
            starts.append(start)
            refused = fn(arg)
            end = time.perf_counter_ns()
            ends.append(end)
            handled.append(end - start)
            return refused

        return timed

    refused = [wrap(task)(subject) for _ in range(batch)]
    return (max(ends) - min(starts)) / batch, sum(handled) / batch, sum(refused)


def bare_serial(task: Callable[[Any], bool], subject: Any, batch: int) -> Tuple[float, float, int]:
    """The same calls in a plain loop: (ns per call, the same, calls refused)."""
    refused = 0
    start = time.perf_counter_ns()
    for _ in range(batch):
        refused += task(subject)
    ns = (time.perf_counter_ns() - start) / batch
    return ns, ns, refused


# ---------------------------------------------------------------------------
# The calls, as throttled-py's benchmark makes them.


def throttled_call(throttle: Any) -> bool:
    return throttle.limit(KEY, cost=1).limited


def cellrate_call(limiter: Any) -> bool:
    return not limiter.check(KEY, cost=1).allowed


def dict_baseline(table: Dict[str, int]) -> bool:
    table[BASELINE_KEY] = table.get(BASELINE_KEY, 0) + 1
    return False


def incrby_baseline(client: Any) -> bool:
    client.incrby(BASELINE_KEY, 1)
    return False


def cellrate_limit_args(algorithm: str) -> Dict[str, Any]:
    # the windows take no burst: their amount is the rate
    return {"algorithm": algorithm} if "window" in algorithm else {"burst": LIMIT,
                                                                   "algorithm": algorithm}


# ---------------------------------------------------------------------------
# Scenarios: (id, task, make the subject afresh for a run).

Scenario = Tuple[str, Callable[[Any], bool], Callable[[], Any]]


def memory_scenarios() -> List[Scenario]:
    import throttled

    import cellrate

    def throttled_subject(using: str) -> Callable[[], Any]:
        return lambda: throttled.Throttled(using=using, quota=throttled.per_sec(LIMIT),
                                           store=throttled.MemoryStore())

    def cellrate_subject(algorithm: str) -> Callable[[], Any]:
        return lambda: cellrate.KeyedLimiter(LIMIT, **cellrate_limit_args(algorithm))

    scenarios: List[Scenario] = [("baseline", dict_baseline, dict)]
    for theirs, ours in ALGORITHMS.items():
        scenarios.append((f"throttled.{theirs}", throttled_call, throttled_subject(theirs)))
        scenarios.append((f"cellrate.{theirs}", cellrate_call, cellrate_subject(ours)))
    return scenarios


def redis_scenarios(port: int) -> List[Scenario]:
    import redis
    import throttled
    from throttled.store import RedisStore

    from cellrate.redis import RedisLimiter

    client = redis.Redis(port=port)

    def throttled_subject(using: str) -> Callable[[], Any]:
        return lambda: throttled.Throttled(
            using=using, quota=throttled.per_sec(LIMIT),
            store=RedisStore(server=f"redis://127.0.0.1:{port}/0"))

    def cellrate_subject(algorithm: str, deny_cache: bool) -> Callable[[], Any]:
        return lambda: RedisLimiter(redis.Redis(port=port), LIMIT, deny_cache=deny_cache,
                                    **cellrate_limit_args(algorithm))

    scenarios: List[Scenario] = [("baseline", incrby_baseline, lambda: client)]
    for algorithm in REDIS_ALGORITHMS:
        scenarios += [
            (f"throttled.{algorithm}", throttled_call, throttled_subject(algorithm)),
            (f"cellrate.{algorithm}.no_deny_cache", cellrate_call,
             cellrate_subject(algorithm, False)),
            (f"cellrate.{algorithm}.deny_cache", cellrate_call, cellrate_subject(algorithm, True)),
        ]
    return scenarios


# ---------------------------------------------------------------------------


def run_group(group: str, scenarios: List[Scenario], shape: Callable, batch: int, reps: int,
              before_run: Callable[[], None] = lambda: None) -> None:
    runs: Dict[str, List[Tuple[float, float, int]]] = {sid: [] for sid, _, _ in scenarios}
    for rep in range(reps + 1):
        for sid, task, make in scenarios:
            before_run()
            subject = make()
            result = shape(task, subject, batch)
            if rep > 0:
                runs[sid].append(result)
    for sid, _, _ in scenarios:
        values = runs[sid]
        print(json.dumps({
            "id": f"py.throttled_shape.{group}.{sid}", "lang": "python",
            "group": f"py.throttled_shape.{group}",
            "ns_per_op": round(statistics.median(v[0] for v in values), 3), "threads": 1,
            "ops_per_run": batch, "runs_ns_per_op": [round(v[0], 3) for v in values],
            "latency_ns": round(statistics.median(v[1] for v in values), 3),
            "refused": round(statistics.median(v[2] for v in values) / batch, 4),
        }), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=100_000, help="calls a run, in memory")
    parser.add_argument("--redis-batch", type=int, default=10_000,
                        help="calls a run, through Redis")
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be >= 1")

    run_group("memory", memory_scenarios(), timed_serial, args.batch, args.reps)
    run_group("bare", memory_scenarios(), bare_serial, args.batch, args.reps)
    if args.no_redis:
        return
    server, port, directory = start_server()
    try:
        def flush() -> None:
            subprocess.run(["redis-cli", "-p", str(port), "flushall"], check=True,
                           stdout=subprocess.DEVNULL)

        run_group("redis", redis_scenarios(port), timed_serial, args.redis_batch, args.reps,
                  before_run=flush)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
