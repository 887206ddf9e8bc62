-- Issue 10 fault 11: at concurrency 100 with large response bodies arriving, no request outlives its
-- deadline by more than 50 ms. A quarter of the flows fetch an 8 MiB body that nginx sends at 10 MB/s (it
-- cannot arrive within the 300 ms per-try timeout); the client stops reading each body when its per-try
-- timeout passes instead of reading on until libcurl next looks at its timer.
local rf = require "retryfreeze"
local scheduler = require "retryfreeze.scheduler"
local h = require "spec.helper"
local servers = require "spec.support.servers"

local BUDGET_MS = 400
-- The bound is 50 ms. .ci/run's sanitized busted run (RF_SANITIZED) allows one per-try timeout (300 ms)
-- instead: there AddressSanitizer checks every byte of the 250 MB/s of bodies and starves the one client thread
-- (in CI's suite: 9 to 55 of 400 flows over the 50 ms, by up to 210 ms). That run is for memory errors on this
-- path; the unsanitized one (the README's ctest) judges the 50 ms, where a client without on_body's overdue
-- check goes 41 to 100 flows over.
local SLACK_MS = os.getenv("RF_SANITIZED") and 300 or 50
local LOCK = ([[{"version":1,"defaults":{"maxAttempts":2,"perAttemptTimeoutMs":300,"totalBudgetMs":%d,
  "minAttemptMs":20,"retryable":["TIMEOUT"],"backoff":{"baseMs":5,"maxMs":10}},
  "routes":[{"endpoint":"GET /big/*"},{"endpoint":"GET /small/*"}]}]]):format(BUDGET_MS)

if not servers.nginx_bin then
  describe("the deadline with large bodies", function() pending("nginx not installed (bash .ci/deps)") end)
  return
end

describe("the deadline with large bodies at concurrency 100", function()
  local ng

  setup(function()
    local err
    ng, err = servers.nginx(1, function(ports, dir)
      servers.sh("head -c 8388608 /dev/zero > " .. h.shell_quote(dir .. "/big.bin"))
      return table.concat({
        "server {",
        "  listen 127.0.0.1:" .. ports[1] .. " backlog=512;",
        "  access_log off;",
        "  location /big/ { alias " .. dir .. "/; try_files /big.bin =404; limit_rate 10m; }",
        "  location /small/ { return 200 \"small\\n\"; }",
        "}",
      }, "\n")
    end, { worker_connections = 512 })
    assert(ng, err)
  end)

  teardown(function() if ng then ng.stop() end end)

  -- A loaded machine can only delay the client (the noise is one-sided): a delayed small request can miss its
  -- per-try timeout, and any request its deadline. So the run is repeated, up to 3 times, until one stops every
  -- big request in time, succeeds every small one and lets none overrun; the last run is the one asserted. (Seen
  -- once at load 7: 18 of 300 small requests stopped at the deadline in the only run.)
  it("400 flows, a quarter with 8 MiB bodies: none outlives totalBudgetMs + " .. SLACK_MS .. " ms", function()
    local policy = assert(rf.load_string(LOCK, "33-deadline.lock"))
    local runs, last_outcomes = {}, nil
    for _ = 1, 3 do
      -- The garbage of the suite so far (and of the last run's bodies) collected now, not in steps during the run.
      collectgarbage("collect")
      local client = rf.client{ policy = policy, base_url = "http://127.0.0.1:" .. ng.ports[1], rng_seed = 5,
        max_body_bytes = 64 * 1024 * 1024 }
      local worst, overruns, outcomes = 0, 0, {}
      local failed = scheduler.run(client, 400, 100, function(i)
        local big = i % 4 == 0
        local r = client:request{ method = "GET", path = (big and "/big/" or "/small/") .. i }
        if r.elapsed_ms > worst then worst = r.elapsed_ms end
        if r.elapsed_ms > BUDGET_MS + SLACK_MS then overruns = overruns + 1 end
        -- A big body never arrives in time: the second attempt ends at the deadline (or is the last one).
        local key = big and ((r.outcome == "deadline" or r.reason == "max-attempts") and "big stopped in time"
          or ("big " .. r.outcome .. " " .. r.reason .. " " .. r.tries[#r.tries].transport))
          or ("small " .. r.outcome)
        outcomes[key] = (outcomes[key] or 0) + 1
      end)
      client:close()
      assert.equal(0, failed)
      last_outcomes = outcomes
      runs[#runs + 1] = ("%d over, worst %d ms, %d small successes"):format(overruns, worst,
        outcomes["small success"] or 0)
      if overruns == 0 and outcomes["small success"] == 300 and outcomes["big stopped in time"] == 100 then break end
    end
    assert.same({ ["small success"] = 300, ["big stopped in time"] = 100 }, last_outcomes, table.concat(runs, "; "))
    assert.matches("^0 over", runs[#runs], table.concat(runs, "; "))
  end)
end)
