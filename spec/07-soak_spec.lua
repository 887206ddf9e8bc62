-- Concurrency through curl multi driving Lua coroutines, and `retryfreeze soak`.
local rf = require "retryfreeze"
local h = require "spec.helper"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"

describe("retryfreeze.scheduler", function()
  it("runs flows concurrently: 20 requests that each wait 1 s (Retry-After) take about 1 s, not 20", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local p = assert(rf.load_string('{"endpoint":"GET /x/{i}","maxAttempts":2,"perAttemptTimeoutMs":2000,'
      .. '"totalBudgetMs":5000,"retryable":["HTTP_429"]}'))
    local c = rf.client{ policy = p, base_url = up.url }
    local results = {}
    local t0 = os.time()
    local failed = scheduler.run(c, 20, 20, function(i)
      results[i] = c:request{ method = "GET", path = "/x/" .. i, headers = { ["X-Fault-Script"] = "429;retry-after=1,200" } }
    end)
    local took = os.time() - t0
    c:close()
    up.stop()
    assert.equal(0, failed)
    for i = 1, 20 do
      assert.same({ true, 2, 1000 }, { results[i].ok, results[i].attempts, results[i].tries[2].delay_ms })
    end
    assert.is_true(took <= 3, "took " .. took .. " s")
  end)

  it("reports a flow that raises and keeps running the others", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local p = assert(rf.load_string('{"endpoint":"GET /x","maxAttempts":1,"perAttemptTimeoutMs":1000,'
      .. '"totalBudgetMs":1000,"retryable":[]}'))
    local c = rf.client{ policy = p, base_url = up.url }
    local errors, oks = {}, 0
    local failed = scheduler.run(c, 10, 4, function(i)
      c:request{ method = "GET", path = "/x" }
      if i == 3 then error("flow three broke") end
    end, function(i, ok, err) if ok then oks = oks + 1 else errors[i] = err end end)
    c:close()
    up.stop()
    assert.equal(1, failed)
    assert.equal(9, oks)
    assert.matches("flow three broke", errors[3])
  end)

  it("refuses on_attempt hooks inside scheduled flows", function()
    local up = assert(upstream.start{ bindir = h.bindir, max_seconds = 60 })
    local p = assert(rf.load_string('{"endpoint":"GET /x","maxAttempts":1,"perAttemptTimeoutMs":1000,'
      .. '"totalBudgetMs":1000,"retryable":[]}'))
    local c = rf.client{ policy = p, base_url = up.url }
    local msg
    scheduler.run(c, 1, 1, function()
      c:request{ method = "GET", path = "/x", on_attempt = function() end }
    end, function(_, _, err) msg = err end)
    c:close()
    up.stop()
    assert.matches("on_attempt is not available in scheduled flows", msg)
  end)
end)

describe("retryfreeze soak", function()
  local ledger = os.tmpname()
  teardown(function() os.remove(ledger) end)

  it("drives the default flow, prints stats and exits 0 within the thresholds", function()
    local out, _, code = h.run_cli("soak", "examples/service.lock.json", "--requests", "300", "--concurrency", "32",
      "--faults", "503=0.05", "--seed", "4", "--ledger", ledger, "--max-retry-ratio", "0.5")
    assert.equal(0, code)
    assert.matches("soak: 300 flows %(0 failed%), concurrency 32", out)
    assert.matches("requests=300 successes=%d+ attempts=%d+", out)
    assert.matches("retried%-success=[%d.]+%% attempts/success=[%d.]+", out)
    local lines = 0
    local it, st = rf.ledger.read(ledger)
    for _ in it, st do lines = lines + 1 end
    assert.equal(300, lines)
  end)

  it("exits 1 on a breached threshold and names it", function()
    local out, _, code = h.run_cli("soak", "examples/service.lock.json", "--requests", "200", "--faults", "503=0.3",
      "--ledger", ledger, "--max-retry-ratio", "0.05")
    assert.equal(1, code)
    assert.matches("breach: retries/request 0%.%d+ > max 0%.050 %(max%-retry%-ratio%)", out)
  end)

  it("exits 1 on a forbidden reason", function()
    local out, _, code = h.run_cli("soak", "examples/service.lock.json", "--requests", "100", "--faults", "500=0.5",
      "--ledger", ledger, "--forbid-reason", "status-not-retryable")
    assert.equal(1, code)
    assert.matches("breach: %d+ requests ended with forbidden reason status%-not%-retryable %(forbid%-reason%)", out)
  end)

  it("fails on duplicate executions of a keyed request (a flow that reuses one key)", function()
    local out, _, code = h.run_cli("soak", h.desk_lock, "--requests", "20", "--faults", "503=0",
      "--ledger", ledger, "--script", "spec/fixtures/reused_key_flow.lua")
    assert.equal(1, code)
    assert.matches("breach: 19 duplicate executions of keyed requests", out)
  end)

  it("soaks a user's flow script", function()
    local out, _, code = h.run_cli("soak", "examples/service.lock.json", "--requests", "50", "--faults", "503=0",
      "--ledger", ledger, "--script", "spec/fixtures/two_step_flow.lua")
    assert.equal(0, code)
    assert.matches("requests=100 successes=100", out)
  end)

  it("measures attempts per request within 0.05 of the model's prediction (p = 0.3, 3 attempts)", function()
    local model = require "retryfreeze.model"
    local lock = h.temp_file('{"endpoint":"GET /x/{i}","maxAttempts":3,"perAttemptTimeoutMs":1000,'
      .. '"totalBudgetMs":10000,"retryable":["HTTP_503"],"backoff":{"baseMs":1,"maxMs":5,"jitter":"none"}}')
    local out, _, code = h.run_cli("soak", lock, "--requests", "3000", "--concurrency", "64", "--faults", "503=0.3",
      "--seed", "21", "--ledger", ledger)
    os.remove(lock)
    assert.equal(0, code)
    local requests, attempts = out:match("requests=(%d+) successes=%d+ attempts=(%d+)")
    local measured = tonumber(attempts) / tonumber(requests)
    local predicted = model.predict{ max_attempts = 3, p = 0.3 }.attempts_per_request
    assert.near(1.39, predicted, 0.0001)
    -- 3000 requests: the standard error of the mean is about 0.012, so 0.05 is four of them.
    assert.near(predicted, measured, 0.05)
  end)

  it("refuses a non-loopback --url and bad usage", function()
    local _, err, code = h.run_cli("soak", h.desk_lock, "--url", "http://192.0.2.1:8080")
    assert.equal(2, code)
    assert.matches("loopback addresses only", err)
    _, _, code = h.run_cli("soak")
    assert.equal(2, code)
    _, _, code = h.run_cli("soak", h.desk_lock, "--concurrency", "0")
    assert.equal(2, code)
  end)
end)
