-- Propagation across layers, one hop on the wire: a real nginx logs the attempt number and the deadline each
-- attempt sends (the headers Envoy speaks), answers 503, or 503 with x-envoy-overloaded; the project's upstream
-- (retryfreeze-serve) is the slow one. What the client reads from its caller (inbound_headers) narrows its
-- deadline and its attempts, never widens them, and is never an error; the ledger records it. rf.flow sends and
-- reads the same, through the host's transport.
local rf = require "retryfreeze"
local h = require "spec.helper"
local servers = require "spec.support.servers"

-- perAttemptTimeoutMs = totalBudgetMs and a fixed backoff: each attempt's deadline header is the time left, so it
-- shrinks attempt by attempt by at least the backoff.
local LOCK = [[{
  "version": 1,
  "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 1000, "minAttemptMs": 50,
    "retryable": ["HTTP_503", "TIMEOUT"],
    "backoff": {"baseMs": 100, "multiplier": 1, "maxMs": 100, "jitter": "none"},
    "propagation": {}},
  "routes": [
    {"endpoint": "GET /fail"},
    {"endpoint": "GET /overloaded"},
    {"endpoint": "GET /named", "propagation": {"attemptHeader": "X-Try", "deadlineHeader": "X-Left",
      "overloadedHeader": "X-Shed", "inboundAttempt": false}},
    {"endpoint": "GET /plain"}
  ]}]]
-- The same lock without propagation in its defaults: its routes but /named send, read and tell nothing.
local PLAIN = LOCK:gsub(',%s*"propagation": {}', "")
assert(PLAIN ~= LOCK)

-- The lock's propagation names and the requests' own headers refuse the same list (RF_FRAMING_HEADERS, defined once):
-- Proxy-Connection, which the lock's own copy of the list lacked, included.
describe("propagation header names", function()
  it("refuse every framing header and Idempotency-Key, in any case", function()
    local names = { "idempotency-key" }
    for _, e in ipairs(h.x_macro("core/include/retryfreeze/vocabulary.h", "RF_FRAMING_HEADERS")) do
      names[#names + 1] = e[2]
    end
    for _, name in ipairs(names) do
      for _, key in ipairs({ "attemptHeader", "deadlineHeader", "overloadedHeader" }) do
        local lock = string.format('{"endpoint": "GET /x", "propagation": {"%s": "%s"}}', key, name:upper())
        local p, err = rf.load_string(lock, "framing.lock")
        assert.is_nil(p)
        assert.truthy(err:find('"' .. name .. '" is a header the client writes itself or that frames the message',
          1, true), err)
      end
    end
  end)
end)

if servers.missing("propagation against nginx", "nginx") then return end

describe("propagation on the wire", function()
  local ng, policy, fx, ledger_path, client

  setup(function()
    policy = assert(rf.load_string(LOCK, "64-propagation.lock"))
    local err
    ng, err = servers.nginx(1, function(ports, dir)
      return table.concat({
        "log_format prop '$uri|$http_x_envoy_attempt_count|$http_x_envoy_expected_rq_timeout_ms|$http_x_try|"
          .. "$http_x_left|$http_x_envoy_overloaded';",
        "server {",
        "  listen 127.0.0.1:" .. ports[1] .. ";",
        "  access_log " .. dir .. "/prop.log prop;",
        "  location = /fail { return 503 \"down\\n\"; }",
        "  location = /plain { return 503 \"down\\n\"; }",
        "  location = /overloaded { add_header x-envoy-overloaded true always; return 503 \"shed\\n\"; }",
        "  location = /named { add_header X-Shed 1 always; return 503 \"shed\\n\"; }",
        "}" }, "\n")
    end)
    assert(ng, err)
    fx = servers.ledgered_client(policy, ng.url, { ledger = { host = "" } })
    client, ledger_path = fx.client, fx.ledger_path
  end)

  teardown(function()
    if fx then fx.stop() end
    if ng then ng.stop() end
  end)

  -- The lines nginx logged since mark (a count), as {uri, attempt, deadline, try, left, overloaded}; nginx logs
  -- after the response, so wait (bounded) for want of them.
  local function logged(mark, want)
    h.poll(100, 0.02, function()
      local n = 0
      for _ in (h.try_read_file(ng.dir .. "/prop.log") or ""):gmatch("[^\n]+") do n = n + 1 end
      return n >= mark + want
    end)
    os.execute("sleep 0.05")
    local out = {}
    for line in (h.try_read_file(ng.dir .. "/prop.log") or ""):gmatch("[^\n]+") do out[#out + 1] = line end
    local since = {}
    for i = mark + 1, #out do
      local f = {}
      for part in (out[i] .. "|"):gmatch("([^|]*)|") do f[#f + 1] = part end
      since[#since + 1] = f
    end
    return since
  end
  -- The lines logged so far, once the count holds still for 50 ms: nginx logs a request after answering it, so the
  -- last request of a test may be logged a moment after its client returned.
  local function mark()
    local function count()
      local n = 0
      for _ in (h.try_read_file(ng.dir .. "/prop.log") or ""):gmatch("[^\n]+") do n = n + 1 end
      return n
    end
    local n = count()
    for _ = 1, 40 do
      os.execute("sleep 0.05")
      local now = count()
      if now == n then break end
      n = now
    end
    return n
  end
  local function last_record()
    local last
    for rec in rf.ledger.read(ledger_path) do last = rec end
    return last
  end

  it("sends each attempt its number and its deadline, shrinking and never above totalBudgetMs", function()
    local m = mark()
    local r = client:request{ method = "GET", path = "/fail" }
    assert.equal(3, r.attempts)
    assert.equal("max-attempts", r.reason)
    assert.is_true(r.overloaded) -- exhausted: a proxy tells its caller
    local seen = logged(m, 3)
    assert.equal(3, #seen)
    local before = math.huge
    for i, f in ipairs(seen) do
      assert.equal("/fail", f[1])
      assert.equal(tostring(i), f[2])
      local left = assert(math.tointeger(tonumber(f[3])), f[3])
      assert.is_true(left <= 1000, "deadline header " .. left .. " above totalBudgetMs")
      assert.is_true(left <= before - 100, "deadline header " .. left .. " did not shrink by the backoff")
      before = left
      assert.equal("-", f[6]) -- nothing tells the upstream it is overloaded
    end
    assert.is_true(tonumber(seen[1][3]) >= 900) -- the first attempt has (almost) the whole budget
  end)

  it("does not retry a 503 carrying x-envoy-overloaded (upstream-overloaded) and tells its caller", function()
    local m = mark()
    local r = client:request{ method = "GET", path = "/overloaded" }
    assert.equal(1, r.attempts)
    assert.equal("upstream-overloaded", r.reason)
    assert.equal("terminal", r.outcome)
    assert.is_true(r.overloaded)
    assert.equal(1, #logged(m, 1))
  end)

  it("sends and reads the header names the lock gives", function()
    local m = mark()
    local r = client:request{ method = "GET", path = "/named",
      inbound_headers = { ["x-try"] = "2", ["x-envoy-attempt-count"] = "5" } }
    assert.equal("upstream-overloaded", r.reason) -- X-Shed, the lock's overloaded header
    local seen = logged(m, 1)
    assert.same({ "/named", "-", "-", "1" }, { seen[1][1], seen[1][2], seen[1][3], seen[1][4] })
    assert.is_true(tonumber(seen[1][5]) <= 1000)
    assert.equal(2, r.inbound_attempt) -- read, but inboundAttempt is off on this route: no inbound-retry
  end)

  it("makes one attempt when the caller is already retrying (inbound attempt above 1), and records it", function()
    local m = mark()
    local r = client:request{ method = "GET", path = "/fail", inbound_headers = { ["X-Envoy-Attempt-Count"] = "2" } }
    assert.equal(1, r.attempts)
    assert.equal("inbound-retry", r.reason)
    assert.is_false(r.overloaded) -- the caller retries: nothing to tell
    assert.equal(1, #logged(m, 1))
    local rec = last_record()
    assert.equal(2, rec.inbound_attempt)
    assert.is_nil(rec.inbound_deadline_ms)
    -- attempt 1 from the caller is a first try: this layer retries as usual
    r = client:request{ method = "GET", path = "/fail", inbound_headers = { ["x-envoy-attempt-count"] = "1" } }
    assert.equal(3, r.attempts)
  end)

  it("narrows the deadline to the caller's, and a bad inbound value narrows nothing and is no error", function()
    local m = mark()
    -- 220 ms: a retry needs the 100 ms backoff and minAttemptMs 50 ms, which fit after the first 503 and not after
    -- the second (at 100 ms or later), far from either boundary
    local r = client:request{ method = "GET", path = "/fail",
      inbound_headers = { ["x-envoy-expected-rq-timeout-ms"] = "220" } }
    assert.equal("deadline", r.reason)
    assert.equal(2, r.attempts)
    local seen = logged(m, 2)
    local first, second = tonumber(seen[1][3]), tonumber(seen[2][3])
    -- the next layer gets what is left of the caller's deadline
    assert.is_true(first <= 220 and first >= 200, "first attempt's deadline " .. first)
    assert.is_true(second <= first - 100, "second attempt's deadline " .. second)
    assert.equal(220, last_record().inbound_deadline_ms)
    for _, bad in ipairs({ "abc", "-5", "2.5", "", "1e3", "99999999999999999999999", "9007199254740992",
                           " 300 ms", "0x10", "\xd9\xa3" }) do
      r = client:request{ method = "GET", path = "/fail", inbound_headers = { ["x-envoy-expected-rq-timeout-ms"] = bad } }
      assert.equal(3, r.attempts, bad)
      assert.is_nil(r.inbound_deadline_ms, bad)
    end
    for _, bad in ipairs({ "abc", "-5", "2.5", "", "0", "1e3", " 2 tries", "0x10" }) do
      r = client:request{ method = "GET", path = "/fail", inbound_headers = { ["x-envoy-attempt-count"] = bad } }
      assert.equal(3, r.attempts, bad)
      assert.is_nil(r.inbound_attempt, bad)
    end
    -- a huge attempt number still says the caller retries: it narrows
    r = client:request{ method = "GET", path = "/fail",
      inbound_headers = { ["x-envoy-attempt-count"] = "99999999999999999999999" } }
    assert.equal("inbound-retry", r.reason)
    -- repeated (as ngx.req.get_headers() gives them) or comma-joined: the narrowest counts
    r = client:request{ method = "GET", path = "/fail",
      inbound_headers = { ["x-envoy-expected-rq-timeout-ms"] = { "5000", "junk", "300" } } }
    assert.equal(300, r.inbound_deadline_ms)
    r = client:request{ method = "GET", path = "/fail", inbound_headers = { ["x-envoy-expected-rq-timeout-ms"] = "900, 200",
      ["x-envoy-attempt-count"] = { "1", "3" } } }
    assert.equal(200, r.inbound_deadline_ms)
    assert.equal(3, r.inbound_attempt)
    assert.equal("inbound-retry", r.reason)
    -- a deadline wider than the lock's changes nothing
    r = client:request{ method = "GET", path = "/fail", inbound_headers = { ["x-envoy-expected-rq-timeout-ms"] = "60000" } }
    assert.equal(3, r.attempts)
  end)

  it("a script's own mistake in inbound_headers raises, naming it", function()
    assert.has_error(function() client:request{ method = "GET", path = "/fail", inbound_headers = "x: 1" } end,
      "request.inbound_headers must be a table {name = value or {values}}, got string")
    assert.has_error(function() client:request{ method = "GET", path = "/fail", inbound_headers = { x = 1 } } end,
      "request.inbound_headers must map names to a string or an array of strings, got number for x")
  end)

  it("a route without propagation sends nothing and reads nothing", function()
    local p = assert(rf.load_string(PLAIN, "plain.lock"))
    local c = rf.client{ policy = p, base_url = ng.url, rng_seed = 1 }
    local m = mark()
    local r = c:request{ method = "GET", path = "/plain", inbound_headers = { ["x-envoy-attempt-count"] = "2",
      ["x-envoy-expected-rq-timeout-ms"] = "1" } }
    c:close()
    assert.equal(3, r.attempts)
    assert.is_false(r.overloaded)
    assert.is_nil(r.inbound_attempt)
    for _, f in ipairs(logged(m, 3)) do assert.same({ "-", "-" }, { f[2], f[3] }) end
  end)
end)

describe("propagation against a slow upstream", function()
  local fx, client

  setup(function()
    fx = servers.client_on_upstream(assert(rf.load_string(LOCK)), { stall_ms = 1000 }) -- 1 s to answer
    client = fx.client
  end)

  teardown(function()
    if fx then fx.stop() end
  end)

  it("ends within about the caller's 300 ms against a 1-second upstream", function()
    local t0 = rf.monotonic_ms()
    local r = client:request{ method = "GET", path = "/fail", headers = { ["X-Fault-Script"] = "timeout" },
      inbound_headers = { ["x-envoy-expected-rq-timeout-ms"] = "300" } }
    local took = rf.monotonic_ms() - t0
    assert.equal(1, r.attempts)
    assert.equal("timeout", r.tries[1].transport)
    assert.is_true(took >= 290 and took < 450, "took " .. took .. " ms")
    assert.is_true(r.tries[1].timeout_ms <= 300)
  end)
end)

describe("rf.flow with propagation", function()
  local policy = assert(rf.load_string(LOCK))

  -- A transport that answers from a list and keeps what each attempt sent; a clock that advances by the waits.
  local function run(request, answers)
    local sent, clock = {}, 1000
    local r = rf.flow(policy, request, {
      send = function(attempt)
        sent[#sent + 1] = attempt
        clock = clock + 10
        return table.remove(answers, 1)
      end,
      sleep = function(ms) clock = clock + ms end,
      now_ms = function() return clock end,
    })
    return r, sent
  end

  it("sends the attempt number and the time left, replacing the request's own", function()
    local r, sent = run({ method = "GET", path = "/fail", headers = { ["X-Envoy-Attempt-Count"] = "9" } },
      { { status = 503 }, { status = 503 }, { status = 503 } })
    assert.equal(3, #sent)
    assert.equal("max-attempts", r.reason)
    assert.is_true(r.overloaded)
    local before = math.huge
    for i, a in ipairs(sent) do
      assert.is_nil(a.headers["X-Envoy-Attempt-Count"])
      assert.equal(tostring(i), a.headers["x-envoy-attempt-count"])
      local left = tonumber(a.headers["x-envoy-expected-rq-timeout-ms"])
      assert.equal(a.timeout_ms, left)
      assert.is_true(left < before and left <= 1000)
      before = left
    end
    assert.same({ 1000, 890, 780 }, { tonumber(sent[1].headers["x-envoy-expected-rq-timeout-ms"]),
      tonumber(sent[2].headers["x-envoy-expected-rq-timeout-ms"]), tonumber(sent[3].headers["x-envoy-expected-rq-timeout-ms"]) })
  end)

  it("core.step says whether the route propagates; rf.flow without it passes the request's headers as they are",
    function()
    local core = require "retryfreeze.core"
    local plain = assert(rf.load_string(PLAIN))
    local function propagates(p, path)
      local step, says = core.step(p, { method = "GET", path = path }, {}, 0)
      assert.equal(step:propagation() ~= nil, says) -- true exactly when step:propagation() has headers to send
      step:finish("success", 0, 0)
      return says
    end
    assert.same({ true, true, true, false, false }, { propagates(policy, "/fail"), propagates(policy, "/plain"),
      propagates(plain, "/named"), propagates(plain, "/fail"), propagates(plain, "/nowhere") })
    local sent = {}
    local r = rf.flow(plain, { method = "GET", path = "/fail", headers = { ["X-Envoy-Attempt-Count"] = "9" } }, {
      send = function(attempt) sent[#sent + 1] = attempt; return { status = 503 } end,
      sleep = function() end, now_ms = function() return 0 end })
    assert.same({ 3, false }, { #sent, r.overloaded })
    for _, a in ipairs(sent) do
      assert.same({ ["X-Envoy-Attempt-Count"] = "9" }, a.headers)
    end
  end)

  it("does not retry a response carrying the overloaded header, whatever its value or case", function()
    local r, sent = run({ method = "GET", path = "/fail" },
      { { status = 503, headers = { ["X-Envoy-Overloaded"] = "" } }, { status = 503 } })
    assert.equal(1, #sent)
    assert.equal("upstream-overloaded", r.reason)
    assert.is_true(r.overloaded)
  end)

  it("reads the caller's headers as client:request does", function()
    local r, sent = run({ method = "GET", path = "/fail", inbound_headers = { ["x-envoy-attempt-count"] = { "2" },
      ["x-envoy-expected-rq-timeout-ms"] = "400" } }, { { status = 503 } })
    assert.equal(1, #sent)
    assert.equal("inbound-retry", r.reason)
    assert.equal(400, r.inbound_deadline_ms)
    assert.equal(2, r.inbound_attempt)
    assert.equal("400", sent[1].headers["x-envoy-expected-rq-timeout-ms"])
  end)

  it("a route without propagation sends no propagation header", function()
    local plain = assert(rf.load_string(PLAIN))
    local sent = {}
    local r = rf.flow(plain, { method = "GET", path = "/plain", inbound_headers = { ["x-envoy-attempt-count"] = "2" } }, {
      send = function(a) sent[#sent + 1] = a; return { status = 503 } end,
      sleep = function() end, now_ms = function() return 1000 end })
    assert.equal(3, #sent)
    assert.is_false(r.overloaded)
    for _, a in ipairs(sent) do
      assert.is_nil(a.headers["x-envoy-attempt-count"])
      assert.is_nil(a.headers["x-envoy-expected-rq-timeout-ms"])
    end
  end)
end)
