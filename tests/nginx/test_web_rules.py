"""The web rules (tests/vectors/web.txt, written by tests/model/web_model.py)
inside nginx, through cellrate.nginx: the default key of an address as nginx
gives it (bytes), the status and prefix options, a count read by charge(),
and the fields a dry run leaves out. The C tests, pytest
(tests/python/test_web_rules.py) and busted (tests/lua/web_spec.lua) read
the same file."""

from __future__ import annotations

import pathlib

import pytest

from server import Nginx

TEMPLATE = pathlib.Path(__file__).with_name("web_rules.conf.in")
VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "web.txt"


def lines(kind: str) -> list[list[str]]:
    return [line.split() for line in VECTORS.read_text(encoding="utf-8").splitlines()
            if line.startswith(kind + " ")]


@pytest.fixture(scope="module")
def server():
    with Nginx(workers=1, template=TEMPLATE) as running:
        yield running


def test_the_lines_nginx_answers_hold_inside_nginx(server):
    status, _, body = server.get("/web_rules")
    assert status == 200, body
    said = body.decode().splitlines()
    kinds = ("bytes", "refusal_status", "prefix", "count")
    assert said == [f"checked {sum(len(lines(kind)) for kind in kinds)}"], said


def test_a_dry_run_leaves_out_the_fields_the_model_leaves_out(server):
    assert server.get("/dry_run")[0] == 200
    status, headers, _ = server.get("/dry_run")  # refused, admitted: a dry run
    assert status == 200
    for _, field, verdict in lines("dry_run"):
        assert (field in headers) == (verdict == "kept"), field
