"""Starlette behind cellrate's ASGI middleware.

    uvicorn examples.starlette_app:app --workers 4

Every client address may make 100 requests a minute (bursts of 100), and
POST /login 5 a minute on top. With CELLRATE_REGION set (e.g. /dev/shm/myapp),
the limits live in shared memory: one limit across every worker process, not
one per worker. CELLRATE_LIMIT replaces "100/minute" (the tests use it).
"""
import os

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from cellrate.asgi import RateLimitMiddleware


async def hello(request):
    return JSONResponse({"hello": "world", "worker": os.getpid()})


async def login(request):
    return JSONResponse({"login": "ok"})


app = RateLimitMiddleware(
    Starlette(routes=[Route("/", hello), Route("/login", login, methods=["POST"])]),
    os.environ.get("CELLRATE_LIMIT", "100/minute"),
    routes={"POST /login": "5/minute"},
    shared=os.environ.get("CELLRATE_REGION"),  # None: this process only
    admitted_headers=True,  # RateLimit fields on every response, not only on 429s
)
