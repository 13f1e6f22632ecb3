"""ASGI rate limiting: `RateLimitMiddleware` for Starlette, FastAPI, Litestar,
Quart, Django's ASGI handler, or any ASGI 3 application (docs/design.md §10).

    app = cellrate.asgi.RateLimitMiddleware(app, "100/minute")

"http" scopes are limited, and the handshake of a "websocket" scope as the GET
it is: it meets the limits of its path, and is refused with a 429 and the
header fields where the server supports the WebSocket Denial Response
extension, else closed with code 1008 (the server answers 403); admitted, the
connection holds its unit of `concurrency` until it ends, its key is in
`scope["cellrate.key"]` for cellrate.websocket.MessageLimit, which limits
its messages. "lifespan" passes through untouched. The options are those of
`cellrate.web.Policy`.
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
            if scope["type"] == "websocket":
                await self._websocket(scope, receive, send)
            else:
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

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket connection: its handshake decided as a GET to its path."""
        policy = self.policy
        request = Request(policy, "GET", scope["path"], scope)
        limits = policy.limits_for(request)
        if limits is None:
            await self.app(scope, receive, send)
            return
        refuse, slot = policy.hold(request)
        if refuse:
            await _deny(scope, send, policy.in_flight_refusal())
            return
        try:  # held until the connection ends
            fields: list[tuple[str, str]] = []
            if limits:
                refuse, fields = policy.outcome(await policy.decide_async(limits, request),
                                                request)
                if refuse:
                    await _deny(scope, send, policy.refusal(fields))
                    return
                if policy.charges:
                    scope["cellrate.charge"] = policy.charger(limits, request)
            scope["cellrate.key"] = policy.key(request)
            await self.app(scope, receive, _accepting(send, _encoded(fields)) if fields else send)
        finally:
            if slot is not None:
                slot.release()

    @staticmethod
    async def _send_refusal(send: Send, refusal: tuple[int, list[tuple[str, str]], bytes]) -> None:
        status, headers, body = refusal
        await send({"type": "http.response.start", "status": status, "headers": _encoded(headers)})
        await send({"type": "http.response.body", "body": body})


# The close code of a handshake refused where the server has no denial
# response (RFC 6455 §7.4.1 Policy Violation), as cellrate.websocket's
HANDSHAKE_CLOSE_CODE = 1008


async def _deny(scope: Scope, send: Send, refusal: tuple[int, list[tuple[str, str]], bytes]
                ) -> None:
    """Refuses a WebSocket handshake: the refusal as an HTTP response where the
    server supports the Denial Response extension, else a close."""
    if "websocket.http.response" not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": HANDSHAKE_CLOSE_CODE})
        return
    status, headers, body = refusal
    await send({"type": "websocket.http.response.start", "status": status,
                "headers": _encoded(headers)})
    await send({"type": "websocket.http.response.body", "body": body})


def _accepting(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    """`send`, with `extra` header fields added to the handshake's response."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "websocket.accept":
            message = dict(message)
            message["headers"] = list(message.get("headers", ())) + extra
        await send(message)

    return send_with_headers


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
