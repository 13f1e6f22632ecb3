#!/bin/sh
# Makes (or brings up to date) a virtualenv from an interpreter and installs
# Python packages into it: the one place where the build and the tests pip
# install, so nothing goes into the interpreter itself.
#
#   tests/venv.sh BASE_PYTHON VENV [PIP_INSTALL_ARGS...]
#
# setuptools, wheel and build always (the extension and the wheels are
# built without build isolation), then PIP_INSTALL_ARGS (-r tests/requirements.txt,
# ...). A stamp per set of arguments (with the content of each -r file)
# records what was installed, so a second run asks pip nothing.
set -eu

if [ $# -lt 2 ]; then
    echo "usage: $0 BASE_PYTHON VENV [PIP_INSTALL_ARGS...]" >&2
    exit 2
fi
base=$1
venv=$2
shift 2

py="$venv/bin/python"
BASE_PKGS="setuptools>=64 wheel build"
if [ ! -x "$py" ] || ! "$py" -c 'import sys' 2>/dev/null; then
    rm -rf "$venv"
    "$base" -m venv "$venv"
fi

# What the stamp holds: the arguments and the content of every -r file.
want=$(
    echo "$BASE_PKGS $*"
    prev=""
    for arg in "$@"; do
        [ "$prev" = "-r" ] && cat "$arg"
        prev=$arg
    done
)
stamp="$venv/.cellrate-installed-$(echo "$want" | cksum | cut -d' ' -f1)"
[ -f "$stamp" ] && exit 0
echo "installing Python packages into $venv ($("$py" -c 'import platform; print(platform.python_version())'))"
"$py" -m pip install -q --disable-pip-version-check $BASE_PKGS "$@"
echo "$want" >"$stamp"
