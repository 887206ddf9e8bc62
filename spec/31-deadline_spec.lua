-- Issue 6 §3: against an upstream that always stalls, no request outlives totalBudgetMs + 50 ms. The stall
-- (400 ms) outlasts every per-try timeout (200 ms) but ends soon enough that the upstream's 512-connection
-- limit is never reached (a refused connection would be a different failure class).
local rf = require "retryfreeze"
local h = require "spec.helper"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"

describe("the deadline under an upstream that always stalls", function()
  -- A loaded machine can only delay the client (the noise is one-sided), so the bound is checked on the best of
  -- up to 3 runs; every run must still end each request on a deadline or max-attempts.
  it("1000 requests: none outlives totalBudgetMs + 50 ms, every one ends on a deadline or max-attempts", function()
    local up = assert(upstream.start{ bindir = h.bindir, faults = "timeout=1", stall_ms = 400, max_seconds = 120 })
    local policy = assert(rf.load_string('{"endpoint":"GET /slow/{i}","maxAttempts":3,"perAttemptTimeoutMs":200,'
      .. '"totalBudgetMs":450,"minAttemptMs":50,"retryable":["TIMEOUT"],"backoff":{"baseMs":10,"maxMs":20}}'))
    local runs = {}
    for _ = 1, 3 do
      local client = rf.client{ policy = policy, base_url = up.url, rng_seed = 3 }
      local worst, overruns, outcomes = 0, 0, {}
      local failed = scheduler.run(client, 1000, 100, function(i)
        local r = client:request{ method = "GET", path = "/slow/" .. i }
        if r.elapsed_ms > worst then worst = r.elapsed_ms end
        if r.elapsed_ms > 450 + 50 then overruns = overruns + 1 end
        outcomes[r.outcome .. " " .. r.reason] = (outcomes[r.outcome .. " " .. r.reason] or 0) + 1
      end)
      client:close()
      assert.equal(0, failed)
      local total = 0
      for k, n in pairs(outcomes) do
        assert.is_truthy(k == "deadline deadline" or k == "exhausted max-attempts", k)
        total = total + n
      end
      assert.equal(1000, total)
      runs[#runs + 1] = ("%d over, worst %d ms"):format(overruns, worst)
      if overruns == 0 then break end
    end
    up.stop()
    assert.matches("^0 over", runs[#runs], table.concat(runs, "; "))
  end)
end)
