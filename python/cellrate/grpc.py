"""gRPC rate limiting: server interceptors for grpcio (`pip install '.[grpc]'`),
synchronous and asyncio (docs/design.md §17).

    server = grpc.server(pool, interceptors=[cellrate.grpc.RateLimitInterceptor("100/minute")])
    server = grpc.aio.server(interceptors=[cellrate.grpc.AsyncRateLimitInterceptor("100/minute")])

The options are those of `cellrate.web.Policy`, which decides every call as
it decides a request: a call is a POST to its full method name
("/helloworld.Greeter/SayHello"), so `routes` and `exempt_paths` take method
names and globs of them ("/helloworld.Greeter/*"); the client is the peer's
address (behind `trusted_proxies`, the hop of `proxy_header` in the call's
metadata); `header(name)` keys by a metadata entry. A refusal ends the call
with RESOURCE_EXHAUSTED and, as trailing metadata, the RateLimit fields and
`grpc-retry-pushback-ms` (when to retry, in whole milliseconds rounded up;
-1, "do not retry", for a cost that never fits), which gRPC's own retries
obey. Concurrency holds a unit until the call ends (cancelled included);
`charge` is applied when it has ended, and a handler charges its own call with
`cellrate.grpc.charger(context)(units)`.
"""

from __future__ import annotations

import functools
import inspect
import math
import urllib.parse
from typing import Any, AsyncIterator, Callable, Iterator

import grpc  # type: ignore[import-untyped, unused-ignore]
import grpc.aio  # type: ignore[import-untyped, unused-ignore]

from cellrate._errors import invalid
from cellrate.web import (Policy, Request, Response, hop_address, client_address, header,
                          init_options_of)

__all__ = ["RateLimitInterceptor", "AsyncRateLimitInterceptor", "charger", "client_address",
           "header"]

# The metadata gRPC's retries read for when to try again (gRFC A6)
PUSHBACK = "grpc-retry-pushback-ms"
# Wrapped handlers kept, by the handler the server found (a service's are few)
HANDLER_CACHE_SIZE = 1024

_RESOURCE_EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
# Each running call that may charge, by its context: its _Call, whose charger
# is made when first asked for (charger())
_CHARGERS: dict[Any, Any] = {}


def charger(context: Any) -> Callable[[int], Any] | None:
    """The running call's charge: `charger(context)(units)` charges `units`
    more to every limit the call met, under its keys (the key may go into
    debt), and returns the tightest Decision. None when the call met no limit,
    or when the policy's stores cannot charge."""
    call = _CHARGERS.get(context)
    return None if call is None else call.charger()


# Peers parsed, by their text: a connection's calls share one
PEER_CACHE_SIZE = 4096


@functools.lru_cache(PEER_CACHE_SIZE)
def _peer(peer: str) -> tuple[str, int] | None:
    """The client of gRPC's peer text ("ipv4:192.0.2.1:5000", "ipv6:[::1]:5000",
    percent-encoded or not), as an ASGI scope's: the address the core reads in
    it ("unknown" for none); None for a Unix socket's. Anything else passes as
    it is: the policy keys what is no address as "unknown"."""
    scheme, _, address = peer.partition(":")
    if scheme in ("ipv4", "ipv6"):
        return hop_address(urllib.parse.unquote(address)), 0
    if scheme.startswith("unix"):
        return None
    return peer, 0


def _text(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


class _Metadata:
    """A call's metadata as an ASGI scope's headers, converted when first read."""

    __slots__ = ("context",)

    def __init__(self, context: Any) -> None:
        self.context = context

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        for name, value in self.context.invocation_metadata() or ():
            yield _text(name).lower(), _text(value)


def _scope(method: str, context: Any) -> dict[str, Any]:
    """What the policy reads of a call, as an ASGI scope: "type": "grpc",
    "method", "context", "client" (the peer) and "headers" (the metadata)."""
    return {"type": "grpc", "method": method, "context": context,
            "client": _peer(context.peer() or ""), "headers": _Metadata(context)}


class _Refusal(Exception):
    """A call refused: its trailing metadata and details."""

    def __init__(self, metadata: tuple[tuple[str, str], ...], details: str) -> None:
        super().__init__(details)
        self.metadata = metadata
        self.details = details


class _Call:
    """One call admitted: what ends it (the unit in flight, the charge)."""

    __slots__ = ("policy", "limits", "request", "context", "slot", "fields", "bytes_sent",
                 "_charger")

    def __init__(self, policy: Policy, limits: Any, request: Request, slot: Any,
                 fields: list[tuple[str, str]]) -> None:
        self.policy = policy
        self.limits = limits
        self.request = request
        self.context = request.scope["context"]
        self.slot = slot
        self.fields = fields
        self.bytes_sent = 0
        self._charger: Any = None
        if limits and policy.charges:
            _CHARGERS[self.context] = self

    def charger(self) -> Any:
        if self._charger is None:
            self._charger = self.policy.charger(self.limits, self.request)
        return self._charger

    def end(self, policy: Policy, failed: bool) -> None:
        """The call has ended (`failed`: by an exception): its charge settled,
        its unit given back."""
        try:
            if _CHARGERS.pop(self.context, None) is not None and policy.charge is not None:
                self.charger().end(self._response(failed))
        finally:
            if self.slot is not None:
                self.slot.release()

    def _response(self, failed: bool) -> Response:
        """What `charge` sees of the ended call: `status` the number of its gRPC
        status code (0: OK), `header(name)` its trailing metadata, `bytes_sent`
        its serialized responses."""
        response = Response()
        code = self.context.code()
        if code is None:
            code = grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK
        response.started(code.value[0], self.context.trailing_metadata() or ())
        response.bytes_sent = self.bytes_sent
        return response


def _size(serializer: Any, message: Any) -> int:
    return len(serializer(message) if serializer is not None else message)


class _Interceptor:
    """What both interceptors share: the policy, and the admission of a call."""

    @init_options_of(Policy)
    def __init__(self, *args: Any, **options: Any) -> None:
        policy = self.policy = Policy(*args, **options)
        if policy.status != 429:
            raise invalid("status", "status: a gRPC refusal is RESOURCE_EXHAUSTED; status is "
                                    "for the HTTP adapters")
        self.details = (policy.body.decode("utf-8", "replace") if policy.body is not None
                        else "rate limit exceeded")
        self._handlers: dict[Any, Any] = {}

    def _wrapped(self, handler: Any, method: str) -> Any:
        if handler is None:
            return None
        key = (handler, method)
        wrapped = self._handlers.get(key)
        if wrapped is None:
            if len(self._handlers) >= HANDLER_CACHE_SIZE:
                self._handlers.clear()
            wrapped = self._handlers[key] = self._wrap(handler, method)
        return wrapped

    def _wrap(self, handler: Any, method: str) -> Any:
        raise NotImplementedError

    def _hold(self, request: Request) -> tuple[Any, Any]:
        """(limits or None for an exempt call, slot): refuses a call over
        its concurrency."""
        policy = self.policy
        limits = policy.limits_for(request)
        if limits is None or policy.concurrency is None:
            return limits, None
        refuse, slot = policy.hold(request)
        if refuse:
            raise _Refusal((), "too many calls in flight")
        return limits, slot

    def _admit(self, limits: Any, request: Request, slot: Any, decision: Any) -> _Call:
        """The admitted call, or _Refusal (giving its unit back)."""
        policy = self.policy
        fields: list[tuple[str, str]] = []
        if decision is not None:
            refuse, fields = policy.outcome(decision, request)
            if refuse:
                if slot is not None:
                    slot.release()
                pushback = ("-1" if decision.retry_after == math.inf
                            else str(math.ceil(decision.retry_after * 1000)))
                raise _Refusal(tuple((name.lower(), value) for name, value in fields)
                               + ((PUSHBACK, pushback),), self.details)
        return _Call(policy, limits, request, slot,
                     [(name.lower(), value) for name, value in fields])


class RateLimitInterceptor(_Interceptor, grpc.ServerInterceptor):  # type: ignore[misc]
    """Limits the calls of a synchronous grpc.server:
    `grpc.server(pool, interceptors=[RateLimitInterceptor(limit, **options)])`.
    Stores must be synchronous."""

    @init_options_of(Policy)
    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.policy.require_stores(asynchronous=False)

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        method = handler_call_details.method
        return self._wrapped(continuation(handler_call_details), method)

    def _begin(self, method: str, context: Any) -> _Call | None:
        """The admitted call (None: exempt); a refusal aborts it."""
        request = Request(self.policy, "POST", method, _scope(method, context))
        try:
            limits, slot = self._hold(request)
            if limits is None:
                return None
            if slot is not None:
                context.add_callback(slot.release)  # ended however it ends
            decision = self.policy.decide(limits, request) if limits else None
            return self._admit(limits, request, slot, decision)
        except _Refusal as refusal:
            context.set_trailing_metadata(refusal.metadata)
            context.abort(_RESOURCE_EXHAUSTED, refusal.details)
            raise  # abort raised already

    def _wrap(self, handler: Any, method: str) -> Any:
        policy = self.policy
        serializer = handler.response_serializer
        counting = policy.charge is not None
        begin = self._begin

        def unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
            def limited(request_or_iterator: Any, context: Any) -> Any:
                call = begin(method, context)
                if call is None:
                    return behavior(request_or_iterator, context)
                failed = True
                try:
                    response = behavior(request_or_iterator, context)
                    if counting:
                        call.bytes_sent += _size(serializer, response)
                    _add_trailing(context, call.fields)
                    failed = False
                    return response
                finally:
                    call.end(policy, failed)
            return limited

        def streaming(behavior: Callable[..., Any]) -> Callable[..., Any]:
            def limited(request_or_iterator: Any, context: Any) -> Iterator[Any]:
                call = begin(method, context)
                if call is None:
                    yield from behavior(request_or_iterator, context)
                    return
                failed = True
                try:
                    for response in behavior(request_or_iterator, context):
                        if counting:
                            call.bytes_sent += _size(serializer, response)
                        yield response
                    _add_trailing(context, call.fields)
                    failed = False
                finally:
                    call.end(policy, failed)
            return limited

        return _wrapped_handler(handler, unary, streaming)


def _wrapped_handler(handler: Any, unary: Callable[..., Any], streaming: Callable[..., Any]
                     ) -> Any:
    """`handler` (an RpcMethodHandler, a named tuple) with its behaviour wrapped."""
    if handler.unary_unary is not None:
        return handler._replace(unary_unary=unary(handler.unary_unary))
    if handler.stream_unary is not None:
        return handler._replace(stream_unary=unary(handler.stream_unary))
    if handler.unary_stream is not None:
        return handler._replace(unary_stream=streaming(handler.unary_stream))
    return handler._replace(stream_stream=streaming(handler.stream_stream))


def _add_trailing(context: Any, fields: list[tuple[str, str]]) -> None:
    """The RateLimit fields of an admitted call (admitted_headers, dry_run)
    after the trailing metadata its handler set."""
    if fields:
        context.set_trailing_metadata(tuple(context.trailing_metadata() or ()) + tuple(fields))


class AsyncRateLimitInterceptor(_Interceptor, grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Limits the calls of a grpc.aio server:
    `grpc.aio.server(interceptors=[AsyncRateLimitInterceptor(limit, **options)])`.
    Async stores (AsyncRedisLimiter) are awaited; a store whose check() would
    block the event loop is refused."""

    @init_options_of(Policy)
    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.policy.require_stores(asynchronous=True)

    async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        method = handler_call_details.method
        return self._wrapped(await continuation(handler_call_details), method)

    async def _begin(self, method: str, context: Any) -> _Call | None:
        request = Request(self.policy, "POST", method, _scope(method, context))
        try:
            limits, slot = self._hold(request)
            if limits is None:
                return None
            if slot is not None:
                context.add_done_callback(lambda _: slot.release())  # ended however it ends
            try:
                decision = await self.policy.decide_async(limits, request) if limits else None
            except BaseException:
                if slot is not None:
                    slot.release()
                raise
            return self._admit(limits, request, slot, decision)
        except _Refusal as refusal:
            await context.abort(_RESOURCE_EXHAUSTED, refusal.details,
                                trailing_metadata=refusal.metadata)
            raise  # abort raised already

    def _wrap(self, handler: Any, method: str) -> Any:
        policy = self.policy
        serializer = handler.response_serializer
        counting = policy.charge is not None
        begin = self._begin

        def unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
            async def limited(request_or_iterator: Any, context: Any) -> Any:
                call = await begin(method, context)
                if call is None:
                    return await behavior(request_or_iterator, context)
                failed = True
                try:
                    response = await behavior(request_or_iterator, context)
                    if counting and response is not None:  # None: written with context.write()
                        call.bytes_sent += _size(serializer, response)
                    _add_trailing(context, call.fields)
                    failed = False
                    return response
                finally:
                    call.end(policy, failed)
            return limited

        def streaming(behavior: Callable[..., Any]) -> Callable[..., Any]:
            if not inspect.isasyncgenfunction(behavior):  # writes with context.write()
                return unary(behavior)

            async def limited(request_or_iterator: Any, context: Any) -> AsyncIterator[Any]:
                call = await begin(method, context)
                if call is None:
                    async for response in behavior(request_or_iterator, context):
                        yield response
                    return
                failed = True
                try:
                    async for response in behavior(request_or_iterator, context):
                        if counting:
                            call.bytes_sent += _size(serializer, response)
                        yield response
                    _add_trailing(context, call.fields)
                    failed = False
                finally:
                    call.end(policy, failed)
            return limited

        return _wrapped_handler(handler, unary, streaming)
