"""What the outbound adapters share (cellrate.httpx, cellrate.requests, the
decorator's follow=): wait before a request, follow its response, settle a
token budget, retry a 429 or 503 (docs/design.md §18).

The rules are the core's: what a response says and how a limit follows it
(Limiter.follow), when to retry and after how long (cr_retry_wait). Here:
which limiter is asked, the requests in flight, and the settling of an
estimate by charge or refund.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any, Callable, Optional, Tuple

from cellrate import _cellrate
from cellrate._errors import invalid, invalid_type

Key = Callable[[Any], Any]


def follow_store(store: Any, key: Tuple[Any, ...], headers: Any, status: Optional[int], *,
                 quota: str = "requests", pending: int = 0) -> bool:
    """Follows a response on any limiter cellrate makes: a Limiter or a
    KeyedLimiter (`key` its one-tuple), a fleet member (its local limiter, at
    its share of the provider's limit), or several limits as one (each)."""
    if isinstance(store, (_cellrate.Limiter, _cellrate.KeyedLimiter)):
        compiled: Any = store  # either face: the key first, or none
        return bool(compiled.follow(*key, headers, status, quota=quota, pending=pending))
    local, share = getattr(store, "local", None), getattr(store, "share", None)
    if local is not None and share is not None:  # cellrate.share's members
        if share <= 0:
            return False  # a member without a share admits nothing to follow
        return bool(local.follow(*key, headers, status, quota=quota, pending=pending,
                                 share=min(1.0, share)))
    stores = getattr(store, "stores", None)
    if stores is not None:  # the decorator's several limits
        pulled = [follow_store(one, key, headers, status, quota=quota, pending=pending)
                  for one in stores]
        return any(pulled)
    raise invalid_type("limiter", "limiter: a store that follows a provider: a Limiter, a "
                                  "KeyedLimiter (with key=) or a fleet share's limiter")


def can_follow(store: Any) -> bool:
    """Whether follow_store takes `store`."""
    if isinstance(store, (_cellrate.Limiter, _cellrate.KeyedLimiter)):
        return True
    if getattr(store, "local", None) is not None and hasattr(store, "share"):
        return True
    stores = getattr(store, "stores", None)
    return stores is not None and all(can_follow(one) for one in stores)


def usage_of_json(body: Any) -> Optional[int]:
    """Tokens a JSON body says it used: OpenAI's usage.total_tokens, or
    Anthropic's usage.input_tokens + usage.output_tokens; None when it says
    neither."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
        return total
    parts = [usage.get("input_tokens"), usage.get("output_tokens")]
    counts = [part for part in parts
              if isinstance(part, int) and not isinstance(part, bool) and part >= 0]
    return sum(counts) if len(counts) == 2 else None


def json_usage(content: bytes, content_type: str) -> Optional[int]:
    if "json" not in content_type.lower():
        return None
    try:
        return usage_of_json(json.loads(content))
    except ValueError:
        return None


class Ticket:
    """One try of a request: its key, the tokens it holds."""

    __slots__ = ("key", "estimate")

    def __init__(self, key: Tuple[Any, ...], estimate: int) -> None:
        self.key, self.estimate = key, estimate


class Outbound:
    """The limiters of an adapter and its requests in flight.

    limiter: the requests limiter (Limiter, KeyedLimiter with key=, a shared
             or fleet one); tokens: a limiter of tokens, or None.
    estimate: a function of the request, the tokens it holds while in flight
              (default 0: charged when the response says its usage).
    usage: a function of the response, the tokens it used, or None when it
           does not say (default: the JSON body's usage).
    key: a function of the request, the key of keyed limiters.
    retries, backoff, max_backoff: a 429 or 503 is retried at most `retries`
              times, after a back-off doubling from `backoff` seconds up to
              `max_backoff` (jittered), and the limiter (which a Retry-After
              holds until then).
    timeout: the longest wait for the limiters before a try (None: any);
             RateLimited beyond it.
    """

    def __init__(self, limiter: Any, *, tokens: Any = None,
                 estimate: Optional[Callable[[Any], int]] = None,
                 usage: Optional[Callable[[Any], Optional[int]]] = None,
                 key: Optional[Key] = None, retries: int = 3, backoff: float = 0.5,
                 max_backoff: float = 30.0, timeout: Optional[float] = None) -> None:
        _cellrate._check_retry(retries, backoff, max_backoff)
        if estimate is not None and not callable(estimate):
            raise invalid_type("estimate", "estimate must be a function of the request")
        if usage is not None and not callable(usage):
            raise invalid_type("usage", "usage must be a function of the response")
        if key is not None and not callable(key):
            raise invalid_type("key", "key must be a function of the request")
        self.limiter, self.tokens = limiter, tokens
        self.estimate, self.usage, self.key = estimate, usage, key
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self.timeout = None if timeout is None else _cellrate._check_timeout(timeout)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._tokens_in_flight = 0

    def ticket(self, request: Any) -> Ticket:
        key = () if self.key is None else (self.key(request),)
        estimate = 0 if self.tokens is None or self.estimate is None else self.estimate(request)
        if isinstance(estimate, bool) or not isinstance(estimate, int):
            raise invalid_type("estimate", f"estimate must return an integer >= 0, got "
                                           f"{estimate!r}")
        if estimate < 0:
            raise invalid("estimate", f"estimate must return an integer >= 0, got {estimate!r}")
        return Ticket(key, estimate)

    def wait(self, ticket: Ticket) -> None:
        """Blocks until the request may go (both limiters), then counts it in flight."""
        self.limiter.wait(*ticket.key, 1, timeout=self.timeout)
        if self.tokens is not None and ticket.estimate > 0:
            self.tokens.wait(*ticket.key, ticket.estimate, timeout=self.timeout)
        self._sent(ticket)

    async def acquire(self, ticket: Ticket) -> None:
        await self.limiter.acquire(*ticket.key, 1, timeout=self.timeout)
        if self.tokens is not None and ticket.estimate > 0:
            await self.tokens.acquire(*ticket.key, ticket.estimate, timeout=self.timeout)
        self._sent(ticket)

    def _sent(self, ticket: Ticket) -> None:
        with self._lock:
            self._in_flight += 1
            self._tokens_in_flight += ticket.estimate

    def _arrived(self, ticket: Ticket) -> Tuple[int, int]:
        """The requests and tokens still in flight besides this one's."""
        with self._lock:
            self._in_flight -= 1
            self._tokens_in_flight -= ticket.estimate
            return self._in_flight, self._tokens_in_flight

    def failed(self, ticket: Ticket) -> None:
        """A try that got no response: out of flight, its tokens given back."""
        self._arrived(ticket)
        if self.tokens is not None and ticket.estimate > 0:
            self.tokens.refund(*ticket.key, ticket.estimate)

    def received(self, ticket: Ticket, headers: Any, status: int,
                 usage: Callable[[], Optional[int]], attempt: int) -> Optional[float]:
        """Follows a response and settles its tokens; the seconds to wait
        before retrying it, or None: it is the answer."""
        others, other_tokens = self._arrived(ticket)
        follow_store(self.limiter, ticket.key, headers, status, pending=others)
        retry = _cellrate._retry_wait(status, attempt + 1, self.retries, self.backoff,
                                      self.max_backoff, random.getrandbits(64))
        if self.tokens is not None:
            follow_store(self.tokens, ticket.key, headers, status, quota="tokens",
                         pending=other_tokens)
            refused = retry is not None or status in (429, 503)
            self._settle(ticket, 0 if refused else usage())  # refused: nothing was used
        return retry

    def _settle(self, ticket: Ticket, used: Optional[int]) -> None:
        """The tokens a request held, settled to what it used: charged the
        difference, or given it back (nothing when the usage is unknown)."""
        if used is None:
            return
        if isinstance(used, bool) or not isinstance(used, int):
            raise invalid_type("usage", f"usage must return an integer >= 0 or None, got "
                                        f"{used!r}")
        if used < 0:
            raise invalid("usage", f"usage must return an integer >= 0 or None, got {used!r}")
        if used > ticket.estimate:
            self.tokens.charge(*ticket.key, used - ticket.estimate)
        elif used < ticket.estimate:
            self.tokens.refund(*ticket.key, ticket.estimate - used)
