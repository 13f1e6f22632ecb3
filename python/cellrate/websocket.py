"""Rate limits on the messages of ASGI WebSocket connections (docs/websockets.md,
docs/design.md §17).

    app = MessageLimit(app, per_connection="10/second", per_key="100/minute")
    app = cellrate.asgi.RateLimitMiddleware(app, "30/minute", concurrency=5)

cellrate.asgi.RateLimitMiddleware decides a connection's handshake as the
GET it is (its path's limits, the key, concurrency= as open connections per
key) and puts the connection's key in `scope["cellrate.key"]`; MessageLimit,
inside it, decides each message the client sends ("websocket.receive")
against a limit of its connection and one of its key, shared by every
connection of the key (and, with a shared store, every worker), decided as
one: a refused message spends nothing of either. A refused message closes
the connection with `close_code` (1008, Policy Violation), the application
receiving "websocket.disconnect" with that code, or is dropped, as
`on_refusal` says.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, MutableMapping

import cellrate
from cellrate._errors import invalid, invalid_type
from cellrate._rates import split_rates

__all__ = ["MessageLimit", "message_size", "CLOSE_CODE"]

logger = logging.getLogger("cellrate")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# RFC 6455 §7.4.1 Policy Violation: "a message that violates its policy"
CLOSE_CODE = 1008
CLOSE_REASON = "rate limit exceeded"


def message_size(message: Message) -> int:
    """A message's cost in bytes: its binary payload's, or its text's in UTF-8."""
    data = message.get("bytes")
    if data is not None:
        return len(data)
    text = message.get("text")
    return len(text.encode("utf-8", "surrogatepass")) if text is not None else 0


def _limit(rate: Any, burst: int | None, param: str) -> Any:
    """A Limiter's arguments checked once: a rate made into a limit now, so a
    bad one fails at construction, naming `param`."""
    if isinstance(rate, bool) or not isinstance(rate, (str, int, float)):
        raise invalid_type(param, f"{param} must be a rate such as '10/second', not "
                                  f"{type(rate).__name__}")
    try:
        if len(split_rates(rate)) != 1:
            raise invalid(param, f"{param}: one rate per connection; give the others to "
                                 "per_key or the middleware")
        return cellrate.Limiter(rate, burst=burst)
    except cellrate.CellrateError as error:
        if getattr(error, "param", None) != "rate":
            raise
        raise (invalid if isinstance(error, ValueError) else invalid_type)(
            param, f"{param}: {error}") from None


class MessageLimit:
    """Limits the messages of the WebSocket connections of an ASGI app.

    per_connection: a rate ("10/second"): each connection's own limit.
    per_key: a rate, made a KeyedLimiter, or an in-process keyed store
        (KeyedLimiter, shared= included: one limit for every worker of a
        host): the limit of every connection of a key, the key being the one
        cellrate.asgi.RateLimitMiddleware in front decided the handshake under
        (`scope["cellrate.key"]`). A connection without one (no middleware in
        front, or an exempt path) meets its per_connection limit only.
    burst: the burst of the limits made from a rate.
    cost: units of a message, an int or a function of the ASGI message
        (message_size: its bytes).
    on_refusal: "close" (default): the connection is closed with close_code
        and the application receives "websocket.disconnect" with it, as when
        a client goes away (so it must send nothing more); "drop": the
        message is dropped, the connection stays open.
    close_code: 1008 (Policy Violation, default), 1013 (Try Again Later), or
        one of the private range 3000 to 4999.
    """

    def __init__(self, app: ASGIApp, per_connection: str | float | None = None, *,
                 per_key: Any = None, burst: int | None = None,
                 cost: int | Callable[[Message], int] = 1, on_refusal: str = "close",
                 close_code: int = CLOSE_CODE) -> None:
        self.app = app
        if per_connection is None and per_key is None:
            raise invalid("per_connection", "per_connection: give per_connection, per_key "
                                            "or both")
        self.per_connection = (None if per_connection is None
                               else _limit(per_connection, burst, "per_connection"))
        if per_key is None or isinstance(per_key, cellrate.KeyedLimiter):
            self.per_key = per_key
        elif isinstance(per_key, (str, int, float)) and not isinstance(per_key, bool):
            _limit(per_key, burst, "per_key")
            self.per_key = cellrate.KeyedLimiter(per_key, burst=burst)
        else:
            raise invalid_type("per_key", "per_key must be a rate or a cellrate.KeyedLimiter "
                                          f"(shared= for every worker), not "
                                          f"{type(per_key).__name__}")
        if isinstance(cost, bool) or not (callable(cost) or isinstance(cost, int)):
            raise invalid_type("cost", "cost must be an int or a function of the message")
        if isinstance(cost, int) and cost < 0:
            raise invalid("cost", "cost must be an integer >= 0")
        self.cost = cost
        if on_refusal not in ("close", "drop"):
            raise (invalid if isinstance(on_refusal, str) else invalid_type)(
                "on_refusal", f"on_refusal must be 'close' or 'drop', got {on_refusal!r}")
        self.close = on_refusal == "close"
        if isinstance(close_code, bool) or not isinstance(close_code, int):
            raise invalid_type("close_code", "close_code must be an integer")
        if not (close_code in (1008, 1013) or 3000 <= close_code <= 4999):
            raise invalid("close_code", "close_code must be 1008, 1013 or from 3000 to 4999, "
                                        f"got {close_code}")
        self.close_code = close_code
        self._warned_keyless = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        key = scope.get("cellrate.key")
        if key is None and self.per_key is not None and not self._warned_keyless:
            self._warned_keyless = True
            logger.warning("cellrate.websocket.MessageLimit: a connection without "
                           "scope['cellrate.key'] meets its per_connection limit only; put "
                           "cellrate.asgi.RateLimitMiddleware in front")
        admits = self._admits(key)
        connection = _Connection(self, receive, send, admits)
        await self.app(scope, connection.receive, send)

    def _admits(self, key: Any) -> Callable[[int], bool]:
        """The decision of one message of `cost` units for a connection of `key`."""
        per_key = self.per_key if key is not None else None
        if self.per_connection is None:
            if per_key is None:
                return lambda cost: True
            return lambda cost: per_key.allow(key, cost)
        limit = self.per_connection
        own = cellrate.Limiter(limit.rate, limit.period, burst=limit.burst)
        if per_key is None:
            return own.allow
        items: list[Any] = [own, (per_key, key)]
        return lambda cost: cellrate.check_all(items, cost).allowed


class _Connection:
    """One connection's receive, its messages decided."""

    __slots__ = ("limit", "_receive", "_send", "admits", "closed")

    def __init__(self, limit: MessageLimit, receive: Receive, send: Send,
                 admits: Callable[[int], bool]) -> None:
        self.limit = limit
        self._receive = receive
        self._send = send
        self.admits = admits
        self.closed = False

    async def receive(self) -> Message:
        limit = self.limit
        while True:
            message = await self._receive()
            if message["type"] != "websocket.receive" or self.closed:
                return message
            cost = limit.cost
            if self.admits(cost if cost.__class__ is int else cost(message)):  # type: ignore
                return message
            if not limit.close:
                continue  # dropped
            self.closed = True
            await self._send({"type": "websocket.close", "code": limit.close_code,
                              "reason": CLOSE_REASON})
            return {"type": "websocket.disconnect", "code": limit.close_code}

