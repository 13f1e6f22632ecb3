#!/bin/sh
# Builds a free-threaded CPython 3.13 (./configure --disable-gil) from the unpatched
# upstream tarball inside Debian trixie's python3.13 source package, and prints the
# interpreter's path on the last line of stdout.
#
# The source comes through a private apt configuration (its own sources list, state and
# cache under the cache folder), so the machine's own apt sources stay as they are.
# Everything is cached under $CELLRATE_FT_CACHE (default: .cache/free-threaded, ignored
# by git), so only the first run downloads and compiles (about 5 minutes on 2 cores).
#
# Exit status: 0 built or cached; 77 the source could not be had (the caller prints SKIP);
# anything else: the build itself failed.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${CELLRATE_FT_CACHE:-$ROOT/.cache/free-threaded}"
PREFIX="$CACHE/python"
PY="$PREFIX/bin/python3.13t"
DONE="$PREFIX/.built-by-cellrate"  # written last: an interrupted build is redone

if [ -f "$DONE" ]; then
    echo "$PY"
    exit 0
fi

APT="$CACHE/apt"
SRC="$CACHE/src"
mkdir -p "$APT/sources.list.d" "$APT/lists/partial" "$APT/cache/archives/partial" "$SRC"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    >"$APT/sources.list"
apt_private() {
    apt-get -q \
        -o Dir::Etc::SourceList="$APT/sources.list" \
        -o Dir::Etc::SourceParts="$APT/sources.list.d" \
        -o Dir::State="$APT" \
        -o Dir::State::Lists="$APT/lists" \
        -o Dir::State::status=/var/lib/dpkg/status \
        -o Dir::Cache="$APT/cache" \
        -o Debug::NoLocking=1 \
        -o APT::Sandbox::User="$(id -un)" \
        "$@"
}

tarball=$(ls "$SRC"/python3.13_*.orig.tar.xz 2>/dev/null | tail -n 1 || true)
if [ -z "$tarball" ]; then
    echo "fetching python3.13 source from Debian trixie (private apt configuration in $APT)" >&2
    if ! apt_private update >&2 || ! (cd "$SRC" && apt_private source --download-only python3.13 >&2); then
        echo "could not download the python3.13 source package from deb.debian.org (trixie)" >&2
        exit 77
    fi
    tarball=$(ls "$SRC"/python3.13_*.orig.tar.xz 2>/dev/null | tail -n 1 || true)
    [ -n "$tarball" ] || { echo "no upstream tarball in the python3.13 source package" >&2; exit 77; }
fi

work="$CACHE/work"
rm -rf "$work" "$PREFIX"
mkdir -p "$work"
echo "building free-threaded CPython from $(basename "$tarball") (log: $work/build.log)" >&2
tar -xf "$tarball" -C "$work"
srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'Python-3.13*' | head -n 1)
(
    cd "$srcdir"
    ./configure --disable-gil --disable-test-modules --prefix="$PREFIX" --with-ensurepip=install
    make -j"$(nproc)"
    make install
) >"$work/build.log" 2>&1 || { tail -n 30 "$work/build.log" >&2; echo "free-threaded CPython build failed" >&2; exit 1; }
rm -rf "$srcdir"
"$PY" -c 'import sysconfig; assert sysconfig.get_config_var("Py_GIL_DISABLED") == 1, "not a free-threaded build"'
echo "$(basename "$tarball")" >"$DONE"
echo "$PY"
