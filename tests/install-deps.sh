#!/bin/sh
# Installs what building and testing cellrate need, skipping what is present.
set -eu

# LuaJIT is OpenResty's branch (luajit2, libluajit2-5.1-dev): the one that
# nginx's lua module (libnginx-mod-http-lua) runs, so the module is built and
# tested against the LuaJIT its users have. Debian's own luajit and
# libluajit-5.1-dev conflict with it: where they are present, installing
# luajit2 in the same transaction replaces them (apt removes them), and the
# check at the end makes sure the result is one working toolchain.
# nginx, its lua module and lua-resty-core are the test bed of cellrate.nginx;
# wrk drives it in the tests and in make bench.
need_apt=""
for pkg in lua5.4 liblua5.4-dev lua-busted luajit2 libluajit2-5.1-dev \
    clang libclang-rt-14-dev libfuzzer-14-dev \
    nginx libnginx-mod-http-lua lua-resty-core wrk \
    redis-server redis-tools lua-redis lua-socket; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        need_apt="$need_apt $pkg"
done
if [ -n "$need_apt" ]; then
    echo "installing Debian packages:$need_apt"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need_apt >/dev/null
fi

# One LuaJIT toolchain: the interpreter, the headers the module is built
# against and nginx's lua module must all be OpenResty's branch.
for pkg in luajit2 libluajit2-5.1-dev libnginx-mod-http-lua; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        { echo "install-deps: $pkg is not installed" >&2; exit 1; }
done
luajit -e 'assert(require("ffi"))' ||
    { echo "install-deps: luajit does not run" >&2; exit 1; }
[ -f /usr/include/luajit-2.1/lua.h ] ||
    { echo "install-deps: no LuaJIT headers in /usr/include/luajit-2.1" >&2; exit 1; }

PYTHON="${PYTHON:-python3}"
need_pip=""
for mod in pytest hypothesis mypy setuptools wheel redis; do
    "$PYTHON" -c "import $mod" 2>/dev/null || need_pip="$need_pip $mod"
done
# the web integrations' tests: frameworks, their test clients, real servers
for pkg in starlette fastapi httpx flask uvicorn gunicorn django; do
    "$PYTHON" -c "import $pkg" 2>/dev/null || need_pip="$need_pip $pkg"
done
if [ -n "$need_pip" ]; then
    echo "installing Python packages:$need_pip"
    "$PYTHON" -m pip install -q $need_pip
fi
