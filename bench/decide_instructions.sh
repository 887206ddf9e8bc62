#!/usr/bin/env bash
# Instructions per call (callgrind: repeatable on a loaded machine, where nanoseconds are not) of the C decision
# path against its baselines in the same run: rf_decide against the hand-written C port of the seed's classifier
# (bench/bench_decide.c), and rf_decide on a lock of 1 000 routes against one of 4 (bench/bench_routes.c).
# Each count is the difference of two runs of N and 2N calls divided by N, so loading and start-up cancel out.
# Usage: bench/decide_instructions.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
lock=examples/retry-budget.lock.json
refs() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 | sed -n 's/.*refs: *//p' | tr -d ,
}
# per_call N COMMAND... (COMMAND takes the call count where the word CALLS stands)
per_call() {
  local n=$1
  shift
  local once=("${@/CALLS/$n}") twice=("${@/CALLS/$((2 * n))}")
  echo $((($(refs "${twice[@]}") - $(refs "${once[@]}")) / n))
}
decide=$(per_call 20000 "$build/bench_decide" --calls decide CALLS "$lock")
seed=$(per_call 20000 "$build/bench_decide" --calls seed CALLS "$lock")
echo "instructions per call (callgrind): rf_decide $decide, the C port of the seed's classifier $seed"
awk -v d="$decide" -v s="$seed" 'BEGIN{
  r = d / s; printf "ratio: rf_decide over the C port of the seed'"'"'s classifier, instructions: %.2fx (target <= 5x) %s\n", r, (r <= 5 ? "met" : "NOT MET")
}'
