#!/bin/sh
# Installs what building and testing cellrate need, skipping what is present:
# Debian packages with apt-get (sudo when not root), Python packages into a
# virtualenv under the tree, never into the interpreter it is made from.
#
#   tests/install-deps.sh [test|demo]
#
# test (the default; `make deps`): every suite's tools.
# demo (`make demo`): a C compiler, Python's headers and Lua 5.4 only.
#
# Environment: VENV (default .venv), BASE_PYTHON (default python3), the
# interpreter the virtualenv is made from.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-test}
VENV=${VENV:-$ROOT/.venv}
BASE_PYTHON=${BASE_PYTHON:-python3}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# A C compiler and Lua 5.4 (the interpreter and its headers), for every mode.
apt_pkgs="lua5.4 liblua5.4-dev"
command -v cc >/dev/null 2>&1 || apt_pkgs="$apt_pkgs gcc libc6-dev"
# Debian's python3 keeps its headers in python3-dev; a pyenv or source build
# carries them.
if ! "$BASE_PYTHON" -c 'import os, sysconfig, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
    apt_pkgs="$apt_pkgs python3-dev"
fi
"$BASE_PYTHON" -c 'import ensurepip' 2>/dev/null || apt_pkgs="$apt_pkgs python3-venv"

if [ "$mode" = test ]; then
    # LuaJIT is OpenResty's branch (luajit2, libluajit2-5.1-dev): the one that
    # nginx's lua module (libnginx-mod-http-lua) runs, so the module is built and
    # tested against the LuaJIT its users have. Debian's own luajit and
    # libluajit-5.1-dev conflict with it: where they are present, installing
    # luajit2 in the same transaction replaces them (apt removes them), and the
    # check below makes sure the result is one working toolchain.
    # nginx, its lua module and lua-resty-core are the test bed of cellrate.nginx;
    # wrk drives it in the tests and in make bench. clang-format and lua-check
    # are make lint's; pkg-config reads the installed cellrate.pc.
    apt_pkgs="$apt_pkgs lua-busted luajit2 libluajit2-5.1-dev \
        clang libclang-rt-14-dev libfuzzer-14-dev \
        nginx libnginx-mod-http-lua lua-resty-core wrk \
        redis-server redis-sentinel redis-tools lua-redis lua-socket \
        clang-format lua-check pkg-config"
fi

need_apt=""
for pkg in $apt_pkgs; do
    installed "$pkg" || need_apt="$need_apt $pkg"
done
if [ -n "$need_apt" ]; then
    echo "installing Debian packages:$need_apt"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need_apt >/dev/null
fi

if [ "$mode" = test ]; then
    # One LuaJIT toolchain: the interpreter, the headers the module is built
    # against and nginx's lua module must all be OpenResty's branch.
    for pkg in luajit2 libluajit2-5.1-dev libnginx-mod-http-lua; do
        installed "$pkg" || { echo "install-deps: $pkg is not installed" >&2; exit 1; }
    done
    luajit -e 'assert(require("ffi"))' ||
        { echo "install-deps: luajit does not run" >&2; exit 1; }
    [ -f /usr/include/luajit-2.1/lua.h ] ||
        { echo "install-deps: no LuaJIT headers in /usr/include/luajit-2.1" >&2; exit 1; }
fi

# The virtualenv: the demo builds the extension in it (setuptools); the tests
# add tests/requirements.txt and the tools of make lint and make dist.
"$ROOT/tests/venv.sh" "$BASE_PYTHON" "$VENV" $([ "$mode" = test ] && echo \
    "-r $ROOT/tests/requirements.txt -r $ROOT/tools/requirements-tools.txt")
