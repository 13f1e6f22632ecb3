"""A Flask route decorator over the policy of `cellrate.web` (docs/design.md §10).

    from cellrate.flask import RateLimit

    @app.post("/login")
    @RateLimit("5/minute")
    def login(): ...

One RateLimit is one set of limits: decorate each view with its own for
per-route limits, or reuse one instance to share it. The options are those of
`cellrate.web.Policy`; for the whole app use `cellrate.wsgi.RateLimitMiddleware`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import flask

from cellrate.web import Policy, init_options_of
from cellrate.wsgi import request_of

__all__ = ["RateLimit"]

View = TypeVar("View", bound=Callable[..., Any])


class RateLimit:
    """A view decorator that limits the views it decorates."""

    @init_options_of(Policy)
    def __init__(self, *args: Any, **options: Any) -> None:
        self.policy = Policy(*args, **options)
        self.policy.require_stores(asynchronous=False)
        self.policy.require_no_charge("cellrate.flask.RateLimit")

    def __call__(self, view: View) -> View:
        policy = self.policy

        @functools.wraps(view)
        def limited(*args: Any, **kwargs: Any) -> Any:
            request = request_of(policy, flask.request.environ)
            limits = policy.limits_for(request)
            if limits is None:
                return view(*args, **kwargs)
            decision = policy.decide(limits, request)
            refuse, fields = policy.outcome(decision, request)
            if refuse:
                status, headers, body = policy.refusal(fields)
                return flask.Response(body, status, headers)
            if not fields:
                return view(*args, **kwargs)
            response = flask.make_response(view(*args, **kwargs))
            for name, value in fields:
                response.headers[name] = value
            return response

        return limited  # type: ignore[return-value]
