"""Instructions per request of the web path, under callgrind.

Wall-clock times of a request through the web policy swing by 10-20 % on a
shared machine; instruction counts barely move. Each scenario runs in a fresh
interpreter under callgrind twice, SHORT and LONG requests, and the difference
of the two totals per request is printed, so start-up and warm-up cancel out.

Scenarios (one keyed in-process limit that admits everything):
  policy        Policy.client_of, limits_for, decide and outcome on one request
                view (what every adapter does per request), default options
  proxy         the same behind a trusted proxy: X-Forwarded-For of three hops
  fresh         the same, each request from an address never seen (no cache)
  dry_run       a dry run refusing every request (outcome filters the fields)
  settle        the charge settled when the response ends (charge= reports 3)
  asgi, wsgi    a whole request through the middleware, minus the bare app's
  grpc          a unary call through RateLimitInterceptor, minus the bare call

    .venv/bin/python bench/python/web_instructions.py [scenario ...]

Needs valgrind; about 30 s per scenario. Not part of `make bench`.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Callable

SHORT, LONG = 2000, 6000
BIG = 1_000_000_000
SCENARIOS = ["policy", "proxy", "fresh", "dry_run", "settle", "asgi", "wsgi", "grpc"]


def scope(client: str = "192.0.2.1", headers: list[Any] | None = None) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": "/", "raw_path": b"/", "root_path": "", "query_string": b"",
            "headers": headers or [(b"host", b"testserver")], "client": (client, 40000),
            "server": ("testserver", 80)}


def policy_loop(name: str) -> Callable[[int], None]:
    import cellrate
    from cellrate.web import Policy, Request, Response

    options: dict[str, Any] = {}
    headers = None
    if name == "proxy":
        options["trusted_proxies"] = ["10.0.0.0/8"]
        headers = [(b"x-forwarded-for", b"198.51.100.7, 10.1.2.3, 10.0.0.2")]
    limit: Any = cellrate.KeyedLimiter(BIG, burst=BIG)
    if name == "dry_run":
        limit = cellrate.KeyedLimiter(1, burst=1)
        options["dry_run"] = True
    if name == "settle":
        options["charge"] = lambda request, response: 3
    policy = Policy(limit, **options)
    peer = "10.0.0.1" if name == "proxy" else "192.0.2.1"
    base = scope(peer, headers)
    addresses = [f"198.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(LONG + 1)]
    logging_off()

    def run(n: int) -> None:
        for i in range(n):
            request_scope = dict(base)
            if name == "fresh":
                request_scope["client"] = (addresses[i], 40000)
            request = Request(policy, "GET", "/", scope=request_scope)
            limits = policy.limits_for(request)
            decision = policy.decide(limits, request)
            policy.outcome(decision, request)
            if name == "settle":
                policy.charger(limits, request).end(Response())

    return run


def logging_off() -> None:
    import logging

    logging.getLogger("cellrate").disabled = True


def asgi_loop(bare: bool) -> Callable[[int], None]:
    import cellrate
    from cellrate.asgi import RateLimitMiddleware

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    wrapped = app if bare else RateLimitMiddleware(app, cellrate.KeyedLimiter(BIG, burst=BIG))
    base = scope()
    loop = asyncio.new_event_loop()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        pass

    async def requests(n: int) -> None:
        for _ in range(n):
            await wrapped(dict(base), receive, send)

    return lambda n: loop.run_until_complete(requests(n))


def wsgi_loop(bare: bool) -> Callable[[int], None]:
    import cellrate
    from cellrate.wsgi import RateLimitMiddleware

    def app(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    wrapped = app if bare else RateLimitMiddleware(app, cellrate.KeyedLimiter(BIG, burst=BIG))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "192.0.2.1",
               "wsgi.url_scheme": "http", "SERVER_NAME": "testserver", "SERVER_PORT": "80"}

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        pass

    def run(n: int) -> None:
        for _ in range(n):
            body = wrapped(dict(environ), start_response)
            b"".join(body)
            close = getattr(body, "close", None)
            if close is not None:
                close()

    return run


def grpc_loop(bare: bool) -> Callable[[int], None]:
    import cellrate

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from bench_adapters import Context, grpc_variants, say

    behavior = say if bare else grpc_variants()["interceptor"]
    del cellrate
    context = Context()

    def run(n: int) -> None:
        for _ in range(n):
            behavior(b"hi", context)

    return run


def loop_of(name: str) -> Callable[[int], None]:
    bare = name.endswith(".bare")
    stack = name.removesuffix(".bare")
    if stack == "asgi":
        return asgi_loop(bare)
    if stack == "wsgi":
        return wsgi_loop(bare)
    if stack == "grpc":
        return grpc_loop(bare)
    return policy_loop(stack)


def child(name: str, requests: int) -> None:
    run = loop_of(name)
    run(200)  # warm-up: caches, specialisation
    run(requests)


def total(path: pathlib.Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise SystemExit(f"web_instructions: no total in {path}")


def count(name: str, requests: int, where: pathlib.Path) -> int:
    out = where / f"callgrind.{name}.{requests}"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                    __file__, "--child", name, str(requests)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONHASHSEED": "0"})
    return total(out)


def per_request(name: str, where: pathlib.Path) -> float:
    return (count(name, LONG, where) - count(name, SHORT, where)) / (LONG - SHORT)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("web_instructions: needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as where:
        for name in sys.argv[1:] or SCENARIOS:
            value = per_request(name, pathlib.Path(where))
            if name in ("asgi", "wsgi", "grpc"):
                value -= per_request(name + ".bare", pathlib.Path(where))
            print(f"{name}\t{value:,.0f} instructions/request", flush=True)


if __name__ == "__main__":
    main()
