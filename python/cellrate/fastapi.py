"""A FastAPI dependency over the policy of `cellrate.web` (docs/design.md §10).

    from fastapi import Depends
    from cellrate.fastapi import RateLimit

    @app.post("/login", dependencies=[Depends(RateLimit("5/minute"))])
    async def login(): ...

One RateLimit is one set of limits: give each route its own for per-route
limits, or put one in a router's `dependencies=` to share it. The options are
those of `cellrate.web.Policy` (routes and exemptions included). A refusal is
the policy's, byte for byte the middleware's: a dependency can only raise, and
FastAPI's HTTPException handler would wrap it in {"detail": ...}, so the
dependency raises `Refused`, carrying the response, and answers it with its own
handler, put in the app's exception handlers on the first refusal.
"""

# No `from __future__ import annotations`: FastAPI reads the annotations of
# RateLimit.__call__ at run time to inject the request, and on Python 3.9 it
# cannot resolve them as strings on a callable instance.
from typing import Any

from fastapi import Request, Response

from cellrate.web import Policy, init_options_of
from cellrate.web import Request as PolicyRequest

__all__ = ["RateLimit", "Refused"]


class Refused(Exception):
    """A refusal by RateLimit, answered with `response` (the policy's refusal)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


async def _answer(request: Request, refused: Exception) -> Response:
    assert isinstance(refused, Refused)
    return refused.response


class RateLimit:
    """A dependency that limits the routes it is attached to."""

    @init_options_of(Policy)
    def __init__(self, *args: Any, **options: Any) -> None:
        self.policy = Policy(*args, **options)
        self.policy.require_stores(asynchronous=True)
        self.policy.require_no_charge("cellrate.fastapi.RateLimit")

    async def __call__(self, request: Request, response: Response) -> None:
        policy = self.policy
        scope = request.scope
        view = PolicyRequest(policy, scope["method"], scope["path"], scope=scope)
        limits = policy.limits_for(view)
        if limits is None:
            return
        decision = await policy.decide_async(limits, view)
        refuse, fields = policy.outcome(decision, view)
        if refuse:
            status, headers, body = policy.refusal(fields)
            # Starlette's ExceptionMiddleware keeps the app's handlers in the
            # scope, and looks the raised exception's up there
            handlers = scope.get("starlette.exception_handlers")
            if handlers is not None:
                handlers[0].setdefault(Refused, _answer)
            raise Refused(Response(body, status, dict(headers)))
        for name, value in fields:
            response.headers[name] = value
