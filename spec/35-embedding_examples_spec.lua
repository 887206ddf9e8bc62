-- docs/embedding.md's examples, run as their users would: examples/luv_flow.lua (rf.flow in a luv loop, 50
-- requests at once) and examples/plain_client.lua (a plain script on the libcurl client), each under Lua 5.4 and
-- LuaJIT, against retryfreeze-serve with random faults. Every request ends with an outcome, writes one ledger
-- line, and the upstream saw exactly the attempts the ledger records.
local h = require "spec.helper"
local rf = require "retryfreeze"
local upstream = require "retryfreeze.upstream"

local build = os.getenv("RF_BUILD_DIR") or "build"
local runtimes = { { "lua5.4", "5.4" }, { "luajit", "luajit" } }

local function ledger_attempts(path)
  local n, attempts = 0, 0
  for rec in rf.ledger.read(path) do
    n = n + 1
    attempts = attempts + rec.attempts
  end
  return n, attempts
end

describe("docs/embedding.md examples", function()
  local up
  setup(function()
    up = assert(upstream.start{ bindir = h.bindir, stall_ms = 3000, max_seconds = 120,
                                faults = "503=0.1,429=0.05,504=0.1,reset=0.05,timeout=0.02,ra=1" })
  end)
  teardown(function() if up then up.stop() end end)

  for _, rt in ipairs(runtimes) do
    local lua, dir = rt[1], rt[2]
    local env = h.lua_env(dir)
    local has_runtime = os.execute("test -f " .. build .. "/lib/lua/" .. dir .. "/retryfreeze/core.so")
    local it_or_pending = (has_runtime == true or has_runtime == 0) and it or pending

    it_or_pending("examples/luv_flow.lua under " .. lua .. ": 50 flows in one luv loop", function()
      local ledger = os.tmpname()
      os.remove(ledger)
      local before = assert(upstream.stats(up.url)).requests
      local out, err, code = h.sh(env .. "timeout 60 " .. lua .. " examples/luv_flow.lua examples/retry-budget.lock.json "
        .. up.port .. " 50 " .. ledger)
      assert.equal(0, code, err)
      assert.matches("\ndone\t50\n$", "\n" .. out)
      local n, attempts = ledger_attempts(ledger)
      os.remove(ledger)
      assert.equal(50, n)
      assert.equal(attempts, assert(upstream.stats(up.url)).requests - before)
    end)

    it_or_pending("examples/plain_client.lua under " .. lua .. ": a plain script on the client", function()
      local ledger = os.tmpname()
      os.remove(ledger)
      local before = assert(upstream.stats(up.url)).requests
      local out, err, code = h.sh(env .. "timeout 60 " .. lua .. " examples/plain_client.lua "
        .. "examples/retry-budget.lock.json " .. up.url .. " 10 " .. ledger)
      assert.equal(0, code, err)
      local total = 0
      for _, c in out:gmatch("(%a+)\t(%d+)") do total = total + tonumber(c) end
      assert.equal(10, total)
      local n, attempts = ledger_attempts(ledger)
      os.remove(ledger)
      assert.equal(10, n)
      assert.equal(attempts, assert(upstream.stats(up.url)).requests - before)
    end)
  end
end)
