"""The web policy's `charge=` (design §9): the cost a response reports, settled
when it ends (streamed ones included), in both middlewares, and an endpoint
charging its own request's key."""

import urllib.parse

import pytest

pytest.importorskip("starlette", reason="make test installs starlette")
pytest.importorskip("werkzeug", reason="make test installs flask (werkzeug)")
from starlette.applications import Starlette  # noqa: E402
from starlette.responses import PlainTextResponse, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from werkzeug.test import Client  # noqa: E402

import cellrate  # noqa: E402
import cellrate.asgi  # noqa: E402
import cellrate.wsgi  # noqa: E402

NOW = 1000.0


def api_key(request):
    return request.header("Authorization") or "anonymous"


def used(request, response):
    """The upstream's count, as a proxy passes it on; None: as checked."""
    value = response.header("X-Usage")
    return None if value is None else int(value)


def limiter():
    return cellrate.KeyedLimiter("100/minute", burst=100)


def remaining(tokens, key="k"):
    return tokens.peek(key, 0, now=NOW).remaining


def asgi_client(tokens, **options):
    async def plain(request):
        use = request.query_params.get("use")
        return PlainTextResponse("ok", headers={"X-Usage": use} if use else {})

    async def streamed(request):
        async def body():
            for _ in range(3):
                yield b"chunk"
        return StreamingResponse(body(), headers={"X-Usage": "30"})

    async def estimated(request):
        decision = request.scope["cellrate.charge"](int(request.query_params["estimate"]))
        return PlainTextResponse(str(decision.remaining), headers={"X-Usage": "5"})

    async def bytes_sent(request):
        return PlainTextResponse("x" * 40)

    app = Starlette(routes=[Route("/", plain), Route("/stream", streamed),
                            Route("/estimate", estimated), Route("/bytes", bytes_sent)])
    return TestClient(cellrate.asgi.RateLimitMiddleware(
        app, tokens, key=api_key, now=lambda: NOW, **options))


def wsgi_client(tokens, **options):
    def app(environ, start_response):
        path = environ["PATH_INFO"]
        if path == "/estimate":
            decision = environ["cellrate.charge"](int(environ["QUERY_STRING"].split("=")[1]))
            start_response("200 OK", [("X-Usage", "5")])
            return [str(decision.remaining).encode()]
        if path == "/bytes":
            start_response("200 OK", [])
            return [b"x" * 40]
        if path == "/stream":
            start_response("200 OK", [("X-Usage", "30")])
            return iter([b"chunk"] * 3)
        use = urllib.parse.unquote(environ["QUERY_STRING"].partition("=")[2])
        start_response("200 OK", [("X-Usage", use)] if use else [])
        return [b"ok"]

    return Client(cellrate.wsgi.RateLimitMiddleware(
        app, tokens, key=api_key, now=lambda: NOW, **options))


def get(client, path):
    # a WSGI server closes the body once sent (werkzeug's client: when buffered)
    extra = {"buffered": True} if isinstance(client, Client) else {}
    response = client.get(path, headers={"Authorization": "k"}, **extra)
    return response.status_code, response.headers


@pytest.fixture(params=["asgi", "wsgi"])
def client_of(request):
    return asgi_client if request.param == "asgi" else wsgi_client


def test_a_response_settles_what_its_request_cost(client_of):
    tokens = limiter()
    client = client_of(tokens, cost=10, charge=used)
    assert get(client, "/?use=25")[0] == 200
    assert remaining(tokens) == 75  # 10 checked, 15 more charged
    assert get(client, "/?use=4")[0] == 200
    assert remaining(tokens) == 71  # 10 checked, 6 given back
    assert get(client, "/")[0] == 200
    assert remaining(tokens) == 61  # no usage reported: as checked


def test_a_streamed_response_is_settled_when_it_ends(client_of):
    tokens = limiter()
    client = client_of(tokens, cost=1, charge=used)
    assert get(client, "/stream")[0] == 200
    assert remaining(tokens) == 70


def test_a_debt_refuses_the_key_until_it_drains(client_of):
    tokens = limiter()
    client = client_of(tokens, cost=1, charge=used)
    assert get(client, "/?use=160")[0] == 200  # reported after the work: into debt
    status, headers = get(client, "/")
    assert status == 429 and headers["Retry-After"] == "37"  # 61 units at 0.6 s: 36.6 s
    assert remaining(tokens) == 0


def test_the_endpoint_charges_its_request_and_the_response_settles_it(client_of):
    tokens = limiter()
    client = client_of(tokens, cost=1, charge=used)
    status, _ = get(client, "/estimate?estimate=49")  # 1 checked + 49 estimated, 5 used
    assert status == 200
    assert remaining(tokens) == 95


def test_bytes_sent_are_a_cost(client_of):
    tokens = limiter()
    client = client_of(tokens, cost=0 + 1, charge=lambda request, response: response.bytes_sent)
    assert get(client, "/bytes")[0] == 200
    assert remaining(tokens) == 60


def test_charge_needs_a_function_and_stores_that_charge():
    with pytest.raises(cellrate.InvalidArgumentType) as caught:
        cellrate.web.Policy("10/s", charge=5)
    assert caught.value.param == "charge"

    class CheckOnly:
        def check(self, key, cost, *, now=None):
            raise AssertionError("never called")

    with pytest.raises(cellrate.InvalidArgumentType) as caught:
        cellrate.web.Policy(CheckOnly(), charge=used)
    assert caught.value.param == "charge"


@pytest.mark.parametrize("figure", [-3, 2.5, float("nan"), True, "12.0", "-1", "many", [4]])
def test_a_figure_that_is_no_count_is_logged_and_settles_nothing(client_of, figure, caplog):
    """The core's rule, as in cellrate.nginx: the response has gone, so a bad
    figure from charge= neither raises into the server nor refunds what the
    request was charged at the door; it is logged (docs/design.md §10)."""
    tokens = limiter()
    client = client_of(tokens, cost=2, charge=lambda request, response: figure)
    with caplog.at_level("WARNING", logger="cellrate"):
        assert get(client, "/")[0] == 200
    assert remaining(tokens) == 98  # as charged at the door
    assert "charge: a count of units is a whole number >= 0" in caplog.text
    assert f"got {figure!r}" in caplog.text and "GET /" in caplog.text


def test_a_count_given_as_its_decimal_digits_is_settled(client_of):
    """A header's value passed on as it is: the count nginx reads, by the same rule."""
    tokens = limiter()
    client = client_of(tokens, cost=1, charge=lambda request, response: response.header("X-Usage"))
    assert get(client, "/?use=7")[0] == 200
    assert remaining(tokens) == 93
    assert get(client, "/?use=%2012%20")[0] == 200  # whitespace around the digits
    assert remaining(tokens) == 81


def test_adapters_that_never_see_a_response_end_refuse_charge():
    import cellrate.fastapi
    import cellrate.flask

    for make in (cellrate.fastapi.RateLimit, cellrate.flask.RateLimit):
        with pytest.raises(cellrate.InvalidArgument) as caught:
            make("10/s", charge=used)
        assert caught.value.param == "charge"


def test_one_bad_figure_costs_a_key_one_more_burst_and_is_logged(client_of, caplog):
    """An upstream reports 2**70 tokens: the charge is committed up to the store's
    max_debt (default: the burst) and logged; the key is refused for the debt (100
    units at 0.6 s, then one more), not for 146 years."""
    tokens = limiter()
    client = client_of(tokens, cost=1, charge=used)
    with caplog.at_level("WARNING", logger="cellrate"):
        assert get(client, f"/?use={2**70}")[0] == 200
    assert "debt bound" in caplog.text and "/" in caplog.text
    status, headers = get(client, "/")
    assert status == 429 and headers["Retry-After"] == "61"  # 101 units at 0.6 s: 60.6 s


def test_a_figure_above_max_cost_is_settled_as_max_cost_and_logged(client_of, caplog):
    tokens = cellrate.KeyedLimiter("100/minute", burst=100, max_cost=50)
    client = client_of(tokens, cost=1, charge=used)
    with caplog.at_level("WARNING", logger="cellrate"):
        assert get(client, f"/?use={2**70}")[0] == 200
    assert f"reported {2**70} units, above max_cost 50" in caplog.text
    assert remaining(tokens) == 50  # settled as 50: no debt at all
    with caplog.at_level("WARNING", logger="cellrate"):
        assert get(client, "/estimate?estimate=80")[0] == 200  # the endpoint's 81: 50 at most
    assert "charged 81 units, above max_cost 50" in caplog.text
    assert remaining(tokens) == 45  # then 5 used: 45 given back


def test_the_policy_passes_max_cost_and_max_debt_to_its_stores():
    policy = cellrate.web.Policy("100/minute", burst=100, max_cost=50, max_debt=5)
    store = policy.limits[0].store
    assert (store.max_cost, store.max_debt) == (50, 5)
    with pytest.raises(cellrate.InvalidArgument) as caught:
        cellrate.web.Policy(limiter(), max_debt=5)
    assert caught.value.param == "max_debt"  # a store you made carries its own
    with pytest.raises(cellrate.InvalidArgument) as caught:
        cellrate.web.Policy("100/minute", max_debt=-1)
    assert caught.value.param == "max_debt"
    with pytest.raises(cellrate.InvalidArgument) as caught:
        cellrate.web.Policy("100/minute", max_cost=101)
    assert caught.value.param == "burst"
