"""The cross-face contract (docs/contract.md) through cellrate.nginx in a real
nginx: each scenario of tests/vectors/contract.txt gives the status and
exactly the fields it states, as the Python adapters
(tests/python/test_contract.py) and the Lua face (tests/lua/contract_spec.lua)
do. nginx decides on its own clock: every period in the table is 100 s or
more and a scenario's requests take well under a second, so no field, all
rounded up to whole seconds, moves; scenarios whose requests come at
different times ("clock") are left to the faces with an explicit now."""

from __future__ import annotations

import pathlib
import sys

import pytest

import cellrate.web

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from contract_vectors import rate_fields, scenarios  # noqa: E402

from server import Nginx  # noqa: E402

TEMPLATE = pathlib.Path(__file__).with_name("contract.conf.in")


@pytest.fixture(scope="module")
def server():
    with Nginx(workers=1, template=TEMPLATE) as running:
        yield running


@pytest.mark.parametrize("scenario", [s for s in scenarios() if not s.clock],
                         ids=lambda scenario: scenario.name)
def test_scenario(server, scenario):
    for index, request in enumerate(scenario.requests):
        status, headers, _ = server.get(f"/contract?scenario={scenario.name}"
                                        f"&cost={request.cost}")
        where = f"{scenario.name} request {index + 1}"
        assert status == request.status, where
        assert rate_fields(headers) == request.fields, where
    if scenario.options.get("dry_run"):
        refusals = sum(not request.allowed for request in scenario.requests)
        logged = [line for line in server.log().splitlines()
                  if "cellrate dry run: would refuse" in line
                  and f"scenario={scenario.name}&" in line]
        assert len(logged) == refusals


def test_a_body_without_content_type_is_sent_as_the_python_middleware_sends_it(server):
    """A refusal with a body and no content_type: the Python middleware's
    default content type (cellrate.web.Policy's)."""
    assert server.get("/body")[0] == 200
    status, headers, body = server.get("/body")
    assert (status, body) == (429, b"slow down\n")
    assert headers["Content-Type"] == cellrate.web.Policy("1/s", body="slow down\n").content_type


def test_every_option_of_cellrate_nginx_as_the_core_judges_it(server):
    """The Policy rows of tests/vectors/options.txt (the Lua face's) given to
    cellrate.nginx.limit inside nginx: taken, or refused in the core's words
    after "cellrate.nginx: " (the Python face's Policy: tests/python/test_options.py)."""
    status, _, body = server.get("/options")
    assert status == 200
    lines = body.decode().splitlines()
    assert lines[:-1] == []
    assert int(lines[-1].split()[0]) > 100
