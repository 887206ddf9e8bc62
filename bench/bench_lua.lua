-- ns per policy:decide from Lua vs the binding's floor (bench/lua_floor.c: same facts in, same-shape table
-- out, no decision), measured in the same run. Usage: lua5.4 bench/bench_lua.lua LOCK [iterations]
local rf = require "retryfreeze"
local floor = require "rf_bench_floor"

local lock, iters = arg[1], math.tointeger(tonumber(arg[2] or "1000000"))
local policy = assert(rf.load(lock))
local rng = rf.rng(1)
local mix = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/decide_mix.lua")
local n = #mix

local function measure(fn)
  collectgarbage("collect")
  local t0 = os.clock()
  for i = 1, iters do fn(policy, mix[i % n + 1], rng) end
  return (os.clock() - t0) / iters * 1e9
end

local decide = policy.decide
-- Alternate the two, best of three each, so neither gets a warmer cache.
local best_floor, best_decide = math.huge, math.huge
for _ = 1, 3 do
  best_floor = math.min(best_floor, measure(floor.decide))
  best_decide = math.min(best_decide, measure(decide))
end
-- The allocation-free form: one out table reused (policy:decide(facts, rng, out)).
local out = {}
local function measure_out()
  collectgarbage("collect")
  local t0 = os.clock()
  for i = 1, iters do decide(policy, mix[i % n + 1], rng, out) end
  return (os.clock() - t0) / iters * 1e9
end
local best_out = math.huge
for _ = 1, 3 do best_out = math.min(best_out, measure_out()) end
print(string.format("policy:decide  %7.1f ns/call", best_decide))
print(string.format("decide(f,r,out) %6.1f ns/call (one out table reused); %.2f x the table-returning form",
  best_out, best_out / best_decide))
print(string.format("binding floor  %7.1f ns/call (no-op C function, same facts in, same-shape table out)", best_floor))
print(string.format("ratio          %7.2f x (target <= 1.5)", best_decide / best_floor))
