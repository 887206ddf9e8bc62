-- The wait headers end to end: the project's upstream (retryfreeze-serve, X-Fault-Script header= and
-- header-epoch=) sends each header a route may read; the client waits what the header asked (measured: the
-- request's time minus its attempts' time on the wire, within 20 ms), and the ledger records which header was
-- used and its raw value. Also gRPC pushback's stop and a per-class attempt limit, on the wire.
local rf = require "retryfreeze"
local servers = require "spec.support.servers"
local stall = require "spec.support.stall"

local LOCK = [[{
  "version": 1,
  "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 20000,
    "retryable": ["HTTP_429", "HTTP_503"],
    "backoff": {"baseMs": 700, "multiplier": 1, "maxMs": 700, "jitter": "none"}},
  "routes": [
    {"endpoint": "GET /w/*", "retryAfter": {"maxMs": 5000, "headers": ["grpc-retry-pushback-ms", "retry-after-ms",
      "x-ms-retry-after-ms", "ratelimit", "ratelimit-reset", "x-ratelimit-reset", "retry-after"]}},
    {"endpoint": "GET /limited", "classLimits": {"HTTP_503": 2}},
    {"endpoint": "GET /ms-only/*", "retryAfter": {"headers": ["retry-after-ms"]}}
  ]}]]

local TOLERANCE_MS = 20

describe("wait headers against the fault-injecting upstream", function()
  local fx, ledger_path, client, policy

  setup(function()
    policy = assert(rf.load_string(LOCK))
    fx = servers.client_on_upstream(policy)
    ledger_path, client = fx.ledger_path, fx.client
  end)

  teardown(function() fx.stop() end)

  local function last_record()
    local last
    for rec in rf.ledger.read(ledger_path) do last = rec end
    return last
  end

  local function get(path, script)
    return client:request{ method = "GET", path = path, headers = { ["X-Fault-Script"] = script } }
  end

  --- What the client waited between attempt 1 and attempt 2, by its own clock: the request's time minus the
  --- attempts' time on the wire.
  local function waited(r)
    local wire = 0
    for _, t in ipairs(r.tries) do wire = wire + t.elapsed_ms end
    return r.elapsed_ms - wire
  end

  --- Runs the request up to 3 times (a fresh path each time, path/2 and path/3, so the upstream replays the
  --- script; the routes end in "*") until the wait
  --- is within TOLERANCE_MS of want. Never waiting less than asked is checked on every run; the upper bound on
  --- the best run, since a loaded machine can only add to a sleep (the noise is one-sided), never shorten it.
  --- The upper bound is judged net of the stall the machine imposed on this thread during the request
  --- (spec/support/stall.lua): a sleep that ended on time but waited for a CPU to run again is the machine's.
  local function within(path, script, want, check)
    local best, best_stall, r
    for i = 1, 3 do
      local stalled
      r, stalled = stall.across(function() return get(path .. (i > 1 and "/" .. i or ""), script) end)
      check(r)
      local w = waited(r)
      assert.is_true(w >= want - 1, path .. ": waited " .. w .. " ms, less than the " .. want .. " ms asked")
      if not best or w - stalled < best - best_stall then best, best_stall = w, stalled end
      if best - best_stall - want <= TOLERANCE_MS then return r end
    end
    error(string.format("%s: waited at best %d ms (%.0f ms of it stalled), want %d ± %d", path, best, best_stall,
      want, TOLERANCE_MS))
  end

  local cases = {
    { "retry-after-ms", "150", "429;header=retry-after-ms:150,ok", 150 },
    { "x-ms-retry-after-ms", "220", "429;header=x-ms-retry-after-ms:220,ok", 220 },
    { "ratelimit", '"default";r=0;t=1', '429;header="ratelimit:\\"default\\";r=0;t=1",ok', 1000 },
    { "ratelimit-reset", "1", "429;header=ratelimit-reset:1,ok", 1000 },
    { "x-ratelimit-reset", "1", "429;header=x-ratelimit-reset:1,ok", 1000 },
    { "retry-after", "1", "429;retry-after=1,ok", 1000 },
    { "grpc-retry-pushback-ms", "80", "429;header=grpc-retry-pushback-ms:80,ok", 80 },
    -- The route's order decides: retry-after-ms is listed before retry-after.
    { "retry-after-ms", "120", "429;retry-after=1;header=retry-after-ms:120,ok", 120 },
    -- An invalid header is skipped; the next valid one wins.
    { "ratelimit-reset", "1", "429;header=retry-after-ms:1.5;header=ratelimit-reset:1,ok", 1000 },
    -- Two RateLimit field lines are one List: the exhausted policy is on the second line.
    { "ratelimit", '"a";r=5;t=9, "b";r=0;t=1',
      '429;header="ratelimit:\\"a\\";r=5;t=9";header="ratelimit:\\"b\\";r=0;t=1",ok', 1000 },
  }

  for _, case in ipairs(cases) do
    local name, value, script, want = case[1], case[2], case[3], case[4]
    it("waits what " .. name .. ": " .. value .. " asks (" .. want .. " ms), and the ledger names it", function()
      local r = within("/w/" .. name, script, want, function(r)
        assert.same({ true, "success", 2 }, { r.ok, r.outcome, r.attempts })
        assert.same({ name, value, "pinned-status" }, { r.tries[1].retry_after_header, r.tries[1].retry_after,
          r.tries[1].reason })
        assert.equal(want, r.tries[2].delay_ms)
      end)
      local rec = last_record()
      assert.equal("GET /w/*", r.route)
      assert.equal("GET /w/*", rec.route)
      assert.equal("/w/" .. name, (rec.path:gsub("/%d$", "")))
      assert.same({ name, value }, { rec.tries[1].retry_after_header, rec.tries[1].retry_after })
      assert.equal(want, rec.tries[2].delay_ms)
    end)
  end

  it("waits 0 for an x-ratelimit-reset Unix timestamp in the past", function()
    within("/w/epoch-past", "429;header-epoch=x-ratelimit-reset:-100,ok", 0, function(r)
      assert.same({ true, 2, "x-ratelimit-reset", 0 }, { r.ok, r.attempts, r.tries[1].retry_after_header,
        r.tries[2].delay_ms })
      assert.is_true(tonumber(r.tries[1].retry_after) > 1000000000)
    end)
  end)

  it("falls back to the backoff (700 ms) when no header is valid", function()
    within("/w/none-valid", "429;header=retry-after-ms:soon,ok", 700, function(r)
      assert.same({ true, 2, "retry-after-ms", "soon", 700 }, { r.ok, r.attempts, r.tries[1].retry_after_header,
        r.tries[1].retry_after, r.tries[2].delay_ms })
    end)
  end)

  it("never reads a header the route does not list: Retry-After on a route that reads only retry-after-ms", function()
    within("/ms-only", "429;retry-after=3,ok", 700, function(r)
      assert.same({ true, 2, 700 }, { r.ok, r.attempts, r.tries[2].delay_ms })
      assert.is_nil(r.tries[1].retry_after)
      assert.is_nil(r.tries[1].retry_after_header)
    end)
  end)

  it("stops on a negative gRPC pushback (A6: do not retry): server-pushback, terminal", function()
    local r = get("/w/pushback", "503;header=grpc-retry-pushback-ms:-1,ok")
    assert.same({ false, 503, "terminal", "server-pushback", 1 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.same({ "grpc-retry-pushback-ms", "-1" }, { r.tries[1].retry_after_header, r.tries[1].retry_after })
    local rec = last_record()
    assert.same({ "server-pushback", "grpc-retry-pushback-ms", "-1" },
      { rec.reason, rec.tries[1].retry_after_header, rec.tries[1].retry_after })
  end)

  it("stops a class at its own limit (classLimits HTTP_503: 2 under maxAttempts 3): class-limit, exhausted", function()
    local r = get("/limited", "503,503,ok")
    assert.same({ false, 503, "exhausted", "class-limit", 2 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.same({ "pinned-status", "class-limit" }, { r.tries[1].reason, r.tries[2].reason })
    assert.equal("class-limit", last_record().reason)
    -- A 429 on the same route has no limit of its own: maxAttempts (3) applies.
    r = get("/limited", "429,429,ok")
    assert.same({ true, 3 }, { r.ok, r.attempts })
  end)
end)
