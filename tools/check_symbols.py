"""`make symbols`: the libraries export exactly what they should.

    python3 tools/check_symbols.py --header core/cellrate.h --library build/libcellrate.so \
        --archive build/libcellrate.a --module build/lua5.4/cellrate.so ...

- the shared library exports exactly the functions that the header declares;
- the static archive gives default visibility to exactly those (internal
  functions shared between the core's sources are hidden);
- each Lua module exports only luaopen_cellrate (the core compiled into it
  stays hidden).

Exits 1 naming every difference (docs/design.md §13).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from typing import Set


def declared(header: str) -> Set[str]:
    """The functions a C header declares: comments and preprocessor lines
    (with their continuations) removed, then every `name(...);`."""
    with open(header) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    return set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*;", text))


def dynamic_exports(path: str) -> Set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRVWiu":
            names.add(parts[2].split("@")[0])
    return names


def archive_default_visibility(path: str) -> Set[str]:
    """Defined global symbols of default visibility in the archive's members."""
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(parts) == 8 and parts[4] in ("GLOBAL", "WEAK") and parts[5] == "DEFAULT" \
                and parts[6] != "UND":
            names.add(parts[7])
    return names


def compare(what: str, got: Set[str], want: Set[str]) -> bool:
    if got == want:
        print(f"symbols: {what}: {len(got)} exported, as declared")
        return True
    for name in sorted(got - want):
        print(f"symbols: {what} exports {name}, which it should not", file=sys.stderr)
    for name in sorted(want - got):
        print(f"symbols: {what} does not export {name}", file=sys.stderr)
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--header", required=True)
    parser.add_argument("--library", required=True)
    parser.add_argument("--archive", required=True)
    parser.add_argument("--module", action="append", default=[])
    args = parser.parse_args()

    api = declared(args.header)
    ok = bool(api) and all(name.startswith("cr_") for name in api)
    if not ok:
        print(f"symbols: {args.header}: no declarations, or some without the cr_ prefix: "
              f"{sorted(api)}", file=sys.stderr)
    ok &= compare(args.library, dynamic_exports(args.library), api)
    ok &= compare(args.archive, archive_default_visibility(args.archive), api)
    for module in args.module:
        ok &= compare(module, dynamic_exports(module), {"luaopen_cellrate"})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
