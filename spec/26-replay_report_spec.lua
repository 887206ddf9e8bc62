-- The replay's "A vs B" page (`retryfreeze replay --report`, `retryfreeze report --replay`) and the chained form of
-- assert.replay, over a small ledger written here line by line, so every recorded figure is known: GET /x/{i} has
-- 6 first-try successes, 4 successes after one 503 and 2 requests that ended after two 503s (maxAttempts 2);
-- POST /y has 2 first-try successes, which a candidate of GET /x/{i} alone routes nowhere; one line is the seed
-- harness's. The lines carry no per-try timeout or Date: they are older lines, and the page must say so.
local h = require "spec.helper"
local gen = require "spec.ledger_gen"
local json = require "retryfreeze.json"
local rf = require "retryfreeze"
require "retryfreeze.spec"

local q, read = h.shell_quote, h.read_file
local tmp = h.temp_dir()
teardown(function() os.execute("rm -rf " .. q(tmp)) end)

local BACKOFF = '"backoff":{"baseMs":1,"maxMs":5,"jitter":"full"}'
local T0 = 1795910400000

-- A single-route lock of GET /x/{i} retrying 503 with these attempts; path under tmp.
local function lock(name, attempts)
  return h.write_file(tmp .. "/" .. name .. ".lock.json", '{"endpoint":"GET /x/{i}","perAttemptTimeoutMs":2000,'
    .. '"maxAttempts":' .. attempts .. ',"totalBudgetMs":20000,"retryable":["HTTP_503"],' .. BACKOFF .. "}")
end

local function ledger_text()
  local lines, n = {}, 0
  local function add(r)
    n = n + 1
    r.ts_ms = T0 + n * 1000
    r.route, r.method, r.path = r.route or "GET /x/{i}", r.method or "GET", r.path or ("/x/" .. n)
    lines[#lines + 1] = gen.line(r)
  end
  for _ = 1, 6 do
    add{ attempts = 1, elapsed_ms = 20, outcome = "success", reason = "success", ok = true, status = 200,
      tries = { { "HTTP_200", 200, 20, 0, "success" } } }
  end
  for _ = 1, 4 do
    add{ attempts = 2, elapsed_ms = 150, outcome = "success", reason = "success", ok = true, status = 200,
      tries = { { "HTTP_503", 503, 30, 0, "pinned-status" }, { "HTTP_200", 200, 20, 100, "success" } } }
  end
  for _ = 1, 2 do
    add{ attempts = 2, elapsed_ms = 160, outcome = "exhausted", reason = "max-attempts", ok = false, status = 503,
      tries = { { "HTTP_503", 503, 30, 0, "pinned-status" }, { "HTTP_503", 503, 30, 100, "max-attempts" } } }
  end
  for i = 1, 2 do
    add{ route = "POST /y", method = "POST", path = "/y", key = "k" .. i, attempts = 1, elapsed_ms = 10,
      outcome = "success", reason = "success", ok = true, status = 200, tries = { { "HTTP_200", 200, 10, 0, "success" } } }
  end
  lines[#lines + 1] = '{"key": "h1", "attempts": 1, "elapsed_s": 0.02, "last": {"status": 200, "body_len": 2, '
    .. '"verdict": "unknown"}, "ok": true}\n'
  return table.concat(lines)
end

describe("assert.replay(ledgers, policy), chained", function()
  local ledger, same, narrow
  setup(function()
    ledger = h.write_file(tmp .. "/chain.jsonl", ledger_text())
    same, narrow = assert(rf.load(lock("same", 2))), assert(rf.load(lock("narrow", 1)))
  end)

  -- The figures of the record: GET /x/{i} alone is replayed (POST /y: no-route; the harness line: recorded only).
  it("knows the ledger (the replay's own numbers)", function()
    local p = assert(rf.replay(ledger, same, { seed = 1 })).predicted
    assert.same({ 14, 10, 18, 10 / 14, 2 }, { p.requests, p.successes, p.attempts, p.success_rate, p.no_route })
    local r = assert(rf.replay(ledger, narrow, { seed = 1 }))
    local n = r.predicted
    assert.same({ 14, 6, 12, 6 / 14, -9 }, { n.requests, n.successes, n.attempts, n.success_rate, n.extra_attempts })
    assert.same({ 15, 13, 21 }, { r.recorded.requests, r.recorded.successes, r.recorded.attempts })
  end)

  it("passes a bound the prediction keeps, and fails one it breaches", function()
    -- same: the successes' attempts over the successes, 14 / 10
    local p = assert(rf.replay(ledger, same, { seed = 1 })).predicted
    assert.equal(1.4, p.attempts_per_success)
    assert.replay(ledger, same).attempts_per_success.at_most(1.4)
    assert.replay(ledger, same).attempts_per_success.at_least(1.4)
    assert.replay(ledger, narrow).attempts_per_success.at_most(1)
    assert.replay(ledger, narrow).success_rate.at_least(6 / 14)
    assert.replay(ledger, narrow).extra_attempts.at_most(-9)
    assert.replay(ledger, same).no_route.at_most(2)
    local ok, err = pcall(function() assert.replay(ledger, same).attempts_per_success.at_most(1.3) end)
    assert.is_false(ok)
    err = tostring(err)
    assert.matches("predict attempts_per_success at most 1.3: predicted 1.4000.", err, 1, true)
    assert.matches(ledger, err, 1, true)
    assert.matches(same.digest, err, 1, true)
    ok, err = pcall(function() assert.replay({ ledger, ledger }, narrow).success_rate.at_least(0.5, "narrowing") end)
    assert.is_false(ok)
    err = tostring(err)
    assert.matches("^[^\n]*narrowing", err)
    assert.matches("predict success_rate at least 0.5: predicted 0.4286.", err, 1, true)
    assert.matches(ledger .. ", " .. ledger, err, 1, true)
    ok, err = pcall(function() assert.replay(ledger, narrow).attempts.at_least(13) end)
    assert.is_false(ok)
    assert.matches("predict attempts at least 13: predicted 12.", tostring(err), 1, true)
  end)

  it("reports a breached bound as a failure of the test, at the caller's line", function()
    local ok, err = pcall(function() assert.replay(ledger, same).successes.at_least(11) end)
    assert.is_false(ok)
    assert.equal("failure", (getmetatable(err) or {}).__type)
    assert.matches("26%-replay_report_spec%.lua:%d+:", tostring(err))
  end)

  it("checks several figures of one replay", function()
    local p = assert.replay(ledger, narrow)
    p.attempts_per_success.at_most(1)
    p.retried_success_ratio.at_most(0)
    p.throttled.at_most(0)
    assert.has_error(function() p.successes.at_least(7) end)
  end)

  it("negated, passes when the bound is breached", function()
    assert.is_not.replay(ledger, same).attempts_per_success.at_most(1.3)
    assert.is_not.replay(ledger, same).attempts_per_success.at_least(1.5)
    local ok, err = pcall(function() assert.is_not.replay(ledger, same).attempts_per_success.at_most(1.4) end)
    assert.is_false(ok)
    assert.matches("predict attempts_per_success not at most 1.4: predicted 1.4000.", tostring(err), 1, true)
  end)

  it("fails a ratio it cannot judge instead of passing it: no predicted success", function()
    local none = h.write_file(tmp .. "/none.jsonl", gen.line{ ts_ms = T0, route = "GET /x/{i}", method = "GET",
      path = "/x/1", attempts = 1, elapsed_ms = 20, outcome = "terminal", reason = "status-not-retryable", ok = false,
      status = 500, tries = { { "HTTP_500", 500, 20, 0, "status-not-retryable" } } })
    local ok, err = pcall(function() assert.replay(none, same).attempts_per_success.at_most(1.3) end)
    assert.is_false(ok)
    assert.matches("predict attempts_per_success at most 1.3: cannot be judged: 0 predicted successes", tostring(err), 1, true)
    assert.has_error(function() assert.is_not.replay(none, same).attempts_per_success.at_most(1.3) end)
    assert.replay(none, same).success_rate.at_most(0) -- over requests: judged
  end)

  it("keeps the thresholds form", function()
    assert.replay(ledger, same, { max_attempts_per_success = 1.4, min_successes = 1 })
    assert.is_not.replay(ledger, same, { max_attempts_per_success = 1.3, min_successes = 1 })
  end)

  it("refuses misuse: an unknown figure, a figure that is no number, a bound that is no number", function()
    for _, figure in ipairs({ "attempts_per_sucess", "reasons", "by_route" }) do
      local ok, err = pcall(function() return assert.replay(ledger, same)[figure] end)
      assert.is_false(ok)
      assert.matches("^[^\n]*26%-replay_report_spec%.lua:%d+: bad figure '" .. figure .. "' of assert.replay %(a "
        .. "number of the predicted table expected: attempts, attempts_per_request, attempts_per_success, [%w_, ]*"
        .. "extra_attempts, [%w_, ]*%)$", err)
    end
    assert.has_error(function() assert.replay(ledger, same).attempts.at_most("3") end,
      "bad argument #1 to 'at_most' (number expected, got string)")
    assert.has_error(function() assert.replay(ledger, same).attempts.at_most(0 / 0) end,
      "bad argument #1 to 'at_most' (number expected, got NaN)")
  end)
end)
