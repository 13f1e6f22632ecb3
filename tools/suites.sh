#!/bin/sh
# make test and make check: each make TARGET in turn, its time printed as it
# ends and all of them again at the end; the first that fails stops the run
# (its status is the run's). Each make runs as many jobs at a time as there
# are processors (make -j), so that what a suite builds first (the core's
# objects, the two Lua modules) compiles on every core; the suites themselves
# still run one after the other.
#
#   tools/suites.sh NAME TARGET...    # NAME: what the summary calls the run
set -u
name=$1
shift
summary=""
started=$(date +%s)
jobs=$(nproc 2>/dev/null || echo 1)
for target in "$@"; do
    t0=$(date +%s)
    ${MAKE:-make} --no-print-directory -j"$jobs" "$target"
    status=$?
    took=$(($(date +%s) - t0))
    summary="$summary$(printf '  %-12s %5d s' "$target" "$took")
"
    echo "==> $target: $took s"
    if [ "$status" -ne 0 ]; then
        printf '%s' "$summary"
        echo "make $name: $target failed (status $status) after $(($(date +%s) - started)) s"
        exit "$status"
    fi
done
printf '%s' "$summary"
echo "make $name: every suite passed in $(($(date +%s) - started)) s"
