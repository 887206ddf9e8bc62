local rf = require "retryfreeze"
local h = require "spec.helper"

describe("policy:decide", function()
  local desk = assert(rf.load(h.desk_lock))

  it("retries a keyed gateway 504 once, then stops on max-attempts", function()
    local v = desk:decide({ method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1",
      attempts = 1, elapsed_ms = 300 }, rf.rng(1))
    assert.is_true(v.retry)
    assert.equal("pinned-status", v.reason)
    assert.equal("HTTP_504", v.class)
    assert.equal(2000, v.timeout_ms)
    assert.is_true(v.delay_ms >= 0 and v.delay_ms <= 100)
    assert.equal("POST /v1/jobs", v.route)
    v = desk:decide({ method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1", attempts = 2 })
    assert.same({ retry = false, reason = "max-attempts", class = "HTTP_504", delay_ms = 0, timeout_ms = 0,
      retry_after = "absent", route = "POST /v1/jobs" }, v)
  end)

  it("returns a new table holding only the verdict, with or without an rng and out, and touches nothing else", function()
    local mt_keys = {}
    for k in pairs(debug.getmetatable(desk)) do mt_keys[#mt_keys + 1] = k end
    table.sort(mt_keys)
    local facts = { method = "POST", path = "/v1/jobs", status = 500, idempotency_key = "k1" }
    local want = { retry = false, reason = "status-not-retryable", class = "HTTP_500", delay_ms = 0, timeout_ms = 0,
      retry_after = "absent", route = "POST /v1/jobs" }
    local a, b = desk:decide(facts), desk:decide(facts, rf.rng(1))
    assert.same(want, a)
    assert.same(want, b)
    assert.are_not.equal(a, b)
    assert.same(want, desk:decide(facts, nil, nil))
    local out = { stale = true }
    assert.equal(out, desk:decide(facts, rf.rng(1), out))
    want.stale = true
    assert.same(want, out)
    assert.same({ method = "POST", path = "/v1/jobs", status = 500, idempotency_key = "k1" }, facts)
    local after = {}
    for k in pairs(debug.getmetatable(desk)) do after[#after + 1] = k end
    table.sort(after)
    assert.same(mt_keys, after)
  end)

  it("never retries a handler 500 or a POST without a key", function()
    assert.equal("status-not-retryable", desk:decide({ method = "POST", path = "/v1/jobs", status = 500 }).reason)
    assert.equal("mutating-without-idempotency",
      desk:decide({ method = "POST", path = "/v1/jobs", transport = "timeout", elapsed_ms = 2000 }).reason)
  end)

  it("honors Retry-After in seconds and says when it ignored an invalid one", function()
    local v = desk:decide({ method = "POST", path = "/v1/jobs", status = 429, retry_after = "1",
      idempotency_key = "k", elapsed_ms = 100 })
    assert.equal(1000, v.delay_ms)
    assert.equal(1400, v.timeout_ms)
    assert.equal("honored", v.retry_after)
    v = desk:decide({ method = "POST", path = "/v1/jobs", status = 429, retry_after = "1.5", idempotency_key = "k" },
      rf.rng(3))
    assert.is_true(v.retry)
    assert.equal("ignored-invalid", v.retry_after)
    v = desk:decide({ method = "POST", path = "/v1/jobs", status = 429, retry_after = "9999", idempotency_key = "k" })
    assert.equal("retry-after-exceeds-budget", v.reason)
  end)

  it("gives the same verdict for the same seed and facts", function()
    local facts = { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k" }
    local a, b = rf.rng(77), rf.rng(77)
    for _ = 1, 20 do
      assert.same(desk:decide(facts, a), desk:decide(facts, b))
    end
  end)

  it("refuses unknown fact keys, naming them (the engine never reads a body)", function()
    for _, key in ipairs({ "body", "prompt", "headers", "Status" }) do
      local facts = { method = "POST", path = "/v1/jobs", status = 503 }
      facts[key] = "x"
      assert.has_error(function() desk:decide(facts) end)
      local ok, err = pcall(desk.decide, desk, facts)
      assert.is_false(ok)
      assert.matches("unknown fact '" .. key .. "'", err, 1, true)
    end
  end)

  it("refuses ill-typed facts with the key and the rule", function()
    local ok, err = pcall(desk.decide, desk, { method = "POST", path = "/v1/jobs", status = "503" })
    assert.is_false(ok)
    assert.matches("facts.status must be an integer, got string", err, 1, true)
    ok, err = pcall(desk.decide, desk, { method = "POST", path = "/v1/jobs", status = 700 })
    assert.is_false(ok)
    assert.matches("facts.status must be 0 (none received) or 100..599, got 700", err, 1, true)
    ok, err = pcall(desk.decide, desk, { method = "POST", path = "/v1/jobs", status = 42 })
    assert.is_false(ok)
    assert.matches("facts.status must be 0 (none received) or 100..599, got 42", err, 1, true)
    ok, err = pcall(desk.decide, desk, { method = "POST", path = "/v1/jobs", transport = "boom" })
    assert.is_false(ok)
    assert.matches("facts.transport must be one of", err, 1, true)
    ok, err = pcall(desk.decide, desk, { path = "/v1/jobs" })
    assert.is_false(ok)
    assert.matches("facts.method is required", err, 1, true)
    ok, err = pcall(desk.decide, desk, { method = "POST", path = "/v1/jobs", attempts = 0 })
    assert.is_false(ok)
    assert.matches("facts.attempts must be in 1..", err, 1, true)
  end)

  -- An empty source was taken as absent, and the attempt retried, although only an absent source or
  -- "pinned-map" is a pinned one.
  it("decides unpinned-source for any source but an absent one or exactly pinned-map, the empty one included",
    function()
      local facts = { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k1" }
      assert.equal("pinned-status", desk:decide(facts, rf.rng(1)).reason)
      for _, source in ipairs({ "", " ", "pinned-map ", " pinned-map", "Pinned-Map", "pinned", "pinned-map\0",
        "pinned-mapx" }) do
        facts.source = source
        local v = desk:decide(facts, rf.rng(1))
        -- the route the facts matched, which did not decide, is named (it was omitted)
        assert.same({ false, "unpinned-source", "POST /v1/jobs" }, { v.retry, v.reason, v.route },
          string.format("%q", source))
      end
      facts.source = "pinned-map"
      assert.equal("pinned-status", desk:decide(facts, rf.rng(1)).reason)
      for _, source in ipairs({ true, false, 0, {} }) do
        facts.source = source
        local ok, err = pcall(desk.decide, desk, facts)
        assert.is_false(ok)
        assert.matches("facts.source must be a string, got " .. type(source), err, 1, true)
      end
    end)

  -- The other optional string facts, each empty: every one fails closed or decides as if absent where the
  -- two cannot differ (docs/lua.md, Facts).
  it("fails closed on the other empty string facts", function()
    local base = { method = "POST", path = "/v1/jobs", status = 429, idempotency_key = "k1", elapsed_ms = 100 }
    local function with(k, v)
      local t = {}
      for key, value in pairs(base) do t[key] = value end
      t[k] = v
      return t
    end
    -- method and path: required, so empty is refused
    local ok, err = pcall(desk.decide, desk, with("method", ""))
    assert.is_false(ok)
    assert.matches("method is required", err, 1, true)
    ok, err = pcall(desk.decide, desk, with("path", ""))
    assert.is_false(ok)
    assert.matches("path is required", err, 1, true)
    -- an empty idempotency key is no key: a POST is not retried
    local v = desk:decide(with("idempotency_key", ""), rf.rng(1))
    assert.same({ false, "mutating-without-idempotency" }, { v.retry, v.reason })
    -- an empty Retry-After asks for no wait, as only spaces do: the backoff, exactly as without one
    local absent = desk:decide(base, rf.rng(1))
    for _, ra in ipairs({ "", "  " }) do
      v = desk:decide(with("retry_after", ra), rf.rng(1))
      assert.same({ true, "pinned-status", absent.delay_ms, "absent" }, { v.retry, v.reason, v.delay_ms, v.retry_after })
    end
    -- an empty Date is no reference: an HTTP-date Retry-After is measured against now_ms, as with none
    local ra = { retry_after = "Wed, 21 Oct 2015 07:28:01 GMT", now_ms = 1445412480000 } -- 07:28:00
    for _, date in ipairs({ "", "garbage" }) do
      local facts = with("date", date)
      facts.retry_after, facts.now_ms = ra.retry_after, ra.now_ms
      v = desk:decide(facts, rf.rng(1))
      assert.same({ true, 1000 }, { v.retry, v.delay_ms }, date)
    end
  end)

  it("decides no-route for a request no route matches", function()
    local v = desk:decide({ method = "GET", path = "/v1/jobs", status = 503 })
    assert.equal("no-route", v.reason)
    assert.is_nil(v.route)
  end)
end)

-- A lowercase method was decided as a silent no-route.
describe("a lowercase method", function()
  local policy = assert(rf.load(h.desk_lock))
  it("is refused with the reason, not decided as no-route", function()
    local why = "method must be uppercase, got \"get\": methods are case-sensitive (RFC 9110 §9.1) and a "
      .. "lock's routes name them in uppercase, so no route could match"
    local ok, err = pcall(policy.decide, policy, { method = "get", path = "/v1/jobs", status = 503 })
    assert.is_false(ok)
    assert.matches("(facts." .. why .. ")", err, 1, true)
    ok, err = pcall(policy.budget, policy, { method = "Post", path = "/v1/jobs" })
    assert.is_false(ok)
    assert.matches('method must be uppercase, got "Post"', err, 1, true)
    local _, cli_err, code = h.run_cli("decide", h.desk_lock, "--method", "get", "--path", "/v1/jobs")
    assert.equal(2, code)
    assert.equal("retryfreeze decide: --" .. why .. "\n", cli_err)
  end)

  -- Its siblings: the client read an uninitialized reason (a garbage outcome such as unpinned-source), and rf.flow
  -- (rf_step_init) stopped with a silent no-route. Both are refused before any attempt, with the engine's words.
  it("is refused by client:request and rf.flow before any attempt", function()
    local why = 'method must be uppercase, got "post": methods are case-sensitive (RFC 9110 §9.1)'
    local client = rf.client({ policy = policy, base_url = "http://127.0.0.1:9" })
    local ok, err = pcall(client.request, client, { method = "post", path = "/v1/jobs" })
    client:close()
    assert.is_false(ok)
    assert.matches("client:request: " .. why, err, 1, true)
    local sent = 0
    ok, err = pcall(rf.flow, policy, { method = "post", path = "/v1/jobs" }, {
      send = function() sent = sent + 1; return { status = 200 } end,
      sleep = function() end,
      now_ms = function() return 0 end,
    })
    assert.is_false(ok)
    assert.matches("rf.flow: request." .. why, err, 1, true)
    assert.equal(0, sent)
  end)
end)

describe("policy:budget and policy:classify", function()
  local desk = assert(rf.load(h.desk_lock))

  it("gives the desk's attempt budget", function()
    assert.same({ allowed = true, timeout_ms = 2000, reason = "within-budget", route = "POST /v1/jobs" },
      desk:budget({ method = "POST", path = "/v1/jobs", attempts = 0, elapsed_ms = 0 }))
    assert.equal(500, desk:budget({ method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 2000 }).timeout_ms)
    assert.same({ allowed = false, timeout_ms = 0, reason = "max-attempts", route = "POST /v1/jobs" },
      desk:budget({ method = "POST", path = "/v1/jobs", attempts = 2, elapsed_ms = 2100 }))
  end)

  it("classifies status and transport", function()
    assert.equal("HTTP_503", desk:classify({ status = 503 }))
    assert.equal("TIMEOUT", desk:classify({ transport = "timeout" }))
    assert.equal("CONNECT_RESET", desk:classify({ transport = "got-nothing" }))
    assert.has_error(function() desk:classify({ body = "x" }) end)
  end)
end)

describe("rf.parse_retry_after", function()
  it("parses delay-seconds and HTTP-dates, uncapped", function()
    assert.equal(3000, rf.parse_retry_after("3"))
    assert.equal(9999000, rf.parse_retry_after("9999"))
    assert.equal(2000, rf.parse_retry_after("Sun, 06 Nov 1994 08:49:39 GMT", 1, "Sun, 06 Nov 1994 08:49:37 GMT"))
    assert.equal(2000, rf.parse_retry_after("Sunday, 06-Nov-94 08:49:39 GMT", 784111777000))
    assert.equal(2000, rf.parse_retry_after("Sun Nov  6 08:49:39 1994", 784111777000))
  end)

  it("returns nil and why for invalid values", function()
    assert.same({ nil, "invalid" }, { rf.parse_retry_after("-1") })
    assert.same({ nil, "invalid" }, { rf.parse_retry_after("1.5") })
    assert.same({ nil, "too-long" }, { rf.parse_retry_after("99999999999999999999999") })
    assert.same({ nil, "absent" }, { rf.parse_retry_after("") })
  end)
end)

describe("rf.parse_wait_header", function()
  it("parses each wait header by its own rule", function()
    assert.equal(250, rf.parse_wait_header("retry-after-ms", "250"))
    assert.equal(250, rf.parse_wait_header("x-ms-retry-after-ms", " 250 "))
    assert.equal(50000, rf.parse_wait_header("ratelimit-reset", "50"))
    assert.equal(30000, rf.parse_wait_header("ratelimit", '"default";r=0;t=30'))
    assert.equal(60000, rf.parse_wait_header("x-ratelimit-reset", "1700000060", 1700000000000))
    assert.equal(0, rf.parse_wait_header("x-ratelimit-reset", "1600000000", 1700000000000))
    assert.equal(80, rf.parse_wait_header("grpc-retry-pushback-ms", "80"))
    assert.equal(120000, rf.parse_wait_header("retry-after", "120"))
  end)

  it("returns nil and why: absent, invalid, too-long, stop", function()
    assert.same({ nil, "absent" }, { rf.parse_wait_header("ratelimit", '"default";r=50;t=30') })
    assert.same({ nil, "invalid" }, { rf.parse_wait_header("retry-after-ms", "1.5") })
    assert.same({ nil, "too-long" }, { rf.parse_wait_header("retry-after-ms", "9223372036854775808") })
    assert.same({ nil, "stop" }, { rf.parse_wait_header("grpc-retry-pushback-ms", "-1") })
    assert.has_error(function() rf.parse_wait_header("Retry-After-Ms", "1") end,
      "bad argument #1 to 'parse_wait_header' (unknown wait header 'Retry-After-Ms')")
  end)
end)

describe("facts.hints", function()
  local p = assert(rf.load_string([[{"endpoint": "GET /x", "maxAttempts": 3, "perAttemptTimeoutMs": 1000,
    "totalBudgetMs": 60000, "retryable": ["HTTP_429"],
    "retryAfter": {"headers": ["grpc-retry-pushback-ms", "retry-after-ms", "retry-after"]}}]]))

  -- A present but empty pushback was read as absent, and the attempt retried with the backoff: gRPC A6 reads a
  -- pushback that is no integer as "do not retry", and an empty one is no integer.
  it("stop on a present but empty grpc-retry-pushback-ms; an empty other header asks for no wait", function()
    for _, value in ipairs({ "", "  " }) do
      local v = p:decide({ method = "GET", path = "/x", status = 429, hints = { ["grpc-retry-pushback-ms"] = value,
        ["retry-after-ms"] = "250" } })
      assert.same({ false, "server-pushback", "grpc-retry-pushback-ms" }, { v.retry, v.reason, v.retry_after_header })
      assert.same({ nil, "stop" }, { rf.parse_wait_header("grpc-retry-pushback-ms", value) })
      v = p:decide({ method = "GET", path = "/x", status = 429, hints = { ["retry-after-ms"] = value,
        ["retry-after"] = "2" } }, rf.rng(1))
      assert.same({ true, 2000, "retry-after" }, { v.retry, v.delay_ms, v.retry_after_header })
    end
  end)

  it("record an empty pushback a flow met as sent: the try and the ledger line keep its empty value", function()
    local path = os.tmpname()
    local ledger = assert(rf.ledger.open(path))
    local clock = 0
    local r = rf.flow(p, { method = "GET", path = "/x" }, {
      send = function() clock = clock + 5; return { status = 429, headers = { ["grpc-retry-pushback-ms"] = "" } } end,
      sleep = function(ms) clock = clock + ms end,
      now_ms = function() return clock end,
      ledger = ledger,
    })
    ledger:close()
    assert.same({ "terminal", "server-pushback", 1 }, { r.outcome, r.reason, r.attempts })
    assert.same({ "", "grpc-retry-pushback-ms" }, { r.tries[1].retry_after, r.tries[1].retry_after_header })
    local it, st = rf.ledger.read(path)
    local rec = it(st)
    local stats = assert(rf.ledger.stats(path))
    os.remove(path)
    assert.same({ "", "grpc-retry-pushback-ms" }, { rec.tries[1].retry_after, rec.tries[1].retry_after_header })
    assert.same({ honored = 1 }, stats.retry_after) -- the stop obeyed the server's (empty) pushback
  end)

  it("are read in the route's order; the verdict names the header used", function()
    local v = p:decide({ method = "GET", path = "/x", status = 429,
      hints = { ["retry-after-ms"] = "250", ["retry-after"] = "3" } })
    assert.same({ true, 250, "honored", "retry-after-ms" }, { v.retry, v.delay_ms, v.retry_after, v.retry_after_header })
    v = p:decide({ method = "GET", path = "/x", status = 429, retry_after = "3" })
    assert.same({ 3000, "retry-after" }, { v.delay_ms, v.retry_after_header })
    v = p:decide({ method = "GET", path = "/x", status = 429, hints = { ["grpc-retry-pushback-ms"] = "x" } })
    assert.same({ false, "server-pushback" }, { v.retry, v.reason })
    v = p:decide({ method = "GET", path = "/x", status = 429 })
    assert.is_nil(v.retry_after_header)
  end)

  it("raise on a name that is no wait header, a name the route does not read, a non-string, twice", function()
    assert.has_error(function() p:decide({ method = "GET", path = "/x", hints = { ["Retry-After-Ms"] = "1" } }) end)
    assert.has_error(function() p:decide({ method = "GET", path = "/x", hints = { ["x-wait"] = "1" } }) end)
    local ok, err = pcall(p.decide, p, { method = "GET", path = "/x", hints = { ratelimit = '"a";r=0;t=1' } })
    assert.is_false(ok)
    assert.matches('facts.hints the route "GET /x" does not read ratelimit', err, 1, true)
    assert.has_error(function() p:decide({ method = "GET", path = "/x", hints = { ["retry-after-ms"] = 250 } }) end)
    assert.has_error(function() p:decide({ method = "GET", path = "/x", hints = "retry-after-ms=1" }) end)
    ok, err = pcall(p.decide, p, { method = "GET", path = "/x", retry_after = "1", hints = { ["retry-after"] = "2" } })
    assert.is_false(ok)
    assert.matches("facts.hints.retry-after is given twice", err, 1, true)
  end)
end)

-- Every fact a decider takes, across outcomes: each must give decide's verdict, delays drawn from the same seed.
local VALUE_CASES = {
  { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k", attempts = 1, elapsed_ms = 100 },
  { method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k", attempts = 3, elapsed_ms = 100 },
  { method = "POST", path = "/v1/jobs", status = 500, idempotency_key = "k" },
  { method = "POST", path = "/v1/jobs", status = 429, retry_after = "1", idempotency_key = "k", now_ms = 784111777000 },
  { method = "POST", path = "/v1/jobs", status = 503, retry_after = "Sun, 06 Nov 1994 08:49:39 GMT",
    date = "Sun, 06 Nov 1994 08:49:37 GMT", idempotency_key = "k", now_ms = 784111777000 },
  { method = "POST", path = "/v1/jobs", status = 503, retry_after = "86400", idempotency_key = "k", now_ms = 1 },
  { method = "POST", path = "/v1/jobs", transport = "timeout", attempts = 1, elapsed_ms = 2000 },
  { method = "POST", path = "/v1/jobs", transport = "connect-refused", status = 0, elapsed_ms = 5 },
  { method = "POST", path = "/v1/jobs", status = 503, idempotency_key = "k", elapsed_ms = 99999 },
  { method = "POST", path = "/v1/jobs", status = 200 },
  { method = "GET", path = "/v1/jobs", status = 503 },
  { method = "POST", path = "/v1/jobs", status = 0, idempotency_key = "k" }, -- ok with no status: UNKNOWN
}
-- Every transport outcome, with and without a status: the class the values give is decide's (a transport's
-- class whatever the status, HTTP_<status> only for ok).
for _, t in ipairs(rf.transports) do
  VALUE_CASES[#VALUE_CASES + 1] = { method = "POST", path = "/v1/jobs", transport = t, idempotency_key = "k" }
  VALUE_CASES[#VALUE_CASES + 1] = { method = "POST", path = "/v1/jobs", transport = t, status = 502 }
end

describe("policy:decider", function()
  local desk = assert(rf.load(h.desk_lock))
  local service = assert(rf.load("examples/service.lock.json"))
  local cases = { { method = "DELETE", path = "/nowhere", status = 503 } } -- and every case above
  for _, f in ipairs(VALUE_CASES) do cases[#cases + 1] = f end

  it("gives decide's verdict for every attempt of the request it was made for", function()
    for _, p in ipairs({ desk, service }) do
      for i, f in ipairs(cases) do
        local want = p:decide(f, rf.rng(i))
        local decide = p:decider(f.method, f.path, f.idempotency_key ~= nil, rf.rng(i))
        local retry, reason, delay_ms, timeout_ms, class = decide(f.status or 0, f.transport, f.attempts,
          f.elapsed_ms, f.retry_after, f.date, f.now_ms)
        assert.same({ want.retry, want.reason, want.delay_ms, want.timeout_ms, want.class },
          { retry, reason, delay_ms, timeout_ms, class }, "case " .. i)
      end
    end
  end)

  it("draws its jitter from the rng it was given, call after call, as decide does", function()
    local decide, rng = desk:decider("POST", "/v1/jobs", true, rf.rng(9)), rf.rng(9)
    for attempt = 1, 3 do
      local want = desk:decide({ method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k",
        attempts = attempt, elapsed_ms = 10 }, rng)
      local retry, reason, delay_ms = decide(504, nil, attempt, 10)
      assert.same({ want.retry, want.reason, want.delay_ms }, { retry, reason, delay_ms }, "attempt " .. attempt)
    end
  end)

  it("raises naming the argument, when made and when called", function()
    local function made(...)
      local ok, e = pcall(desk.decider, desk, ...)
      assert.is_false(ok)
      return e
    end
    assert.matches("#2 .*method must be a string", made(nil, "/v1/jobs", true))
    assert.matches("#3 .*path must be a string", made("POST", 7, true))
    assert.matches("#4 .*has_key must be a boolean", made("POST", "/v1/jobs", "k"))
    assert.matches("#5 .*retryfreeze.Rng expected", made("POST", "/v1/jobs", true, {}))
    assert.matches("method must be uppercase", made("post", "/v1/jobs", true))
    assert.matches("retryfreeze.Policy expected", select(2, pcall(desk.decider, {}, "POST", "/x", true)))
    local decide = desk:decider("POST", "/v1/jobs", true)
    local function called(...)
      local ok, e = pcall(decide, ...)
      assert.is_false(ok)
      return e
    end
    -- The same readers as policy:decide's facts table: the same words, the argument named as the fact it is.
    assert.matches("#1 .*status must be an integer, got nil", called(nil, nil, 1, 0))
    assert.matches("#1 .*status must be 0 %(none received%) or 100..599, got 42", called(42, nil, 1, 0))
    assert.matches("#1 .*status must be 0 %(none received%) or 100..599, got 600", called(600, nil, 1, 0))
    assert.matches("#1 .*status must be an integer, got string", called("503", nil, 1, 0))
    assert.matches("#2 .*transport must be one of ok, timeout, .*; got 'bogus'", called(0, "bogus", 1, 0))
    assert.matches("#2 .*transport must be a string, got number", called(0, 5, 1, 0))
    assert.matches("#3 .*attempts must be in 1..1000000, got 0", called(503, nil, 0, 0))
    assert.matches("#4 .*elapsed_ms must be an integer", called(503, nil, 1, 1.5))
    assert.matches("#5 .*retry_after must be a string, got number", called(503, nil, 1, 0, 5))
    assert.matches("#6 .*date must be a string, got boolean", called(503, nil, 1, 0, "1", true))
    assert.matches("#7 .*now_ms must be an integer", called(503, nil, 1, 0, "1", nil, "x"))
    -- Each message is the facts table's, without "facts.": one reader per fact.
    for _, c in ipairs({ { { status = 42 }, { 42, nil, 1, 0 } }, { { transport = "bogus" }, { 0, "bogus", 1, 0 } },
      { { attempts = 0 }, { 503, nil, 0, 0 } }, { { retry_after = 5 }, { 503, nil, 1, 0, 5 } } }) do
      local facts = { method = "POST", path = "/v1/jobs", status = 503 }
      for k, v in pairs(c[1]) do facts[k] = v end
      local table_err = select(2, pcall(desk.decide, desk, facts)):match("%(facts%.(.*)%)$")
      local arg_err = called(table.unpack(c[2], 1, 7)):match("%((.*)%)$")
      assert.equal(table_err, arg_err)
    end
  end)

  it("keeps its policy and rng alive when the script drops them", function()
    local decide
    do
      local p = assert(rf.load(h.desk_lock))
      decide = p:decider("POST", "/v1/jobs", true, rf.rng(3))
    end
    collectgarbage()
    collectgarbage()
    local want = desk:decide({ method = "POST", path = "/v1/jobs", status = 504, idempotency_key = "k" }, rf.rng(3))
    local retry, reason, delay_ms = decide(504, nil, 1, 0)
    assert.same({ want.retry, want.reason, want.delay_ms }, { retry, reason, delay_ms })
  end)

  it("refuses once its state was finalized by hand, instead of reading freed memory", function()
    local decide = desk:decider("POST", "/v1/jobs", true)
    local state = select(2, debug.getupvalue(decide, 1))
    if state == nil then return end -- Lua 5.1 and LuaJIT: debug.getupvalue does not reach a C function's upvalues
    debug.getmetatable(state).__gc(state)
    assert.error_matches(function() decide(504, nil, 1, 0) end, "decider is closed")
    debug.getmetatable(state).__gc(state) -- twice: still harmless
  end)
end)

-- docs/porting.md: seed 001 counts attempts from 0 (its maxAttempts M allows M + 1 tries). Its tests port with
-- maxAttempts M + 1 and attempts a + 1; then exactly the rows the seed retried retry, for every M the lock takes.
describe("docs/porting.md's attempt arithmetic", function()
  it("ports every seed 001 (maxAttempts M, attempts a) to (M + 1, a + 1) with the same verdict", function()
    local cases = 0
    for m = 1, 9 do
      local policy = assert(rf.load_string(string.format('{"endpoint": "GET /x", "maxAttempts": %d, '
        .. '"perAttemptTimeoutMs": 1000, "totalBudgetMs": 600000, "retryable": ["HTTP_503"], '
        .. '"backoff": {"baseMs": 1, "maxMs": 1, "jitter": "none"}}', m + 1)))
      for a = 0, m + 1 do
        local seed_retries = a < m
        local v = policy:decide({ method = "GET", path = "/x", status = 503, attempts = a + 1 })
        assert.equal(seed_retries, v.retry, string.format("seed maxAttempts %d, attempts %d", m, a))
        assert.equal(seed_retries and "pinned-status" or "max-attempts", v.reason)
        cases = cases + 1
      end
    end
    assert.equal(63, cases) -- the sum over M = 1..9 of its M + 2 cases (a = 0..M + 1)
  end)
end)
