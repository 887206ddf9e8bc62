-- The ratio form of retryBudget (Linkerd's retry budget: over the last ttlMs, retries <= retryRatio x requests +
-- minRetriesPerSecond x ttlMs / 1000), local and kept in Redis for a fleet. Real parts: the project's
-- fault-injecting upstream answering 503 to everything, and redis-server on a free loopback port, both started here
-- and stopped in teardown. Without redis-server the fleet specs are pending.
local rf = require "retryfreeze"
local h = require "spec.helper"
local upstream = require "retryfreeze.upstream"
local storm_support = require "spec.support.storm"

-- maxAttempts 3 on an upstream that always fails: without a budget every request makes 2 retries.
local function lock_text(ratio, min_per_second, shared)
  return ([[{"version": 1,
  "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 1000, "totalBudgetMs": 3000,
               "retryable": ["HTTP_503"],
               "backoff": {"baseMs": 1, "multiplier": 1, "maxMs": 1, "jitter": "none"}},
  "routes": [{"endpoint": "GET /storm"}],
  "retryBudget": {"retryRatio": @R@, "minRetriesPerSecond": @M@, "ttlMs": 60000@S@}}]])
    :gsub("@R@", tostring(ratio)):gsub("@M@", tostring(min_per_second))
    :gsub("@S@", shared and (', "shared": {"name": "' .. shared .. '"}') or "")
end

describe("retryBudget as a ratio", function()
  local up
  setup(function() up = assert(upstream.start({ bindir = h.bindir, faults = "503=1" })) end)
  teardown(function() if up then up.stop() end end)

  local function sent() return assert(upstream.stats(up.url)).requests end

  it("is in the lock's effective policy, and one form or the other", function()
    local p = assert(rf.load_string(lock_text(0.2, 0)))
    assert.same({ retry_ratio = 0.2, min_retries_per_second = 0, ttl_ms = 60000 }, p.retry_budget)
    assert.truthy(p:canonical_json():find('"retryBudget":{"minRetriesPerSecond":0,"retryRatio":0.2,"ttlMs":60000}',
      1, true) or p:canonical_json():find('"retryRatio":0.2', 1, true))
    local _, err = rf.load_string((lock_text(0.2, 0):gsub('"ttlMs": 60000', '"ttlMs": 60000, "tokenRatio": 1')))
    assert.equal("lock: $.retryBudget: has both a token bucket (tokenRatio) and a ratio (retryRatio): a retry "
      .. "budget is one or the other (maxTokens and tokenRatio, or retryRatio, minRetriesPerSecond and ttlMs)", err)
  end)

  it("100 requests to an always-503 upstream with maxAttempts 3 and retryRatio 0.2 make 20 retries, not 200",
    function()
      local policy = assert(rf.load_string(lock_text(0.2, 0)))
      local budget = rf.retry_budget(policy)
      local client = rf.client{ policy = policy, base_url = up.url, retry_budget = budget }
      local before, reasons = sent(), {}
      for _ = 1, 100 do
        local r = client:request{ method = "GET", path = "/storm" }
        reasons[r.reason] = (reasons[r.reason] or 0) + 1
        assert.equal("local", r.budget)
      end
      local retries = sent() - before - 100
      print(string.format("\nratio 0.2: 100 requests at 503=1, maxAttempts 3: %d retries", retries))
      -- The window counts each request at its first verdict, so the n-th retry waits for the 5n-th request:
      -- exactly floor(0.2 x 100).
      assert.equal(20, retries)
      -- Each request ends throttled: a retry it made leaves the window full for its next.
      assert.same({ ["retry-throttled"] = 100 }, reasons)
      assert.same({ ttl_ms = 60000, requests = 100, retries = 20, allowance = 20 }, budget:window())
      client:close()
      budget:close()
    end)

  it("minRetriesPerSecond adds its reserve: ratio 0 with 1 per second over 60 s allows 60 retries", function()
    local policy = assert(rf.load_string(lock_text(0, 1)))
    local client = rf.client{ policy = policy, base_url = up.url, retry_budget = true }
    local before = sent()
    for _ = 1, 100 do client:request{ method = "GET", path = "/storm" } end
    assert.equal(60, sent() - before - 100)
    client:close()
  end)

  it("applies without asking: a client given no budget obeys the lock's, and client:retry_tokens() shows its window",
    function()
      local policy = assert(rf.load_string(lock_text(0.2, 0)))
      local client = rf.client{ policy = policy, base_url = up.url }
      local before = sent()
      for _ = 1, 100 do client:request{ method = "GET", path = "/storm" } end
      assert.equal(20, sent() - before - 100)
      assert.same({ ttl_ms = 60000, requests = 100, retries = 20, allowance = 20 }, client:retry_tokens())
      client:close()
    end)

  it("cannot be dropped: retry_budget = false is refused where the lock has a retryBudget, naming it", function()
    local policy = assert(rf.load_string(lock_text(0.2, 0)))
    assert.has_error(function() rf.client{ policy = policy, base_url = up.url, retry_budget = false } end,
      "rf.client: retry_budget = false, but the lock has a retryBudget, which every client obeys: share a "
      .. "rf.retry_budget(policy) or narrow it, never drop it (lock field retryBudget)")
    local io = { send = function() return { status = 503, transport = "ok", headers = {} } end,
      sleep = function() end, now_ms = function() return 0 end, retry_budget = false }
    local ok, err = pcall(rf.flow, policy, { method = "GET", path = "/storm" }, io)
    assert.is_false(ok)
    assert.matches("rf.flow: io.retry_budget = false, but the lock has a retryBudget, which every request obeys: "
      .. "pass a rf.retry_budget(policy) or none (the lock's own), never drop it (lock field retryBudget)",
      tostring(err), 1, true)
  end)

  it("rf.flow given no budget obeys the lock's own, shared by the policy's flows", function()
    -- retryRatio 0 and no reserve: the lock allows no retry at all.
    local policy = assert(rf.load_string(lock_text(0, 0)))
    local sends = 0
    local io = { send = function() sends = sends + 1; return { status = 503, transport = "ok", headers = {} } end,
      sleep = function() end, now_ms = function() return 0 end }
    local r = rf.flow(policy, { method = "GET", path = "/storm" }, io)
    assert.same({ "retry-throttled", 1 }, { r.reason, sends })
  end)

  it("a token bucket's budget:window() is nil", function()
    local p = assert(rf.load_string('{"endpoint":"GET /a","maxAttempts":2,"perAttemptTimeoutMs":100,'
      .. '"totalBudgetMs":500,"retryable":["HTTP_503"],"retryBudget":{"maxTokens":10,"tokenRatio":0.1}}'))
    local b = rf.retry_budget(p)
    assert.is_nil(b:window())
    b:close()
  end)
end)

storm_support.describe("a ratio retry budget shared through Redis", "ratio", function(parts, it_redis)
  local srv, up, dir
  setup(function() srv, up, dir = parts.srv, parts.up, parts.dir end)

  --- Runs `procs` storm workers at once under the lock text (spec.support.storm); returns the retries the upstream
  --- saw, the requests whose budget was shared and local-fallback, and what the workers printed.
  local function storm(text, redis_url, procs, per_proc)
    local lock_file = h.write_file(dir .. "/storm.lock.json", text)
    local sent, shared, fallback, outs = storm_support.run(up.url, lock_file, redis_url, procs, per_proc)
    return sent - procs * per_proc, shared, fallback, table.concat(outs)
  end

  it_redis("8 processes at retryRatio 0.2 retry about 20% of all their requests, in one window", function()
    local retries, shared, fallback = storm(lock_text(0.2, 0, "ratio-fleet"), srv.url, 8, 25)
    print(string.format("\nratio 0.2 shared by 8 processes x 25 requests at 503=1: %d retries", retries))
    assert.equal(200, shared)
    assert.equal(0, fallback)
    -- The script counts atomically in Redis: never past 20% of the 200 requests; a retry refused early (the window
    -- had too few requests yet) is not made up later, so a few less under some interleavings.
    assert.is_true(retries <= 40 and retries >= 36, tostring(retries))
    local out = h.run_cli("budget", "show", "ratio-fleet", "--redis", srv.url, "--window")
    local req, ret, allowed = out:match("^ratio%-fleet window 60000 ms: requests (%d+) retries (%d+) allowed (%S+) ")
    assert.equal("200", req, out)
    assert.equal(tostring(retries), ret)
    assert.equal("40", allowed)
    -- Without --window it reads the token bucket under the name, which a ratio budget never writes.
    assert.equal("ratio-fleet: no bucket in Redis (new, or expired while idle: it starts full)\n",
      (h.run_cli("budget", "show", "ratio-fleet", "--redis", srv.url)))
    assert.equal("nobody: no window in Redis (new, or expired while idle: it starts empty)\n",
      (h.run_cli("budget", "show", "nobody", "--redis", srv.url, "--window")))
  end)

  it_redis("the reserve is the fleet's: minRetriesPerSecond 1 over 60 s allows 60 retries in all, not 8 x 60",
    function()
      local shared_retries = storm(lock_text(0, 1, "reserve-fleet"), srv.url, 8, 25)
      local local_retries = storm(lock_text(0, 1, "reserve-local"), "local", 8, 25)
      print(string.format("\nreserve 1/s x 60 s, 8 processes x 25 requests: shared %d retries, local %d",
        shared_retries, local_retries))
      assert.equal(60, shared_retries)
      assert.equal(8 * 50, local_retries) -- each process: 25 requests x 2 retries, all within its own 60
    end)

  it_redis("Redis down: each decision falls back to the local window, bounded in time", function()
    local t0 = rf.monotonic_ms()
    local retries, shared, fallback, log = storm(lock_text(0.2, 0, "ratio-down"), "redis://127.0.0.1:1/0", 1, 50)
    assert.equal(0, shared)
    assert.equal(50, fallback)
    assert.equal(10, retries)
    assert.truthy(log:find("falls back to the local window: cannot connect to redis 127.0.0.1:1", 1, true), log)
    assert.is_true(rf.monotonic_ms() - t0 < 20000)
  end)
end)

-- opts.shared_dict keeps the budget in an nginx lua_shared_dict (spec/gateway_check.lua runs it in nginx with two
-- workers); outside nginx, or beside redis, it is refused in words that say why.
describe("rf.retry_budget's shared_dict option", function()
  it("is refused outside nginx, beside redis, and when it is not a name", function()
    local policy = assert(rf.load_string(lock_text(0.5, 0)))
    local cases = {
      { { shared_dict = "rf_budget" }, "rf.retry_budget: shared_dict needs nginx's lua-nginx-module (this process "
        .. "has no ngx_http_lua_ffi_shdict_incr): run it inside nginx" },
      { { shared_dict = "rf_budget", redis = "redis://h" }, "rf.retry_budget: give redis or shared_dict, not both" },
      { { shared_dict = 5 }, "rf.retry_budget: shared_dict must be the name of an nginx lua_shared_dict" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(rf.retry_budget, policy, c[1])
      assert.is_false(ok)
      assert.matches(c[2], tostring(err), 1, true)
    end
    local ok, err = pcall(require("retryfreeze.core").retry_budget_peek, "x", { redis = "redis://h",
      shared_dict = "rf_budget" })
    assert.is_false(ok)
    assert.matches("shared_dict is not read here", tostring(err), 1, true)
  end)
end)
