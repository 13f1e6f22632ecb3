"""examples/llm_proxy.py as written: each API key keeps to its tokens a
minute, charged on the estimate and settled on the upstream's usage (a
stand-in upstream on loopback), refused with Retry-After while in debt."""

import importlib.util
import sys
import warnings

import pytest

from conftest import REPO

warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
pytest.importorskip("starlette", reason="make test installs starlette")
from starlette.testclient import TestClient  # noqa: E402

NOW = 5000.0  # the limits' clock, frozen: the budgets below are exact


@pytest.fixture
def proxy(monkeypatch):
    """(the example module, a client of its app); the upstream stopped after."""
    spec = importlib.util.spec_from_file_location("example_llm_proxy", REPO / "examples" / "llm_proxy.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    url, stop = module.start_upstream()
    try:
        yield module, TestClient(module.make_app(url, now=lambda: NOW))
    finally:
        stop()


def ask(client, key, max_tokens, prompt="one two three four"):
    return client.post("/v1/completions", json={"prompt": prompt, "max_tokens": max_tokens},
                       headers={"Authorization": f"Bearer {key}"})


def budget_left(module, key):
    return module.TOKENS.peek(key, 0, now=NOW).remaining


def test_a_completion_is_charged_what_the_upstream_reports(proxy):
    module, client = proxy
    reply = ask(client, "key-1", 1000)
    assert reply.status_code == 200
    used = reply.json()["usage"]["total_tokens"]
    assert used == 4 + 500 and reply.headers[module.USAGE_HEADER] == str(used)
    # 1 at the door and the estimate (18 // 4 + 1 + 1000) charged, then settled on the usage
    assert budget_left(module, "key-1") == module.TOKENS_PER_MINUTE - used
    assert budget_left(module, "key-2") == module.TOKENS_PER_MINUTE  # keys apart


def test_an_estimate_beyond_the_budget_is_refused_with_retry_after(proxy):
    module, client = proxy
    statuses = [ask(client, "key-1", module.MAX_TOKENS).status_code for _ in range(5)]
    assert statuses == [200] * 3 + [429] * 2  # 2004 tokens used each, of 10000; then 4007 > 3988
    assert budget_left(module, "key-1") == module.TOKENS_PER_MINUTE - 3 * 2004
    module.TOKENS.charge("key-1", 3000, now=NOW)  # 988 left
    refused = ask(client, "key-1", module.MAX_TOKENS)
    # in debt by 4007 - 988 once charged: one token more fits after 3020 * 6 ms
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "19"
    assert ask(client, "key-1", 10).status_code == 200  # a smaller one fits
    assert ask(client, "key-3", module.MAX_TOKENS).status_code == 200  # keys apart


def test_a_refused_estimate_costs_nothing(proxy):
    module, client = proxy
    assert ask(client, "key-1", module.MAX_TOKENS).status_code == 200
    left = budget_left(module, "key-1")
    module.TOKENS.charge("key-1", left - 100, now=NOW)  # 100 tokens left: a large estimate does not fit
    assert ask(client, "key-1", 500).status_code == 429
    assert budget_left(module, "key-1") == 100


def test_max_tokens_is_checked(proxy):
    module, client = proxy
    assert ask(client, "key-1", module.MAX_TOKENS + 1).status_code == 400
    assert ask(client, "key-1", 0).status_code == 400
    # a request's cost, prompt included, stays within max_cost: a longer prompt is refused
    assert ask(client, "key-1", module.MAX_TOKENS, prompt="x" * 16_000).status_code == 400
    assert budget_left(module, "key-1") == module.TOKENS_PER_MINUTE  # the door's unit given back
    with pytest.raises(cellrate_invalid()) as caught:
        module.cellrate.KeyedLimiter("1000/minute", max_cost=module.MAX_TOKENS)
    assert caught.value.param == "burst"


def cellrate_invalid():
    import cellrate

    return cellrate.InvalidArgument
