#!/usr/bin/env bash
# `make bench`: installs the peers into bench/.peers/ (ignored), builds the
# harnesses, runs every scenario one after another (never two at once), and
# writes bench/results/{results.md,chart.png,machine.txt,performance.md} and the
# table of docs/performance.md (report.py; never the README); the raw JSON lines
# of each harness go to bench/results/raw/ (ignored).
#
# Environment: BENCH_REPS (timed runs per scenario, median; default 5, at
# least 5 for published numbers), PYTHON (default python3), CC (default cc).
set -euo pipefail

BENCH=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$BENCH")
PEERS="$BENCH/.peers"
RAW="$BENCH/results/raw"
REPS=${BENCH_REPS:-5}
PYTHON=${PYTHON:-python3}
CC=${CC:-cc}
VENV="$PEERS/venv"
VPY="$VENV/bin/python"

# Each step's start (seconds since the epoch) goes to raw/steps.txt: report.py
# writes the run's wall time, and its longest steps, into machine.txt.
step() {
    printf '\n== %s\n' "$*" >&2
    printf '%s %s\n' "$(date +%s)" "$*" >> "$RAW/steps.txt"
}

cd "$ROOT"
mkdir -p "$PEERS/bin" "$RAW"
rm -f "$RAW"/*.jsonl "$RAW"/*.txt

step "cellrate: core library and Lua modules"
make --no-print-directory core lua >&2

step "peers: Python virtualenv ($VENV)"
[ -x "$VPY" ] || "$PYTHON" -m venv "$VENV"
"$VPY" -m pip install -q --disable-pip-version-check -r "$BENCH/python/requirements.txt" >&2

# Build both Python extensions from a copy of the sources, so that neither
# build reuses the other's objects (setuptools keeps them in build/python).
step "cellrate Python extension: GIL held (shipped) and GIL released (-DCELLRATE_RELEASE_GIL)"
for variant in held released; do
    src="$PEERS/src/$variant"
    rm -rf "$src"
    mkdir -p "$src"
    cp -R pyproject.toml setup.py README.md LICENSE core bindings python redis "$src/"
done
"$VPY" -m pip install -q --disable-pip-version-check --no-cache-dir --force-reinstall \
    --no-deps "$PEERS/src/held" >&2
rm -rf "$PEERS/py-gil-released"
CELLRATE_RELEASE_GIL=1 "$VPY" -m pip install -q --disable-pip-version-check --no-cache-dir \
    --no-deps --target "$PEERS/py-gil-released" "$PEERS/src/released" >&2
# The released copy must actually release the GIL, and the shipped one not.
released_so=$(ls "$PEERS"/py-gil-released/cellrate/_cellrate*.so)
held_so=$("$VPY" -c 'import cellrate._cellrate as m; print(m.__file__)')
# (grep reads all of nm's output: with -q it would stop early, and pipefail
# would take nm's SIGPIPE for a failure)
nm -D --undefined-only "$released_so" | grep PyEval_SaveThread >/dev/null ||
    { echo "bench: $released_so does not release the GIL" >&2; exit 1; }
if nm -D --undefined-only "$held_so" | grep PyEval_SaveThread >/dev/null; then
    echo "bench: note: the shipped build references PyEval_SaveThread" >&2
fi

step "peers: Rust harness (governor, aerorate from crates.io)"
CARGO_TARGET_DIR="$PEERS/cargo-target" cargo build --release --locked --quiet \
    --manifest-path "$BENCH/rust/Cargo.toml" >&2
RUST_BIN="$PEERS/cargo-target/release/bench_peers"

step "C harness and Lua baseline module"
flag() { sed -n "s/^$1 *= *//p" core/flags.mk; }  # the flags, written once
ARCHFLAGS=$([ "$(uname -m)" = x86_64 ] && flag CR_X86_64 || true)
CWARN="$(flag CR_STD) $(flag CR_WARN) -Werror"
# shellcheck disable=SC2086
$CC $CWARN $ARCHFLAGS -O2 -g -Icore "$BENCH/c/bench_core.c" build/libcellrate.a \
    $(flag CR_LIBS) -o "$PEERS/bin/bench_core"
# The counters' cost: the core built again without them (CR_NO_COUNTERS, the
# benchmark's switch alone), its symbols renamed cr_* -> nc_cr_*, linked into
# the same harness, so that both run round-robin in one process.
NC="$PEERS/nc"
rm -rf "$NC" && mkdir -p "$NC"
for src in core/*.c; do
    # shellcheck disable=SC2086
    $CC $CWARN $ARCHFLAGS -O2 -g -fPIC $(flag CR_VISIBILITY) -DCR_NO_COUNTERS -Icore \
        -c "$src" -o "$NC/$(basename "$src" .c).o"
done
ld -r -o "$NC/core.o" "$NC"/*.o
nm --defined-only --extern-only "$NC/core.o" | awk '$3 ~ /^cr_/ { print $3 " nc_" $3 }' | sort -u > "$NC/names"
objcopy --redefine-syms="$NC/names" "$NC/core.o" "$NC/uncounted.o"
# shellcheck disable=SC2086
$CC $CWARN $ARCHFLAGS -O2 -g -DCR_BENCH_UNCOUNTED -Icore "$BENCH/c/bench_core.c" \
    build/libcellrate.a "$NC/uncounted.o" $(flag CR_LIBS) -o "$PEERS/bin/bench_core_counters"
for lua in lua5.4:/usr/include/lua5.4 luajit:/usr/include/luajit-2.1; do
    name=${lua%%:*}
    mkdir -p "$PEERS/lua/$name"
    # shellcheck disable=SC2086
    $CC $CWARN $ARCHFLAGS -O2 -fPIC -shared -fvisibility=hidden -Icore -I"${lua#*:}" \
        "$BENCH/lua/baseline.c" build/libcellrate.a -Wl,--exclude-libs,ALL $(flag CR_LIBS) \
        -o "$PEERS/lua/$name/cellrate_bench_baseline.so"
done

cat /proc/loadavg > "$RAW/loadavg_start.txt"
head -1 /proc/stat > "$RAW/cpu_start.txt"
step "C level: floors, Limiter, KeyedLimiter (1M keys), threads, shared memory"
"$PEERS/bin/bench_core" run --reps "$REPS" | tee "$RAW/c.jsonl" >&2

step "C level: the allow paths with counters and without (one binary, round-robin)"
"$PEERS/bin/bench_core_counters" counters --reps "$REPS" | tee "$RAW/c_counters.jsonl" >&2

step "C level: governor and aerorate"
"$RUST_BIN" run --reps "$REPS" --keyed-ops 1000000 | tee "$RAW/rust.jsonl" >&2

step "Python level: floors"
"$VPY" "$BENCH/python/bench_py.py" --part floors --reps "$REPS" | tee "$RAW/py_floors.jsonl" >&2
step "Python level: cellrate (GIL held)"
"$VPY" "$BENCH/python/bench_py.py" --part cellrate --reps "$REPS" | tee "$RAW/py_cellrate.jsonl" >&2
step "Python level: cellrate (GIL released around each core call)"
PYTHONPATH="$PEERS/py-gil-released" "$VPY" "$BENCH/python/bench_py.py" --part cellrate \
    --label gil_released --reps "$REPS" | tee "$RAW/py_cellrate_gil_released.jsonl" >&2
step "Python level: the algorithm catalogue and check_all"
"$VPY" "$BENCH/python/bench_py.py" --part catalogue --reps "$REPS" | tee "$RAW/py_catalogue.jsonl" >&2
"$VPY" "$BENCH/python/bench_py.py" --part concurrency --reps "$REPS" | tee "$RAW/py_concurrency.jsonl" >&2
step "Python level: PyPI peers"
"$VPY" "$BENCH/python/bench_py.py" --part peers --reps "$REPS" | tee "$RAW/py_peers.jsonl" >&2

step "Redis store: a local redis-server; one client and 4 processes, sync and asyncio"
"$VPY" "$BENCH/python/bench_redis.py" --reps "$REPS" --markdown "$BENCH/results/redis.md" |
    tee "$RAW/redis.jsonl" >&2

step "Redis batches: asyncio coalescing, check_many against single calls and the ceiling"
"$VPY" "$BENCH/python/bench_redis_batch.py" --reps "$REPS" --markdown "$BENCH/results/redis_batch.md" \
    --raw "$RAW/redis_batch.jsonl" >&2

step "throttled-py: its own benchmark in its shape (in memory, a bare loop, a local redis-server)"
"$VPY" "$BENCH/python/bench_throttled.py" --reps "$REPS" | tee "$RAW/py_throttled.jsonl" >&2

step "Fleet shares: ShareLimiter against Limiter and RedisLimiter, heartbeats (a local redis-server)"
"$VPY" "$BENCH/python/bench_share.py" --reps "$REPS" | tee "$RAW/py_share.jsonl" >&2

step "Python level: decorator overhead (cellrate.limit, ratelimit, aiolimiter, pyrate-limiter)"
"$VPY" "$BENCH/python/bench_decorators.py" --reps "$REPS" | tee "$RAW/py_decorators.jsonl" >&2

step "Python level: web middleware overhead (Starlette, Flask; slowapi, flask-limiter)"
"$VPY" "$BENCH/python/bench_web.py" --reps "$REPS" | tee "$RAW/py_web.jsonl" >&2

step "Python level: a WebSocket message and a gRPC call, limited and bare (bench_adapters.py)"
"$VPY" "$BENCH/python/bench_adapters.py" --reps "$REPS" | tee "$RAW/py_adapters.jsonl" >&2

step "Lua level: Lua 5.4 and LuaJIT"
LUA_CPATH="build/lua5.4/?.so;$PEERS/lua/lua5.4/?.so" lua5.4 "$BENCH/lua/bench.lua" "$REPS" lua5.4 |
    tee "$RAW/lua54.jsonl" >&2
LUA_CPATH="build/luajit/?.so;$PEERS/lua/luajit/?.so" luajit "$BENCH/lua/bench.lua" "$REPS" luajit |
    tee "$RAW/luajit.jsonl" >&2

step "Memory: bytes per tracked key at 1M keys, one fresh process per store"
{
    "$PEERS/bin/bench_core" mem --keys 1000000
    "$RUST_BIN" mem --keys 1000000
    for store in cellrate throttled_gcra limits_sliding_window_counter limits_moving_window; do
        "$VPY" "$BENCH/python/mem_py.py" "$store" --keys 1000000
    done
} | tee "$RAW/memory.jsonl" >&2

step "nginx: wrk on loopback against no limiter, limit_req and cellrate.nginx"
# Reps of 2 s, each ratio taken rep by rep: more and shorter reps than elsewhere.
"$VPY" "$BENCH/nginx/bench_nginx.py" --reps $((REPS * 2 + 2)) | tee "$RAW/nginx.jsonl" >&2

head -1 /proc/stat > "$RAW/cpu_end.txt"
step "Report"
"$VPY" "$BENCH/report.py" "$RAW" "$BENCH/results" --reps "$REPS"
