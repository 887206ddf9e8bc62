--- `retryfreeze gate LEDGER… [options]`: applies thresholds to ledger stats for CI. Prints one summary line,
--- then one line per breached threshold; exit 1 on a breach, 0 otherwise, 2 on bad usage or bad input.
--- Its threshold options (threshold_options) are also soak's.
local math = require("retryfreeze.compat").math
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local gate = require "retryfreeze.gate"
local ledger_stats = require "retryfreeze.ledger_stats"
local util = require "retryfreeze.util"

local function known_reason(r)
  for _, known in ipairs(rf.reasons) do
    if r == known then return nil end
  end
  return "--forbid-reason: unknown reason '" .. r .. "' (reasons: " .. table.concat(rf.reasons, ", ") .. ")"
end

-- "maxRetriedSuccess" → "max-retried-success".
local function kebab(key) return (key:gsub("%u", function(c) return "-" .. c:lower() end)) end

--- The thresholds as options, for gate and soak: one per number field of the lock's gate object (rf.lock_schema()),
--- named after it ("--max-retry-ratio" is gate.maxRetryRatio, gate field max_retry_ratio), described and bounded
--- by its row, and checked by the loader's own rule (rf.lock_field_check), so that a value means on the command line
--- what it means in a lock. Then the command line's own: --min-requests and --forbid-reason.
local threshold_options = {}
for _, row in ipairs(rf.lock_schema()) do
  if row.parent == "gate" and (row.type == "integer" or row.type == "decimal") then
    local name = "--" .. kebab(row.key)
    threshold_options[#threshold_options + 1] = { name,
      row.type == "integer" and "integer N" or row.max <= 1 and "number R" or "number X", row.about,
      range = { row.min, row.max }, check = function(v)
        local ok, why = rf.lock_field_check(row.path, v)
        return not ok and (name .. " " .. why) or nil
      end }
  end
end
for _, row in ipairs({
  { "--min-requests", "integer N", "from this many requests on (default " .. gate.DEFAULT_MIN_REQUESTS .. "), zero "
    .. "successes is a breach: an outage never skips", range = { 1, math.huge } },
  { "--forbid-reason", "list REASON", "no request may end with this reason", check = known_reason },
}) do threshold_options[#threshold_options + 1] = row end

--- The thresholds the command line gives (retryfreeze.gate's shape, for gate.merge).
-- @param opts table: parsed options of gate or soak
-- @return table
local function thresholds_of(opts)
  local t = { min_successes = opts.min_successes, min_requests = opts.min_requests,
    forbid_reasons = opts.forbid_reason }
  for _, k in ipairs(gate.numeric) do t[k] = opts[k] end
  return t
end

--- Runs `retryfreeze gate` (see retryfreeze.cli for ctx).
local function run(ctx, opts, pos)
  local out = ctx.out
  local lock_gate = opts.lock and ctx.load_lock(opts.lock).gate
  local thresholds, defaulted = gate.with_defaults(gate.merge(lock_gate, thresholds_of(opts)))
  local s, serr
  if opts.replay then -- the prediction of the candidate over the recorded requests, judged as a ledger's stats
    local r
    r, serr = require("retryfreeze.replay").replay(pos, ctx.load_lock(opts.lock), { seed = opts.seed,
      skip_corrupt = opts.skip_corrupt })
    if r then
      s = r.predicted
      s.torn, s.corrupt_lines = r.torn, r.corrupt_lines
      for _, line in ipairs(r.notes) do ctx.note("note: " .. line) end
    end
  else
    s, serr = ledger_stats.stats(pos, { skip_corrupt = opts.skip_corrupt })
  end
  if not s then ctx.fail_ledgers(serr) end
  for _, path in ipairs(util.sorted_keys(s.torn)) do ctx.note(util.format("note: torn line %s:%d", path, s.torn[path])) end
  if s.corrupt_lines > 0 then ctx.note(string.format("note: %d corrupt lines skipped", s.corrupt_lines)) end
  local scope = s
  if opts.route then
    scope = s.by_route[opts.route]
    if not scope then
      local routes = {}
      for r in pairs(s.by_route) do routes[#routes + 1] = ledger_stats.route_label(r) end
      table.sort(routes)
      ctx.fail("no request in the ledgers has route '" .. opts.route .. "' (routes: " .. table.concat(routes, ", ")
        .. ")")
    end
  end
  local verdict = gate.evaluate(scope, thresholds)
  out:printf("%s%s%s\n", opts.replay and "predicted: " or "", gate.summary(scope),
    opts.route and (" route=" .. opts.route) or "")
  if defaulted then
    out:printf("thresholds: the seed's defaults (%s option gives a threshold): %s\n",
      opts.lock and (opts.lock .. " has no gate and no") or "no", gate.SEED_DEFAULTS_TEXT)
  end
  for _, line in ipairs(verdict.notes) do out:printf("%s\n", line) end
  for _, line in ipairs(verdict.breaches) do out:printf("%s\n", line) end
  return verdict.pass and 0 or 1
end

local options = {}
for i, row in ipairs(threshold_options) do options[i] = row end
for _, row in ipairs({
  { "--route", "string ROUTE", "judge one route only, named as in the ledger (\"POST /v1/jobs\")" },
  { "--lock", "string LOCK", "take the thresholds from this lock's gate object: options override its numbers and "
    .. "add to its forbidden reasons" },
  { "--skip-corrupt", "flag", "count and skip corrupt ledger lines instead of stopping" },
  { "--replay", "flag", "judge the prediction of the ledgers replayed under --lock (the candidate, as `retryfreeze "
    .. "replay` predicts it) instead of the ledgers themselves", needs = "--lock" },
  { "--seed", "integer S", "the replay's seed (its jitter and draws)", default = 0, range = { 0, math.huge },
    needs = "--replay" },
}) do options[#options + 1] = row end

local M = cli_args.command {
  name = "gate",
  summary = "fail (exit 1) when ledger stats breach thresholds: retried successes, attempts, terminal rate",
  args = "LEDGER...",
  description = "  A ratio beyond its limit is a breach; a forbidden reason is judged even when the ratios are skipped.\n"
    .. "  With no threshold from the lock or the options, the seed's defaults apply (and are printed):\n"
    .. "  " .. gate.SEED_DEFAULTS_TEXT .. ".\n"
    .. "  With --replay the thresholds judge what --lock would have done with the recorded requests, before it\n"
    .. "  runs anywhere (retryfreeze replay; --route names a route of the candidate).\n"
    .. "  Exit 0 pass or skip, 1 a breach, 2 bad usage, an unknown route or bad input.",
  options = options,
  run = run,
}
M.threshold_options = threshold_options
M.thresholds_of = thresholds_of
return M
