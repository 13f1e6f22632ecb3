"""The policy behind every web integration of cellrate (docs/design.md §10).

`cellrate.asgi.RateLimitMiddleware`, `cellrate.wsgi.RateLimitMiddleware`, the
FastAPI dependency (`cellrate.fastapi.RateLimit`), the Flask decorator
(`cellrate.flask.RateLimit`) and Django's (`cellrate.django.limit`,
`cellrate.django.RateLimitMiddleware`) are thin adapters over `Policy`: which
limits a request meets, under which key and cost, whether it is exempt, and
what the response carries, refusal included. No web framework is imported here.

A store is any object with `check(key, cost, *, now=None) -> Decision`
(KeyedLimiter, RedisLimiter), or a `cellrate.Limiter` (`check(cost, *,
now=None)`, one limit for every key); an async store's `check` is a coroutine
function (AsyncRedisLimiter), and only the ASGI adapters (and Django's async
views and middleware chain) take one. Several
limits on one request are decided as one by the `check_all` (or
`check_all_async`) of their stores' module: `cellrate.check_all`,
`cellrate.redis.check_all`.
"""

from __future__ import annotations

import fnmatch
import functools
import http
import inspect
import json
import logging
import os
import re
import sys
import urllib.parse
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Iterable, List, Mapping, Pattern, Protocol,
                    Sequence, Tuple, TypeVar, Union)

import cellrate
from cellrate._cellrate import (_check_plan_items, _check_priority_items, _ClientKeys,
                                _dry_run_fields, _settle, check_policy_name)
from cellrate._errors import invalid, invalid_type
from cellrate._rates import part_options, split_rates

_check_options = cellrate._cellrate._check_options

__all__ = ["Policy", "Request", "Response", "header", "client_address", "hop_address", "Store", "Limits"]

logger = logging.getLogger("cellrate")

KeyFunction = Callable[["Request"], Union[str, bytes]]


class Store(Protocol):
    """A store: `check(key, cost, *, now=None)` (KeyedLimiter, RedisLimiter; a
    coroutine function for an async one), or a Limiter's `check(cost, *, now=None)`."""

    def check(self, *args: Any, **kwargs: Any) -> Any: ...


# What `limit` and each route take: a rate ("100/minute", "100/day;10/hour",
# 10), a store, a (store, key function) pair, or a list of them
Limit = Union[str, int, float, Store, Tuple[Store, KeyFunction]]
Limits = Union[Limit, List[Limit]]
# A route or exemption pattern: a path, a glob, "METHOD path", or a regex of the path
PathPattern = Union[str, Pattern[str]]

# The options of every adapter are Policy's keyword parameters, written once
# (in Policy.__init__) and given to each adapter's signature by one of the
# decorators below: editors complete them and mypy checks them (a misspelt
# option is an error), while at runtime the adapter is unchanged and passes
# them on to Policy. ParamSpec is for the type checker only: no runtime
# dependency, and Python 3.9 has none in typing.
Result = TypeVar("Result")
Owner = TypeVar("Owner")
App = TypeVar("App")
if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec

    Options = ParamSpec("Options")

    class _TakesOptions(Protocol[Options]):
        def __call__(self, init: Callable[Concatenate[Owner, ...], None]
                     ) -> Callable[Concatenate[Owner, Options], None]: ...

    class _TakesAppAndOptions(Protocol[Options]):
        def __call__(self, init: Callable[Concatenate[Owner, App, ...], None]
                     ) -> Callable[Concatenate[Owner, App, Options], None]: ...


def _unchanged(function: Any) -> Any:
    return function


def options_of(policy: Callable[Options, Any]
               ) -> Callable[[Callable[..., Result]], Callable[Options, Result]]:
    """A function `f(*args, **options)` typed as taking `policy`'s parameters."""
    return _unchanged


def init_options_of(policy: Callable[Options, Any]) -> _TakesOptions[Options]:
    """An `__init__(self, *args, **options)` typed as taking `policy`'s parameters."""
    return _unchanged  # type: ignore[return-value]


def app_init_options_of(policy: Callable[Options, Any]) -> _TakesAppAndOptions[Options]:
    """An `__init__(self, app, *args, **options)` typed as taking `app`, then
    `policy`'s parameters."""
    return _unchanged  # type: ignore[return-value]


class Request:
    """What a key, cost or exemption function sees of a request.

    `method` (upper case), `path`, `client` (the client's address after the
    trusted proxies, as a key: canonical, and widened to its network by
    `ipv4_prefix` / `ipv6_prefix`, e.g. "192.0.2.1", "2001:db8::/64"; "unknown"
    for what is no address), `header(name)` (the value, or None; repeated
    fields joined with ", "), and the framework's own object as `scope` (ASGI)
    or `environ` (WSGI).
    """

    __slots__ = ("method", "path", "scope", "environ", "_policy", "_client", "_plan")

    def __init__(self, policy: Policy, method: str, path: str, scope: Any = None,
                 environ: Any = None) -> None:
        self._policy = policy
        self.method = method.upper()  # Werkzeug and Django dispatch "get" to the GET view
        self.path = path
        self.scope = scope
        self.environ = environ
        self._client: str | None = None
        self._plan: str | None = None  # the plan its decision named (the policy's plan=)

    def peer(self) -> str:
        """The address of the connection's other end ("unknown" when absent)."""
        if self.scope is not None:
            client = self.scope.get("client")
            return client[0] if client else "unknown"
        return self.environ.get("REMOTE_ADDR") or "unknown"

    def header(self, name: str) -> str | None:
        if name.__class__ is not str or not name.isascii():
            raise _bad_header_name(name)
        if self.scope is not None:
            wanted = name.lower().encode("ascii")
            values = [v.decode("latin-1") for k, v in self.scope.get("headers", ()) if k == wanted]
            return ", ".join(values) if values else None
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
        value = self.environ.get(key)
        return value if value is None else str(value)

    @property
    def client(self) -> str:
        if self._client is None:
            self._client = self._policy.client_of(self)
        return self._client


class Response:
    """What a `charge` function sees of a response once it has ended: `status`
    (0 when none was started), `header(name)` (the value, or None; repeated
    fields joined with ", ") and `bytes_sent` (of the body, streamed or not)."""

    __slots__ = ("status", "bytes_sent", "_headers")

    def __init__(self) -> None:
        self.status = 0
        self.bytes_sent = 0
        self._headers: list[tuple[str, str]] = []

    def started(self, status: int, headers: Iterable[tuple[Any, Any]]) -> None:
        self.status = status
        self._headers = [(_text(name).lower(), _text(value)) for name, value in headers]

    def header(self, name: str) -> str | None:
        if name.__class__ is not str or not name.isascii():
            raise _bad_header_name(name)
        wanted = name.lower()
        values = [value for field, value in self._headers if field == wanted]
        return ", ".join(values) if values else None


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, (bytes, bytearray)) else str(value)


def client_address(request: Request) -> str:
    """The default key: the client's address (see `trusted_proxies`)."""
    return request.client


def header(name: str) -> KeyFunction:
    """A key function: the value of header `name`, or, when a request lacks it,
    the client's address. Header values are kept apart from addresses
    ("<name>=<value>"), so no header value can spend an address's budget."""
    if not isinstance(name, str) or _TOKEN.fullmatch(name) is None:
        raise _bad_header_name(name)
    prefix = name.lower() + "="

    def key_from_header(request: Request) -> str:
        value = request.header(name)
        return request.client if value is None else prefix + value

    key_from_header.__qualname__ = f"header({name!r})"
    return key_from_header


# The media type of the default refusal, an RFC 9457 problem document
PROBLEM_TYPE = "application/problem+json"

# A field name (RFC 9110 §5.1: a token)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _bad_header_name(name: Any) -> Exception:
    if not isinstance(name, str):
        return invalid_type("name", f"name must be a header name (str), not {type(name).__name__}")
    return invalid("name", f"name must be a header name (an RFC 9110 token), got {name!r}")


def _trusted(trusted: Iterable[str] | str) -> tuple[list[Any], bool]:
    """(the entries of trusted_proxies that are networks, whether "unix" is
    one); the networks are the core's to read (_ClientKeys refuses a
    bad one, or one that is no str, naming trusted_proxies)."""
    if isinstance(trusted, str):
        items: list[Any] = [trusted]
    else:
        try:
            items = list(trusted)
        except TypeError:
            items = [trusted]  # refused by the core as no network
    return [item for item in items if item != "unix"], "unix" in items


# The key of every client that is no address: a Unix-socket peer, a missing
# one, a hop that does not parse (the core's CR_ADDRESS_UNKNOWN). One key for
# all of them, so that none of them can be made into a fresh limit.
# decide()'s plan when the request's is still to be found
_ASK: Any = object()

NO_ADDRESS = "unknown"

# Addresses whose key and trust a policy keeps (an LRU: a fresh address costs
# one call into the core, a known one a lookup).
ADDRESS_CACHE_SIZE = 4096
# Keys (clients) holding requests at once that concurrency=N is sized for:
# 16 * (N + 1) * 7/4 bytes each (a shared region reserves them all).
CONCURRENCY_KEYS = 10_000


# Hops read at full prefixes: hop_address's keys are the addresses themselves.
_FULL_ADDRESSES = _ClientKeys(32, 128)


def hop_address(hop: str) -> str:
    """One hop of X-Forwarded-For or a Forwarded `for=` value as its address,
    in canonical text, without quotes, brackets or port ("[2001:DB8::1]:4711"
    -> "2001:db8::1"); "unknown" when it is no address (the core's rule)."""
    return _FULL_ADDRESSES.hop(hop)


class _Limit:
    """One limit a request meets: a store and the key function for it (None
    for a Limiter, which has no key)."""

    __slots__ = ("store", "key", "is_async")

    def __init__(self, store: Any, key: KeyFunction | None) -> None:
        self.store = store
        self.key = None if isinstance(store, cellrate.Limiter) else key
        self.is_async = inspect.iscoroutinefunction(getattr(store, "check", None))


_ROUTE = re.compile(r"^(?:([A-Za-z]+)\s+)?(/.*)$")


def _namespace(shared: Any) -> str:
    """The shared= directory (a path the core's table took), made (0o700) when absent."""
    path = os.fsdecode(shared)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        raise invalid("shared", f"shared: {path} is not a directory; a policy's shared= is the "
                                "directory of its limits' regions") from None
    except OSError as error:
        raise invalid("shared", f"shared: cannot make the directory {path}: "
                                f"{error.strerror}") from None
    return path


class _Opened:
    """A region a policy of this process made a store in (see Policy._store)."""

    __slots__ = ("store", "__weakref__")

    def __init__(self, store: Any) -> None:
        self.store = store


# The regions this process's policies have open, by real path: a second limit
# under one name would change the first one's region back and forth.
_OPENED: weakref.WeakValueDictionary[str, _Opened] = weakref.WeakValueDictionary()


def _same_limit(a: Any, b: Any) -> bool:
    return (a.emission_ns, a.tolerance_ns, a.algorithm) == (b.emission_ns, b.tolerance_ns,
                                                           b.algorithm)


class Policy:
    """Which limits a request meets and what its response carries.

    limit: a rate ("100/minute", 10; "100/day;10/hour" is one limit of each
        part; a part per month or year, "100/minute;1000000/month", is a
        calendar quota), a store, a (store, key function) pair, or a list of
        them: the limits every request meets. None: only `routes`.
    routes: {pattern: limit(s)}; a pattern is a path ("/login"), a glob
        ("/api/*"), optionally after a method ("POST /login"), or a compiled
        regular expression matched against the path. Every pattern that matches
        adds its limits to `limit`'s; all are decided as one (cellrate.check_all:
        a refusal by one spends nothing of the others).
    key: a function of the Request giving the key (str or bytes); default the
        client's address. `header(name)` keys by a header.
    cost: units a request spends: an int or a function of the Request.
    burst, max_cost, max_debt, shared: for limits given as a rate (as for
        KeyedLimiter: max_cost, the largest cost a request will have, refuses a
        burst that could never admit it and bounds what `charge` settles;
        max_debt, the most units a charge may leave a key owing beyond the
        limit, default the burst). With `shared` (a directory,
        e.g. "/dev/shm/myapp", made if absent), every such limit is one limit
        across all the processes that open it, each in its own region under
        `shared` by its name: `limit` at `<name>`, a route's at
        `<name> <pattern>`, the parts of "100/day;10/hour" at `...#<index>`
        after the first (percent-encoded; `name` None: "default"). A name
        opened with another limit than its region's changes the region's live
        (docs/design.md §4: what was used carries, every process follows); one process
        opening one name with two limits is an error naming `name`.
    sync: with `shared` on a disk path, seconds between this process's writes
        of each such region to its disk (as for KeyedLimiter: what a power
        loss may lose); an error naming `sync` without `shared`.
    tz: the IANA zone of the calendar quotas among the rates ("Europe/Berlin";
        None: UTC); with it, a part per day or week is a calendar quota too
        (from local midnight; "1000/24h" stays a rate). A zone for rates none
        of which is a calendar quota is an error naming `tz`.
    trusted_proxies: addresses or networks of the proxies in front of the app
        ("unix": the peer of a Unix-socket connection, which has no address);
        only a request whose peer is one of them has its `proxy_header` read,
        and the client is the rightmost hop that is not a trusted proxy.
    proxy_header: "X-Forwarded-For" (default) or "Forwarded"; only that one is
        read, since a proxy that appends to one passes the other on unchecked.
    ipv4_prefix, ipv6_prefix: the client's address as a key is its network of
        that many leading bits (default 32 and 64: an IPv4 address, an IPv6
        /64, which one client usually holds whole). An address in any
        spelling, IPv4-mapped or not, is one key.
    exempt_paths, exempt_methods, exempt: patterns (as for routes), methods,
        and a predicate of the Request: requests that meet no limit at all.
    status, body, content_type: the refusal, the same from every adapter; it
        always carries the header fields. Default: 429 and an RFC 9457 problem
        (application/problem+json) whose detail says when to retry; a `body`
        given is sent as it is (content_type default text/plain).
    name, legacy_headers: the policy name (None: the core's default) and the
        X-RateLimit-* trio (Decision.headers). admitted_headers: the headers on admitted
        responses too.
    concurrency: at most this many requests of one key (the client's address,
        or `key`) in flight at once, an int; or a cellrate.Concurrency, keyed by
        `key` when it has a capacity, else one limit for every request. A
        request holds its unit until its response ends (ASGI: after the last
        body message, or when the app returns on a disconnect; WSGI: when the
        response iterable is closed), streaming included. A request refused
        here spends nothing of the rate limits; its refusal has `status` and no
        RateLimit fields (no field counts work in flight). With `shared`, the
        int form lives at `shared.concurrency`.
    dry_run: decide and log refusals (logger "cellrate", WARNING), send the
        RateLimit headers (never Retry-After), refuse nothing.
    charge: a function of the Request and the Response returning what the
        request really cost (or None: as checked), applied when the response
        ends, streamed ones included (ASGI: once the application returns;
        WSGI: when the response is closed). The difference from what it was
        charged (`cost`, plus what the endpoint charged) is charged to each
        limit it met (`charge`: the key may go into debt, up to its store's
        max_debt) or given back (`refund`). A figure above a store's max_cost
        is settled as max_cost there; what was clipped (at max_cost or at the
        debt bound) is logged (logger "cellrate", WARNING). An admitted
        request's endpoint charges its own key with
        `scope["cellrate.charge"](units)` (ASGI) or `environ["cellrate.charge"]`
        (WSGI), which returns the tightest Decision. Needs stores that charge
        (Limiter, KeyedLimiter, RedisLimiter; not yet AsyncRedisLimiter).
    now: a function returning the time in seconds, passed to the stores as
        `now` (tests, simulations); None: each store reads its own clock.
    priorities: priority classes for limits given as a rate, {name: reserve}
        (as for KeyedLimiter: the share of the burst each class may not spend).
    priority: the class a request is decided in: a name of its limit's
        priorities, or a function of the Request returning one (None: no
        class, the whole burst). One limit per request: several limits decided
        as one take no class (an error naming `priority`).
    plans: plans of limits given as a rate, {name: rate or Limit} (as for
        KeyedLimiter: each a whole limit of the table; a rate takes the
        policy's burst). A plan's name is also its policy name in the
        RateLimit headers (1 to 31 printable ASCII characters).
    plan: the plan a request's key is decided under: a name of its limit's
        plans, or a function of the Request returning one (None: "default");
        under ASGI the function may be a coroutine function. An unknown name is
        an error naming `plan` (a server error: never another limit). The
        RateLimit-Policy field names the plan that decided, with its numbers.
        Read from a header the client sends, it lets the client choose among
        the plans: give a function that maps a verified credential (an API
        key looked up on the server) to a plan. One limit per request.
    """

    def __init__(
        self,
        limit: Limits | None = None,
        *,
        routes: Mapping[PathPattern, Limits] | None = None,
        key: KeyFunction | None = None,
        cost: int | Callable[[Request], int] = 1,
        burst: int | None = None,
        max_cost: int | None = None,
        max_debt: int | None = None,
        shared: str | None = None,
        trusted_proxies: Iterable[str] | str = (),
        proxy_header: str = "X-Forwarded-For",
        ipv4_prefix: int = 32,
        ipv6_prefix: int = 64,
        exempt_paths: Iterable[PathPattern] = (),
        exempt_methods: Iterable[str] = (),
        exempt: Callable[[Request], bool] | None = None,
        status: int = 429,
        body: str | bytes | None = None,
        content_type: str | None = None,
        name: str | None = None,
        legacy_headers: bool = False,
        admitted_headers: bool = False,
        dry_run: bool = False,
        now: Callable[[], float] | None = None,
        charge: Callable[[Request, Response], int | None] | None = None,
        concurrency: int | cellrate.Concurrency | None = None,
        priorities: Mapping[str, float] | None = None,
        priority: str | Callable[[Request], str | None] | None = None,
        tz: str | None = None,
        plans: Mapping[str, Any] | None = None,
        plan: str | Callable[[Request], Any] | None = None,
        sync: float | None = None,
    ) -> None:
        # the core's table checks every option (cellrate/options.h), the policy name
        # first among them: it names the regions too
        options = _check_options("Policy", {
            "limit": limit, "routes": routes, "key": key, "cost": cost, "burst": burst,
            "max_cost": max_cost, "max_debt": max_debt, "shared": shared,
            "trusted_proxies": trusted_proxies, "proxy_header": proxy_header,
            "ipv4_prefix": ipv4_prefix, "ipv6_prefix": ipv6_prefix,
            "exempt_paths": exempt_paths, "exempt_methods": exempt_methods, "exempt": exempt,
            "status": status, "body": body, "content_type": content_type, "name": name,
            "legacy_headers": legacy_headers, "admitted_headers": admitted_headers,
            "dry_run": dry_run, "now": now, "charge": charge, "concurrency": concurrency,
            "priority": priority, "priorities": priorities, "tz": tz, "plan": plan,
            "plans": plans, "sync": sync})
        # "unix": a peer without an address (a Unix socket) is the trusted proxy
        self.trusted, self.trust_unix = _trusted(trusted_proxies)
        self._warned_unknown = False
        self.ipv4_prefix: int = options["ipv4_prefix"]
        self.ipv6_prefix: int = options["ipv6_prefix"]
        # the client's address as a key, behind the trusted proxies: the core's
        # rules, each address's answer kept (a known address costs a lookup)
        self._clients = _ClientKeys(
            self.ipv4_prefix, self.ipv6_prefix, self.trusted,
            options["proxy_header"].lower() == "forwarded")
        self._peer = functools.lru_cache(ADDRESS_CACHE_SIZE)(self._clients.peer)
        self._address_key = functools.lru_cache(ADDRESS_CACHE_SIZE)(self._clients.key)
        if key is None and not self.trusted and not self.trust_unix:
            key = self._peer_key  # the default key, without the proxy logic it does not need
        self.key: KeyFunction = key or client_address
        self.cost = options["cost"]
        self._burst = burst
        self._max = {name: value for name, value in (("max_cost", max_cost), ("max_debt", max_debt),
                                                     ("priorities", priorities), ("plans", plans),
                                                     ("sync", sync))
                     if value is not None}  # for the stores made from a rate
        self.priority = priority
        self.plan = plan
        if plans is not None and isinstance(plans, Mapping):
            for plan_name in plans:  # each names the RateLimit headers of its decisions
                if isinstance(plan_name, str):
                    check_policy_name(plan_name)
        self._from_rates = 0  # limits this policy made from a rate
        self._opened: list[_Opened] = []
        # the stores made from a rate, by route pattern (None: `limit`), for reconfigure
        self._rated: dict[Any, list[Any]] = {}
        self._shared = shared  # made a directory when a limit first needs it
        self._tz = tz  # the calendar quotas' zone
        self._calendars = 0  # calendar quotas this policy made from a rate string
        base = "default" if name is None else name
        self._base = base
        self._concurrency_shared = False  # concurrency=N made in the shared= directory

        self.limits = self._limits(limit, "limit", base, None)
        self.routes: list[tuple[Callable[[str, str], bool], list[_Limit]]] = []
        self.route_patterns: list[str] = []  # each route's pattern as given, for metrics' labels
        if routes is not None and not isinstance(routes, Mapping):
            raise invalid_type("routes", "routes must be a mapping {pattern: limit(s)}")
        for pattern, route_limit in (routes or {}).items():
            text = pattern.pattern if isinstance(pattern, re.Pattern) else str(pattern)
            self.routes.append((_matcher(pattern, "routes"),
                                self._limits(route_limit, "routes", f"{base} {text}", pattern)))
            self.route_patterns.append(text)
        cellrate._cellrate._check_zoned(tz is not None, self._calendars)
        self.concurrency = self._concurrency(concurrency, shared)
        if not self.limits and not self.routes and self.concurrency is None:
            raise invalid("limit", "limit: give a limit, routes, or both")
        for param, value in (("burst", burst), ("max_cost", max_cost), ("max_debt", max_debt),
                             ("priorities", priorities), ("plans", plans), ("shared", shared),
                             ("sync", sync)):
            if value is not None and not self._from_rates and not (
                    param == "shared" and self._concurrency_shared):
                raise invalid(param, f"{param} applies to limits given as a rate; no limit is: "
                                     "give it to the store you made")
        every = self.limits + [one for _, route in self.routes for one in route]
        self.check_all = _check_all_for(every) if len(every) > 1 else None
        if priority is not None:
            _check_priority_items(len(every))  # several limits as one take no class
        if plan is not None:  # several limits as one take no plan; plans are a keyed limit's
            _check_plan_items(len(every), all(one.key is not None for one in every), True)

        self.proxy_header: str = options["proxy_header"]
        self.exempt_paths = [_matcher(pattern, "exempt_paths")
                             for pattern in _items(exempt_paths, "exempt_paths")]
        if isinstance(exempt_methods, str):
            exempt_methods = [exempt_methods]
        methods = _items(exempt_methods, "exempt_methods")
        if not all(isinstance(method, str) for method in methods):
            raise invalid_type("exempt_methods", "exempt_methods must be method names ('OPTIONS')")
        self.exempt_methods = _methods(method.upper() for method in methods)
        self.exempt = exempt

        self.status: int = options["status"]
        self.status_line = f"{self.status} {_reason(self.status)}"
        if isinstance(body, str):
            body = _encoded(body, "body", "utf-8")
        self.body = None if body is None else bytes(body)
        # the problem document up to its detail (RFC 9457), made once
        self._problem_head = json.dumps(
            {"type": "about:blank", "title": _reason(self.status), "status": self.status},
            separators=(",", ":"))[:-1].encode("ascii") + b',"detail":"'
        if content_type is None:
            content_type = PROBLEM_TYPE if body is None else "text/plain; charset=utf-8"
        _encoded(content_type, "content_type", "latin-1")
        self.content_type = content_type
        self.name = name
        self.legacy_headers: bool = options["legacy_headers"]
        self.admitted_headers: bool = options["admitted_headers"]
        self.dry_run: bool = options["dry_run"]
        self.now = now
        # an endpoint may charge its request when every store can, synchronously (the
        # settling path calls charge and refund as functions)
        self.charges = all(callable(getattr(one.store, "charge", None))
                           and not inspect.iscoroutinefunction(one.store.charge) for one in every)
        if charge is not None and not self.charges:
            raise invalid_type("charge", "charge: every limit's store must charge and refund "
                                         "(Limiter, KeyedLimiter, RedisLimiter); this store "
                                         "cannot yet")
        self.charge = charge

    def require_stores(self, asynchronous: bool) -> None:
        """Refuses the stores an adapter cannot call: under ASGI (`asynchronous`)
        a synchronous store other than the in-process ones, whose check() would
        block the event loop; under WSGI an async store."""
        every = self.limits + [one for _, route in self.routes for one in route]
        if asynchronous:
            for one in every:
                if not one.is_async and not isinstance(
                    one.store, (cellrate.Limiter, cellrate.KeyedLimiter)
                ):
                    raise invalid_type(
                        "limit",
                        f"limit: {type(one.store).__name__}.check() would block the event loop; "
                        "give a store whose check() is a coroutine function (AsyncRedisLimiter)")
        elif any(one.is_async for one in every):
            raise invalid_type("limit", "limit: an async store (AsyncRedisLimiter) needs the ASGI "
                               "middleware; under WSGI give its synchronous twin (RedisLimiter)")

    def require_no_charge(self, adapter: str) -> None:
        """Refuses `charge=` in an adapter that never sees its responses end
        (a route's dependency or decorator): it would settle nothing."""
        if self.charge is not None:
            raise invalid("charge", f"charge: {adapter} does not see its responses end; give "
                                    "charge to cellrate.asgi or cellrate.wsgi's "
                                    "RateLimitMiddleware")

    # -- configuration --------------------------------------------------------

    def _store(self, rate: Any, param: str, name: str, calendar: bool = False) -> Any:
        if isinstance(rate, (str, int, float)) and not isinstance(rate, bool):
            self._from_rates += 1
            self._calendars += calendar
            options = part_options(calendar, self._tz, self._burst)
            try:
                if self._shared is None:
                    return cellrate.KeyedLimiter(rate, **options, **self._max)
                return self._shared_store(rate, name, options)
            except cellrate.CellrateError as error:
                raise _under(param, error) from None
        if not callable(getattr(rate, "check", None)):
            raise invalid_type(param, f"{param}: expected a rate such as '100/minute', a store "
                               f"with check(), or a (store, key function) pair, not "
                               f"{type(rate).__name__}")
        return rate

    def _concurrency(self, spec: Any, shared: str | None) -> cellrate.Concurrency | None:
        if spec is None or isinstance(spec, cellrate.Concurrency):
            return spec
        if isinstance(spec, bool) or not isinstance(spec, int):
            raise invalid_type("concurrency", "concurrency must be an int (requests of one key "
                                              "in flight) or a cellrate.Concurrency")
        self._concurrency_shared = shared is not None
        region = None
        if shared is not None:
            self._shared = _namespace(shared)
            region = os.path.join(self._shared, urllib.parse.quote(f"{self._base} concurrency",
                                                                   safe=" #"))
        try:
            return cellrate.Concurrency(spec, capacity=CONCURRENCY_KEYS, shared=region)
        except cellrate.CellrateError as error:
            if getattr(error, "param", None) != "limit":
                raise
            raise invalid("concurrency", f"concurrency: {error}") from None

    def _shared_store(self, rate: Any, name: str, options: dict[str, Any]) -> Any:
        """The store of limit `name` in the shared= directory: its region, which
        this process may already have open, with the same limit only."""
        assert self._shared is not None
        self._shared = _namespace(self._shared)
        path = os.path.join(self._shared, urllib.parse.quote(name, safe=" #"))
        real = os.path.realpath(path)
        opened = _OPENED.get(real)
        if opened is not None and not _same_limit(opened.store, cellrate.Limit(rate, **options)):
            raise invalid("name", f"name: {name!r} under {self._shared} is already a limit of "
                                  f"this process, {opened.store!r}; give each limit its own name")
        store = cellrate.KeyedLimiter(rate, **options, shared=path, **self._max)
        self._opened.append(_Opened(store))
        _OPENED[real] = self._opened[-1]
        return store

    def _limits(self, spec: Any, param: str, name: str, route: Any) -> list[_Limit]:
        if spec is None:
            return []
        items: Sequence[Any] = spec if isinstance(spec, list) else [spec]
        try:  # "100/day;10/hour", "100/minute;1000000/month": a limit of each part
            parts = [part for item in items for part in split_rates(item, self._tz is not None)]
        except cellrate.CellrateError as error:
            raise _under(param, error) from None
        limits = []
        for index, (item, calendar) in enumerate(parts):
            where = name if index == 0 else f"{name}#{index}"
            if isinstance(item, tuple):
                if len(item) != 2 or not callable(item[1]):
                    raise invalid_type(param, f"{param}: a pair is (store, key function)")
                given, key = item
            else:
                given, key = item, self.key
            limits.append(_Limit(self._store(given, param, where, calendar), key))
            if limits[-1].store is not given:  # made from a rate: reconfigure changes it
                self._rated.setdefault(route, []).append(limits[-1].store)
        return limits

    def reconfigure(self, limit: str | float, *, route: PathPattern | None = None,
                    burst: int | None = None) -> None:
        """Changes a limit this policy made from a rate, live (docs/design.md §4): what
        each key used carries, and under shared= every process follows from
        its next decision. route: the pattern as given to `routes` (None: the
        policy's `limit`). limit: a rate, "100/day;10/hour" with as many parts
        as before. burst: None keeps the policy's."""
        stores = self._rated.get(route)
        if not stores:
            raise invalid("route", f"route: {route!r} has no limit given as a rate in this policy")
        try:
            parts = split_rates(limit, self._tz is not None)
        except cellrate.CellrateError as error:
            raise _under("limit", error) from None
        if len(parts) != len(stores):
            raise invalid("limit", f"limit: {len(parts)} part(s) for a limit of {len(stores)}; a "
                                   "change keeps their number")
        for store, (part, calendar) in zip(stores, parts):
            options = part_options(calendar, self._tz, self._burst if burst is None else burst)
            try:
                store.reconfigure(part, **options)
            except cellrate.CellrateError as error:
                raise _under("limit", error) from None

    # -- per request ----------------------------------------------------------

    def client_of(self, request: Request) -> str:
        """The client's address as a key (see Request): the peer's, unless the
        peer is a trusted proxy; then that of the rightmost hop of
        `proxy_header` that is not a trusted proxy (or of the leftmost hop,
        when every hop is trusted); the core's rules (cellrate/web.h)."""
        key, trusted = self._peer(request.peer())
        if not (trusted or (self.trust_unix and key == NO_ADDRESS)):
            return key if key != NO_ADDRESS else self._no_address()
        value = request.header(self.proxy_header)
        client = None if value is None else self._clients.client(value)
        return key if client is None else client  # None: no hop, the peer is the client

    def _peer_key(self, request: Request) -> str:
        """The peer's key as the client's (no trusted proxy in between)."""
        key = self._address_key(request.peer())
        return key if key != NO_ADDRESS else self._no_address()

    def _no_address(self) -> str:
        if not self._warned_unknown:
            self._warned_unknown = True
            logger.warning("requests arrive without a client address (a Unix socket?): they "
                           "share one key; behind a proxy on a Unix socket, pass "
                           "trusted_proxies=['unix']")
        return NO_ADDRESS

    def limits_for(self, request: Request) -> list[_Limit] | None:
        """The limits `request` meets, or None when it is exempt."""
        method, path = request.method, request.path
        if method in self.exempt_methods:
            return None
        for matches in self.exempt_paths:
            if matches(method, path):
                return None
        if self.exempt is not None and self.exempt(request):
            return None
        if not self.routes:
            return self.limits
        limits = list(self.limits)
        for matches, route_limits in self.routes:
            if matches(method, path):
                limits.extend(route_limits)
        return limits if limits or self.concurrency is not None else None

    def hold(self, request: Request) -> tuple[bool, cellrate.Slot | None]:
        """(refuse, slot): the request's unit in flight (slot None: no
        concurrency, or a dry run that would have refused)."""
        concurrency = self.concurrency
        if concurrency is None:
            return False, None
        slot = concurrency.try_acquire(None if concurrency.capacity is None
                                       else self.key(request))
        if slot is not None:
            return False, slot
        if self.dry_run:
            logger.warning("dry run: would refuse %s %s (key %r, %d in flight)", request.method,
                           request.path, self.key(request), concurrency.limit)
            return False, None
        return True, None

    def in_flight_refusal(self) -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, header fields, body) of a refusal by `concurrency`."""
        body = self.body
        if body is None:
            body = self._problem_head + b'Too many requests in flight; retry when one ends."}'
        return self.status, [("Content-Type", self.content_type),
                             ("Content-Length", str(len(body)))], body

    def cost_of(self, request: Request) -> int:
        cost = self.cost
        return cost if cost.__class__ is int else cost(request)  # type: ignore[operator]

    def plan_of(self, request: Request) -> Any:
        """The plan `request` is decided under (None: "default"), or an
        awaitable of it from a coroutine function (decide_async awaits it)."""
        plan = self.plan
        return plan if plan is None or plan.__class__ is str else plan(request)  # type: ignore

    def decide(self, limits: list[_Limit], request: Request, plan: Any = _ASK) -> Any:
        """The Decision for `request` against `limits` (synchronous stores);
        `plan`: its plan, when decide_async found it."""
        cost = self.cost
        if cost.__class__ is not int:
            cost = cost(request)  # type: ignore[operator]
        if len(limits) > 1:
            return self._check_all(limits, request, cost)
        one = limits[0]
        now = {} if self.now is None else {"now": self.now()}
        priority = self.priority
        if priority is not None:
            now["priority"] = priority if priority.__class__ is str else priority(request)
        if self.plan is not None:
            if plan is _ASK:
                plan = self.plan_of(request)
                if inspect.isawaitable(plan):
                    plan.close()  # type: ignore[attr-defined]
                    raise invalid_type("plan", "plan: a coroutine function needs an asynchronous "
                                               "adapter (ASGI); give a plain function")
            if plan is not None:
                now["plan"] = plan
                request._plan = plan
        if one.key is None:
            decision = one.store.check(cost, **now)
        else:
            decision = one.store.check(one.key(request), cost, **now)
        if self.dry_run and not decision.allowed:
            # let through: counted as a would-be refusal (stores that count)
            would_refuse = getattr(one.store, "_would_refuse", None)
            if would_refuse is not None:
                would_refuse(cost, now.get("plan"), now.get("priority"))
        return decision

    def _check_all(self, limits: list[_Limit], request: Request, cost: int) -> Any:
        items = [one.store if one.key is None else (one.store, one.key(request)) for one in limits]
        assert self.check_all is not None
        now = {} if self.now is None else {"now": self.now()}
        if self.dry_run and self.check_all is cellrate.check_all:
            now["_dry_run"] = True  # the refusal let through counts as would_refuse
        return self.check_all(items, cost, **now)

    async def decide_async(self, limits: list[_Limit], request: Request) -> Any:
        """As decide(), awaiting async stores (and a coroutine function's plan)."""
        one = limits[0]
        plan = None
        if self.plan is not None:
            plan = self.plan_of(request)
            if inspect.isawaitable(plan):
                plan = await plan
        if not one.is_async:
            return self.decide(limits, request, plan)
        cost = self.cost_of(request)
        if len(limits) > 1:
            return await self._check_all(limits, request, cost)
        key = one.key(request)  # type: ignore[misc]  # async stores are keyed
        extra = {} if self.now is None else {"now": self.now()}
        priority = self.priority
        if priority is not None:
            extra["priority"] = priority if priority.__class__ is str else priority(request)
        if plan is not None:
            extra["plan"] = plan
            request._plan = plan
        return await one.store.check(key, cost, **extra)

    def charger(self, limits: list[_Limit], request: Request) -> _Charger:
        """The settling of one admitted request: its endpoint's `charge(units)`,
        and `end(response)` when the response has ended."""
        return _Charger(self, limits, request)

    def outcome(self, decision: Any, request: Request) -> tuple[bool, list[tuple[str, str]]]:
        """(refuse, header fields) for `decision`."""
        # the plan that decided names the policy, with its numbers (the decision's)
        name = self.name if request._plan is None else request._plan
        if decision.allowed:
            if not self.admitted_headers:
                return False, []
            return False, list(decision.headers(name, legacy=self.legacy_headers).items())
        fields = decision.headers(name, legacy=self.legacy_headers)
        if self.dry_run:
            logger.warning("dry run: would refuse %s %s (key %r, retry after %.3f s)",
                           request.method, request.path, self.key(request), decision.retry_after)
            # the core leaves out what would tell the client of a 200 to back off
            return False, _dry_run_fields(fields)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("refused %s %s (retry after %.3f s)", request.method, request.path,
                         decision.retry_after)
        return True, list(fields.items())


    def refusal(self, fields: list[tuple[str, str]]) -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, header fields, body) of the refusal that `outcome` decided,
        one for every adapter: Content-Type, Content-Length, then `fields`."""
        body = self.body
        if body is None:
            retry = next((value for name, value in fields if name == "Retry-After"), None)
            detail = (b"The request exceeds the rate limit; retry after " + retry.encode() + b" s."
                      if retry is not None else b"The request costs more than the rate limit "
                      b"can ever admit.")
            body = self._problem_head + detail + b'"}'
        return self.status, [("Content-Type", self.content_type),
                             ("Content-Length", str(len(body)))] + fields, body


class _Charger:
    """Settles one request: what it was charged so far (its `cost` first),
    charged more, or given back, to every limit it met under its keys, by the
    core's settlement (cellrate/web.h: never more than a limit's max_cost; a
    figure that is no count settles nothing); what was clipped, and a figure
    that is no count, is logged, never raised: the response has gone."""

    __slots__ = ("policy", "limits", "_items", "_charged", "request")

    def __init__(self, policy: Policy, limits: list[_Limit], request: Request) -> None:
        self.policy = policy
        self.request = request
        self.limits = limits
        self._items: list[tuple[Any, tuple[Any, ...]]] | None = None
        self._charged: list[int] | None = None  # units each limit counts of this request

    @property
    def items(self) -> list[tuple[Any, tuple[Any, ...]]]:
        """(store, key arguments) of each limit: the keys worked out once, when first needed."""
        if self._items is None:
            self._items = [(one.store, () if one.key is None else (one.key(self.request),))
                           for one in self.limits]
        return self._items

    @property
    def charged(self) -> list[int]:
        """Units charged so far to each limit: the request's cost, then what its
        endpoint charged (at most the limit's max_cost)."""
        if self._charged is None:
            self._charged = [self.policy.cost_of(self.request)] * len(self.items)
        return self._charged

    def __call__(self, units: int) -> Any:
        """Charges `units` more now (the key may go into debt); the tightest
        Decision: the refused one with the longest retry_after, else the one
        with the fewest remaining."""
        if isinstance(units, bool) or not isinstance(units, int):
            raise invalid_type("cost", "cost must be an integer >= 0")
        if units < 0:
            raise invalid("cost", "cost must be an integer >= 0")
        now = {} if self.policy.now is None else {"now": self.policy.now()}
        decisions = [self._settle(i, self.charged[i] + units, now, "charged", True)
                     for i in range(len(self.items))]
        return min(decisions, key=lambda d: (d.allowed, -d.retry_after, d.remaining))

    def end(self, response: Response) -> None:
        """Applies the policy's `charge` to the ended response: the difference
        from what was charged, charged or given back."""
        charge = self.policy.charge
        if charge is None:
            return
        actual = charge(self.request, response)
        if actual is None:
            return
        now = {} if self.policy.now is None else {"now": self.policy.now()}
        try:
            for i in range(len(self.items)):
                self._settle(i, actual, now, "reported", False)
        except cellrate.InvalidArgument as error:
            if error.param != "charge":
                raise
            # no count (the first limit found it so: nothing settled anywhere)
            logger.warning("%s %s: %s", self.request.method, self.request.path, error)

    def _settle(self, index: int, count: Any, now: dict[str, float], how: str,
                decide: bool) -> Any:
        """Brings what limit `index` counts of this request to `count` units, at most
        its store's max_cost (more is no cost of one request: a bad figure); with
        `decide`, returns the store's Decision (a probe's when nothing more is
        charged). A figure that is no count raises InvalidArgument naming charge,
        before anything is settled."""
        store, key = self.items[index]
        request = self.request
        most = getattr(store, "max_cost", None)
        total, units, clipped = _settle(self.charged[index], count, most)
        if clipped:
            logger.warning("charge: %s %s %s %s units, above max_cost %d of %r: settled as %d",
                           request.method, request.path, how, count, most, store, most)
        self.charged[index] = total
        if request._plan is not None:  # settled under the plan that decided
            now = {**now, "plan": request._plan}
        if units < 0:
            store.refund(*key, -units, **now)
            units = 0
        if units == 0 and not decide:
            return None
        decision = store.charge(*key, units, **now)
        if decision.clipped:
            logger.warning("charge: %s %s: %d units more met the debt bound of %r (key %r): "
                           "committed up to it", request.method, request.path, units, store,
                           key[0] if key else None)
        return decision


def _under(param: str, error: Exception) -> Exception:
    """A bad rate (the core's words) under the option that holds it; any other
    error (burst, shared: options of their own) as it is."""
    if getattr(error, "param", None) != "rate":
        return error
    return (invalid if isinstance(error, ValueError) else invalid_type)(param, f"{param}: {error}")


def _check_all_for(limits: list[_Limit]) -> Callable[..., Any]:
    """The function that decides `limits` as one: the `check_all` (async stores:
    `check_all_async`) of their stores' module, so `cellrate.check_all` for
    in-process and shared stores and `cellrate.redis.check_all` for Redis ones."""
    kinds = {(type(one.store).__module__, one.is_async) for one in limits}
    if len(kinds) != 1:
        raise invalid_type("limit", "limit: several limits on one request are decided as one by "
                           "their stores' check_all: give stores of one kind (in-process and "
                           "shared, or Redis ones of one client, all sync or all async)")
    module, is_async = kinds.pop()
    name = "check_all_async" if is_async else "check_all"
    function = getattr(sys.modules.get(module), name, None)
    if not callable(function):
        raise invalid_type("limit", f"limit: several limits on one request need "
                           f"{module}.{name}(), which decides them as one")
    return function  # type: ignore[no-any-return]


def _items(values: Any, param: str) -> list[Any]:
    try:
        return list(values)
    except TypeError:
        raise invalid_type(param, f"{param} must be a list, not {type(values).__name__}") from None


def _encoded(text: str, param: str, encoding: str) -> bytes:
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as error:
        raise invalid(param, f"{param} must be {encoding} text: {error.reason} at "
                             f"{error.start} ({text[error.start:error.end]!r})") from None


def _reason(status: int) -> str:
    """The reason phrase of a WSGI status line: the registered one, or the class's."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Client Error" if status < 500 else "Server Error"


def _matcher(pattern: Any, param: str) -> Callable[[str, str], bool]:
    """A test of (method, path) for a route or exemption pattern."""
    if isinstance(pattern, re.Pattern):
        regex = pattern
        return lambda method, path: regex.fullmatch(path) is not None
    if not isinstance(pattern, str):
        raise invalid_type(param, f"{param}: a pattern is a path string or a compiled "
                           "regular expression")
    found = _ROUTE.match(pattern.strip())
    if found is None:
        raise invalid(param, f"{param}: {pattern!r} is not a path ('/login', '/api/*', "
                             "'POST /login')")
    path_regex = re.compile(fnmatch.translate(found.group(2)))
    if not found.group(1):
        return lambda _method, path: path_regex.match(path) is not None
    methods = _methods([found.group(1).upper()])
    return lambda method, path: method in methods and path_regex.match(path) is not None


def _methods(methods: Iterable[str]) -> frozenset[str]:
    """The request methods that `methods` (upper case) cover: GET covers HEAD,
    which every framework answers with the GET view."""
    covered = set(methods)
    if "GET" in covered:
        covered.add("HEAD")
    return frozenset(covered)
