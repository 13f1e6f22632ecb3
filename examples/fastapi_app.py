"""FastAPI with cellrate: one middleware for the whole app, and a dependency
for a route of its own.

    uvicorn examples.fastapi_app:app

Every client address: 100 requests a minute. POST /login: 5 a minute more,
through the dependency (FastAPI's own idiom). Set CELLRATE_REGION (e.g.
/dev/shm/myapp) to share the app-wide limit across worker processes.
"""
import os

from fastapi import Depends, FastAPI

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
