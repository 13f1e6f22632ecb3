#!/bin/sh
# Builds and runs the C tests.
#
#   tests/c/run.sh [plain|asan|tsan]
#
# plain: against build/libcellrate.a (make core); asan: AddressSanitizer and
# UndefinedBehaviorSanitizer; tsan: ThreadSanitizer. The sanitizer builds
# compile the core's sources with the same flags, so the core is instrumented
# too: once per run, into build/tests-<mode>/core/ (as many at a time as there
# are processors), every test and example then linked with those objects.
# Binaries go to build/tests-<mode>/. Each program under examples/c/ is built and run
# too, and its output compared with its .out file. The last line is "c tests: N passed, M failed"; the
# exit status is non-zero on any failure.
set -eu

mode=${1:-plain}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

CC=${CC:-cc}
# The flags are written once, in core/flags.mk (docs/design.md §13).
flag() { sed -n "s/^$1 *= *//p" core/flags.mk; }
flags="$(flag CR_STD) $(flag CR_WARN) -Werror"
[ "$(uname -m)" = x86_64 ] && flags="$flags $(flag CR_X86_64)"
libs=$(flag CR_LIBS)

case $mode in
plain)
    if [ ! -f build/libcellrate.a ]; then
        echo "build/libcellrate.a is missing: run 'make core' first" >&2
        exit 2
    fi
    flags="$flags -O2 -g"
    core=build/libcellrate.a
    ;;
asan)
    flags="$flags -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    ;;
tsan)
    flags="$flags -O1 -g -fsanitize=thread -fno-omit-frame-pointer"
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
    ;;
*)
    echo "usage: $0 [plain|asan|tsan]" >&2
    exit 2
    ;;
esac

out=build/tests-$mode
mkdir -p "$out"

if [ "$mode" != plain ]; then
    # The core under the mode's flags, each source compiled once (the tests
    # link the same objects a build of all the sources together would give).
    rm -rf "$out/core"
    mkdir -p "$out/core"
    export CC flags
    # shellcheck disable=SC2016  # expanded by the inner shell
    ls core/*.c | xargs -P "$(nproc 2>/dev/null || echo 2)" -I{} \
        sh -c 'o="$1"/$(basename "$2" .c).o; $CC $flags -Icore -c "$2" -o "$o"' sh "$out/core" {} ||
        { echo "the core does not build ($mode)" >&2; exit 1; }
    core=$(ls "$out"/core/*.o)
fi

passed=0
failed=0
broken=""
tests="test_core test_vectors test_options test_threads test_clock test_catalogue test_headers test_gauge"
[ -f tests/c/test_shared.c ] && tests="$tests test_shared"
[ -f tests/c/test_hostile.c ] && tests="$tests test_hostile"
[ -f tests/c/test_metrics.c ] && tests="$tests test_metrics"
[ -f tests/c/test_redis.c ] && tests="$tests test_redis"
[ -f tests/c/test_share.c ] && tests="$tests test_share"
[ -f tests/c/test_web.c ] && tests="$tests test_web"
[ -f tests/c/test_follow.c ] && tests="$tests test_follow"
[ -f tests/c/test_steps.c ] && tests="$tests test_steps"
[ -f tests/c/test_calendar.c ] && tests="$tests test_calendar"
[ -f tests/c/test_priority.c ] && tests="$tests test_priority"
[ -f tests/c/test_plans.c ] && tests="$tests test_plans"
[ -f tests/c/test_penalty.c ] && tests="$tests test_penalty"
for test in $tests; do
    # shellcheck disable=SC2086  # flags and core are word lists
    $CC $flags -Icore -Itests/c "tests/c/$test.c" $core $libs -o "$out/$test"
    log="$out/$test.log"
    if "$out/$test" tests/vectors >"$log" 2>&1; then status=0; else status=$?; fi
    cat "$log"
    summary=$(grep -E "^$test: [0-9]+ passed, [0-9]+ failed$" "$log" | tail -n 1 || true)
    if [ -z "$summary" ]; then
        echo "$test ($mode): exited with status $status before its summary" >&2
        failed=$((failed + 1))
        broken="$broken $test"
        continue
    fi
    p=$(echo "$summary" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
    f=$(echo "$summary" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        # a sanitizer report after the summary, or a crash at exit
        failed=$((failed + 1))
        broken="$broken $test"
    fi
done

# The examples: each must build, run and print what its .out file says.
for example in examples/c/*.c; do
    name=$(basename "$example" .c)
    # shellcheck disable=SC2086  # flags and core are word lists
    if $CC $flags -Icore "$example" $core $libs -o "$out/example_$name" &&
        "$out/example_$name" >"$out/example_$name.log" 2>&1 &&
        diff -u "examples/c/$name.out" "$out/example_$name.log"; then
        echo "example $name: ok"
        passed=$((passed + 1))
    else
        echo "example $name ($mode): failed" >&2
        failed=$((failed + 1))
        broken="$broken example_$name"
    fi
done

# The C benchmarks (make bench runs them): each must build against the core as
# it is, so that a change to an internal header is seen here, not at the next
# make bench. Plain mode only: they are not run.
if [ "$mode" = plain ]; then
    for bench in bench/c/*.c; do
        name=$(basename "$bench" .c)
        # shellcheck disable=SC2086  # flags and core are word lists
        if $CC $flags -Icore "$bench" $core $libs -o "$out/bench_$name"; then
            echo "bench $name: builds"
            passed=$((passed + 1))
        else
            echo "bench $name: does not build" >&2
            failed=$((failed + 1))
            broken="$broken bench_$name"
        fi
    done
fi

[ -n "$broken" ] && echo "failed to complete ($mode):$broken" >&2
echo "c tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
