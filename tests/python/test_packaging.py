"""The build descriptions name every core source."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_rockspec_compiles_every_core_source():
    rockspec = (REPO / "lua" / "cellrate-0.1.0-1.rockspec").read_text()
    listed = set(re.findall(r'"((?:core|bindings)/[^"]+\.c)"', rockspec))
    wanted = {f"core/{p.name}" for p in (REPO / "core").glob("*.c")} | {"bindings/cellrate_lua.c"}
    assert listed == wanted
