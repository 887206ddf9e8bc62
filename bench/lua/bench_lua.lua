-- policy:decide from Lua, measured in one run on the same request mix (bench/lua/decide_mix.lua) against:
--   * the binding's floor (bench/lua/lua_floor.c: the same facts walked raw, a same-shape verdict table built, no
--     decision): the table-returning form's target is <= 1.5x its floor;
--   * a pure-Lua port of the seed's classifier (bench/lua/seed_classifier.lua, the baseline; it does far less):
--     the fastest allocation-free form must be >= 3x faster. That is a request's decider (policy:decider: the
--     method, path, key and rng bound once per request, as the port is built once per route; each attempt's facts
--     as arguments, the verdict as values). policy:decide(facts, rng, out) (allocation-free with tables) is
--     reported beside it, and so is the floor of the decider's shape (bench/lua/lua_floor.c's values: the same
--     arguments in, five values out, nothing checked or decided), which bounds what any call through the Lua C API
--     can reach.
--   * the port of seed 001's classifier as the seed decided (bench/lua/seed001_classifier.lua: Retry-After in
--     delay-seconds and the three HTTP-date forms, the idempotency-key rule, unpinned sources), against the decider on
--     a 32-fact mix written from the seed's pinned cases (bench/lua/seed001_mix.lua, Retry-After in 15 facts), once per
--     Retry-After parser of the port: string patterns (its default, the seed's Date.parse and regular expression
--     ported) and bytes (string.byte), each a ratio with the 3x target (under Lua 5.4 both parse in the same
--     interpreter), beside the minimal port's (the minimal port is the floor of Lua doing the decision, the seed's
--     port the work the seed did). spec/41-seed_port_spec.lua checks both parsers against policy:decide there.
-- Each variant is measured best of five rounds, the variants alternating, so that none gets a warmer cache. Prints
-- the numbers and one `ratio:` line per target (bench/run collects them into its summary).
-- Usage: lua5.4 bench/lua/bench_lua.lua LOCK [iterations]
local rf = require "retryfreeze"
local floor = require "rf_bench_floor"

local lock, iters = arg[1], math.tointeger(tonumber(arg[2] or "1000000"))
local rounds = 5 -- best of 5: on a shared machine another process steals some rounds
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local policy = assert(rf.load(lock))
local rng = rf.rng(1)
local mix = dofile(here .. "/decide_mix.lua")
local bench_rounds = dofile(here .. "/../lib/rounds.lua")
local n = #mix

-- The baselines, built from the same lock's first route: the minimal port, and the port of seed 001's classifier.
local seed_decide = dofile(here .. "/seed_classifier.lua").for_route(policy:routes()[1], 1)
local seed001 = dofile(here .. "/seed001_classifier.lua")
local seed001_decide = seed001.for_route(policy:routes()[1], 1, "patterns")
local seed001_bytes_decide = seed001.for_route(policy:routes()[1], 1, "bytes")
local seed001_mix = dofile(here .. "/seed001_mix.lua")
local n001 = #seed001_mix

local deciders, deciders001 = {}, {}
for j, f in ipairs(mix) do deciders[j] = policy:decider(f.method, f.path, f.idempotency_key ~= nil, rng) end
-- The decider takes no `source` (docs/lua.md): it decides the mix's one unpinned-source fact as pinned, which is
-- more work than the port's refusal of it.
for j, f in ipairs(seed001_mix) do
  deciders001[j] = policy:decider(f.method, f.path, f.idempotency_key ~= nil, rng)
end
local out = {}
local decide, floor_decide, floor_out = policy.decide, floor.decide, floor.decide_out
local floor_values = floor.values
local variants = {
  { name = "floor", run = function()
    for i = 1, iters do floor_decide(policy, mix[i % n + 1], rng) end
  end },
  { name = "decide", run = function()
    for i = 1, iters do decide(policy, mix[i % n + 1], rng) end
  end },
  { name = "floor_out", run = function()
    for i = 1, iters do floor_out(policy, mix[i % n + 1], rng, out) end
  end },
  { name = "decide_out", run = function()
    for i = 1, iters do decide(policy, mix[i % n + 1], rng, out) end
  end },
  { name = "floor_values", run = function() -- the decider's shape, nothing checked or decided
    for i = 1, iters do
      local j = i % n + 1
      local f = mix[j]
      floor_values(f.status or 0, f.transport, f.attempts, f.elapsed_ms, f.retry_after, f.date, f.now_ms)
    end
  end },
  { name = "decider", run = function() -- one decider per request of the mix, built once (as the port is per route)
    for i = 1, iters do
      local j = i % n + 1
      local f = mix[j]
      deciders[j](f.status or 0, f.transport, f.attempts, f.elapsed_ms, f.retry_after, f.date, f.now_ms)
    end
  end },
  { name = "seed", run = function()
    for i = 1, iters do seed_decide(mix[i % n + 1]) end
  end },
  { name = "decider001", run = function() -- the decider on the seed's mix
    for i = 1, iters do
      local j = i % n001 + 1
      local f = seed001_mix[j]
      deciders001[j](f.status or 0, f.transport, f.attempts, f.elapsed_ms, f.retry_after, f.date, f.now_ms)
    end
  end },
  { name = "seed001", run = function()
    for i = 1, iters do seed001_decide(seed001_mix[i % n001 + 1]) end
  end },
  { name = "seed001_bytes", run = function()
    for i = 1, iters do seed001_bytes_decide(seed001_mix[i % n001 + 1]) end
  end },
}

local best = bench_rounds.best_ns(variants, rounds, iters)
local ratio = bench_rounds.ratio

print(string.format("Lua %s, %d calls per variant, best of %d, %d-fact mix", _VERSION:match("%S+$"), iters, rounds, n))
print(string.format("  policy:decide(facts, rng)       %7.1f ns/call (a new verdict table per call)", best.decide))
print(string.format("  binding floor                   %7.1f ns/call (same facts walked raw, same-shape table out)",
  best.floor))
print(string.format("  policy:decide(facts, rng, out)  %7.1f ns/call (one out table reused)", best.decide_out))
print(string.format("  binding floor, out form         %7.1f ns/call (same walk, the fields written into out)",
  best.floor_out))
print(string.format("  policy:decider(...)(...)        %7.1f ns/call (a request's decider: per-attempt facts as arguments)",
  best.decider))
print(string.format("  the decider's floor             %7.1f ns/call (same arguments in, five values out, nothing decided)",
  best.floor_values))
print(string.format("  pure-Lua seed classifier        %7.1f ns/call (bench/lua/seed_classifier.lua; does far less)",
  best.seed))
print(string.format("On the seed's %d-fact mix (bench/lua/seed001_mix.lua):", n001))
print(string.format("  policy:decider(...)(...)        %7.1f ns/call", best.decider001))
print(string.format("  seed 001's port, patterns       %7.1f ns/call (bench/lua/seed001_classifier.lua, the seed's parse "
  .. "ported; Retry-After, keys, sources)", best.seed001))
print(string.format("  seed 001's port, byte parser    %7.1f ns/call (the same port, Retry-After read with string.byte)",
  best.seed001_bytes))
print(string.format("note: the Lua out form's floor alone (the facts walked raw and the verdict's fields written into "
  .. "out, nothing decided: bench/lua/lua_floor.c) is %.2fx faster than the pure-Lua port, which bounds what any "
  .. "policy:decide(facts, rng, out) can reach through the Lua C API", best.seed / best.floor_out))
print(string.format("note: policy:decide(facts, rng, out), the allocation-free form with tables, is %.2fx as fast as the "
  .. "pure-Lua port (its target is counted in instructions: bench/lua/lua_instructions.sh)", best.seed / best.decide_out))
print(string.format("note: the decider's floor (a C function taking the same arguments and returning five values, nothing "
  .. "checked or decided: bench/lua/lua_floor.c) is %.2fx faster than the pure-Lua port; 3x leaves %.0f ns per call for "
  .. "the checks, the engine and the verdict", best.seed / best.floor_values, best.seed / 3 - best.floor_values))
ratio("Lua decider (allocation-free) speedup over the pure-Lua port", best.seed / best.decider, ">=", 3)
ratio("Lua decider (allocation-free) speedup over the seed 001 port (string patterns, as the seed parsed), 32 facts",
  best.seed001 / best.decider001, ">=", 3)
ratio("Lua decider (allocation-free) speedup over the seed 001 port (byte parser), 32 facts",
  best.seed001_bytes / best.decider001, ">=", 3)
ratio("Lua decide(facts, rng) over its binding floor", best.decide / best.floor, "<=", 1.5)
