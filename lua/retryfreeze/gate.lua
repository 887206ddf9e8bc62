--- Gate: thresholds over ledger stats (`retryfreeze gate`, and the gate part of `soak`). Pure functions
--- over a stats scope (retryfreeze.ledger_stats): the same numbers give the same verdict.
---
--- Thresholds (all optional; a breach is a value strictly above its maximum):
---   max_retried_success       retried successes / successes (0..1)
---   max_attempts_per_success  attempts of successful requests / successes
---   max_terminal_rate         requests whose outcome is "terminal" / requests (0..1)
---   max_retry_ratio           retries (attempts after the first) / requests
---   min_successes             below it the ratio thresholds are skipped (too few successes to judge)
---   forbid_reasons            final verdict reasons no request may end with; checked even below
---                             min_successes, since one such request is already a fact, not a ratio
local M = {}

--- The threshold names that hold numbers, in the order breaches are reported.
local NUMERIC <const> = { "max_retried_success", "max_attempts_per_success", "max_terminal_rate", "max_retry_ratio" }
M.numeric = NUMERIC

--- Merges thresholds: the lock's gate first, then overrides field by field (an override's number replaces
--- the lock's); forbid_reasons is the union of both lists, so an override can add reasons but never drop
--- one the reviewed lock forbids.
-- @param lock_gate table|nil: policy.gate ({max_retried_success = 0.05, …, forbid_reasons = {…}})
-- @param overrides table|nil: the same shape (from the command line)
-- @return table: the merged thresholds (fresh; forbid_reasons sorted, without duplicates)
function M.merge(lock_gate, overrides)
  local t = {}
  for _, src in ipairs({ lock_gate or {}, overrides or {} }) do
    for _, k in ipairs(M.numeric) do
      if src[k] ~= nil then t[k] = src[k] end
    end
    if src.min_successes ~= nil then t.min_successes = src.min_successes end
  end
  local seen, reasons = {}, {}
  for _, src in ipairs({ lock_gate or {}, overrides or {} }) do
    for _, r in ipairs(src.forbid_reasons or {}) do
      if not seen[r] then
        seen[r] = true
        reasons[#reasons + 1] = r
      end
    end
  end
  table.sort(reasons)
  t.forbid_reasons = reasons
  return t
end

--- Whether thresholds check anything at all.
-- @param t table: thresholds
-- @return boolean
function M.any(t)
  for _, k in ipairs(M.numeric) do
    if t[k] ~= nil then return true end
  end
  return t.forbid_reasons ~= nil and #t.forbid_reasons > 0
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

local checks <const> = {
  max_retried_success = { field = "retried_success_ratio", label = "retried-success", percent = true },
  max_attempts_per_success = { field = "attempts_per_success", label = "attempts/success" },
  max_terminal_rate = { field = "terminal_rate", label = "terminal", percent = true },
  max_retry_ratio = { field = "retry_ratio", label = "retries/request" },
}

local function show(x, percent)
  if percent then return string.format("%.3f%%", 100 * x) end
  return string.format("%.3f", x)
end

--- Applies thresholds to a stats scope.
-- @param s table: a stats scope
-- @param t table: thresholds (see M.merge)
-- @return {pass = boolean, skipped = boolean (fewer successes than min_successes: ratios not judged),
--   breaches = array of lines like "breach: retried-success 6.000% > max 5.000% (max-retried-success)"}
function M.evaluate(s, t)
  local breaches = {}
  local skipped = t.min_successes ~= nil and s.successes < t.min_successes
  if not skipped then
    for _, k in ipairs(M.numeric) do
      local c = checks[k]
      if t[k] ~= nil and s[c.field] > t[k] then
        breaches[#breaches + 1] = string.format("breach: %s %s > max %s (%s)", c.label, show(s[c.field], c.percent),
          show(t[k], c.percent), (k:gsub("_", "-")))
      end
    end
  end
  for _, reason in ipairs(t.forbid_reasons or {}) do
    local n = s.reasons[reason]
    if n and n > 0 then
      breaches[#breaches + 1] = string.format("breach: %d request%s ended with forbidden reason %s (forbid-reason)",
        n, n == 1 and "" or "s", reason)
    end
  end
  return { pass = #breaches == 0, skipped = skipped, breaches = breaches }
end

return M
