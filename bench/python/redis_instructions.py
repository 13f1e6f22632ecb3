"""Instructions per Redis decision, client and server, under callgrind.

Times on a shared machine swing by 10-30% between identical runs; instruction
counts do not. For each scenario of bench_redis.py (sync), this counts the
instructions redis-server executes per call (redis-server under callgrind) and
those the Python client executes per call (the client under callgrind, the
server not), each as the difference between two run lengths, so start-up and
warm-up cancel out. User space only: the kernel's share of a round trip is
the same for every scenario and is not counted. docs/design.md §11 quotes it.

    python bench/python/redis_instructions.py [scenario ...]

Needs valgrind; run with the bench venv's Python (bench/.peers/venv), which
has the peers and hiredis. Takes about a minute per scenario.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import bench_redis
import redis

SHORT, LONG = 300, 1300  # calls per run; the count per call is their difference / 1000
DEFAULT = ["incr_floor", "script_floor", "cellrate_redis", "limits_sliding_window_counter",
           "limits_moving_window", "throttled_gcra", "pyrate_limiter_redis_bucket"]


def total(out: str) -> int:
    with open(out) as lines:
        for line in lines:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise SystemExit(f"redis_instructions: no total in {out}")


def redis_server(port: int, directory: str, callgrind_out: str | None) -> subprocess.Popen:
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", directory]
    if callgrind_out:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={callgrind_out}",
                   *command]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(600):
        try:
            client.ping()
            return process
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("redis_instructions: redis-server did not start")


def server_count(name: str, calls: int, directory: str) -> int:
    out = os.path.join(directory, f"server.{name}.{calls}")
    port = bench_redis.free_port()
    process = redis_server(port, directory, out)
    try:
        call = bench_redis.sync_scenarios()[name](port)
        for _ in range(calls):
            call()
    finally:
        try:
            redis.Redis(port=port).shutdown(nosave=True)
        except redis.exceptions.ConnectionError:
            pass
        process.wait()
    return total(out)


def client_count(name: str, calls: int, port: int, directory: str) -> int:
    out = os.path.join(directory, f"client.{name}.{calls}")
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import bench_redis; "
            f"call = bench_redis.sync_scenarios()[{name!r}]({port})\n"
            f"for _ in range({calls}): call()")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    sys.executable, "-c", code], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return total(out)


def main() -> None:
    names = sys.argv[1:] or DEFAULT
    with tempfile.TemporaryDirectory(prefix="cellrate-redis-instructions-") as directory:
        port = bench_redis.free_port()
        server = redis_server(port, directory, None)
        try:
            print("| scenario | client | server | total |")
            print("|---|---:|---:|---:|")
            for name in names:
                per_call = LONG - SHORT
                client = (client_count(name, LONG, port, directory)
                          - client_count(name, SHORT, port, directory)) / per_call
                srv = (server_count(name, LONG, directory)
                       - server_count(name, SHORT, directory)) / per_call
                print(f"| {name} | {client / 1000:.0f}k | {srv / 1000:.0f}k | "
                      f"{(client + srv) / 1000:.0f}k |", flush=True)
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
