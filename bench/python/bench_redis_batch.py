"""Redis batches: admissions per second per connection, and one call against many.

Starts its own redis-server on a free loopback port (stopped on exit), then times:

* asyncio: AsyncRedisLimiter.allow from 1, 16 and 256 concurrent tasks, each
  deciding its own keys in a loop, as today (one EVALSHA per decision, on as many
  connections as the tasks keep busy) and with coalesce=True (the decisions of one
  event-loop turn in one batch call); admissions per second, the connections the
  store opened, and their quotient, admissions per second per connection;
* sync: check_many of 100 keys in one call against 100 calls of check, and the
  server's own time per call (INFO commandstats), the floor of a batch: the script
  runs once per decision either way; asyncio: check_many_async against 100 awaited
  checks;
* the ceiling of a batch: one script call that only does what Redis must do for
  each of 100 decisions, whatever the decision's arithmetic (GET the key, SET its
  new state with its expiry, a reply of five fields), sent by redis-py, against the
  same 100 check calls: no batch of one key per decision can beat it.

Each sync run times the three side by side (batch, calls, ceiling), so their
ratios are taken run by run. With --raw FILE it also writes the records
bench/report.py reads (ns per operation, each run's, by id).

Every limit is high enough that each call is admitted. Prints one JSON line per row
(the median of --reps runs) and, with --markdown FILE, a table.

    python bench_redis_batch.py --reps 3 --markdown results/redis_batch.md [--raw FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import List

import redis
import redis.asyncio

import cellrate.redis as cr_redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_redis import HIGH_RATE, start_server  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))
from redis_servers import in_service  # noqa: E402


def flush(control: "redis.Redis") -> None:
    """An empty Redis that reads as one in service (every slot's wipe marker, an age
    ago): with on_wipe="refuse", the default, an empty one reads as wiped, and each key's
    first decision would be refused."""
    control.flushall()
    in_service(control)

TASKS = (1, 16, 256)
BATCH = 100


def connections(port: int) -> int:
    """The clients connected to the server, the bench's two control clients aside (its
    own and the one asking)."""
    with redis.Redis(port=port) as client:
        return int(client.info("clients")["connected_clients"]) - 2


async def admissions(port: int, tasks: int, coalesce: bool, ops: int) -> tuple[float, int]:
    """(admissions per second, connections the store used) of `tasks` tasks in a loop."""
    client = redis.asyncio.Redis(port=port)
    store = cr_redis.AsyncRedisLimiter(client, HIGH_RATE, burst=HIGH_RATE, name="bench",
                                       coalesce=coalesce, timeout=30)
    await store.allow("warm")
    per_task = max(1, ops // tasks)

    async def task(index: int) -> int:
        admitted = 0
        for i in range(per_task):
            admitted += await store.allow(f"k{index}:{i % 16}")
        return admitted

    start = time.perf_counter()
    admitted = sum(await asyncio.gather(*(task(i) for i in range(tasks))))
    elapsed = time.perf_counter() - start
    assert admitted == per_task * tasks
    used = connections(port)
    await store.aclose()
    await client.aclose()
    return admitted / elapsed, used


# What Redis itself does for one decision, the arithmetic aside (the ceiling): read
# the key, write the new state with its expiry; the reply's five fields.
CEILING = ("local reply = {} for i = 1, #KEYS do redis.call('GET', KEYS[i]) "
           "redis.call('SET', KEYS[i], ARGV[1], 'PX', 60000) reply[i] = {1, 2, 3, 4, 1} end "
           "return reply")


def batch_against_calls(port: int, rounds: int) -> tuple[float, float, float, float, float]:
    """Seconds per 100 decisions: one check_many call, 100 check calls, and the ceiling
    (CEILING over 100 keys in one call); the server's µs per call of the first two."""
    client = redis.Redis(port=port)
    store = cr_redis.RedisLimiter(client, HIGH_RATE, burst=HIGH_RATE, name="batch", timeout=30)
    items = [(store, f"key{i}") for i in range(BATCH)]
    cr_redis.check_many(items)
    for _ in range(3):
        store.check("warm")
    client.config_resetstat()
    start = time.perf_counter()
    for _ in range(rounds):
        assert all(d.allowed for d in cr_redis.check_many(items))
    batched = (time.perf_counter() - start) / rounds
    server_batch = client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]
    client.config_resetstat()
    start = time.perf_counter()
    for _ in range(rounds):
        for _limiter, key in items:
            store.check(key)
    alone = (time.perf_counter() - start) / rounds
    server_one = client.info("commandstats")["cmdstat_evalsha"]["usec_per_call"]
    ceiling_script = client.register_script(CEILING)
    keys = [f"cellrate:batch:key{i}" for i in range(BATCH)]
    state = "gcra:1000:1000000000:1000000 1796636575894427000"  # a state word's length
    ceiling_script(keys=keys, args=[state])
    start = time.perf_counter()
    for _ in range(rounds):
        ceiling_script(keys=keys, args=[state])
    ceiling = (time.perf_counter() - start) / rounds
    client.close()
    return batched, alone, server_batch, server_one, ceiling


async def async_batch_against_calls(port: int, rounds: int) -> tuple[float, float]:
    """Seconds per 100 decisions on the asyncio store: one check_many_async call, and 100
    check calls awaited one after the other."""
    client = redis.asyncio.Redis(port=port)
    store = cr_redis.AsyncRedisLimiter(client, HIGH_RATE, burst=HIGH_RATE, name="abatch",
                                       timeout=30)
    items = [(store, f"key{i}") for i in range(BATCH)]
    await cr_redis.check_many_async(items)
    start = time.perf_counter()
    for _ in range(rounds):
        assert all(d.allowed for d in await cr_redis.check_many_async(items))
    batched = (time.perf_counter() - start) / rounds
    start = time.perf_counter()
    for _ in range(rounds):
        for _limiter, key in items:
            await store.check(key)
    alone = (time.perf_counter() - start) / rounds
    await store.aclose()
    await client.aclose()
    return batched, alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--ops", type=int, default=6000, help="admissions per asyncio run")
    parser.add_argument("--rounds", type=int, default=30, help="batches of 100 per sync run")
    parser.add_argument("--markdown")
    parser.add_argument("--raw", help="the records for bench/report.py (JSON lines)")
    args = parser.parse_args()
    records: List[dict] = []
    process, port, directory = start_server()
    rows: List[dict] = []
    try:
        control = redis.Redis(port=port)
        for tasks in TASKS:
            for coalesce in (False, True):
                runs = []
                for _ in range(args.reps):
                    flush(control)
                    runs.append(asyncio.run(admissions(port, tasks, coalesce, args.ops)))
                    time.sleep(0.2)  # the last run's connections closed
                per_second = statistics.median(r[0] for r in runs)
                used = max(r[1] for r in runs)
                # ns of one connection's time per admission, each run's
                per_run = [1e9 * max(r[1], 1) / r[0] for r in runs]
                records.append({"id": f"py.redis_batch.async_{tasks}t."
                                      f"{'coalesced' if coalesce else 'today'}",
                                "ns_per_op": statistics.median(per_run), "rep_ns": per_run})
                row = {"scenario": f"asyncio allow, {tasks} tasks",
                       "mode": "coalesced" if coalesce else "today",
                       "admissions_per_s": round(per_second),
                       "connections": used,
                       "per_connection": round(per_second / max(used, 1))}
                rows.append(row)
                print(json.dumps(row), flush=True)
        runs = []
        for _ in range(args.reps):
            flush(control)
            runs.append(batch_against_calls(port, args.rounds))
        batched = statistics.median(r[0] for r in runs)
        alone = statistics.median(r[1] for r in runs)
        row = {"scenario": f"{BATCH} keys", "mode": "check_many, one call",
               "ms": round(batched * 1e3, 3), "ms_100_calls": round(alone * 1e3, 3),
               "speedup": round(alone / batched, 1),
               "server_us_batch": statistics.median(r[2] for r in runs),
               "server_us_one_call": statistics.median(r[3] for r in runs),
               "ms_ceiling": round(statistics.median(r[4] for r in runs) * 1e3, 3),
               "ceiling_speedup": round(alone / statistics.median(r[4] for r in runs), 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        for name, at in (("check_many", 0), ("calls", 1), ("ceiling", 4)):
            per_run = [r[at] * 1e9 for r in runs]
            records.append({"id": f"py.redis_batch.sync.{name}", "group": "redis_batch.sync",
                            "ns_per_op": statistics.median(per_run), "rep_ns": per_run})
        runs = []
        for _ in range(args.reps):
            flush(control)
            runs.append(asyncio.run(async_batch_against_calls(port, args.rounds)))
        batched = statistics.median(r[0] for r in runs)
        alone = statistics.median(r[1] for r in runs)
        row = {"scenario": f"{BATCH} keys, asyncio", "mode": "check_many_async, one call",
               "ms": round(batched * 1e3, 3), "ms_100_calls": round(alone * 1e3, 3),
               "speedup": round(alone / batched, 1),
               "server_us_batch": "", "server_us_one_call": "", "ms_ceiling": "",
               "ceiling_speedup": ""}
        rows.append(row)
        print(json.dumps(row), flush=True)
        for name, at in (("check_many", 0), ("calls", 1)):
            per_run = [r[at] * 1e9 for r in runs]
            records.append({"id": f"py.redis_batch.async.{name}", "group": "redis_batch.async",
                            "ns_per_op": statistics.median(per_run), "rep_ns": per_run})
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(directory, ignore_errors=True)
    if args.markdown:
        write_markdown(rows, args.markdown)
    if args.raw:
        Path(args.raw).write_text("".join(json.dumps(record) + "\n" for record in records))


def write_markdown(rows: List[dict], path: str) -> None:
    lines = ["| scenario | mode | admissions/s | connections | admissions/s per connection |",
             "|---|---|---:|---:|---:|"]
    for row in rows:
        if "admissions_per_s" in row:
            lines.append(f"| {row['scenario']} | {row['mode']} | {row['admissions_per_s']:,} | "
                         f"{row['connections']} | {row['per_connection']:,} |")
    lines += ["", "| scenario | one check_many call (ms) | 100 check calls (ms) | speedup | "
              "server µs: the batch call | server µs: one call | the ceiling (ms) | "
              "the ceiling's speedup |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "speedup" in row:
            ceiling = (f"{row['ms_ceiling']} | {row['ceiling_speedup']}x"
                       if row["ms_ceiling"] != "" else "| ")
            lines.append(f"| {row['scenario']} | {row['ms']} | {row['ms_100_calls']} | "
                         f"{row['speedup']}x | {row['server_us_batch']} | "
                         f"{row['server_us_one_call']} | {ceiling} |")
    lines += ["", "The ceiling: one script call doing only what Redis must do for each of the "
              "100 decisions (GET the key, SET its state with its expiry, a five-field reply), "
              "sent by redis-py; no batch of one key per decision can be faster."]
    Path(path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
