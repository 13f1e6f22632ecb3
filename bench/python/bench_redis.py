"""Redis store benchmark: decisions per second through a real local redis-server.

Starts its own redis-server on a free loopback port (stopped on exit), then
times, one scenario after another, from one Python client and from 4
processes, sync and asyncio:

* floor: a plain INCR round trip on a bare socket, written and read by hand (what
  one round trip costs with no client library at all), the same INCR through
  redis-py (what the client library adds), and a script that only reads TIME,
  GETs and SETs with an expiry (what any decision on the server's clock costs);
* concurrency: RedisConcurrency's acquire and release of a unit, against the
  two round trips of an INCR and a DECR (the least a counter in flight costs);
* cellrate: RedisLimiter.allow (admitted), and the refused path (a drained key),
  answered by the deny cache, and without it (one round trip each);
* peers: limits' Redis moving window and sliding window counter, throttled-py's
  Redis GCRA, pyrate-limiter's Redis bucket (asyncio: limits' two, on redis-py's
  asyncio client).

Every limit is high enough that each call is admitted (except the refused
row), on one key. Prints JSON lines (ops/s, median of --reps runs) and, with
--markdown FILE, a table with each row's ratio to the INCR floor and the spread of
its runs (slowest and fastest run against the median).

    python bench_redis.py --reps 3 --ops 20000 --markdown results/redis.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

HIGH_RATE = 1_000_000  # per second: every call admitted
SCRIPT_FLOOR = (b"local t = redis.call('TIME'); redis.call('GET', KEYS[1]); "
                b"redis.call('SET', KEYS[1], '1764579000123456789', 'PX', 1000); return 1")
KEY = "bench"  # the server is flushed before each run
INCR_REQUEST = b"*2\r\n$4\r\nINCR\r\n$5\r\nbench\r\n"  # INCR KEY, as RESP


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, int, str]:
    port = free_port()
    directory = tempfile.mkdtemp(prefix="cellrate-bench-redis-")
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", directory],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return process, port, directory
        except OSError:
            time.sleep(0.02)
    process.kill()
    raise SystemExit("bench_redis: redis-server did not start")


# --------------------------------------------------------------------------
# Scenarios: name -> factory(port) returning a zero-argument call (sync) or
# a coroutine function (asyncio). A call returns True when admitted.


def sync_scenarios() -> Dict[str, Callable[[int], Callable[[], object]]]:
    def client(port: int):
        import redis
        return redis.Redis(port=port)

    def incr(port):
        c = client(port)
        return lambda: c.incr(KEY) > 0

    def raw_incr(port):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def call():
            sock.sendall(INCR_REQUEST)
            return sock.recv(64)[:1] == b":"
        return call

    def script_floor(port):
        # the least a decision on the server's clock does: TIME, GET, SET with
        # an expiry, in a script called by SHA with cellrate's arguments
        c = client(port)
        sha = c.script_load(SCRIPT_FLOOR)
        args = (b"2", 1, b"", b"gcra", b"1000", b"1000000000", b"1000000")
        return lambda: c.evalsha(sha, 1, KEY, *args) == 1

    def cellrate_allow(port):
        from cellrate.redis import RedisLimiter
        lim = RedisLimiter(client(port), HIGH_RATE, burst=HIGH_RATE)
        return lambda: lim.allow(KEY)

    def cellrate_window(algorithm, rate, **options):
        # every call admitted; on_wipe="allow": a fresh server's first period counts too
        def make(port):
            from cellrate.redis import RedisLimiter
            lim = RedisLimiter(client(port), rate, algorithm=algorithm, on_wipe="allow",
                               timeout=60, **options)  # a server under callgrind is slow
            return lambda: lim.allow(KEY)
        return make

    def incr_decr(port):
        c = client(port)
        return lambda: c.incr(KEY) > 0 and c.decr(KEY) >= 0

    def cellrate_hold(port):
        from cellrate.redis import RedisConcurrency
        concurrency = RedisConcurrency(client(port), 65536, lease=60)

        def call():
            slot = concurrency.try_acquire(KEY)
            return slot is not None and slot.release()
        return call

    def cellrate_refused(deny_cache):
        def make(port):
            from cellrate.redis import RedisLimiter
            lim = RedisLimiter(client(port), 1, 3600, burst=1, prefix="refused:",
                               deny_cache=deny_cache)
            lim.allow(KEY)
            return lambda: not lim.allow(KEY)
        return make

    def limits_maker(strategy_name):
        def make(port):
            import limits
            import limits.storage
            import limits.strategies
            storage = limits.storage.storage_from_string(f"redis://127.0.0.1:{port}")
            strategy = getattr(limits.strategies, strategy_name)(storage)
            item = limits.RateLimitItemPerSecond(HIGH_RATE)
            return lambda: strategy.hit(item, KEY)
        return make

    def throttled_gcra(port):
        import throttled
        from throttled.store import RedisStore
        store = RedisStore(server=f"redis://127.0.0.1:{port}/0")
        limiter = throttled.Throttled(using="gcra", quota=throttled.per_sec(HIGH_RATE, burst=HIGH_RATE),
                                      store=store)
        return lambda: not limiter.limit(KEY).limited

    def pyrate_bucket(port):
        import pyrate_limiter
        rate = pyrate_limiter.Rate(HIGH_RATE, pyrate_limiter.Duration.SECOND)
        bucket = pyrate_limiter.RedisBucket.init([rate], client(port), KEY)
        limiter = pyrate_limiter.Limiter(bucket)
        return lambda: limiter.try_acquire(KEY, blocking=False)

    return {
        "incr_floor": raw_incr,
        "redis_py_incr": incr,
        "script_floor": script_floor,
        "cellrate_redis": cellrate_allow,
        "cellrate_redis_refused": cellrate_refused(True),
        "cellrate_redis_refused_no_deny_cache": cellrate_refused(False),
        "incr_decr_floor": incr_decr,
        "cellrate_redis_concurrency": cellrate_hold,
        # a quota per month of a zone against the fixed window it builds on (docs/calendar.md)
        "cellrate_redis_fixed_window": cellrate_window("fixed_window", "1000000000/day"),
        "cellrate_redis_calendar": cellrate_window("calendar", "1000000000/month",
                                                   tz="Europe/Berlin"),
        "limits_moving_window": limits_maker("MovingWindowRateLimiter"),
        "limits_sliding_window_counter": limits_maker("SlidingWindowCounterRateLimiter"),
        "throttled_gcra": throttled_gcra,
        "pyrate_limiter_redis_bucket": pyrate_bucket,
    }


def async_scenarios():
    def client(port: int):
        import redis.asyncio
        return redis.asyncio.Redis(port=port)

    def incr(port):
        c = client(port)

        async def call():
            return await c.incr(KEY) > 0
        return call

    def raw_incr(port):
        streams = []

        async def call():
            if not streams:  # opened in the loop that times it
                streams.extend(await asyncio.open_connection("127.0.0.1", port))
            reader, writer = streams
            writer.write(INCR_REQUEST)
            return (await reader.readline())[:1] == b":"
        return call

    def cellrate_allow(port):
        from cellrate.redis import AsyncRedisLimiter
        lim = AsyncRedisLimiter(client(port), HIGH_RATE, burst=HIGH_RATE)
        return lambda: lim.allow(KEY)

    def incr_decr(port):
        c = client(port)

        async def call():
            return await c.incr(KEY) > 0 and await c.decr(KEY) >= 0
        return call

    def cellrate_hold(port):
        from cellrate.redis import AsyncRedisConcurrency
        concurrency = AsyncRedisConcurrency(client(port), 65536, lease=60)

        async def call():
            slot = await concurrency.try_acquire(KEY)
            return slot is not None and await slot.release()
        return call

    def limits_maker(strategy_name):
        def make(port):
            import limits
            import limits.aio.storage
            import limits.aio.strategies
            # redis-py's asyncio client, as cellrate's row
            storage = limits.aio.storage.RedisStorage(f"async+redis://127.0.0.1:{port}",
                                                      implementation="redispy")
            strategy = getattr(limits.aio.strategies, strategy_name)(storage)
            item = limits.RateLimitItemPerSecond(HIGH_RATE)
            return lambda: strategy.hit(item, KEY)
        return make

    return {
        "incr_floor": raw_incr,
        "redis_py_incr": incr,
        "cellrate_redis": cellrate_allow,
        "incr_decr_floor": incr_decr,
        "cellrate_redis_concurrency": cellrate_hold,
        "limits_moving_window": limits_maker("MovingWindowRateLimiter"),
        "limits_sliding_window_counter": limits_maker("SlidingWindowCounterRateLimiter"),
    }


# --------------------------------------------------------------------------
# Timing


def time_sync(make: Callable[[int], Callable[[], object]], port: int, ops: int) -> float:
    call = make(port)
    for _ in range(200):  # connect, load scripts
        call()
    admitted = 0
    started = time.perf_counter()
    for _ in range(ops):
        admitted += bool(call())
    elapsed = time.perf_counter() - started
    if admitted != ops:
        raise SystemExit(f"bench_redis: {admitted} of {ops} calls went the expected way")
    return ops / elapsed


def time_async(make, port: int, ops: int) -> float:
    async def run() -> float:
        call = make(port)
        for _ in range(200):
            await call()
        admitted = 0
        started = time.perf_counter()
        for _ in range(ops):
            admitted += bool(await call())
        elapsed = time.perf_counter() - started
        if admitted != ops:
            raise SystemExit(f"bench_redis: {admitted} of {ops} async calls admitted")
        return ops / elapsed
    return asyncio.run(run())


def _worker(name: str, port: int, ops: int, start, results, index: int) -> None:
    make = sync_scenarios()[name]
    call = make(port)
    for _ in range(200):
        call()
    start.wait()
    started = time.perf_counter()
    for _ in range(ops):
        call()
    results[2 * index: 2 * index + 2] = [started, time.perf_counter()]


def time_processes(name: str, port: int, ops: int, processes: int) -> float:
    context = multiprocessing.get_context("fork")
    start = context.Barrier(processes)
    results = context.Array("d", 2 * processes)
    workers = [context.Process(target=_worker, args=(name, port, ops, start, results, i))
               for i in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise SystemExit(f"bench_redis: a worker of {name} failed")
    begin, end = min(results[0::2]), max(results[1::2])
    return processes * ops / (end - begin)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--markdown", help="write a table with ratios to the INCR floor here")
    parser.add_argument("--only", help="the scenarios to run, comma-separated (default: all)")
    parser.add_argument("--modes", default="sync,asyncio,processes",
                        help="the modes to run, comma-separated (default: all three)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    modes = set(args.modes.split(","))
    if shutil.which("redis-server") is None:
        raise SystemExit("bench_redis: redis-server is not installed (make deps)")

    server, port, directory = start_server()
    rows: List[dict] = []
    try:
        plans = []
        for name, make in sync_scenarios().items():
            if "sync" not in modes or only is not None and name not in only:
                continue
            plans.append(("sync, 1 client", name, lambda m=make: time_sync(m, port, args.ops)))
        for name, make in async_scenarios().items():
            if "asyncio" not in modes or only is not None and name not in only:
                continue
            plans.append(("asyncio, 1 client", name, lambda m=make: time_async(m, port, args.ops)))
        for name in sync_scenarios():
            if "processes" not in modes or only is not None and name not in only:
                continue
            plans.append((f"sync, {args.processes} processes", name,
                          lambda n=name: time_processes(n, port, args.ops // args.processes,
                                                        args.processes)))
        # the repetitions interleave the scenarios, so that a shared machine's
        # changing load weighs on each of them alike
        runs: Dict[int, List[float]] = {index: [] for index in range(len(plans))}
        for _ in range(args.reps):
            for index, (_, _, run) in enumerate(plans):
                subprocess.run(["redis-cli", "-p", str(port), "flushall"], check=True,
                               stdout=subprocess.DEVNULL)
                runs[index].append(run())
        for index, (mode, name, _) in enumerate(plans):
            row = {"id": f"redis.{mode.replace(', ', '.').replace(' ', '_')}.{name}",
                   "harness": "redis", "mode": mode, "scenario": name,
                   "ops_per_s": statistics.median(runs[index]), "runs": runs[index]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(directory, ignore_errors=True)

    if args.markdown:
        write_markdown(rows, args.markdown)


def write_markdown(rows: List[dict], path: str) -> None:
    lines = ["| mode | scenario | decisions/s | spread | x INCR floor | x best peer |",
             "|---|---|---:|---:|---:|---:|"]
    peers = ("limits_", "throttled_", "pyrate_")
    for mode in dict.fromkeys(row["mode"] for row in rows):
        group = [row for row in rows if row["mode"] == mode]
        floor = next((row["ops_per_s"] for row in group if row["scenario"] == "incr_floor"),
                     group[0]["ops_per_s"])
        best_peer = max((row["ops_per_s"] for row in group if row["scenario"].startswith(peers)),
                        default=None)
        for row in group:
            ratio_peer = (f"{row['ops_per_s'] / best_peer:.2f}"
                          if best_peer and row["scenario"].startswith("cellrate") else "")
            spread = (f"{min(row['runs']) / row['ops_per_s']:.2f}-"
                      f"{max(row['runs']) / row['ops_per_s']:.2f}")
            lines.append(f"| {mode} | {row['scenario']} | {row['ops_per_s']:,.0f} | {spread} | "
                         f"{row['ops_per_s'] / floor:.2f} | {ratio_peer} |")
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines), file=sys.stderr)


if __name__ == "__main__":
    main()
