-- The FFI path under LuaJIT (bindings/lua_ffi.c, bindings/lua_ffi.lua; docs/lua.md, "LuaJIT: the FFI path"): the
-- same verdicts and errors as the classic path, and lifetimes as safe. Every case runs in a child `luajit` (this
-- spec runs under any Lua), so a crash fails one test instead of killing busted; under .ci/run the children
-- inherit the sanitizer preload. Pending when the build has no LuaJIT module.
local h = require "spec.helper"

local build = h.build_dir
local has_luajit = os.execute("test -f " .. build .. "/lib/lua/luajit/retryfreeze/core.so")
local describe_or_pending = (has_luajit == true or has_luajit == 0) and describe or pending
local locks = { "examples/retry-budget.lock.json", "examples/service.lock.json", "spec/fixtures/ffi_routes.lock.json" }

--- Runs Lua source in a child luajit with the build's LuaJIT module; env: a shell prefix ("RF_NO_FFI=1 "). The
--- child starts without this process's RF_NO_FFI (ctest's busted_luajit_no_ffi sets it for this spec too).
local function run(source, env)
  local path = h.temp_file("local rf = require 'retryfreeze'; local core = require 'retryfreeze.core'; " .. source)
  local out, err, code = h.sh(string.format("%senv -u RF_NO_FFI %stimeout 120 luajit %s", h.lua_env("luajit"),
    env or "", h.shell_quote(path)))
  os.remove(path)
  return out, err, code
end

--- The verdict lines of spec/harness/ffi_verdicts.lua for seed and draws, under env.
local function verdicts(seed, draws, env)
  local quoted = {}
  for i, l in ipairs(locks) do quoted[i] = h.shell_quote(l) end
  return h.clean_exit(h.sh(string.format("%senv -u RF_NO_FFI %stimeout 120 luajit spec/harness/ffi_verdicts.lua %d %d %s",
    h.lua_env("luajit"), env or "", seed, draws, table.concat(quoted, " "))))
end

describe_or_pending("the FFI path under LuaJIT", function()
  it("is on by default and off with RF_NO_FFI=1 (RF_NO_FFI=0 or empty keeps it on)", function()
    local source = "print(rf.ffi, core.ffi, type(assert(rf.load('" .. locks[1] .. "')):decider('GET', '/', false)))"
    assert.equal("true\ttrue\tfunction\n", h.clean_exit(run(source)))
    assert.equal("false\tfalse\tfunction\n", h.clean_exit(run(source, "RF_NO_FFI=1 ")))
    assert.equal("true\ttrue\tfunction\n", h.clean_exit(run(source, "RF_NO_FFI=0 ")))
    assert.equal("true\ttrue\tfunction\n", h.clean_exit(run(source, "RF_NO_FFI= ")))
  end)

  -- The property: for adversarial draws (spec/harness/ffi_verdicts.lua says which), each decider call gives the
  -- same verdict or the same error through both paths, delays drawn from the same seeds. The draws reach every
  -- reason a decider can give without a retry budget, and every kind of refusal.
  it("gives the classic path's verdicts and errors for drawn facts, call for call", function()
    local reasons, refusals = {}, 0
    for seed = 1, 3 do
      local on = verdicts(seed, 2500)
      local off = verdicts(seed, 2500, "RF_NO_FFI=1 ")
      assert.equal("ffi true\n", on:match("^[^\n]*\n"))
      assert.equal("ffi false\n", off:match("^[^\n]*\n"))
      local on_lines, off_lines = {}, {}
      for line in on:gmatch("[^\n]+") do on_lines[#on_lines + 1] = line end
      for line in off:gmatch("[^\n]+") do off_lines[#off_lines + 1] = line end
      assert.equal(#off_lines, #on_lines)
      for i = 2, #on_lines do
        if on_lines[i] ~= off_lines[i] then
          assert.equal(off_lines[i], on_lines[i], "seed " .. seed .. ", line " .. i)
        end
        local reason = on_lines[i]:match('%-> true %a+ "([%a-]+)" ')
        if reason then reasons[reason] = (reasons[reason] or 0) + 1 end
        if on_lines[i]:find("-> false ", 1, true) or on_lines[i]:find(" made: ", 1, true) then
          refusals = refusals + 1
        end
      end
    end
    for _, r in ipairs({ "no-route", "success", "max-attempts", "class-limit", "status-not-retryable",
      "mutating-without-idempotency", "retry-after-exceeds-budget", "deadline", "pinned-status", "transparent-retry" }) do
      assert.is_true((reasons[r] or 0) >= 5, r .. " drawn " .. tostring(reasons[r] or 0) .. " times")
    end
    assert.is_true(refusals >= 500, refusals .. " refusals")
  end)

  -- The same property for rf.flow's steps (spec/harness/ffi_flows.lua): drawn io.send results, the whole response
  -- (outcome, reason, every try) or the error compared request by request.
  it("gives rf.flow the classic responses and errors for drawn results, request by request", function()
    local reasons, errors = {}, 0
    for seed = 1, 3 do
      local on = h.clean_exit(h.sh(string.format("%senv -u RF_NO_FFI timeout 120 luajit spec/harness/ffi_flows.lua "
        .. "%d 1500 %s", h.lua_env("luajit"), seed, table.concat(locks, " "))))
      local off = h.clean_exit(h.sh(string.format("%sRF_NO_FFI=1 timeout 120 luajit spec/harness/ffi_flows.lua "
        .. "%d 1500 %s", h.lua_env("luajit"), seed, table.concat(locks, " "))))
      assert.equal("ffi true\n", on:match("^[^\n]*\n"))
      assert.equal("ffi false\n", off:match("^[^\n]*\n"))
      local off_lines = {}
      for line in off:gmatch("[^\n]+") do off_lines[#off_lines + 1] = line end
      local i = 0
      for line in on:gmatch("[^\n]+") do
        i = i + 1
        if i > 1 and line ~= off_lines[i] then assert.equal(off_lines[i], line, "seed " .. seed .. ", line " .. i) end
        for r in line:gmatch('try%d+=[^ ]-,[^ ]-,[^ ]-,[^ ]-,[^ ]-,[^ ]-,"([%a-]+)"') do reasons[r] = true end
        if line:find(" error: ", 1, true) then errors = errors + 1 end
      end
      assert.equal(#off_lines, i)
    end
    for _, r in ipairs({ "pinned-status", "status-not-retryable", "success", "mutating-without-idempotency",
      "max-attempts", "retry-after-exceeds-budget", "stopped-by-caller", "class-limit", "transparent-retry" }) do
      assert.is_true(reasons[r], r .. " was never drawn")
    end
    assert.is_true(errors >= 50, errors .. " errors")
  end)

  -- Which spelling of a header wins ("the first one a table traversal meets") cannot be compared across processes
  -- (LuaJIT seeds its string hashes per process): twin steps in one process, one through the FFI, one through the
  -- method, get the same headers tables.
  it("lets the same header spelling win in step:after as the method does", function()
    local out = h.clean_exit(run([=[
      local p = assert(rf.load("spec/fixtures/ffi_routes.lock.json"))
      local names = { "Retry-After", "retry-after", "RETRY-AFTER", "Retry-After\0x", "Date", "DATE", "date\0",
                      "Retry-After-Ms", "retry-after-ms" }
      local values = { "0", "1", "2", "", "soon", "Sun, 06 Nov 1994 08:49:39 GMT", "Sun, 06 Nov 1994 08:49:37 GMT" }
      local state = 7
      local function random(m) state = state * 16807 % 2147483647; return state % m + 1 end
      local same, n, dups = 0, 0, 0
      for i = 1, 400 do
        local headers, seen = {}, 0
        for _ = 1, random(5) do headers[names[random(#names)]] = values[random(#values)] end
        for name in pairs(headers) do if name:lower() == "retry-after" then seen = seen + 1 end end
        if seen > 1 then dups = dups + 1 end
        local res = { status = 503, headers = headers }
        local path = i % 2 == 0 and "/v1/refunds" or "/v1/jobs"
        local a = core.step(p, { method = "POST", path = path, idempotency_key = "k" }, { rng = rf.rng(i) }, 0)
        local b = core.step(p, { method = "POST", path = path, idempotency_key = "k" }, { rng = rf.rng(i) }, 0)
        core.ffi_step_begin(a, 0)
        b:begin(0)
        local ra, xa = core.ffi_step_after(a, res, 10, 784111777000)
        local rb, xb = b:after(res, 10, 784111777000)
        local ta = a:finish(ra and "pinned-status" or xa, 20, 784111777000).tries[1]
        local tb = b:finish(rb and "pinned-status" or xb, 20, 784111777000).tries[1]
        n = n + 1
        if ra == rb and xa == xb and ta.retry_after == tb.retry_after and ta.retry_after_header == tb.retry_after_header
          and ta.reason == tb.reason then same = same + 1 end
      end
      print(rf.ffi, same, n, dups >= 50)
    ]=]))
    assert.equal("true\t400\t400\ttrue\n", out)
  end)

  -- core.ffi_step_end (the gateway's step:finish without a response table): the same ledger line as step:finish,
  -- the same overloaded flag, the ledger given back at once (it closes), the step closed; what the fast path does not
  -- take goes to step:finish and raises as it does.
  it("ends a step as step:finish does, line for line", function()
    local out = h.clean_exit(run([=[
      local p = assert(rf.load_string([[{"version": 1, "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 1000,
        "totalBudgetMs": 5000, "retryable": ["HTTP_503"], "backoff": {"baseMs": 0, "maxMs": 0},
        "propagation": {}}, "routes": [{"endpoint": "GET /a"}, {"endpoint": "POST /b"}]}]], "t"))
      local dir = os.tmpname()
      os.remove(dir)
      os.execute("mkdir " .. dir)
      local function run_flows(finish, path)
        local ledger = assert(rf.ledger.open(path, { host = "" }))
        local flags = {}
        for i = 1, 60 do
          local method = i % 3 == 0 and "POST" or "GET"
          local step = core.step(p, { method = method, path = method == "GET" and "/a" or "/b",
            idempotency_key = i % 2 == 0 and ("k" .. i) or nil }, { rng = rf.rng(i), ledger = ledger }, 0)
          local now, reason = 0, nil
          for _ = 1, 3 do
            if not step:begin(now) then reason = "deadline" break end
            now = now + 7
            local status = (i + now) % 4 == 0 and 200 or 503
            local retry, x = step:after({ status = status }, now, 784111777000 + now)
            if not retry then reason = x break end
          end
          flags[i] = tostring(finish(step, reason or "max-attempts", now + 1, 784111777001 + now))
        end
        assert(ledger:close())
        local f = assert(io.open(path))
        local text = f:read("a"):gsub('"ts":"[^"]*"', "")
        f:close()
        return text, table.concat(flags, ",")
      end
      local a, fa = run_flows(core.ffi_step_end, dir .. "/ffi.jsonl")
      local b, fb = run_flows(function(step, ...) return step:finish(...).overloaded end, dir .. "/finish.jsonl")
      local step = core.step(p, { method = "GET", path = "/a" }, {}, 0)
      step:begin(0)
      local in_flight = pcall(core.ffi_step_end, step, "success", 1, 1) -- an attempt in flight: step:finish takes it
      local again = select(2, pcall(core.ffi_step_end, step, "success", 1, 1)):gsub("^[^:]*:%d+: ", "")
      local step2 = core.step(p, { method = "GET", path = "/a" }, {}, 0)
      local bad = select(2, pcall(core.ffi_step_end, step2, "no-such-reason", 1, 1)):gsub("^[^:]*:%d+: ", "")
      os.execute("rm -rf " .. dir)
      print(rf.ffi, a == b, #a > 1000, fa == fb, fa:find("true", 1, true) ~= nil, in_flight, again, bad)
    ]=]))
    assert.equal("true\ttrue\ttrue\ttrue\ttrue\ttrue\trf.flow: this request has already finished\t"
      .. "bad argument #1 to 'finish' (a reason from rf.reasons)\n", out)
  end)

  -- core.ffi_step_reuser (the gateway's): a step core.ffi_step_end ended serves a new request as a new core.step
  -- would, ledger line for line (a long path grows its strings, a short one after it fits); a path no route matches
  -- and a route serve refuses change nothing; what core.step refuses, an open step, one step:finish ended, a closed
  -- ledger and a value that is no step are refused (nil), and the ledger is taken while the step serves a request.
  it("reuses a step ffi_step_end ended as core.step would make one, and refuses what it cannot reuse", function()
    local out = h.clean_exit(run([=[
      local p = assert(rf.load_string([[{"version": 1, "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 1000,
        "totalBudgetMs": 5000, "retryable": ["HTTP_503"], "backoff": {"baseMs": 0, "maxMs": 0},
        "propagation": {}}, "routes": [{"endpoint": "GET /a/*"}, {"endpoint": "POST /b"}, {"endpoint": "GET /c"}]}]],
        "t"))
      local serve, at_of = {}, {} -- by route, in policy:routes() order
      for i, route in ipairs(p:routes()) do serve[i], at_of[route.endpoint] = route.endpoint ~= "GET /c", i end
      local reuse = core.ffi_step_reuser(serve)
      local dir = os.tmpname()
      os.remove(dir)
      os.execute("mkdir " .. dir)
      local function run_flows(reusing, path)
        local ledger = assert(rf.ledger.open(path, { host = "" }))
        local step_io = { rng = rf.rng(7), ledger = ledger }
        local spare
        for i = 1, 40 do
          local method = i % 3 == 0 and "POST" or "GET"
          local rpath = method == "POST" and "/b" or ("/a/" .. (i == 5 and ("x"):rep(5000) or tostring(i)))
          local key = i % 2 == 0 and ("k" .. i) or nil
          local step
          if reusing and spare then
            local at, reused = reuse(spare, method, rpath, key, i * 10)
            assert(reused == true and at == at_of[method == "POST" and "POST /b" or "GET /a/*"], tostring(at))
            step = spare
          else
            step = core.step(p, { method = method, path = rpath, idempotency_key = key }, step_io, i * 10)
          end
          local now, reason = i * 10, nil
          for _ = 1, 3 do
            if not step:begin(now) then reason = "deadline" break end
            now = now + 7
            local retry, x = step:after({ status = (i + now) % 4 == 0 and 200 or 503 }, now, 784111777000 + now)
            if not retry then reason = x break end
          end
          core.ffi_step_end(step, reason or "max-attempts", now + 1, 784111777001 + now)
          spare = step
        end
        assert(ledger:close())
        local f = assert(io.open(path))
        local text = f:read("a"):gsub('"ts":"[^"]*"', "")
        f:close()
        return text
      end
      local a, b = run_flows(true, dir .. "/reused.jsonl"), run_flows(false, dir .. "/made.jsonl")
      local ledger = assert(rf.ledger.open(dir .. "/l.jsonl", { host = "" }))
      local step = core.step(p, { method = "GET", path = "/a/1" }, { ledger = ledger }, 0)
      local r = {}
      local names = { [at_of["GET /a/*"]] = "a", [at_of["GET /c"]] = "c" }
      local function try(...)
        local at, reused = reuse(...)
        r[#r + 1] = tostring(at and names[at] or at) .. "/" .. tostring(reused)
      end
      try(step, "GET", "/a/2", nil, 1) -- open
      core.ffi_step_end(step, "success", 1, 1)
      try(step, "GET", "/nowhere", nil, 1)
      try(step, "GET", "/c", nil, 1)
      try(step, "GET", "a/2", nil, 1)
      try(step, "", "/a/2", nil, 1)
      try(step, "GET", "/a/2", "", 1)
      try(step, "GET", "/a/2", "k\r\n", 1)
      try(step, "GET", "/a/\0", nil, 1)
      try(step, "GET", "/a/2", nil, -1)
      try("step", "GET", "/a/2", nil, 1)
      try(p, "GET", "/a/2", nil, 1)
      try(step, "GET", "/a/2", nil, 2) -- reused: the ledger is in use until the request ends
      local in_use = select(2, ledger:close())
      core.ffi_step_end(step, "success", 3, 3)
      local closed = ledger:close()
      try(step, "GET", "/a/2", nil, 4) -- its ledger closed
      local s2 = core.step(p, { method = "GET", path = "/a/1" }, {}, 0)
      s2:finish("success", 1, 1)
      try(s2, "GET", "/a/2", nil, 1) -- ended by step:finish: its holdings are gone
      os.execute("rm -rf " .. dir)
      print(rf.ffi, a == b, #a > 5000, table.concat(r, " "), in_use, closed)
    ]=]))
    assert.equal("true\ttrue\ttrue\tnil/nil nil/false c/false nil/nil nil/nil nil/nil nil/nil nil/nil nil/nil nil/nil "
      .. "nil/nil a/true nil/nil nil/nil\tledger in use by 1 open client(s) or unfinished flow(s): close or finish them "
      .. "first\ttrue\n", out)
  end)

  -- core.ffi_monotonic_ms and core.ffi_wall_ms read the clocks core.monotonic_ms and core.wall_ms read: integers,
  -- each between two readings of the classic function.
  it("reads the same clocks as core.monotonic_ms and core.wall_ms", function()
    local out = h.clean_exit(run([[
      local got = {}
      for _, c in ipairs({ { core.monotonic_ms, core.ffi_monotonic_ms }, { core.wall_ms, core.ffi_wall_ms } }) do
        local a = c[1]()
        local b = c[2]()
        local z = c[1]()
        got[#got + 1] = tostring(a <= b and b <= z and b % 1 == 0)
      end
      print(rf.ffi, table.concat(got, " "))
    ]]))
    assert.equal("true\ttrue true\n", out)
  end)

  -- A try's peer (result.peer, "host:port"): the same ledger entry through core.ffi_step_after as through step:after,
  -- none without it; a peer that is not "host:port" (port 1..65535, no NUL) refused by both in the same words.
  it("records each try's peer as step:after does, and refuses a bad one the same", function()
    local out = h.clean_exit(run([=[
      local p = assert(rf.load_string([[{"version": 1, "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 1000,
        "totalBudgetMs": 5000, "retryable": ["HTTP_503"], "backoff": {"baseMs": 0, "maxMs": 0}},
        "routes": [{"endpoint": "GET /a"}]}]], "t"))
      local path = os.tmpname()
      local peers = { "10.0.0.1:8080", nil, "[::1]:65535" }
      local function flow(after, ledger)
        local step = core.step(p, { method = "GET", path = "/a" }, { ledger = ledger }, 0)
        for i = 1, 3 do
          step:begin(i)
          after(step, { status = 503, peer = peers[i] }, i, 784111777000)
        end
        step:finish("max-attempts", 9, 784111777000)
      end
      local ledger = assert(rf.ledger.open(path, { host = "" }))
      flow(core.ffi_step_after, ledger)
      flow(function(s, ...) return s:after(...) end, ledger)
      assert(ledger:close())
      local got = {}
      for rec in rf.ledger.read(path) do
        local t = {}
        for i = 1, 3 do t[i] = tostring(rec.tries[i].peer) end
        got[#got + 1] = table.concat(t, ",")
      end
      os.remove(path)
      local errors = {}
      for _, bad in ipairs({ "10.0.0.1", "10.0.0.1:0", "10.0.0.1:65536", "h\0x:80", "h:80\0", 8080 }) do
        local m = {}
        for i, after in ipairs({ core.ffi_step_after, function(s, ...) return s:after(...) end }) do
          local step = core.step(p, { method = "GET", path = "/a" }, {}, 0)
          step:begin(0)
          local ok, err = pcall(after, step, { status = 503, peer = bad }, 1, 784111777000)
          m[i] = tostring(ok) .. " " .. tostring(err):gsub("^[^:]*:%d+: ", "")
        end
        errors[#errors + 1] = m[1] == m[2] and m[1] or (m[1] .. " <> " .. m[2])
      end
      print(rf.ffi, table.concat(got, " "))
      print(table.concat(errors, "\n"))
    ]=]))
    local refused = 'false rf.flow: io.send\'s result.peer must be "host:port" (port 1..65535), got '
    assert.equal("true\t10.0.0.1:8080,nil,[::1]:65535 10.0.0.1:8080,nil,[::1]:65535\n" .. refused .. "10.0.0.1\n"
      .. refused .. "10.0.0.1:0\n" .. refused .. "10.0.0.1:65536\n" .. refused .. "h\n" .. refused .. "h:80\n"
      .. refused .. "number\n", out)
  end)

  -- core.ffi_step_propagation (the gateway's): the numbers step:propagation() gives, try by try; nil without
  -- propagation; a finished step refused as step:propagation refuses it.
  it("gives the propagation values step:propagation gives, and refuses a finished step the same", function()
    local out = h.clean_exit(run([=[
      local function lock(prop)
        return assert(rf.load_string(([[{"version": 1, "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 700,
          "totalBudgetMs": 5000, "retryable": ["HTTP_503"], "backoff": {"baseMs": 0, "maxMs": 0}@P@},
          "routes": [{"endpoint": "GET /a"}]}]]):gsub("@P@", prop), "t"))
      end
      local p, plain = lock(', "propagation": {}'), lock("")
      local got = {}
      local step = core.step(p, { method = "GET", path = "/a" }, {}, 0)
      for i = 1, 3 do
        step:begin(i * 100)
        local a, d = core.ffi_step_propagation(step)
        local t = step:propagation()
        got[#got + 1] = ("%s/%s=%s/%s"):format(tostring(a), tostring(d), t["x-envoy-attempt-count"],
          t["x-envoy-expected-rq-timeout-ms"])
        step:after({ status = 503 }, i * 100 + 10, 784111777000)
      end
      step:finish("max-attempts", 400, 784111777000)
      local m1 = select(2, pcall(core.ffi_step_propagation, step)):gsub("^[^:]*:%d+: ", "")
      local m2 = select(2, pcall(step.propagation, step)):gsub("^[^:]*:%d+: ", "")
      local s2 = core.step(plain, { method = "GET", path = "/a" }, {}, 0)
      s2:begin(0)
      print(rf.ffi, table.concat(got, " "), core.ffi_step_propagation(s2), m1 == m2, m1)
    ]=]))
    assert.equal("true\t1/700=1/700 2/700=2/700 3/700=3/700\tnil\ttrue\trf.flow: this request has already finished\n",
      out)
  end)

  -- A result with a metatable takes the method's path: its metamethods run while the step is pinned, as they do
  -- there (a metamethod that finishes the step is refused as busy, whichever path the flow took).
  it("reads a result with metamethods as the method does, the step pinned", function()
    local out = h.clean_exit(run([[
      local p = assert(rf.load("examples/service.lock.json"))
      local function hostile(step)
        return setmetatable({}, { __index = function(_, k)
          if k == "status" then step:finish("success", 1, 1) end
          return k == "status" and 503 or nil
        end })
      end
      local messages = {}
      for i, after in ipairs({ core.ffi_step_after, function(s, ...) return s:after(...) end }) do
        local step = core.step(p, { method = "GET", path = "/v1/jobs/7" }, { rng = rf.rng(1) }, 0)
        step:begin(0)
        local ok, err = pcall(after, step, hostile(step), 5, 784111777000)
        messages[i] = tostring(ok) .. " " .. tostring(err):gsub("^[^:]*:%d+: ", "")
      end
      print(messages[1] == messages[2], messages[1])
    ]]))
    assert.equal("true\tfalse rf.flow: step is busy (called from its own on_attempt hook)\n", out)
  end)

  it("keeps the policy alive while a decider uses it, and refuses once the decider was finalized by hand", function()
    local out = h.clean_exit(run([[
      local decide
      do
        local p = assert(rf.load("examples/retry-budget.lock.json"))
        decide = p:decider("POST", "/v1/jobs", true, rf.rng(3))
        debug.getmetatable(p).__gc(p) -- a __gc called by hand on a policy in use frees nothing
      end
      collectgarbage(); collectgarbage()
      print(decide(504, nil, 1, 0))
      local name, state = debug.getupvalue(decide, 1)
      print(name, type(state))
      debug.getmetatable(state).__gc(state)
      for _ = 1, 2 do print(pcall(decide, 504, nil, 1, 0)) end
      debug.getmetatable(state).__gc(state) -- twice: still harmless
      print(pcall(decide, 504, nil, 1, 0))
    ]]))
    local rf = require "retryfreeze"
    local want = assert(rf.load(h.desk_lock)):decide({ method = "POST", path = "/v1/jobs", status = 504,
      idempotency_key = "k" }, rf.rng(3))
    assert.equal(string.format("true\t%s\t%d\t%d\t%s\nstate\tuserdata\n", want.reason, want.delay_ms,
      want.timeout_ms, want.class) .. ("false\tretryfreeze: decider is closed\n"):rep(3), out)
  end)

  -- What a script reaches without the debug library: the decider, a Lua function; no cdata anywhere in rf, core
  -- or a decider's results, so no pointer to keep. With debug.getupvalue it reaches the decider's internals
  -- (docs/reliability.md, "Hostile Lua"): replacing any of them with a hostile value raises or decides, never
  -- crashes; setfenv changes nothing (the closure reads no global).
  it("hands a script no cdata, and survives hostile upvalues and environments", function()
    local out = h.clean_exit(run([[
      local p = assert(rf.load("examples/retry-budget.lock.json"))
      local seen, cdata = {}, 0
      local function scan(v)
        if type(v) == "cdata" then cdata = cdata + 1 end
        if type(v) ~= "table" or seen[v] then return end
        seen[v] = true
        for k, x in pairs(v) do scan(k); scan(x) end
      end
      local d = p:decider("POST", "/v1/jobs", true, rf.rng(1))
      scan(rf); scan(core); scan({ d(504, nil, 1, 0) }); scan({ d(429, nil, 1, 0, "1", nil, 784111777000) })
      print("cdata", cdata)
      local want = { p:decider("POST", "/v1/jobs", true, rf.rng(5))(504, nil, 1, 0) }
      local fresh = p:decider("POST", "/v1/jobs", true, rf.rng(5))
      setfenv(fresh, setmetatable({}, { __index = function() error("a global was read") end }))
      local got = { pcall(fresh, 504, nil, 1, 0) }
      print("setfenv", got[1], got[3] == want[2] and got[4] == want[3] and got[6] == want[5], got[3], got[6])
      local other = p:decider("GET", "/x", false)
      local hostile = { false, 0, -1, 2 ^ 53, "x", {}, io.stdout, tostring, coroutine.create(tostring), p, rf.rng(1),
                        select(2, debug.getupvalue(other, 1)), function() return 1 end }
      local calls, crashes = 0, 0
      for i = 1, 64 do
        local name = debug.getupvalue(d, i)
        if name == nil then break end
        for _, bad in ipairs(hostile) do
          local victim = p:decider("POST", "/v1/jobs", true, rf.rng(5))
          debug.setupvalue(victim, i, bad)
          for _, args in ipairs({ { 504, nil, 1, 0 }, { 0, "timeout", 1, 0 }, { 429, nil, 1, 0, "1", nil, 1 },
                                  { 42, nil, 1, 0 } }) do
            pcall(victim, unpack(args, 1, 7))
            calls = calls + 1
          end
        end
      end
      print("hostile calls", calls > 100)
      local again = { p:decider("POST", "/v1/jobs", true, rf.rng(5))(504, nil, 1, 0) }
      print("unchanged", want[2] == again[2] and want[3] == again[3])
    ]]))
    assert.equal("cdata\t0\nsetfenv\ttrue\ttrue\tpinned-status\tHTTP_504\nhostile calls\ttrue\n"
      .. "unchanged\ttrue\n", out)
  end)
end)
