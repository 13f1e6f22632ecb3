"""Bytes of RSS per tracked key of one Python store, in a fresh process.

    python mem_py.py STORE [--keys N]

STORE: cellrate | throttled_gcra | limits_moving_window |
limits_sliding_window_counter. Every key ("user:<n>", made one at a time so
that only the copies the store keeps stay resident) is admitted once; the
limit is long enough (one hour windows, or a TAT an hour ahead) that no key
expires while the table fills. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json

RATE_PER_HOUR = 1_000_000_000


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def make_store(name: str, keys: int):
    """Returns (decide(key), tracked()) for the store `name`, sized for `keys`."""
    if name == "cellrate":
        import cellrate

        keyed = cellrate.KeyedLimiter(1, 3600, burst=1_000_000, capacity=keys)
        return keyed.allow, lambda: len(keyed)
    if name == "throttled_gcra":
        import throttled

        store = throttled.MemoryStore(options={"MAX_SIZE": 2 * keys})
        limiter = throttled.Throttled(using="gcra", quota=throttled.per_hour(RATE_PER_HOUR),
                                      store=store)
        return limiter.limit, lambda: None
    if name.startswith("limits_"):
        import limits
        import limits.storage
        import limits.strategies

        strategy = {
            "limits_moving_window": limits.strategies.MovingWindowRateLimiter,
            "limits_sliding_window_counter": limits.strategies.SlidingWindowCounterRateLimiter,
        }[name]
        item = limits.RateLimitItemPerHour(RATE_PER_HOUR)
        limiter = strategy(limits.storage.MemoryStorage())
        return (lambda key: limiter.hit(item, key)), lambda: None
    raise SystemExit(f"mem_py.py: unknown store {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("--keys", type=int, default=1_000_000)
    args = parser.parse_args()

    make_store(args.store, 1)[0]("warm-up")  # imports are not per key
    gc.collect()
    before = rss_bytes()  # before the store is made: a table made up front counts
    decide, tracked = make_store(args.store, args.keys)
    for i in range(args.keys):
        decide(f"user:{i}")
    gc.collect()
    after = rss_bytes()
    print(json.dumps({
        "id": f"mem.{args.store}",
        "lang": "python",
        "keys": args.keys,
        "tracked": tracked(),
        "rss_delta_bytes": after - before,
        "bytes_per_key": round((after - before) / args.keys, 2),
    }))


if __name__ == "__main__":
    main()
