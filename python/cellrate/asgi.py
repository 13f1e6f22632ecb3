"""ASGI rate limiting: `RateLimitMiddleware` for Starlette, FastAPI, Litestar,
Quart, Django's ASGI handler, or any ASGI 3 application (docs/design.md §10).

    app = cellrate.asgi.RateLimitMiddleware(app, "100/minute")

Only "http" scopes are limited; "lifespan" and "websocket" pass through
untouched. The options are those of `cellrate.web.Policy`.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, MutableMapping

from cellrate.web import Policy, Request, Response, app_init_options_of, client_address, header

__all__ = ["RateLimitMiddleware", "Request", "client_address", "header"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _encoded(fields: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in fields]


class RateLimitMiddleware:
    """Limits an ASGI application: `RateLimitMiddleware(app, limit, **options)`,
    or `app.add_middleware(RateLimitMiddleware, limit=..., ...)` in Starlette
    and FastAPI. Async stores (AsyncRedisLimiter) are awaited; a store whose
    check() would block the event loop is refused."""

    @app_init_options_of(Policy)
    def __init__(self, app: ASGIApp, *args: Any, **options: Any) -> None:
        self.app = app
        self.policy = Policy(*args, **options)
        self.policy.require_stores(asynchronous=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self.policy
        request = Request(policy, scope["method"], scope["path"], scope)
        limits = policy.limits_for(request)
        if limits is None:
            await self.app(scope, receive, send)
            return
        if policy.concurrency is None:
            await self._limited(limits, request, scope, receive, send)
            return
        refuse, slot = policy.hold(request)
        if refuse:
            await self._send_refusal(send, policy.in_flight_refusal())
            return
        if slot is None:  # a dry run's refusal
            await self._limited(limits, request, scope, receive, send)
            return
        try:  # held until the last body message is sent, or the app returns
            await self._limited(limits, request, scope, receive, _releasing(send, slot))
        finally:
            slot.release()

    async def _limited(self, limits: Any, request: Request, scope: Scope, receive: Receive,
                       send: Send) -> None:
        policy = self.policy
        if not limits:  # concurrency alone
            await self.app(scope, receive, send)
            return
        decision = await policy.decide_async(limits, request)
        refuse, fields = policy.outcome(decision, request)
        if refuse:
            await self._send_refusal(send, policy.refusal(fields))
        elif policy.charges:
            await self._settled(scope, receive, send, policy.charger(limits, request), fields)
        elif fields:
            await self.app(scope, receive, _adding(send, _encoded(fields)))
        else:
            await self.app(scope, receive, send)

    async def _settled(self, scope: Scope, receive: Receive, send: Send, charger: Any,
                       fields: list[tuple[str, str]]) -> None:
        """The application, with `scope["cellrate.charge"]` for its endpoint and
        the policy's `charge` applied once it returns (the response has ended,
        streamed or not, or the client went away)."""
        scope["cellrate.charge"] = charger
        if self.policy.charge is None:
            await self.app(scope, receive, _adding(send, _encoded(fields)) if fields else send)
            return
        response = Response()
        extra = _encoded(fields)

        async def send_watching(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", ())) + extra
                response.started(message["status"], message["headers"])
            elif message["type"] == "http.response.body":
                response.bytes_sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_watching)
        finally:
            charger.end(response)

    @staticmethod
    async def _send_refusal(send: Send, refusal: tuple[int, list[tuple[str, str]], bytes]) -> None:
        status, headers, body = refusal
        await send({"type": "http.response.start", "status": status, "headers": _encoded(headers)})
        await send({"type": "http.response.body", "body": body})


def _releasing(send: Send, slot: Any) -> Send:
    """`send`, releasing `slot` once the response's last body message is sent."""

    async def send_then_release(message: Message) -> None:
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            slot.release()

    return send_then_release


def _adding(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """`send`, with `extra` header fields added to the response's start."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = dict(message)
            message["headers"] = list(message.get("headers", ())) + extra
        await send(message)

    return send_with_headers
