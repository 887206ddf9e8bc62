--- Summaries of ledgers: streamed record by record (constant memory in ledger size).
local rf = require "retryfreeze"

local M = {}

--- Reads ledgers and counts. paths: a list of files.
-- @return {requests, successes, retried_successes, attempts, success_attempts, terminal, by_outcome = {},
--          by_reason = {["outcome reason"] = n}, torn = {path = line}}; raises on a corrupt line
function M.summarize(paths)
  local s = { requests = 0, successes = 0, retried_successes = 0, attempts = 0, success_attempts = 0,
              terminal = 0, by_outcome = {}, by_reason = {}, torn = {} }
  for _, path in ipairs(paths) do
    local it, state = rf.ledger.read(path)
    for rec in it, state do
      s.requests = s.requests + 1
      s.attempts = s.attempts + rec.attempts
      if rec.ok then
        s.successes = s.successes + 1
        s.success_attempts = s.success_attempts + rec.attempts
        if rec.attempts > 1 then s.retried_successes = s.retried_successes + 1 end
      end
      if rec.outcome == "terminal" then s.terminal = s.terminal + 1 end
      s.by_outcome[rec.outcome] = (s.by_outcome[rec.outcome] or 0) + 1
      local k = rec.outcome .. " " .. rec.reason
      s.by_reason[k] = (s.by_reason[k] or 0) + 1
    end
    if state.torn then s.torn[path] = state.torn end
  end
  return s
end

--- Ratio helpers that never divide by zero (0 when the denominator is 0).
function M.ratio(a, b) return b > 0 and a / b or 0 end

return M
