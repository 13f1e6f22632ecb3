"""FastAPI with cellrate: one middleware for the whole app, and a dependency
for a route of its own.

    uvicorn examples.fastapi_app:app

Every client address: 100 requests a minute. POST /login: 5 a minute more,
through the dependency (FastAPI's own idiom). GET /search: 20 a second for
all clients together (a Limiter has no key: one limit, whoever sends), what
the backend behind it takes. Set CELLRATE_REGION (e.g. /dev/shm/myapp) to
share the app-wide limit across worker processes.
"""
import os

from fastapi import Depends, FastAPI

import cellrate
from cellrate.asgi import RateLimitMiddleware
from cellrate.fastapi import RateLimit

app = FastAPI()
app.add_middleware(
    RateLimitMiddleware,
    limit=os.environ.get("CELLRATE_LIMIT", "100/minute"),
    shared=os.environ.get("CELLRATE_REGION"),
)


@app.get("/")
async def hello():
    return {"hello": "world", "worker": os.getpid()}


@app.post("/login", dependencies=[Depends(RateLimit("5/minute"))])
async def login():
    return {"login": "ok"}


every_client = RateLimit(cellrate.Limiter(os.environ.get("CELLRATE_SEARCH_LIMIT", "20/second")))


@app.get("/search", dependencies=[Depends(every_client)])
async def search():
    return {"results": []}
