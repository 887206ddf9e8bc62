-- Against an upstream that always stalls, no request outlives totalBudgetMs + 50 ms. The stall (400 ms) outlasts
-- every per-try timeout (200 ms) but ends soon enough that the upstream's 512-connection limit is never reached
-- (a refused connection would be a different failure class).
--
-- A loaded machine can delay any client: the time this thread was kept from running after a request's deadline
-- (spec/support/stall.lua) is not held against the client, and every one of three runs must hold the bound.
local rf = require "retryfreeze"
local h = require "spec.helper"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"
local stall = require "spec.support.stall"

local BUDGET_MS, SLACK_MS = 450, 50

describe("the deadline under an upstream that always stalls", function()
  it("1000 requests: none outlives totalBudgetMs + 50 ms + the machine's stall after it, every one ends on a "
    .. "deadline or max-attempts", function()
    local up = assert(upstream.start{ bindir = h.bindir, faults = "timeout=1", stall_ms = 400, max_seconds = 120 })
    local policy = assert(rf.load_string('{"endpoint":"GET /slow/{i}","maxAttempts":3,"perAttemptTimeoutMs":200,'
      .. '"totalBudgetMs":' .. BUDGET_MS .. ',"minAttemptMs":50,"retryable":["TIMEOUT"],'
      .. '"backoff":{"baseMs":10,"maxMs":20}}'))
    local runs = {}
    for _ = 1, 3 do
      local client = rf.client{ policy = policy, base_url = up.url, rng_seed = 3 }
      local driven, samples = stall.sampled(client) -- the scheduler drives the client through it
      local records, outcomes = {}, {}
      local failed = scheduler.run(driven, 1000, 100, function(i)
        local t0 = stall.now_ms()
        local r = client:request{ method = "GET", path = "/slow/" .. i }
        records[#records + 1] = { t0 = t0, stall_end = stall.ms(), elapsed_ms = r.elapsed_ms }
        local k = r.outcome .. " " .. r.reason
        if k ~= "deadline deadline" and k ~= "exhausted max-attempts" then -- said with its last try
          local t = r.tries[#r.tries] or {}
          k = ("%s (last of %d tries: status %s, class %s, %s ms)"):format(k, #r.tries, tostring(t.status),
            tostring(t.class), tostring(t.elapsed_ms))
        end
        outcomes[k] = (outcomes[k] or 0) + 1
      end)
      client:close()
      assert.equal(0, failed)
      local total = 0
      for k, n in pairs(outcomes) do
        assert.is_truthy(k == "deadline deadline" or k == "exhausted max-attempts", k)
        total = total + n
      end
      assert.equal(1000, total)
      local worst, over = -math.huge, {}
      for _, rec in ipairs(records) do
        local stalled = stall.since(samples, rec.t0 + BUDGET_MS, rec.stall_end)
        local excess = rec.elapsed_ms - BUDGET_MS - stalled
        if excess > worst then worst = excess end
        if excess > SLACK_MS then
          over[#over + 1] = ("%d ms over (%.0f ms stalled)"):format(rec.elapsed_ms - BUDGET_MS, stalled)
        end
      end
      runs[#runs + 1] = ("%d over the bound, worst %.0f ms past budget + stall%s"):format(#over, worst,
        #over > 0 and (": " .. table.concat(over, ", ", 1, math.min(5, #over))) or "")
      assert.equal(0, #over, table.concat(runs, "; "))
    end
    up.stop()
  end)
end)
