"""Keyed allow() on 1 and 2 threads: total calls per second, and the ratio.

Run by `make test-ft` on the free-threaded interpreter (where the two threads
run the compiled core in parallel) and usable on any CPython (where the GIL
serialises them, so the ratio stays near 1). Prints one line per thread count,
then the ratio; the median of `--reps` timed runs after one warm-up.

    python ft_scaling.py [--reps 5] [--ops 400000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from typing import List

import cellrate

KEYS = 100_000


def timed_run(keyed: cellrate.KeyedLimiter, draws: List[List[str]]) -> float:
    """Calls per second of all threads together, one list of keys per thread."""
    barrier = threading.Barrier(len(draws) + 1)
    allow = keyed.allow

    def work(keys: List[str]) -> None:
        barrier.wait()
        for key in keys:
            allow(key)

    threads = [threading.Thread(target=work, args=(keys,)) for keys in draws]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    return sum(len(keys) for keys in draws) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ops", type=int, default=400_000, help="calls per thread per run")
    args = parser.parse_args()
    rng = random.Random(42)
    names = [f"user:{i}" for i in range(KEYS)]
    # one per hour with a large burst: every call is admitted, every key stays tracked
    keyed = cellrate.KeyedLimiter(1, 3600, burst=1_000_000, capacity=2 * KEYS)
    for name in names:
        keyed.allow(name)
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    rates = {}
    for threads in (1, 2):
        draws = [[rng.choice(names) for _ in range(args.ops)] for _ in range(threads)]
        timed_run(keyed, draws)  # warm-up
        rates[threads] = statistics.median(timed_run(keyed, draws) for _ in range(args.reps))
        print(f"keyed allow(), {threads} thread{'s' if threads > 1 else ''}: "
              f"{rates[threads] / 1e6:.2f} M calls/s ({1e9 / rates[threads]:.0f} ns per call)")
    print(f"keyed allow() scaling, 2 threads vs 1: {rates[2] / rates[1]:.2f}x "
          f"(Python {sys.version.split()[0]}, GIL {'on' if gil else 'off'})")


if __name__ == "__main__":
    main()
