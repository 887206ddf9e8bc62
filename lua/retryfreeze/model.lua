--- The retry-amplification model (`retryfreeze model`): what a retry policy costs before any traffic is sent.
---
--- Assumptions (the model's whole world; docs/evidence.md explains each):
---   * every failed attempt is of a class the route retries (its `retryable` list), so a request stops only on
---     a success or after max_attempts attempts;
---   * attempts fail independently, each with the same probability p;
---   * nothing else stops a request early: no deadline (totalBudgetMs), no Retry-After longer than the budget,
---     no retry-budget throttling, no missing idempotency key — each of those only lowers the real numbers;
---   * with L layers, the same policy runs at every layer, each layer retries a failure returned by the layer
---     below, and only the innermost service fails on its own (with p per attempt).
---
--- With n = max_attempts:
---   attempts per request  E(p)  = 1 + p + … + p^(n−1) = (1 − p^n) / (1 − p)   (n when p = 1)
---   success probability   S(p)  = 1 − p^n
---   attempts per success        = E(p) / S(p)     (math.huge when S = 0)
---   worst case                  = n
---   layered worst case          = n^L             (every attempt at every layer fails)
---   layered expected            = E(q0)·E(q1)·…·E(q(L−1)), q0 = p, q(i+1) = q(i)^n: the attempts that reach the
---                                 innermost service per user request (layer i's call fails with q(i))
---   layered success             = 1 − q(L−1)^n = 1 − p^(n^L)
--- With propagation at every layer (the lock's `propagation`, docs/lock.md): the innermost layer retries, and when
--- it gives up it tells its caller it is overloaded, so no outer layer retries; an inner layer called with an
--- attempt above 1 makes one attempt. The innermost service then sees one layer's retries:
---   propagated worst case       = n               (not n^L)
---   propagated expected         = E(p)
---   propagated success          = S(p) = 1 − p^n  (the price: the outer layers' retries are given up)
--- Hedging (the lock's hedging, H = hedging.maxAttempts, D = hedgingDelayMs) is load with no failure at all: with a
--- share s of attempts slow (unanswered until the last hedge may start, (H − 1)·D after the first) and the others
--- answered within D, independently, hedge k + 1 starts at k·D when the k attempts before it are all slow:
---   hedged attempts per request = 1 + s + … + s^(H−1) = E(s) for n = H
---   hedges per request          = E(s) − 1
---   won by a hedge              = s − s^H         (the first attempt slow, a hedge not)
---   worst case                  = H
local math = require("retryfreeze.compat").math
local M = {}

-- The argument checks of predict and hedging, worded as Lua's own "bad argument" errors; each raises at the
-- caller of the function it checks for (level 3: past the check and that function).
local function check_table(fname, args)
  if type(args) ~= "table" then
    error("bad argument #1 to '" .. fname .. "' (table expected, got " .. type(args) .. ")", 3)
  end
end

local function check_integer(fname, name, v, lo, hi)
  if math.type(v) ~= "integer" or v < lo or v > hi then
    error(("bad argument '%s' to '%s' (integer %d..%d expected, got %s)"):format(name, fname, lo, hi, tostring(v)), 3)
  end
end

local function check_share(fname, name, v)
  if type(v) ~= "number" or not (v >= 0 and v <= 1) then
    error(("bad argument '%s' to '%s' (number 0..1 expected, got %s)"):format(name, fname, tostring(v)), 3)
  end
end

local function expected_attempts(p, n)
  local e, term = 0, 1
  for _ = 1, n do
    e = e + term
    term = term * p
  end
  return e
end

--- Predicts a policy's load for independent failures.
-- @param args table: {max_attempts = integer 1..100 (counting the first attempt), p = number 0..1 (failure
--   probability of one attempt), layers = integer 1..16 (default 1: no nesting)}
-- @return {attempts_per_request, success_probability, attempts_per_success, worst_case (integer),
--   layered_worst_case (integer, n^L), layered_expected (attempts reaching the innermost service per user
--   request), layered_success_probability, layered_attempts_per_success, propagated_worst_case (integer, n),
--   propagated_expected, propagated_success_probability, propagated_attempts_per_success (the same L layers with
--   propagation at every one), layers, max_attempts, p};
--   attempts per success is math.huge when the success probability is 0. Raises on a bad argument.
function M.predict(args)
  check_table("predict", args)
  local n, p, layers = args.max_attempts, args.p, args.layers or 1
  check_integer("predict", "max_attempts", n, 1, 100)
  check_share("predict", "p", p)
  check_integer("predict", "layers", layers, 1, 16)
  local per_request = expected_attempts(p, n)
  local success = 1 - p ^ n
  local layered, q = 1, p
  for _ = 1, layers do
    layered = layered * expected_attempts(q, n)
    q = q ^ n
  end
  local layered_success = 1 - q
  local worst = 1
  for _ = 1, layers do worst = worst * n end
  return {
    max_attempts = n, p = p, layers = layers,
    attempts_per_request = per_request,
    success_probability = success,
    attempts_per_success = success > 0 and per_request / success or math.huge,
    worst_case = n,
    layered_worst_case = worst,
    layered_expected = layered,
    layered_success_probability = layered_success,
    layered_attempts_per_success = layered_success > 0 and layered / layered_success or math.huge,
    -- propagation: one layer's retries reach the service, whatever L (the innermost's, the others told to stop)
    propagated_worst_case = n,
    propagated_expected = per_request,
    propagated_success_probability = success,
    propagated_attempts_per_success = success > 0 and per_request / success or math.huge,
  }
end

--- Predicts a hedged route's load for a slow share (the formulas above).
-- @param args table: {max_attempts = integer 2..10 (hedging.maxAttempts, the first attempt included),
--   slow_share = number 0..1 (the share of attempts with no answer until the last hedge may start; the others
--   answer within hedgingDelayMs)}
-- @return {attempts_per_request, hedges_per_request, hedge_win_rate (the share of requests a hedge wins),
--   worst_case (integer: max_attempts), max_attempts, slow_share}; the names are those of `stats --json`.
--   Raises on a bad argument.
function M.hedging(args)
  check_table("hedging", args)
  local n, s = args.max_attempts, args.slow_share
  check_integer("hedging", "max_attempts", n, 2, 10)
  check_share("hedging", "slow_share", s)
  local per_request = expected_attempts(s, n)
  return { max_attempts = n, slow_share = s, attempts_per_request = per_request,
    hedges_per_request = per_request - 1, hedge_win_rate = s - s ^ n, worst_case = n }
end

--- The failure rates of the model's table: 0.1, 0.2, …, 0.9.
M.table_rates = { 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9 }

return M
