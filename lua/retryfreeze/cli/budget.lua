--- `retryfreeze budget show NAME --redis URL [--timeout-ms MS]`: the tokens of a retry budget shared by a
--- fleet in Redis (the lock's retryBudget.shared.name; rf.retry_budget with redis). Reads, never changes.
local core = require "retryfreeze.core"
local cli_args = require "retryfreeze.cli.args"

return cli_args.command {
  name = "budget",
  summary = "show a fleet's shared retry budget (tokens in Redis)",
  args = "show NAME",
  description = "  Prints the tokens of the shared bucket NAME (retryBudget.shared.name in the lock) held in Redis\n"
    .. "  under retryfreeze:budget:NAME, and how long until it expires while idle. A bucket Redis does not\n"
    .. "  hold is new or expired: the next decision finds it full.\n"
    .. "  Exit 0 shown, 1 when Redis cannot be reached, 2 on bad usage.",
  options = {
    { "--redis", "string URL", "redis://[:password@]host[:port][/db] of the fleet's Redis", required = true },
    { "--timeout-ms", "integer MS", "how long to wait for Redis", default = 1000, range = { 1, 10000 } },
  },

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local ok, tokens, ttl = pcall(core.retry_budget_peek, opts.redis, pos[2], opts.timeout_ms)
    if not ok then -- in the command line's words: the option, not the binding's argument
      ctx.fail((tostring(tokens):gsub("^retry_budget_peek: ", ""):gsub("^url ", "--redis URL ")))
    end
    if type(ttl) == "string" then ctx.fail(ttl, 1) end -- (nil, message): Redis could not be reached
    if tokens == nil then
      ctx.out:printf("%s: no bucket in Redis (new, or expired while idle: it starts full)\n", pos[2])
    else
      ctx.out:printf("%s tokens %s idle expiry in %d ms\n", pos[2], (("%.3f"):format(tokens):gsub("%.?0+$", "")),
        ttl or -1)
    end
    return 0
  end,
}
