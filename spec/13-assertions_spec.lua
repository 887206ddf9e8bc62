-- retryfreeze.spec: the busted assertions, their failure messages, and examples/policy_spec.lua.
local h = require "spec.helper"
local rf = require "retryfreeze"
local json = require "retryfreeze.json"
local rfspec = require "retryfreeze.spec"

local svc = assert(rf.load("examples/service.lock.json"))
local desk = assert(rf.load(h.desk_lock))

local post_500 = { method = "POST", path = "/v1/jobs", status = 500, attempts = 1 }
local post_503 = { method = "POST", path = "/v1/jobs", status = 503, attempts = 1, idempotency_key = "k" }
local stop_500 = "stop status-not-retryable class=HTTP_500 retry_after=absent route=POST /v1/jobs"
-- The seed-1 backoff of the first retry on POST /v1/jobs (full jitter over 50 ms), from the engine itself.
local D = svc:decide(post_503, rf.rng(1)).delay_ms
local retry_503 = "retry pinned-status delay_ms=" .. D .. " timeout_ms=1000 class=HTTP_503 retry_after=absent "
  .. "route=POST /v1/jobs"

-- The message an assertion failed with (busted wraps assertion failures in a table), without "file:line: ".
local function failure_of(fn)
  local ok, e = pcall(fn)
  if ok then return nil end
  local msg = type(e) == "table" and e.message or tostring(e)
  return (tostring(msg):gsub("^[^\n]-:%d+: ", "", 1))
end

-- Compares a failure message with `==`, so a mismatch shows both texts.
local function fails_with(fn, expected) assert.equal(expected, failure_of(fn)) end

describe("retryfreeze.spec assertions", function()
  it("decide with seed 1", function()
    assert.equal(1, rfspec.SEED)
    assert.equal(D, rfspec.decide(svc, post_503).delay_ms)
    assert.is_true(D >= 0 and D <= 50)
  end)

  describe("pass when the policy agrees", function()
    it("retries, stops, waits, budget_allows, not_widened", function()
      assert.retries(svc, post_503)
      assert.stops(svc, post_500)
      assert.stops(svc, post_500, "status-not-retryable")
      assert.waits(svc, post_503, D)
      assert.budget_allows(svc, { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 3500 })
      assert.budget_allows(svc, { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 3500 }, 500)
      assert.not_widened(svc, svc)
    end)

    it("and their negations", function()
      assert.is_not.retries(svc, post_500)
      assert.is_not.stops(svc, post_503)
      assert.is_not.stops(svc, post_500, "deadline")
      assert.is_not.waits(svc, post_503, D + 1)
      assert.is_not.budget_allows(svc, { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 3900 })
      assert.is_not.budget_allows(svc, { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 3500 }, 1000)
      assert.is_not.not_widened(desk, svc)
    end)
  end)

  describe("facts with hints (the route's wait headers)", function()
    local hinted = assert(rf.load_string([[{"endpoint": "GET /x", "maxAttempts": 3, "perAttemptTimeoutMs": 1000,
      "totalBudgetMs": 60000, "retryable": ["HTTP_429", "UNKNOWN"], "classLimits": {"UNKNOWN": 2},
      "retryAfter": {"headers": ["grpc-retry-pushback-ms", "x-ratelimit-reset"]}}]]))
    local get_429 = { method = "GET", path = "/x", status = 429, now_ms = 1700000000000 }

    it("waits and stops by them", function()
      assert.waits(hinted, { method = "GET", path = "/x", status = 429, hints = { ["grpc-retry-pushback-ms"] = "40" } },
        40)
      assert.waits(hinted, { method = "GET", path = "/x", status = 429, now_ms = 1700000000000,
        hints = { ["x-ratelimit-reset"] = "1700000002" } }, 2000)
      assert.stops(hinted, { method = "GET", path = "/x", status = 429, hints = { ["grpc-retry-pushback-ms"] = "-1" } },
        "server-pushback")
      assert.stops(hinted, { method = "GET", path = "/x", transport = "other", attempts = 2 }, "class-limit")
      assert.retries(hinted, { method = "GET", path = "/x", transport = "other", attempts = 1 })
    end)

    it("show them in a failure message", function()
      get_429.hints = { ["grpc-retry-pushback-ms"] = "-1" }
      fails_with(function() assert.retries(hinted, get_429) end,
        "Expected the policy to retry.\nFacts: method=GET path=/x status=429 now_ms=1700000000000 "
        .. "hint:grpc-retry-pushback-ms=-1\nVerdict: stop server-pushback class=HTTP_429 retry_after=honored "
        .. "retry_after_header=grpc-retry-pushback-ms route=GET /x")
    end)

    it("raise on a hint the route does not read (misuse, not a failure)", function()
      assert.has_error(function()
        assert.retries(hinted, { method = "GET", path = "/x", status = 429, hints = { ["retry-after-ms"] = "1" } })
      end)
    end)
  end)

  describe("failure messages show the facts and the verdict", function()
    it("retries", function()
      fails_with(function() assert.retries(svc, post_500) end,
        "Expected the policy to retry.\nFacts: method=POST path=/v1/jobs status=500 attempts=1\nVerdict: " .. stop_500)
    end)

    it("is_not.retries", function()
      fails_with(function() assert.is_not.retries(svc, post_503) end,
        "Expected the policy not to retry.\nFacts: method=POST path=/v1/jobs status=503 attempts=1 idempotency_key=k\n"
        .. "Verdict: " .. retry_503)
    end)

    it("stops, with and without a reason", function()
      fails_with(function() assert.stops(svc, post_500, "max-attempts") end,
        "Expected the policy to stop with reason max-attempts.\nFacts: method=POST path=/v1/jobs status=500 "
        .. "attempts=1\nVerdict: " .. stop_500)
      fails_with(function() assert.stops(svc, post_503) end,
        "Expected the policy to stop (any reason).\nFacts: method=POST path=/v1/jobs status=503 attempts=1 "
        .. "idempotency_key=k\nVerdict: " .. retry_503)
    end)

    it("is_not.stops", function()
      fails_with(function() assert.is_not.stops(svc, post_500, "status-not-retryable") end,
        "Expected the policy not to stop with reason status-not-retryable.\nFacts: method=POST path=/v1/jobs "
        .. "status=500 attempts=1\nVerdict: " .. stop_500)
    end)

    it("waits and is_not.waits", function()
      fails_with(function() assert.waits(svc, post_503, D + 1) end,
        "Expected the policy to retry after " .. (D + 1) .. " ms.\nFacts: method=POST path=/v1/jobs status=503 "
        .. "attempts=1 "
        .. "idempotency_key=k\nVerdict: " .. retry_503)
      fails_with(function() assert.is_not.waits(svc, post_503, D) end,
        "Expected the policy not to retry after " .. D .. " ms.\nFacts: method=POST path=/v1/jobs status=503 "
        .. "attempts=1 "
        .. "idempotency_key=k\nVerdict: " .. retry_503)
      fails_with(function() assert.waits(svc, post_500, 0) end,
        "Expected the policy to retry after 0 ms.\nFacts: method=POST path=/v1/jobs status=500 attempts=1\n"
        .. "Verdict: " .. stop_500)
    end)

    it("budget_allows and is_not.budget_allows", function()
      local late = { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 3900 }
      fails_with(function() assert.budget_allows(svc, late) end,
        "Expected the budget to allow the next attempt (any timeout).\nAttempt: method=POST path=/v1/jobs attempts=1 "
        .. "elapsed_ms=3900\nBudget: allowed=false reason=deadline timeout_ms=0 route=POST /v1/jobs")
      local early = { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 2000 }
      fails_with(function() assert.budget_allows(svc, early, 900) end,
        "Expected the budget to allow the next attempt with timeout_ms 900.\nAttempt: method=POST path=/v1/jobs "
        .. "attempts=1 elapsed_ms=2000\nBudget: allowed=true reason=within-budget timeout_ms=1000 route=POST /v1/jobs")
      fails_with(function() assert.is_not.budget_allows(svc, early) end,
        "Expected the budget not to allow the next attempt (any timeout).\nAttempt: method=POST path=/v1/jobs "
        .. "attempts=1 elapsed_ms=2000\nBudget: allowed=true reason=within-budget timeout_ms=1000 route=POST /v1/jobs")
    end)

    it("not_widened lists the widening changes, then all changes", function()
      local old = assert(rf.load_string('{"endpoint":"GET /a","maxAttempts":2,"perAttemptTimeoutMs":100,'
        .. '"totalBudgetMs":500,"retryable":["HTTP_503"]}'))
      local new = assert(rf.load_string('{"endpoint":"GET /a","maxAttempts":3,"perAttemptTimeoutMs":100,'
        .. '"totalBudgetMs":400,"retryable":["HTTP_503"]}'))
      fails_with(function() assert.not_widened(old, new) end,
        "Expected the new policy not to widen the old one.\nOld: " .. old.digest .. "\nNew: " .. new.digest
        .. "\nWidening:\n  WIDENING  GET /a  maxAttempts 2 → 3\nAll changes:\n  WIDENING  GET /a  maxAttempts 2 → 3\n"
        .. "  NARROWING  GET /a  totalBudgetMs 500 → 400")
      local narrower = assert(rf.load_string('{"endpoint":"GET /a","maxAttempts":2,"perAttemptTimeoutMs":100,'
        .. '"totalBudgetMs":400,"retryable":["HTTP_503"]}'))
      fails_with(function() assert.is_not.not_widened(new, narrower) end,
        "Expected the new policy to widen the old one.\nOld: " .. new.digest .. "\nNew: " .. narrower.digest
        .. "\nWidening:\n  (none)\nAll changes:\n  NARROWING  GET /a  maxAttempts 3 → 2")
    end)

    it("puts a caller's message first", function()
      fails_with(function() assert.retries(svc, post_500, "jobs must survive a 500") end,
        "jobs must survive a 500\nExpected the policy to retry.\nFacts: method=POST path=/v1/jobs status=500 "
        .. "attempts=1\nVerdict: " .. stop_500)
    end)
  end)

  describe("misuse raises", function()
    it("a non-policy, non-table facts, a non-integer delay", function()
      assert.has_error(function() assert.retries({}, post_500) end,
        "bad argument #1 to 'retries' (policy expected, got table)")
      assert.has_error(function() assert.stops(svc, "facts") end,
        "bad argument #2 to 'stops' (facts table expected, got string)")
      assert.has_error(function() assert.waits(svc, post_503, 1.5) end,
        "bad argument #3 to 'waits' (integer milliseconds expected, got 1.5)")
      assert.has_error(function() assert.not_widened(svc, nil) end,
        "bad argument #2 to 'not_widened' (policy expected, got nil)")
    end)

    it("an unknown fact key is the engine's error", function()
      local ok, err = pcall(function() assert.retries(svc, { method = "GET", path = "/v1/jobs/1", body = "x" }) end)
      assert.is_false(ok)
      assert.matches("body", tostring(err))
    end)
  end)
end)

-- A spec could not pin hedging: `hedged` was an unknown fact of every assertion. assert.hedges pins it.
describe("assert.hedges", function()
  local hedged = assert(rf.load_string([[{"version": 1,
 "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 5000, "retryable": ["HTTP_503"]},
 "routes": [{"endpoint": "GET /quote/*", "hedging": {"maxAttempts": 3, "hedgingDelayMs": 120}},
            {"endpoint": "POST /orders", "hedging": {"maxAttempts": 2, "hedgingDelayMs": 50}},
            {"endpoint": "GET /plain"}]}]]))
  local quote = { method = "GET", path = "/quote/a" }
  local order = { method = "POST", path = "/orders" }
  local keyed = { method = "POST", path = "/orders", idempotency_key = "k1" }

  it("passes when the request is hedged (after delay_ms, if given), and its negation when it is not", function()
    assert.hedges(hedged, quote)
    assert.hedges(hedged, quote, 120)
    assert.hedges(hedged, { method = "GET", path = "/quote/a", status = 503, attempts = 1 }, 120)
    assert.hedges(hedged, keyed, 50)
    assert.hedges(hedged, { method = "POST", path = "/orders", idempotency_key = true })
    assert.is_not.hedges(hedged, order)
    assert.is_not.hedges(hedged, { method = "POST", path = "/orders", idempotency_key = false })
    assert.is_not.hedges(hedged, { method = "GET", path = "/plain" })
    assert.is_not.hedges(hedged, { method = "GET", path = "/elsewhere" })
    assert.is_not.hedges(hedged, quote, 100)
  end)

  it("fails showing the facts and the hedging the request gets", function()
    fails_with(function() assert.hedges(hedged, order) end,
      "Expected the request to be hedged (any delay).\nFacts: method=POST path=/orders\n"
      .. "Hedging: not hedged mutating-without-idempotency route=POST /orders")
    fails_with(function() assert.hedges(hedged, quote, 100) end,
      "Expected the request to be hedged with a hedging delay of 100 ms.\nFacts: method=GET path=/quote/a\n"
      .. "Hedging: hedged delay_ms=120 max_attempts=3 route=GET /quote/*")
    fails_with(function() assert.is_not.hedges(hedged, keyed) end,
      "Expected the request not to be hedged (any delay).\nFacts: method=POST path=/orders idempotency_key=k1\n"
      .. "Hedging: hedged delay_ms=50 max_attempts=2 route=POST /orders")
    fails_with(function() assert.hedges(hedged, { method = "GET", path = "/plain" }) end,
      "Expected the request to be hedged (any delay).\nFacts: method=GET path=/plain\n"
      .. "Hedging: not hedged max-attempts route=GET /plain")
  end)

  it("raises on misuse: a non-policy, facts that are not a table, a bad delay, an unknown fact", function()
    assert.has_error(function() assert.hedges({}, quote) end, "bad argument #1 to 'hedges' (policy expected, got table)")
    assert.has_error(function() assert.hedges(hedged, "GET") end,
      "bad argument #2 to 'hedges' (facts table expected, got string)")
    assert.has_error(function() assert.hedges(hedged, quote, 1.5) end,
      "bad argument #3 to 'hedges' (integer milliseconds expected, got 1.5)")
    assert.has_error(function() assert.hedges(hedged, { method = "GET", path = "/quote/a", hedged = true }) end,
      "bad argument #2 to 'hedges' (unknown fact 'hedged')")
    assert.has_error(function() assert.hedges(hedged, { method = "GET" }) end,
      "bad argument #2 to 'hedges' (facts.path must be a string)")
  end)

  it("points a hedged fact given to a verdict assertion at assert.hedges", function()
    local ok, err = pcall(function() assert.retries(hedged, { method = "GET", path = "/quote/a", status = 503,
      hedged = true }) end)
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'retries' (unknown fact 'hedged' (whether a request is hedged is "
      .. "policy:hedging(facts)'s answer, pinned by assert.hedges or a decision table's hedge column; the engine "
      .. "reads transport facts only", tostring(err), 1, true)
  end)
end)

-- A busted user had to read a TSV by hand to pin a decision table: one call now runs it.
describe("assert.decision_table", function()
  local tsv_header = table.concat({ "note", "method", "path", "status", "idempotency_key", "expect", "reason" }, "\t")
  local function table_file(...)
    local rows = { tsv_header }
    for _, r in ipairs({ ... }) do rows[#rows + 1] = table.concat(r, "\t") end
    return h.temp_file(table.concat(rows, "\n") .. "\n")
  end

  it("passes on the shipped tables, and its negation passes on a table with a failing row", function()
    assert.decision_table(desk, "examples/decisions.tsv")
    assert.decision_table(svc, "examples/service-decisions.tsv")
    local path = table_file({ "wrong", "POST", "/v1/jobs", "500", "k1", "retry", "" })
    assert.is_not.decision_table(desk, path)
    os.remove(path)
  end)

  it("fails with every failing row as check --table prints it", function()
    local path = table_file({ "fine", "POST", "/v1/jobs", "500", "k1", "stop", "status-not-retryable" },
      { "wrong retry", "POST", "/v1/jobs", "500", "k1", "retry", "" },
      { "wrong reason", "POST", "/v1/jobs", "400", "k1", "stop", "max-attempts" })
    local rows = assert(require("retryfreeze.decision_table").run(desk,
      assert(require("retryfreeze.decision_table").read(path))))
    local dt = require "retryfreeze.decision_table"
    fails_with(function() assert.decision_table(desk, path) end,
      "Expected every row of " .. path .. " to pass: 2 of 3 failed.\n" .. dt.format_failure(rows.rows[2], path)
      .. dt.format_failure(rows.rows[3], path):gsub("\n$", ""))
    fails_with(function() assert.decision_table(desk, path, "the desk table") end,
      "the desk table\nExpected every row of " .. path .. " to pass: 2 of 3 failed.\n"
      .. dt.format_failure(rows.rows[2], path) .. dt.format_failure(rows.rows[3], path):gsub("\n$", ""))
    os.remove(path)
    fails_with(function() assert.is_not.decision_table(desk, "examples/decisions.tsv") end,
      "Expected some row of examples/decisions.tsv to fail: all 22 rows passed.")
  end)

  it("raises on misuse: a non-policy, a path that is not a string, an unreadable or malformed table", function()
    assert.has_error(function() assert.decision_table({}, "examples/decisions.tsv") end,
      "bad argument #1 to 'decision_table' (policy expected, got table)")
    assert.has_error(function() assert.decision_table(desk, 5) end,
      "bad argument #2 to 'decision_table' (table file path expected, got number)")
    assert.has_error(function() assert.decision_table(desk, "no/such.tsv") end,
      "bad argument #2 to 'decision_table' (cannot open decision table no/such.tsv: No such file or directory)")
    local bad = h.temp_file(tsv_header .. "\nPOST\n")
    local ok, err = pcall(function() assert.decision_table(desk, bad) end)
    os.remove(bad)
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'decision_table' (malformed table: " .. bad .. ":2: ", err, 1, true)
    -- a row the engine refuses (a lowercase method) names its line
    local hinted = table_file({ "x", "post", "/v1/jobs", "500", "k1", "stop", "" })
    ok, err = pcall(function() assert.decision_table(desk, hinted) end)
    os.remove(hinted)
    assert.is_false(ok)
    assert.matches("malformed table: " .. hinted .. ':2: facts.method must be uppercase, got "post"', err, 1, true)
  end)
end)

describe("retryfreeze.spec misuse", function()
  it("reports a fact the engine refuses at the assertion's line, as its argument 2", function()
    local ok, err = pcall(function()
      assert.retries(svc, { method = "GET", path = "/v1/jobs/1", code = 503 })
    end)
    assert.is_false(ok)
    assert.matches("13%-assertions_spec%.lua:%d+: bad argument #2 to 'retries' %(unknown fact 'code'", err)
  end)
end)

describe("examples/policy_spec.lua", function()
  it("runs green under busted", function()
    -- arg[-1] is this Lua interpreter and arg[0] busted itself; .busted supplies lpath/cpath from RF_BUILD_DIR.
    local lua, busted = arg and arg[-1] or "lua5.4", arg and arg[0] or "busted"
    local out, err, code = h.sh(string.format("'%s' '%s' --output=json examples/policy_spec.lua", lua, busted))
    out = out .. err
    local doc = json.decode(out:match("^.-({.*})%s*$") or "")
    assert.truthy(doc, out:sub(1, 2000))
    local problems = {}
    for _, f in ipairs(doc.failures) do problems[#problems + 1] = tostring(f.message) end
    for _, e in ipairs(doc.errors) do problems[#problems + 1] = tostring(e.message) end
    assert.equal(0, #problems, table.concat(problems, "\n"))
    assert.equal(0, code)
    assert.equal(12, #doc.successes)
  end)
end)
