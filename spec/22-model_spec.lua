-- retryfreeze.model and `retryfreeze model`: the retry-amplification arithmetic (1.39 attempts per request and
-- 1.43 per success at p = 0.3 with 3 attempts; 27 attempts for 3 layers × 3 attempts), the table over
-- p = 0.1…0.9, route selection, and the engine's own decisions agreeing with the model.
local rf = require "retryfreeze"
local h = require "spec.helper"
local json = require "retryfreeze.json"
local model = require "retryfreeze.model"

local function near(expected, actual, tol)
  assert.is_true(math.abs(expected - actual) <= (tol or 1e-12), string.format("%.15g vs %.15g", expected, actual))
end

local THREE = '{"endpoint":"POST /v1/jobs","maxAttempts":3,"perAttemptTimeoutMs":1000,"totalBudgetMs":60000,'
  .. '"retryable":["HTTP_503"]}'

describe("model.predict", function()
  it("gives 1.39 attempts per request and 1.43 per success for p = 0.3 and 3 attempts", function()
    local m = model.predict{ max_attempts = 3, p = 0.3 }
    near(1.39, m.attempts_per_request)
    near(0.973, m.success_probability)
    near(1.39 / 0.973, m.attempts_per_success)
    assert.equal("1.39 1.43", string.format("%.2f %.2f", m.attempts_per_request, m.attempts_per_success))
    assert.same({ 3, 3, 1, 3 }, { m.worst_case, m.layered_worst_case, m.layers, m.max_attempts })
    near(m.attempts_per_request, m.layered_expected)
  end)

  it("multiplies the worst case over layers: 3 layers × 3 attempts = 27", function()
    local m = model.predict{ max_attempts = 3, p = 0.3, layers = 3 }
    assert.equal(27, m.layered_worst_case)
    assert.equal(3, m.worst_case)
    -- Nested retries of an independent innermost failure act as one loop of n^L attempts.
    near((1 - 0.3 ^ 27) / 0.7, m.layered_expected)
    near(1.39 * (1 + 0.027 + 0.027 ^ 2) * (1 + 0.3 ^ 9 + 0.3 ^ 18), m.layered_expected)
    near(1 - 0.3 ^ 27, m.layered_success_probability)
    assert.equal(10 ^ 4, model.predict{ max_attempts = 10, p = 1, layers = 4 }.layered_expected)
  end)

  it("with propagation, one layer's retries reach the innermost service: 3, not 27, for 3 × 3", function()
    local m = model.predict{ max_attempts = 3, p = 0.3, layers = 3 }
    assert.same({ 27, 3 }, { m.layered_worst_case, m.propagated_worst_case })
    near(1.39, m.propagated_expected)
    near(0.973, m.propagated_success_probability)
    near(1.39 / 0.973, m.propagated_attempts_per_success)
    m = model.predict{ max_attempts = 4, p = 1, layers = 3 }
    assert.same({ 64, 4, 4, 0, math.huge }, { m.layered_expected, m.propagated_worst_case, m.propagated_expected,
      m.propagated_success_probability, m.propagated_attempts_per_success })
  end)

  it("agrees with the engine's decisions across 3 layers, with and without propagation", function()
    -- Each layer decides with policy:decide. Layer i's attempt calls layer i + 1, which stops as its verdicts say
    -- and, with propagation, tells its caller overloaded when it stopped exhausted or upstream-overloaded (the
    -- response's overloaded, docs/lock.md); the innermost layer's attempts reach the service, failing with p.
    local plain = assert(rf.load_string(THREE))
    local propagated = assert(rf.load_string(THREE:sub(1, -2) .. ',"propagation":{}}'))
    local function run(policy, p, layers, requests)
      local rng = rf.rng(3)
      math.randomseed(11)
      local service, worst, successes = 0, 0, 0
      local function layer(i, inbound_attempt) -- → status, overloaded
        local a = 0
        while true do
          a = a + 1
          local status, overloaded
          if i == layers then
            service = service + 1
            status, overloaded = math.random() < p and 503 or 200, false
          else
            status, overloaded = layer(i + 1, a)
          end
          local v = policy:decide({ method = "POST", path = "/v1/jobs", status = status, idempotency_key = "k",
            attempts = a, elapsed_ms = 0, overloaded = overloaded, inbound_attempt = inbound_attempt }, rng)
          if not v.retry then
            local tells = v.reason == "max-attempts" or v.reason == "upstream-overloaded"
            return status, tells
          end
        end
      end
      for _ = 1, requests do
        local before = service
        if layer(1, 0) == 200 then successes = successes + 1 end
        if service - before > worst then worst = service - before end
      end
      return service / requests, worst, successes / requests
    end
    local m = model.predict{ max_attempts = 3, p = 0.9, layers = 3 }
    local mean, worst, success = run(plain, 0.9, 3, 4000)
    near(m.layered_expected, mean, 0.4) -- the innermost attempts' sd is under 9: 0.14 standard error over 4000
    assert.equal(27, worst)
    near(m.layered_success_probability, success, 0.02)
    mean, worst, success = run(propagated, 0.9, 3, 4000)
    near(m.propagated_expected, mean, 0.03)
    assert.equal(3, worst)
    near(m.propagated_success_probability, success, 0.02)
  end)

  it("handles the ends: p = 0 is one attempt, p = 1 is the worst case with no success", function()
    local m = model.predict{ max_attempts = 4, p = 0 }
    assert.same({ 1, 1, 1 }, { m.attempts_per_request, m.success_probability, m.attempts_per_success })
    m = model.predict{ max_attempts = 4, p = 1, layers = 2 }
    assert.same({ 4, 0, math.huge, 16, 16, 0 }, { m.attempts_per_request, m.success_probability, m.attempts_per_success,
      m.layered_worst_case, m.layered_expected, m.layered_success_probability })
    m = model.predict{ max_attempts = 1, p = 0.5 }
    assert.same({ 1, 0.5, 2 }, { m.attempts_per_request, m.success_probability, m.attempts_per_success })
  end)

  it("raises on bad arguments", function()
    assert.has_error(function() model.predict{ max_attempts = 0, p = 0.1 } end,
      "bad argument 'max_attempts' to 'predict' (integer 1..100 expected, got 0)")
    assert.has_error(function() model.predict{ max_attempts = 3, p = 1.5 } end,
      "bad argument 'p' to 'predict' (number 0..1 expected, got 1.5)")
    assert.has_error(function() model.predict{ max_attempts = 3, p = 0 / 0 } end)
    assert.has_error(function() model.predict{ max_attempts = 3, p = 0.1, layers = 2.5 } end,
      "bad argument 'layers' to 'predict' (integer 1..16 expected, got 2.5)")
    assert.has_error(function() model.predict(3) end, "bad argument #1 to 'predict' (table expected, got number)")
  end)

  it("agrees with the engine's own decisions on independent retryable failures", function()
    -- Every attempt fails with 503 (retryable, keyed) with probability p; policy:decide says when to stop.
    local policy = assert(rf.load_string(THREE))
    local rng = rf.rng(1)
    math.randomseed(7)
    local n, attempts, successes = 20000, 0, 0
    for _ = 1, n do
      local a = 0
      while true do
        a = a + 1
        local status = math.random() < 0.3 and 503 or 200
        local v = policy:decide({ method = "POST", path = "/v1/jobs", status = status, idempotency_key = "k",
          attempts = a, elapsed_ms = 0 }, rng)
        if v.reason == "success" then successes = successes + 1 end
        if not v.retry then break end
      end
      attempts = attempts + a
    end
    local m = model.predict{ max_attempts = 3, p = 0.3 }
    -- Standard error of the mean attempts is sqrt(0.418 / 20000) = 0.0046; 0.02 is over 4 of them.
    near(m.attempts_per_request, attempts / n, 0.02)
    near(m.success_probability, successes / n, 0.01)
  end)
end)

describe("retryfreeze model", function()
  local three
  setup(function() three = h.temp_file(THREE) end)
  teardown(function() os.remove(three) end)

  it("prints 1.39 attempts per request and 1.43 per success at --failure-rate 0.3", function()
    local out, err, code = h.run_cli("model", three, "--failure-rate", "0.3")
    assert.equal(0, code, err)
    h.assert_holds(out, {
      "maxAttempts 3: POST /v1/jobs\n  at p = 0.3:\n",
      "    attempts per request       1.39\n",
      "    success probability        97.30%\n",
      "    attempts per success       1.43\n",
      "    worst case                 3 attempts per request\n",
      "assumes: every failed attempt is of a retryable class and fails independently",
    })
  end)

  it("prints the table over p = 0.1…0.9", function()
    local out = h.run_cli("model", three)
    local rows = {}
    for row in out:gmatch("\n    (0%.%d[^\n]*)") do rows[#rows + 1] = row:gsub("%s+", " ") end
    assert.same({
      "0.1 1.11 99.90% 1.11 3", "0.2 1.24 99.20% 1.25 3", "0.3 1.39 97.30% 1.43 3", "0.4 1.56 93.60% 1.67 3",
      "0.5 1.75 87.50% 2.00 3", "0.6 1.96 78.40% 2.50 3", "0.7 2.19 65.70% 3.33 3", "0.8 2.44 48.80% 5.00 3",
      "0.9 2.71 27.10% 10.00 3" }, rows)
    assert.is_nil(out:find("at p =", 1, true))
  end)

  it("multiplies over --layers: 27 attempts per user request for 3 × 3", function()
    local out, _, code = h.run_cli("model", three, "--failure-rate", "0.3", "--layers", "3")
    assert.equal(0, code)
    assert.matches("    with 3 layers: worst case  27 attempts per user request (3^3)\n", out, 1, true)
    assert.matches("    with 3 layers: expected    1.43 attempts at the innermost service per user request\n", out, 1, true)
    assert.matches("\n    0%.9 +2%.71 +27%.10%% +10%.00 +3 +9%.42 +94%.19%% +27 +2%.71 +27%.10%% +3\n", out)
  end)

  it("prints the propagated case beside it: 27 without propagation, 3 with it, for 3 × 3", function()
    local out, _, code = h.run_cli("model", three, "--failure-rate", "0.3", "--layers", "3")
    assert.equal(0, code)
    h.assert_holds(out, {
      "    with 3 layers: worst case  27 attempts per user request (3^3)\n",
      "    propagated: worst case     3 attempts per user request (one layer retries)\n",
      "    propagated: expected       1.39 attempts at the innermost service per user request\n",
      "    propagated: success        97.30%\n",
      "   3 layers:  expected   success   worst   propagated:  expected   success   worst\n",
    })
    -- one layer: nothing to propagate across, no such column
    assert.is_nil(h.run_cli("model", three):find("propagated", 1, true))
  end)

  it("groups a multi-route lock's routes by maxAttempts and picks one with --route", function()
    local out, _, code = h.run_cli("model", "examples/service.lock.json", "--failure-rate", "0.5")
    assert.equal(0, code)
    h.assert_holds(out, {
      "\nmaxAttempts 2: DELETE /v1/jobs/{id}, GET /v1/*, POST /v1/refunds\n",
      "\nmaxAttempts 3: POST /v1/jobs\n",
      "\nmaxAttempts 4: GET /v1/jobs/{id}\n",
    })
    out = h.run_cli("model", "examples/service.lock.json", "--route", "GET /v1/jobs/42", "--failure-rate", "0.5")
    assert.matches("\nmaxAttempts 4: GET /v1/jobs/{id}\n  at p = 0.5:\n    attempts per request       1.88\n", out, 1, true)
    assert.is_nil(out:find("maxAttempts 2", 1, true))
    out = h.run_cli("model", "examples/service.lock.json", "--route", "POST /v1/refunds")
    assert.matches("\nmaxAttempts 2: POST /v1/refunds\n", out, 1, true)
  end)

  it("notes a route that retries nothing", function()
    local none = h.temp_file('{"endpoint":"GET /x","maxAttempts":3,"perAttemptTimeoutMs":100,"totalBudgetMs":300,'
      .. '"retryable":[]}')
    local out = h.run_cli("model", none)
    os.remove(none)
    assert.matches("note: GET /x retries no class: it makes 1 attempt per request whatever p is\n", out, 1, true)
  end)

  it("counts a hedged route's hedges as load at a slow share, and refuses to guess one", function()
    local hedged = h.temp_file('{"endpoint":"GET /x","maxAttempts":3,"perAttemptTimeoutMs":1000,"totalBudgetMs":3000,'
      .. '"retryable":["HTTP_503"],"hedging":{"maxAttempts":3,"hedgingDelayMs":50}}')
    local _, err, code = h.run_cli("model", hedged)
    assert.equal(2, code)
    assert.matches("GET /x hedges (hedging maxAttempts 3, hedgingDelayMs 50): give --slow-share S, the share of "
      .. "attempts unanswered until its last hedge may start (100 ms), to count its hedges as load", err, 1, true)
    local out
    out, err, code = h.run_cli("model", hedged, "--slow-share", "0.1")
    assert.equal(0, code, err)
    -- s = 0.1, H = 3: 1 + 0.1 + 0.01 attempts, 0.11 hedges, 0.1 − 0.001 won by a hedge
    assert.matches("\nhedging GET /x: maxAttempts 3, hedgingDelayMs 50, at slow share s = 0.1\n"
      .. "  (a share s of attempts unanswered until 100 ms, the others answered within 50 ms, independently):\n"
      .. "    attempts per request       1.11  (1 + s + ... + s^2, even with no failure)\n"
      .. "    hedges per request         0.11  (s + ... + s^2)\n"
      .. "    won by a hedge             9.90%  (s - s^3: the first attempt slow, a hedge not)\n"
      .. "    worst case                 3 attempts per request", out, 1, true)
    out, err, code = h.run_cli("model", hedged, "--slow-share", "0.5", "--json")
    os.remove(hedged)
    assert.equal(0, code, err)
    local doc = require("retryfreeze.json").decode(out)
    assert.equal(0.5, doc.slow_share)
    local m = doc.hedging[1]
    assert.same({ "GET /x", 3, 50, 3 }, { m.route, m.max_attempts, m.hedging_delay_ms, m.worst_case })
    near(1.75, m.attempts_per_request)
    near(0.75, m.hedges_per_request)
    near(0.375, m.hedge_win_rate)
  end)

  it("models hedging as retryfreeze.model.hedging: E(s) for n = hedging.maxAttempts", function()
    local m = model.hedging{ max_attempts = 2, slow_share = 0.05 }
    near(1.05, m.attempts_per_request)
    near(0.05, m.hedges_per_request)
    near(0.05 - 0.0025, m.hedge_win_rate)
    m = model.hedging{ max_attempts = 4, slow_share = 1 }
    assert.same({ 4, 3, 0 }, { m.attempts_per_request, m.hedges_per_request, m.hedge_win_rate })
    assert.has_error(function() model.hedging{ max_attempts = 1, slow_share = 0.1 } end,
      "bad argument 'max_attempts' to 'hedging' (integer 2..10 expected, got 1)")
    assert.has_error(function() model.hedging{ max_attempts = 3, slow_share = 1.5 } end,
      "bad argument 'slow_share' to 'hedging' (number 0..1 expected, got 1.5)")
  end)

  it("prints one JSON object with --json", function()
    local out, _, code = h.run_cli("model", three, "--failure-rate", "0.3", "--layers", "3", "--json")
    assert.equal(0, code)
    assert.equal(1, select(2, out:gsub("\n", "")))
    assert.matches('^{"lock":"[^"]+","digest":"sha256:%x+","layers":3,"failure_rate":', out)
    assert.equal(0.3, tonumber(out:match('"failure_rate":([^,]+)')))
    local prediction = out:match('"max_attempts":3,"routes":%["POST /v1/jobs"%],"prediction":(%b{})')
    assert.matches('"layered_worst_case":27,', prediction, 1, true)
    near(1.39, tonumber(prediction:match('"attempts_per_request":([^,]+)')))
    near(1.39 / 0.973, tonumber(prediction:match('"attempts_per_success":([^,]+)')))
    local _, rows = out:match('"table":(%b[])'):gsub('"worst_case":3', "")
    assert.equal(9, rows)
  end)

  it("accounts for class limits: --class takes each route's attempts for that class from the engine", function()
    local lock = h.temp_file([[{"version": 1, "defaults": {"perAttemptTimeoutMs": 1000, "totalBudgetMs": 60000,
      "retryable": ["HTTP_503", "UNKNOWN", "TIMEOUT"]}, "routes": [
      {"endpoint": "GET /a/{id}", "maxAttempts": 4, "classLimits": {"UNKNOWN": 2, "HTTP_5XX": 3}},
      {"endpoint": "POST /b/*", "maxAttempts": 3}]}]])
    local out, _, code = h.run_cli("model", lock)
    assert.equal(0, code)
    assert.matches("note: GET /a/{id} limits classes (classLimits): HTTP_5XX at most 3, UNKNOWN at most 2 of its 4 "
      .. "attempts; --class C models one class\n", out, 1, true)
    out, _, code = h.run_cli("model", lock, "--class", "UNKNOWN", "--failure-rate", "0.5")
    assert.equal(0, code)
    assert.matches("assumes: every failed attempt is of class UNKNOWN and fails independently", out, 1, true)
    assert.matches("note: GET /a/{id}: a UNKNOWN failure gets 2 of its 4 attempts (class-limit)\n", out, 1, true)
    -- 2 attempts at p = 0.5: 1 + 0.5 = 1.50 per request, 75% success.
    assert.matches("attempts for UNKNOWN 2: GET /a/{id}\n  at p = 0.5:\n    attempts per request       1.50\n"
      .. "    success probability        75.00%\n", out, 1, true)
    assert.matches("attempts for UNKNOWN 3: POST /b/*\n", out, 1, true)
    -- A specific status under a family limit: HTTP_503 gets the HTTP_5XX limit; both routes then make 3.
    local doc = json.decode((h.run_cli("model", lock, "--class", "HTTP_503", "--json")))
    assert.equal("HTTP_503", doc.class)
    assert.equal(1, #doc.models)
    assert.same({ 3, { "GET /a/{id}", "POST /b/*" } }, { doc.models[1].max_attempts, doc.models[1].routes })
    -- A class the route does not retry: 1 attempt.
    out = h.run_cli("model", lock, "--class", "HTTP_404")
    assert.matches("attempts for HTTP_404 1: GET /a/{id}, POST /b/*\n", out, 1, true)
    local err
    _, err, code = h.run_cli("model", lock, "--class", "HTTP_5XX")
    assert.equal(2, code)
    assert.matches("--class must be a failure class a verdict can have", err, 1, true)
    os.remove(lock)
  end)

  -- A route's attempts for a class come from the route itself, not from a sample path that another route may
  -- take: "/a/1" belongs to GET /a/1, and every path of GET /a/* without an empty segment to GET /a or
  -- GET /a/{id}/*.
  it("--class judges every route by its own class limits, whichever route a sample path would reach", function()
    local lock = h.temp_file([[{"version": 1, "defaults": {"perAttemptTimeoutMs": 1000, "totalBudgetMs": 60000,
      "maxAttempts": 4, "retryable": ["HTTP_503"]}, "routes": [
      {"endpoint": "GET /a/1"}, {"endpoint": "GET /a/{id}", "classLimits": {"HTTP_503": 2}},
      {"endpoint": "GET /b"}, {"endpoint": "GET /b/{id}/*"}, {"endpoint": "GET /b/*", "classLimits": {"HTTP_5XX": 3}},
      {"endpoint": "GET /c", "retryable": []}]}]])
    local out, err, code = h.run_cli("model", lock, "--class", "HTTP_503")
    os.remove(lock)
    assert.equal(0, code, err)
    h.assert_holds(out, {
      "note: GET /a/{id}: a HTTP_503 failure gets 2 of its 4 attempts (class-limit)\n",
      "note: GET /b/*: a HTTP_503 failure gets 3 of its 4 attempts (class-limit)\n",
      "note: GET /c: a HTTP_503 failure gets 1 of its 4 attempts (status-not-retryable)\n",
      "attempts for HTTP_503 1: GET /c\n",
      "attempts for HTTP_503 2: GET /a/{id}\n",
      "attempts for HTTP_503 3: GET /b/*\n",
      "attempts for HTTP_503 4: GET /a/1, GET /b, GET /b/{id}/*\n",
    })
  end)

  it("exits 2 on bad usage, an invalid lock or an unknown route", function()
    local cases = {
      { { "model" }, "expected exactly one LOCK" },
      { { "model", three, "--failure-rate", "1.2" }, "--failure-rate must be 0..1, got 1.2" },
      -- the value as written (shortest round-trip form), not tostring's 14 digits
      { { "model", three, "--failure-rate", "1.0000000000000002" }, "--failure-rate must be 0..1, got 1.0000000000000002\n" },
      { { "model", three, "--layers", "0" }, "--layers must be 1..16, got 0" },
      { { "model", three, "--layers", "2.5" }, "option --layers needs an integer, got '2.5'" },
      { { "model", "/nonexistent.lock.json" }, "retryfreeze model: cannot open lock /nonexistent.lock.json: No such file" },
      { { "model", three, "--route", "GET /v2/x" }, "no route matches 'GET /v2/x' (routes: POST /v1/jobs)" },
    }
    h.assert_usage_errors(cases)
  end)
end)
