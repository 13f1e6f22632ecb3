"""`make symbols`: the libraries export exactly what they should.

    python3 tools/check_symbols.py --header core/cellrate.h --library build/libcellrate.so \
        --archive build/libcellrate.a --module build/lua5.4/cellrate.so ...

- the shared library exports exactly the functions that the header declares,
  in the parts it includes (#include "cellrate/limit.h"), followed from it;
- every header beside those parts (core/cellrate/*.h) is one of them, so a
  part is not left out of the umbrella;
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
from pathlib import Path
from typing import List, Set, Tuple


def parts(header: str) -> List[Path]:
    """The header and every header it includes as "name" (found beside the
    including file, as the compiler finds it), each once, in order."""
    found: List[Path] = []

    def visit(path: Path) -> None:
        if path in found:
            return
        found.append(path)
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", path.read_text(), flags=re.S)
        for name in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', text, flags=re.M):
            visit((path.parent / name).resolve())

    visit(Path(header).resolve())
    return found


def declared(header: Path) -> Set[str]:
    """The functions a C header declares: comments and preprocessor lines
    (with their continuations) removed, then every `name(...);`."""
    text = header.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    return set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*;", text))


def api(header: str) -> Tuple[Set[str], List[str]]:
    """What the header and its parts declare, and the headers beside its parts
    that it does not include."""
    included = parts(header)
    names: Set[str] = set()
    for path in included:
        names |= declared(path)
    folders = {path.parent for path in included[1:]}
    left_out = sorted(str(path) for folder in folders for path in folder.glob("*.h")
                      if path.resolve() not in included)
    return names, left_out


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

    names, left_out = api(args.header)
    ok = bool(names) and all(name.startswith("cr_") for name in names)
    if not ok:
        print(f"symbols: {args.header}: no declarations, or some without the cr_ prefix: "
              f"{sorted(names)}", file=sys.stderr)
    for path in left_out:
        print(f"symbols: {path} is a part that {args.header} does not include", file=sys.stderr)
        ok = False
    ok &= compare(args.library, dynamic_exports(args.library), names)
    ok &= compare(args.archive, archive_default_visibility(args.archive), names)
    for module in args.module:
        ok &= compare(module, dynamic_exports(module), {"luaopen_cellrate"})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
