-- Concurrency through curl multi driving Lua coroutines, and `retryfreeze soak`.
local rf = require "retryfreeze"
local h = require "spec.helper"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"

-- The records of the ledger at path as rows: row_of(rec, statuses) returns each one's index and row (statuses:
-- its tries' statuses joined by commas); returns the rows and how many records there were.
local function ledger_rows(path, row_of)
  local rows, n = {}, 0
  local it, st = rf.ledger.read(path)
  for rec in it, st do
    local statuses = {}
    for k, t in ipairs(rec.tries) do statuses[k] = t.status end
    local index, row = row_of(rec, table.concat(statuses, ","))
    rows[index] = row
    n = n + 1
  end
  return rows, n
end

--- A fresh upstream (upstream.start's options up_opts) and a client of the lock text `lock` with a fresh ledger;
--- run(client) must raise `message` and leave no request in flight. Returns the ledger's records by key, and how
--- many there are.
local function ledger_after_raise(up_opts, lock, message, run)
  up_opts.bindir, up_opts.max_seconds = h.bindir, 60
  local up = assert(upstream.start(up_opts))
  local path = os.tmpname()
  finally(function() up.stop(); os.remove(path) end)
  local l = assert(rf.ledger.open(path))
  local c = rf.client{ policy = assert(rf.load_string(lock)), base_url = up.url, ledger = l }
  assert.has_error(function() run(c) end, message)
  assert.equal(0, c:in_flight())
  c:close()
  assert(l:close())
  return ledger_rows(path, function(rec) return rec.key, rec end)
end

describe("retryfreeze.scheduler", function()
  it("runs flows concurrently: 20 requests that each wait 1 s (Retry-After) take about 1 s, not 20", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local p = assert(rf.load_string('{"endpoint":"GET /x/{i}","maxAttempts":2,"perAttemptTimeoutMs":2000,'
      .. '"totalBudgetMs":5000,"retryable":["HTTP_429"]}'))
    local c = rf.client{ policy = p, base_url = up.url }
    local results = {}
    local t0 = os.time()
    local failed = scheduler.run(c, 20, 20, function(i)
      results[i] = c:request{ method = "GET", path = "/x/" .. i, headers = { ["X-Fault-Script"] = "429;retry-after=1,200" } }
    end)
    local took = os.time() - t0
    c:close()
    up.stop()
    assert.equal(0, failed)
    for i = 1, 20 do
      assert.same({ true, 2, 1000 }, { results[i].ok, results[i].attempts, results[i].tries[2].delay_ms })
    end
    assert.is_true(took <= 3, "took " .. took .. " s")
  end)

  -- A fresh upstream and a client that makes one attempt per GET /x (the test closes and stops them).
  local function one_attempt_client()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local p = assert(rf.load_string('{"endpoint":"GET /x","maxAttempts":1,"perAttemptTimeoutMs":1000,'
      .. '"totalBudgetMs":1000,"retryable":[]}'))
    return rf.client{ policy = p, base_url = up.url }, up
  end

  it("reports a flow that raises and keeps running the others", function()
    local c, up = one_attempt_client()
    local errors, oks = {}, 0
    local failed = scheduler.run(c, 10, 4, function(i)
      c:request{ method = "GET", path = "/x" }
      if i == 3 then error("flow three broke") end
    end, function(i, ok, err) if ok then oks = oks + 1 else errors[i] = err end end)
    c:close()
    up.stop()
    assert.equal(1, failed)
    assert.equal(9, oks)
    assert.matches("flow three broke", errors[3])
  end)

  it("refuses on_attempt hooks inside scheduled flows", function()
    local c, up = one_attempt_client()
    local msg
    scheduler.run(c, 1, 1, function()
      c:request{ method = "GET", path = "/x", on_attempt = function() end }
    end, function(_, _, err) msg = err end)
    c:close()
    up.stop()
    assert.matches("on_attempt is not available in scheduled flows", msg)
  end)
end)

describe("retryfreeze.scheduler when on_done raises with requests in flight", function()
  -- Flow 1 answers at once and its on_done raises; flows 2..4 (the rest of the window) are held 3 s by the
  -- upstream then. Each must end at once as stopped-by-caller with its ledger line, none dropped with its box.
  local function check(run)
    local function request(i)
      return { method = "GET", path = "/x/" .. i, idempotency_key = "s-" .. i,
        headers = { ["X-Fault-Script"] = i == 1 and "200" or "200;delay=3000" } }
    end
    local recs, lines = ledger_after_raise({}, '{"endpoint":"GET /x/{i}","maxAttempts":1,"perAttemptTimeoutMs":5000,'
      .. '"totalBudgetMs":5000,"retryable":[]}', "done boom", function(c)
        run(c, request, function(i) if i == 1 then error("done boom") end end)
      end)
    assert.equal(4, lines)
    assert.same({ "success", 200 }, { recs["s-1"].reason, recs["s-1"].status })
    for i = 2, 4 do
      local rec = assert(recs["s-" .. i], "flow " .. i .. " has no ledger line")
      assert.same({ "terminal", "stopped-by-caller", 1, 0 }, { rec.outcome, rec.reason, rec.attempts, rec.status })
      assert.is_true(rec.elapsed_ms < 3000, "awaited: " .. rec.elapsed_ms .. " ms")
    end
  end

  it("scheduler.run ends them, each with its ledger line, then raises again", function()
    check(function(c, request, on_done)
      scheduler.run(c, 10, 4, function(i) c:request(request(i)) end, on_done)
    end)
  end)

  it("scheduler.run_requests ends them, each with its ledger line, then raises again", function()
    check(function(c, request, on_done) scheduler.run_requests(c, 10, 4, request, on_done) end)
  end)
end)

describe("retryfreeze.scheduler.run_requests", function()
  local LOCK = '{"endpoint":"GET /x/{i}","maxAttempts":2,"perAttemptTimeoutMs":2000,"totalBudgetMs":5000,'
    .. '"retryable":["HTTP_503"],"backoff":{"baseMs":1,"maxMs":2}}'

  -- The ledger records of a run, by path: {outcome, attempts, statuses of the tries, key}.
  local function records(path)
    return ledger_rows(path, function(rec, statuses)
      return rec.path, { rec.outcome, rec.attempts, statuses, rec.key }
    end)
  end

  it("sends one request per flow, retries as the lock says, and writes the same ledger as run", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local p = assert(rf.load_string(LOCK))
    local function soak_with(run, key_prefix)
      local path = os.tmpname()
      local l = assert(rf.ledger.open(path))
      local c = rf.client{ policy = p, base_url = up.url, ledger = l }
      local req = { method = "GET" } -- one table for every flow: the client keeps its own references
      local function request(i)
        req.path, req.idempotency_key = "/x/" .. i, key_prefix .. i
        req.headers = { ["X-Fault-Script"] = i % 3 == 0 and "503,503" or i % 3 == 1 and "503,200" or "200" }
        return req
      end
      local max_in_flight, done = 0, {}
      local failed = run(c, 30, 4, function(i)
        max_in_flight = math.max(max_in_flight, c:in_flight())
        return request(i)
      end, function(i, ok) done[#done + 1] = ok and i or -i end)
      assert.equal(0, c:in_flight())
      c:close()
      l:close()
      local recs, n = records(path)
      os.remove(path)
      return failed, recs, n, max_in_flight, #done
    end
    local failed, recs, n, max_in_flight, n_done = soak_with(scheduler.run_requests, "rr-")
    local flow_failed, flow_recs = soak_with(function(c, count, conc, request, on_done)
      return scheduler.run(c, count, conc, function(i) c:request(request(i)) end, on_done)
    end, "run-")
    up.stop()
    assert.same({ 0, 30, 30 }, { failed, n, n_done })
    assert.is_true(max_in_flight <= 3, "in flight before a start: " .. max_in_flight) -- below concurrency 4
    assert.same({ "success", 2, "503,200", "rr-1" }, recs["/x/1"])
    assert.same({ "success", 1, "200", "rr-2" }, recs["/x/2"])
    assert.same({ "failure", 2, "503,503", "rr-3" }, { recs["/x/3"][1] == "success" and "success" or "failure",
      recs["/x/3"][2], recs["/x/3"][3], recs["/x/3"][4] })
    assert.equal(0, flow_failed)
    for i = 1, 30 do
      local a, b = recs["/x/" .. i], flow_recs["/x/" .. i]
      assert.same({ a[1], a[2], a[3] }, { b[1], b[2], b[3] }, "flow " .. i)
    end
  end)

  it("reports a request function that raises and a refused request as failed flows, and runs the others", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local c = rf.client{ policy = assert(rf.load_string(LOCK)), base_url = up.url }
    local errors, oks = {}, 0
    local failed = scheduler.run_requests(c, 10, 3, function(i)
      if i == 2 then error("request two broke") end
      if i == 5 then return { method = "GET", path = "no-slash" } end
      return { method = "GET", path = "/x/" .. i }
    end, function(i, ok, err) if ok then oks = oks + 1 else errors[i] = err end end)
    c:close()
    up.stop()
    assert.same({ 2, 8 }, { failed, oks })
    assert.matches("request two broke", errors[2])
    assert.matches("path must start with '/'", errors[5])
  end)

  -- Runs started request box (ticket t) of client c until client:_run has reported it (now or in an earlier
  -- call); then finishes it.
  local reported = {}
  local function run_box(c, t, box)
    for _ = 1, 50 do
      if reported[t] then break end
      for _, d in ipairs(c:_run(100)) do reported[d] = true end
    end
    assert.is_true(reported[t])
    reported[t] = nil
    return c:_finish(box)
  end

  it("carries a later request in a finished box: the same box, nothing of the request before", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local path = os.tmpname()
    finally(function() up.stop(); os.remove(path) end)
    local ledger = assert(rf.ledger.open(path))
    local c = rf.client{ policy = assert(rf.load_string(LOCK)), base_url = up.url, ledger = ledger }
    local t1, box = c:_start{ method = "GET", path = "/x/1", idempotency_key = "box-1",
                              headers = { ["X-Fault-Script"] = "503,503" } }
    local r1 = run_box(c, t1, box)
    assert.same({ 503, 2 }, { r1.status, r1.attempts })
    local t2, box2 = c:_start({ method = "GET", path = "/x/2" }, box)
    assert.equal(box, box2)
    local r2 = run_box(c, t2, box)
    assert.same({ 200, 1 }, { r2.status, r2.attempts })
    c:close()
    assert(ledger:close())
    local by_path = records(path)
    assert.same({ "success", 1, "200" }, { by_path["/x/2"][1], by_path["/x/2"][2], by_path["/x/2"][3] })
    assert.is_nil(by_path["/x/2"][4]) -- no key: the box's earlier request's key stayed behind
  end)

  it("refuses to reuse a box in flight or another client's, and outgrows a box without harm", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    finally(function() up.stop() end)
    local p = assert(rf.load_string(LOCK))
    local c, other = rf.client{ policy = p, base_url = up.url }, rf.client{ policy = p, base_url = up.url }
    local t1, small = c:_start{ method = "GET", path = "/x/1" }
    assert.has_error(function() c:_start({ method = "GET", path = "/x/2" }, small) end,
      "client:_start: the box to reuse is still in flight (finish it first)")
    run_box(c, t1, small)
    assert.has_error(function() other:_start({ method = "GET", path = "/x/2" }, small) end,
      "client:_start: the box to reuse belongs to another client")
    assert.has_error(function() c:_start({ method = "GET", path = "/x/2" }, "box") end)
    -- A request with more header lines than the box holds gets a new box; the old one, reused again while
    -- the new one is in flight, must not take the strings the new one sends.
    -- (Strings made here and referenced by nothing else: only the box's keeper keeps them alive.)
    local t2, big = c:_start({ method = ("get"):upper(), path = ("/x/%d"):format(2), idempotency_key = ("k%d"):format(2),
                               headers = { ["X-Fault-Script"] = ("%d,200"):format(503), ["X-Other"] = ("o"):rep(40) } },
                             small)
    assert.are_not.equal(small, big)
    local t3, again = c:_start({ method = "GET", path = "/x/3" }, small)
    assert.equal(small, again)
    collectgarbage()
    collectgarbage()
    local r2 = run_box(c, t2, big)
    assert.same({ 200, 2 }, { r2.status, r2.attempts }) -- its script reached the upstream whole
    assert.same({ 200, 1 }, { run_box(c, t3, small).status, 1 })
    c:close()
    other:close()
  end)

  it("refuses a client with an on_attempt hook, as scheduled flows do", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local c = rf.client{ policy = assert(rf.load_string(LOCK)), base_url = up.url, on_attempt = function() end }
    local msg
    local failed = scheduler.run_requests(c, 1, 1, function() return { method = "GET", path = "/x/1" } end,
      function(_, _, err) msg = err end)
    c:close()
    up.stop()
    assert.equal(1, failed)
    assert.matches("on_attempt is not available in scheduled flows", msg)
  end)
end)

describe("retryfreeze.scheduler.run_generated (soak's default flow, from C)", function()
  local soak = require "retryfreeze.cli.soak"
  local LOCK = '{"version":1,"defaults":{"maxAttempts":3,"perAttemptTimeoutMs":2000,"totalBudgetMs":5000,'
    .. '"retryable":["HTTP_503"],"backoff":{"baseMs":1,"maxMs":2}},'
    .. '"routes":[{"endpoint":"GET /a/{id}/b/{n}"},{"endpoint":"GET /files/*"},{"endpoint":"GET /health"}]}'

  -- Every ledger record of the file at path, by its key (or path, without one): {method, path, outcome, attempts,
  -- statuses}.
  local function by_key(path)
    return ledger_rows(path, function(rec, statuses)
      return rec.key or rec.path, { rec.method, rec.path, rec.outcome, rec.attempts, statuses }
    end)
  end

  it("makes the paths of the lock's routes in turn ({param} and a last * take the flow number)", function()
    local routes = soak.default_routes(assert(rf.load_string(LOCK)))
    assert.same({ { method = "GET", pieces = { "/a/", "/b/", "" } }, { method = "GET", pieces = { "/files/soak/", "" } },
      { method = "GET", pieces = { "/health" } } }, routes)
    local req = soak.default_requests(assert(rf.load_string(LOCK)), "p")
    assert.same({ method = "GET", path = "/a/4/b/4", idempotency_key = "p-4" }, req(4))
    assert.same({ method = "GET", path = "/files/soak/5", idempotency_key = "p-5" }, req(5))
    assert.same({ method = "GET", path = "/health", idempotency_key = "p-6" }, req(6))
  end)

  it("sends the requests, retries and ledger lines run_requests sends for the same flows", function()
    local p = assert(rf.load_string(LOCK))
    local function run_with(kind)
      -- A fresh upstream per run, with the same seed: it draws each request's faults from its identity (and
      -- counts a key it has seen before as a duplicate execution).
      local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60, seed = 3, faults = "503=0.3" })
      local path = os.tmpname()
      local l = assert(rf.ledger.open(path))
      local c = rf.client{ policy = p, base_url = up.url, ledger = l, rng_seed = 1 }
      local failed, errors
      local progress = {}
      if kind == "generated" then
        failed, errors = scheduler.run_generated(c, 61, 5, soak.default_routes(p), "gen-",
          function(done) progress[#progress + 1] = done end)
      else
        -- The same keys as the generated run: the upstream draws each request's faults from its identity.
        local req = soak.default_requests(p, "gen")
        failed = scheduler.run_requests(c, 61, 5, req)
      end
      assert.equal(0, c:in_flight())
      c:close()
      l:close()
      up.stop()
      local recs, n = by_key(path)
      os.remove(path)
      return failed, recs, n, errors, progress
    end
    local failed, recs, n, errors, progress = run_with("generated")
    local _, lua_recs, lua_n = run_with("requests")
    assert.same({ 0, {}, 61, 61 }, { failed, errors, n, lua_n })
    assert.same({ 61 }, progress) -- every 64 flows (none here), and after the last
    assert.same({ "GET", "/a/1/b/1" }, { recs["gen-1"][1], recs["gen-1"][2] })
    assert.same({ "GET", "/files/soak/2" }, { recs["gen-2"][1], recs["gen-2"][2] })
    assert.same({ "GET", "/health" }, { recs["gen-3"][1], recs["gen-3"][2] })
    local retried = 0
    for i = 1, 61 do
      local key = "gen-" .. i
      assert.same(lua_recs[key], recs[key], key)
      if recs[key][4] > 1 then retried = retried + 1 end
    end
    assert.is_true(retried > 0) -- faults were drawn: the retries went through the engine
  end)

  it("has a flow's ledger line in the file before the flow is reported done (lines batched per run, each whole)",
    function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60, seed = 2, faults = "503=0.2" })
    local path = os.tmpname()
    finally(function() up.stop(); os.remove(path) end)
    local p = assert(rf.load_string(LOCK))
    local l = assert(rf.ledger.open(path))
    local c = rf.client{ policy = p, base_url = up.url, ledger = l }
    local function keys_in_file()
      local keys, n = {}, 0
      for line in io.lines(path) do
        keys[assert(line:match('"key":"([^"]+)"'), "a whole line: " .. line)] = true
        n = n + 1
      end
      return keys, n
    end
    local checked = 0
    scheduler.run_requests(c, 40, 8, soak.default_requests(p, "rr"), function(i, ok)
      assert.is_true(ok)
      assert.is_true(keys_in_file()["rr-" .. i], "flow " .. i .. " reported before its line")
      checked = checked + 1
    end)
    c:_run_generated{ routes = soak.default_routes(p), key_prefix = "gen-", count = 40, concurrency = 8,
      progress_every = 1, on_progress = function(done)
        local _, n = keys_in_file()
        assert.is_true(n >= 40 + done, "done " .. done .. ", lines " .. n - 40)
        checked = checked + 1
      end }
    c:close()
    assert(l:close())
    local keys, n = keys_in_file()
    assert.same({ 80, 80 }, { n, checked })
    for i = 1, 40 do assert.is_true(keys["rr-" .. i] and keys["gen-" .. i]) end
  end)

  it("counts a refused request as a failed flow, calls on_progress on its schedule and runs the others", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local c = rf.client{ policy = assert(rf.load_string(LOCK)), base_url = up.url }
    local seen = {}
    local failed, errors = c:_run_generated{ routes = { { method = "GET", pieces = { "/health" } },
      { method = "GET", pieces = { "no-slash-", "" } } }, key_prefix = "k-", count = 9, concurrency = 2,
      progress_every = 4, max_errors = 2, on_progress = function(done) seen[#seen + 1] = done end }
    assert.equal(4, failed) -- flows 2, 4, 6, 8
    assert.same({ "flow 2: client:request: path must start with '/' and contain no spaces, CR, LF or '#'",
      "flow 4: client:request: path must start with '/' and contain no spaces, CR, LF or '#'" }, errors)
    assert.same({ 4, 8, 9 }, seen)
    assert.equal(0, c:in_flight())
    c:close()
    up.stop()
  end)

  it("keeps the client busy while it runs, and leaves it usable after on_progress raises", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local path = os.tmpname()
    finally(function() up.stop(); os.remove(path) end)
    local l = assert(rf.ledger.open(path))
    local c = rf.client{ policy = assert(rf.load_string(LOCK)), base_url = up.url, ledger = l }
    local routes = { { method = "GET", pieces = { "/health" } } }
    local inside
    c:_run_generated{ routes = routes, key_prefix = "b-", count = 3, concurrency = 1, progress_every = 1,
      on_progress = function(done)
        if done == 1 then inside = { pcall(c.in_flight, c) } end
        routes[1].pieces[1] = "/changed" -- C copied the routes: nothing changes for the flows after
        collectgarbage()
      end }
    assert.same({ false, "client is busy (called from its own on_attempt hook)" }, inside)
    assert.has_error(function()
      c:_run_generated{ routes = { { method = "GET", pieces = { "/health" } } }, key_prefix = "e-", count = 50,
        concurrency = 8, progress_every = 5, on_progress = function(done) if done >= 5 then error("stop here") end end }
    end, "stop here")
    assert.equal(0, c:in_flight()) -- the requests in flight were abandoned
    local r = c:request{ method = "GET", path = "/health" }
    assert.same({ 1, 200 }, { r.attempts, r.status })
    c:close()
    assert(l:close())
    local recs = by_key(path)
    for i = 1, 3 do assert.equal("/health", recs["b-" .. i][2]) end
  end)

  it("ends the requests in flight when on_progress raises, each with its ledger line", function()
    -- Half the attempts stall 3 s (slow=0.5:3000): when on_progress raises at the first flow done, requests are
    -- still in flight. Each must be stopped (stopped-by-caller, not awaited) and in the ledger, as every flow
    -- that was started: keys g-1..g-m with no gap, m at least the window of 4.
    local recs, lines = ledger_after_raise({ faults = "slow=0.5:3000", seed = 7 }, LOCK, "stop here", function(c)
      c:_run_generated{ routes = { { method = "GET", pieces = { "/health" } } }, key_prefix = "g-", count = 40,
        concurrency = 4, progress_every = 1, on_progress = function() error("stop here") end }
    end)
    assert.is_true(lines >= 4, "every flow of the first window has a line: " .. lines)
    local stopped = 0
    for i = 1, lines do
      local rec = assert(recs["g-" .. i], "flow " .. i .. " has no ledger line")
      if rec.reason == "stopped-by-caller" then
        stopped = stopped + 1
        assert.same({ "terminal", 1, 0 }, { rec.outcome, rec.attempts, rec.status })
        assert.is_true(rec.elapsed_ms < 3000, "awaited: " .. rec.elapsed_ms .. " ms")
      else
        assert.same({ "success", 200 }, { rec.reason, rec.status })
      end
    end
    assert.is_true(stopped >= 1, "a request was in flight when on_progress raised")
  end)

  it("refuses bad options, a client with a hook and one with scheduled requests in flight", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    finally(function() up.stop() end)
    local p = assert(rf.load_string(LOCK))
    local c = rf.client{ policy = p, base_url = up.url }
    local routes = { { method = "GET", pieces = { "/health" } } }
    local shifting_reads = 0
    for _, case in ipairs({
      { { routes = routes, key_prefix = "k", count = 1 }, "concurrency is required" },
      { { routes = routes, key_prefix = "k", count = 1, concurrency = 0 }, "concurrency must be an integer in 1..4096" },
      { { routes = {}, key_prefix = "k", count = 1, concurrency = 1 }, "routes must be a non%-empty array" },
      { { routes = { { method = "GET", pieces = {} } }, key_prefix = "k", count = 1, concurrency = 1 },
        "routes%[1%] must be {method = string, pieces = {string, …}}" },
      { { routes = { { method = "GET", pieces = { 1 } } }, key_prefix = "k", count = 1, concurrency = 1 },
        "routes%[1%]%.pieces%[1%] must be a string" },
      { { routes = routes, key_prefix = "k\0", count = 1, concurrency = 1 }, "key_prefix must not contain a NUL" },
      { { routes = routes, count = 1, concurrency = 1 }, "key_prefix must be a string" },
      -- Routes are read raw: a route that answers through __index (here one path piece when sized and a
      -- thousand long ones after, which overflowed the arena sized by the first read) is no route at all.
      { { routes = { setmetatable({}, { __index = function(_, k)
          if k == "method" then return "GET" end
          shifting_reads = shifting_reads + 1
          if shifting_reads == 1 then return { "/x" } end
          local long = {}
          for i = 1, 1000 do long[i] = ("p"):rep(1000) end
          return long
        end }) }, key_prefix = "k", count = 1, concurrency = 1 },
        "routes%[1%] must be {method = string, pieces = {string, …}}" },
    }) do
      local ok, msg = pcall(c._run_generated, c, case[1])
      assert.is_false(ok)
      assert.matches(case[2], msg)
    end
    local _, box = c:_start{ method = "GET", path = "/health" }
    assert.has_error(function() c:_run_generated{ routes = routes, key_prefix = "k", count = 1, concurrency = 1 } end,
      "client:_run_generated: 1 scheduled requests of this client are in flight")
    while c:in_flight() > 0 do c:_run(100) end
    c:_finish(box, false)
    c:close()
    local hooked = rf.client{ policy = p, base_url = up.url, on_attempt = function() end }
    assert.has_error(function()
      hooked:_run_generated{ routes = routes, key_prefix = "k", count = 1, concurrency = 1 }
    end, "client:_run_generated: on_attempt is not available in scheduled flows")
    hooked:close()
  end)
end)

describe("a ledger's running tally of its appends (soak's stats)", function()
  local stats = require "retryfreeze.ledger_stats"
  local LOCK = '{"version":1,"defaults":{"maxAttempts":3,"perAttemptTimeoutMs":2000,"totalBudgetMs":5000,'
    .. '"retryable":["HTTP_503","HTTP_429","CONNECT_RESET"],"backoff":{"baseMs":1,"maxMs":3},'
    .. '"retryAfter":{"maxMs":1500}},"routes":[{"endpoint":"GET /a/{i}"},{"endpoint":"POST /b/{i}","maxAttempts":2}]}'
  -- Scripted faults by flow number: retries, an honoured and an invalid Retry-After, one beyond the budget, a
  -- terminal 500, exhausted attempts, a reset, a refused keyless POST's retry and a path no route matches.
  local SCRIPTS = { [3] = "503;retry-after=0,200", [4] = "429;retry-after=soon,200", [5] = "503;retry-after=99",
                    [6] = "500", [7] = "503,503,503", [8] = "reset,200", [9] = "503,200" }
  local function request(i)
    local req = { method = i % 5 == 0 and "POST" or "GET", path = (i % 5 == 0 and "/b/" or "/a/") .. i,
                  headers = { ["X-Fault-Script"] = SCRIPTS[i % 10] or "200" } }
    if i % 17 == 0 then req.path = "/nowhere/" .. i end
    if i % 3 ~= 0 then req.idempotency_key = "tally-" .. i end
    return req
  end

  it("counts exactly what stats reads back from the lines the run appended, after lines already there", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local p = assert(rf.load_string(LOCK))
    local path = os.tmpname()
    finally(function() up.stop(); os.remove(path) end)
    -- Lines from an earlier run, which the count of this one leaves out.
    local earlier = assert(rf.ledger.open(path))
    local c0 = rf.client{ policy = p, base_url = up.url, ledger = earlier }
    for i = 1, 5 do c0:request(request(1000 + i)) end
    c0:close(); earlier:close()
    local before = assert(stats.lines_before_append(path))
    assert.equal(5, before)

    local ledger = assert(rf.ledger.open(path))
    ledger:_tally_appends()
    local c = rf.client{ policy = p, base_url = up.url, ledger = ledger, rng_seed = 9 }
    assert.equal(0, scheduler.run_requests(c, 200, 16, request))
    assert.equal(0, scheduler.run(c, 20, 4, function(i) c:request(request(500 + i)) end))
    c:_set_scheduled(false)
    c:request(request(1003)) -- a blocking request counts too
    c:close()
    local open_counts = stats.of_appends(ledger, path)
    assert(ledger:close())
    local counted = stats.of_appends(ledger, path)
    assert.same(open_counts, counted) -- also readable after close, unchanged

    local read = assert(stats.stats(path, { after_line = { [path] = before } }))
    assert.equal(before + 221, read.lines) -- the reader counts every line it read
    read.lines = read.lines - before
    assert.same(read, counted)
    -- The run really went through the variety above.
    assert.equal(221, counted.requests)
    for _, k in ipairs({ "success success", "terminal status-not-retryable", "exhausted max-attempts",
                         "deadline retry-after-exceeds-budget", "refused no-route" }) do
      assert.is_true((counted.by_reason[k] or 0) > 0, k)
    end
    assert.is_true(counted.retried_successes > 0)
    assert.is_true((counted.retry_after["honored"] or 0) > 0 and (counted.retry_after["ignored-invalid"] or 0) > 0)
  end)

  it("raises when counting never started, and counts nothing a failed append did not write", function()
    local path = os.tmpname()
    finally(function() os.remove(path) end)
    local ledger = assert(rf.ledger.open(path))
    assert.has_error(function() ledger:_appended() end, "ledger:_appended: call ledger:_tally_appends() first")
    ledger:_tally_appends()
    local s = stats.of_appends(ledger, path)
    assert.same({ 0, 0, {} }, { s.requests, s.lines, s.by_route })
    assert(ledger:close())
    assert.has_error(function() ledger:_tally_appends() end, "attempt to use a closed ledger")
  end)
end)

describe("retryfreeze soak", function()
  local ledger = os.tmpname()
  teardown(function() os.remove(ledger) end)

  it("drives the default flow, prints stats and exits 0 within the thresholds", function()
    local out, _, code = h.run_cli("soak", "examples/service.lock.json", "--requests", "300", "--concurrency", "32",
      "--faults", "503=0.05", "--seed", "4", "--ledger", ledger, "--max-retry-ratio", "0.5")
    assert.equal(0, code)
    assert.matches("soak: 300 flows %(0 failed%), concurrency 32", out)
    assert.matches("requests=300 successes=%d+ attempts=%d+", out)
    assert.matches("retried%-success=[%d.]+%% attempts/success=[%d.]+", out)
    local lines = 0
    local it, st = rf.ledger.read(ledger)
    for _ in it, st do lines = lines + 1 end
    assert.equal(300, lines)
  end)

  it("prints the stats `retryfreeze stats` reads from the lines it appended", function()
    local fresh = os.tmpname()
    finally(function() os.remove(fresh) end)
    local out, _, code = h.run_cli("soak", "examples/service.lock.json", "--requests", "400", "--concurrency", "16",
      "--faults", "503=0.1,429=0.05,500=0.03,reset=0.02", "--seed", "5", "--ledger", fresh)
    assert.equal(0, code, out)
    local s = assert(require("retryfreeze.ledger_stats").stats(fresh))
    assert.matches(string.format("requests=%d successes=%d attempts=%d retries=%d retry%%-ratio=%.3f ", s.requests,
      s.successes, s.attempts, s.retries, s.retry_ratio):gsub("%.", "%%."), out)
    assert.is_true(s.retries > 0 and s.successes < s.requests)
    for k, n in pairs(s.by_reason) do
      assert.matches("\n  " .. k:gsub("%-", "%%-") .. " +" .. n .. "\n", out)
    end
  end)

  -- Soaks judged by their exit code and one line of the output (a Lua pattern): thresholds, forbidden reasons,
  -- duplicate executions of a keyed request, a user's flow script. Each writes the spec's ledger.
  for _, case in ipairs({
    { "exits 1 on a breached threshold and names it", 1, "breach: retries/request 0%.%d+ > max 0%.050 %(max%-retry%-ratio%)",
      { "examples/service.lock.json", "--requests", "200", "--faults", "503=0.3", "--max-retry-ratio", "0.05" } },
    { "exits 1 on a forbidden reason", 1,
      "breach: %d+ requests ended with forbidden reason status%-not%-retryable %(forbid%-reason%)",
      { "examples/service.lock.json", "--requests", "100", "--faults", "500=0.5",
        "--forbid-reason", "status-not-retryable" } },
    { "fails on duplicate executions of a keyed request (a flow that reuses one key)", 1,
      "breach: 19 duplicate executions of keyed requests",
      { h.desk_lock, "--requests", "20", "--faults", "503=0", "--script", "spec/fixtures/reused_key_flow.lua" } },
    { "soaks a user's flow script", 0, "requests=100 successes=100",
      { "examples/service.lock.json", "--requests", "50", "--faults", "503=0",
        "--script", "spec/fixtures/two_step_flow.lua" } },
  }) do
    local name, want_code, want_line, args = case[1], case[2], case[3], case[4]
    it(name, function()
      local argv = { "soak" }
      for _, a in ipairs(args) do argv[#argv + 1] = a end
      argv[#argv + 1], argv[#argv + 2] = "--ledger", ledger
      local out, _, code = h.run_cli(table.unpack(argv))
      assert.equal(want_code, code)
      assert.matches(want_line, out)
    end)
  end

  it("measures attempts per request within 0.05 of the model's prediction (p = 0.3, 3 attempts)", function()
    local model = require "retryfreeze.model"
    local lock = h.temp_file('{"endpoint":"GET /x/{i}","maxAttempts":3,"perAttemptTimeoutMs":1000,'
      .. '"totalBudgetMs":10000,"retryable":["HTTP_503"],"backoff":{"baseMs":1,"maxMs":5,"jitter":"none"}}')
    local out, _, code = h.run_cli("soak", lock, "--requests", "3000", "--concurrency", "64", "--faults", "503=0.3",
      "--seed", "21", "--ledger", ledger)
    os.remove(lock)
    assert.equal(0, code)
    local requests, attempts = out:match("requests=(%d+) successes=%d+ attempts=(%d+)")
    local measured = tonumber(attempts) / tonumber(requests)
    local predicted = model.predict{ max_attempts = 3, p = 0.3 }.attempts_per_request
    assert.near(1.39, predicted, 0.0001)
    -- 3000 requests: the standard error of the mean is about 0.012, so 0.05 is four of them.
    assert.near(predicted, measured, 0.05)
  end)

  it("refuses a non-loopback --url and bad usage", function()
    local _, err, code = h.run_cli("soak", h.desk_lock, "--url", "http://192.0.2.1:8080")
    assert.equal(2, code)
    assert.matches("loopback addresses only", err)
    _, _, code = h.run_cli("soak")
    assert.equal(2, code)
    _, _, code = h.run_cli("soak", h.desk_lock, "--concurrency", "0")
    assert.equal(2, code)
  end)
end)
