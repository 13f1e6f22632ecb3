"""httpx transports that follow the provider they call (docs/design.md §18).

    import httpx, cellrate
    from cellrate.httpx import RateLimitTransport

    limit = cellrate.Limiter("60/minute", burst=1)
    client = httpx.Client(transport=RateLimitTransport(limit))

Each request waits for the limiter before it is sent; its response is
followed (Retry-After, the RateLimit fields, x-ratelimit-*,
anthropic-ratelimit-*: Limiter.follow), so a 429 holds every request of the
limiter until its Retry-After and a lower remaining slows them; a 429 or 503
is retried at most `retries` times, after a jittered back-off and the
limiter. A limiter of tokens (tokens=) holds each request's estimate and is
settled from the response's usage. The options are cellrate._outbound's
Outbound (limiter, tokens, estimate, usage, key, retries, backoff,
max_backoff, timeout). Requires httpx (an optional dependency: pip install
cellrate[httpx]).
"""

from __future__ import annotations

import functools
import time
from typing import Any, Optional

import httpx

from cellrate._outbound import Outbound, json_usage


def _usage(outbound: Outbound, response: httpx.Response) -> Any:
    if outbound.usage is not None:
        return outbound.usage(response)
    if "json" not in response.headers.get("content-type", ""):
        return None
    response.read()
    return json_usage(response.content, response.headers.get("content-type", ""))


async def _async_usage(outbound: Outbound, response: httpx.Response) -> Any:
    if outbound.usage is not None:
        return outbound.usage(response)
    if "json" not in response.headers.get("content-type", ""):
        return None
    await response.aread()
    return json_usage(response.content, response.headers.get("content-type", ""))


def _given(value: Any) -> Any:
    return value


class RateLimitTransport(httpx.BaseTransport):
    """A synchronous transport: RateLimitTransport(limiter, transport=None, **options);
    `transport` is the one that sends (default httpx.HTTPTransport())."""

    def __init__(self, limiter: Any, transport: Optional[httpx.BaseTransport] = None,
                 **options: Any) -> None:
        self.outbound = Outbound(limiter, **options)
        self.transport = transport if transport is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        outbound = self.outbound
        if outbound.retries:
            request.read()  # sent again as it was
        attempt = 0
        while True:
            ticket = outbound.ticket(request)
            outbound.wait(ticket)
            try:
                response = self.transport.handle_request(request)
            except BaseException:
                outbound.failed(ticket)
                raise
            wait = outbound.received(ticket, response.headers, response.status_code,
                                     functools.partial(_usage, outbound, response), attempt)
            if wait is None:
                return response
            response.close()
            attempt += 1
            time.sleep(wait)

    def close(self) -> None:
        self.transport.close()


class AsyncRateLimitTransport(httpx.AsyncBaseTransport):
    """The asyncio transport: AsyncRateLimitTransport(limiter, transport=None,
    **options); `transport` default httpx.AsyncHTTPTransport()."""

    def __init__(self, limiter: Any, transport: Optional[httpx.AsyncBaseTransport] = None,
                 **options: Any) -> None:
        self.outbound = Outbound(limiter, **options)
        self.transport = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import asyncio

        outbound = self.outbound
        if outbound.retries:
            await request.aread()
        attempt = 0
        while True:
            ticket = outbound.ticket(request)
            await outbound.acquire(ticket)
            try:
                response = await self.transport.handle_async_request(request)
            except BaseException:
                outbound.failed(ticket)
                raise
            used = None
            if outbound.tokens is not None and response.status_code not in (429, 503):
                used = await _async_usage(outbound, response)
            wait = outbound.received(ticket, response.headers, response.status_code,
                                     functools.partial(_given, used), attempt)
            if wait is None:
                return response
            await response.aclose()
            attempt += 1
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        await self.transport.aclose()
