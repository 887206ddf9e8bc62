#!/usr/bin/env bash
# Instructions per request (callgrind, repeatable on a loaded machine) of rf.flow under LuaJIT on requests shaped like
# the nginx example's (bench/embedding/flow_calls.lua): with the JIT on, and with -joff (how nginx runs much of a handler, each
# cosocket call yielding). Usage: bench/embedding/flow_instructions.sh [BUILD_DIR [N]]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
n=${2:-20000}
export LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="$build/lib/lua/luajit/?.so;;"
ledger=$(mktemp /tmp/rf-flow-calls.XXXXXX)
trap 'rm -f "$ledger"' EXIT
refs() {
  : >"$ledger"
  valgrind --tool=callgrind --callgrind-out-file=/dev/null luajit "$1" bench/embedding/flow_calls.lua "$2" "$ledger" 2>&1 |
    sed -n 's/.*refs: *//p' | tr -d ,
}
per_request() { echo $((($(refs "$1" $((2 * n))) - $(refs "$1" "$n")) / n)); }
echo "rf.flow instructions per request (callgrind, one attempt, ledger held): JIT $(per_request -jon)," \
  "-joff $(per_request -joff)"
