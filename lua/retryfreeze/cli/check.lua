--- `retryfreeze check LOCK [--table TABLE.tsv [--seed N]]`: validates a lock, prints its digest and the
--- effective policy (defaults applied); with --table, runs a decision table against it instead of printing the
--- effective policy. Exit 0 when valid (and every row passes), 1 when a row fails, 2 when the lock or the
--- table is invalid or unreadable.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local decision_table = require "retryfreeze.decision_table"

local M = {
  summary = "validate a lock; print its digest and effective policy, or run a decision table",
  usage = "retryfreeze check LOCK [--table TABLE.tsv [--seed N]]\n\n"
    .. "  Validates LOCK completely and prints its digest and the effective policy\n"
    .. "  (every default applied). Exit 0 valid, 2 invalid or unreadable.\n"
    .. "  --table runs TABLE.tsv (facts → expected verdict, see docs/governance.md) against LOCK\n"
    .. "  and prints every failing row with its line, facts and actual verdict: exit 0 all pass,\n"
    .. "  1 a row fails, 2 a malformed table. Each row's jitter RNG is seeded with --seed\n"
    .. "  (default " .. decision_table.DEFAULT_SEED .. "), so delay_ms columns are reproducible.",
}

local spec = { ["--table"] = "string TABLE.tsv", ["--seed"] = "integer N" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--table"] = "run this decision table (facts -> expected verdict) instead of printing the effective policy",
  ["--seed"] = "the jitter seed of every table row (default 1; only with --table)",
}

-- Reads, parses and runs the table: results, or nil, message.
local function run_table(policy, opts)
  local tbl, why = decision_table.read(opts.table)
  if not tbl then return nil, why end
  local results
  results, why = decision_table.run(policy, tbl, { seed = opts.seed })
  if not results then return nil, "malformed table: " .. why end
  return results
end

local function print_results(results, opts, out)
  for _, r in ipairs(results.rows) do
    if not r.ok then out:write(decision_table.format_failure(r, opts.table)) end
  end
  out:write(string.format("%s: %d rows, %d passed, %d failed\n", opts.table, #results.rows, results.passed,
    results.failed))
  return results.failed == 0 and 0 or 1
end

--- Runs the subcommand.
-- @param args table: the arguments after "check"; out, err: file handles
-- @return exit code 0, 1 or 2
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  if opts and #pos == 1 and opts.seed and not opts.table then pos = "--seed needs --table" end
  if not opts or type(pos) ~= "table" or #pos ~= 1 then
    err:write("retryfreeze check: ", type(pos) == "string" and pos or "expected exactly one LOCK", "\nusage: ",
      M.usage, "\n")
    return 2
  end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze check: ", cli_args.lock_error(pos[1], why), "\n")
    return 2
  end
  local results
  if opts.table then
    results, why = run_table(policy, opts)
    if not results then
      err:write("retryfreeze check: ", why, "\n")
      return 2
    end
  end
  out:write("ok: ", pos[1], "\n", "digest: ", policy.digest, "\n")
  if results then return print_results(results, opts, out) end
  out:write(policy:effective_json(), "\n")
  return 0
end

return M
