#!/bin/sh
# Installs what building and testing cellrate need, skipping what is present.
set -eu

need_apt=""
for pkg in lua5.4 liblua5.4-dev lua-busted luajit2 libluajit2-5.1-dev; do
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

PYTHON="${PYTHON:-python3}"
need_pip=""
for mod in pytest hypothesis mypy setuptools wheel; do
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
