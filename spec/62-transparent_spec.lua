-- Retries that never left: a keyless POST refused at connect time, or failing its TLS handshake,
-- is retried without an idempotency key (reason transparent-retry), still counting as attempts under the
-- deadline and the retry budget; a POST that reached the server and lost its connection (nginx `return 444`)
-- is not. The lock's transparentRetry: false turns it off. And per-request deadline_ms / timeout_ms, which
-- may only narrow the lock.
local rf = require "retryfreeze"
local h = require "spec.helper"
local servers = require "spec.support.servers"
local stall = require "spec.support.stall"

local LOCK = [[
{
  "version": 1,
  "defaults": {
    "maxAttempts": 3, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 4000, "minAttemptMs": 0,
    "retryable": ["CONNECT_REFUSED", "CONNECT_RESET", "TLS_FAILURE", "DNS_FAILURE", "TIMEOUT"],
    "backoff": {"baseMs": 50, "multiplier": 2, "maxMs": 200, "jitter": "none"}
  },
  "routes": [
    {"endpoint": "POST /jobs"},
    {"endpoint": "POST /drop"},
    {"endpoint": "POST /slow", "totalBudgetMs": 700, "perAttemptTimeoutMs": 500, "minAttemptMs": 100,
     "backoff": {"baseMs": 400, "multiplier": 1, "maxMs": 400, "jitter": "none"}},
    {"endpoint": "GET /ok"},
    {"endpoint": "POST /tls", "perAttemptTimeoutMs": 10000, "totalBudgetMs": 30000}
  ]
}
]]

local function lock_with(extra)
  return (LOCK:gsub('"version": 1,', '"version": 1, ' .. extra .. ','))
end

describe("transparent retries (requests that never left)", function()
  local policy

  setup(function() policy = assert(rf.load_string(LOCK, "62.lock")) end)

  local function post(p, base, path, opts)
    local c = rf.client{ policy = p, base_url = base, rng_seed = 1, retry_budget = opts and opts.retry_budget }
    local req = { method = "POST", path = path, body = "{}" }
    for k, v in pairs(opts and opts.request or {}) do req[k] = v end
    local r = c:request(req)
    c:close()
    return r
  end

  describe("the engine", function()
    local function decide(p, facts)
      facts.method, facts.path, facts.attempts = "POST", "/jobs", 1
      return p:decide(facts)
    end

    it("retries a keyless POST on CONNECT_REFUSED, PROXY_REFUSED and DNS_FAILURE with reason transparent-retry", function()
      for _, t in ipairs({ "connect-refused", "dns" }) do
        local v = decide(policy, { transport = t })
        assert.same({ true, "transparent-retry" }, { v.retry, v.reason }, t)
      end
      local p = assert(rf.load_string(LOCK:gsub('"DNS_FAILURE"', '"DNS_FAILURE", "PROXY_REFUSED"')))
      local v = decide(p, { transport = "proxy-refused" })
      assert.same({ true, "transparent-retry" }, { v.retry, v.reason })
    end)

    it("retries a TLS failure only when the transport says nothing was sent", function()
      assert.equal("transparent-retry", decide(policy, { transport = "tls", not_sent = true }).reason)
      assert.equal("mutating-without-idempotency", decide(policy, { transport = "tls" }).reason)
    end)

    it("never for a failure after the request was sent, nor with transparentRetry: false", function()
      assert.equal("mutating-without-idempotency", decide(policy, { transport = "connect-reset" }).reason)
      assert.equal("mutating-without-idempotency", decide(policy, { transport = "timeout", not_sent = true }).reason)
      local off = assert(rf.load_string(lock_with('"transparentRetry": false')))
      assert.equal("mutating-without-idempotency", decide(off, { transport = "connect-refused" }).reason)
    end)

    it("keeps pinned-status when a key is present, and still needs the class in retryable", function()
      assert.equal("pinned-status", decide(policy, { transport = "connect-refused", idempotency_key = true }).reason)
      local p = assert(rf.load_string(LOCK:gsub('"CONNECT_REFUSED", ', '')))
      assert.equal("status-not-retryable", decide(p, { transport = "connect-refused" }).reason)
    end)

    it("is reachable from the CLI: retryfreeze decide --not-sent", function()
      local path = h.temp_file(LOCK)
      local out, _, code = h.run_cli("decide", path, "--method", "POST", "--path", "/jobs", "--transport", "tls",
        "--not-sent", "--seed", "1")
      local out2 = h.run_cli("decide", path, "--method", "POST", "--path", "/jobs", "--transport", "tls", "--seed", "1")
      os.remove(path)
      assert.equal(0, code)
      assert.matches('"reason":"transparent-retry"', out, 1, true)
      assert.matches('"reason":"mutating-without-idempotency"', out2, 1, true)
    end)

    it("is classified by diff: turning it on is widening, off is narrowing", function()
      local diff = require "retryfreeze.diff"
      local off = assert(rf.load_string(lock_with('"transparentRetry": false')))
      local on = assert(rf.load_string(lock_with('"transparentRetry": true')))
      local changes = diff.compare(off, on)
      assert.equal(1, #changes)
      assert.same({ "widening", "(policy)", "transparentRetry", false, true },
        { changes[1].kind, changes[1].route, changes[1].field, changes[1].old, changes[1].new })
      changes = diff.compare(policy, off)
      assert.same({ "narrowing", "transparentRetry" }, { changes[1].kind, changes[1].field })
      assert.equal(0, #diff.compare(policy, on))
    end)

    it("is a lock field: boolean only, left out of the digest at its default, printed in the effective policy", function()
      local on = assert(rf.load_string(lock_with('"transparentRetry": true')))
      local off = assert(rf.load_string(lock_with('"transparentRetry": false')))
      assert.equal(policy.digest, on.digest)
      assert.not_equal(policy.digest, off.digest)
      assert.matches('"transparentRetry":%s*true', policy:effective_json())
      assert.is_nil(policy:canonical_json():find("transparentRetry", 1, true))
      assert.matches('"transparentRetry":false', off:canonical_json(), 1, true)
      assert.equal(off.digest, assert(rf.load_string(off:effective_json())).digest)
      local p, err = rf.load_string(lock_with('"transparentRetry": "no"'))
      assert.is_nil(p)
      assert.equal("lock: $.transparentRetry: must be true or false, got a string", err)
    end)
  end)

  describe("the client against real ports", function()
    local dead

    setup(function() dead = "http://127.0.0.1:" .. servers.closed_port() end)

    it("retries a keyless POST to a refused port, each retry an attempt, up to maxAttempts", function()
      local r = post(policy, dead, "/jobs")
      assert.same({ "exhausted", "max-attempts", 3 }, { r.outcome, r.reason, r.attempts })
      assert.same({ "CONNECT_REFUSED", "transparent-retry" }, { r.tries[1].class, r.tries[1].reason })
      assert.same({ "transparent-retry", "max-attempts" }, { r.tries[2].reason, r.tries[3].reason })
      assert.same({ 50, 100 }, { r.tries[2].delay_ms, r.tries[3].delay_ms })
    end)

    it("does not with transparentRetry: false", function()
      local off = assert(rf.load_string(lock_with('"transparentRetry": false')))
      local r = post(off, dead, "/jobs")
      assert.same({ "refused", "mutating-without-idempotency", 1 }, { r.outcome, r.reason, r.attempts })
    end)

    it("obeys the deadline: the 400 ms backoff does not fit a 700 ms budget twice", function()
      local r, stalled = stall.across(function() return post(policy, dead, "/slow") end)
      assert.same({ "deadline", "deadline", 2 }, { r.outcome, r.reason, r.attempts })
      -- Net of the stall the machine imposed on this thread (spec/support/stall.lua), never of the backoff.
      assert.is_true(r.elapsed_ms >= 400 and r.elapsed_ms < 700 + stalled,
        ("%.1f ms, %.1f ms of it stalled"):format(r.elapsed_ms, stalled))
    end)

    it("obeys the retry budget (throttled once the tokens fall to half)", function()
      local p = assert(rf.load_string(lock_with('"retryBudget": {"maxTokens": 2, "tokenRatio": 0.1}')))
      local r = post(p, dead, "/jobs", { retry_budget = true })
      assert.same({ "throttled", "retry-throttled", 1 }, { r.outcome, r.reason, r.attempts })
    end)

    describe("a request-level deadline_ms and timeout_ms", function()
      it("narrow the lock's budget and per-try timeout", function()
        local r, stalled = stall.across(function()
          return post(policy, dead, "/jobs", { request = { deadline_ms = 120, timeout_ms = 100 } })
        end)
        -- 120 ms instead of 4000: the 50 ms backoff fits once, the 100 ms one does not. A machine that kept this
        -- thread from running for STALL_MS or more (a loaded one) may leave no room for the 50 ms backoff either:
        -- then the deadline stops the request after its first attempt, which is still the narrowed budget.
        local STALL_MS = 20
        assert.same({ "deadline", "deadline" }, { r.outcome, r.reason })
        assert.equal(100, r.tries[1].timeout_ms)
        if stalled < STALL_MS or r.attempts == 2 then
          assert.equal(2, r.attempts, ("%.1f ms stalled"):format(stalled))
          assert.is_true(r.tries[2].timeout_ms <= 70 and r.tries[2].timeout_ms > 0, tostring(r.tries[2].timeout_ms))
        else
          assert.equal(1, r.attempts)
        end
        assert.is_true(r.elapsed_ms < 120 + stalled, ("%.1f ms, %.1f ms of it stalled"):format(r.elapsed_ms, stalled))
      end)

      it("may not widen it: the error names the lock's limit", function()
        local c = rf.client{ policy = policy, base_url = dead, rng_seed = 1 }
        assert.has_error(function() c:request{ method = "POST", path = "/jobs", deadline_ms = 5000 } end,
          'client:request: deadline_ms 5000 is over the lock\'s totalBudgetMs 4000 for route "POST /jobs": '
          .. "a request may only narrow it")
        assert.has_error(function() c:request{ method = "POST", path = "/jobs", timeout_ms = 1001 } end,
          'client:request: timeout_ms 1001 is over the lock\'s perAttemptTimeoutMs 1000 for route "POST /jobs": '
          .. "a request may only narrow it")
        assert.has_error(function() c:request{ method = "POST", path = "/jobs", timeout_ms = 0 } end,
          "request.timeout_ms must be an integer 1..3600000 (ms)")
        c:close()
      end)
    end)
  end)

  if not servers.nginx_bin then
    pending("nginx not installed: the reset-after-send and TLS cases need it")
    return
  end

  describe("against nginx", function()
    local ng

    setup(function()
      ng = assert(servers.nginx_tls(2, function(ports, certs)
        return table.concat({
          -- 444: nginx reads the request, then closes the connection without a response.
          ("server { listen 127.0.0.1:%d; location = /drop { return 444; } }"):format(ports[1]),
          servers.tls_server(ports[2], certs, "ok"),
        }, "\n")
      end))
    end)

    teardown(function()
      if ng then ng.stop() end
    end)

    local function settled_count(path, want)
      local n = h.poll(50, 0.02, function()
        local count = 0
        for _, line in ipairs(ng.log_lines()) do
          if line:find(" " .. path .. " ", 1, true) then count = count + 1 end
        end
        return count >= want, count
      end)
      os.execute("sleep 0.05")
      return n
    end

    it("does not retry a keyless POST whose connection was closed after the request was sent", function()
      local r = post(policy, ng.url_of(1), "/drop")
      assert.same({ "CONNECT_RESET", "refused", "mutating-without-idempotency", 1 },
        { r.tries[1].class, r.outcome, r.reason, r.attempts })
      assert.equal(1, settled_count("/drop", 1))
    end)

    it("retries it with an idempotency key, every attempt reaching nginx", function()
      local before = settled_count("/drop", 1)
      local r = post(policy, ng.url_of(1), "/drop", { request = { idempotency_key = "k-1" } })
      assert.same({ "exhausted", 3, "pinned-status" }, { r.outcome, r.attempts, r.tries[1].reason })
      assert.equal(before + 3, settled_count("/drop", before + 3))
    end)

    -- POST /tls has a long per-try timeout: a handshake a loaded machine slows past 1 s (CI, at load 20) still ends in
    -- the certificate's refusal under test, not in a timeout.
    it("retries a keyless POST whose TLS handshake failed before the request (unknown CA)", function()
      local r = post(policy, ng.url_of(2, "https"), "/tls")
      local tries = {}
      for i, t in ipairs(r.tries) do
        tries[i] = ("%s %s %s (%s ms)"):format(t.class, t.reason, tostring(t.error), tostring(t.elapsed_ms))
      end
      assert.same({ "TLS_FAILURE", "transparent-retry", 3, "exhausted" },
        { r.tries[1].class, r.tries[1].reason, r.attempts, r.outcome }, table.concat(tries, "; "))
      assert.matches("^TLS: unknown CA", r.tries[1].error)
      assert.equal(0, settled_count("/tls", 0)) -- nothing reached nginx's HTTP layer
    end)
  end)
end)
