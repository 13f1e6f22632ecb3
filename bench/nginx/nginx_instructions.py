"""Instructions per request of the nginx bench's locations, under callgrind.

The worker's CPU time per request (bench_nginx.py) swings by 10-20 % between
identical runs on a shared machine; instruction counts barely move. For each
location this runs the bench's nginx as a single process (master_process
off) under callgrind, sends SHORT and then LONG keep-alive GETs in two
separate runs, and prints the difference of the two totals per request, so
start-up and warm-up cancel out. User space only: the kernel's half of a
request is the same for every location and is not counted. LuaJIT's traces
form in an order that can vary from run to run, which moves a Lua row by a
few hundred instructions. docs/design.md §12 quotes it.

    python bench/nginx/nginx_instructions.py [location ...]

Needs valgrind. Takes about 20 s per location.
"""

from __future__ import annotations

import http.client
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "nginx"))
from server import Nginx  # noqa: E402

SHORT, LONG = 500, 2500  # requests per run; the count per request is their difference / 2000
DEFAULT = ["/none", "/limit_req/admit_all", "/limit_req/refuse_most",
           "/limit_req_fields/admit_all", "/limit_req_fields/refuse_most",
           "/lua_empty/admit_all", "/lua_key/admit_all", "/lua_fields/admit_all",
           "/cellrate/admit_all", "/cellrate/refuse_most",
           "/cellrate_admitted_headers/admit_all"]


def total(out: pathlib.Path) -> int:
    for line in out.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise SystemExit(f"nginx_instructions: no total in {out}")


def count(server: Nginx, path: str, requests: int) -> int:
    """callgrind's total for a single-process nginx that served `requests` GETs."""
    out = server.prefix / f"callgrind.{requests}"
    process = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                *server.command()], start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit(f"nginx_instructions: nginx did not start\n{server.log()}") from None
                time.sleep(0.1)
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        for _ in range(requests):
            connection.request("GET", path)
            connection.getresponse().read()
        connection.close()
    finally:
        # nginx under valgrind may miss one SIGTERM while it starts up: repeat.
        while process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
    return total(out)


def main() -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("nginx_instructions: needs valgrind (apt-get install valgrind)")
    paths = sys.argv[1:] or DEFAULT
    server = Nginx(workers=1, template=ROOT / "bench" / "nginx" / "nginx.conf.in")
    try:
        server.conf.write_text(server.conf.read_text().replace("master_process on;",
                                                               "master_process off;"))
        for path in paths:
            per_request = (count(server, path, LONG) - count(server, path, SHORT)) / (LONG - SHORT)
            print(f"{path}\t{per_request:,.0f} instructions/request", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
