-- Issue 10: nothing a Lua script does with a client, its ledger, its requests or its hooks may crash the host.
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
  return h.run_lua(prelude .. source, { timeout_s = timeout_s })
end

local clean = h.clean_exit -- no crash, no sanitizer report, no hang

local BUSY = "client is busy %(called from its own on_attempt hook%)"

describe("lifetimes and re-entrancy (issue 10)", function()
  local up
  setup(function() up = assert(upstream.start{ bindir = h.bindir, max_seconds = 300 }) end)
  teardown(function() up.stop() end)

  describe("stack discipline", function()
    it("client:all takes 10000 requests (its documented maximum) on a fresh Lua stack", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        local reqs = {}
        for i = 1, 10000 do reqs[i] = { method = "GET", path = "/none/" .. i } end -- no route: nothing sent
        local rs = c:all(reqs)
        print(#rs, rs[1].outcome, rs[10000].reason)
      ]], up.url))
      assert.equal("10000\trefused\tno-route\n", out)
    end)

    it("client:all takes 10000 requests inside a coroutine", function()
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

    it("client:all sends 10000 requests to the upstream, at most 100 at a time, each response in order", function()
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

    it("client:all refuses more than 10000 requests with an argument error", function()
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
      it(call, function()
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

    it("a request's own on_attempt that calls client:all raises instead of hanging", function()
      local out = clean(run_lua([[
        local c = rf.client{ policy = LOCK, base_url = URL }
        print(pcall(c.request, c, { method = "GET", path = "/echo/1",
          on_attempt = function() c:all{ { method = "GET", path = "/echo/2" } } end }))
        print(c:request{ method = "GET", path = "/echo/4" }.status)
      ]], up.url, 20))
      assert.matches("^false\t[^\n]*" .. BUSY .. "\n200\n$", out)
    end)

    it("a hook of client:all that closes the client raises, and every response is cleaned up", function()
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

  describe("requests started without a coroutine (client:_start, scheduler.run_requests)", function()
    it("a dropped box abandons its transfer; a box outlives the request table and its strings", function()
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
    it("a flow resumed by another flow before its response is ready raises; the others go on", function()
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

    it("client:all inside a scheduled flow while other flows' requests are in flight raises", function()
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
    it("is not closed under the client: ledger:close() answers nil, why; the client keeps recording", function()
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

    it("collecting the client releases the ledger", function()
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

    it("a hook that drops the request's strings and collects garbage changes nothing sent or recorded", function()
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

    it("the same from another flow under retryfreeze.scheduler", function()
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

  describe("ledger hygiene", function()
    it("records the path with its query values redacted (?api_key=SECRET)", function()
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
