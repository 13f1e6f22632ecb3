"""Middleware overhead per request, in-process, for `make bench`.

ASGI: one Starlette app (a route returning "ok") driven by calling it directly
(no server, no test client): bare, with cellrate.asgi.RateLimitMiddleware,
with slowapi's SlowAPIMiddleware and with its SlowAPIASGIMiddleware. WSGI: one
Flask app called through the WSGI interface: bare, with
cellrate.wsgi.RateLimitMiddleware, with flask-limiter. Every limit admits
every request (one client, a limit far above the request rate), the in-memory
store of each library, no headers on admitted responses (each one's default).

A run is `--requests` sequential requests; the variants of one stack run
round-robin, `--reps` timed runs after one untimed warm-up. Per round, the
overhead of a variant is its time minus the bare app's time of that round; the
value is the median. Each response is checked to be a 200.

    python bench_web.py [--reps N] [--requests N]

One JSON object per line on stdout: ns per request of each variant
(py.web.{asgi,wsgi}.<variant>) and the overhead over the bare app
(py.web.{asgi,wsgi}.<variant>.overhead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import warnings
from typing import Any, Callable, Dict, List

warnings.filterwarnings("ignore")

BIG = 1_000_000_000  # per second: no request of a run is turned away


# -- ASGI -------------------------------------------------------------------


def starlette_app() -> Any:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def ok(request: Any) -> Any:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/", ok)])


def asgi_variants() -> Dict[str, Any]:
    import cellrate
    from cellrate.asgi import RateLimitMiddleware
    from slowapi import Limiter, _rate_limit_exceeded_handler
    from slowapi.errors import RateLimitExceeded
    from slowapi.middleware import SlowAPIASGIMiddleware, SlowAPIMiddleware
    from slowapi.util import get_remote_address

    variants = {"bare": starlette_app()}
    app = starlette_app()
    app.add_middleware(RateLimitMiddleware, limit=cellrate.KeyedLimiter(BIG, burst=BIG))
    variants["cellrate"] = app
    for name, middleware in (("slowapi", SlowAPIMiddleware), ("slowapi_asgi", SlowAPIASGIMiddleware)):
        app = starlette_app()
        app.state.limiter = Limiter(key_func=get_remote_address, default_limits=[f"{BIG}/second"])
        app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)
        app.add_middleware(middleware)
        variants[name] = app
    return variants


SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
    "scheme": "http", "path": "/", "raw_path": b"/", "root_path": "", "query_string": b"",
    "headers": [(b"host", b"testserver"), (b"user-agent", b"bench")],
    "client": ("192.0.2.1", 40000), "server": ("testserver", 80),
}


def asgi_runner(app: Any, loop: asyncio.AbstractEventLoop) -> Callable[[int], float]:
    statuses: List[int] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def requests(n: int) -> None:
        for _ in range(n):
            await app(dict(SCOPE), receive, send)

    def run(n: int) -> float:
        statuses.clear()
        start = time.perf_counter_ns()
        loop.run_until_complete(requests(n))
        elapsed = time.perf_counter_ns() - start
        if statuses != [200] * n:
            raise SystemExit(f"bench_web: a request was not answered 200: {set(statuses)}")
        return elapsed / n

    return run


# -- WSGI -------------------------------------------------------------------


def flask_app() -> Any:
    from flask import Flask

    app = Flask("bench")
    app.add_url_rule("/", "ok", lambda: "ok")
    return app


def wsgi_variants() -> Dict[str, Any]:
    import cellrate
    from cellrate.wsgi import RateLimitMiddleware
    from flask_limiter import Limiter
    from flask_limiter.util import get_remote_address

    variants = {"bare": flask_app()}
    app = flask_app()
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, cellrate.KeyedLimiter(BIG, burst=BIG))
    variants["cellrate"] = app
    app = flask_app()
    Limiter(get_remote_address, app=app, default_limits=[f"{BIG} per second"], storage_uri="memory://")
    variants["flask_limiter"] = app
    return variants


def wsgi_runner(app: Any) -> Callable[[int], float]:
    from werkzeug.test import EnvironBuilder

    environ = EnvironBuilder(path="/", environ_base={"REMOTE_ADDR": "192.0.2.1"}).get_environ()
    statuses: List[str] = []

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        statuses.append(status)

    def run(n: int) -> float:
        statuses.clear()
        start = time.perf_counter_ns()
        for _ in range(n):
            body = app(dict(environ), start_response)
            b"".join(body)
            close = getattr(body, "close", None)
            if close is not None:
                close()
        elapsed = time.perf_counter_ns() - start
        if any(not s.startswith("200") for s in statuses) or len(statuses) != n:
            raise SystemExit(f"bench_web: a request was not answered 200: {set(statuses)}")
        return elapsed / n

    return run


# -- timing -----------------------------------------------------------------


def measure(stack: str, runners: Dict[str, Callable[[int], float]], reps: int, requests: int) -> None:
    for run in runners.values():
        run(max(requests // 4, 100))  # warm-up
    runs: Dict[str, List[float]] = {name: [] for name in runners}
    for _ in range(reps):
        for name, run in runners.items():
            runs[name].append(run(requests))
    for name, values in runs.items():
        print(json.dumps({"id": f"py.web.{stack}.{name}", "lang": "python",
                          "group": f"py.web.{stack}",
                          "ns_per_op": round(statistics.median(values), 1), "threads": 1,
                          "ops_per_run": requests, "runs_ns_per_op": [round(v, 1) for v in values]}),
              flush=True)
        if name != "bare":
            overhead = [v - bare for v, bare in zip(values, runs["bare"])]
            print(json.dumps({"id": f"py.web.{stack}.{name}.overhead", "lang": "python",
                              "group": f"py.web.{stack}",
                              "ns_per_op": round(statistics.median(overhead), 1), "threads": 1,
                              "ops_per_run": requests,
                              "runs_ns_per_op": [round(v, 1) for v in overhead]}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    loop = asyncio.new_event_loop()
    measure("asgi", {name: asgi_runner(app, loop) for name, app in asgi_variants().items()},
            args.reps, args.requests)
    measure("wsgi", {name: wsgi_runner(app) for name, app in wsgi_variants().items()},
            args.reps, args.requests)
    loop.close()


if __name__ == "__main__":
    main()
