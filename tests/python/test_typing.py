"""The stub: mypy --strict accepts real use, rejects misuse, and matches the runtime."""

import os
import pathlib
import re
import runpy
import subprocess
import sys

import pytest

import cellrate

HERE = pathlib.Path(__file__).resolve().parent
USAGE = HERE / "typing_usage.py"

try:
    import mypy  # noqa: F401
except ImportError:  # a missing checker must not pass as a clean check
    pytest.fail("mypy is not installed (tests/requirements.txt; make deps)", pytrace=False)


@pytest.fixture(scope="module")
def mypy_env(tmp_path_factory):
    env = dict(os.environ)
    package_parent = pathlib.Path(cellrate.__file__).resolve().parent.parent
    # an in-place build (PYTHONPATH=python) is not in site-packages: point
    # mypy at it; an installed one mypy finds by itself
    if package_parent.name != "site-packages":
        env["MYPYPATH"] = str(package_parent)
    env["MYPY_CACHE_DIR"] = str(tmp_path_factory.mktemp("mypy-cache"))
    return env


def run_mypy(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        env=env,
        cwd=str(HERE),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_usage_passes_mypy_strict(mypy_env):
    result = run_mypy(mypy_env, "--strict", str(USAGE))
    assert result.returncode == 0, result.stdout + result.stderr


# Each line is a mistake the stub must catch.
MISUSE = """\
import cellrate, cellrate.asgi, cellrate.django, cellrate.fastapi, cellrate.flask, cellrate.prometheus, cellrate.web, cellrate.wsgi; from starlette.applications import Starlette
text: str = cellrate.Limiter(10).allow()
cellrate.Limiter(10).allow("1")
cellrate.Limiter(10).allow(1, 2.0)
cellrate.Limiter(10).check(now="soon")
cellrate.Limiter(10, 1.0, 5)
cellrate.Limiter([10])
cellrate.Limiter(10, burst=1.5)
cellrate.KeyedLimiter(10, capacity="many")
cellrate.KeyedLimiter(10).allow(5)
cellrate.KeyedLimiter(10).check()
whole: int = cellrate.Limiter(10).check().retry_after
cellrate.Limiter(10).rate = 2.0
cellrate.KeyedLimiter(10).evictions = 0
code: int = cellrate.InvalidArgument("message").param
cellrate.Decision(True, 1, 0.0, 0.0)
cellrate.Limiter(10).reset("key")
cellrate.KeyedLimiter(10).reset()
cellrate.Limiter(10).missing()
cellrate.Limiter(10).wait(timeout="soon")
cellrate.KeyedLimiter(10).wait()
cellrate.limit(10, block=None)
cellrate.limit(10, cost=1.5)
late: float = cellrate.RateLimited(cellrate.Limiter(1).peek()).decision
cellrate.Limiter(10).check().headers(legacy="yes")
number: int = cellrate.Limiter(10).check().window
cellrate.web.Policy("5/minute", shraed="/dev/shm/app")
cellrate.asgi.RateLimitMiddleware(Starlette(), "5/minute", burts=3)
Starlette().add_middleware(cellrate.asgi.RateLimitMiddleware, limit="5/minute", burts=3)
cellrate.wsgi.RateLimitMiddleware(lambda environ, start: [], "5/minute", shraed="/dev/shm/app")
cellrate.fastapi.RateLimit("5/minute", burts=3)
cellrate.flask.RateLimit("5/minute", exempt_path=["/health"])
cellrate.django.limit("5/minute", burts=3)
cellrate.flask.RateLimit("5/minute", burst="3")
cellrate.asgi.RateLimitMiddleware(Starlette(), "5/minute", dry_run="yes")
cellrate.web.Policy(limit=["5/minute", object()])
cellrate.Limiter(10, clock="realtime")
cellrate.KeyedLimiter(10, algorithm="fixed_window", clock="fast")
cellrate.Limiter(10).reserve(max_wait=1.0)
cellrate.prometheus.register(cellrate.Limiter(10), "api")
cellrate.prometheus.register(cellrate.Limiter(10), name="api", registry="global")
"""


def test_misuse_fails_mypy_strict(mypy_env, tmp_path):
    misuse = tmp_path / "misuse.py"
    misuse.write_text(MISUSE)
    result = run_mypy(mypy_env, "--strict", "--show-error-codes", str(misuse))
    assert result.returncode == 1, result.stdout + result.stderr
    flagged = {
        int(line.split(":")[1])
        for line in result.stdout.splitlines()
        if line.startswith(str(misuse)) and ": error:" in line
    }
    expected = set(range(2, MISUSE.count("\n") + 1))
    assert expected - flagged == set(), result.stdout


def test_stub_matches_runtime(mypy_env):
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "cellrate._cellrate"],
        env=mypy_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_usage_runs():
    runpy.run_path(str(USAGE), run_name="__main__")


def test_package_ships_its_typing_files():
    package = pathlib.Path(cellrate.__file__).resolve().parent
    assert (package / "py.typed").is_file()
    assert (package / "_cellrate.pyi").is_file()
    # compiled names in the stub; the pure-Python ones typed where they are defined
    typed = "".join((package / name).read_text()
                    for name in ("_cellrate.pyi", "_wait.py", "_decorator.py", "_concurrency.py",
                                 "_penalty.py"))
    for name in cellrate.__all__:
        assert re.search(rf"^(class|def) {name}\b|^{name}:", typed, re.M), name
