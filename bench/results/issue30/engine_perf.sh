#!/bin/bash
# perf samples of headless runs only (not their building): engine_perf.sh OUT.data [N] [RUNS]
# then: perf report -i OUT.data --no-children --sort dso,symbol
set -e
here=$(dirname "$0")
ready=$(mktemp)
rm -f "$ready"
python "$here/engine_perf_loop.py" "${2:-1000}" "${3:-40}" "$ready" &
pid=$!
while [ ! -s "$ready" ]; do sleep 0.05; done
perf record -F 4999 -o "$1" -p "$pid" 2>/dev/null &
wait "$pid"
wait
rm -f "$ready"
