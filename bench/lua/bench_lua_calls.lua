-- N calls of one variant of bench_lua.lua over the same 6-fact mix; nothing timed. bench/lua/lua_instructions.sh
-- runs it under callgrind at two N and divides the difference, which gives instructions per call, repeatable
-- on a busy machine where nanoseconds are not.
-- Usage: lua5.4 bench/lua/bench_lua_calls.lua decide|floor|out|decider|decider_floor|seed N LOCK
--   decide: policy:decide(facts, rng)        floor: the binding's floor (bench/lua/lua_floor.c)
--   out:    policy:decide(facts, rng, out)   seed:  the pure-Lua port of the seed's classifier
--   decider: a request's decider (policy:decider), one per fact's request, built before the loop
--   decider_floor: bench/lua/lua_floor.c's values in the deciders' place (the same arguments in, five values out)
local rf = require "retryfreeze"
local floor = require "rf_bench_floor"
local mode, iters, lock = arg[1], math.tointeger(tonumber(arg[2])), arg[3]
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local policy = assert(rf.load(lock))
local rng = rf.rng(1)
local mix = dofile(here .. "/decide_mix.lua")
local n = #mix
if mode == "seed" then
  local seed_decide = dofile(here .. "/seed_classifier.lua").for_route(policy:routes()[1], 1)
  for i = 1, iters do seed_decide(mix[i % n + 1]) end
elseif mode == "out" then
  local out, decide = {}, policy.decide
  for i = 1, iters do decide(policy, mix[i % n + 1], rng, out) end
elseif mode == "decider" or mode == "decider_floor" then
  local deciders = {} -- one per fact's request (method, path, key), built once as the seed port is per route
  for j, f in ipairs(mix) do
    deciders[j] = mode == "decider" and policy:decider(f.method, f.path, f.idempotency_key ~= nil, rng) or floor.values
  end
  for i = 1, iters do
    local j = i % n + 1
    local f = mix[j]
    deciders[j](f.status or 0, f.transport, f.attempts, f.elapsed_ms, f.retry_after, f.date, f.now_ms)
  end
elseif mode == "decide" or mode == "floor" then
  local fn = mode == "floor" and floor.decide or policy.decide
  for i = 1, iters do fn(policy, mix[i % n + 1], rng) end
else
  error("usage: bench_lua_calls.lua decide|floor|out|decider|decider_floor|seed N LOCK")
end
