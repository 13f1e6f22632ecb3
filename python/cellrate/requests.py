"""A requests adapter that follows the provider it calls (docs/design.md §18).

    import requests, cellrate
    from cellrate.requests import RateLimitAdapter

    session = requests.Session()
    session.mount("https://api.example.com/", RateLimitAdapter(cellrate.Limiter("60/minute", burst=1)))

Each request waits for the limiter before it is sent; its response is
followed (Limiter.follow), a 429 or 503 retried at most `retries` times after
a jittered back-off and the limiter; a limiter of tokens (tokens=) is settled
from the response's usage. Options as cellrate.httpx's transports; the
HTTPAdapter's own (pool_connections, ...) go to it. Requires requests (an
optional dependency: pip install cellrate[requests]).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import requests
import requests.adapters

from cellrate._outbound import Outbound, json_usage

_OPTIONS = ("tokens", "estimate", "usage", "key", "retries", "backoff", "max_backoff",
            "timeout")


class RateLimitAdapter(requests.adapters.HTTPAdapter):
    """RateLimitAdapter(limiter, **options): an HTTPAdapter whose send() waits,
    follows and retries."""

    def __init__(self, limiter: Any, **options: Any) -> None:
        mine = {name: options.pop(name) for name in _OPTIONS if name in options}
        super().__init__(**options)
        self.outbound = Outbound(limiter, **mine)

    def _usage(self, response: requests.Response) -> Any:
        if self.outbound.usage is not None:
            return self.outbound.usage(response)
        return json_usage(response.content, response.headers.get("content-type", ""))

    def send(self, request: requests.PreparedRequest, *args: Any,
             **kwargs: Any) -> requests.Response:
        outbound = self.outbound
        attempt = 0
        while True:
            ticket = outbound.ticket(request)
            outbound.wait(ticket)
            try:
                response = super().send(request, *args, **kwargs)
            except BaseException:
                outbound.failed(ticket)
                raise
            wait = outbound.received(ticket, response.headers, response.status_code,
                                     functools.partial(self._usage, response), attempt)
            if wait is None:
                return response
            response.close()
            attempt += 1
            time.sleep(wait)
