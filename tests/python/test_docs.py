"""Every reference to the design document resolves, and the docstring
examples run.

Code and docs cite sections of docs/design.md as "docs/design.md §N" (a list
may continue "§N and §M"); links into it use GitHub's heading anchors.
"""

import doctest
import pathlib
import re
import subprocess
import sys

import pytest

import cellrate

REPO = pathlib.Path(__file__).resolve().parents[2]
DESIGN_DOC = REPO / "docs" / "design.md"
HEADING = re.compile(r"^## §(\d+) (.+)$", re.M)
CITATION = re.compile(r"§(\d+)")
OLD_CITATION = re.compile(r"\bDESIGN(?:\.md)?\s+(?:§|sections?\b)")
ANCHOR_LINK = re.compile(r"docs/design\.md#([\w-]+)")


def tracked_text_files():
    try:
        names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    files = {}
    for name in names:
        path = REPO / name
        if not path.is_file():
            continue
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary (a chart)
    return files


def sections():
    return {int(number): title for number, title in HEADING.findall(DESIGN_DOC.read_text())}


def anchor(number, title):
    """GitHub's anchor for the heading "§N title": lower case, punctuation
    dropped (§ too), spaces to hyphens."""
    text = f"{number} {title}".lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_the_sections_are_numbered_in_order_without_gaps():
    numbers = [int(n) for n, _ in HEADING.findall(DESIGN_DOC.read_text())]
    assert numbers, "no '## §N' heading found in docs/design.md"
    assert numbers == list(range(1, len(numbers) + 1))


def test_every_cited_section_exists():
    known = sections()
    missing = []
    for name, text in tracked_text_files().items():
        for match in CITATION.finditer(text):
            if int(match.group(1)) not in known:
                line = text.count("\n", 0, match.start()) + 1
                missing.append(f"{name}:{line}: §{match.group(1)}")
    assert not missing, "cited sections that docs/design.md lacks:\n" + "\n".join(missing)


def test_the_scan_finds_citations():
    # The scan above would pass vacuously if it read nothing.
    files = tracked_text_files()
    cited = [name for name, text in files.items()
             if name != "docs/design.md" and "docs/design.md §" in text]
    assert "core/internal.h" in cited and "README.md" in files


def test_every_link_into_the_design_document_has_its_anchor():
    anchors = {anchor(n, t) for n, t in sections().items()}
    broken = [f"{name}: #{a}" for name, text in tracked_text_files().items()
              for a in ANCHOR_LINK.findall(text) if a not in anchors]
    assert not broken, "links to missing headings:\n" + "\n".join(broken)


def old_citations():
    return sorted(name for name, text in tracked_text_files().items()
                  if OLD_CITATION.search(text))


def test_nothing_cites_the_old_contract():
    # The old contract document is not in the repo: citing it resolves nowhere.
    stale = old_citations()
    assert not stale, "files citing the old contract instead of docs/design.md: " + ", ".join(stale)


# --------------------------------------------------------------------------
# Docstring examples


def run_examples(module):
    """Runs the >>> examples of `module`; returns how many ran."""
    results = doctest.testmod(module, verbose=False, report=True,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.failed == 0, f"{results.failed} docstring examples of {module.__name__} failed"
    return results.attempted


def test_the_package_docstring_examples_run():
    assert run_examples(cellrate) >= 3


def test_the_redis_docstring_example_runs(monkeypatch):
    # The example connects to Redis's default port; a test may use only a
    # server of its own on a free port, so redis.Redis is given that port as
    # its default while the example runs (the example's text is unchanged).
    redis = pytest.importorskip("redis")
    sys.path.insert(0, str(REPO / "tests" / "python"))
    from redis_servers import REDIS_CLI, REDIS_SERVER, redis_server

    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip("redis-server and redis-cli are installed by tests/install-deps.sh")
    import cellrate.redis

    with redis_server() as server:
        class ServerRedis(redis.Redis):
            def __init__(self, *args, port=server.port, **kwargs):
                super().__init__(*args, port=port, **kwargs)

        monkeypatch.setattr(redis, "Redis", ServerRedis)
        assert run_examples(cellrate.redis) >= 5


README = (REPO / "README.md").read_text(encoding="utf-8")


def test_decision_limit_is_called_the_burst_wherever_users_read_it():
    """Decision.limit is the burst, not the rate: its docstrings, the stub, and the README's
    Python and Lua paragraphs say so."""
    assert "burst" in cellrate.Decision.__doc__ and "not the rate" in cellrate.Decision.__doc__
    assert "burst" in cellrate.Decision.limit.__doc__
    stub = (REPO / "python" / "cellrate" / "_cellrate.pyi").read_text()
    assert re.search(r"def limit\(self\) -> int:\s+\"\"\"The burst", stub)
    assert "`limit` (the burst: units an idle key may spend at once, not the rate)" in README
    assert "`Decision.limit` is\n`info().burst` here: the burst" in README


def test_the_readme_says_how_plain_lua_finds_the_module():
    """The README's command after `make lua` runs (Lua 5.4) and finds the module."""
    lines = [line for line in README.splitlines()
             if line.startswith("LUA_CPATH='build/lua5.4/?.so;;'")]
    assert len(lines) == 1
    if not (REPO / "build" / "lua5.4" / "cellrate.so").exists():
        pytest.skip("make lua has not run")
    result = subprocess.run(lines[0], shell=True, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == cellrate.__version__


def test_the_readme_loads_nginx_modules_by_absolute_path():
    """A relative load_module path is read under nginx -p's prefix: the README's are absolute,
    and are where Debian installs the modules."""
    paths = re.findall(r"^load_module (\S+);", README, re.M)
    assert paths and all(path.startswith("/") for path in paths), paths
    if not pathlib.Path("/usr/lib/nginx/modules").is_dir():
        pytest.skip("no Debian nginx modules here")
    assert all(pathlib.Path(path).is_file() for path in paths), paths
