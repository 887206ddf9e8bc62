-- The decision forms under LuaJIT, measured in one run on the same request mix (bench/lua/decide_mix.lua) against the
-- pure-Lua port of the seed's classifier (bench/lua/seed_classifier.lua, the baseline), JIT-compiled:
--   * policy:decider through the FFI (the module's LuaJIT path, bindings/lua_ffi.c): the fastest decision form,
--     whose target is >= 3x faster than the port;
--   * the same decider's classic closure (the Lua C API: every call ends a trace), reached as the FFI closure's
--     slow path (its upvalue `classic`; with RF_NO_FFI=1 the module hands out that closure itself);
--   * policy:decide(facts, rng, out), the allocation-free form with tables (classic);
--   * the FFI decider against the port of seed 001's classifier as the seed decided (bench/lua/seed001_classifier.lua:
--     Retry-After in delay-seconds and the three HTTP-date forms, the idempotency-key rule, unpinned sources) on a
--     32-fact mix written from the seed's pinned cases (bench/lua/seed001_mix.lua, Retry-After in 15 facts), once per
--     Retry-After parser of the port: string patterns (its default, the seed's Date.parse and regular expression
--     ported; LuaJIT compiles no string.match, so that parse runs in the interpreter), a `ratio:` line with the 3x
--     target; and bytes (string.byte, which LuaJIT compiles), a `note:` line (no target: the engine alone through
--     the FFI is near that port's time, see the floor's note). Both beside the minimal port's ratio: the minimal
--     port is the floor of Lua doing the decision, the seed's port the work the seed did. spec/41-seed_port_spec.lua
--     checks both parsers against policy:decide on that mix.
-- Each variant is measured best of five rounds, the variants alternating, so that none gets a warmer cache and the
-- JIT has compiled every loop before the best round. Prints the numbers and `ratio:` lines (bench/run collects them).
-- Usage: luajit bench/lua/bench_luajit.lua LOCK [iterations]
local rf = require "retryfreeze"

local lock, iters = arg[1], tonumber(arg[2] or "1000000")
local rounds = 5
local here = arg[0]:match("^(.*)/[^/]*$") or "."
local policy = assert(rf.load(lock))
local mix = dofile(here .. "/decide_mix.lua")
local bench_rounds = dofile(here .. "/../lib/rounds.lua")
local n = #mix
if not rawget(_G, "jit") then error("bench_luajit.lua: run it with luajit") end
if not rf.ffi then error("bench_luajit.lua: the FFI path is off (RF_NO_FFI set, or no FFI in this LuaJIT)") end

local seed_decide = dofile(here .. "/seed_classifier.lua").for_route(policy:routes()[1], 1)
local seed001 = dofile(here .. "/seed001_classifier.lua")
local seed001_decide = seed001.for_route(policy:routes()[1], 1, "patterns")
local seed001_bytes_decide = seed001.for_route(policy:routes()[1], 1, "bytes")
local seed001_mix = dofile(here .. "/seed001_mix.lua")
local n001 = #seed001_mix

--- The upvalue `name` of function fn (the FFI decider's internals, read through the debug library: bench only).
local function upvalue(fn, name)
  for i = 1, math.huge do
    local uname, value = debug.getupvalue(fn, i)
    if uname == nil then error("bench_luajit.lua: the FFI decider has no upvalue '" .. name .. "'") end
    if uname == name then return value end
  end
end

-- One decider per request of the mix, built once (as the port is built once per route); the classic closures are
-- the FFI closures' own slow paths, deciding with the same state.
local rng = rf.rng(1)
local ffi_deciders, classic_deciders, states = {}, {}, {}
for j, f in ipairs(mix) do
  ffi_deciders[j] = policy:decider(f.method, f.path, f.idempotency_key ~= nil, rng)
  classic_deciders[j] = upvalue(ffi_deciders[j], "classic")
  states[j] = upvalue(ffi_deciders[j], "state")
end
-- The per-attempt arguments, unpacked once: the loops below measure the calls, not the facts tables' reads.
local transport_index = {}
for i, name in ipairs(rf.transports) do transport_index[name] = i - 1 end
local function unpacked(facts)
  local args = {}
  for j, f in ipairs(facts) do
    args[j] = { f.status or 0, f.transport, f.attempts, f.elapsed_ms, f.retry_after, f.date, f.now_ms,
                transport_index[f.transport or "ok"], f.retry_after and #f.retry_after or 0, f.date and #f.date or 0 }
  end
  return args
end
local args, args001 = unpacked(mix), unpacked(seed001_mix)
-- The FFI deciders of the seed's mix. A decider takes no `source` (docs/lua.md): it decides the mix's one
-- unpinned-source fact as pinned, which is more work than the port's refusal of it.
local ffi_deciders001 = {}
for j, f in ipairs(seed001_mix) do
  ffi_deciders001[j] = policy:decider(f.method, f.path, f.idempotency_key ~= nil, rng)
end
-- The engine's floor under LuaJIT: the ABI's decide called directly with the arguments prebuilt (no checks, no
-- verdict strings): rf_decide_on_route plus one FFI call, what no binding can go below.
local abi_decide, abi_out = upvalue(ffi_deciders[1], "decide"), upvalue(ffi_deciders[1], "out")

local function run_deciders(deciders, deciders_args)
  local m = #deciders
  deciders_args = deciders_args or args
  return function()
    for i = 1, iters do
      local j = i % m + 1
      local a = deciders_args[j]
      deciders[j](a[1], a[2], a[3], a[4], a[5], a[6], a[7])
    end
  end
end
-- rf.flow with the FFI's step:begin and step:after, and a second copy of its loop loaded with them hidden (the
-- methods: what RF_NO_FFI=1 gives), on the same scripted requests: a 503 then a 200, two attempts each, no ledger.
local core = require "retryfreeze.core"
local flow_ffi = rf.flow
local saved_begin, saved_after = core.ffi_step_begin, core.ffi_step_after
core.ffi_step_begin, core.ffi_step_after, package.loaded["retryfreeze.io_flow"] = nil, nil, nil
local flow_classic = require("retryfreeze.io_flow").flow
core.ffi_step_begin, core.ffi_step_after = saved_begin, saved_after
local flow_policy = assert(rf.load(here .. "/../../examples/service.lock.json"))
local flow_request = { method = "GET", path = "/v1/jobs/7" }
local replies, clock = { { status = 503 }, { status = 200, body = "ok" } }, 0
local flow_io = { send = function(attempt) clock = clock + 5; return replies[attempt.number] end,
                  sleep = function(ms) clock = clock + ms end, now_ms = function() return clock end,
                  wall_ms = function() return 784111777000 end, rng = rf.rng(1) }
local flow_iters = math.max(1, math.floor(iters / 50))
local function run_flow(flow)
  return function()
    for _ = 1, flow_iters do flow(flow_policy, flow_request, flow_io) end
  end
end

local out, decide = {}, policy.decide
local variants = {
  { name = "ffi", run = run_deciders(ffi_deciders) },
  { name = "classic", run = run_deciders(classic_deciders) },
  { name = "floor", run = function()
    for i = 1, iters do
      local j = i % n + 1
      local a = args[j]
      abi_decide(states[j], a[1], a[8], a[3] or 1, a[4] or 0, a[5], a[9], a[6], a[10], a[7] or 0, abi_out)
    end
  end },
  { name = "decide_out", run = function()
    for i = 1, iters do decide(policy, mix[i % n + 1], rng, out) end
  end },
  { name = "seed", run = function()
    for i = 1, iters do seed_decide(mix[i % n + 1]) end
  end },
  { name = "ffi001", run = run_deciders(ffi_deciders001, args001) },
  { name = "seed001", run = function()
    for i = 1, iters do seed001_decide(seed001_mix[i % n001 + 1]) end
  end },
  { name = "seed001_bytes", run = function()
    for i = 1, iters do seed001_bytes_decide(seed001_mix[i % n001 + 1]) end
  end },
}

variants[#variants + 1] = { name = "flow_ffi", run = run_flow(flow_ffi), calls = flow_iters }
variants[#variants + 1] = { name = "flow_classic", run = run_flow(flow_classic), calls = flow_iters }

local best = bench_rounds.best_ns(variants, rounds, iters)
local ratio = bench_rounds.ratio

print(string.format("%s, %d calls per variant, best of %d, %d-fact mix", jit.version, iters, rounds, n))
print(string.format("  policy:decider(...)(...) via the FFI %7.1f ns/call (the LuaJIT path)", best.ffi))
print(string.format("  the same decider, classic closure   %7.1f ns/call (the Lua C API)", best.classic))
print(string.format("  policy:decide(facts, rng, out)      %7.1f ns/call (classic, tables)", best.decide_out))
print(string.format("  the engine through the FFI alone     %7.1f ns/call (rf_decide_on_route, arguments prebuilt)",
  best.floor))
print(string.format("  pure-Lua seed classifier, JIT       %7.1f ns/call (bench/lua/seed_classifier.lua; does far less)",
  best.seed))
print(string.format("on the seed's %d-fact mix (bench/lua/seed001_mix.lua):", n001))
print(string.format("  policy:decider(...)(...) via the FFI %7.1f ns/call", best.ffi001))
print(string.format("  seed 001's port, string patterns     %7.1f ns/call (bench/lua/seed001_classifier.lua, the "
  .. "seed's parse ported; Retry-After, keys, sources)", best.seed001))
print(string.format("  seed 001's port, byte parser         %7.1f ns/call (the same port, Retry-After read with "
  .. "string.byte: JIT-compiled)", best.seed001_bytes))
print(string.format("  rf.flow, 2 attempts, FFI steps       %7.0f ns/request (step:begin and step:after via the FFI)",
  best.flow_ffi))
print(string.format("  rf.flow, 2 attempts, the methods     %7.0f ns/request (what RF_NO_FFI=1 gives)",
  best.flow_classic))
print(string.format("note: under LuaJIT rf.flow (two attempts, no ledger) takes %.2fx the time with the methods that it "
  .. "takes with the FFI's step:begin and step:after", best.flow_classic / best.flow_ffi))
print(string.format("note: under LuaJIT the classic decider (the Lua C API) is %.2fx the time of the JIT-compiled "
  .. "pure-Lua port, and the FFI decider %.2fx faster than the classic one", best.classic / best.seed,
  best.classic / best.ffi))
print(string.format("note: under LuaJIT the engine alone through the FFI (rf_decide_on_route with the arguments "
  .. "prebuilt, no checks, no verdict strings) takes %.0f%% of the JIT-compiled pure-Lua port's time: no decision "
  .. "form can be faster than the port by more than %.2fx", 100 * best.floor / best.seed, best.seed / best.floor))
ratio("LuaJIT decider (FFI) speedup over the JIT-compiled pure-Lua port", best.seed / best.ffi, ">=", 3)
print(string.format("note: under LuaJIT the FFI decider is %.2fx as fast as the seed 001 port with its byte parser "
  .. "(Retry-After read with string.byte, JIT-compiled; no target), against %.2fx with string patterns, as the seed "
  .. "parsed: LuaJIT compiles no string.match", best.seed001_bytes / best.ffi001, best.seed001 / best.ffi001))
ratio("LuaJIT decider (FFI) speedup over the seed 001 port (string patterns, as the seed parsed), 32 facts",
  best.seed001 / best.ffi001, ">=", 3)
