-- Faults a security review found in core.step (bindings/lua_step.c, behind rf.flow) and the binding's string
-- arguments. Each case runs in a child interpreter (Lua 5.4 and LuaJIT), so a crash fails one test instead of
-- killing busted; under .ci/run the children inherit the sanitizer preload, and a sanitizer report fails.
local h = require "spec.helper"

local build = os.getenv("RF_BUILD_DIR") or "build"
local runtimes = { { "lua5.4", "5.4" }, { "luajit", "luajit" } }

--- Runs Lua source in a child `lua` with the module on its paths; returns stdout, stderr, exit code.
local function run(lua, dir, source)
  return h.run_lua("local rf = require 'retryfreeze'; local core = require 'retryfreeze.core'; " .. source,
    { lua = lua, dir = dir })
end

local clean = h.clean_exit -- no crash, no sanitizer report

for _, rt in ipairs(runtimes) do
  local lua, dir = rt[1], rt[2]
  local has = os.execute("test -f " .. build .. "/lib/lua/" .. dir .. "/retryfreeze/core.so")
  local describe_or_pending = (has == true or has == 0) and describe or pending

  describe_or_pending("core.step faults under " .. lua, function()
    it("F1: ledger:close() while rf.flow runs is refused; the flow records its line", function()
      local ledger = os.tmpname()
      local out = clean(run(lua, dir, string.format([[
        local p = assert(rf.load("examples/service.lock.json"))
        local led = assert(rf.ledger.open(%q))
        local closed, why
        local r = rf.flow(p, { method = "GET", path = "/v1/jobs/1" }, { ledger = led, sleep = function() end,
          now_ms = function() return 0 end,
          send = function() closed, why = led:close() return { status = 200 } end })
        print(closed, why, r.status, r.ledger_error)
        print(led:close())
      ]], ledger)))
      local lines = 0
      for _ in io.lines(ledger) do lines = lines + 1 end
      os.remove(ledger)
      assert.equal("nil\tledger in use by 1 open client(s) or unfinished flow(s): close or finish them first\t200\tnil\n"
        .. "true\n", out)
      assert.equal(1, lines)
    end)

    it("F1: a step dropped unfinished releases its ledger when collected", function()
      local ledger = os.tmpname()
      local out = clean(run(lua, dir, string.format([[
        local p = assert(rf.load("examples/service.lock.json"))
        local led = assert(rf.ledger.open(%q))
        local step = core.step(p, { method = "GET", path = "/v1/jobs/1" }, { ledger = led }, 0)
        print(led:close())
        step = nil
        collectgarbage(); collectgarbage()
        print(led:close())
      ]], ledger)))
      os.remove(ledger)
      assert.equal("nil\tledger in use by 1 open client(s) or unfinished flow(s): close or finish them first\ntrue\n", out)
    end)

    it("F2: step:finish, step:after and step:begin from inside step:after's hook raise 'step is busy'", function()
      local out = clean(run(lua, dir, [[
        local p = assert(rf.load("examples/retry-budget.lock.json"))
        for _, call in ipairs { "finish", "after", "begin" } do
          local step = core.step(p, { method = "POST", path = "/v1/jobs", idempotency_key = "k" }, {}, 0)
          step:begin(0)
          local ok, err
          local retry, reason, hook_err = step:after({ status = 429 }, 10, 0, function()
            if call == "finish" then ok, err = pcall(step.finish, step, "success", 10, 0)
            elseif call == "after" then ok, err = pcall(step.after, step, { status = 200 }, 10, 0)
            else ok, err = pcall(step.begin, step, 10) end
            return false
          end)
          print(call, ok, (tostring(err):gsub("^.-: ", "")), retry, reason, hook_err)
          local r = step:finish(reason, 20, 0)
          print(r.outcome, r.attempts, #r.tries)
        end
      ]]))
      local busy = "step is busy (called from its own on_attempt hook)"
      local want = ""
      for _, call in ipairs { "finish", "after", "begin" } do
        want = want .. call .. "\tfalse\t" .. busy .. "\tfalse\tstopped-by-caller\tnil\n" .. "terminal\t1\t1\n"
      end
      assert.equal(want, out)
    end)

    it("F6: a string with a NUL byte is refused, naming the field (the body stays binary-safe)", function()
      local out = clean(run(lua, dir, [[
        local p = assert(rf.load("examples/service.lock.json"))
        local function try(f) local ok, err = pcall(f) print(ok, (tostring(err):gsub("^[^:]*:%d+: ", ""))) end
        local c = rf.client{ policy = p, base_url = "http://127.0.0.1:9" }
        local base = { method = "GET", path = "/v1/jobs/1", idempotency_key = "order-1" }
        for _, f in ipairs { "method", "path", "query", "idempotency_key" } do
          local r = {}
          for k, v in pairs(base) do r[k] = v end
          r[f] = (r[f] or "q") .. "\0a"
          try(function() return c:request(r) end)
        end
        try(function() return c:request{ method = "GET", path = "/v1/jobs/1", headers = { ["X-A\0b"] = "1" } } end)
        try(function() return c:request{ method = "GET", path = "/v1/jobs/1", headers = { ["X-A"] = "1\0b" } } end)
        try(function() return rf.client{ policy = p, base_url = "http://127.0.0.1:9\0.evil" } end)
        try(function() return rf.client{ policy = p, base_url = "http://127.0.0.1:9", headers = { ["X"] = "\0" } } end)
        try(function() return rf.ledger.open(os.tmpname(), { host = "web-1\0x" }) end)
        try(function() return core.step(p, { method = "GET", path = "/v1/jobs/1", idempotency_key = "order-1\0b" }, {}, 0) end)
        try(function() return core.step(p, { method = "GET", path = "/v1/jobs/1\0x" }, {}, 0) end)
        try(function() return rf.flow(p, { method = "GET\0", path = "/v1/jobs/1" },
          { send = function() return { status = 200 } end, sleep = function() end, now_ms = function() return 0 end }) end)
        local r = rf.flow(p, { method = "POST", path = "/v1/jobs", body = "a\0b", idempotency_key = "k" },
          { send = function(req) return { status = 200, body = req.body } end, sleep = function() end,
            now_ms = function() return 0 end })
        print(r.status, #r.body)
      ]]))
      local nul = "must not contain a NUL byte (C would cut the string there)"
      assert.equal(table.concat({
        "false\trequest.method " .. nul,
        "false\trequest.path " .. nul,
        "false\trequest.query " .. nul,
        "false\trequest.idempotency_key " .. nul,
        "false\trequest.headers: header names " .. nul,
        "false\trequest.headers: header values " .. nul,
        "false\trf.client: base_url " .. nul,
        "false\trf.client: headers: header values " .. nul,
        "false\trf.ledger.open: host " .. nul,
        "false\trf.flow: request.idempotency_key " .. nul,
        "false\trf.flow: request.path " .. nul,
        "false\trf.flow: request.method " .. nul,
        "200\t3", "" }, "\n"), out)
    end)

    it("F5: clock readings outside 0..2^53-1 raise naming io.now_ms or io.wall_ms; no overflow in the step", function()
      local out = clean(run(lua, dir, [[
        local p = assert(rf.load("examples/retry-budget.lock.json"))
        local function try(f) local ok, err = pcall(f) print(ok, (tostring(err):gsub("^[^:]*:%d+: ", ""))) end
        local big = 9007199254740991 -- 2^53-1
        local function flow(clocks)
          local i = 0
          return rf.flow(p, { method = "POST", path = "/v1/jobs", idempotency_key = "k" }, {
            send = function() return { status = 429 } end, sleep = function() end,
            now_ms = function() i = i + 1 return clocks[i] end })
        end
        try(function() return flow { -1 } end)
        try(function() return flow { 0, big + 1 } end)
        try(function() return flow { math.mininteger or -2^63, math.maxinteger or 2^63 } end)
        try(function() return core.step(p, { method = "GET", path = "/v1/jobs" }, {}, -1) end)
        local step = core.step(p, { method = "POST", path = "/v1/jobs", idempotency_key = "k" }, {}, big)
        try(function() return step:begin(-1) end)
        print(step:begin(0))
        try(function() return step:after({ status = 429 }, 0, -5) end)
        local retry, delay = step:after({ status = 429 }, big, big)
        print(retry, math.type and math.type(delay) or type(delay))
        local r = step:finish("stopped-by-caller", 0, big)
        print(r.elapsed_ms, string.format("%.0f", r.tries[1].elapsed_ms))
      ]]))
      local range = "must return milliseconds in 0..2^53-1, got "
      local int = lua == "lua5.4" and "integer" or "number"
      assert.equal(table.concat({
        "false\trf.flow: io.now_ms " .. range .. "-1",
        "false\trf.flow: io.now_ms " .. range .. "9007199254740992",
        "false\trf.flow: io.now_ms " .. range .. "-9223372036854775808",
        "false\trf.flow: io.now_ms " .. range .. "-1",
        "false\trf.flow: io.now_ms " .. range .. "-1",
        "2000", -- the per-try timeout: the clock went backwards, so 0 ms have elapsed
        "false\trf.flow: io.wall_ms " .. range .. "-5",
        "true\t" .. int,
        "0\t9007199254740991", "" }, "\n"), out)
    end)

    if lua == "lua5.4" then -- LuaJIT has no debug.setuservalue
      it("F4: what a step uses stays anchored when a script replaces its user values", function()
        -- The step holds what it uses from C (lua_object.h's holdings), not in user values: it has none to replace.
        local out = clean(run(lua, dir, [[
          local led = assert(rf.ledger.open(os.tmpname()))
          local weak = setmetatable({}, { __mode = "k" })
          local step
          do
            local p = assert(rf.load("examples/service.lock.json"))
            local rng, budget = rf.rng(7), rf.retry_budget(p)
            weak[p], weak[rng], weak[budget] = 1, 2, 3
            step = core.step(p, { method = "GET", path = "/v1/jobs/1" },
              { ledger = led, rng = rng, retry_budget = budget }, 0)
          end
          for i = 1, 5 do debug.setuservalue(step, nil, i) end
          collectgarbage(); collectgarbage()
          local alive = 0
          for _ in pairs(weak) do alive = alive + 1 end
          print(alive)
          print(step:begin(0))
          print(step:after({ status = 503 }, 10, 0))
          local r = step:finish("stopped-by-caller", 20, 0)
          print(r.attempts, r.outcome)
          print(led:close())
        ]]))
        assert.matches("^3\n1000\ntrue\t%d+\n1\tterminal\ntrue\n$", out)
      end)
    end

    it("F3: client:request nested in on_attempt hooks is refused beyond 32 levels, without a crash", function()
      local out = clean(run(lua, dir, [[
        local p = assert(rf.load("examples/service.lock.json"))
        local deepest = 0
        local function go(depth)
          deepest = math.max(deepest, depth)
          local c = rf.client{ policy = p, base_url = "http://127.0.0.1:9" }
          return c:request{ method = "GET", path = "/v1/jobs/1", on_attempt = function() go(depth + 1) end }
        end
        local ok, err = pcall(go, 1)
        print(ok, deepest, (tostring(err):match("client:request: more than 32 requests nested in on_attempt hooks")))
        -- the depth is back at 0: 32 nested levels run again
        deepest = 0
        local function go32(depth)
          deepest = math.max(deepest, depth)
          local c = rf.client{ policy = p, base_url = "http://127.0.0.1:9" }
          return c:request{ method = "GET", path = "/v1/jobs/1",
            on_attempt = function() if depth < 32 then go32(depth + 1) end return false end }
        end
        print(go32(1).outcome, deepest)
      ]]))
      assert.equal("false\t33\tclient:request: more than 32 requests nested in on_attempt hooks\nterminal\t32\n", out)
    end)
  end)
end
