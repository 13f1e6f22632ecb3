"""Django with cellrate: a view decorator, and a middleware configured in
settings.py (docs/design.md §10).

    from cellrate.django import limit

    @limit("5/minute")                  # sync and async views alike
    def login(request): ...

    # settings.py
    MIDDLEWARE = [..., "cellrate.django.RateLimitMiddleware"]
    CELLRATE = {"limit": "100/minute", "exempt_paths": ["/admin/*"]}

The options are those of `cellrate.web.Policy`, as keyword arguments of
`limit` or as the keys of the CELLRATE dict. A bad CELLRATE raises
ImproperlyConfigured, naming the option, when Django loads the middleware
(at startup); a bad `limit(...)` raises InvalidArgument when the module of
the view is imported. One `limit(...)` is one set of limits: decorate each
view with its own for per-view limits, or reuse one to share it. A
class-based view takes it through `django.utils.decorators.method_decorator`.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from typing import Any, Awaitable, Callable, Mapping, TypeVar, Union

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings  # type: ignore[import-untyped, unused-ignore]
from django.core.exceptions import (  # type: ignore[import-untyped, unused-ignore]
    ImproperlyConfigured)
from django.http import (  # type: ignore[import-untyped, unused-ignore]
    HttpRequest, HttpResponse, HttpResponseBase)

from cellrate import CellrateError
from cellrate.web import Policy, Request, options_of

__all__ = ["limit", "RateLimitMiddleware"]

View = TypeVar("View", bound=Callable[..., Any])
Answer = Union[HttpResponseBase, Awaitable[HttpResponseBase]]


def _view(policy: Policy, request: HttpRequest) -> Request:
    # META is the WSGI environ, or what Django's ASGI handler makes of the scope
    return Request(policy, request.method or "GET", request.path, None, request.META)


def _refusal(policy: Policy, fields: list[tuple[str, str]]) -> HttpResponse:
    status, headers, body = policy.refusal(fields)
    return HttpResponse(body, status=status, headers=dict(headers))


def _with_fields(response: HttpResponseBase, fields: list[tuple[str, str]]) -> HttpResponseBase:
    for name, value in fields:
        response[name] = value
    return response


def _limited(policy: Policy, respond: Callable[..., Any]) -> Callable[..., Answer]:
    """`respond(request, ...)` (a view, or the rest of the middleware chain)
    under `policy`; a coroutine function when `respond` is one."""
    if iscoroutinefunction(respond):
        policy.require_stores(asynchronous=True)

        async def limited_async(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            view = _view(policy, request)
            limits = policy.limits_for(view)
            if limits is None:
                return await respond(request, *args, **kwargs)
            refuse, fields = policy.outcome(await policy.decide_async(limits, view), view)
            if refuse:
                return _refusal(policy, fields)
            return _with_fields(await respond(request, *args, **kwargs), fields)

        return limited_async
    policy.require_stores(asynchronous=False)

    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        view = _view(policy, request)
        limits = policy.limits_for(view)
        if limits is None:
            return respond(request, *args, **kwargs)
        refuse, fields = policy.outcome(policy.decide(limits, view), view)
        if refuse:
            return _refusal(policy, fields)
        return _with_fields(respond(request, *args, **kwargs), fields)

    return limited


@options_of(Policy)
def limit(*args: Any, **options: Any) -> Callable[[View], View]:
    """A view decorator: `@limit("5/minute", key=..., ...)`."""
    policy = Policy(*args, **options)
    policy.require_no_charge("cellrate.django.limit")

    def decorate(view: View) -> View:
        return functools.wraps(view)(_limited(policy, view))  # type: ignore[return-value]

    return decorate


def _policy_from_settings() -> Policy:
    options = getattr(settings, "CELLRATE", None)
    if not isinstance(options, Mapping):
        raise ImproperlyConfigured(
            "CELLRATE must be a dict of the options of cellrate.web.Policy, such as "
            f"{{'limit': '100/minute'}}, for cellrate.django.RateLimitMiddleware; got {options!r}")
    known = inspect.signature(Policy).parameters
    for option in options:
        if option not in known:
            close = difflib.get_close_matches(str(option), known, 1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ImproperlyConfigured(f"CELLRATE: {option!r} is no option of cellrate.web.Policy"
                                       f"{hint}")
    policy = Policy(**options)
    policy.require_no_charge("cellrate.django.RateLimitMiddleware")
    return policy


class RateLimitMiddleware:
    """Limits every request by the CELLRATE setting; under WSGI and ASGI."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        try:
            self.policy = _policy_from_settings()
            self._respond = _limited(self.policy, get_response)
        except CellrateError as error:
            raise ImproperlyConfigured(f"CELLRATE[{error.param!r}]: {error}") from error
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        return self._respond(request)
