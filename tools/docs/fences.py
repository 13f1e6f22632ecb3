"""The fenced code blocks of a Markdown page, for the site's hook
(tools/docs/hooks.py) and the test that runs the runnable ones
(tests/python/test_docs.py).

A fence is three or more backticks or tildes; it closes at a line of at least
as many of the same character (so a ```` block may hold ``` lines). A block
is runnable when the line before its fence is `<!-- run -->` or
`<!-- run: NEEDS -->` (docs/contributing.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)")
MARKER = re.compile(r"^<!-- run(?::\s*([\w-]+))? -->\s*$")


@dataclass
class Block:
    lang: str
    code: str
    line: int  # 1-based, the opening fence
    run: Optional[str]  # None: not runnable; "": runnable; else what it needs ("redis")


def segments(text: str) -> Iterator[Tuple[bool, str]]:
    """The text cut into (fenced, chunk) pieces that join back into it; a
    fenced chunk runs from its opening fence line to its closing one."""
    lines = text.splitlines(keepends=True)
    start, i = 0, 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match.group(1)
        close = re.compile(rf"^{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if start < i:
            yield False, "".join(lines[start:i])
        yield True, "".join(lines[i:j + 1])
        start = i = j + 1
    if start < len(lines):
        yield False, "".join(lines[start:])


def blocks(text: str) -> List[Block]:
    found, line, previous = [], 1, ""
    for fenced, chunk in segments(text):
        if fenced:
            first, _, rest = chunk.partition("\n")
            body = rest.rsplit("\n", 2)[0] + "\n" if rest.count("\n") >= 1 else ""
            marker = MARKER.match(previous)
            found.append(Block(FENCE.match(first).group(2), body, line,
                               None if marker is None else (marker.group(1) or "")))
        else:
            previous = chunk.rstrip("\n").rsplit("\n", 1)[-1]
        line += chunk.count("\n")
    return found
