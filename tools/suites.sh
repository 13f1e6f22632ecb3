#!/bin/sh
# make test and make check: each make TARGET in turn, its time printed as it
# ends and all of them again at the end; the first that fails stops the run
# (its status is the run's).
#
#   tools/suites.sh NAME TARGET...    # NAME: what the summary calls the run
set -u
name=$1
shift
summary=""
started=$(date +%s)
for target in "$@"; do
    t0=$(date +%s)
    ${MAKE:-make} --no-print-directory "$target"
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
