"""Python-level scenarios of `make bench`: floors, cellrate, and its PyPI peers.

Every scenario is a loop of calls timed with perf_counter_ns, run on 1 thread
and on 2 threads (total throughput of both), `--reps` times after one
untimed warm-up run; the value is the median. The scenarios of one group run
round-robin (one run of each per round) so that a slow phase of the machine
falls on all of them alike; the floors cellrate's targets are judged against
(time.monotonic_ns(), dict[key] += 1) run in cellrate's group, so that each
round gives a ratio of its own.

    python bench_py.py --part floors|cellrate|catalogue|concurrency|peers [--label NAME] [--reps N]

`--part cellrate` imports whichever `cellrate` comes first on sys.path, so
run.sh runs it once with the regular build and once (PYTHONPATH, --label
gil_released) with the copy built with CELLRATE_RELEASE_GIL.

One JSON object per line on stdout.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import statistics
import sys
import threading
import time
from itertools import repeat
from typing import Callable, List, Optional

KEYS = 100_000
SEED = 42
# Allow path of one key: 1e8 per second with a burst of 1e9, so no call of a
# run can be turned away. Keyed (cellrate): one per hour with a burst of 1e6,
# so every call is admitted and every key stays tracked. cellrate's allow()
# runs with the default clock ("fast") and with clock="monotonic".
ALLOW_RATE = 100_000_000
ALLOW_BURST = 1_000_000_000
KEYED_BURST = 1_000_000
# Window-based peers: this many per second admits every call of a run.
WINDOW_AMOUNT = 1_000_000_000

TARGET_RUN_S = 0.12  # wall time of one timed run, per thread

# Exceptions raised in threads a peer starts itself (limits' expiry timer
# races its own store under two threads): counted per scenario and reported in
# its record, not printed.
BACKGROUND_ERRORS: List[str] = []


def count_background_error(args: "threading.ExceptHookArgs") -> None:
    BACKGROUND_ERRORS.append(f"{args.exc_type.__name__}: {args.exc_value}")


def str_keys(count: int) -> List[str]:
    return [f"user:{i}" for i in range(count)]


def draws(keys: List[str], ops: int, seed: int) -> List[str]:
    rng = random.Random(seed)
    return [keys[rng.randrange(len(keys))] for _ in range(ops)]


# ---------------------------------------------------------------------------
# Loops. Each returns nothing; the caller times it.


def loop_call(fn: Callable[[], object], ops: int, _keys: Optional[List[str]]) -> None:
    for _ in repeat(None, ops):
        fn()


def loop_call_key(fn: Callable[[str], object], ops: int, keys: Optional[List[str]]) -> None:
    for key in keys:  # type: ignore[union-attr]  # exactly `ops` keys
        fn(key)


def loop_dict_incr(table: dict, ops: int, keys: Optional[List[str]]) -> None:
    for key in keys:  # type: ignore[union-attr]  # exactly `ops` keys
        table[key] += 1


def loop_empty(_fn: object, ops: int, _keys: Optional[List[str]]) -> None:
    for _ in repeat(None, ops):
        pass


class Scenario:
    """One timed loop: `loop(target, ops, keys)` on each of `threads` threads."""

    def __init__(self, sid: str, loop, target, threads: int, keyed: bool,
                 expect: str = "", verify: Optional[Callable[[], bool]] = None,
                 **info):
        self.sid = sid
        self.group = ""  # set by run_group
        self.loop = loop
        self.target = target
        self.threads = threads
        self.keyed = keyed
        self.expect = expect
        self.verify = verify
        self.info = info
        self.ops = 0
        self.keys: List[Optional[List[str]]] = [None] * threads
        self.runs: List[float] = []
        self.expect_met = True
        self.background_errors = 0

    def time_once(self) -> float:
        if self.threads == 1:
            start = time.perf_counter_ns()
            self.loop(self.target, self.ops, self.keys[0])
            return (time.perf_counter_ns() - start) / self.ops
        barrier = threading.Barrier(self.threads + 1)

        def work(index: int) -> None:
            barrier.wait()
            self.loop(self.target, self.ops, self.keys[index])

        workers = [threading.Thread(target=work, args=(t,)) for t in range(self.threads)]
        for w in workers:
            w.start()
        barrier.wait()
        start = time.perf_counter_ns()
        for w in workers:
            w.join()
        return (time.perf_counter_ns() - start) / (self.ops * self.threads)

    def emit(self) -> None:
        record = {
            "id": self.sid,
            "lang": "python",
            "group": self.group,
            "ns_per_op": round(statistics.median(self.runs), 3),
            "threads": self.threads,
            "ops_per_run": self.ops,
            "runs_ns_per_op": [round(r, 3) for r in self.runs],
            "expect": self.expect,
            "expect_met": self.expect_met,
        }
        if self.background_errors:
            record["background_thread_errors"] = self.background_errors
        record.update(self.info)
        print(json.dumps(record), flush=True)


def calibrate(scenario: Scenario, key_pool: List[List[str]]) -> None:
    """Picks ops so that one run takes about TARGET_RUN_S per thread."""
    probe = 200
    scenario.ops = probe
    if scenario.keyed:
        scenario.keys = [pool[:probe] for pool in key_pool[: scenario.threads]]
    single = Scenario(scenario.sid, scenario.loop, scenario.target, 1, scenario.keyed)
    single.ops, single.keys = probe, scenario.keys[:1]
    per_op = max(min(single.time_once() for _ in range(3)), 1.0)
    ops = int(TARGET_RUN_S * 1e9 / per_op)
    ops = max(1_000, min(ops, 2_000_000))
    scenario.ops = ops
    if scenario.keyed:
        scenario.keys = [(pool * (ops // len(pool) + 1))[:ops] for pool in key_pool[: scenario.threads]]


def run_group(group: str, scenarios: List[Scenario], reps: int, key_pool: List[List[str]]) -> None:
    """Runs `scenarios` round-robin, one run of each per round: run k of each
    comes from round k (the report pairs them by `group`)."""
    for s in scenarios:
        s.group = group
        if s.verify is not None and not s.verify():
            s.expect_met = False
        calibrate(s, key_pool)
    for rep in range(reps + 1):
        for s in scenarios:
            errors_before = len(BACKGROUND_ERRORS)
            ns = s.time_once()
            s.background_errors += len(BACKGROUND_ERRORS) - errors_before
            if rep > 0:
                s.runs.append(ns)
    for s in scenarios:
        if s.verify is not None and not s.verify():
            s.expect_met = False
        s.emit()


def both_thread_counts(make: Callable[[int], Scenario]) -> List[Scenario]:
    return [make(1), make(2)]


def all_admitted(fn: Callable[[], object], admitted: Callable[[object], bool],
                 calls: int = 200) -> Callable[[], bool]:
    return lambda: all(admitted(fn()) for _ in range(calls))


def all_admitted_keyed(fn: Callable[[str], object], admitted: Callable[[object], bool],
                       keys: List[str], calls: int = 200) -> Callable[[], bool]:
    return lambda: all(admitted(fn(k)) for k in keys[:calls])


def truthy(value: object) -> bool:
    return bool(value)


# ---------------------------------------------------------------------------
# Parts.


def part_floors(reps: int, keys: List[str], pool: List[List[str]]) -> None:
    """The empty loop; the floors of the targets run with cellrate (floors_beside)."""
    scenarios = [Scenario(f"py.floor.empty_loop.{threads}t", loop_empty, None, threads, False)
                 for threads in (1, 2)]
    run_group("py.floors", scenarios, reps, pool)


def floors_beside(threads: int, keys: List[str]) -> List[Scenario]:
    """The floors cellrate's targets are judged against, for the same rounds as
    cellrate's calls: one time.monotonic_ns() call, and dict[key] += 1 on the
    same keys."""
    return [Scenario(f"py.floor.monotonic_ns.{threads}t", loop_call, time.monotonic_ns, threads,
                     False),
            Scenario(f"py.floor.dict_incr.{threads}t", loop_dict_incr, dict.fromkeys(keys, 0),
                     threads, True)]


def part_cellrate(reps: int, keys: List[str], pool: List[List[str]], label: str) -> None:
    import cellrate

    prefix = "py.cellrate" if label == "default" else f"py.cellrate_{label}"
    info = {"module": cellrate.__file__, "cellrate_version": cellrate.__version__}
    scenarios: List[Scenario] = []
    for threads in (1, 2):
        if label == "default":
            scenarios += floors_beside(threads, keys)
        for clock, suffix in ((None, ""), ("monotonic", "_monotonic_clock")):
            lim = cellrate.Limiter(ALLOW_RATE, burst=ALLOW_BURST, clock=clock)
            scenarios.append(Scenario(f"{prefix}.limiter.allow{suffix}.{threads}t", loop_call,
                                      lim.allow, threads, False, "allow",
                                      all_admitted(lim.allow, truthy), **info))
        lim_check = cellrate.Limiter(ALLOW_RATE, burst=ALLOW_BURST)
        scenarios.append(Scenario(f"{prefix}.limiter.check.{threads}t", loop_call, lim_check.check,
                                  threads, False, "allow",
                                  all_admitted(lim_check.check, lambda d: d.allowed), **info))
        # charge and take take their units; check(1) is the row to hold them to
        for name, method, admitted in (("check_cost1", "check", lambda d: d.allowed),
                                       ("charge", "charge", lambda d: d.allowed),
                                       ("take", "take", lambda n: n == 1)):
            fn = functools.partial(getattr(cellrate.Limiter(ALLOW_RATE, burst=ALLOW_BURST), method), 1)
            scenarios.append(Scenario(f"{prefix}.limiter.{name}.{threads}t", loop_call, fn, threads,
                                      False, "allow", all_admitted(fn, admitted), **info))
        for clock, suffix in ((None, ""), ("monotonic", "_monotonic_clock")):
            keyed = cellrate.KeyedLimiter(1, 3600, burst=KEYED_BURST, capacity=len(keys),
                                          clock=clock)
            for k in keys:
                keyed.allow(k)
            scenarios.append(Scenario(f"{prefix}.keyed.allow{suffix}.{threads}t", loop_call_key,
                                      keyed.allow, threads, True, "allow",
                                      all_admitted_keyed(keyed.allow, truthy, pool[0]), **info))
    run_group(f"py.cellrate.{label}", scenarios, reps, pool)


def part_catalogue(reps: int, keys: List[str], pool: List[List[str]]) -> None:
    """Each algorithm's allow path (every call admitted: windows of 10**7 s with
    rates under their ceilings), and check_all of 2 and 3 limits against as
    many separate check() calls."""
    import cellrate

    scenarios: List[Scenario] = []
    limits = {
        "gcra": lambda: cellrate.Limiter(ALLOW_RATE, burst=ALLOW_BURST, algorithm="gcra"),
        "token_bucket": lambda: cellrate.Limiter(ALLOW_RATE, burst=ALLOW_BURST, algorithm="token_bucket"),
        "fixed_window": lambda: cellrate.Limiter(10**15, 10**7, algorithm="fixed_window"),
        "sliding_window": lambda: cellrate.Limiter(9 * 10**7, 10**7, algorithm="sliding_window"),
    }
    keyed_limits = {
        "gcra": lambda: cellrate.KeyedLimiter(1, 3600, burst=KEYED_BURST, capacity=len(keys)),
        "token_bucket": lambda: cellrate.KeyedLimiter(1, 3600, burst=KEYED_BURST, capacity=len(keys),
                                                      algorithm="token_bucket"),
        "fixed_window": lambda: cellrate.KeyedLimiter(10**15, 10**7, capacity=len(keys),
                                                      algorithm="fixed_window"),
        "sliding_window": lambda: cellrate.KeyedLimiter(9 * 10**7, 10**7, capacity=len(keys),
                                                        algorithm="sliding_window"),
    }
    for name, make in limits.items():
        lim = make()
        scenarios.append(Scenario(f"py.catalogue.{name}.limiter.allow.1t", loop_call, lim.allow, 1,
                                  False, "allow", all_admitted(lim.allow, truthy)))
        keyed = keyed_limits[name]()
        for k in keys:
            keyed.allow(k)
        scenarios.append(Scenario(f"py.catalogue.{name}.keyed.allow.1t", loop_call_key, keyed.allow,
                                  1, True, "allow", all_admitted_keyed(keyed.allow, truthy, pool[0])))
    for count in (2, 3):
        items = [cellrate.Limiter(ALLOW_RATE, burst=ALLOW_BURST) for _ in range(count)]
        separate = [cellrate.Limiter(ALLOW_RATE, burst=ALLOW_BURST) for _ in range(count)]
        one_call = functools.partial(cellrate.check_all, items)
        checks = [lim.check for lim in separate]

        def separate_calls(checks=checks):
            allowed = True
            for check in checks:
                allowed = check().allowed and allowed
            return allowed

        scenarios.append(Scenario(f"py.check_all.{count}.1t", loop_call, one_call, 1, False, "allow",
                                  all_admitted(one_call, lambda d: d.allowed)))
        scenarios.append(Scenario(f"py.separate.{count}.1t", loop_call, separate_calls, 1, False,
                                  "allow", all_admitted(separate_calls, truthy)))
    run_group("py.catalogue", scenarios, reps, pool)


def part_concurrency(reps: int, keys: List[str], pool: List[List[str]]) -> None:
    """acquire + release in flight: cellrate.Concurrency (in process and in a
    shared region) against threading.BoundedSemaphore and asyncio.Semaphore
    (uncontended: a limit no thread fills)."""
    import asyncio
    import tempfile

    import cellrate

    own = cellrate.Concurrency(64)
    region_dir = tempfile.mkdtemp(prefix="cellrate-bench-")
    shared = cellrate.Concurrency(64, shared=f"{region_dir}/concurrency")
    semaphore = threading.BoundedSemaphore(64)

    def cellrate_cycle(c=own):
        slot = c.try_acquire()
        return slot.release()

    def shared_cycle(c=shared):
        slot = c.try_acquire()
        return slot.release()

    def semaphore_cycle(s=semaphore):
        s.acquire()
        s.release()
        return True

    scenarios: List[Scenario] = []
    for threads in (1, 2):
        for name, fn in (("cellrate.concurrency", cellrate_cycle),
                         ("cellrate.concurrency.shared", shared_cycle),
                         ("threading.bounded_semaphore", semaphore_cycle)):
            scenarios.append(Scenario(f"py.{name}.acquire_release.{threads}t", loop_call, fn,
                                      threads, False, "allow", all_admitted(fn, truthy)))
    # asyncio: `async with` in one coroutine, `ops` times, on a fresh loop
    def loop_async_with(make_context, ops: int, _keys: Optional[List[str]]) -> None:
        async def cycles() -> None:
            for _ in repeat(None, ops):
                async with make_context():
                    pass

        asyncio.run(cycles())

    loop_semaphore = asyncio.Semaphore(64)
    for name, make_context in (("cellrate.concurrency.async_hold", own.hold),
                               ("asyncio.semaphore.async_with", lambda: loop_semaphore)):
        scenarios.append(Scenario(f"py.{name}.acquire_release.1t", loop_async_with, make_context,
                                  1, False))
    run_group("py.concurrency", scenarios, reps, pool)
    shutil.rmtree(region_dir, ignore_errors=True)


def peer_factories(keys: List[str]):
    """(name, make_single, make_keyed, admitted, make_check) for each peer.

    make_single() -> zero-argument callable deciding for one fixed key;
    make_keyed() -> one-argument callable deciding for the given key;
    make_check() -> zero-argument callable that returns the decision with
    its numbers (remaining, retry/reset), or None when the peer has no such
    call.
    """
    import limits
    import limits.storage
    import limits.strategies
    import pyrate_limiter
    import throttled
    import token_bucket

    item = limits.RateLimitItemPerSecond(WINDOW_AMOUNT)

    def limits_maker(strategy_cls):
        def single():
            lim = strategy_cls(limits.storage.MemoryStorage())
            return functools.partial(lim.hit, item, "k")

        def keyed():
            lim = strategy_cls(limits.storage.MemoryStorage())
            return functools.partial(lim.hit, item)

        def check():
            lim = strategy_cls(limits.storage.MemoryStorage())

            def hit_and_stats():
                allowed = lim.hit(item, "k")
                lim.get_window_stats(item, "k")
                return allowed

            return hit_and_stats

        return single, keyed, check

    def throttled_maker(using):
        quota = throttled.per_sec(ALLOW_RATE, burst=ALLOW_BURST)

        def make():
            store = throttled.MemoryStore(options={"MAX_SIZE": 4 * len(keys)})
            return throttled.Throttled(using=using, quota=quota, store=store)

        def single():
            return functools.partial(make().limit, "k")

        def keyed():
            return make().limit

        return single, keyed, single  # limit() returns the full state

    def pyrate_single():
        rate = pyrate_limiter.Rate(WINDOW_AMOUNT, pyrate_limiter.Duration.SECOND)
        lim = pyrate_limiter.Limiter(pyrate_limiter.InMemoryBucket([rate]))
        return functools.partial(lim.try_acquire, "k", blocking=False)

    class PerNameBuckets(pyrate_limiter.BucketFactory):
        """One in-memory bucket per item name: pyrate-limiter's way to key."""

        def __init__(self):
            self.rates = [pyrate_limiter.Rate(WINDOW_AMOUNT, pyrate_limiter.Duration.SECOND)]
            self.clock = pyrate_limiter.MonotonicClock()
            self.by_name = {}

        def wrap_item(self, name, weight=1):
            return pyrate_limiter.RateItem(name, self.clock.now(), weight=weight)

        def get(self, item):
            bucket = self.by_name.get(item.name)
            if bucket is None:
                bucket = self.by_name[item.name] = pyrate_limiter.InMemoryBucket(self.rates)
            return bucket

    def pyrate_keyed():
        lim = pyrate_limiter.Limiter(PerNameBuckets())
        return functools.partial(lim.try_acquire, blocking=False)

    def token_bucket_single():
        lim = token_bucket.Limiter(ALLOW_RATE, ALLOW_BURST, token_bucket.MemoryStorage())
        return functools.partial(lim.consume, "k")

    def token_bucket_keyed():
        lim = token_bucket.Limiter(ALLOW_RATE, ALLOW_BURST, token_bucket.MemoryStorage())
        return lim.consume

    fw = limits_maker(limits.strategies.FixedWindowRateLimiter)
    mw = limits_maker(limits.strategies.MovingWindowRateLimiter)
    swc = limits_maker(limits.strategies.SlidingWindowCounterRateLimiter)
    gcra = throttled_maker("gcra")
    tb = throttled_maker("token_bucket")

    def not_limited(result):
        return not result.limited

    return [
        ("limits_fixed_window", fw[0], fw[1], truthy, fw[2], truthy),
        ("limits_moving_window", mw[0], mw[1], truthy, mw[2], truthy),
        ("limits_sliding_window_counter", swc[0], swc[1], truthy, swc[2], truthy),
        ("throttled_gcra", gcra[0], gcra[1], not_limited, gcra[2], not_limited),
        ("throttled_token_bucket", tb[0], tb[1], not_limited, tb[2], not_limited),
        ("pyrate_limiter_in_memory", pyrate_single, pyrate_keyed, truthy, None, None),
        ("token_bucket", token_bucket_single, token_bucket_keyed, truthy, None, None),
    ]


def part_peers(reps: int, keys: List[str], pool: List[List[str]]) -> None:
    for name, single, keyed, admitted, check, check_admitted in peer_factories(keys):
        scenarios: List[Scenario] = []
        for threads in (1, 2):
            fn = single()
            scenarios.append(Scenario(f"py.{name}.limiter.allow.{threads}t", loop_call, fn,
                                      threads, False, "allow", all_admitted(fn, admitted)))
            if check is not None:
                fn = check()
                scenarios.append(Scenario(f"py.{name}.limiter.check.{threads}t", loop_call, fn,
                                          threads, False, "allow",
                                          all_admitted(fn, check_admitted)))
            fn = keyed()
            for k in keys:
                fn(k)
            scenarios.append(Scenario(f"py.{name}.keyed.allow.{threads}t", loop_call_key, fn,
                                      threads, True, "allow",
                                      all_admitted_keyed(fn, admitted, pool[0])))
        run_group(f"py.peers.{name}", scenarios, reps, pool)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("floors", "cellrate", "catalogue", "concurrency", "peers"),
                        required=True)
    parser.add_argument("--label", default="default")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--keys", type=int, default=KEYS)
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be >= 1")

    threading.excepthook = count_background_error
    keys = str_keys(args.keys)
    # one pool of random draws per thread (the first also serves one thread)
    pool = [draws(keys, 200_000, SEED + t) for t in range(2)]
    if args.part == "floors":
        part_floors(args.reps, keys, pool)
    elif args.part == "cellrate":
        part_cellrate(args.reps, keys, pool, args.label)
    elif args.part == "catalogue":
        part_catalogue(args.reps, keys, pool)
    elif args.part == "concurrency":
        part_concurrency(args.reps, keys, pool)
    else:
        part_peers(args.reps, keys, pool)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
