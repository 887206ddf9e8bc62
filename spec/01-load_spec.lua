local rf = require "retryfreeze"
local h = require "spec.helper"

local minimal = [[{"endpoint":"GET /a","maxAttempts":3,"perAttemptTimeoutMs":1000,"totalBudgetMs":5000,
  "retryable":["HTTP_503"]}]]

describe("rf.load", function()
  it("loads the desk's flat lock unchanged, with defaults applied", function()
    local policy = assert(rf.load(h.desk_lock))
    assert.matches("^sha256:%x+$", policy.digest)
    assert.equal(71, #policy.digest)
    local routes = policy:routes()
    assert.equal(1, #routes)
    local r = routes[1]
    assert.equal("POST /v1/jobs", r.endpoint)
    assert.equal(2, r.max_attempts)
    assert.equal(2000, r.per_attempt_timeout_ms)
    assert.equal(2500, r.total_budget_ms)
    assert.equal(200, r.min_attempt_ms)
    assert.same({ "HTTP_429", "HTTP_504", "TIMEOUT", "CONNECT_RESET" }, r.retryable)
    assert.same({ "HTTP_400", "HTTP_401", "HTTP_403", "HTTP_404", "HTTP_422", "HTTP_5XX" }, r.not_retryable)
    assert.same({ "DELETE", "PATCH", "POST" }, r.idempotency_required)
    assert.same({ base_ms = 100, multiplier = 2.0, max_ms = 10000, jitter = "full" }, r.backoff)
    assert.same({ honor = true, max_ms = 120000, headers = { "retry-after" } }, r.retry_after)
    assert.same({}, r.class_limits)
  end)

  it("returns nil and a message naming the file, JSON path, rule and value", function()
    local path = h.temp_file([[{"endpoint":"GET /a","maxAttempts":11,"perAttemptTimeoutMs":1000,
      "totalBudgetMs":5000,"retryable":[]}]])
    local policy, err = rf.load(path)
    os.remove(path)
    assert.is_nil(policy)
    assert.equal(path .. ": $.maxAttempts: must be an integer from 1 to 10, got 11", err)
  end)

  it("reports a missing file as nil, message", function()
    local policy, err = rf.load("/nonexistent/x.lock.json")
    assert.is_nil(policy)
    assert.matches("No such file", err)
  end)

  it("reports malformed JSON with line and column", function()
    local policy, err = rf.load_string('{\n "endpoint": "GET /a",\n "maxAttempts": ,\n}', "inline.lock.json")
    assert.is_nil(policy)
    assert.matches("^inline%.lock%.json: %$: malformed JSON near byte %d+ %(line 3, column %d+%)$", err)
  end)

  it("refuses duplicate keys and unknown keys", function()
    local _, err = rf.load_string('{"endpoint":"GET /a","endpoint":"GET /b","maxAttempts":3,'
      .. '"perAttemptTimeoutMs":1000,"totalBudgetMs":5000,"retryable":[]}')
    assert.equal('lock: $.endpoint: duplicate key "endpoint" in one object (a JSON object\'s keys must be unique)', err)
    _, err = rf.load_string((minimal:gsub("}$", ',"body":"x"}')))
    assert.matches('^lock: %$%.body: unknown key "body"', err)
  end)

  it("pins a digest: a lock whose digest differs is refused, naming both", function()
    local policy = assert(rf.load(h.desk_lock))
    assert.equal(policy.digest, rf.load(h.desk_lock, { pin = policy.digest }).digest)
    local other = "sha256:" .. string.rep("0", 64)
    local p2, err = rf.load(h.desk_lock, { pin = other })
    assert.is_nil(p2)
    assert.equal(h.desk_lock .. ": digest " .. policy.digest .. " does not match the pinned " .. other, err)
    assert.has_error(function() rf.load(h.desk_lock, { pin = "md5:1" }) end)
  end)

  it("gives the same digest for whitespace, key order and $comment changes", function()
    local a = assert(rf.load_string(minimal))
    local b = assert(rf.load_string('{ "$comment": "hello", "retryable": ["HTTP_503"], "totalBudgetMs": 5000,\n'
      .. '"perAttemptTimeoutMs": 1000, "maxAttempts": 3, "endpoint": "GET /a" }'))
    assert.equal(a.digest, b.digest)
    local c = assert(rf.load_string((minimal:gsub('"maxAttempts":3', '"maxAttempts":4'))))
    assert.not_equal(a.digest, c.digest)
  end)

  it("raises on a non-string argument (a programmer error)", function()
    assert.has_error(function() rf.load(42) end, "bad argument #1 to 'load' (string expected, got number)")
    assert.has_error(function() rf.load_string(nil) end, "bad argument #1 to 'load_string' (string expected, got nil)")
  end)

  it("exposes VERSION and the vocabulary", function()
    assert.matches("^%d+%.%d+%.%d+$", rf.VERSION)
    assert.same({ "unpinned-source", "no-route", "success", "hedge-fatal", "max-attempts", "class-limit",
      "status-not-retryable", "upstream-overloaded", "inbound-retry", "mutating-without-idempotency", "server-pushback",
      "retry-after-exceeds-budget", "deadline", "retry-throttled", "stopped-by-caller", "pinned-status",
      "within-budget", "transparent-retry", "redirect" }, rf.reasons)
    assert.same({ "ok", "timeout", "connect-reset", "connect-refused", "dns", "tls", "got-nothing", "other",
      "proxy-refused", "too-many-redirects" }, rf.transports)
    assert.same({ "retry-after", "retry-after-ms", "x-ms-retry-after-ms", "ratelimit-reset", "ratelimit",
      "x-ratelimit-reset", "grpc-retry-pushback-ms" }, rf.wait_headers)
  end)
end)
