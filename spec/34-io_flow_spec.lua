-- rf.flow: one request's attempt loop driven by the host's I/O. A fake io (no network, a virtual
-- clock) drives every outcome; the same scripted responses through client:request (retryfreeze-serve) and
-- through rf.flow give ledger lines that differ only in times.
local h = require "spec.helper"
local rf = require "retryfreeze"
local upstream = require "retryfreeze.upstream"

local JOBS = "examples/retry-budget.lock.json" -- POST /v1/jobs: 2 attempts, 2500 ms, retries 504, 429, resets

--- A fake io: send answers from script (one table per attempt) and advances the clock by each step's
--- took_ms (default 10); sleep advances it by the delay. Records what was sent and slept.
local function fake_io(script, extra)
  local io = { clock = 1000, sent = {}, slept = {} }
  local t = {
    send = function(attempt)
      io.sent[#io.sent + 1] = attempt
      local step = script[#io.sent] or error("the script has no step " .. #io.sent)
      io.clock = io.clock + (step.took_ms or 10)
      return { status = step.status, transport = step.transport, headers = step.headers, body = step.body,
               peer = step.peer }
    end,
    sleep = function(ms) io.slept[#io.slept + 1] = ms; io.clock = io.clock + ms end,
    now_ms = function() return io.clock end,
    wall_ms = function() return 1795910400000 + io.clock end,
    rng = rf.rng(1),
  }
  for k, v in pairs(extra or {}) do t[k] = v end
  return t, io
end

describe("rf.flow with a fake io", function()
  local policy = assert(rf.load(JOBS))
  local post = { method = "POST", path = "/v1/jobs", idempotency_key = "k1" }

  it("success after a retry: Retry-After honoured through io.sleep, one key on every attempt", function()
    local io, seen = fake_io({ { status = 429, headers = { ["Retry-After"] = "1" } }, { status = 200, body = "done" } })
    local r = rf.flow(policy, post, io)
    assert.same({ "success", "success", true, 2, 200, "done" }, { r.outcome, r.reason, r.ok, r.attempts, r.status, r.body })
    assert.same({ 1000 }, seen.slept)
    assert.equal("k1", seen.sent[1].headers["Idempotency-Key"])
    assert.equal("k1", seen.sent[2].headers["Idempotency-Key"])
    assert.same({ 1, 2 }, { seen.sent[1].number, seen.sent[2].number })
    assert.equal(2000, seen.sent[1].timeout_ms) -- perAttemptTimeoutMs
    assert.equal(2500 - 1010, seen.sent[2].timeout_ms) -- the time left before the deadline
    assert.equal(1020, r.elapsed_ms)
    assert.same({ "HTTP_429", "pinned-status", "1", "retry-after" },
      { r.tries[1].class, r.tries[1].reason, r.tries[1].retry_after, r.tries[1].retry_after_header })
    assert.same({ "HTTP_200", 1000 }, { r.tries[2].class, r.tries[2].delay_ms })
    assert.equal("POST /v1/jobs", r.route)
  end)

  -- Whether io.send and io.sleep run protected cannot change while one flow runs: it is asked once per flow, not
  -- for each callback (two sends, two verdicts and a sleep here).
  it("asks whether it runs protected once per flow", function()
    local io_flow = require "retryfreeze.io_flow"
    local saved, calls = io_flow.protected, 0
    io_flow.protected = function() calls = calls + 1; return saved() end
    local ok, r = pcall(rf.flow, policy, post,
      (fake_io({ { status = 429, headers = { ["Retry-After"] = "1" } }, { status = 200, body = "done" } })))
    io_flow.protected = saved
    assert(ok, r)
    assert.same({ "success", 2 }, { r.outcome, r.attempts })
    assert.equal(1, calls)
  end)

  -- Under LuaJIT the wait headers go to C through one array of pointers, cleared after each attempt: an attempt
  -- without the header, and the next request, must not see the last one's.
  it("gives each attempt only its own wait headers", function()
    local r = rf.flow(policy, post, (fake_io({ { status = 429, headers = { ["Retry-After"] = "1" } },
      { status = 429, headers = { Date = "Wed, 02 Dec 2026 01:00:00 GMT" } } })))
    assert.same({ "1", "retry-after" }, { r.tries[1].retry_after, r.tries[1].retry_after_header })
    assert.same({ "HTTP_429", nil, nil }, { r.tries[2].class, r.tries[2].retry_after, r.tries[2].retry_after_header })
    r = rf.flow(policy, post, (fake_io({ { status = 200 } })))
    assert.is_nil(r.tries[1].retry_after)
  end)

  it("terminal: a class the lock does not retry", function()
    local io, seen = fake_io({ { status = 500 } })
    local r = rf.flow(policy, post, io)
    assert.same({ "terminal", "status-not-retryable", 1 }, { r.outcome, r.reason, r.attempts })
    assert.equal(1, #seen.sent)
  end)

  it("exhausted: maxAttempts 504s", function()
    local r = rf.flow(policy, post, (fake_io({ { status = 504 }, { status = 504 } })))
    assert.same({ "exhausted", "max-attempts", 2 }, { r.outcome, r.reason, r.attempts })
  end)

  it("deadline: a Retry-After beyond the budget, and an attempt that used the whole budget", function()
    local r = rf.flow(policy, post, (fake_io({ { status = 429, headers = { ["retry-after"] = "10" } } })))
    assert.same({ "deadline", "retry-after-exceeds-budget", 1 }, { r.outcome, r.reason, r.attempts })
    r = rf.flow(policy, post, (fake_io({ { transport = "timeout", took_ms = 2500 } })))
    assert.same({ "deadline", 1, "TIMEOUT", "timeout" }, { r.outcome, r.attempts, r.tries[1].class, r.tries[1].transport })
  end)

  it("refused: no route (nothing is sent), and a POST without an idempotency key", function()
    local io, seen = fake_io({})
    local r = rf.flow(policy, { method = "GET", path = "/elsewhere" }, io)
    assert.same({ "refused", "no-route", 0, false }, { r.outcome, r.reason, r.attempts, r.ok })
    assert.equal(0, #seen.sent)
    io, seen = fake_io({ { status = 504 }, { status = 200 } })
    r = rf.flow(policy, { method = "POST", path = "/v1/jobs" }, io)
    assert.equal(1, #seen.sent) -- keyless: sent once, never retried
    assert.is_nil(seen.sent[1].headers["Idempotency-Key"])
    assert.same({ "refused", "mutating-without-idempotency" }, { r.outcome, r.reason })
  end)

  it("throttled: a drained io.retry_budget stops the retry", function()
    local lock = assert(rf.load_string('{"endpoint":"POST /v1/jobs","maxAttempts":3,"perAttemptTimeoutMs":1000,'
      .. '"totalBudgetMs":5000,"retryable":["HTTP_503"],"backoff":{"baseMs":1,"maxMs":2},'
      .. '"retryBudget":{"maxTokens":2,"tokenRatio":0.1}}'))
    local budget = rf.retry_budget(lock)
    assert.equal(2, budget:tokens())
    local outcomes = {}
    for i = 1, 4 do
      local r = rf.flow(lock, { method = "POST", path = "/v1/jobs", idempotency_key = "k" .. i },
        (fake_io({ { status = 503 }, { status = 503 }, { status = 503 } }, { retry_budget = budget })))
      outcomes[#outcomes + 1] = r.outcome .. " " .. r.reason
    end
    assert.equal("throttled retry-throttled", outcomes[#outcomes])
  end)

  it("stopped by the caller: io.on_attempt returning false narrows a retry to a stop", function()
    local calls = {}
    local io = fake_io({ { status = 504 }, { status = 200 } }, {
      on_attempt = function(try, verdict)
        calls[#calls + 1] = try.class .. " " .. tostring(verdict.retry)
        return false
      end })
    local r = rf.flow(policy, post, io)
    assert.same({ "terminal", "stopped-by-caller", 1 }, { r.outcome, r.reason, r.attempts })
    assert.same({ "HTTP_504 true" }, calls)
  end)

  it("an error in io.on_attempt is raised after the request was recorded", function()
    local path = os.tmpname()
    local ledger = assert(rf.ledger.open(path))
    local fio = fake_io({ { status = 504 } }, { ledger = ledger, on_attempt = function() error("hook broke") end })
    assert.has_error(function() rf.flow(policy, post, fio) end, "hook broke")
    ledger:close()
    local f = assert(io.open(path))
    local text = f:read("*a")
    f:close()
    os.remove(path)
    assert.equal(1, select(2, text:gsub("\n", "")))
    assert.matches('"outcome":"terminal","reason":"stopped%-by%-caller"', text)
  end)

  -- A host callback that raises (or a result rf.flow refuses) ends the request first, stopped-by-caller, so that it
  -- keeps its ledger line: the attempt io.send was making is recorded cancelled (the host may have sent it).
  it("an error raised by io.send or io.sleep is raised after the request was recorded", function()
    local function line_after(message, send, sleep)
      local path = os.tmpname()
      local ledger = assert(rf.ledger.open(path))
      local fio = fake_io({ { status = 504 } }, { ledger = ledger, send = send, sleep = sleep })
      local ok, err = pcall(rf.flow, policy, post, fio)
      ledger:close()
      local recs = {}
      local it, st = rf.ledger.read(path)
      for rec in it, st do recs[#recs + 1] = rec end
      os.remove(path)
      assert.is_false(ok)
      assert.matches(message, tostring(err), 1, true)
      assert.equal(1, #recs)
      return recs[1]
    end
    if not require("retryfreeze.io_flow").protected() then -- a Lua 5.1 coroutine: what io.send raises passes as is
      assert.has_error(function() rf.flow(policy, post, (fake_io({}, { send = function() error("send broke") end }))) end,
        "send broke")
      return
    end
    local n = 0
    local rec = line_after("send broke", function()
      n = n + 1
      if n == 2 then error("send broke") end
      return { status = 504 }
    end)
    assert.same({ "terminal", "stopped-by-caller", 2, 0 }, { rec.outcome, rec.reason, rec.attempts, rec.status })
    assert.same({ { 504, "HTTP_504" }, { 0, "UNKNOWN" } },
      { { rec.tries[1].status, rec.tries[1].class }, { rec.tries[2].status, rec.tries[2].class } })
    rec = line_after("sleep broke", nil, function() error("sleep broke") end)
    assert.same({ "terminal", "stopped-by-caller", 1, 504 }, { rec.outcome, rec.reason, rec.attempts, rec.status })
    rec = line_after("rf.flow: io.send must return a table, got string", function() return "504" end)
    assert.same({ "stopped-by-caller", 1, 0, "UNKNOWN" }, { rec.reason, rec.attempts, rec.status, rec.tries[1].class })
    rec = line_after("io.send's result.transport must be one of rf.transports, got carrier-pigeon",
      function() return { status = 200, transport = "carrier-pigeon" } end)
    assert.same({ "stopped-by-caller", 1, 0 }, { rec.reason, rec.attempts, rec.status })
  end)

  -- The step starts with room for one try and grows it as tries come (up to RF_MAX_TRIES): every try of a long
  -- request is kept, in the response and in its ledger line.
  it("keeps every try of a request of ten attempts, in the response and the ledger", function()
    local lock = assert(rf.load_string('{"version":1,"defaults":{"maxAttempts":10,"perAttemptTimeoutMs":100,'
      .. '"totalBudgetMs":60000,"retryable":["HTTP_503"],"backoff":{"baseMs":1,"maxMs":1,"jitter":"none"}},'
      .. '"routes":[{"endpoint":"GET /items/*"}]}'))
    local path = os.tmpname()
    finally(function() os.remove(path) end)
    local ledger = assert(rf.ledger.open(path))
    local script = {}
    for i = 1, 9 do script[i] = { status = 503 } end
    script[10] = { status = 200, body = "ok" }
    local io = fake_io(script, { ledger = ledger })
    local r = rf.flow(lock, { method = "GET", path = "/items/1" }, io)
    ledger:close()
    assert.same({ "success", 10, 10 }, { r.outcome, r.attempts, #r.tries })
    for i = 1, 9 do assert.same({ 503, "HTTP_503", i > 1 and 1 or 0 }, { r.tries[i].status, r.tries[i].class,
      r.tries[i].delay_ms }) end
    assert.same({ 200, "HTTP_200" }, { r.tries[10].status, r.tries[10].class })
    local recs = {}
    for rec in rf.ledger.read(path) do recs[#recs + 1] = rec end
    local rec = recs[1]
    assert.equal(1, #recs)
    assert.equal(10, #rec.tries)
    for i = 1, 10 do assert.equal(r.tries[i].status, rec.tries[i].status) end
  end)

  it("answers with the last attempt's body as given and its headers by lowercase name", function()
    local path = os.tmpname()
    finally(function() os.remove(path) end)
    local ledger = assert(rf.ledger.open(path))
    local body = "a\0b" .. ("x"):rep(100000)
    local io = fake_io({ { status = 200, body = body,
      headers = { ["Content-Type"] = " text/plain\t", ETag = '"v1"', [1] = "not a header", X = 7 } } },
      { ledger = ledger })
    local r = rf.flow(policy, post, io)
    ledger:close()
    assert.equal(body, r.body)
    assert.same({ ["content-type"] = "text/plain", etag = '"v1"' }, r.headers)
    for rec in rf.ledger.read(path) do assert.equal(#body, rec.body_len) end
    -- A number body is a string in the response, as client:request gives it; none is "".
    r = rf.flow(policy, post, (fake_io({ { status = 200, body = 42 } })))
    assert.equal("42", r.body)
    r = rf.flow(policy, post, (fake_io({ { status = 200 } })))
    assert.same({ "", {} }, { r.body, r.headers })
  end)

  it("refuses misuse with a clear error", function()
    assert.has_error(function() rf.flow(policy, post, { send = print, sleep = print }) end,
      "rf.flow: io.now_ms must be a function")
    assert.has_error(function() rf.flow(policy, { method = "POST", path = "/v1/jobs", bogus = 1 }, (fake_io({}))) end,
      "rf.flow: request: unknown key 'bogus'")
    assert.has_error(function()
      rf.flow(policy, post, (fake_io({ { status = 200, transport = "carrier-pigeon" } })))
    end)
    assert.has_error(function()
      rf.flow(policy, { method = "POST", path = "/v1/jobs", headers = { ["Idempotency-Key"] = "x" } }, (fake_io({})))
    end, "rf.flow: request.headers pass the idempotency key as idempotency_key, not as a raw header")
  end)

  -- The client's rule (rf_request_header_check), in rf.flow and core.step: a framing header in any case or with
  -- spaces around it, a CR or LF in a value, a name that is no token; refused before io.send is ever called.
  it("refuses the request headers the client refuses, before any send", function()
    local smuggled = "GET /v1/jobs HTTP/1.1\r\nHost: a\r\n\r\n"
    for _, case in ipairs({
      { { ["Content-Length"] = "0" }, 'header "Content-Length" is content-length, which frames' },
      { { ["transfer-encoding"] = "chunked" }, 'header "transfer-encoding" is transfer-encoding, which frames' },
      { { [" HOST"] = "x" }, 'header " HOST" is host, which frames' },
      { { ["Proxy-Connection\t"] = "close" }, 'header "Proxy-Connection\t" is proxy-connection, which frames' },
      { { ["X-A"] = "a\r\nContent-Length: 0" }, 'header "X-A" contains CR or LF' },
      { { ["X A"] = "a" }, 'header name "X A" is not an RFC 9110 token' },
      { { [1] = "a" }, "request.headers must map names (strings) to values (strings)" },
    }) do
      local io, seen = fake_io({ { status = 200 } })
      local request = { method = "POST", path = "/v1/jobs", idempotency_key = "k", body = smuggled, headers = case[1] }
      local ok, err = pcall(rf.flow, policy, request, io)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("rf.flow: request.headers", 1, true), tostring(err))
      assert.truthy(tostring(err):find(case[2], 1, true), tostring(err))
      assert.equal(0, #seen.sent)
      ok, err = pcall(require("retryfreeze.core").step, policy, request, {}, 0)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(case[2], 1, true), tostring(err))
    end
  end)
end)

describe("rf.flow and client:request", function()
  local up
  setup(function() up = assert(upstream.start{ bindir = h.bindir, max_seconds = 120 }) end)
  teardown(function() if up then up.stop() end end)

  -- Times differ between a real and a fake transport (a try's per-try timeout is the budget left, and the Date a
  -- wait header is recorded with is the wall clock's); everything else must be the same bytes.
  local function shape(line)
    return (line:gsub('"ts":"[^"]*"', '"ts":""'):gsub('"elapsed_ms":%d+', '"elapsed_ms":0')
      :gsub('"timeout_ms":%d+', '"timeout_ms":0'):gsub('"date":"[^"]*"', '"date":""'))
  end

  local function last_line(path)
    local f = assert(io.open(path))
    local text = f:read("*a")
    f:close()
    return text:match("([^\n]*)\n$")
  end

  for _, case in ipairs({
    { "504,200", { { status = 504 }, { status = 200 } } },
    { "429;retry-after=1,200", { { status = 429, headers = { ["Retry-After"] = "1",
      Date = "Wed, 02 Dec 2026 02:06:08 GMT" } }, { status = 200 } } },
    { "500", { { status = 500 } } },
    { "504,504", { { status = 504 }, { status = 504 } } },
  }) do
    it("write the same ledger line for " .. case[1], function()
      local policy = assert(rf.load(JOBS))
      local a, b = os.tmpname(), os.tmpname()
      local la, lb = assert(rf.ledger.open(a)), assert(rf.ledger.open(b))
      local client = rf.client{ policy = policy, base_url = up.url, ledger = la, rng_seed = 1 }
      local rc = client:request{ method = "POST", path = "/v1/jobs", idempotency_key = "k-" .. case[1],
                                 headers = { ["X-Fault-Script"] = case[1] } }
      client:close()
      -- the same body length; and the peer the client connected to, as a transport that knows it says (result.peer)
      for _, step in ipairs(case[2]) do step.body, step.peer = rc.body, up.url:match("^https?://([^/]+)") end
      local io = fake_io(case[2], { ledger = lb })
      local rflow = rf.flow(policy, { method = "POST", path = "/v1/jobs", idempotency_key = "k-" .. case[1] }, io)
      la:close()
      lb:close()
      assert.same({ rc.outcome, rc.reason, rc.attempts, rc.status, #rc.tries },
        { rflow.outcome, rflow.reason, rflow.attempts, rflow.status, #rflow.tries })
      assert.equal(shape(last_line(a)), shape(last_line(b)))
      os.remove(a)
      os.remove(b)
    end)
  end
end)

-- A flow script had no clock of its own (a user shelled out to `date +%s%3N` to time a request).
describe("rf.now_ms and rf.monotonic_ms", function()
  local mtype = require("retryfreeze.compat").math.type

  it("give integer milliseconds: the wall clock within a second of os.time(), a monotonic clock", function()
    -- os.time() truncates to whole seconds and glibc reads it from the coarse clock, a tick behind the
    -- precise one: bracket the reading by the seconds before and after rather than compare to one of them.
    local before_s = os.time()
    local wall = rf.now_ms()
    local after_s = os.time()
    assert.equal("integer", mtype(wall))
    assert.is_true(wall >= (before_s - 1) * 1000 and wall < (after_s + 2) * 1000,
      "now_ms " .. wall .. " outside os.time() " .. before_s .. " .. " .. after_s)
    local first = rf.monotonic_ms()
    assert.equal("integer", mtype(first))
    assert.is_true(first >= 0 and first <= 9007199254740991) -- in rf.flow's io.now_ms range
    -- Never back across calls: 200 000 readings in a row (a clock that steps back would show it here).
    local prev, backs = first, 0
    for _ = 1, 200000 do
      local now = rf.monotonic_ms()
      if now < prev then backs = backs + 1 end
      prev = now
    end
    assert.equal(0, backs)
    -- It advances with real time: a 50 ms sleep moves it by at least 50 ms.
    local before = rf.monotonic_ms()
    os.execute("sleep 0.05")
    assert.is_true(rf.monotonic_ms() - before >= 50)
  end)

  it("raise on arguments, as a clock takes none", function()
    assert.has_error(function() rf.now_ms(1) end, "bad argument #1 to 'now_ms' (no arguments expected)")
    assert.has_error(function() rf.monotonic_ms("x") end, "bad argument #1 to 'monotonic_ms' (no arguments expected)")
  end)

  it("serve as rf.flow's io.now_ms and io.wall_ms", function()
    local policy = assert(rf.load(JOBS))
    local r = rf.flow(policy, { method = "POST", path = "/v1/jobs", idempotency_key = "k" }, {
      send = function() return { status = 201 } end,
      sleep = function() end,
      now_ms = rf.monotonic_ms,
      wall_ms = rf.now_ms,
    })
    assert.same({ "success", 1 }, { r.outcome, r.attempts })
    assert.is_true(r.elapsed_ms >= 0 and r.elapsed_ms < 1000)
  end)
end)
