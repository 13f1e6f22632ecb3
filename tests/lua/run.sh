#!/bin/sh
# Runs the busted specs of tests/lua under one interpreter, with the cellrate
# module found in CPATH_DIR. Builds nothing.
#
#   tests/lua/run.sh INTERPRETER CPATH_DIR [BUSTED_ARGS...]
#
#   tests/lua/run.sh lua5.4 build/lua5.4
#   tests/lua/run.sh luajit build/luajit
#   tests/lua/run.sh lua5.4 build/lua5.4 tests/lua/api_spec.lua
#   tests/lua/run.sh "valgrind -q --error-exitcode=1 --leak-check=full lua5.4" build/lua5.4
#
# INTERPRETER may carry arguments (it is split on spaces). Debian's busted is
# a Lua script whose libraries exist for every Lua version, so it runs under
# whichever interpreter is named. BUSTED_ARGS default to tests/lua, which runs
# every *_spec.lua there.
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 INTERPRETER CPATH_DIR [BUSTED_ARGS...]" >&2
    exit 2
fi
interpreter=$1
cpath_dir=$2
shift 2

root=$(cd "$(dirname "$0")/../.." && pwd)
cpath_dir=$(cd "$cpath_dir" && pwd)
busted=$(command -v busted) || { echo "busted not found (apt-get install lua-busted)" >&2; exit 2; }
if [ ! -f "$cpath_dir/cellrate.so" ]; then
    echo "no cellrate.so in $cpath_dir" >&2
    exit 2
fi
if [ $# -eq 0 ]; then
    set -- tests/lua
fi

cd "$root"
# The module directory goes first on the C path, ahead of any installed copy.
# A run that finds no spec is a failure, not a pass.
log=$(mktemp)
# The regions the specs make go into a directory of this run's own, so two
# runs at once (Lua 5.4 and LuaJIT, two checkouts) never share a path.
CELLRATE_TEST_DIR=$(mktemp -d)
export CELLRATE_TEST_DIR
trap 'rm -f "$log"; rm -rf "$CELLRATE_TEST_DIR"' EXIT
status=0
# shellcheck disable=SC2086  # INTERPRETER is a command line on purpose
$interpreter "$busted" --cpath="$cpath_dir/?.so" "$@" >"$log" 2>&1 || status=$?
cat "$log"
if ! grep -Eq '^[1-9][0-9]* successes' "$log"; then
    echo "busted ran no test" >&2
    exit 1
fi
exit "$status"
