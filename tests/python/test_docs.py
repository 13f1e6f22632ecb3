"""Every reference to the design document resolves, the docstring examples
run, and so does every runnable code block of the documentation.

Code and docs cite sections of the design as "docs/design.md §N" (a list may
continue "§N and §M"): docs/design.md is the index, and each §N is a page of
its own under docs/design/, headed "# §N title"; links into a part use
GitHub's heading anchors. A fenced python or lua block after the comment
`<!-- run -->` in README.md or a page under docs/ is run here
(docs/contributing.md, "Runnable examples").
"""

import ast
import doctest
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import cellrate

REPO = pathlib.Path(__file__).resolve().parents[2]
DESIGN_DOC = REPO / "docs" / "design.md"
DESIGN_PARTS = REPO / "docs" / "design"
HEADING = re.compile(r"^# §(\d+) (.+)$", re.M)
CONTENTS = re.compile(r"^- \[§(\d+) (.+)\]\(design/([\w-]+\.md)\)$", re.M)
CITATION = re.compile(r"§(\d+)")
OLD_CITATION = re.compile(r"\bDESIGN(?:\.md)?\s+(?:§|sections?\b)")
ANCHOR_LINK = re.compile(r"\bdesign(?:\.md|/([\w-]+\.md))#([\w-]+)")

sys.path.insert(0, str(REPO / "tools" / "docs"))
import fences  # noqa: E402  (tools/docs/fences.py: the blocks of a Markdown page)


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


def parts():
    """{file name: (number, title)} of the design's parts under docs/design/."""
    found = {}
    for path in sorted(DESIGN_PARTS.glob("*.md")):
        headings = HEADING.findall(path.read_text())
        assert len(headings) == 1, f"{path.name}: one '# §N title' heading, not {len(headings)}"
        found[path.name] = (int(headings[0][0]), headings[0][1])
    return found


def sections():
    return {number: title for number, title in parts().values()}


def anchor(number, title):
    """GitHub's anchor for the heading "§N title": lower case, punctuation
    dropped (§ too), spaces to hyphens."""
    text = f"{number} {title}".lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_the_sections_are_numbered_in_order_without_gaps():
    numbers = sorted(sections())
    assert numbers, "no '# §N' heading found under docs/design/"
    assert numbers == list(range(1, len(numbers) + 1))
    assert len(numbers) == len(parts()), "two parts share a number"


def test_the_design_index_lists_every_part_in_order():
    listed = [(int(n), title, name) for n, title, name in CONTENTS.findall(DESIGN_DOC.read_text())]
    assert listed == sorted((n, title, name) for name, (n, title) in parts().items())


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
    assert "core/decide.h" in cited and "README.md" in files


def test_the_design_map_has_a_line_for_every_core_file():
    # docs/design.md's map of the core: one line per tracked file of core/,
    # each named once, and no line for a file that is gone
    block = re.search(r"^```text\n(core/.*?)^```", DESIGN_DOC.read_text(), re.M | re.S)
    assert block, "docs/design.md: no map of core/ (a text block of core/... lines)"
    listed = [line.split()[0] for line in block.group(1).splitlines() if line.strip()]
    tracked = sorted(name for name in tracked_text_files() if name.startswith("core/"))
    assert sorted(listed) == tracked


def heading_anchors(path):
    """GitHub's anchors of a page's headings (outside its code blocks)."""
    text = "".join(chunk for fenced, chunk in fences.segments(path.read_text()) if not fenced)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
            for title in re.findall(r"^#+ (.+)$", text, re.M)}


def test_every_link_into_the_design_document_has_its_anchor():
    # The site's pages are checked by the strict build too (make docs); this
    # also covers the sources, which the site does not carry.
    known = {path.name: heading_anchors(path) for path in DESIGN_PARTS.glob("*.md")}
    broken = [f"{name}: {part or 'design.md'}#{a}" for name, text in tracked_text_files().items()
              for part, a in ANCHOR_LINK.findall(text) if a not in known.get(part, ())]
    assert not broken, "links to missing headings:\n" + "\n".join(broken)


def test_the_anchor_scan_finds_links():
    # The scan above would pass vacuously if it matched nothing.
    assert any(ANCHOR_LINK.search(text) for text in tracked_text_files().values())


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


@pytest.fixture
def redis_of_our_own(monkeypatch):
    """redis.Redis() and redis.asyncio.Redis() connect to a server of the test's own.

    The examples connect to Redis's default port; a test may use only a server
    of its own on a free port, so the clients are given that port as their
    default while an example runs (the example's text is unchanged). The
    store is imported first: it takes the clients' classes it accepts at
    import."""
    pytest.importorskip("redis")
    import redis
    import redis.asyncio

    import cellrate.redis  # noqa: F401

    sys.path.insert(0, str(REPO / "tests" / "python"))
    from redis_servers import REDIS_CLI, REDIS_SERVER, redis_server

    if REDIS_SERVER is None or REDIS_CLI is None:
        pytest.skip("redis-server and redis-cli are installed by tests/install-deps.sh")
    with redis_server() as server:
        for module in (redis, redis.asyncio):
            base = module.Redis

            class ServerRedis(base):
                def __init__(self, *args, port=server.port, _base=base, **kwargs):
                    _base.__init__(self, *args, port=port, **kwargs)

            monkeypatch.setattr(module, "Redis", ServerRedis)
        yield


def test_the_redis_docstring_example_runs(redis_of_our_own):
    import cellrate.redis

    assert run_examples(cellrate.redis) >= 5


def test_the_share_docstring_example_runs(redis_of_our_own):
    import cellrate.share

    assert run_examples(cellrate.share) >= 3


def page(name):
    return (REPO / "docs" / name).read_text(encoding="utf-8")


def test_decision_limit_is_called_the_burst_wherever_users_read_it():
    """Decision.limit is the burst, not the rate: its docstrings, the stub, and the Python
    and Lua pages say so."""
    assert "burst" in cellrate.Decision.__doc__ and "not the rate" in cellrate.Decision.__doc__
    assert "burst" in cellrate.Decision.limit.__doc__
    stub = (REPO / "python" / "cellrate" / "_cellrate.pyi").read_text()
    assert re.search(r"def limit\(self\) -> int:\s+\"\"\"The burst", stub)
    assert "`limit` (the burst: units an idle key may spend at once, not the rate)" in page("python.md")
    assert "`Decision.limit` is\n`info().burst` here: the burst" in page("lua.md")


def test_the_lua_page_says_how_plain_lua_finds_the_module():
    """The Lua page's command after `make lua` runs (Lua 5.4) and finds the module."""
    lines = [line for line in page("lua.md").splitlines()
             if line.startswith("LUA_CPATH='build/lua5.4/?.so;;'")]
    assert len(lines) == 1
    if not (REPO / "build" / "lua5.4" / "cellrate.so").exists():
        pytest.skip("make lua has not run")
    result = subprocess.run(lines[0], shell=True, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == cellrate.__version__


def test_the_nginx_page_loads_nginx_modules_by_absolute_path():
    """A relative load_module path is read under nginx -p's prefix: the nginx page's are
    absolute, and are where Debian installs the modules."""
    paths = re.findall(r"^load_module (\S+);", page("nginx.md"), re.M)
    assert paths and all(path.startswith("/") for path in paths), paths
    if not pathlib.Path("/usr/lib/nginx/modules").is_dir():
        pytest.skip("no Debian nginx modules here")
    assert all(pathlib.Path(path).is_file() for path in paths), paths


def test_the_readme_links_every_page():
    """A newcomer finds every guide page from the README (the site's nav lists
    them too, but GitHub shows the README alone)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    unlinked = [path.name for path in sorted((REPO / "docs").glob("*.md"))
                if f"](docs/{path.name})" not in readme and f"](docs/{path.name}#" not in readme]
    assert not unlinked, f"pages the README does not link: {unlinked}"


def test_the_web_options_table_has_every_policy_option():
    """docs/web.md's options table names each option of cellrate.web.Policy, the
    options every Python adapter takes."""
    import inspect

    import cellrate.web

    options = set(inspect.signature(cellrate.web.Policy.__init__).parameters) - {"self"}
    text = page("web.md")
    table = text[text.index("## Options"):]
    rows = re.findall(r"^\| ([^|]+) \|", table, re.M)
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row)}
    assert options <= named, f"options web.md's table lacks: {sorted(options - named)}"


def test_the_readme_speed_claim_is_the_measured_one():
    """The README says a Python decision costs less than time.monotonic_ns() and runs at more
    than ten times the fastest pure-Python peer on one limit, three times on 100k keys: the
    table bench/report.py wrote into docs/performance.md (the last make bench) must say so."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "less than a call of `time.monotonic_ns()`" in readme
    assert ("more than ten times the throughput of the fastest pure-Python rate limiter on one "
            "limit, and more than three times on 100,000 keys") in readme
    assert "[the measurements](docs/performance.md)" in readme
    table = page("performance.md")
    # a ratio may be followed by its spread, "(0.46–0.72)"
    floor = re.search(r"^\| Python: Limiter\.allow\(\) \|.*anchor to beat: time\.monotonic_ns\(\)"
                      r".*\| ([\d.]+)x the time[^|]*\|$", table, re.M)
    peers = re.findall(r"^\| Python: .*fastest Python peer.*\| ([\d.]+)x the throughput[^|]*\|$",
                       table, re.M)
    assert floor and float(floor.group(1)) < 1, "the headline table lost the clock floor row"
    assert len(peers) == 2 and float(peers[0]) > 10 and float(peers[1]) > 3, peers


def test_the_benchmark_report_writes_the_performance_page_not_the_readme(tmp_path):
    """bench/report.py puts its headline table between the Performance page's markers;
    the README holds no table to rewrite, and the report names no README to write."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_report", REPO / "bench" / "report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    source = (REPO / "bench" / "report.py").read_text()
    assert 'os.path.join(root, "docs", "performance.md")' in source and '"README.md"' not in source
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert report.PAGE_BEGIN not in readme and report.PAGE_END not in readme
    text = page("performance.md")
    assert text.count(report.PAGE_BEGIN) == 1 and text.count(report.PAGE_END) == 1
    copy = tmp_path / "performance.md"
    copy.write_text(text)
    assert report.update_page(str(copy), "| new | table |")
    written = copy.read_text()
    before, after = text.split(report.PAGE_BEGIN)[0], text.split(report.PAGE_END)[1]
    assert written == f"{before}{report.PAGE_BEGIN}\n| new | table |\n{report.PAGE_END}{after}"


# --------------------------------------------------------------------------
# The documentation's runnable blocks


def doc_pages():
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def runnable_blocks():
    found = []
    for path in doc_pages():
        for block in fences.blocks(path.read_text(encoding="utf-8")):
            if block.run is not None:
                assert block.lang in ("python", "lua"), \
                    f"{path.name}:{block.line}: a runnable block is python or lua, not {block.lang!r}"
                assert block.run in ("", "redis"), f"{path.name}:{block.line}: run: {block.run}?"
                found.append(pytest.param(path.relative_to(REPO).as_posix(), block,
                                          id=f"{path.relative_to(REPO).as_posix()}:{block.line}"))
    return found


RUNNABLE = runnable_blocks()


def test_the_readme_and_each_face_have_runnable_examples():
    marked = {(name, block.lang) for name, block in (p.values for p in RUNNABLE)}
    assert {("README.md", "python"), ("README.md", "lua"), ("docs/python.md", "python"),
            ("docs/lua.md", "lua")} <= marked, sorted(marked)
    # each face page's first example of its language is the runnable one
    for name, lang in (("python.md", "python"), ("lua.md", "lua")):
        first = next(b for b in fences.blocks(page(name)) if b.lang == lang)
        assert first.run == "", f"docs/{name}: the first {lang} block is not marked runnable"


def absent_modules(code):
    """The top-level modules a block imports that this interpreter does not have (the
    free-threaded run installs no framework, no Redis client, no gRPC)."""
    if code.lstrip().startswith(">>>"):
        sources = [example.source for example in doctest.DocTestParser().get_examples(code)]
    else:
        sources = [code]
    absent = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            absent.update(root for root in (n.split(".")[0] for n in names)
                          if importlib.util.find_spec(root) is None)
    return sorted(absent)


def run_python_block(name, block):
    filename = f"{name}:{block.line}"
    absent = absent_modules(block.code)
    if absent:
        pytest.skip(f"{filename} imports {', '.join(absent)}, not installed here")
    if block.code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(block.code, {"__name__": "__docs__"},
                                                   filename, filename, block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        assert runner.failures == 0, f"{filename}: {runner.failures} examples failed"
    else:
        exec(compile(block.code, filename, "exec"), {"__name__": "__docs__"})


def run_lua_block(name, block, tmp_path):
    lua = shutil.which("lua5.4")
    if lua is None or not (REPO / "build" / "lua5.4" / "cellrate.so").exists():
        pytest.skip("lua5.4 and make lua's build/lua5.4/cellrate.so run the Lua blocks")
    script = tmp_path / f"{pathlib.PurePath(name).stem}_{block.line}.lua"
    script.write_text(block.code)
    env = dict(os.environ, LUA_CPATH="build/lua5.4/?.so;;", LUA_PATH="lua/?.lua;;")
    result = subprocess.run([lua, str(script)], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, f"{name}:{block.line}:\n{result.stderr}"


@pytest.mark.parametrize("name, block", RUNNABLE)
def test_a_runnable_block_runs(name, block, tmp_path, request):
    if block.run == "redis":
        request.getfixturevalue("redis_of_our_own")
    if block.lang == "python":
        run_python_block(name, block)
    else:
        run_lua_block(name, block, tmp_path)
