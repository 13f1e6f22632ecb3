"""Decorator overhead in `make bench`: cellrate's @limit against a bare call and
against the decorators of ratelimit, aiolimiter and pyrate-limiter.

Each scenario calls a one-argument function that returns its argument, in a
loop (sync) or awaited in a loop inside one event loop (async); the limits are
so generous that every call is admitted without waiting, so what is timed is
the decorator's own cost on the admitted path. Per scenario: the median of
`--reps` timed runs (after one warm-up), in ns per call, and the overhead over
the bare call of the same run. One JSON object per line on stdout.

    python bench_decorators.py [--reps N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from itertools import repeat
from typing import Any, Callable, Dict, List, Tuple

RATE = 100_000_000  # per second: no call of a run is ever turned away
BURST = 1_000_000_000
TARGET_RUN_S = 0.1


def identity(x: Any) -> Any:
    return x


async def identity_async(x: Any) -> Any:
    return x


def sync_candidates() -> List[Tuple[str, Callable[[Any], Any]]]:
    import pyrate_limiter
    import ratelimit

    import cellrate

    pyrate = pyrate_limiter.Limiter(pyrate_limiter.InMemoryBucket(
        [pyrate_limiter.Rate(BURST, pyrate_limiter.Duration.SECOND)]))
    return [
        ("bare", identity),
        ("cellrate", cellrate.limit(RATE, burst=BURST)(identity)),
        ("cellrate_raise", cellrate.limit(RATE, burst=BURST, block=False)(identity)),
        ("cellrate_keyed", cellrate.limit(RATE, burst=BURST, key=lambda x: "user")(identity)),
        ("ratelimit", ratelimit.sleep_and_retry(ratelimit.limits(calls=BURST, period=1)(identity))),
        ("pyrate_limiter", pyrate.as_decorator(name="k")(identity)),
    ]


def async_candidates() -> List[Tuple[str, Callable[[Any], Any]]]:
    import aiolimiter
    import pyrate_limiter

    import cellrate

    aio = aiolimiter.AsyncLimiter(BURST, 1)

    async def with_aiolimiter(x: Any) -> Any:  # aiolimiter's idiom: `async with limiter`
        async with aio:
            return x

    pyrate = pyrate_limiter.Limiter(pyrate_limiter.InMemoryBucket(
        [pyrate_limiter.Rate(BURST, pyrate_limiter.Duration.SECOND)]))
    return [
        ("bare", identity_async),
        ("cellrate", cellrate.limit(RATE, burst=BURST)(identity_async)),
        ("cellrate_raise", cellrate.limit(RATE, burst=BURST, block=False)(identity_async)),
        ("aiolimiter", with_aiolimiter),
        ("pyrate_limiter", pyrate.as_decorator(name="k")(identity_async)),
    ]


def time_sync(fn: Callable[[Any], Any], ops: int) -> float:
    start = time.perf_counter_ns()
    for _ in repeat(None, ops):
        fn(1)
    return (time.perf_counter_ns() - start) / ops


async def time_async(fn: Callable[[Any], Any], ops: int) -> float:
    start = time.perf_counter_ns()
    for _ in repeat(None, ops):
        await fn(1)
    return (time.perf_counter_ns() - start) / ops


def measure(candidates, timer, reps: int) -> Dict[str, List[float]]:
    """Round-robin over the candidates, so a slow phase hits all of them."""
    ops = {name: max(1_000, min(2_000_000, int(TARGET_RUN_S * 1e9 / max(timer(fn, 200), 1.0))))
           for name, fn in candidates}
    runs: Dict[str, List[float]] = {name: [] for name, _ in candidates}
    for rep in range(reps + 1):
        for name, fn in candidates:
            ns = timer(fn, ops[name])
            if rep > 0:
                runs[name].append(ns)
    return runs


def emit(kind: str, runs: Dict[str, List[float]], admitted: Dict[str, bool]) -> None:
    bare = statistics.median(runs["bare"])
    for name, values in runs.items():
        median = statistics.median(values)
        record: Dict[str, Any] = {
            "id": f"py.decorator.{name}.{kind}.1t",
            "lang": "python",
            "group": f"py.decorator.{kind}",
            "ns_per_op": round(median, 3),
            "threads": 1,
            "runs_ns_per_op": [round(v, 3) for v in values],
            "expect": "allow",
            "expect_met": admitted[name],
        }
        print(json.dumps(record), flush=True)
        if name != "bare":
            print(json.dumps({"id": f"py.decorator_overhead.{name}.{kind}.1t", "lang": "python",
                              "ns_per_op": round(median - bare, 3), "threads": 1,
                              "expect": "allow", "expect_met": admitted[name]}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    sync = sync_candidates()
    admitted = {name: all(fn(i) == i for i in range(100)) for name, fn in sync}
    emit("sync", measure(sync, time_sync, args.reps), admitted)

    async def run_async() -> Tuple[Dict[str, List[float]], Dict[str, bool]]:
        candidates = async_candidates()  # aiolimiter binds to the running loop
        ok = {name: all([await fn(i) == i for i in range(100)]) for name, fn in candidates}
        ops = {}
        for name, fn in candidates:
            probe = await time_async(fn, 200)
            ops[name] = max(1_000, min(2_000_000, int(TARGET_RUN_S * 1e9 / max(probe, 1.0))))
        runs: Dict[str, List[float]] = {name: [] for name, _ in candidates}
        for rep in range(args.reps + 1):
            for name, fn in candidates:
                ns = await time_async(fn, ops[name])
                if rep > 0:
                    runs[name].append(ns)
        return runs, ok

    runs, ok = asyncio.run(run_async())
    emit("async", runs, ok)


if __name__ == "__main__":
    main()
