#!/bin/sh
# The package as users get it (docs/design.md §13).
#
#   tools/wheels/run.sh dist VERSION...   # dist/: the sdist, a manylinux wheel per interpreter
#   tools/wheels/run.sh test VERSION...   # the same wheels, each installed and tested
#
# VERSION is a CPython minor version (3.9, 3.13, ...): its interpreter is
# taken from pyenv ($PYENV_ROOT/versions/VERSION.*) or PATH (pythonVERSION);
# an absent one is skipped with one SKIP line. The sdist is built first and
# every wheel is built from it (so the sdist is complete), by `python -m
# build` on that interpreter, then repaired to a manylinux tag by auditwheel.
#
# test: each wheel is installed into a new virtualenv outside the tree, which
# sees the suite's packages (tests/requirements.txt, installed once per
# version in $VENV/pyVERSION) through a .pth file and nothing of the tree;
# tests/model and tests/python run from a temporary directory, with no
# PYTHONPATH, against the installed package (test_packaging.py checks where
# cellrate was imported from). Every version runs, then the status is non-zero
# if any failed. The wheels are built one after the other; the suites run
# CELLRATE_PY_JOBS at a time (default 2: a suite waits on its servers, clocks
# and child processes more than it computes), each one's output kept in a log
# and printed as it ends. The versions between the first and the last named
# run with CELLRATE_INTERPRETER_ONLY=1 and CELLRATE_SERVERS_ON_ENDS=1: the
# tests whose subject does not depend on the interpreter skip there, having run
# on the first and the last: the reference model (tests/model), the Lua rock
# built through the Makefile, the modules whose subject is a server the tests
# start (tests/python/conftest.py, SERVER_MODULES) and the long tests marked
# on_ends, whose subject is the core's (the SIGKILL storms on a shared region).
#
# The first and the last are built and started first, and a suite starts as
# soon as any running one ends: the two long suites run side by side and the
# short ones fill the slot each frees (started in the order named, the oldest
# running one waited for first, the 3.9 and the 3.13 suites ran one after the
# other, each beside short ones: a third longer in all).
#
# Environment: VENV (default .venv, made from BASE_PYTHON: its auditwheel repairs, its python builds
# the sdist), CELLRATE_WERROR (passed to setup.py), CELLRATE_PY_JOBS.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
if [ $# -lt 1 ] || { [ "$1" != dist ] && [ "$1" != test ]; }; then
    echo "usage: $0 dist|test VERSION..." >&2
    exit 2
fi
mode=$1
shift

work=$(mktemp -d "${TMPDIR:-/tmp}/cellrate-wheels.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
if [ "$mode" = dist ]; then
    out="$ROOT/dist"
    rm -rf "$out"
else
    out="$work/dist"
fi
mkdir -p "$out"

# The interpreter of CPython VERSION with the GIL (the free-threaded build is
# make test-ft's), newest patch release first.
find_python() {
    for py in $(ls -d "$PYENV_ROOT"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -V -r) \
        $(command -v "python$1" || true); do
        "$py" -c "import sys, sysconfig
assert '%d.%d' % sys.version_info[:2] == '$1' and not sysconfig.get_config_var('Py_GIL_DISABLED')" \
            2>/dev/null && { echo "$py"; return 0; }
    done
    return 1
}

"$ROOT/tests/venv.sh" "${BASE_PYTHON:-python3}" "$VENV" >/dev/null
"$VENV/bin/python" -m build --sdist --no-isolation --outdir "$out" "$ROOT" >"$work/sdist.log" 2>&1 ||
    { cat "$work/sdist.log" >&2; exit 1; }
sdist=$(ls "$out"/cellrate-*.tar.gz)
tar -xzf "$sdist" -C "$work"
src=$(ls -d "$work"/cellrate-*/)
echo "sdist: $(basename "$sdist")"

failed=""
passed=""
jobs=${CELLRATE_PY_JOBS:-2}
running=""  # the versions whose suite runs in the background
first=${1:-}
eval "last=\${$#}"

# Waits until any running suite ends (each writes the time it ended, then its
# exit status to status-VERSION: sh's wait cannot wait for whichever of
# several ends first),
# prints its log and counts it.
finish() {
    ended=""
    while [ -z "$ended" ]; do
        for v in $running; do
            if [ -s "$work/status-$v" ]; then ended=$v; break; fi
        done
        [ -n "$ended" ] || sleep 1
    done
    left=""
    for v in $running; do
        [ "$v" = "$ended" ] || left="$left${left:+ }$v"
    done
    running=$left
    wait "$(cat "$work/pid-$ended")" || true
    if [ "$(cat "$work/status-$ended")" = 0 ]; then passed="$passed $ended"; else failed="$failed $ended"; fi
    cat "$work/test-$ended.log"
    echo "python$ended: its suite took $(($(cat "$work/ended-$ended") - $(cat "$work/started-$ended"))) s"
}

# The first and the last named, then the others in the order named.
order="$first"
[ "$last" = "$first" ] || order="$order $last"
for version in "$@"; do
    [ "$version" = "$first" ] || [ "$version" = "$last" ] || order="$order $version"
done

for version in $order; do
    if ! py=$(find_python "$version"); then
        echo "SKIP python$version: no CPython $version under $PYENV_ROOT/versions or on PATH"
        continue
    fi
    deps="$VENV/py$version"
    if [ "$mode" = test ]; then
        "$ROOT/tests/venv.sh" "$py" "$deps" -r "$ROOT/tests/requirements.txt"
    else
        "$ROOT/tests/venv.sh" "$py" "$deps"
    fi
    raw="$work/raw-$version"
    (cd "$src" && "$deps/bin/python" -m build --wheel --no-isolation --outdir "$raw" .) \
        >"$work/build-$version.log" 2>&1 || { cat "$work/build-$version.log" >&2; exit 1; }
    PATH="$VENV/bin:$PATH" "$VENV/bin/auditwheel" repair --wheel-dir "$out" "$raw"/*.whl >"$work/repair-$version.log" 2>&1 ||
        { cat "$work/repair-$version.log" >&2; exit 1; }
    wheel=$(ls "$out"/cellrate-*-cp$(echo "$version" | tr -d .)-*.whl)
    echo "python$version: $(basename "$wheel")"
    [ "$mode" = test ] || continue

    target="$work/venv-$version"
    "$py" -m venv "$target"
    "$target/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-index "$wheel"
    "$deps/bin/python" -c 'import sysconfig; p = sysconfig.get_paths()
print(p["purelib"]); print(p["platlib"])' \
        >"$("$target/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/cellrate-test-deps.pth"
    only=""
    [ "$version" = "$first" ] || [ "$version" = "$last" ] || only=1
    while [ "$(echo "$running" | wc -w)" -ge "$jobs" ]; do finish; done
    echo "python$version: testing${only:+ (CELLRATE_INTERPRETER_ONLY)}, output when it ends"
    date +%s >"$work/started-$version"
    status="$work/status-$version"
    { (cd "$work" && if [ -n "$only" ]; then set -- "$ROOT/tests/python"; else
        set -- "$ROOT/tests/model" "$ROOT/tests/python"; fi &&
        exec env -u PYTHONPATH CELLRATE_INSTALLED_IN="$target" CELLRATE_WHEEL="$wheel" \
        CELLRATE_INTERPRETER_ONLY="$only" CELLRATE_SERVERS_ON_ENDS="$only" "$target/bin/python" -m pytest \
        -q -p no:cacheprovider --rootdir "$ROOT" -c "$ROOT/pyproject.toml" \
        "$@") >"$work/test-$version.log" 2>&1 </dev/null && code=0 || code=$?
        date +%s >"$work/ended-$version"
        echo "$code" >"$status"; } &
    echo $! >"$work/pid-$version"
    running="$running${running:+ }$version"
done
while [ -n "$running" ]; do finish; done

[ "$mode" = test ] || { echo "dist/:"; ls "$out"; exit 0; }
echo "python versions passed:${passed:- none}; failed:${failed:- none}"
[ -z "$failed" ] && [ -n "$passed" ]
