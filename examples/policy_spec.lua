-- A user's busted spec for examples/service.lock.json: it pins what the jobs service's retry policy does, in
-- the words of the people who signed it. Run it from the project root:
--   lua5.4 /usr/bin/busted examples/policy_spec.lua   (or luajit /usr/bin/busted …: any Lua 5.1–5.4)
-- (the project's .busted supplies lpath/cpath; in your own project point them at retryfreeze's install).
-- The assertions decide with a jitter RNG seeded with 1, as `retryfreeze decide --seed 1` does.
local rf = require "retryfreeze"
local signoff = require "retryfreeze.signoff"
require "retryfreeze.spec" -- registers assert.retries, stops, waits, budget_allows, not_widened, decision_table

local LOCK = "examples/service.lock.json"

describe("the jobs service's retry policy", function()
  local policy = assert(rf.load(LOCK))

  local function facts(t)
    t.attempts = t.attempts or 1
    t.elapsed_ms = t.elapsed_ms or 100
    return t
  end

  describe("job reads (GET /v1/jobs/{id})", function()
    it("retry a 503 up to the fourth attempt", function()
      assert.retries(policy, facts { method = "GET", path = "/v1/jobs/42", status = 503, attempts = 3 })
      assert.stops(policy, facts { method = "GET", path = "/v1/jobs/42", status = 503, attempts = 4 }, "max-attempts")
    end)

    it("back off with full jitter under a 50 ms base (35 ms with seed 1)", function()
      assert.waits(policy, facts { method = "GET", path = "/v1/jobs/42", status = 502 }, 35)
    end)

    it("never retry a 404", function()
      assert.stops(policy, facts { method = "GET", path = "/v1/jobs/42", status = 404 }, "status-not-retryable")
      assert.is_not.retries(policy, facts { method = "GET", path = "/v1/jobs/42", status = 404 })
    end)
  end)

  describe("job creation (POST /v1/jobs)", function()
    it("retries only with an idempotency key", function()
      assert.retries(policy, facts { method = "POST", path = "/v1/jobs", status = 503, idempotency_key = "k1" })
      assert.stops(policy, facts { method = "POST", path = "/v1/jobs", status = 503 }, "mutating-without-idempotency")
    end)

    it("honors a Retry-After up to 2 s and stops beyond it", function()
      assert.waits(policy, facts { method = "POST", path = "/v1/jobs", status = 429, retry_after = "2",
        idempotency_key = "k1" }, 2000)
      assert.stops(policy, facts { method = "POST", path = "/v1/jobs", status = 429, retry_after = "3",
        idempotency_key = "k1" }, "retry-after-exceeds-budget")
    end)

    it("never retries a handler 500", function()
      assert.stops(policy, facts { method = "POST", path = "/v1/jobs", status = 500, idempotency_key = "k1" },
        "status-not-retryable")
    end)
  end)

  describe("refunds (POST /v1/refunds): money moves", function()
    it("never retry a timeout: the refund may have happened", function()
      assert.stops(policy, facts { method = "POST", path = "/v1/refunds", transport = "timeout",
        idempotency_key = "r1" }, "status-not-retryable")
    end)

    it("retry a clear refusal once", function()
      assert.retries(policy, facts { method = "POST", path = "/v1/refunds", status = 503, idempotency_key = "r1" })
      assert.stops(policy, facts { method = "POST", path = "/v1/refunds", status = 503, idempotency_key = "r1",
        attempts = 2 }, "max-attempts")
    end)
  end)

  describe("the time budget", function()
    it("gives the next attempt a full second until the last second of four", function()
      assert.budget_allows(policy, { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 2000 }, 1000)
      assert.budget_allows(policy, { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 3500 }, 500)
      assert.is_not.budget_allows(policy, { method = "POST", path = "/v1/jobs", attempts = 1, elapsed_ms = 3900 })
    end)
  end)

  it("passes its decision table, every row as `retryfreeze check --table` runs it", function()
    assert.decision_table(policy, "examples/service-decisions.tsv")
  end)

  it("has no route for what the service does not serve", function()
    assert.stops(policy, facts { method = "PUT", path = "/v1/jobs/42", status = 503 }, "no-route")
  end)

  it("does not widen the last pairing sign-off (narrowing is free, widening needs a new sign-off)", function()
    local log_path = signoff.default_log(LOCK)
    local log = assert(signoff.read(log_path))
    local latest = signoff.latest(log, signoff.lock_name(LOCK, log_path))
    local signed = assert(signoff.signed_policy(assert(latest, "no sign-off yet")))
    assert.not_widened(signed, policy)
  end)
end)
