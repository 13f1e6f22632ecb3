"""The quick starts under examples/ run as written: each is loaded fresh (with
CELLRATE_LIMIT lowered) and driven through its framework's test client."""

import importlib.util
import sys
import warnings

import pytest

from conftest import REPO

warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
pytest.importorskip("starlette", reason="make test installs starlette")
from starlette.testclient import TestClient  # noqa: E402
from werkzeug.test import Client  # noqa: E402

EXAMPLES = REPO / "examples"


def load(name, monkeypatch, limit):
    monkeypatch.setenv("CELLRATE_LIMIT", limit)
    monkeypatch.delenv("CELLRATE_REGION", raising=False)
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # Django's ROOT_URLCONF names it
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fresh_django():
    """Django's settings unconfigured, for the example that configures them as
    its project's, and as they were after."""
    from django.conf import settings
    from django.utils.functional import empty

    previous = settings._wrapped
    settings._wrapped = empty
    yield
    settings._wrapped = previous


def asgi_client(module):
    return TestClient(module.app)


def flask_client(module):
    return module.app.test_client()


def django_client(module):
    return Client(module.application)


CASES = [
    ("starlette_app", asgi_client),
    ("fastapi_app", asgi_client),
    ("flask_app", flask_client),
    ("django_app", django_client),
]


@pytest.mark.parametrize("name, client_of", CASES, ids=[c[0] for c in CASES])
def test_example_app_wide_limit(name, client_of, monkeypatch, fresh_django):
    client = client_of(load(name, monkeypatch, "3/hour"))
    responses = [client.get("/") for _ in range(5)]
    assert [r.status_code for r in responses] == [200, 200, 200, 429, 429]
    assert responses[3].headers["Retry-After"] == "1200"
    assert responses[3].headers["RateLimit"] == '"default";r=0;t=3600'
    if name == "django_app":  # /admin/* is exempt
        assert [client.get("/admin/status").status_code for _ in range(3)] == [200] * 3


@pytest.mark.parametrize("name, client_of", CASES, ids=[c[0] for c in CASES])
def test_example_login_route_limit(name, client_of, monkeypatch, fresh_django):
    client = client_of(load(name, monkeypatch, "1000/hour"))
    statuses = [client.post("/login").status_code for _ in range(7)]
    assert statuses == [200] * 5 + [429] * 2
    assert client.get("/").status_code == 200


def test_example_limit_on_all_clients_together(monkeypatch):
    """fastapi_app's /search: one Limiter, so every client address spends the
    one budget (each address here also has its own app-wide limit to spare)."""
    monkeypatch.setenv("CELLRATE_SEARCH_LIMIT", "3/hour")
    module = load("fastapi_app", monkeypatch, "1000/hour")
    statuses = [TestClient(module.app, client=(f"192.0.2.{i}", 40000)).get("/search").status_code
                for i in range(1, 6)]
    assert statuses == [200, 200, 200, 429, 429]
    assert TestClient(module.app, client=("192.0.2.9", 40000)).get("/").status_code == 200
