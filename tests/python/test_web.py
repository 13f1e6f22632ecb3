"""Web integrations through the frameworks' own test clients: the ASGI and WSGI
middleware (Starlette, FastAPI, Flask), the FastAPI dependency and the Flask
decorator, all on an explicit clock: exact 200/429 counts, header values equal
to the decision (worked out here from the decision, not by the formatter),
Retry-After never 0, trusted proxies, exemptions, dry run, refusals.
"""

import asyncio
import contextlib
import json
import logging
import math
import os
import re
import subprocess
import sys
import types
import warnings

import pytest

import cellrate
from cellrate.web import Policy, Request, header

warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")

starlette = pytest.importorskip("starlette", reason="make test installs starlette")
import django  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.test import Client as DjangoClient  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.urls import path as url  # noqa: E402
from fastapi import Depends, FastAPI  # noqa: E402
from flask import Flask  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.responses import PlainTextResponse  # noqa: E402
from starlette.routing import Route, WebSocketRoute  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

if not settings.configured:  # the settings of one Django project; each face overrides its own
    settings.configure(ALLOWED_HOSTS=["*"], SECRET_KEY="tests", MIDDLEWARE=[], ROOT_URLCONF=None)
    django.setup()

import cellrate.asgi  # noqa: E402
import cellrate.django  # noqa: E402
import cellrate.fastapi  # noqa: E402
import cellrate.flask  # noqa: E402
import cellrate.wsgi  # noqa: E402

NS = 1_000_000_000
PATHS = ["/", "/login", "/admin/status", "/health"]


class Clock:
    """An explicit clock: the `now=` of the policy."""

    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


# -- one face per integration -------------------------------------------------


class Face:
    """An app limited by one integration, and a client for it: request()
    returns (status, {lower-case header: value}, body)."""

    def __init__(self, limit, **options):
        self.limit = limit
        self.options = options
        self.clients = {}

    def request(self, method="GET", path="/", headers=None, client="192.0.2.1"):
        raise NotImplementedError


async def _ok(request):
    return PlainTextResponse("ok")


class StarletteMiddleware(Face):
    def __init__(self, limit, **options):
        super().__init__(limit, **options)
        inner = Starlette(routes=[Route(path, _ok, methods=["GET", "POST", "OPTIONS"])
                                  for path in PATHS])
        self.app = cellrate.asgi.RateLimitMiddleware(inner, limit, **options)

    def request(self, method="GET", path="/", headers=None, client="192.0.2.1"):
        if client not in self.clients:
            self.clients[client] = TestClient(self.app, client=(client, 40000))
        response = self.clients[client].request(method, path, headers=headers or {})
        return response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content


class FastAPIMiddleware(StarletteMiddleware):
    def __init__(self, limit, **options):
        Face.__init__(self, limit, **options)
        app = FastAPI()
        for path in PATHS:
            app.add_api_route(path, _fastapi_ok, methods=["GET", "POST", "OPTIONS"])
        app.add_middleware(cellrate.asgi.RateLimitMiddleware, limit=limit, **options)
        self.app = app


async def _fastapi_ok():
    return "ok"  # FastAPI builds the response, with what dependencies set on it


class FastAPIDependency(StarletteMiddleware):
    def __init__(self, limit, **options):
        Face.__init__(self, limit, **options)
        app = FastAPI(dependencies=[Depends(cellrate.fastapi.RateLimit(limit, **options))])
        for path in PATHS:
            app.add_api_route(path, _fastapi_ok, methods=["GET", "POST", "OPTIONS"])
        self.app = app


class FlaskFace(Face):
    def request(self, method="GET", path="/", headers=None, client="192.0.2.1"):
        # REQUEST_METHOD as sent: the test client would upper-case it
        response = self.client.open(path, method=method, headers=headers or {},
                                    environ_base={"REMOTE_ADDR": client},
                                    environ_overrides={"REQUEST_METHOD": method})
        return response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.data


class FlaskMiddleware(FlaskFace):
    def __init__(self, limit, **options):
        super().__init__(limit, **options)
        app = Flask(__name__)
        for path in PATHS:
            app.add_url_rule(path, path, lambda: "ok", methods=["GET", "POST", "OPTIONS"])
        app.wsgi_app = cellrate.wsgi.RateLimitMiddleware(app.wsgi_app, limit, **options)
        self.client = app.test_client()


class FlaskDecorator(FlaskFace):
    def __init__(self, limit, **options):
        super().__init__(limit, **options)
        app = Flask(__name__)
        limited = cellrate.flask.RateLimit(limit, **options)
        for path in PATHS:
            app.add_url_rule(path, path, limited(lambda: "ok"), methods=["GET", "POST", "OPTIONS"])
        self.client = app.test_client()


def _django_ok(request, *args):
    return HttpResponse("ok")


async def _django_ok_async(request, *args):
    return HttpResponse("ok")


class DjangoFace(Face):
    """A Django project of its own: its URLs, and its MIDDLEWARE and CELLRATE
    settings while Django loads the middleware."""

    asynchronous = False
    middleware = False

    def __init__(self, limit, **options):
        super().__init__(limit, **options)
        view = _django_ok_async if self.asynchronous else _django_ok
        if not self.middleware:
            view = cellrate.django.limit(limit, **options)(view)
        self.urls = types.ModuleType(f"urls_{id(self)}")
        self.urls.urlpatterns = [url(p.lstrip("/"), view) for p in PATHS]
        project = dict(MIDDLEWARE=["cellrate.django.RateLimitMiddleware"] if self.middleware else [],
                       CELLRATE=dict(options, limit=limit), ROOT_URLCONF=self.urls)
        with override_settings(**project):
            self.client = self.client_of()

    def client_of(self):
        client = DjangoClient()
        client.handler.load_middleware()
        return client

    def request(self, method="GET", path="/", headers=None, client="192.0.2.1"):
        with override_settings(ROOT_URLCONF=self.urls):
            response = self.client.generic(method, path, headers=headers, REMOTE_ADDR=client)
        return response.status_code, {k.lower(): v for k, v in response.items()}, response.content


class DjangoDecorator(DjangoFace):
    pass


class DjangoMiddleware(DjangoFace):
    middleware = True


class DjangoASGI(DjangoFace):
    """Django's ASGI handler (async views, the middleware chain async) under
    Starlette's test client, which sets the client address."""

    asynchronous = True

    def client_of(self):
        return ASGIHandler()

    def request(self, method="GET", path="/", headers=None, client="192.0.2.1"):
        if client not in self.clients:
            self.clients[client] = TestClient(self.client, client=(client, 40000))
        with override_settings(ROOT_URLCONF=self.urls):
            response = self.clients[client].request(method, path, headers=headers or {})
        return response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content


class DjangoASGIDecorator(DjangoASGI):
    pass


class DjangoASGIMiddleware(DjangoASGI):
    middleware = True


FACES = [StarletteMiddleware, FastAPIMiddleware, FastAPIDependency, FlaskMiddleware, FlaskDecorator,
         DjangoDecorator, DjangoMiddleware, DjangoASGIDecorator, DjangoASGIMiddleware]


@pytest.fixture(params=FACES, ids=lambda face: face.__name__)
def face(request):
    return request.param


# -- the expected fields, worked out from a decision ----------------------------


def ceil_seconds(seconds):
    return -(-round(seconds * NS) // NS)


def expected_headers(decision, window_ns, name="default", legacy=False, refused_fields=True):
    fields = {
        "ratelimit-policy": f'"{name}";q={decision.limit};w={-(-window_ns // NS)}',
        "ratelimit": f'"{name}";r={decision.remaining};t={ceil_seconds(decision.reset_after)}',
    }
    if not decision.allowed and math.isfinite(decision.retry_after) and refused_fields:
        fields["retry-after"] = str(max(1, ceil_seconds(decision.retry_after)))
    if legacy:
        fields["x-ratelimit-limit"] = fields["ratelimit-policy"].split("q=")[1].split(";")[0]
        fields["x-ratelimit-remaining"] = str(decision.remaining)
        fields["x-ratelimit-reset"] = str(ceil_seconds(decision.reset_after))
    return fields


def rate_fields(headers):
    return {k: v for k, v in headers.items() if k.startswith(("ratelimit", "retry-after", "x-ratelimit"))}


def window_ns(rate_per_s, burst):
    return burst * round(NS / rate_per_s)


# -- counts and headers -----------------------------------------------------------


def test_exact_counts_at_a_known_burst(face):
    clock = Clock()
    app = face("1/hour", burst=5, now=clock)
    statuses = [app.request()[0] for _ in range(12)]
    assert statuses == [200] * 5 + [429] * 7
    # another client has its own burst
    assert [app.request(client="192.0.2.2")[0] for _ in range(6)] == [200] * 5 + [429]
    # one emission interval later, exactly one more
    clock.t += 3600
    assert [app.request()[0] for _ in range(3)] == [200, 429, 429]


def test_headers_equal_the_decision(face):
    """Every response's fields against a twin limiter fed the same requests."""
    clock = Clock()
    app = face("10/minute", burst=4, now=clock, admitted_headers=True, legacy_headers=True,
               name="api")
    twin = cellrate.KeyedLimiter("10/minute", burst=4)
    seen_refusals = 0
    for step in range(40):
        clock.t += [0.0, 0.05, 1.7, 6.0, 0.3][step % 5]
        status, headers, _ = app.request()
        decision = twin.check("192.0.2.1", now=clock.t)
        assert status == (200 if decision.allowed else 429), step
        assert rate_fields(headers) == expected_headers(decision, window_ns(10 / 60, 4), "api",
                                                        legacy=True), step
        assert decision.window == pytest.approx(24.0)
        if status == 429:
            seen_refusals += 1
            assert int(headers["retry-after"]) >= 1
    assert seen_refusals >= 5


def test_retry_after_is_never_zero(face):
    clock = Clock()
    app = face("10/second", burst=1, now=clock)
    assert app.request()[0] == 200
    clock.t += 0.0999  # 0.1 ms short of the next unit
    status, headers, _ = app.request()
    assert status == 429
    assert headers["retry-after"] == "1"
    assert rate_fields(headers)["ratelimit"] == '"default";r=0;t=1'


def test_unfittable_cost_gets_no_retry_after(face):
    app = face("1/hour", burst=2, cost=3, now=Clock())
    status, headers, _ = app.request()
    assert status == 429
    assert "retry-after" not in headers
    assert headers["ratelimit-policy"] == '"default";q=2;w=7200'


def test_headers_on_admitted_responses_only_on_request(face):
    app = face("1/hour", burst=3, now=Clock())
    status, headers, _ = app.request()
    assert status == 200 and rate_fields(headers) == {}
    app = face("1/hour", burst=3, now=Clock(), admitted_headers=True)
    status, headers, _ = app.request()
    assert status == 200
    assert rate_fields(headers) == {"ratelimit-policy": '"default";q=3;w=10800',
                                    "ratelimit": '"default";r=2;t=3600'}


PROBLEM = (b'{"type":"about:blank","title":"Too Many Requests","status":429,'
           b'"detail":"The request exceeds the rate limit; retry after 3600 s."}')


@pytest.mark.parametrize("options, body, content_type", [
    ({}, PROBLEM, "application/problem+json"),
    (dict(status=503, body="later"), b"later", "text/plain; charset=utf-8"),
    (dict(body=b"{}", content_type="application/json"), b"{}", "application/json"),
], ids=["default", "text", "json"])
def test_one_refusal_from_every_adapter(options, body, content_type):
    """Every adapter answers a refusal with the same status, header fields and
    bytes: by default an RFC 9457 problem saying when to retry, without the
    client's key; else the policy's status, body and content_type."""
    answers = {}
    for face_type in FACES:
        app = face_type("1/hour", burst=1, now=Clock(), **options)
        app.request()
        answers[face_type.__name__] = app.request()
    status, headers, sent = answers["StarletteMiddleware"]
    assert (status, headers["content-type"], sent) == (options.get("status", 429), content_type, body)
    assert headers == {"content-type": content_type, "content-length": str(len(body)),
                       "ratelimit-policy": '"default";q=1;w=3600',
                       "ratelimit": '"default";r=0;t=3600', "retry-after": "3600"}
    assert {name: answer for name, answer in answers.items() if answer != (status, headers, sent)} == {}
    assert b"192.0.2" not in sent


def test_a_problem_without_retry_after_and_of_another_status():
    app = StarletteMiddleware("1/hour", burst=1, cost=2, status=503, now=Clock())
    status, headers, body = app.request()
    assert (status, "retry-after" in headers) == (503, False)
    assert json.loads(body) == {"type": "about:blank", "title": "Service Unavailable",
                                "status": 503, "detail": "The request costs more than the "
                                "rate limit can ever admit."}


@pytest.mark.parametrize("face_type", FACES, ids=lambda face: face.__name__)
def test_configurable_refusal(face_type):
    app = face_type("1/hour", burst=1, now=Clock(), status=503, body='{"error": "slow down"}',
               content_type="application/json")
    app.request()
    status, headers, body = app.request()
    assert status == 503
    assert body == b'{"error": "slow down"}'
    assert headers["content-type"] == "application/json"
    assert headers["retry-after"] == "3600"


@pytest.mark.parametrize("status, error", [
    (200, cellrate.InvalidArgument), (302, cellrate.InvalidArgument),
    (399, cellrate.InvalidArgument), (600, cellrate.InvalidArgument),
    (True, cellrate.InvalidArgumentType), (429.0, cellrate.InvalidArgumentType),
    ("429", cellrate.InvalidArgumentType),
])
@pytest.mark.parametrize("face_type", [f for f in FACES if f is not FastAPIMiddleware
                                       and not getattr(f, "middleware", False)],
                         ids=lambda face: face.__name__)  # FastAPI builds middleware late
def test_a_refusal_status_is_from_400_to_599(face_type, status, error):
    """The rule and the words of cellrate.nginx's status option: the core's options
    table (tests/vectors/options.txt)."""
    with pytest.raises(error) as caught:
        face_type("1/s", status=status)
    assert str(caught.value) == "status must be an integer from 400 to 599"
    assert caught.value.param == "status"


def test_a_refusal_status_without_a_registered_phrase(face):
    app = face("1/hour", burst=1, now=Clock(), status=450)
    assert [app.request()[0] for _ in range(2)] == [200, 450]


def test_fastapi_dependency_refusal_carries_status_and_headers():
    app = FastAPIDependency("1/hour", burst=1, now=Clock(), status=503, body="later")
    app.request()
    status, headers, body = app.request()
    assert status == 503 and b"later" in body and headers["retry-after"] == "3600"


# -- keys and proxies ---------------------------------------------------------------


def test_key_by_header_and_by_function(face):
    app = face("1/hour", burst=1, now=Clock(), key=header("X-API-Key"))
    assert app.request(headers={"X-API-Key": "alice"})[0] == 200
    assert app.request(headers={"X-API-Key": "alice"})[0] == 429
    assert app.request(headers={"X-API-Key": "bob"})[0] == 200
    assert app.request()[0] == 200  # no key: the client address, apart from header values
    assert app.request(headers={"X-API-Key": "192.0.2.1"})[0] == 200
    app = face("1/hour", burst=1, now=Clock(), key=lambda request: request.path)
    assert [app.request(path=p)[0] for p in ["/", "/", "/login"]] == [200, 429, 200]


def test_forwarded_headers_ignored_by_default(face):
    app = face("1/hour", burst=1, now=Clock())
    assert app.request(headers={"X-Forwarded-For": "203.0.113.7"}, client="10.0.0.1")[0] == 200
    # another forged address changes nothing: the key is the peer
    assert app.request(headers={"X-Forwarded-For": "203.0.113.8"}, client="10.0.0.1")[0] == 429


def test_trusted_proxy_rightmost_untrusted_hop(face):
    app = face("1/hour", burst=1, now=Clock(), trusted_proxies=["10.0.0.0/8"])
    # the proxy appended the client's address; a forged left part is ignored
    spoof = {"X-Forwarded-For": "198.51.100.1, 203.0.113.7"}
    assert app.request(headers=spoof, client="10.0.0.1")[0] == 200
    spoof = {"X-Forwarded-For": "198.51.100.2, 203.0.113.7"}
    assert app.request(headers=spoof, client="10.0.0.1")[0] == 429
    # two trusted hops: the client is the first untrusted from the right
    chain = {"X-Forwarded-For": "203.0.113.9, 10.1.1.1"}
    assert app.request(headers=chain, client="10.0.0.2")[0] == 200
    assert app.request(headers=chain, client="10.0.0.3")[0] == 429
    # a peer that is not a trusted proxy is the client, whatever it says
    assert app.request(headers={"X-Forwarded-For": "203.0.113.50"}, client="192.0.2.9")[0] == 200
    assert app.request(headers={"X-Forwarded-For": "203.0.113.51"}, client="192.0.2.9")[0] == 429


def test_an_address_in_any_spelling_is_one_key(face):
    app = face("1/hour", burst=1, now=Clock(), ipv6_prefix=128)
    spellings = ["2001:db8::1", "2001:DB8::1", "2001:0db8:0000:0000:0000:0000:0000:0001",
                 "2001:db8:0:0::1"]
    assert [app.request(client=c)[0] for c in spellings] == [200, 429, 429, 429]
    assert [app.request(client=c)[0] for c in ("192.0.2.7", "::ffff:192.0.2.7", "::FFFF:c000:207")] \
        == [200, 429, 429]


def test_an_ipv6_client_is_keyed_by_its_64(face):
    """One client holds a /64: a fresh address in it is no fresh limit."""
    app = face("1/hour", burst=1, now=Clock())
    statuses = [app.request(client=f"2001:db8:1:2::{i:x}")[0] for i in range(1, 101)]
    assert statuses.count(200) == 1
    assert app.request(client="2001:db8:1:3::1")[0] == 200  # the next /64
    app = face("1/hour", burst=1, now=Clock(), ipv6_prefix=128, ipv4_prefix=24)
    assert [app.request(client=f"2001:db8:1:2::{i:x}")[0] for i in range(1, 11)] == [200] * 10
    assert [app.request(client=c)[0] for c in ("192.0.2.1", "192.0.2.200", "192.0.3.1")] \
        == [200, 429, 200]


def test_what_is_no_address_shares_one_key(face):
    """A peer or a trusted proxy's hop that is no address: the key "unknown",
    one for all of them, never a key of the sender's choosing."""
    app = face("1/hour", burst=1, now=Clock())
    assert [app.request(client=c)[0] for c in ("not-an-address", "unix:/run/app.sock")] == [200, 429]
    app = face("1/hour", burst=1, now=Clock(), trusted_proxies=["10.0.0.0/8"])
    hops = ["garbage", "1.2.3.4, more garbage", "_hidden", "1.2.3.999"]
    statuses = [app.request(headers={"X-Forwarded-For": hop}, client="10.0.0.1")[0] for hop in hops]
    assert statuses == [200, 429, 429, 429]


@pytest.mark.parametrize("address, options, key", [
    ("192.0.2.1", {}, "192.0.2.1"),
    ("192.0.2.1", {"ipv4_prefix": 24}, "192.0.2.0/24"),
    ("::ffff:192.0.2.1", {"ipv4_prefix": 16}, "192.0.0.0/16"),
    ("2001:DB8:0:0:1::1", {}, "2001:db8::/64"),
    ("2001:DB8:0:0:1::1", {"ipv6_prefix": 128}, "2001:db8::1:0:0:1"),
    ("2001:DB8:0:0:1::1", {"ipv6_prefix": 48}, "2001:db8::/48"),
    ("fe80::1%eth0", {"ipv6_prefix": 128}, "fe80::1"),
    ("::1", {"ipv6_prefix": 128}, "::1"),
    ("::1", {}, "::/64"),
    ("10.0.0.1", {"ipv4_prefix": 0}, "0.0.0.0/0"),
    ("", {}, "unknown"),
    ("192.0.2.1\x00", {}, "unknown"),
    ("\ud800", {}, "unknown"),
    ("01.2.3.4", {}, "unknown"),
    ("1.2.3", {}, "unknown"),
])
def test_the_key_of_an_address_is_canonical(address, options, key):
    policy = Policy("1/s", **options)
    assert policy.client_of(_view(policy, address)) == key
    assert policy.key(_view(policy, address)) == key


def _view(policy, peer, **headers):
    scope = {"type": "http", "method": "GET", "path": "/", "client": (peer, 1),
             "headers": [(k.lower().replace("_", "-").encode(), v.encode()) for k, v in headers.items()]}
    return Request(policy, "GET", "/", scope=scope)


@pytest.mark.parametrize("peer, headers, client", [
    ("10.0.0.1", {}, "10.0.0.1"),
    ("10.0.0.1", {"X_Forwarded_For": "1.2.3.4"}, "1.2.3.4"),
    ("10.0.0.1", {"X_Forwarded_For": "6.6.6.6, 1.2.3.4, 10.0.0.7"}, "1.2.3.4"),
    ("10.0.0.1", {"X_Forwarded_For": "10.0.0.9, 10.0.0.7"}, "10.0.0.9"),
    ("10.0.0.1", {"X_Forwarded_For": "1.2.3.4:5555"}, "1.2.3.4"),
    ("10.0.0.1", {"X_Forwarded_For": "[2001:db8::1]:80"}, "2001:db8::/64"),
    ("10.0.0.1", {"X_Forwarded_For": "2001:db8::2"}, "2001:db8::/64"),
    ("10.0.0.1", {"X_Forwarded_For": "[::ffff:1.2.3.4]:80"}, "1.2.3.4"),
    ("10.0.0.1", {"X_Forwarded_For": "garbage"}, "unknown"),  # no address: one key for all
    ("10.0.0.1", {"X_Forwarded_For": "1.2.3.4, garbage"}, "unknown"),
    ("::ffff:10.0.0.1", {"X_Forwarded_For": "1.2.3.4"}, "1.2.3.4"),  # a dual-stack listener
    ("192.0.2.1", {"X_Forwarded_For": "1.2.3.4"}, "192.0.2.1"),
    ("10.0.0.1", {"Forwarded": "for=1.2.3.4"}, "10.0.0.1"),  # only the configured header
])
def test_client_address_x_forwarded_for(peer, headers, client):
    policy = Policy("1/s", trusted_proxies=["10.0.0.0/8"])
    assert policy.client_of(_view(policy, peer, **headers)) == client


def test_client_address_behind_a_unix_socket(caplog):
    """nginx -> app over a Unix socket: the peer has no address. Without "unix"
    every request would share one key (one limit for everybody)."""
    policy = Policy("1/s", trusted_proxies=["unix"])
    view = Request(policy, "GET", "/", scope={"client": None, "headers": [
        (b"x-forwarded-for", b"6.6.6.6, 1.2.3.4")]})
    assert policy.client_of(view) == "1.2.3.4"
    assert policy.client_of(_view(policy, "10.0.0.1", X_Forwarded_For="1.2.3.4")) == "10.0.0.1"
    untrusting = Policy("1/s")
    with caplog.at_level(logging.WARNING, logger="cellrate"):
        for _ in range(3):
            assert untrusting.client_of(Request(untrusting, "GET", "/", scope=view.scope)) == "unknown"
    assert len([r for r in caplog.records if "trusted_proxies=['unix']" in r.getMessage()]) == 1
    environ = {"REMOTE_ADDR": "", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}
    assert policy.client_of(Request(policy, "GET", "/", environ=environ)) == "1.2.3.4"


@pytest.mark.parametrize("value, client", [
    ("for=1.2.3.4", "1.2.3.4"),
    ('for=6.6.6.6, for="[2001:db8::1]:4711";proto=https', "2001:db8::/64"),
    ("for=unknown", "unknown"),
    ('for="_hidden"', "unknown"),
    ("for=1.2.3.4;by=10.0.0.1, for=10.0.0.8", "1.2.3.4"),
    ('For="1.2.3.4:80"', "1.2.3.4"),
])
def test_client_address_forwarded(value, client):
    policy = Policy("1/s", trusted_proxies=["10.0.0.0/8"], proxy_header="Forwarded")
    assert policy.client_of(_view(policy, "10.0.0.1", Forwarded=value)) == client
    # and X-Forwarded-For is then ignored
    assert policy.client_of(_view(policy, "10.0.0.1", X_Forwarded_For="9.9.9.9")) == "10.0.0.1"


# -- exemptions, routes, dry run ------------------------------------------------------


def test_exemptions(face):
    app = face("1/hour", burst=1, now=Clock(), exempt_paths=["/admin/*"],
               exempt_methods=["OPTIONS"], exempt=lambda request: request.path == "/health")
    for _ in range(3):
        assert app.request(path="/admin/status")[0] == 200
        assert app.request(method="OPTIONS")[0] == 200
        assert app.request(path="/health")[0] == 200
    assert [app.request()[0] for _ in range(2)] == [200, 429]


def test_route_limits(face):
    app = face(None, routes={"POST /login": "1/hour", re.compile(r"/admin/.*"): "2/hour"},
               burst=None, now=Clock())
    assert [app.request("POST", "/login")[0] for _ in range(2)] == [200, 429]
    assert [app.request("GET", "/login")[0] for _ in range(3)] == [200] * 3  # POST only
    assert [app.request(path="/admin/status")[0] for _ in range(3)] == [200, 200, 429]
    assert [app.request()[0] for _ in range(3)] == [200] * 3  # no route, no limit


def test_a_get_pattern_covers_head(face):
    """Starlette and Flask answer HEAD with the GET view: "GET /login" limits
    HEAD too (20 HEADs after the burst run no view), and "GET /health" or
    exempt_methods=["GET"] exempts it. FastAPI's routes answer HEAD with 405
    (no view either); its middleware refuses first."""
    app = face(None, routes={"GET /login": "1/hour"}, burst=1, now=Clock())
    assert app.request("GET", "/login")[0] == 200
    heads = [app.request("HEAD", "/login")[0] for _ in range(20)]
    assert set(heads) == ({405} if face is FastAPIDependency else {429})
    assert app.request("GET", "/login")[0] == 429
    app = face(None, routes={"HEAD /login": "1/hour"}, burst=1, now=Clock())
    if face is not FastAPIDependency:  # which never sees a HEAD
        assert [app.request("HEAD", "/login")[0] != 429 for _ in range(2)] == [True, False]
    assert [app.request("GET", "/login")[0] for _ in range(2)] == [200, 200]  # HEAD is not GET
    for exemption in (dict(exempt_paths=["GET /health"]), dict(exempt_methods=["GET"])):
        app = face("1/hour", burst=1, now=Clock(), **exemption)
        assert 429 not in [app.request("HEAD", "/health")[0] for _ in range(3)]
        assert [app.request("POST")[0] for _ in range(2)] == [200, 429]


@pytest.mark.parametrize("face_type", [FlaskMiddleware, FlaskDecorator])
def test_a_method_in_lower_case_meets_the_limit_of_its_upper_case(face_type):
    """Werkzeug dispatches REQUEST_METHOD "get" to the GET view (as Django does):
    a method in any case meets the pattern's limit; an unknown method meets no
    method pattern, and the framework answers it with no view (405)."""
    app = face_type(None, routes={"GET /login": "1/hour", "POST /login": "1/hour"}, burst=1,
                    now=Clock())
    assert [app.request("get", "/login")[0] for _ in range(3)] == [200, 429, 429]
    assert [app.request(method, "/login")[0] for method in ("HEAD", "head", "GET")] == [429] * 3
    assert [app.request(method, "/login")[0] for method in ("post", "POST", "Post")] == [200, 429, 429]
    assert app.request("BREW", "/login")[0] == 405


def test_several_limits_refusal_spends_nothing_of_the_others(face):
    """A site-wide limit and a route's: refused logins leave the site-wide
    budget as it was (cellrate.check_all)."""
    clock = Clock()
    site = cellrate.KeyedLimiter("1/hour", burst=10)
    login = cellrate.KeyedLimiter("1/hour", burst=2)
    app = face(site, routes={"POST /login": login}, now=clock, admitted_headers=True)
    statuses = [app.request("POST", "/login")[0] for _ in range(6)]
    assert statuses == [200, 200, 429, 429, 429, 429]
    assert site.peek("192.0.2.1", 0, now=clock.t).remaining == 8  # only the 2 admitted
    status, headers, _ = app.request("POST", "/login")
    assert headers["ratelimit-policy"] == '"default";q=2;w=7200'  # the tightest: the route's
    assert [app.request()[0] for _ in range(9)] == [200] * 8 + [429]


def test_several_limits_in_one_rate_string(face):
    """"3/minute;5/hour" (as flask-limiter and slowapi write it): each part its
    own limit, decided as one; a refusal by one spends nothing of the other."""
    clock = Clock()
    app = face("3/minute;5/hour", routes={"POST /login": "1/minute; 2/hour"}, now=clock,
               admitted_headers=True)
    assert [app.request()[0] for _ in range(5)] == [200, 200, 200, 429, 429]
    clock.t += 60  # the minute's limit is back; the hour's has 2 left, not 0
    results = [app.request() for _ in range(3)]
    assert [status for status, _, _ in results] == [200, 200, 429]
    assert results[2][1]["ratelimit-policy"] == '"default";q=5;w=3600'  # the tightest: the hour's
    assert [app.request("POST", "/login", client="192.0.2.9")[0] for _ in range(2)] == [200, 429]


@pytest.mark.parametrize("limit, routes, param", [
    ("1/s;;1/m", None, "limit"), ("1/s;bogus", None, "limit"), (["1/s", "1/m;"], None, "limit"),
    ("1/s", {"/login": "1/s;1/fortnight"}, "routes"),
])
def test_a_bad_part_of_a_rate_string_names_the_option(limit, routes, param):
    with pytest.raises(cellrate.InvalidArgument) as caught:
        Policy(limit, routes=routes)
    assert caught.value.param == param and str(caught.value).startswith(f"{param}: rate")


def test_several_limits_with_their_own_keys(face):
    """A per-address limit and a per-user limit (its own key function), and a
    global Limiter, decided as one."""
    clock = Clock()
    per_user = cellrate.KeyedLimiter("1/hour", burst=3)
    overall = cellrate.Limiter("1/hour", burst=5)
    app = face(["1/hour", (per_user, lambda r: r.header("X-User") or "anonymous"), overall],
               burst=4, now=clock)
    alice = {"X-User": "alice"}
    assert [app.request(headers=alice, client="192.0.2.1")[0] for _ in range(4)] == [200] * 3 + [429]
    assert [app.request(headers=alice, client="192.0.2.2")[0] for _ in range(2)] == [429] * 2
    bob = {"X-User": "bob"}
    assert [app.request(headers=bob, client="192.0.2.2")[0] for _ in range(3)] == [200, 200, 429]
    assert overall.peek(0, now=clock.t).remaining == 0


def test_framework_route_as_key():
    """One dependency (FastAPI) or decorator (Flask) on several routes, each
    route its own limit: the key names the framework's route template."""
    clock = Clock()
    by_route = cellrate.fastapi.RateLimit(
        "1/hour", burst=1, now=clock, key=lambda r: f"{r.client} {r.scope['route'].path}")
    app = FastAPI(dependencies=[Depends(by_route)])
    for path in ("/items/{item}", "/users/{user}"):
        app.add_api_route(path, _fastapi_ok)
    client = TestClient(app)
    assert [client.get(p).status_code for p in ("/items/1", "/items/2", "/users/1")] == [200, 429, 200]

    import flask

    limited = cellrate.flask.RateLimit(
        "1/hour", burst=1, now=clock, key=lambda r: f"{r.client} {flask.request.url_rule.rule}")
    app = Flask(__name__)
    app.add_url_rule("/items/<item>", "items", limited(lambda item: "ok"))
    app.add_url_rule("/users/<user>", "users", limited(lambda user: "ok"))
    client = app.test_client()
    assert [client.get(p).status_code for p in ("/items/1", "/items/2", "/users/1")] == [200, 429, 200]


def test_dry_run_refuses_nothing_and_logs(face, caplog):
    app = face("1/hour", burst=2, now=Clock(), dry_run=True)
    with caplog.at_level(logging.WARNING, logger="cellrate"):
        results = [app.request() for _ in range(5)]
    assert [status for status, _, _ in results] == [200] * 5
    assert [rate_fields(headers) for _, headers, _ in results[:2]] == [{}, {}]
    for _, headers, _ in results[2:]:
        assert rate_fields(headers) == {"ratelimit-policy": '"default";q=2;w=7200',
                                        "ratelimit": '"default";r=0;t=7200'}
    dry = [r for r in caplog.records if r.name == "cellrate" and "dry run" in r.getMessage()]
    assert len(dry) == 3
    assert "192.0.2.1" in dry[0].getMessage()


def test_dry_run_counts_would_be_refusals(face, tmp_path):
    keyed = cellrate.KeyedLimiter("1/hour", burst=2, capacity=100, shared=tmp_path / "dry")
    app = face(keyed, now=Clock(), dry_run=True)
    assert [app.request()[0] for _ in range(5)] == [200] * 5
    stats = keyed.stats()
    assert (stats["admitted"], stats["refused"], stats["would_refuse"]) == (2, 0, 3)
    # several limits: the refusal let through is counted at the limit that refused
    wide, narrow = cellrate.Limiter("10/hour", burst=10), cellrate.Limiter("1/hour", burst=1)
    app = face([wide, narrow], now=Clock(), dry_run=True)
    assert [app.request()[0] for _ in range(3)] == [200] * 3
    assert wide.stats()["admitted"] == 1 and wide.stats()["would_refuse"] == 0
    assert (narrow.stats()["admitted"], narrow.stats()["refused"],
            narrow.stats()["would_refuse"]) == (1, 0, 2)


# -- stores ---------------------------------------------------------------------------


def test_a_limiter_is_one_limit_for_every_client(face):
    app = face(cellrate.Limiter("1/hour", burst=2), now=Clock())
    assert app.request(client="192.0.2.1")[0] == 200
    assert app.request(client="192.0.2.2")[0] == 200
    assert app.request(client="192.0.2.3")[0] == 429


def test_a_keyed_limiter_is_used_as_given(face):
    store = cellrate.KeyedLimiter("1/hour", burst=2)
    app = face(store, now=Clock(1000.0))
    assert [app.request()[0] for _ in range(3)] == [200, 200, 429]
    assert store.peek("192.0.2.1", 0, now=1000.0).remaining == 0


class AsyncStore:
    """An async store (the shape of AsyncRedisLimiter): awaited, never blocking."""

    def __init__(self, rate, burst):
        self.inner = cellrate.KeyedLimiter(rate, burst=burst)
        self.calls = 0

    async def check(self, key, cost=1, *, now=None):
        self.calls += 1
        await asyncio.sleep(0)
        return self.inner.check(key, cost, now=now)


async def check_all_async(items, cost=1, *, now=None):
    """The module-level check_all of AsyncStore (as cellrate.redis has one for
    its stores): admitted only if every limit admits, nothing spent otherwise."""
    pairs = [(store.inner, key) for store, key in items]
    for store, _ in items:
        store.calls += 1
    await asyncio.sleep(0)
    peeks = [inner.peek(key, cost, now=now) for inner, key in pairs]
    refused = [d for d in peeks if not d.allowed]
    if refused:
        return max(refused, key=lambda d: d.retry_after)
    return min((inner.check(key, cost, now=now) for inner, key in pairs),
               key=lambda d: d.remaining)


class BlockingStore:
    """A synchronous store that is not in-process (the shape of RedisLimiter)."""

    def __init__(self, rate, burst):
        self.inner = cellrate.KeyedLimiter(rate, burst=burst)

    def check(self, key, cost=1, *, now=None):
        return self.inner.check(key, cost, now=now)


@pytest.mark.parametrize("face_type", [StarletteMiddleware, FastAPIDependency])
def test_async_store_is_awaited(face_type):
    store = AsyncStore("1/hour", 2)
    app = face_type(store, now=Clock())
    assert [app.request()[0] for _ in range(3)] == [200, 200, 429]
    assert store.calls == 3


def test_several_async_limits_through_their_check_all():
    site, login = AsyncStore("1/hour", 3), AsyncStore("1/hour", 1)
    app = StarletteMiddleware(site, routes={"POST /login": login}, now=Clock())
    assert [app.request("POST", "/login")[0] for _ in range(3)] == [200, 429, 429]
    assert [app.request()[0] for _ in range(3)] == [200, 200, 429]  # refusals spent nothing
    assert login.calls == 3


def test_store_kinds_are_checked():
    with pytest.raises(TypeError, match="block the event loop"):
        cellrate.asgi.RateLimitMiddleware(_ok, BlockingStore("1/s", 1))
    with pytest.raises(TypeError, match="stores of one kind"):
        cellrate.asgi.RateLimitMiddleware(_ok, ["1/s", AsyncStore("1/s", 1)])
    with pytest.raises(TypeError, match=r"needs? \S+\.check_all\(\)"):
        cellrate.wsgi.RateLimitMiddleware(lambda e, s: [], [BlockingStore("1/s", 1)] * 2)
    with pytest.raises(TypeError, match="needs the ASGI middleware"):
        cellrate.wsgi.RateLimitMiddleware(lambda e, s: [], AsyncStore("1/s", 1))
    assert cellrate.wsgi.RateLimitMiddleware(lambda e, s: [], BlockingStore("1/s", 1))


BAD, BAD_TYPE = cellrate.InvalidArgument, cellrate.InvalidArgumentType


@pytest.mark.parametrize("options, error, param", [
    (dict(limit=None), BAD, "limit"),
    (dict(limit=object()), BAD_TYPE, "limit"),
    (dict(limit="bogus"), BAD, "limit"),
    (dict(limit="1/s", routes={"/login": "bogus"}), BAD, "routes"),
    (dict(limit=[("1/s",)]), BAD_TYPE, "limit"),
    (dict(limit=AsyncStore("1/s", 1)), BAD_TYPE, "limit"),
    (dict(limit=[BlockingStore("1/s", 1)] * 2), BAD_TYPE, "limit"),
    (dict(limit=["1/s", BlockingStore("1/s", 1)]), BAD_TYPE, "limit"),
    (dict(limit="1/s", routes={"login": "1/s"}), BAD, "routes"),
    (dict(limit="1/s", routes={"/login": 5j}), BAD_TYPE, "routes"),
    (dict(limit="1/s", routes={5: "1/s"}), BAD_TYPE, "routes"),
    (dict(limit="1/s", routes=["/login"]), BAD_TYPE, "routes"),
    (dict(limit="1/s", routes={"/login": ("1/s", "not a function")}), BAD_TYPE, "routes"),
    (dict(limit="1/s", trusted_proxies=["not an address"]), BAD, "trusted_proxies"),
    (dict(limit="1/s", trusted_proxies=[5]), BAD_TYPE, "trusted_proxies"),
    (dict(limit="1/s", trusted_proxies=5), BAD_TYPE, "trusted_proxies"),
    (dict(limit="1/s", proxy_header="X-Real-IP"), BAD, "proxy_header"),
    (dict(limit="1/s", proxy_header=5), BAD_TYPE, "proxy_header"),
    (dict(limit="1/s", ipv4_prefix=33), BAD, "ipv4_prefix"),
    (dict(limit="1/s", ipv4_prefix=-1), BAD, "ipv4_prefix"),
    (dict(limit="1/s", ipv4_prefix=True), BAD_TYPE, "ipv4_prefix"),
    (dict(limit="1/s", ipv4_prefix="24"), BAD_TYPE, "ipv4_prefix"),
    (dict(limit="1/s", ipv6_prefix=129), BAD, "ipv6_prefix"),
    (dict(limit="1/s", ipv6_prefix=64.0), BAD_TYPE, "ipv6_prefix"),
    (dict(limit="1/s", cost=-1), BAD, "cost"),
    (dict(limit="1/s", cost="1"), BAD_TYPE, "cost"),
    (dict(limit="1/s", key="X-API-Key"), BAD_TYPE, "key"),
    (dict(limit="1/s", status=999), BAD, "status"),
    (dict(limit="1/s", status=True), BAD_TYPE, "status"),
    (dict(limit="1/s", name=""), BAD, "name"),
    (dict(limit="1/s", name="caf\u00e9"), BAD, "name"),
    (dict(limit="1/s", exempt_paths=[1]), BAD_TYPE, "exempt_paths"),
    (dict(limit="1/s", exempt_paths=["health"]), BAD, "exempt_paths"),
    (dict(limit="1/s", exempt_paths=5), BAD_TYPE, "exempt_paths"),
    (dict(limit="1/s", exempt_methods=[1]), BAD_TYPE, "exempt_methods"),
    (dict(limit="1/s", exempt_methods=5), BAD_TYPE, "exempt_methods"),
    (dict(limit="1/s", exempt="yes"), BAD_TYPE, "exempt"),
    (dict(limit="1/s", body=5), BAD_TYPE, "body"),
    (dict(limit="1/s", body="\ud800"), BAD, "body"),
    (dict(limit="1/s", content_type=5), BAD_TYPE, "content_type"),
    (dict(limit="1/s", content_type="text/\u20ac"), BAD, "content_type"),
    (dict(limit="1/s", legacy_headers="yes"), BAD_TYPE, "legacy_headers"),
    (dict(limit="1/s", admitted_headers=1), BAD_TYPE, "admitted_headers"),
    (dict(limit="1/s", dry_run=1), BAD_TYPE, "dry_run"),
    (dict(limit="1/s", now=5.0), BAD_TYPE, "now"),
    (dict(limit=cellrate.KeyedLimiter(1), burst=5), BAD, "burst"),
    (dict(limit=cellrate.KeyedLimiter(1), shared="/dev/shm/x"), BAD, "shared"),
], ids=lambda value: None)
def test_bad_options_name_the_parameter(options, error, param):
    with pytest.raises(error) as caught:
        cellrate.wsgi.RateLimitMiddleware(lambda e, s: [], **options)
    assert type(caught.value) is error and caught.value.param == param
    assert str(caught.value).startswith(param), str(caught.value)


def test_a_blocking_store_under_asgi_names_the_limit():
    with pytest.raises(BAD_TYPE, match="^limit: .* block the event loop") as caught:
        cellrate.asgi.RateLimitMiddleware(_ok, BlockingStore("1/s", 1))
    assert caught.value.param == "limit"


@pytest.mark.parametrize("name, error", [
    ("\ud800", BAD), ("X-\udcff-Key", BAD), ("caf\u00e9", BAD), ("X API Key", BAD), ("", BAD),
    (b"X-API-Key", BAD_TYPE), (None, BAD_TYPE),
])
def test_a_bad_header_name_is_named(face, name, error):
    """header(name) refuses what is no field name; a lookup by a name that is
    not ASCII (a lone surrogate would not encode) is refused too, not leaked
    as UnicodeEncodeError from the middle of a request."""
    with pytest.raises(error) as caught:
        header(name)
    assert caught.value.param == "name" and str(caught.value).startswith("name")
    if isinstance(name, str) and name.isascii():
        return  # a lookup by an ASCII name that is no token finds nothing
    seen = []

    def key(request):
        with pytest.raises(error) as caught:
            request.header(name)
        seen.append(caught.value.param)
        return "k"

    assert face("1/hour", burst=1, now=Clock(), key=key).request()[0] == 200
    assert seen == ["name"]


def test_lifespan_passes_through_and_a_websocket_handshake_is_a_get():
    """The handshake meets the limits a GET meets: the first connection
    spends the burst; the next is refused with the 429 of a request (the test
    client has the Denial Response extension), and so is the GET after it."""
    from starlette.testclient import WebSocketDenialResponse

    events = []

    @contextlib.asynccontextmanager
    async def lifespan(app):
        events.append("startup")
        yield
        events.append("shutdown")

    async def echo(websocket):
        await websocket.accept()
        await websocket.send_text(await websocket.receive_text())
        await websocket.close()

    inner = Starlette(routes=[Route("/", _ok), WebSocketRoute("/ws", echo)], lifespan=lifespan)
    app = cellrate.asgi.RateLimitMiddleware(inner, "1/hour", burst=1, now=Clock())
    with TestClient(app) as client:
        assert events == ["startup"]
        with client.websocket_connect("/ws") as ws:
            ws.send_text("hello")
            assert ws.receive_text() == "hello"
        with pytest.raises(WebSocketDenialResponse) as refused:
            with client.websocket_connect("/ws"):
                pass
        assert refused.value.status_code == 429
        assert refused.value.headers["retry-after"] == "3600"
        assert client.get("/").status_code == 429
    assert events == ["startup", "shutdown"]


def test_decision_headers_face():
    d = cellrate.KeyedLimiter("300/minute", burst=60).check("k", now=10.0)
    assert d.window == 12.0
    assert d.headers() == {"RateLimit-Policy": '"default";q=60;w=12',
                           "RateLimit": '"default";r=59;t=1'}
    assert d.headers("a\"b", legacy=True)["RateLimit"] == '"a\\"b";r=59;t=1'
    remote = cellrate.Decision(False, 0, 0.25, 30.5, 10, 30.0)
    assert remote.headers() == {"RateLimit-Policy": '"default";q=10;w=30',
                                "RateLimit": '"default";r=0;t=31', "Retry-After": "1"}
    assert cellrate.Decision(False, 0, math.inf, 0.0, 1, 1.0).headers() == {
        "RateLimit-Policy": '"default";q=1;w=1', "RateLimit": '"default";r=0;t=0'}
    with pytest.raises(cellrate.InvalidArgument, match="^name") as caught:
        d.headers("x" * 65)
    assert caught.value.param == "name"
    # a Decision with a negative count or a NaN time is refused when it is made
    with pytest.raises(cellrate.InvalidArgument, match="^remaining") as caught:
        cellrate.Decision(True, -1, 0.0, 0.0, 1).headers()
    assert caught.value.param == "remaining"
    with pytest.raises(cellrate.InvalidArgument, match="^retry_after"):
        cellrate.Decision(True, 1, math.nan, 0.0, 1).headers()
    with pytest.raises(cellrate.InvalidArgumentType, match="^name"):
        d.headers(5)
    with pytest.raises(cellrate.InvalidArgument, match="^name"):
        d.headers("nul\0")


# -- Django's own idioms ----------------------------------------------------------------


def test_no_framework_is_imported_by_cellrate_or_its_policy():
    code = ("import sys, cellrate, cellrate.web, cellrate.asgi, cellrate.wsgi; "
            "print(sorted({'django', 'flask', 'fastapi', 'starlette'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("setting, words", [
    (None, "CELLRATE must be a dict of the options of cellrate.web.Policy"),
    ("100/minute", "CELLRATE must be a dict"),
    ({"limit": "100/minute", "burts": 3}, "CELLRATE: 'burts' is no option of cellrate.web.Policy; "
                                          "did you mean 'burst'?"),
    ({"limit": "bogus"}, "CELLRATE['limit']: limit: rate"),
    ({"limit": "1/s", "status": 200}, "CELLRATE['status']: status must be an integer from 400"),
    ({"limit": "1/s", "trusted_proxies": ["proxy"]}, "CELLRATE['trusted_proxies']: "),
    ({"limit": AsyncStore("1/s", 1)}, "CELLRATE['limit']: limit: an async store"),
], ids=lambda value: None)
def test_a_bad_cellrate_setting_stops_django_at_startup(setting, words):
    """Django loads the middleware when it makes its handler (the WSGI or ASGI
    application of the project): there a bad setting is ImproperlyConfigured,
    naming the option."""
    from django.core.exceptions import ImproperlyConfigured
    from django.core.wsgi import get_wsgi_application

    project = dict(MIDDLEWARE=["cellrate.django.RateLimitMiddleware"], CELLRATE=setting)
    with override_settings(**project), pytest.raises(ImproperlyConfigured) as caught:
        get_wsgi_application()
    assert str(caught.value).startswith(words), str(caught.value)


def test_a_bad_limit_on_a_view_fails_where_it_is_written():
    with pytest.raises(cellrate.InvalidArgument) as caught:
        cellrate.django.limit("1/s", ipv4_prefix=33)
    assert caught.value.param == "ipv4_prefix"
    with pytest.raises(cellrate.InvalidArgumentType, match="needs the ASGI"):
        cellrate.django.limit(AsyncStore("1/s", 1))(_django_ok)
    assert cellrate.django.limit(AsyncStore("1/s", 1))(_django_ok_async)


def test_django_async_client_async_views_and_middleware():
    """Django's AsyncClient: an async view under @limit, and the middleware in
    an async chain; and an async view under Django's sync Client."""
    from django.test import AsyncClient

    clock = Clock()
    views = types.ModuleType("urls_async")
    views.urlpatterns = [url("login", cellrate.django.limit("1/hour", burst=1, now=clock)(
        _django_ok_async)), url("", _django_ok_async)]
    project = dict(MIDDLEWARE=["cellrate.django.RateLimitMiddleware"], ROOT_URLCONF=views,
                   CELLRATE={"limit": "1/hour", "burst": 3, "now": clock})

    async def requests():
        client = AsyncClient()
        login = [(await client.post("/login")).status_code for _ in range(2)]
        site = [(await client.get("/")).status_code for _ in range(2)]
        return login, site, await client.get("/")

    with override_settings(**project):
        login, site, refused = asyncio.run(requests())
    assert (login, site) == ([200, 429], [200, 429])
    assert refused["Content-Type"] == "application/problem+json"
    assert refused["RateLimit"] == '"default";r=0;t=10800'

    views.urlpatterns[0] = url("login", cellrate.django.limit("1/hour", burst=1, now=clock)(
        _django_ok_async))
    with override_settings(ROOT_URLCONF=views):
        client = DjangoClient()
        assert [client.post("/login").status_code for _ in range(2)] == [200, 429]


@pytest.mark.parametrize("name", ["", "caf\u00e9", "x" * 65, "a\nb", 5, b"api"])
def test_a_bad_policy_name_is_refused_in_the_cores_words(name):
    with pytest.raises(cellrate.CellrateError) as expected:
        cellrate.check_policy_name(name)
    with pytest.raises(cellrate.CellrateError) as caught:
        Policy("1/s", name=name)
    assert (type(caught.value), caught.value.param, str(caught.value)) == (
        type(expected.value), expected.value.param, str(expected.value))


def test_no_policy_name_is_the_cores_default():
    decision = cellrate.Limiter(1).check(now=0.0)
    assert Policy("1/s").name is None
    assert decision.headers(None) == decision.headers() == decision.headers("default")


# -- one shared= directory for an app (docs/design.md §10) ---------------------------


def _fastapi_app(shared, middleware, dependency, routes=None):
    app = FastAPI()
    app.add_api_route("/", _fastapi_ok, methods=["GET"])
    app.add_api_route("/login", _fastapi_ok, methods=["GET"])
    app.add_api_route("/search", _fastapi_ok, methods=["GET"],
                      dependencies=[Depends(cellrate.fastapi.RateLimit(
                          dependency, name="search", shared=shared))])
    app.add_middleware(cellrate.asgi.RateLimitMiddleware, limit=middleware, routes=routes,
                       shared=shared)
    return TestClient(app, client=("192.0.2.1", 40000))


def _admitted(client, path, attempts):
    return sum(client.get(path).status_code == 200 for _ in range(attempts))


def test_one_shared_directory_serves_middleware_dependency_and_routes(tmp_path):
    """The middleware's limit, its routes' and a dependency's, given one
    directory: each limit is a region of its own there, by its name."""
    shared = tmp_path / "app"
    # per hour: the counts below hold however slowly a loaded machine sends the requests
    client = _fastapi_app(shared, "20/hour", "3/hour", routes={"/login": "5/hour"})
    assert _admitted(client, "/login", 8) == 5  # the route's limit (and 5 of the app's)
    assert sorted(os.listdir(shared)) == ["default", "default %2Flogin", "search"]
    assert _admitted(client, "/search", 8) == 3  # the dependency's (and 8 of the app's)
    assert _admitted(client, "/", 8) == 7  # the app's 20 in all
    # a second app of this process on the same limits shares them
    again = _fastapi_app(shared, "20/hour", "3/hour", routes={"/login": "5/hour"})
    assert _admitted(again, "/", 3) == 0


def test_one_name_with_two_limits_in_one_process_is_an_error(tmp_path):
    shared = tmp_path / "app"
    kept = cellrate.asgi.RateLimitMiddleware(_ok, "10/minute", shared=shared)
    with pytest.raises(cellrate.InvalidArgument) as info:
        cellrate.fastapi.RateLimit("3/minute", shared=shared)  # "default", like the middleware
    assert info.value.param == "name"
    assert "'default'" in str(info.value) and "give each limit its own name" in str(info.value)
    cellrate.fastapi.RateLimit("3/minute", shared=shared, name="search")
    del kept


def test_a_changed_rate_on_restart_carries_what_was_used(tmp_path):
    """An app restarted with "5/hour" changed to "10/hour" starts (with a
    warning) and carries what each client used: 5 more, not a fresh 10."""
    import gc
    shared = tmp_path / "app"
    client = _fastapi_app(shared, "5/hour", "3/hour")
    assert _admitted(client, "/", 8) == 5
    del client
    gc.collect()  # the old app's limits are gone from this process, as in a restart
    with pytest.warns(RuntimeWarning, match="limit changed from"):
        client = _fastapi_app(shared, "10/hour", "3/hour")
        assert _admitted(client, "/", 8) == 5


def test_policy_reconfigure_changes_every_process_sharing_it(tmp_path):
    shared = tmp_path / "app"
    one = Policy("5/hour", routes={"POST /login": "2/minute;5/hour"}, shared=shared)
    other = Policy("5/hour", routes={"POST /login": "2/minute;5/hour"}, shared=shared)
    store = other.limits[0].store
    for _ in range(4):
        store.allow("k")
    one.reconfigure("10/hour")
    assert store.check("k").remaining == 5  # 4 used carry, this one more
    assert (store.rate, store.period, store.burst) == (10, 3600, 10)  # followed
    one.reconfigure("3/minute;9/hour", route="POST /login")
    assert [one_limit.store.check("k").limit for one_limit in other.routes[0][1]] == [3, 9]
    with pytest.raises(cellrate.InvalidArgument) as info:
        one.reconfigure("3/minute", route="POST /login")
    assert info.value.param == "limit" and "a change keeps their number" in str(info.value)
    with pytest.raises(cellrate.InvalidArgument) as info:
        one.reconfigure("3/minute", route="/nowhere")
    assert info.value.param == "route"
    with pytest.raises(cellrate.InvalidArgument) as info:
        one.reconfigure("3/minute", route=None, burst=0)
    assert info.value.param == "burst"
    with pytest.raises(cellrate.InvalidArgument) as info:
        one.reconfigure("5/fortnight")
    assert info.value.param == "limit"


def test_shared_must_be_a_directory(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(cellrate.InvalidArgument) as info:
        Policy("5/minute", shared=tmp_path / "file")
    assert info.value.param == "shared" and "is not a directory" in str(info.value)
    with pytest.raises(cellrate.InvalidArgumentType) as info:
        Policy("5/minute", shared=5)
    assert info.value.param == "shared"
