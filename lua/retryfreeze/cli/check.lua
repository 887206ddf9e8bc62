--- `retryfreeze check LOCK [--table TABLE.tsv [--seed N]] [--gateway [--lean]]`: validates a lock, prints its digest
--- and the effective policy (defaults applied); with --table, runs a decision table against it instead of printing
--- the effective policy; with --gateway, says which routes the gateway mode (retryfreeze.gateway) serves natively
--- and why not the others (with --lean, its lean form). Exit 0 when valid (and every row passes, and every route is native), 1 when a row fails or
--- a route is not native, 2 when the lock or the table is invalid or unreadable.
local cli_args = require "retryfreeze.cli.args"
local decision_table = require "retryfreeze.decision_table"

-- Reads, parses and runs the table: results, or nil, message.
local function run_table(policy, opts)
  local tbl, why = decision_table.read(opts.table)
  if not tbl then return nil, why end
  local results
  results, why = decision_table.run(policy, tbl, { seed = opts.seed })
  if not results then return nil, "malformed table: " .. why end
  return results
end

return cli_args.command {
  name = "check",
  summary = "validate a lock; print its digest and effective policy, or run a decision table",
  args = "LOCK",
  description = "  Validates LOCK completely and prints its digest and the effective policy\n"
    .. "  (every default applied). Exit 0 valid, 2 invalid or unreadable.\n"
    .. "  --table runs TABLE.tsv (facts → expected verdict, see docs/governance.md) against LOCK\n"
    .. "  and prints every failing row with its line, facts and actual verdict: exit 0 all pass,\n"
    .. "  1 a row fails, 2 a malformed table. Each row's jitter RNG is seeded with --seed, so delay_ms\n"
    .. "  columns are reproducible.\n"
    .. "  --gateway prints one line per route: 'native ROUTE', or 'not-native ROUTE: why' for a route\n"
    .. "  whose lock asks for a wait or hedging, which nginx's balancer phase cannot do (docs/embedding.md):\n"
    .. "  exit 0 every route native, 1 one is not. With --lean, for the lean form (balancer and log\n"
    .. "  phases only), which cannot serve a route with propagation either.",
  options = {
    { "--table", "string TABLE.tsv",
      "run this decision table (facts -> expected verdict) instead of printing the effective policy" },
    { "--seed", "integer N", "the jitter seed of every table row", default = decision_table.DEFAULT_SEED,
      needs = "--table" },
    { "--gateway", "flag", "say which routes the gateway mode serves natively (nginx's balancer phase: no wait, "
      .. "no hedging) and why not the others, instead of printing the effective policy", excludes = "--table" },
    { "--lean", "flag", "with --gateway: for the lean form (no propagation either)", needs = "--gateway" },
  },

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local policy = ctx.load_lock(pos[1])
    local results
    if opts.table then
      local why
      results, why = run_table(policy, opts)
      if not results then ctx.fail(why) end
    end
    ctx.out:printf("ok: %s\ndigest: %s\n", pos[1], policy.digest)
    if opts.gateway then
      local refused = 0
      for _, r in ipairs(require("retryfreeze.gateway").routes(policy, { lean = opts.lean })) do
        if r.native then
          ctx.out:printf("native %s\n", r.endpoint)
        else
          refused = refused + 1
          ctx.out:printf("not-native %s: %s\n", r.endpoint, r.why)
        end
      end
      return refused == 0 and 0 or 1
    end
    if not results then
      ctx.out:json_text(policy:effective_json() .. "\n")
      return 0
    end
    for _, r in ipairs(results.rows) do
      if not r.ok then ctx.out:write(decision_table.format_failure(r, opts.table)) end
    end
    ctx.out:printf("%s: %d rows, %d passed, %d failed\n", opts.table, #results.rows, results.passed, results.failed)
    return results.failed == 0 and 0 or 1
  end,
}
