-- A script that wants a retry the lock does not grant: every route a Lua script has to change a policy's
-- decisions. Each attempt must be refused (an error) or have no effect on decide, and none may
-- crash the process. spec/03-immutable_spec.lua covers the basic cases (assignment, rawset, setmetatable,
-- routes() copies, a fake policy table, __index on facts); this file goes further.
--
-- The debug library is outside any sandbox: with it a script can reach the real metatable, replace
-- uservalues and call __gc by hand. The last block shows what it can and cannot do here; an embedder that
-- runs untrusted flows must remove `debug` (docs/reliability.md). Attempts that could crash run in a child
-- process (`retryfreeze run`), so a crash fails one test instead of killing busted.
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local h = require "spec.helper"

local new_rng = rf.rng -- kept: a test below replaces every function of the module
local SEED = 7
-- A keyed gateway timeout under the desk's lock: retried once, delay from the seeded jitter.
local RETRY_FACTS = { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1",
  attempts = 1, elapsed_ms = 300 }
-- A handler 500: never retried.
local STOP_FACTS = { method = "POST", path = "/v1/jobs", status = 500, idempotency_key = "k1" }

local policy = assert(rf.load(h.desk_lock))
local want_retry = policy:decide(RETRY_FACTS, new_rng(SEED))
local want_stop = policy:decide(STOP_FACTS, new_rng(SEED))

--- Asserts that policy p still decides exactly as the pristine lock did.
local function decides_as_locked(p)
  assert.same(want_retry, (p or policy):decide(RETRY_FACTS, new_rng(SEED)))
  assert.same(want_stop, (p or policy):decide(STOP_FACTS, new_rng(SEED)))
end

-- Not under sanitizers (.ci/run sets RF_SANITIZED): valgrind cannot run an AddressSanitizer build, which
-- checks the same reads itself.
local has_valgrind = os.getenv("RF_SANITIZED") == nil
  and os.execute("command -v valgrind >/dev/null 2>&1") == true

--- A test whose body is one child `retryfreeze run`: the command embeds Lua 5.4 whatever Lua runs this file, so
--- the other Lua versions' runs of the file (ctest sets RF_SECONDARY_SUITE for them) would repeat the main suite's
--- children exactly; there such a test is pending, named.
local it_child = it
if os.getenv("RF_SECONDARY_SUITE") then
  it_child = function(name) pending(name .. " (a child of the 5.4 command: the main suite runs it)") end
end

--- Runs Lua source in a child `retryfreeze run` (which opens every standard library, debug included), under
--- valgrind when asked and available (exit code 99 on an invalid read or write). Returns the child's stdout,
--- stderr and exit code; a crash gives the signal number.
local function run_child(source, memcheck)
  local path = h.temp_file(source)
  local prefix = (memcheck and has_valgrind) and "valgrind -q --error-exitcode=99 --leak-check=no " or ""
  local out, err, code = h.sh(prefix .. h.cli .. " run '" .. path .. "'")
  os.remove(path)
  return out, err, code
end

describe("a hostile script cannot change a decision", function()
  it("starts from a lock that retries the 504 and stops on the 500", function()
    assert.same({ true, "pinned-status", 2000 }, { want_retry.retry, want_retry.reason, want_retry.timeout_ms })
    assert.same({ false, "status-not-retryable" }, { want_stop.retry, want_stop.reason })
  end)

  describe("assignment and raw access", function()
    it("refuses assignment to every field, method and metamethod name", function()
      h.assert_immutable(policy, { "digest", "route_count", "gate", "decide", "budget", "routes", "__index", "__gc",
        "__newindex", "__metatable", 1, true })
      decides_as_locked()
    end)

    it("refuses rawset and rawget on every userdata the module hands out", function()
      local ledger_path = os.tmpname()
      local ledger = assert(rf.ledger.open(ledger_path))
      local client = rf.client{ policy = policy, base_url = "http://127.0.0.1:9" }
      for _, ud in ipairs({ policy, rf.rng(1), ledger, client }) do
        assert.has_error(function() rawset(ud, "decide", function() end) end)
        assert.has_error(function() rawget(ud, "decide") end)
        assert.has_error(function() setmetatable(ud, {}) end)
      end
      client:close()
      ledger:close()
      os.remove(ledger_path)
      decides_as_locked()
    end)

    it("does not let a script index or call a policy with the wrong key types", function()
      assert.has_error(function() return policy[{}] end)
      assert.is_nil(policy[1])
      assert.is_nil(policy.no_such_method)
      assert.has_error(function() policy() end)
      decides_as_locked()
    end)
  end)

  describe("metatables", function()
    it("hands out a string for the metatable, and that string cannot be written through", function()
      local mt = getmetatable(policy)
      assert.equal("retryfreeze.Policy", mt)
      assert.has_error(function() mt.decide = function() return { retry = true } end end)
      assert.has_error(function() rawset(mt, "decide", 1) end)
      assert.equal("retryfreeze.Rng", getmetatable(rf.rng(1)))
      decides_as_locked()
    end)

    it("is not affected by tampering with the string metatable", function()
      local smt = getmetatable("")
      local saved = smt.__index
      smt.__index = function() return function() return "POST" end end
      -- Decide while tampered, compare after restoring (luassert itself needs the string methods).
      local ok, retry, stop = pcall(function()
        return policy:decide(RETRY_FACTS, new_rng(SEED)), policy:decide(STOP_FACTS, new_rng(SEED))
      end)
      smt.__index = saved
      assert(ok, retry)
      assert.same(want_retry, retry)
      assert.same(want_stop, stop)
    end)

    it("is not affected by metatables on the values inside the facts", function()
      -- debug.setmetatable on numbers and booleans changes every number and boolean in the state.
      local ok, err = pcall(function()
        debug.setmetatable(0, { __index = function() return 599 end })
        debug.setmetatable(true, { __index = function() return "k" end })
        decides_as_locked()
      end)
      debug.setmetatable(0, nil)
      debug.setmetatable(true, nil)
      assert(ok, err)
    end)
  end)

  describe("the module tables", function()
    local function replace_all(t)
      local saved = {}
      for k, v in pairs(t) do
        if type(v) == "function" then
          saved[k] = v
          t[k] = function() return { retry = true, reason = "pinned-status", delay_ms = 0, timeout_ms = 1 } end
        end
      end
      return function() for k, v in pairs(saved) do t[k] = v end end
    end

    it("replacing every function of retryfreeze and retryfreeze.core changes no policy's methods", function()
      local restore_rf, restore_core = replace_all(rf), replace_all(core)
      local ok, err = pcall(decides_as_locked)
      restore_rf()
      restore_core()
      assert(ok, err)
    end)

    it("keeps the method table apart from the module table", function()
      local saved = core.decide
      core.decide = nil
      local ok, err = pcall(decides_as_locked)
      core.decide = saved
      assert(ok, err)
    end)
  end)

  describe("impostors", function()
    local fake = setmetatable({ digest = policy.digest }, {
      __name = "retryfreeze.Policy",
      __index = { decide = function() return { retry = true } end },
    })

    it("refuses a table, another module's userdata or a closed object where a policy goes", function()
      for _, impostor in ipairs({ fake, rf.rng(1), io.stdout, "retryfreeze.Policy", 0 }) do
        assert.has_error(function() policy.decide(impostor, RETRY_FACTS) end)
        assert.has_error(function() core.decide(impostor, RETRY_FACTS) end)
        assert.has_error(function() policy.budget(impostor, { method = "POST", path = "/v1/jobs" }) end)
        assert.has_error(function() rf.client{ policy = impostor, base_url = "http://127.0.0.1:9" } end)
      end
    end)

    it("refuses an impostor where the rng goes", function()
      local fake_rng = setmetatable({}, { __name = "retryfreeze.Rng" })
      for _, impostor in ipairs({ fake_rng, policy, io.stdout, 7 }) do
        assert.has_error(function() policy:decide(RETRY_FACTS, impostor) end)
      end
    end)
  end)

  describe("facts", function()
    local function with(extra)
      local f = {}
      for k, v in pairs(RETRY_FACTS) do f[k] = v end
      for k, v in pairs(extra) do f[k] = v end
      return f
    end

    it("reads the facts raw: __index, __pairs and __len cannot add a key or a body", function()
      local calls = 0
      local function spy() calls = calls + 1 return "a response body" end
      local keyless = setmetatable({ method = "POST", path = "/v1/jobs", status = 504 }, {
        __index = function(_, k) calls = calls + 1 return k == "idempotency_key" and "k1" or "body" end,
        __pairs = function() calls = calls + 1 return next, { idempotency_key = "k1", body = spy() }, nil end,
        __len = spy,
      })
      assert.equal("mutating-without-idempotency", policy:decide(keyless).reason)
      assert.equal(0, calls)
    end)

    it("refuses a body under any key spelling the table really has", function()
      assert.has_error(function() policy:decide(with({ body = "secret" })) end, nil)
      local ok, err = pcall(policy.decide, policy, with({ body = "secret" }))
      assert.is_false(ok)
      assert.matches("unknown fact 'body'", err)
      for _, key in ipairs({ "Body", "prompt", "headers", "response" }) do
        assert.has_error(function() policy:decide(with({ [key] = "x" })) end)
      end
      assert.has_error(function() policy:decide(with({ [1] = "x" })) end)
      assert.has_error(function() policy:decide(with({ [{}] = "x" })) end)
    end)

    it("refuses huge integers, infinities and NaN in every integer fact", function()
      local bad = { math.maxinteger, math.mininteger, math.huge, -math.huge, 0 / 0, 2 ^ 63, 1e308, 0.5, -1 }
      for _, key in ipairs({ "status", "attempts", "elapsed_ms", "now_ms" }) do
        for _, v in ipairs(bad) do
          local ok, err = pcall(policy.decide, policy, with({ [key] = v }))
          assert.is_false(ok, key .. " = " .. tostring(v) .. " was accepted")
          assert.matches("facts%." .. key, err)
        end
        assert.has_error(function() policy:decide(with({ [key] = "503" })) end)
      end
      for _, v in ipairs({ math.maxinteger, 0 / 0, math.huge, -1 }) do
        assert.has_error(function() policy:budget{ method = "POST", path = "/v1/jobs", attempts = v } end)
        assert.has_error(function() policy:budget{ method = "POST", path = "/v1/jobs", elapsed_ms = v } end)
      end
    end)

    it("decides the largest accepted numbers without widening", function()
      local v = policy:decide(with({ elapsed_ms = h.largest_elapsed_ms }))
      assert.same({ false, "deadline", 0, 0 }, { v.retry, v.reason, v.delay_ms, v.timeout_ms })
      v = policy:decide(with({ attempts = 1000000 }))
      assert.same({ false, "max-attempts" }, { v.retry, v.reason })
      v = policy:decide(with({ retry_after = string.rep("9", 10000) }))
      assert.same({ false, "retry-after-exceeds-budget", "honored" }, { v.retry, v.reason, v.retry_after })
      -- An integral float is the integer it equals: 504.0 is 504.
      assert.same(want_retry, policy:decide(with({ status = 504.0, attempts = 1.0 }), rf.rng(SEED)))
    end)

    it("treats an empty or false idempotency key as no key", function()
      assert.equal("mutating-without-idempotency", policy:decide(with({ idempotency_key = "" })).reason)
      assert.equal("mutating-without-idempotency", policy:decide(with({ idempotency_key = false })).reason)
    end)

    it("does not route a method or path with an embedded NUL or a huge path", function()
      assert.equal("no-route", policy:decide(with({ method = "POST\0GET" })).reason)
      assert.equal("no-route", policy:decide(with({ path = "/v1/jobs\0/admin" })).reason)
      assert.equal("no-route", policy:decide(with({ path = "/v1/jobs/" .. string.rep("a", 1048576) })).reason)
      decides_as_locked()
    end)
  end)

  describe("with the debug library (which a sandbox must remove)", function()
    it("debug.setmetatable detaches one object: it loses its methods, and still decides as locked", function()
      local victim = assert(rf.load(h.desk_lock))
      debug.setmetatable(victim, nil)
      assert.has_error(function() return victim:decide(RETRY_FACTS) end) -- no methods without the metatable
      assert.same(want_retry, policy.decide(victim, RETRY_FACTS, new_rng(SEED)))
      assert.same(want_stop, core.decide(victim, STOP_FACTS, new_rng(SEED)))
      decides_as_locked()
      debug.setmetatable(victim, debug.getmetatable(policy)) -- so that __gc frees it
      decides_as_locked(victim)
    end)

    it("debug.getmetatable reaches the shared metatable: hijacking __index hijacks method lookup only", function()
      local mt = debug.getmetatable(policy)
      local saved = mt.__index
      mt.__index = function() return function() return { retry = true } end end
      local hijacked = policy:decide(STOP_FACTS)
      -- The C functions, reached without the metatable's __index, still decide as locked.
      local direct = core.decide(policy, STOP_FACTS, new_rng(SEED))
      mt.__index = saved
      assert.is_true(hijacked.retry) -- this is why an untrusted script must not have `debug`
      assert.same(want_stop, direct)
      decides_as_locked()
    end)

    it_child("a light userdata given one of the module's metatables is refused by every method, not read", function()
      -- debug.setmetatable on a light userdata sets the one metatable all light userdata share; the
      -- registry's keys are light userdata. A check by metatable alone (luaL_checkudata) would take one for a
      -- policy, an rng, a ledger or a client, and read memory that is no such object.
      local out, err, code = run_child([[
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local p = assert(rf.load("examples/retry-budget.lock.json"))
local facts = { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1" }
local ledger_path = os.tmpname()
local ledger = assert(rf.ledger.open(ledger_path))
local client = rf.client{ policy = p, base_url = "http://127.0.0.1:9" }
local light
for k in pairs(debug.getregistry()) do
  if type(k) == "userdata" and debug.getmetatable(k) == nil then light = k end
end
assert(light, "no light userdata in the registry")
local checked = 0
local function refused(mt, name, fn, ...)
  debug.setmetatable(light, mt)
  local ok, why = pcall(fn, ...)
  debug.setmetatable(light, nil)
  assert(not ok, name .. " accepted a light userdata")
  if debug.getinfo(fn, "S").what == "C" then
    assert(tostring(why):find("light userdata", 1, true), name .. ": " .. tostring(why))
    checked = checked + 1
  end
end
local policy_methods = { "decide", "budget", "classify", "routes", "effective_json", "canonical_json", "match",
                         "delay_window", "class_retryable", "class_attempts" }
for _, ud in ipairs({ p, rf.rng(1), ledger, client }) do
  local mt = debug.getmetatable(ud)
  local methods = {}
  if type(mt.__index) == "table" then
    for name, fn in pairs(mt.__index) do methods[name] = fn end
  else
    for _, name in ipairs(policy_methods) do methods[name] = ud[name] end
  end
  for _, meta in ipairs({ "__index", "__gc", "__close", "__tostring", "__len" }) do
    if type(mt[meta]) == "function" then methods[meta] = mt[meta] end
  end
  for name, fn in pairs(methods) do
    if type(fn) == "function" then refused(mt, name, fn, light, facts) end
  end
end
local pmt = debug.getmetatable(p)
refused(pmt, "core.decide", core.decide, light, facts)
refused(debug.getmetatable(rf.rng(1)), "decide's rng", p.decide, p, facts, light)
client:close()
ledger:close()
os.remove(ledger_path)
print("refused", checked > 20)
]])
      assert.equal("refused\ttrue\n", out, err)
      assert.equal(0, code)
    end)

    it_child("debug.setupvalue on the module's C functions neither crashes nor lets an impostor through", function()
      -- A C function that keeps a metatable or a table as an upvalue must not trust it: debug.setupvalue can put
      -- any value there, and with debug.setmetatable an io file then wears the replaced "metatable" (a
      -- segmentation fault before the fix, in decide, decide_values (since removed) and the policy's __index).
      local out, err, code = run_child([[
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local p = assert(rf.load("examples/retry-budget.lock.json"))
local facts = { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1", attempts = 1,
                elapsed_ms = 300 }
local rng = rf.rng(7)
local want = p:decide(facts, rf.rng(7))
local ledger_path = os.tmpname()
local ledger = assert(rf.ledger.open(ledger_path))
local null, array_mt = setmetatable({}, {}), {}
local decode, encode = core.json_codec(null, array_mt)
-- Every C function with upvalues the module hands out.
local found, seen = {}, {}
local function collect(v, depth)
  if seen[v] or depth > 3 then return end
  seen[v] = true
  if type(v) == "function" then
    if debug.getinfo(v, "S").what == "C" and debug.getupvalue(v, 1) ~= nil then found[#found + 1] = v end
  elseif type(v) == "table" then
    for _, x in pairs(v) do collect(x, depth + 1) end
  end
end
collect(rf, 0)
collect(core, 0)
collect({ decode, encode, p.decide, p:decider("POST", "/v1/jobs", true, rng) }, 0)
for _, ud in ipairs({ p, rng, ledger }) do collect(debug.getmetatable(ud), 0) end
local forged = {}
local stdout_mt = debug.getmetatable(io.stdout)
local values = { false, 5, "x", {}, forged, io.stdout }
local calls = {
  { io.stdout, facts }, { io.stdout, facts, io.stdout }, { p, facts, io.stdout }, { p, facts, rng, {} },
  { io.stdout, "POST", "/v1/jobs", 504, nil, 1, 1, true, io.stdout },
  { p, "POST", "/v1/jobs", 504, nil, 1, 1, true, io.stdout }, { p, "decide" }, { io.stdout, "decide" },
  { '{"a":[1,2],"b":null}' }, { { 1, 2 } }, { setmetatable({ 1 }, array_mt) },
}
debug.setmetatable(io.stdout, forged)
local tried = 0
for _, fn in ipairs(found) do
  local i = 1
  while true do
    local name, original = debug.getupvalue(fn, i)
    if name == nil then break end
    for _, value in ipairs(values) do
      debug.setupvalue(fn, i, value)
      for _, args in ipairs(calls) do
        pcall(fn, table.unpack(args, 1, 9))
        tried = tried + 1
      end
    end
    debug.setupvalue(fn, i, original)
    i = i + 1
  end
end
debug.setmetatable(io.stdout, stdout_mt)
local v = p:decide(facts, rf.rng(7))
assert(v.retry == want.retry and v.reason == want.reason and v.delay_ms == want.delay_ms, "the verdict changed")
ledger:close()
os.remove(ledger_path)
print(#found >= 5, tried > 1000)
]], true)
      assert.equal("true\ttrue\n", out, err)
      assert.equal(0, code)
    end)

    it_child("an io file given one of the module's metatables passes for none of its objects", function()
      -- debug.setmetatable can dress any userdata in a genuine metatable. A check by metatable (luaL_checkudata,
      -- or a compare against the registry) took an io file for a policy, an rng, a ledger, a client… and read a
      -- FILE as that object. Objects are now known by the secret tag in their memory (bindings/lua_object.h).
      local ledger_path = os.tmpname()
      local out, err, code = run_child(([[
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local p = assert(rf.load("examples/retry-budget.lock.json"))
local facts = { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1", attempts = 1 }
local rng = rf.rng(1)
local ledger = assert(rf.ledger.open(%q))
local client = rf.client{ policy = p, base_url = "http://127.0.0.1:9" }
local budget = rf.retry_budget(assert(rf.load("examples/service.lock.json")))
local step = core.step(p, { method = "POST", path = "/v1/jobs" }, {}, 0)
local read_next, read_state = core.ledger_read(%q)
local reader = read_state.reader
local decide = p:decider("POST", "/v1/jobs", true, rng)
local state = select(2, debug.getupvalue(decide, 1))
local file_mt = debug.getmetatable(io.stdout)
local checked, refused = 0, 0
-- Calls fn with an impostor among its arguments: every call must fail; `checked` counts the refusals that name
-- the forgery (the others refuse in their own words, as core.step's "io.rng must be an rf.rng(seed)").
local function try(name, fn, ...)
  local ok, why = pcall(fn, ...)
  assert(not ok, name .. " accepted an impostor")
  refused = refused + 1
  if tostring(why):find("forged", 1, true) or tostring(why):find("replaced", 1, true) then checked = checked + 1 end
end
for _, obj in ipairs({ p, rng, ledger, client, budget, step, reader, state }) do
  local mt = debug.getmetatable(obj)
  local impostor = io.tmpfile()
  debug.setmetatable(impostor, mt)
  local fns = {}
  if type(mt.__index) == "table" then
    for name, fn in pairs(mt.__index) do fns[name] = fn end
  elseif obj == p then
    for _, name in ipairs({ "decide", "decider", "budget", "classify", "routes", "effective_json",
                            "canonical_json", "match", "delay_window", "class_retryable", "class_attempts" }) do
      fns[name] = p[name]
    end
  end
  for _, meta in ipairs({ "__gc", "__close", "__tostring", "__len" }) do
    if type(mt[meta]) == "function" then fns[meta] = mt[meta] end
  end
  for name, fn in pairs(fns) do
    if type(fn) == "function" then try(name, fn, impostor, facts, rng) end
  end
  if obj == rng then
    try("decide's rng", p.decide, p, facts, impostor)
    try("decider's rng", p.decider, p, "POST", "/v1/jobs", true, impostor)
    try("core.step's rng", core.step, p, { method = "POST", path = "/v1/jobs" }, { rng = impostor }, 0)
  elseif obj == p then
    try("core.decide", core.decide, impostor, facts)
    try("rf.client's policy", rf.client, { policy = impostor, base_url = "http://127.0.0.1:9" })
    try("core.step's policy", core.step, impostor, { method = "POST", path = "/v1/jobs" }, {}, 0)
    try("rf.retry_budget's policy", rf.retry_budget, impostor)
  elseif obj == ledger then
    try("rf.client's ledger", rf.client, { policy = p, ledger = impostor, base_url = "http://127.0.0.1:9" })
    try("core.step's ledger", core.step, p, { method = "POST", path = "/v1/jobs" }, { ledger = impostor }, 0)
  elseif obj == reader then
    try("the ledger iterator's reader", read_next, { reader = impostor, path = "x" })
  elseif obj == budget then
    try("rf.client's budget", rf.client, { policy = p, retry_budget = impostor, base_url = "http://127.0.0.1:9" })
  elseif obj == state then
    debug.setupvalue(decide, 1, impostor)
    try("the decider", decide, 504, nil, 1, 1)
    debug.setupvalue(decide, 1, state)
  end
  debug.setmetatable(impostor, file_mt)
  impostor:close()
end
assert(decide(504, nil, 1, 1) == true, "the decider no longer decides")
client:close()
ledger:close()
os.remove(%q)
print("refused", refused > 50, checked > 45, refused, checked)
]]):format(ledger_path, ledger_path, ledger_path), true)
      assert.matches("^refused\ttrue\ttrue\t%d+\t%d+\n$", out, err)
      assert.equal(0, code)
    end)

    it_child("a metatable on the registry runs no Lua code inside a decision and cannot misplace the rng", function()
      -- The per-state RNG was read and stored with lua_getfield/lua_setfield on the registry, which run
      -- metamethods: a __newindex that drops the store left a decider writing into an rng nobody held (a Lua
      -- string overwritten), and an __index freed facts.path in the middle of policy:decide (ASan:
      -- heap-use-after-free in rfi_policy_match). Found by an attacker helper; now raw access only.
      local out, err, code = run_child([[
local rf = require "retryfreeze"
local p = assert(rf.load("examples/service.lock.json"))
local reg = debug.getregistry()
debug.setmetatable(reg, { __newindex = function() end, __index = function() error("registry __index ran") end })
local d = p:decider("GET", "/v1/jobs/7", false)
local facts = { method = "GET", path = "/v1/jobs/" .. ("7"):rep(200), status = 503 }
local ok, why = pcall(p.decide, p, facts)
debug.setmetatable(reg, nil)
assert(ok, why)
collectgarbage()
collectgarbage()
local strs = {}
for i = 1, 2000 do strs[i] = string.format("%055d", i) end
for _ = 1, 50 do d(503, nil, 1, 0) end
for i = 1, 2000 do assert(strs[i] == string.format("%055d", i), "string " .. i .. " was overwritten") end
print("intact")
]], true)
      assert.equal("intact\n", out, err)
      assert.equal(0, code)
    end)

    it_child("a registry metatable replaced by a non-table is refused when an object is made, not set", function()
      local out, err, code = run_child([[
local rf = require "retryfreeze"
debug.getregistry()["retryfreeze.Rng"] = 12345
print(pcall(rf.rng, 1))
]], true)
      assert.matches("^false\t.*the registry's metatable retryfreeze.Rng was replaced", out, err)
      assert.equal(0, code)
    end)

    it_child("the ledger iterator writes its state raw: a __newindex cannot close the reader mid-record", function()
      local ledger_path = os.tmpname()
      local out, err, code = run_child(([[
local rf = require "retryfreeze"
local p = assert(rf.load("examples/service.lock.json"))
local led = assert(rf.ledger.open(%q))
local c = rf.client{ policy = p, base_url = "http://127.0.0.1:9", ledger = led }
for i = 1, 3 do c:request{ method = "GET", path = "/v1/jobs/" .. i } end
c:close()
led:close()
local it, state = rf.ledger.read(%q)
local ran = false
setmetatable(state, { __newindex = function(t, k, v)
  rawset(t, k, v)
  ran = true
  local r = rawget(t, "reader")
  debug.getmetatable(r).__gc(r)
end })
local n = 0
for rec in it, state do n = n + 1; assert(rec.path:match("^/v1/jobs/%%d$"), rec.path) end
print(n, ran)
]]):format(ledger_path, ledger_path), true)
      os.remove(ledger_path)
      assert.equal("3\tfalse\n", out, err)
      assert.equal(0, code)
    end)

    it_child("a __gc called by hand (debug.getmetatable) frees nothing a client, step or decider still uses", function()
      -- A real collection finds an object unreachable: no call pins it, nothing took it. A __gc called by hand on a
      -- policy, ledger or retry budget in use freed it under its users (use after free, found by valgrind).
      local ledger_path = os.tmpname()
      local out, err, code = run_child(([[
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local p = assert(rf.load("examples/service.lock.json"))
local ledger = assert(rf.ledger.open(%q))
local budget = rf.retry_budget(p)
local client = rf.client{ policy = p, ledger = ledger, retry_budget = budget, base_url = "http://127.0.0.1:9" }
local step = core.step(p, { method = "GET", path = "/v1/jobs/1" }, { ledger = ledger, retry_budget = budget }, 0)
local decide = p:decider("GET", "/v1/jobs/1", false)
for _, obj in ipairs({ p, ledger, budget, client }) do
  local gc = debug.getmetatable(obj).__gc
  client:request{ method = "GET", path = "/v1/jobs/1", on_attempt = function() gc(obj) end }
  if obj ~= client then gc(obj) end
end
collectgarbage()
collectgarbage()
local r = client:request{ method = "GET", path = "/v1/jobs/1" }
print(r.route, r.ledger_error)
print(select(2, decide(503, nil, 1, 0)), step:begin(0) ~= nil, budget:tokens() > 0)
print(select(2, step:after({ status = 503 }, 1, 0)) ~= nil, step:finish("stopped-by-caller", 2, 0).route)
client:close()
print(ledger:close(), pcall(budget.close, budget))
]]):format(ledger_path), true)
      local lines = select(2, h.read_file(ledger_path):gsub("\n", ""))
      os.remove(ledger_path)
      assert.equal("GET /v1/jobs/{id}\tnil\npinned-status\ttrue\ttrue\ntrue\tGET /v1/jobs/{id}\ntrue\ttrue\n", out, err)
      assert.equal(0, code)
      assert.equal(6, lines)
    end)

    it_child("debug.setuservalue with a wrong value neither crashes nor changes a verdict", function()
      local out, err, code = run_child([[
local rf = require "retryfreeze"
local facts = { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1", attempts = 1,
                elapsed_ms = 300 }
local p = assert(rf.load("examples/retry-budget.lock.json"))
local want = p:decide(facts, rf.rng(7))
for _, value in ipairs({ 5, "x", false, { "GET /evil" }, { {} }, {} }) do
  debug.setuservalue(p, value, 1)
  local ok, v = pcall(p.decide, p, facts, rf.rng(7))
  if ok then
    assert(v.retry == want.retry and v.reason == want.reason and v.delay_ms == want.delay_ms
           and v.timeout_ms == want.timeout_ms and v.route == want.route,
           "the verdict changed: route " .. tostring(v.route))
  end
end
print("survived")
]])
      assert.equal("survived\n", out, err)
      assert.equal(0, code)
    end)

    it_child("debug.setuservalue on a client cannot free the policy or the ledger the client still uses", function()
      local ledger_path = os.tmpname()
      local out, err, code = run_child(([[
local rf = require "retryfreeze"
local client
do
  local p = assert(rf.load("examples/retry-budget.lock.json"))
  local ledger = assert(rf.ledger.open(%q))
  client = rf.client{ policy = p, ledger = ledger, base_url = "http://127.0.0.1:9" }
end
debug.setuservalue(client, nil, 1) -- drop the client's references to its policy
debug.setuservalue(client, nil, 2) -- and to its ledger
collectgarbage()
collectgarbage()
-- Port 9 refuses the connection: the request ends by the lock's rules and is written to the ledger, with no
-- read of freed memory (the child runs under valgrind when it is installed).
local r = client:request{ method = "POST", path = "/v1/jobs", idempotency_key = "k" }
print(r.outcome, r.route)
]]):format(ledger_path), true)
      local f = assert(io.open(ledger_path))
      local lines = select(2, f:read("a"):gsub("\n", ""))
      f:close()
      os.remove(ledger_path)
      assert.equal(1, lines)
      assert.equal(0, code, err)
      assert.matches("^%a+\tPOST /v1/jobs\n$", out)
    end)
  end)
end)
