"""`make layers`: the core's units call only downward (docs/design/build.md, "Layers").

    python3 tools/check_layers.py --core core --objects build [--list]

A unit is a source core/NAME.c with its internal header core/NAME.h, or an
internal header alone (core/siphash.h). Unit A uses unit B when

- A's object (OBJECTS/NAME.o) leaves undefined a symbol that B's object
  defines (nm), or
- A's header names such a symbol outside its comments (an inline function's
  call, or a declaration: a header declares only its own unit's functions), or
- A's source or header includes B's header.

A cycle in that graph (A uses B and B uses A, directly or around) fails,
naming each step and its evidence. The public headers (core/cellrate.h and its
parts in core/cellrate/) declare and call nothing; they are held to including
only <stdint.h>, <stddef.h>, <stdbool.h> and sibling parts, without a cycle.
--list prints every unit with the units it uses, bottom layer first.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

PUBLIC_STD = {"stdint.h", "stddef.h", "stdbool.h"}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)

Evidence = Dict[Tuple[str, str], str]


def strip_comments(text: str) -> str:
    """C text without comments and string or character literals."""
    pattern = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: " " if m.group(0)[0] == "/" else '""', text)


def strip_comments_keep_includes(text: str) -> str:
    """Comments removed, string literals kept (an #include's "name" is one)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def nm(path: Path, *options: str) -> Set[str]:
    out = subprocess.run(["nm", *options, str(path)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


class Graph:
    def __init__(self) -> None:
        self.uses: Dict[str, Set[str]] = {}
        self.evidence: Evidence = {}

    def node(self, unit: str) -> None:
        self.uses.setdefault(unit, set())

    def edge(self, user: str, used: str, why: str) -> None:
        if user == used:
            return
        self.node(user)
        self.node(used)
        if used not in self.uses[user]:
            self.uses[user].add(used)
            self.evidence[(user, used)] = why

    def tangles(self) -> List[Set[str]]:
        """The strongly connected components of more than one unit (Tarjan)."""
        index: Dict[str, int] = {}
        low: Dict[str, int] = {}
        stack: List[str] = []
        found: List[Set[str]] = []

        def visit(unit: str) -> None:
            index[unit] = low[unit] = len(index)
            stack.append(unit)
            for used in sorted(self.uses[unit]):
                if used not in index:
                    visit(used)
                    low[unit] = min(low[unit], low[used])
                elif used in stack:
                    low[unit] = min(low[unit], index[used])
            if low[unit] == index[unit]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == unit:
                        break
                if len(component) > 1:
                    found.append(component)

        for unit in sorted(self.uses):
            if unit not in index:
                visit(unit)
        return found

    def shortest_cycle(self, component: Set[str]) -> List[str]:
        """A shortest cycle through the first unit of `component`: [a, ..., a]."""
        start = min(component)
        previous: Dict[str, str] = {}
        frontier = [start]
        while frontier:
            following = []
            for unit in frontier:
                for used in sorted(self.uses[unit] & component):
                    if used == start:
                        path = [unit]
                        while path[-1] != start:
                            path.append(previous[path[-1]])
                        return path[::-1] + [start]
                    if used not in previous:
                        previous[used] = unit
                        following.append(used)
            frontier = following
        raise AssertionError("a component without a cycle")

    def levels(self) -> Dict[str, int]:
        """Each unit's layer: 0 for a unit that uses none, else one above its highest."""
        level: Dict[str, int] = {}

        def of(unit: str) -> int:
            if unit not in level:
                level[unit] = 1 + max((of(used) for used in self.uses[unit]), default=-1)
            return level[unit]

        for unit in self.uses:
            of(unit)
        return level


def report_tangles(what: str, graph: Graph) -> bool:
    """Prints each set of units that use one another, with a shortest cycle
    through it and the evidence of each step; whether there was none."""
    tangles = graph.tangles()
    for component in tangles:
        cycle = graph.shortest_cycle(component)
        print(f"layers: {what}: a cycle among {len(component)} units ({', '.join(sorted(component))}),"
              f" e.g. {' -> '.join(cycle)}", file=sys.stderr)
        for user, used in zip(cycle, cycle[1:]):
            print(f"layers:   {user} uses {used}: {graph.evidence[(user, used)]}", file=sys.stderr)
    return not tangles


def check_public(core: Path) -> bool:
    """The umbrella and its parts include only the three standard headers and
    sibling parts, without a cycle."""
    ok = True
    graph = Graph()
    headers = [core / "cellrate.h"] + sorted((core / "cellrate").glob("*.h"))
    for header in headers:
        name = str(header.relative_to(core))
        graph.node(name)
        for form, target in INCLUDE.findall(strip_comments_keep_includes(header.read_text())):
            if form == "<" and target in PUBLIC_STD:
                continue
            sibling = (header.parent / target).resolve()
            if form == '"' and sibling in {h.resolve() for h in headers}:
                graph.edge(name, str(sibling.relative_to(core.resolve())), f"#include \"{target}\"")
                continue
            print(f"layers: core/{name} includes {form}{target}: a public header includes only "
                  "<stdint.h>, <stddef.h>, <stdbool.h> and its sibling parts", file=sys.stderr)
            ok = False
    return report_tangles("public headers", graph) and ok


def unit_graph(core: Path, objects: Path) -> Tuple[Graph, List[str]]:
    graph = Graph()
    problems = []
    sources = {p.stem: p for p in sorted(core.glob("*.c"))}
    headers = {p.stem: p for p in sorted(core.glob("*.h")) if p.name != "cellrate.h"}
    for unit in set(sources) | set(headers):
        graph.node(unit)

    # Who defines each symbol, from the objects.
    owner: Dict[str, str] = {}
    undefined: Dict[str, Set[str]] = {}
    for unit, source in sources.items():
        obj = objects / f"{unit}.o"
        if not obj.is_file() or obj.stat().st_mtime < source.stat().st_mtime:
            problems.append(f"{obj} is missing or older than {source} (make core)")
            continue
        for symbol in nm(obj, "--defined-only", "--extern-only"):
            owner[symbol] = unit
        undefined[unit] = nm(obj, "--undefined-only")
    for unit, symbols in undefined.items():
        for symbol in sorted(symbols):
            if symbol in owner:
                graph.edge(unit, owner[symbol], f"{unit}.o leaves {symbol} to {owner[symbol]}.o")

    # What the internal headers name and what every file includes.
    files = [(unit, path) for unit, path in sources.items()]
    files += [(unit, path) for unit, path in headers.items()]
    for unit, path in files:
        text = path.read_text()
        for form, target in INCLUDE.findall(strip_comments_keep_includes(text)):
            stem = Path(target).stem
            if form == '"' and Path(target).parent == Path(".") and stem in headers:
                graph.edge(unit, stem, f"core/{path.name} includes \"{target}\"")
        if path.suffix == ".h":
            for symbol in sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", strip_comments(text)))):
                if symbol in owner:
                    graph.edge(unit, owner[symbol],
                               f"core/{path.name} names {symbol} ({owner[symbol]}.o)")
    return graph, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", default="core", type=Path)
    parser.add_argument("--objects", default="build", type=Path)
    parser.add_argument("--list", action="store_true", help="print the layers")
    args = parser.parse_args()

    graph, problems = unit_graph(args.core, args.objects)
    for problem in problems:
        print(f"layers: {problem}", file=sys.stderr)
    ok = check_public(args.core) and not problems
    if not report_tangles("core units", graph) or not ok:
        return 1
    levels = graph.levels()
    if args.list:
        for unit in sorted(levels, key=lambda u: (levels[u], u)):
            uses = ", ".join(sorted(graph.uses[unit], key=lambda u: (-levels[u], u)))
            print(f"  {levels[unit]}  {unit:<10} {uses or '-'}")
    print(f"layers: {len(levels)} core units in {max(levels.values()) + 1} layers, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
