#!/usr/bin/env bash
# Instructions per call (callgrind, repeatable on a loaded machine) of policy:decide and its floor, and of the
# allocation-free forms and the pure-Lua port of the seed's classifier: the targets of bench/lua/bench_lua.lua
# counted in instructions instead of time. Usage: bench/lua/lua_instructions.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
lock=examples/retry-budget.lock.json
export LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="$build/lib/lua/5.4/?.so;$build/bench/?.so;;"
refs() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null lua5.4 bench/lua/bench_lua_calls.lua "$1" "$2" "$lock" 2>&1 |
    sed -n 's/.*refs: *//p' | tr -d ,
}
per_call() { echo $((($(refs "$1" 40000) - $(refs "$1" 20000)) / 20000)); }
floor=$(per_call floor)
decide=$(per_call decide)
out=$(per_call out)
decider=$(per_call decider)
decider_floor=$(per_call decider_floor)
seed=$(per_call seed)
echo "instructions per call (callgrind): decide $decide, floor $floor, decide(out) $out," \
  "decider $decider (its floor $decider_floor), pure-Lua port $seed"
awk -v d="$decide" -v f="$floor" -v v="$decider" -v s="$seed" -v o="$out" 'BEGIN{
  r = s / v; printf "ratio: Lua decider (allocation-free) speedup over the pure-Lua port, instructions: %.2fx (target >= 3x) %s\n", r, (r >= 3 ? "met" : "NOT MET")
  r = d / f; printf "ratio: Lua decide(facts, rng) over its binding floor, instructions: %.2fx (target <= 1.5x) %s\n", r, (r <= 1.5 ? "met" : "NOT MET")
  r = o / s; printf "ratio: Lua decide(facts, rng, out) over the pure-Lua port, instructions: %.2fx (target <= 1x) %s\n", r, (r <= 1 ? "met" : "NOT MET")
}'
