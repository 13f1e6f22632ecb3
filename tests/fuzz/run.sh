#!/bin/sh
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a
# bounded time (docs/design.md §13).
#
#   tests/fuzz/run.sh smoke [SECONDS]  each target over the committed corpus
#                                      (new inputs go to a temporary directory)
#   tests/fuzz/run.sh long [SECONDS]   each target, growing build/fuzz/corpus/<target>
#                                      from the committed corpus
#   tests/fuzz/run.sh merge            minimise build/fuzz/corpus/<target> into
#                                      the committed tests/fuzz/corpus/<target>
#
# A failing input is written to build/fuzz/<target>-crash-*; replay it with
# build/fuzz/<target> <file>. The exit status is non-zero on any failure.
set -eu

mode=${1:-smoke}
seconds=${2:-10}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

CLANG=${CLANG:-clang}
flags="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wmissing-prototypes -Werror"
flags="$flags -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
[ "$(uname -m)" = x86_64 ] && flags="$flags -mcx16"
targets="fuzz_rate fuzz_decide fuzz_region fuzz_follow fuzz_tzif"
out=build/fuzz
mkdir -p "$out"

# The core once, instrumented for the fuzzer without its main (fuzzer-no-link),
# as many sources at a time as there are processors; each target links it.
rm -rf "$out/core"
mkdir -p "$out/core"
export CLANG flags
# shellcheck disable=SC2016  # expanded by the inner shell
ls core/*.c | xargs -P "$(nproc 2>/dev/null || echo 2)" -I{} \
    sh -c '$CLANG $flags -fsanitize=fuzzer-no-link -Icore -c "$2" -o "$1/$(basename "$2" .c).o"' \
    sh "$out/core" {} || { echo "the core does not build (fuzz)" >&2; exit 1; }
for target in $targets; do
    # shellcheck disable=SC2086  # flags is a word list
    $CLANG $flags -fsanitize=fuzzer -Icore "tests/fuzz/$target.c" "$out"/core/*.o \
        -lm -lpthread -latomic -o "$out/$target"
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run() { # target, then corpus directories; the first one receives new inputs
    target=$1
    shift
    "$out/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$out/$target-" -print_final_stats=1 "$@" >"$out/$target.log" 2>&1
}

failed=""
for target in $targets; do
    case $mode in
    smoke)
        work=$(mktemp -d)
        if run "$target" "$work" "tests/fuzz/corpus/$target"; then status=0; else status=$?; fi
        rm -rf "$work"
        ;;
    long)
        mkdir -p "$out/corpus/$target"
        if run "$target" "$out/corpus/$target" "tests/fuzz/corpus/$target"; then status=0; else status=$?; fi
        ;;
    merge)
        mkdir -p "tests/fuzz/corpus/$target"
        "$out/$target" -merge=1 "tests/fuzz/corpus/$target" "$out/corpus/$target" >"$out/$target.log" 2>&1
        echo "$target: $(ls "tests/fuzz/corpus/$target" | wc -l) inputs in tests/fuzz/corpus/$target"
        continue
        ;;
    *)
        echo "usage: $0 smoke|long [SECONDS] | merge" >&2
        exit 2
        ;;
    esac
    runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$out/$target.log")
    speed=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$out/$target.log")
    if [ "$status" -eq 0 ]; then
        echo "$target: ${runs:-?} runs in ${seconds} s (${speed:-?}/s), no failure"
    else
        echo "$target: FAILED (status $status); log: $out/$target.log" >&2
        grep -E "ERROR|SUMMARY|runtime error|FAIL|differs|model says|admitted in" "$out/$target.log" | head -n 20 >&2 || true
        failed="$failed $target"
    fi
done
[ -z "$failed" ] || { echo "fuzz ($mode): failed:$failed" >&2; exit 1; }
