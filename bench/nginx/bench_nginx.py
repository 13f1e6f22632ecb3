"""make bench, nginx rows: wrk on loopback against one nginx worker with no
limiter, with nginx's limit_req, and with cellrate.nginx, each with a limit
that admits everything (the overhead) and one that refuses all but the first
request (the refusal path); and floors: limit_req with add_header fields of
cellrate's size, an empty access_by_lua_block, one reading the client's
address, and one setting two constant fields; and, proxied to a slow upstream,
no limiter, limit_conn, and cellrate.nginx's hold() and leave(). Each rep runs
every scenario once, back to back, the order rotated by one per rep. Prints one JSON object
per scenario: requests per second (median of the reps) and the worker's CPU
time per request (/proc/PID/schedstat; as ns_per_op, the median: far steadier
than rps on a shared machine, and 1 / it is what one busy worker can serve),
with each rep's in rep_ns, so that a ratio can be taken rep by rep
(bench/report.py: the median of those, which the machine's drift between
reps does not move).

    python bench/nginx/bench_nginx.py [--reps N] [--seconds S] [--template PATH]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "nginx"))
from server import Nginx  # noqa: E402

SCENARIOS = [
    ("none", "/none", "admit_all"),
    ("limit_req", "/limit_req/admit_all", "admit_all"),
    ("limit_req", "/limit_req/refuse_most", "refuse_most"),
    ("cellrate", "/cellrate/admit_all", "admit_all"),
    ("cellrate", "/cellrate/refuse_most", "refuse_most"),
    ("cellrate_admitted_headers", "/cellrate_admitted_headers/admit_all", "admit_all"),
    # Floors: limit_req sending fields of cellrate's size; Lua entered with
    # nothing to do; Lua reading the client's address; Lua setting two
    # constant fields.
    ("limit_req_fields", "/limit_req_fields/admit_all", "admit_all"),
    ("limit_req_fields", "/limit_req_fields/refuse_most", "refuse_most"),
    ("lua_empty", "/lua_empty/admit_all", "admit_all"),
    ("lua_key", "/lua_key/admit_all", "admit_all"),
    ("lua_fields", "/lua_fields/admit_all", "admit_all"),
    # Concurrency, proxied to a slow upstream (1 ms): no limiter, nginx's
    # limit_conn, Lua entered in the access and the log phase with nothing to
    # do (the floor of any Lua hold and release), cellrate.nginx's hold() and
    # leave().
    ("proxy", "/proxy/admit_all", "admit_all"),
    ("limit_conn", "/limit_conn/admit_all", "admit_all"),
    ("lua_phases", "/lua_phases/admit_all", "admit_all"),
    ("cellrate_hold", "/cellrate_hold/admit_all", "admit_all"),
]


def cpu_ns(pids: list[int]) -> int:
    """Nanoseconds the processes have run on a CPU (/proc/PID/schedstat)."""
    return sum(int(pathlib.Path(f"/proc/{pid}/schedstat").read_text().split()[0]) for pid in pids)


def wrk(port: int, path: str, seconds: int, connections: int) -> tuple[float, int, int]:
    """(requests per second, requests, non-2xx responses) of one wrk run."""
    run = subprocess.run([shutil.which("wrk") or "wrk", "-t1", f"-c{connections}",
                          f"-d{seconds}s", f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True, timeout=seconds + 30, check=True)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", run.stdout)[1])
    requests = int(re.search(r"(\d+) requests in", run.stdout)[1])
    refused = re.search(r"Non-2xx or 3xx responses: (\d+)", run.stdout)
    errors = re.search(r"Socket errors: .*", run.stdout)
    if errors:
        raise RuntimeError(f"wrk {path}: {errors[0]}")
    return rps, requests, int(refused[1]) if refused else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=12)
    parser.add_argument("--seconds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--template", type=pathlib.Path,
                        default=ROOT / "bench" / "nginx" / "nginx.conf.in")
    parser.add_argument("--scenario", action="append", default=[],
                        help="extra 'variant,path,kind' rows (for a config with more locations)")
    args = parser.parse_args()
    scenarios = SCENARIOS + [tuple(text.split(",")) for text in args.scenario]

    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    with Nginx(workers=1, template=args.template) as server:
        workers = server.worker_pids()
        for _variant, path, kind in scenarios:  # warm-up, and the path is as named
            _, requests, refused = wrk(server.port, path, 1, args.connections)
            as_named = refused >= requests - 2 if kind == "refuse_most" else refused == 0
            if not as_named:
                raise RuntimeError(f"{path}: {refused} of {requests} refused, not {kind}:\n"
                                   f"{server.log()[-2000:]}")
        for rep in range(args.reps):
            turn = rep % len(scenarios)
            for variant, path, kind in scenarios[turn:] + scenarios[:turn]:
                before = cpu_ns(workers)
                rps, requests, _ = wrk(server.port, path, args.seconds, args.connections)
                cpu.setdefault(f"nginx.{variant}.{kind}", []).append(
                    (cpu_ns(workers) - before) / requests)
                runs.setdefault(f"nginx.{variant}.{kind}", []).append(rps)
    for sid, values in runs.items():
        rps = statistics.median(values)
        # ns_per_op: the worker's CPU time per request, the steadier measure
        # of what one worker can serve (rps swings with the machine's load).
        print(json.dumps({"id": sid, "rps": round(rps, 1),
                          "ns_per_op": statistics.median(cpu[sid]),
                          "runs": [round(v, 1) for v in values],
                          "rep_ns": [round(v, 1) for v in cpu[sid]],
                          "workers": 1, "connections": args.connections,
                          "seconds": args.seconds}))


if __name__ == "__main__":
    main()
