--- Gate: thresholds over ledger stats (`retryfreeze gate`, and the gate part of `soak`). Pure functions
--- over a stats scope (retryfreeze.ledger_stats): the same numbers give the same verdict.
---
--- Thresholds (all optional; a breach is a value strictly beyond its limit), in two families by their
--- denominator (docs/evidence.md "How the gate judges"):
---   per request — judged whenever the scope has a request:
---     max_terminal_rate         requests whose outcome is "terminal" / requests (0..1)
---     max_retry_ratio           retries (attempts after the first) / requests
---     min_success_rate          successes / requests (0..1); below it is a breach
---   per success — judged only from min_successes successes on (a ratio needs a sample):
---     max_retried_success       retried successes / successes (0..1)
---     max_attempts_per_success  attempts of successful requests / successes
---   min_successes             below it the per-success ratios are skipped (said, never silent)
---   min_requests              (default 10) from this many requests on, zero successes is an outage: a
---                             breach, whatever else is set — the gate never skips it
---   forbid_reasons            final verdict reasons no request may end with; judged at any count, since
---                             one such request is already a fact, not a ratio
local rf = require "retryfreeze"
local util = require "retryfreeze.util"

local M = {}

--- The threshold names that hold ratios, in the order breaches are reported: the decimal fields of the lock's gate
--- object (rf.lock_schema()), by their key in policy.gate.
local NUMERIC = {}
for _, row in ipairs(rf.lock_schema()) do
  if row.parent == "gate" and row.type == "decimal" then NUMERIC[#NUMERIC + 1] = row.view:match("[^.]+$") end
end
M.numeric = NUMERIC

--- Thresholds judged per success (skipped below min_successes); the others are judged per request.
M.per_success = { max_retried_success = true, max_attempts_per_success = true }

--- From this many requests on, zero successes fails the gate (an outage is never a skip).
M.DEFAULT_MIN_REQUESTS = 10

--- The seed's gate, applied when neither the lock nor the command line gives a threshold: skip below 50
--- successes; fail above 5 % retried successes or 1.3 attempts per success.
M.SEED_DEFAULTS = { max_retried_success = 0.05, max_attempts_per_success = 1.3, min_successes = 50 }

--- The seed defaults as the text the CLI prints when it applies them.
M.SEED_DEFAULTS_TEXT = "max-retried-success 0.05, max-attempts-per-success 1.3, min-successes 50"

--- Merges thresholds: the lock's gate first, then overrides field by field (an override's number replaces
--- the lock's); forbid_reasons is the union of both lists, so an override can add reasons but never drop
--- one the reviewed lock forbids.
-- @param lock_gate table|nil: policy.gate ({max_retried_success = 0.05, …, forbid_reasons = {…}})
-- @param overrides table|nil: the same shape (from the command line), plus min_requests
-- @return table: the merged thresholds (fresh; forbid_reasons sorted, without duplicates)
function M.merge(lock_gate, overrides)
  local t = {}
  for _, src in ipairs({ lock_gate or {}, overrides or {} }) do
    for _, k in ipairs(M.numeric) do
      if src[k] ~= nil then t[k] = src[k] end
    end
    if src.min_successes ~= nil then t.min_successes = src.min_successes end
    if src.min_requests ~= nil then t.min_requests = src.min_requests end
  end
  local seen, reasons = {}, {}
  for _, src in ipairs({ lock_gate or {}, overrides or {} }) do
    for _, r in ipairs(src.forbid_reasons or {}) do util.add_once(reasons, seen, r) end
  end
  table.sort(reasons)
  t.forbid_reasons = reasons
  return t
end

--- Whether thresholds check anything at all (min_successes and min_requests alone judge nothing).
-- @param t table: thresholds
-- @return boolean
function M.any(t)
  for _, k in ipairs(M.numeric) do
    if t[k] ~= nil then return true end
  end
  return t.forbid_reasons ~= nil and #t.forbid_reasons > 0
end

--- Fills in the seed's defaults when `t` checks nothing (see SEED_DEFAULTS); a min_successes already in `t`
--- is kept.
-- @param t table: merged thresholds (not modified)
-- @return thresholds (a fresh table), applied (boolean: whether the defaults were used)
function M.with_defaults(t)
  local r = {}
  for k, v in pairs(t) do r[k] = v end
  if M.any(t) then return r, false end
  for k, v in pairs(M.SEED_DEFAULTS) do
    if r[k] == nil then r[k] = v end
  end
  return r, true
end

--- The one-line summary of a scope: `retried-success=3.10% attempts/success=1.04 terminal=0.20%
--- retries/request=0.052 successes=950 requests=1000`.
-- @param s table: a stats scope (the stats table or one of its by_route entries)
-- @return string (no newline)
function M.summary(s)
  return string.format("retried-success=%.2f%% attempts/success=%.2f terminal=%.2f%% retries/request=%.3f "
    .. "successes=%d requests=%d", 100 * s.retried_success_ratio, s.attempts_per_success, 100 * s.terminal_rate,
    s.retry_ratio, s.successes, s.requests)
end

local checks = {
  max_retried_success = { field = "retried_success_ratio", label = "retried-success", percent = true },
  max_attempts_per_success = { field = "attempts_per_success", label = "attempts/success" },
  max_terminal_rate = { field = "terminal_rate", label = "terminal", percent = true },
  max_retry_ratio = { field = "retry_ratio", label = "retries/request" },
  min_success_rate = { field = "success_rate", label = "success", percent = true, minimum = true },
}

-- A ratio the lock may set is one this module judges: a new gate field needs its check here.
for _, k in ipairs(NUMERIC) do assert(checks[k], "retryfreeze.gate: no check for the gate threshold " .. k) end

local function show(x, percent)
  if percent then return string.format("%.3f%%", 100 * x) end
  return string.format("%.3f", x)
end

--- Applies thresholds to a stats scope.
-- @param s table: a stats scope
-- @param t table: thresholds (see M.merge)
-- @return {pass = boolean, skipped = boolean (fewer successes than min_successes: the per-success ratios
--   were not judged), notes = array of lines saying what was not judged and why ("skip: …"), breaches = array
--   of lines like "breach: retried-success 6.000% > max 5.000% (max-retried-success)"}
function M.evaluate(s, t)
  local breaches, notes = {}, {}
  local min_requests = t.min_requests or M.DEFAULT_MIN_REQUESTS
  if s.requests >= min_requests and s.requests > 0 and s.successes == 0 then
    breaches[#breaches + 1] = string.format("breach: 0 successes among %d requests: an outage, never a skip "
      .. "(min-requests %d)", s.requests, min_requests)
  end
  local skipped = t.min_successes ~= nil and s.successes < t.min_successes
  if skipped then
    notes[#notes + 1] = string.format("skip: only %d successes (min-successes %d)", s.successes, t.min_successes)
  end
  if s.requests == 0 then notes[#notes + 1] = "skip: no requests in the ledgers" end
  for _, k in ipairs(M.numeric) do
    local c = checks[k]
    local judged = t[k] ~= nil and s.requests > 0 and not (skipped and M.per_success[k])
    if judged and c.minimum and s[c.field] < t[k] then
      breaches[#breaches + 1] = string.format("breach: %s %s < min %s (%s)", c.label, show(s[c.field], c.percent),
        show(t[k], c.percent), (k:gsub("_", "-")))
    elseif judged and not c.minimum and s[c.field] > t[k] then
      breaches[#breaches + 1] = string.format("breach: %s %s > max %s (%s)", c.label, show(s[c.field], c.percent),
        show(t[k], c.percent), (k:gsub("_", "-")))
    end
  end
  for _, reason in ipairs(t.forbid_reasons or {}) do
    local n = s.reasons[reason]
    if n and n > 0 then
      breaches[#breaches + 1] = string.format("breach: %d request%s ended with forbidden reason %s (forbid-reason)",
        n, n == 1 and "" or "s", reason)
    end
  end
  return { pass = #breaches == 0, skipped = skipped, notes = notes, breaches = breaches }
end

return M
