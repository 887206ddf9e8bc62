#!/usr/bin/env bash
# Instructions per policy:decide call and per call of the binding's floor (callgrind, repeatable), and their
# ratio (issue 2's target: within 1.5x). Usage: bench/lua_instructions.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
lock=examples/retry-budget.lock.json
export LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="$build/lib/lua/5.4/?.so;$build/bench/?.so;;"
refs() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null lua5.4 bench/bench_lua_calls.lua "$1" "$2" "$lock" 2>&1 |
    sed -n 's/.*refs: *//p' | tr -d ,
}
per_call() { echo $((($(refs "$1" 40000) - $(refs "$1" 20000)) / 20000)); }
floor=$(per_call floor)
decide=$(per_call decide)
awk -v d="$decide" -v f="$floor" 'BEGIN{printf "policy:decide %d instructions/call, floor %d: %.2fx (target <= 1.5)\n", d, f, d / f}'
