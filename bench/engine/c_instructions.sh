#!/usr/bin/env bash
# Instructions (callgrind: repeatable on a loaded machine, where nanoseconds are not) of the C hot paths against
# their baselines in the same run: rf_decide and rf_decide_on_route against the hand-written C port of the seed's
# classifier (bench/engine/bench_decide.c), rf_decide on a lock of 1 000 routes against one of 4, loading a lock of 10 000
# routes against ten times one of 1 000 (bench/engine/bench_routes.c), and a ledger line appended in a batch, per byte
# (bench/evidence/bench_ledger.c). A count per call is the difference of two runs of N and 2N
# calls divided by N, so loading and start-up cancel out; a load's count is a run of one call less start-up.
# Usage: bench/engine/c_instructions.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
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
on_route=$(per_call 20000 "$build/bench_decide" --calls on_route CALLS "$lock")
seed=$(per_call 20000 "$build/bench_decide" --calls seed CALLS "$lock")
routes4=$(per_call 20000 "$build/bench_routes" --calls CALLS 4)
routes1k=$(per_call 20000 "$build/bench_routes" --calls CALLS 1000)
start=$(refs "$build/bench_routes" --calls 1 1)
load1k=$(($(refs "$build/bench_routes" --calls 1 1000) - start))
load10k=$(($(refs "$build/bench_routes" --calls 1 10000) - start))
ledger=$(per_call 6400 "$build/bench_ledger" --calls CALLS)
line_bytes=$("$build/bench_ledger" --calls 64)
echo "instructions per call (callgrind): rf_decide $decide, rf_decide_on_route $on_route, the C port of the seed's" \
  "classifier $seed; rf_decide on 4 routes $routes4, on 1 000 routes $routes1k; loading 1 000 routes $load1k," \
  "10 000 routes $load10k; a ledger line of $line_bytes bytes appended in a batch $ledger"
awk -v d="$decide" -v o="$on_route" -v s="$seed" -v r4="$routes4" -v r1k="$routes1k" -v l1k="$load1k" \
  -v l10k="$load10k" -v lg="$ledger" -v lb="$line_bytes" 'BEGIN{
  r = o / s; printf "ratio: rf_decide_on_route (the matched-route path) over the C port of the seed'"'"'s classifier, instructions: %.2fx (target <= 5x) %s\n", r, (r <= 5 ? "met" : "NOT MET")
  r = d / s; printf "ratio: rf_decide (matching included) over the C port of the seed'"'"'s classifier, instructions: %.2fx (target <= 5x) %s\n", r, (r <= 5 ? "met" : "NOT MET")
  r = r1k / r4; printf "ratio: rf_decide with 1 000 routes over 4 routes, instructions: %.2fx (target <= 1.5x) %s\n", r, (r <= 1.5 ? "met" : "NOT MET")
  r = l10k / (10 * l1k); printf "ratio: loading 10 000 routes over ten times 1 000, instructions: %.2fx (target <= 1.2x) %s\n", r, (r <= 1.2 ? "met" : "NOT MET")
  r = lg / lb; printf "ratio: ledger line appended in a batch, per byte: %.1f instr (target <= 5 instr) %s\n", r, (r <= 5 ? "met" : "NOT MET")
}'
