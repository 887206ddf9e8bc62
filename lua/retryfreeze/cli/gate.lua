--- `retryfreeze gate LEDGER… [options]`: applies thresholds to ledger stats for CI. Prints one summary line,
--- then one line per breached threshold; exit 1 on a breach, 0 otherwise, 2 on bad usage or bad input.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local gate = require "retryfreeze.gate"
local ledger_stats = require "retryfreeze.ledger_stats"

local M = {
  summary = "fail (exit 1) when ledger stats breach thresholds: retried successes, attempts, terminal rate",
  usage = "retryfreeze gate LEDGER… [--max-retried-success R] [--max-attempts-per-success X]\n"
    .. "                 [--max-terminal-rate R] [--max-retry-ratio X] [--min-success-rate R]\n"
    .. "                 [--min-successes N] [--min-requests N] [--forbid-reason REASON]… [--route ROUTE]\n"
    .. "                 [--lock LOCK] [--skip-corrupt]\n\n"
    .. "  --max-retried-success R       retried successes / successes, 0..1 (0.05 = 5%)\n"
    .. "  --max-attempts-per-success X  attempts of successful requests / successes\n"
    .. "  --max-terminal-rate R         requests ending \"terminal\" (non-retryable class) / requests, 0..1\n"
    .. "  --max-retry-ratio X           retries (attempts after the first) / requests\n"
    .. "  --min-success-rate R          successes / requests, 0..1: below R is a breach\n"
    .. "  --min-successes N             fewer successes: print 'skip: only N successes' and judge no\n"
    .. "                                per-success ratio (retried-success, attempts/success)\n"
    .. "  --min-requests N              from N requests on (default " .. gate.DEFAULT_MIN_REQUESTS .. "), 0 successes is a breach\n"
    .. "                                (an outage never skips)\n"
    .. "  --forbid-reason REASON        no request may end with REASON (repeatable; judged even when skipping)\n"
    .. "  --route ROUTE                 judge one route only, as the ledger names it (\"POST /v1/jobs\")\n"
    .. "  --lock LOCK                   take thresholds from the lock's \"gate\" object; options override\n"
    .. "                                its numbers and add to its forbidden reasons\n"
    .. "  With no threshold from the lock or the options, the seed's defaults apply (and are printed):\n"
    .. "  " .. gate.SEED_DEFAULTS_TEXT .. ".\n"
    .. "  Exit 0 pass or skip, 1 a breach, 2 bad usage, an unknown route or bad input.",
}

local spec = {
  ["--max-retried-success"] = "number R", ["--max-attempts-per-success"] = "number X",
  ["--max-terminal-rate"] = "number R", ["--max-retry-ratio"] = "number X", ["--min-successes"] = "integer N",
  ["--min-success-rate"] = "number R", ["--min-requests"] = "integer N",
  ["--forbid-reason"] = "list REASON", ["--route"] = "string ROUTE", ["--lock"] = "string LOCK", ["--skip-corrupt"] = "flag",
}
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--max-retried-success"] = "most retried successes / successes, 0..1 (0.05 = 5 %)",
  ["--max-attempts-per-success"] = "most attempts of the successful requests / successes",
  ["--max-terminal-rate"] = "most requests ending terminal / requests, 0..1",
  ["--max-retry-ratio"] = "most retries (attempts after the first) / requests",
  ["--min-success-rate"] = "fewest successes / requests, 0..1",
  ["--min-successes"] = "with fewer successes, skip the per-success ratios",
  ["--min-requests"] = "from this many requests on (default 10), zero successes is a breach",
  ["--forbid-reason"] = "no request may end with this reason; repeatable",
  ["--route"] = "judge one route only, named as in the ledger (\"POST /v1/jobs\")",
  ["--lock"] = "take the thresholds from this lock's gate object (the options override it)",
  ["--skip-corrupt"] = "count and skip corrupt ledger lines instead of stopping",
}

local ranges = {
  max_retried_success = { 0, 1 }, max_attempts_per_success = { 0, math.huge }, max_terminal_rate = { 0, 1 },
  max_retry_ratio = { 0, math.huge }, min_success_rate = { 0, 1 },
}

-- The command-line thresholds, or nil, message.
local function overrides(opts)
  local t = { min_successes = opts.min_successes, min_requests = opts.min_requests,
    forbid_reasons = opts.forbid_reason }
  for _, k in ipairs(gate.numeric) do
    local v = opts[k]
    if v ~= nil then
      local lo, hi = ranges[k][1], ranges[k][2]
      if not (v >= lo and v <= hi) then
        local range = hi == math.huge and "0 or more" or string.format("%d..%d", lo, hi)
        return nil, string.format("--%s must be %s, got %s", (k:gsub("_", "-")), range, cli_args.number_text(v))
      end
      t[k] = v
    end
  end
  if t.min_successes and t.min_successes < 0 then return nil, "--min-successes must be 0 or more" end
  if t.min_requests and t.min_requests < 1 then return nil, "--min-requests must be 1 or more" end
  local known = {}
  for _, r in ipairs(rf.reasons) do known[r] = true end
  for _, r in ipairs(t.forbid_reasons or {}) do
    if not known[r] then
      return nil, "--forbid-reason: unknown reason '" .. r .. "' (reasons: " .. table.concat(rf.reasons, ", ") .. ")"
    end
  end
  return t
end

--- Runs `retryfreeze gate`.
-- @param args array of strings: the arguments after "gate"
-- @param out, err file handles (io.stdout, io.stderr in the CLI)
-- @return integer exit code (see the usage text)
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  local function usage_error(msg)
    err:write("retryfreeze gate: ", msg, "\nusage: ", M.usage, "\n")
    return 2
  end
  if not opts then return usage_error(pos) end
  if #pos == 0 then return usage_error("expected at least one LEDGER") end
  local cli, why = overrides(opts)
  if not cli then return usage_error(why) end
  local lock_gate
  if opts.lock then
    local policy, lerr = rf.load(opts.lock)
    if not policy then
      err:write("retryfreeze gate: ", cli_args.lock_error(opts.lock, lerr), "\n")
      return 2
    end
    lock_gate = policy.gate
  end
  local thresholds, defaulted = gate.with_defaults(gate.merge(lock_gate, cli))
  local s, serr = ledger_stats.stats(pos, { skip_corrupt = opts.skip_corrupt })
  if not s then
    err:write("retryfreeze gate: ", serr, "\n")
    return 2
  end
  for path, line in pairs(s.torn) do err:write("retryfreeze gate: note: torn line ", path, ":", line, "\n") end
  if s.corrupt_lines > 0 then
    err:write("retryfreeze gate: note: ", s.corrupt_lines, " corrupt lines skipped\n")
  end
  local scope = s
  if opts.route then
    scope = s.by_route[opts.route]
    if not scope then
      local routes = {}
      for r in pairs(s.by_route) do routes[#routes + 1] = ledger_stats.route_label(r) end
      table.sort(routes)
      err:write("retryfreeze gate: no request in the ledgers has route '", opts.route, "' (routes: ",
        table.concat(routes, ", "), ")\n")
      return 2
    end
  end
  local verdict = gate.evaluate(scope, thresholds)
  out:write(gate.summary(scope), opts.route and (" route=" .. opts.route) or "", "\n")
  if defaulted then
    out:write("thresholds: the seed's defaults (", opts.lock and (opts.lock .. " has no gate and no")
      or "no", " option gives a threshold): ", gate.SEED_DEFAULTS_TEXT, "\n")
  end
  for _, line in ipairs(verdict.notes) do out:write(line, "\n") end
  for _, line in ipairs(verdict.breaches) do out:write(line, "\n") end
  return verdict.pass and 0 or 1
end

return M
