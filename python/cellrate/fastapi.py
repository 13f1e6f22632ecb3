"""A FastAPI dependency over the policy of `cellrate.web` (docs/design.md §10).

    from fastapi import Depends
    from cellrate.fastapi import RateLimit

    @app.post("/login", dependencies=[Depends(RateLimit("5/minute"))])
    async def login(): ...

One RateLimit is one set of limits: give each route its own for per-route
limits, or put one in a router's `dependencies=` to share it. A refusal raises
HTTPException(status, detail=body, headers=the rate-limit fields). The options
are those of `cellrate.web.Policy` (routes and exemptions included).
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request, Response

from cellrate.web import Policy
from cellrate.web import Request as PolicyRequest

__all__ = ["RateLimit"]


class RateLimit:
    """A dependency that limits the routes it is attached to."""

    def __init__(self, limit: Any = None, **options: Any) -> None:
        self.policy = Policy(limit, asynchronous=True, **options)

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
            raise HTTPException(policy.status, detail=policy.body.decode(), headers=dict(fields))
        for name, value in fields:
            response.headers[name] = value
