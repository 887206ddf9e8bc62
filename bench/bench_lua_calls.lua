-- N calls of policy:decide, or of the binding's floor, over the same 6-fact mix as bench_lua.lua; nothing
-- timed. bench/lua_instructions.sh runs it under callgrind at two N and divides the difference, which gives
-- instructions per call, repeatable on a busy machine where nanoseconds are not.
-- Usage: lua5.4 bench/bench_lua_calls.lua decide|floor N LOCK
local rf = require "retryfreeze"
local floor = require "rf_bench_floor"
local mode, iters, lock = arg[1], math.tointeger(tonumber(arg[2])), arg[3]
local policy = assert(rf.load(lock))
local rng = rf.rng(1)
local mix = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/decide_mix.lua")
local fn = mode == "floor" and floor.decide or policy.decide
for i = 1, iters do fn(policy, mix[i % #mix + 1], rng) end
