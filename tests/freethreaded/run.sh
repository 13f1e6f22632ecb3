#!/bin/sh
# `make test-ft`: the pytest suite (its concurrency tests included) on a
# free-threaded CPython 3.13 built by build-python.sh, with the GIL required to
# stay off: cellrate declares Py_MOD_GIL_NOT_USED, and an extension that does
# not would turn the GIL back on at import. Then keyed allow() on 1 and 2
# threads, for docs/operations.md (a measurement, not a test: it asserts nothing).
#
# Prints one SKIP line and succeeds when the interpreter's source (or the
# suite's Python packages) cannot be had; fails on anything else.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${CELLRATE_FT_CACHE:-$ROOT/.cache/free-threaded}"
export CELLRATE_FT_CACHE="$CACHE"
cd "$ROOT"

status=0
PY=$(nice tests/freethreaded/build-python.sh) || status=$?
if [ "$status" -eq 77 ]; then
    echo "SKIP test-ft: the python3.13 source package could not be downloaded from Debian trixie; free-threaded tests did not run"
    exit 0
elif [ "$status" -ne 0 ]; then
    exit "$status"
fi

VENV="$CACHE/venv"
VPY="$VENV/bin/python"
[ -x "$VPY" ] || "$PY" -m venv "$VENV"
need=""
for mod in pytest pytest_timeout hypothesis setuptools wheel prometheus_client; do
    "$VPY" -c "import $mod" 2>/dev/null || need="$need $mod"
done
# wheels only: the newest release of each that installs on 3.13t as a wheel
# (recent hypothesis and mypy need PyO3 builds, which 3.13t does not support)
if [ -n "$need" ] && ! "$VPY" -m pip install -q --disable-pip-version-check --only-binary :all: $need; then
    echo "SKIP test-ft: could not install$need into the free-threaded interpreter; free-threaded tests did not run"
    exit 0
fi

# PYTHON_GIL=0 would force the GIL off and hide an extension that needs it
unset PYTHON_GIL
CELLRATE_WERROR=1 nice "$VPY" -m pip install -q --disable-pip-version-check \
    --no-build-isolation --no-deps --force-reinstall .
"$VPY" - <<'PYEOF'
import sys, sysconfig
assert sysconfig.get_config_var("Py_GIL_DISABLED") == 1, "not a free-threaded interpreter"
import cellrate
assert not sys._is_gil_enabled(), "importing cellrate turned the GIL on"
print(f"test-ft: {sys.version.split()[0]} free-threaded, GIL off after import cellrate {cellrate.__version__}")
PYEOF
# What this run proves is the extension without the GIL: its threads, the
# shared regions, the stores' thread safety, the waits; every test that counts
# admissions under threads or processes runs here. What does not depend on the
# GIL ran on every interpreter of make test-py and is left to it:
# - tests/model: the reference model, pure Python of its own;
# - test_typing.py (the stub and mypy; on 3.13t mypy installs only uncompiled,
#   several times slower) and test_web_servers.py (uvicorn and gunicorn worker
#   processes: the web stack is not installed here; test_web*.py skip without
#   starlette);
# - CELLRATE_FREE_THREADED: the docs' blocks, the package's files and extras,
#   the command line, the examples' scripts, the benchmark's report, the
#   single-threaded differentials against the model (tests/python/conftest.py,
#   NOT_FREE_THREADED: skipped, with the reason);
# - CELLRATE_INTERPRETER_ONLY: the Lua rock's build.
# -P: the tree's top folder is not on sys.path (its redis/ scripts folder would be
# imported as a namespace package named redis where redis-py is not installed)
CELLRATE_INTERPRETER_ONLY=1 CELLRATE_FREE_THREADED=1 CELLRATE_REQUIRE_NO_GIL=1 nice "$VPY" -P -m pytest \
    -q -p no:cacheprovider --durations=5 \
    --ignore tests/python/test_typing.py --ignore tests/python/test_web_servers.py \
    tests/python
nice "$VPY" bench/python/ft_scaling.py
