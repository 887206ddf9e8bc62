-- Nothing a Lua script does with a client, its ledger, its requests or its hooks may crash the host.
-- Each fault the issue reports is one test here. Every case runs in a child `lua5.4` (a fresh, shallow Lua
-- stack, as a user's script has), so a crash fails one test instead of killing busted; under .ci/run the
-- children inherit the sanitizer preload and RF_SANITIZED, and ASan's report is a failure (exit code 1 or a
-- signal, plus the report on stderr).
local h = require "spec.helper"
local upstream = require "retryfreeze.upstream"


-- A lock for the echo routes of retryfreeze-serve: 3 attempts on a 503, short delays.
local LOCK = [[{"version":1,"defaults":{"maxAttempts":3,"perAttemptTimeoutMs":2000,"totalBudgetMs":5000,
  "retryable":["HTTP_503"],"backoff":{"baseMs":5,"maxMs":10}},
  "routes":[{"endpoint":"GET /echo/*"},{"endpoint":"POST /echo/*","idempotencyRequired":[]}]}]]

--- Runs Lua source in a child lua5.4 with the module on its paths. The source sees `URL` (the upstream),
--- `LOCK` (a policy loaded from the lock above) and `rf`. Returns stdout, stderr, exit code.
local function run_lua(source, url, timeout_s)
  local prelude = string.format("local rf = require 'retryfreeze'; local URL = %q; local LOCK = assert(rf.load_string(%q)); ",
    url or "http://127.0.0.1:9", LOCK)
  return h.run_lua(prelude .. source, { lua = "lua5.4", dir = "5.4", timeout_s = timeout_s })
end

local clean = h.clean_exit -- no crash, no sanitizer report, no hang

local BUSY = "client is busy %(called from its own on_attempt hook%)"

-- The cases run under Lua 5.4 (<close>, 5.4's coroutines), except those that name their runtimes: pending in a build
-- without the 5.4 module (RF_LUA=luajit), whose LuaJIT runs the runtimes' cases.
local it_54 = h.has_module("5.4") and it or pending

describe("lifetimes and re-entrancy", function()
  local up
  setup(function() up = assert(upstream.start{ bindir = h.bindir, max_seconds = 300 }) end)
  teardown(function() up.stop() end)

  describe("stack discipline", function()
    it_54("client:all takes 10000 requests (its documented maximum) on a fresh Lua stack", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        local reqs = {}
        for i = 1, 10000 do reqs[i] = { method = "GET", path = "/none/" .. i } end -- no route: nothing sent
        local rs = c:all(reqs)
        print(#rs, rs[1].outcome, rs[10000].reason)
      ]], up.url))
      assert.equal("10000\trefused\tno-route\n", out)
    end)

    it_54("client:all takes 10000 requests inside a coroutine", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        local co = coroutine.wrap(function()
          local reqs = {}
          for i = 1, 10000 do reqs[i] = { method = "GET", path = "/none/" .. i, headers = { ["X-A"] = "1" } } end
          return c:all(reqs)
        end)
        local rs = co()
        print(#rs, rs[5000].outcome)
      ]], up.url))
      assert.equal("10000\trefused\n", out)
    end)

    it_54("client:all sends 10000 requests to the upstream, at most 100 at a time, each response in order", function()
      local before = assert(upstream.stats(up.url)).requests
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        local reqs = {}
        for i = 1, 10000 do reqs[i] = { method = "GET", path = "/echo/" .. i, idempotency_key = "all-" .. i } end
        local rs = c:all(reqs)
        local ok = 0
        for i = 1, #rs do
          if rs[i].status == 200 and rs[i].attempts == 1 and rs[i].body:match('"n":1') then ok = ok + 1 end
        end
        print(#rs, ok)
      ]], up.url, 120))
      assert.equal("10000\t10000\n", out)
      assert.equal(10000, assert(upstream.stats(up.url)).requests - before) -- /__stats counts no request
    end)

    it_54("client:all sends each request's own header lines, kept while a hook drops them all and collects", function()
      -- Requests with 0, 1, 17, 63 and 64 header lines (the most a request takes) in turns, 300 of them, every 7th
      -- with its path and headers behind __index: client:all packs their line pointers one request after another in
      -- a block it grows as it reads, and keeps every string in one table; the hook empties every request table and
      -- collects before most are sent. The upstream answers
      -- each with X-Back: <i> from the request's own X-Fault-Script line, so a line of another request, or a freed
      -- one, shows in the response.
      local out = clean(run_lua([[
        local c
        local reqs, counts = {}, { 0, 1, 17, 63, 64 }
        for i = 1, 300 do
          local headers = {}
          local k = counts[i % #counts + 1]
          if k > 0 then headers["X-Fault-Script"] = "200;header=X-Back:" .. i end
          for j = 2, k do headers["X-Pad-" .. j] = ("p"):rep(j) .. i end
          reqs[i] = { method = "GET", path = "/echo/" .. i .. "/" .. ("q"):rep(i % 50), headers = headers,
            inbound_headers = i % 3 == 0 and { ["X-In"] = "in-" .. i } or nil }
          if i % 7 == 0 then -- its path and headers only through __index: read all the same
            reqs[i] = setmetatable({ method = "GET" }, { __index = { path = reqs[i].path, headers = headers } })
          end
        end
        local dropped = false
        c = rf.client{ policy = LOCK, base_url = URL, on_attempt = function()
          if not dropped then
            dropped = true
            for i = 1, #reqs do
              reqs[i].method, reqs[i].path, reqs[i].headers, reqs[i].inbound_headers = nil, nil, nil, nil
            end
            collectgarbage() collectgarbage()
          end
        end }
        local rs = c:all(reqs, { concurrency = 4 })
        local ok = 0
        for i = 1, #rs do
          local want = counts[i % #counts + 1] > 0 and tostring(i) or nil
          if rs[i].status == 200 and rs[i].headers["x-back"] == want then ok = ok + 1 end
        end
        print(#rs, ok, dropped)
      ]], up.url, 60))
      assert.equal("300\t300\ttrue\n", out)
    end)

    it_54("client:all's responses name what client:request's do while finalizers run Lua as they are built", function()
      -- client:all reuses the Lua copies of the engine's strings (outcome, reason, transport, route) across its
      -- responses; mixed outcomes and routes, with finalizers interning strings and collecting at every step of the
      -- collector, must give each response the strings client:request (which reuses nothing) gives the same request.
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        local function request(i, kind)
          if kind == 0 then return { method = "GET", path = "/none/" .. i } end -- refused, no-route, no try
          if kind == 1 then return { method = "GET", path = "/echo/" .. i, idempotency_key = "mix-" .. i } end
          return { method = "POST", path = "/echo/" .. i, idempotency_key = "mix-" .. i, -- 503 then 503: a third try
            headers = { ["X-Fault-Script"] = "503,503" } }
        end
        local function signature(r)
          local s = { r.status, tostring(r.ok), r.outcome, r.reason, tostring(r.route), r.attempts, #r.tries }
          for _, t in ipairs(r.tries) do s[#s + 1] = t.class .. "/" .. t.transport .. "/" .. t.reason end
          return table.concat(s, " ")
        end
        local want = {}
        for kind = 0, 2 do want[kind] = signature(c:request(request(1000 + kind, kind))) end
        local churning, runs = true, 0
        local function churn()
          setmetatable({}, { __gc = function()
            if not churning then return end
            runs = runs + 1
            local s = {}
            for k = 1, 40 do s[k] = "churn-" .. k .. "-" .. #s end
            churn()
          end })
        end
        churn()
        local reqs = {}
        for i = 1, 300 do reqs[i] = request(i, i % 3) end
        local rs = c:all(reqs, { concurrency = 16 })
        churning = false
        local same = 0
        for i = 1, #rs do
          if signature(rs[i]) == want[i % 3] then same = same + 1 else print(i, signature(rs[i]), want[i % 3]) end
        end
        print(#rs, same, want[0], want[1], want[2], runs > 0)
      ]], up.url, 60))
      assert.equal("300\t300\t0 false refused no-route nil 0 0\t200 true success success GET /echo/* 1 1 HTTP_200/ok/success"
        .. "\t200 true success success POST /echo/* 3 3 HTTP_503/ok/pinned-status HTTP_503/ok/pinned-status HTTP_200/ok/success\ttrue\n",
        out)
    end)

    it_54("client:all refuses more than 10000 requests with an argument error", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        local reqs = {}
        for i = 1, 10001 do reqs[i] = { method = "GET", path = "/none" } end
        print(select(2, pcall(c.all, c, reqs)))
      ]], up.url))
      assert.matches("between 0 and 10000 requests", out)
    end)
  end)

  describe("re-entrancy: a client method called from the client's own hook raises", function()
    for _, call in ipairs({ "c:close()", "c:all{ { method = 'GET', path = '/echo/2' } }",
      "c:request{ method = 'GET', path = '/echo/3' }", "c:retry_tokens()", "c:in_flight()",
      "do local x <close> = c end", "c:_run(0)", "c:_set_scheduled(true)",
      "c:_start{ method = 'GET', path = '/echo/4' }" }) do
      it_54(call, function()
        local out = clean(run_lua(string.format([[
          local c
          c = rf.client{ policy = LOCK, base_url = URL, on_attempt = function() %s end }
          local ok, err = pcall(c.request, c, { method = "GET", path = "/echo/1" })
          print(ok, err)
          -- the client is whole afterwards: the next request (no hook error now) succeeds
          local c2 = rf.client{ policy = LOCK, base_url = URL }
          print(c2:request{ method = "GET", path = "/echo/9" }.status, tostring(c))
          c:close()
          print(tostring(c))
        ]], call), up.url, 20))
        local ok, err, status, closed = out:match("^(%a+)\t([^\n]*)\n(%d+)\t([^\n]*)\n([^\n]*)\n$")
        assert.equal("false", ok, out)
        assert.matches(BUSY, err)
        assert.equal("200", status)
        assert.equal("retryfreeze.Client", closed == nil and "" or "retryfreeze.Client")
      end)
    end

    it_54("a request's own on_attempt that calls client:all raises instead of hanging", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        print(pcall(c.request, c, { method = "GET", path = "/echo/1",
          on_attempt = function() c:all{ { method = "GET", path = "/echo/2" } } end }))
        print(c:request{ method = "GET", path = "/echo/4" }.status)
      ]], up.url, 20))
      assert.matches("^false\t[^\n]*" .. BUSY .. "\n200\n$", out)
    end)

    it_54("a hook of client:all that closes the client raises, and every response is cleaned up", function()
      local out = clean(run_lua([[
        local c
        c = rf.client{ policy = LOCK, base_url = URL, on_attempt = function() c:close() end }
        print(pcall(c.all, c, { { method = "GET", path = "/echo/1" }, { method = "GET", path = "/echo/2" } }))
        c:close()
        print(pcall(c.request, c, { method = "GET", path = "/echo/1" }))
      ]], up.url, 20))
      assert.matches("^false\t[^\n]*" .. BUSY .. "\nfalse\t[^\n]*attempt to use a closed client\n$", out)
    end)
  end)

  describe("client:all's options", function()
    it_54("an options table whose __index closes the client or drops the requests changes nothing C holds", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        local reqs = { { method = "GET", path = "/echo/1" }, { method = "GET", path = "/echo/2" } }
        print(pcall(c.all, c, reqs, setmetatable({}, { __index = function() c:close() end })))
        print(pcall(c.all, c, reqs, setmetatable({}, { __index = function(_, k)
          reqs[1].path, reqs[2] = nil, nil
          collectgarbage()
          return k == "concurrency" and 1 or nil
        end })))
        reqs[1].path = "/echo/3"
        local rs = c:all(reqs, { concurrency = 1 })
        print(#rs, rs[1].status, tostring(c))
      ]], up.url, 20))
      -- The options are read first: the close is refused (the client is busy); the requests the second table's
      -- __index dropped are read after it, so the missing path is an error naming it; the client is whole after.
      assert.matches("^false\t[^\n]*" .. BUSY .. "\nfalse\t[^\n]*request.method and request.path are required\n"
        .. "1\t200\tretryfreeze.Client\n$", out)
    end)
  end)

  describe("requests started without a coroutine (client:_start, scheduler.run_requests)", function()
    it_54("a dropped box abandons its transfer; a box outlives the request table and its strings", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        do -- started, then dropped and collected while in flight
          c:_start{ method = "GET", path = "/echo/dropped", headers = { ["X-Fault-Script"] = "200;delay=200" } }
        end
        collectgarbage() collectgarbage()
        print(c:in_flight())
        local req = { method = "POST", path = "/echo/" .. ("p"):rep(3), body = ("b"):rep(100), idempotency_key = "k" .. 1 }
        local ticket, box = c:_start(req)
        req.path, req.body, req.idempotency_key, req = nil, nil, nil, nil
        collectgarbage() collectgarbage()
        print(pcall(c._finish, c, box)) -- not reported yet
        print(pcall(c.close, c))
        local done
        repeat done = c:_run(100) until done[1] == ticket
        print(select("#", c:_finish(box, false)), c:in_flight())
        print(pcall(c._finish, c, box))
        c:close()
        print(tostring(c))
      ]], up.url, 20))
      assert.matches("^0\nfalse\t[^\n]*resumed before its response was ready[^\n]*\nfalse\t[^\n]*1 requests in "
        .. "flight\n0\t0\nfalse\t[^\n]*already finished\nretryfreeze.Client %(closed%)\n$", out)
    end)
  end)

  describe("scheduled flows", function()
    it_54("a flow resumed by another flow before its response is ready raises; the others go on", function()
      local out = clean(run_lua([[
        local scheduler = require "retryfreeze.scheduler"
        local c = rf.client{ policy = LOCK, base_url = URL }
        local first
        local errors = {}
        local failed = scheduler.run(c, 3, 3, function(i)
          if i == 1 then
            first = coroutine.running()
            c:request{ method = "GET", path = "/echo/1", headers = { ["X-Fault-Script"] = "200;delay=100" } }
          elseif i == 2 then
            print(coroutine.resume(first))
          else
            print(c:request{ method = "GET", path = "/echo/3" }.status)
          end
        end, function(i, ok, err) if not ok then errors[#errors + 1] = i .. " " .. tostring(err) end end)
        print(failed, c:in_flight(), #errors)
        c:close()
      ]], up.url, 20))
      -- Flow 1 died of that error; the scheduler reports it (resuming a dead flow) once its request is done.
      assert.matches("^false\t[^\n]*resumed before its response was ready[^\n]*\n200\n1\t0\t1\n$", out)
    end)

    it_54("client:all inside a scheduled flow while other flows' requests are in flight raises", function()
      local out = clean(run_lua([[
        local scheduler = require "retryfreeze.scheduler"
        local c = rf.client{ policy = LOCK, base_url = URL }
        local msgs = {}
        local failed = scheduler.run(c, 2, 2, function(i)
          if i == 1 then
            c:request{ method = "GET", path = "/echo/1", headers = { ["X-Fault-Script"] = "200;delay=100" } }
          else
            c:all{ { method = "GET", path = "/echo/2" } }
          end
        end, function(i, ok, err) if not ok then msgs[#msgs + 1] = i .. " " .. tostring(err) end end)
        print(failed, table.concat(msgs, ";"))
      ]], up.url, 20))
      assert.matches("^1\t2 [^\n]*client:all: 1 scheduled requests of this client are in flight\n$", out)
    end)
  end)

  describe("a ledger a client holds", function()
    it_54("is not closed under the client: ledger:close() answers nil, why; the client keeps recording", function()
      local path = os.tmpname()
      local out = clean(run_lua(string.format([[
        local l = assert(rf.ledger.open(%q))
        local c = rf.client{ policy = LOCK, base_url = URL, ledger = l }
        print(l:close())
        local r = c:request{ method = "GET", path = "/echo/1" }
        print(r.status, r.ledger_error)
        c:close()
        print(l:close())
      ]], path), up.url, 20))
      assert.equal("nil\tledger in use by 1 open client(s) or unfinished flow(s): close or finish them first\n200\tnil\ntrue\n", out)
      local n = 0
      for line in io.lines(path) do
        n = n + 1
        assert.matches('"path":"/echo/1"', line)
      end
      os.remove(path)
      assert.equal(1, n)
    end)

    it_54("collecting the client releases the ledger", function()
      local path = os.tmpname()
      local out = clean(run_lua(string.format([[
        local l = assert(rf.ledger.open(%q))
        do local c = rf.client{ policy = LOCK, base_url = URL, ledger = l } end
        collectgarbage(); collectgarbage()
        print(l:close())
      ]], path), up.url, 20))
      os.remove(path)
      assert.equal("true\n", out)
    end)
  end)

  describe("request strings dropped mid-flight", function()
    -- The strings are made at run time (constants would stay anchored by the chunk), long enough not to be
    -- interned, and the churn after collectgarbage() reuses their memory.
    local REQUEST = [[
      local suffix = ("p"):rep(48) .. os.time()
      local req = { method = "POST", path = "/echo/" .. suffix, body = ("b"):rep(5000) .. os.time(),
        idempotency_key = "key-" .. ("k"):rep(48) .. os.time() .. TAG, query = "q=" .. ("v"):rep(48) .. os.time(),
        headers = { ["X-Fault-Script"] = "503;delay=30,503;delay=30,200", ["X-Pad"] = ("h"):rep(48) .. os.time() } }
      local function drop()
        req.method, req.path, req.body, req.idempotency_key, req.query, req.headers = nil, nil, nil, nil, nil, nil
        collectgarbage(); collectgarbage()
        local junk = {}
        for i = 1, 3000 do junk[i] = ("x"):rep(60) .. i end
      end
    ]]

    local function check_ledger(path, want_lines)
      local n = 0
      for line in io.lines(path) do
        n = n + 1
        assert.matches('"path":"/echo/' .. ("p"):rep(48) .. '%d+"', line)
        assert.matches('"key":"key%-' .. ("k"):rep(48) .. '%d+%a"', line)
        assert.matches('"attempts":3', line)
      end
      os.remove(path)
      assert.equal(want_lines, n)
    end

    it_54("a hook that drops the request's strings and collects garbage changes nothing sent or recorded", function()
      local path = os.tmpname()
      local out = clean(run_lua("local TAG = 'a' " .. REQUEST .. string.format([[
        local l = assert(rf.ledger.open(%q))
        local c = rf.client{ policy = LOCK, base_url = URL, ledger = l }
        req.on_attempt = drop
        local r = c:request(req)
        print(r.status, r.attempts, r.ledger_error)
      ]], path), up.url, 20))
      assert.equal("200\t3\tnil\n", out)
      check_ledger(path, 1)
    end)

    it_54("the same from another flow under retryfreeze.scheduler", function()
      local path = os.tmpname()
      local out = clean(run_lua("local TAG = 'b' " .. REQUEST .. string.format([[
        local scheduler = require "retryfreeze.scheduler"
        local l = assert(rf.ledger.open(%q))
        local c = rf.client{ policy = LOCK, base_url = URL, ledger = l }
        local got = {}
        local failed = scheduler.run(c, 2, 2, function(i)
          if i == 1 then
            local r = c:request(req)
            got[#got + 1] = r.status .. " " .. r.attempts
          else
            drop()
            got[#got + 1] = c:request{ method = "GET", path = "/echo/x" }.status
          end
        end)
        print(failed, table.concat(got, ","))
      ]], path), up.url, 20))
      assert.equal("0\t200,200 3\n", out)
      -- The second flow's GET is recorded too.
      local lines = {}
      for line in io.lines(path) do lines[#lines + 1] = line end
      assert.equal(2, #lines)
      local f = assert(io.open(path, "w"))
      f:write(lines[2], "\n")
      f:close()
      check_ledger(path, 1)
    end)
  end)

  -- A C function pins every object it uses before its first read that can run Lua (bindings/lua_object.h): a
  -- metamethod of a table it is given (__index, __len, …) that closes, finishes or re-enters that object is
  -- refused, and the call goes on whole. Each case runs under Lua 5.4, LuaJIT and the `retryfreeze` command's Lua.
  describe("no metamethod can free an object a C function is using", function()
    -- A lock with a retry budget, for the cases that hand one over.
    local BUDGET_LOCK = [[{"version":1,"retryBudget":{"maxTokens":10,"tokenRatio":0.1},"defaults":{"maxAttempts":3,
      "perAttemptTimeoutMs":2000,"totalBudgetMs":5000,"retryable":["HTTP_503"],"backoff":{"baseMs":5,"maxMs":10}},
      "routes":[{"endpoint":"GET /echo/*"}]}]]
    local runtimes = { { name = "lua5.4", lua = "lua5.4", dir = "5.4" }, { name = "luajit", lua = "luajit", dir = "luajit" },
      { name = "retryfreeze run", cli = true } }

    --- Runs source as run_lua does (URL, LOCK and rf; also BLOCK, a policy with a retry budget, and core) under
    --- runtime rt; returns stdout after asserting a clean exit (no crash, no sanitizer report).
    local function run_in(rt, source, url)
      local prelude = string.format("local rf = require 'retryfreeze'; local core = require 'retryfreeze.core'; "
        .. "local URL = %q; local LOCK = assert(rf.load_string(%q)); local BLOCK = assert(rf.load_string(%q)); ",
        url, LOCK, BUDGET_LOCK)
      if not rt.cli then
        return clean(h.run_lua(prelude .. source, { lua = rt.lua, dir = rt.dir, timeout_s = 30 }))
      end
      local path = h.temp_file(prelude .. source)
      local out, err, code = h.sh("timeout 30 " .. h.shell_quote(h.cli) .. " run " .. h.shell_quote(path))
      os.remove(path)
      return clean(out, err, code)
    end

    --- The lines of the file at path, counted (and the file removed).
    local function count_lines(path)
      local lines = 0
      for _ in io.lines(path) do lines = lines + 1 end
      os.remove(path)
      return lines
    end

    --- run_in with a ledger and a retry budget made first: led (a fresh file), budget (of BLOCK) and tried (an
    --- empty table) are in scope. Returns stdout and the number of lines the ledger got.
    local function run_with_ledger(rt, source, url)
      local path = os.tmpname()
      local out = run_in(rt, string.format("local led = assert(rf.ledger.open(%q)); "
        .. "local budget = rf.retry_budget(BLOCK); local tried = {}; ", path) .. source, url)
      return out, count_lines(path)
    end

    local BUSY_TEXT = "client is busy (called from its own on_attempt hook)"
    local LEDGER_IN_USE = "ledger in use by 1 open client(s) or unfinished flow(s): close or finish them first"
    local BUDGET_IN_USE = "cannot close a retry budget that 1 open clients or running flows use"

    for _, rt in ipairs(runtimes) do
      local it_or_pending = (rt.cli or h.has_module(rt.dir)) and it or pending -- a runtime the build has a module for

      it_or_pending(rt.name .. ": a request whose __index closes the client: request, all and _start go on", function()
        local out = run_in(rt, [[
          local c = rf.client{ policy = LOCK, base_url = URL }
          local refused = {}
          local function proxy(path) -- an empty table: every field comes from __index
            return setmetatable({}, { __index = function(_, k)
              if k == "method" then return "GET" end
              if k == "path" then return path .. ("/x"):rep(20) end -- a fresh string each read
              if k == "headers" then
                local ok, err = pcall(c.close, c)
                refused[#refused + 1] = tostring(ok) .. " " .. tostring(err)
                collectgarbage()
              end
            end })
          end
          local r = c:request(proxy("/echo/1"))
          print(r.status, r.attempts, refused[1])
          local rs = c:all{ proxy("/echo/2"), proxy("/echo/3") }
          print(#rs, rs[1].status, rs[2].status, #refused, refused[3])
          local ticket, box = c:_start(proxy("/echo/4"))
          repeat local done = c:_run(100) until done[1] == ticket
          print(c:_finish(box).status, #refused, refused[4])
          c:close()
          print(tostring(c))
        ]], up.url)
        local busy = "false " .. BUSY_TEXT
        assert.equal("200\t1\t" .. busy .. "\n2\t200\t200\t3\t" .. busy .. "\n200\t4\t" .. busy
          .. "\nretryfreeze.Client (closed)\n", out)
      end)

      it_or_pending(rt.name .. ": an __index that closes the client and raises fails the call; the client is whole",
        function()
        local out = run_in(rt, [[
          local c = rf.client{ policy = LOCK, base_url = URL }
          local req = setmetatable({}, { __index = function(_, k)
            if k == "method" then return "GET" end
            if k == "path" then return "/echo/5" end
            if k == "query" then c:close() end -- not protected: the refusal is the call's error
          end })
          print(pcall(c.request, c, req))
          print(pcall(c.all, c, { req }))
          print(pcall(c._start, c, req))
          print(c:request{ method = "GET", path = "/echo/6" }.status, c:in_flight())
        ]], up.url)
        assert.matches("^false\t[^\n]*" .. BUSY .. "\nfalse\t[^\n]*" .. BUSY .. "\nfalse\t[^\n]*" .. BUSY
          .. "\n200\t0\n$", out)
      end)

      it_or_pending(rt.name .. ": a pinned call's errors still name the caller's line and the argument", function()
        local out = run_in(rt, [[
          local c = rf.client{ policy = LOCK, base_url = URL }
          print(select(2, pcall(function() return c:request{ method = "GET" } end)))
          print(select(2, pcall(function() return rf.client{ policy = LOCK } end)))
          print(select(2, pcall(function() return c:_run("x") end)))
        ]], up.url)
        local line = rt.lua == "luajit" and "" or "[^\n]*:%d+: " -- LuaJIT's luaL_where names no line here
        assert.matches("^" .. line .. "request.method and request.path are required\n" .. line
          .. "rf.client: base_url must be a string\n" .. "[^\n]*bad argument #%d to '[_%a?]*' %(number expected, got string%)\n$",
          out)
      end)

      it_or_pending(rt.name .. ": rf.client's options: an __index cannot close the ledger or retry budget it took",
        function()
        local out, lines = run_with_ledger(rt, [[
          local opts = setmetatable({}, { __index = function(_, k)
            if k == "policy" then return BLOCK end
            if k == "base_url" then return URL end
            if k == "ledger" then return led end
            if k == "retry_budget" then return budget end
            if k == "headers" then -- read last: both were taken by now
              tried[#tried + 1] = tostring(select(2, led:close()))
              tried[#tried + 1] = tostring(select(2, pcall(budget.close, budget)))
              collectgarbage()
            end
          end })
          local c = rf.client(opts)
          print(tried[1])
          print(tried[2])
          local r = c:request{ method = "GET", path = "/echo/7" }
          print(r.status, r.ledger_error, c:retry_tokens() > 0)
          c:close()
          print(led:close(), pcall(budget.close, budget))
        ]], up.url)
        assert.equal(LEDGER_IN_USE .. "\n" .. BUDGET_IN_USE .. "\n200\tnil\ttrue\ntrue\ttrue\n", out)
        assert.equal(1, lines)
      end)

      it_or_pending(rt.name .. ": a failed rf.client gives back the ledger and budget it took, at once", function()
        local out = run_in(rt, [[
          local led = assert(rf.ledger.open(os.tmpname()))
          local budget = rf.retry_budget(BLOCK)
          print(pcall(rf.client, { policy = BLOCK, base_url = URL, ledger = led, retry_budget = budget,
            max_body_bytes = 0 }))
          print(led:close(), pcall(budget.close, budget))
        ]], up.url)
        assert.matches("^false\t[^\n]*max_body_bytes must be a positive integer\ntrue\ttrue\n$", out)
      end)

      it_or_pending(rt.name .. ": core.step: a result whose __index finishes the step or closes what it uses",
        function()
        local out, lines = run_with_ledger(rt, [[
          local step = core.step(BLOCK, { method = "GET", path = "/echo/8" }, { ledger = led, retry_budget = budget,
            rng = rf.rng(1) }, 0)
          step:begin(0)
          local result = setmetatable({}, { __index = function(_, k)
            if k == "status" then return 503 end
            if k == "headers" then
              tried[#tried + 1] = select(2, pcall(step.finish, step, "stopped-by-caller", 5, 0))
              tried[#tried + 1] = select(2, pcall(budget.close, budget))
              tried[#tried + 1] = select(2, led:close())
              collectgarbage()
            end
          end })
          local retry, delay = step:after(result, 10, 0)
          print(retry, delay >= 0)
          for _, t in ipairs(tried) do print(t) end
          local r = step:finish("stopped-by-caller", 20, 0)
          print(r.attempts, r.outcome)
          print(led:close(), pcall(budget.close, budget))
        ]], up.url)
        assert.equal("true\ttrue\nrf.flow: step is busy (called from its own on_attempt hook)\n" .. BUDGET_IN_USE .. "\n"
          .. LEDGER_IN_USE .. "\n1\tterminal\ntrue\ttrue\n", out)
        assert.equal(1, lines)
      end)

      it_or_pending(rt.name .. ": rf.flow: an io and a send result whose __index closes the ledger and budget",
        function()
        local out, lines = run_with_ledger(rt, [[
          local function attack()
            tried[#tried + 1] = tostring(select(2, led:close()))
            tried[#tried + 1] = tostring(select(2, pcall(budget.close, budget)))
            collectgarbage()
          end
          local sends = 0
          local io = setmetatable({}, { __index = function(_, k)
            if k == "ledger" then return led end
            if k == "retry_budget" then return budget end
            if k == "sleep" then return function() end end
            if k == "now_ms" then return function() return 0 end end
            if k == "send" then
              return function()
                sends = sends + 1
                return setmetatable({}, { __index = function(_, f)
                  if f == "status" then return sends == 1 and 503 or 200 end
                  if f == "headers" then attack() end
                end })
              end
            end
            if k == "on_attempt" and sends > 0 then attack() end -- once the flow's step holds them
          end })
          local r = rf.flow(BLOCK, { method = "GET", path = "/echo/9" }, io)
          local distinct, seen = {}, {}
          for _, t in ipairs(tried) do
            if not seen[t] then seen[t] = true distinct[#distinct + 1] = t end
          end
          table.sort(distinct)
          print(r.status, r.attempts, r.ledger_error, #tried >= 6)
          print(table.concat(distinct, "\n"))
          print(led:close(), pcall(budget.close, budget))
        ]], up.url)
        assert.equal("200\t2\tnil\ttrue\n" .. BUDGET_IN_USE .. "\n" .. LEDGER_IN_USE .. "\ntrue\ttrue\n", out)
        assert.equal(1, lines)
      end)
    end
  end)

  describe("ledger hygiene", function()
    it_54("records the path with its query values redacted (?api_key=SECRET)", function()
      local path = os.tmpname()
      local out = clean(run_lua(string.format([[
        local l = assert(rf.ledger.open(%q))
        local c = rf.client{ policy = LOCK, base_url = URL, ledger = l }
        print(c:request{ method = "GET", path = "/echo/2?api_key=SECRET&page=2" }.status)
        print(c:request{ method = "GET", path = "/echo/3", query = "token=SECRET" }.status)
        c:close()
        l:close()
        for rec in rf.ledger.read(%q) do print(rec.path) end
      ]], path, path), up.url, 20))
      local f = assert(io.open(path))
      local text = f:read("a")
      f:close()
      os.remove(path)
      assert.equal("200\n200\n/echo/2?api_key=REDACTED&page=REDACTED\n/echo/3\n", out)
      assert.not_matches("SECRET", text)
    end)
  end)
end)
