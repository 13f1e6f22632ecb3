"""The cross-face contract (docs/contract.md) through every Python web
adapter: each scenario of tests/vectors/contract.txt, on an explicit clock,
gives the status and exactly the fields it states, and a dry run logs each
would-be refusal. The same table runs through the Lua face
(tests/lua/contract_spec.lua) and through cellrate.nginx in a real nginx
(tests/nginx/test_contract.py)."""

import logging

import pytest

import cellrate
from contract_vectors import rate_fields, scenarios

pytest.importorskip("starlette", reason="make test installs starlette")
from test_web import FACES, Clock  # noqa: E402

START = 1000.0  # the scenario's 0 on the policy's clock


def store(kind, rate, burst):
    return (cellrate.KeyedLimiter if kind == "keyed" else cellrate.Limiter)(rate, burst=burst)


@pytest.mark.parametrize("face", FACES, ids=lambda face: face.__name__)
@pytest.mark.parametrize("scenario", scenarios(), ids=lambda scenario: scenario.name)
def test_scenario(face, scenario, caplog):
    clock = Clock(START)
    stores = [store(*limit) for limit in scenario.limits]
    current = {}
    app = face(stores if len(stores) > 1 else stores[0], now=clock,
               cost=lambda request: current["cost"], **scenario.options)
    dry_run = scenario.options.get("dry_run", False)
    for index, request in enumerate(scenario.requests):
        clock.t = START + request.now
        current["cost"] = request.cost
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="cellrate"):
            status, headers, _ = app.request()
        where = f"{scenario.name} request {index + 1}"
        assert status == request.status, where
        assert rate_fields(headers) == request.fields, where
        would_refuse = any("dry run: would refuse" in record.getMessage()
                           for record in caplog.records if record.name == "cellrate")
        assert (status == 200 and not would_refuse) == request.allowed, where
        assert would_refuse == (dry_run and not request.allowed), where
