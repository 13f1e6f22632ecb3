"""WSGI rate limiting: `RateLimitMiddleware` for Flask, Django or any WSGI
application (docs/design.md §10).

    app.wsgi_app = cellrate.wsgi.RateLimitMiddleware(app.wsgi_app, "100/minute")

The options are those of `cellrate.web.Policy`; stores must be synchronous.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator

from cellrate.web import Policy, Request, Response, app_init_options_of, client_address, header

__all__ = ["RateLimitMiddleware", "Request", "client_address", "header"]

StartResponse = Callable[..., Any]
Environ = Dict[str, Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


def request_of(policy: Policy, environ: Environ) -> Request:
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    return Request(policy, environ.get("REQUEST_METHOD") or "GET", path or "/", None, environ)


class RateLimitMiddleware:
    """Limits a WSGI application: `RateLimitMiddleware(app, limit, **options)`."""

    @app_init_options_of(Policy)
    def __init__(self, app: WSGIApp, *args: Any, **options: Any) -> None:
        self.app = app
        self.policy = Policy(*args, **options)
        self.policy.require_stores(asynchronous=False)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        policy = self.policy
        request = request_of(policy, environ)
        limits = policy.limits_for(request)
        if limits is None:
            return self.app(environ, start_response)
        if policy.concurrency is None:
            return self._limited(limits, request, environ, start_response)
        refuse, slot = policy.hold(request)
        if refuse:
            status, headers, body = policy.in_flight_refusal()
            start_response(policy.status_line, headers)
            return [body]
        if slot is None:  # a dry run's refusal
            return self._limited(limits, request, environ, start_response)
        try:
            return _Releasing(self._limited(limits, request, environ, start_response), slot)
        except BaseException:
            slot.release()
            raise

    def _limited(self, limits: Any, request: Request, environ: Environ,
                 start_response: StartResponse) -> Iterable[bytes]:
        policy = self.policy
        if not limits:  # concurrency alone
            return self.app(environ, start_response)
        decision = policy.decide(limits, request)
        refuse, fields = policy.outcome(decision, request)
        if refuse:
            _, headers, body = policy.refusal(fields)
            start_response(policy.status_line, headers)
            return [body]
        charger = policy.charger(limits, request) if policy.charges else None
        if charger is not None:
            environ["cellrate.charge"] = charger
        if not fields and (charger is None or policy.charge is None):
            return self.app(environ, start_response)
        response = Response()

        def start_with_headers(status: str, headers: list[tuple[str, str]],
                               exc_info: Any = None) -> Any:
            response.started(int(status.split(" ", 1)[0]), headers)
            return start_response(status, list(headers) + fields, exc_info)

        sent = self.app(environ, start_with_headers)
        if charger is None or policy.charge is None:
            return sent
        return _Settling(sent, response, charger)


class _Settling:
    """A response body that counts its bytes and, when the server closes it (the
    response has ended, streamed or not), applies the policy's `charge`."""

    def __init__(self, body: Iterable[bytes], response: Response, charger: Any) -> None:
        self.body = body
        self.response = response
        self.charger = charger

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.body:
            self.response.bytes_sent += len(chunk)
            yield chunk

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            charger, self.charger = self.charger, None
            if charger is not None:
                charger.end(self.response)



class _Releasing:
    """A response iterable that releases its request's unit in flight when the
    server closes it (PEP 3333: always, also when the client went away)."""

    __slots__ = ("response", "slot")

    def __init__(self, response: Iterable[bytes], slot: Any) -> None:
        self.response = response
        self.slot = slot

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.response)

    def close(self) -> None:
        try:
            close = getattr(self.response, "close", None)
            if close is not None:
                close()
        finally:
            self.slot.release()
