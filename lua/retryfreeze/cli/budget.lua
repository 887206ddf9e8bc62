--- `retryfreeze budget show NAME --redis URL [--timeout-ms MS]`: the tokens of a retry budget shared by a
--- fleet in Redis (the lock's retryBudget.shared.name; rf.retry_budget with redis). Reads, never changes.
local core = require "retryfreeze.core"
local cli_args = require "retryfreeze.cli.args"

local M = {
  summary = "show a fleet's shared retry budget (tokens in Redis)",
  usage = "retryfreeze budget show NAME --redis URL [--timeout-ms MS]\n\n"
    .. "  Prints the tokens of the shared bucket NAME (retryBudget.shared.name in the lock) held in Redis\n"
    .. "  under retryfreeze:budget:NAME, and how long until it expires while idle. A bucket Redis does not\n"
    .. "  hold is new or expired: the next decision finds it full.\n"
    .. "  --redis URL       redis://[:password@]host[:port][/db] (required)\n"
    .. "  --timeout-ms MS   how long to wait for Redis (default 1000)\n"
    .. "  Exit 0 shown, 1 when Redis cannot be reached, 2 on bad usage.",
}

local spec = { ["--redis"] = "string URL", ["--timeout-ms"] = "integer MS" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--redis"] = "redis://[:password@]host[:port][/db] of the fleet's Redis (required)",
  ["--timeout-ms"] = "how long to wait for Redis, 1..10000 ms (default 1000)",
}

--- Runs the subcommand.
-- @param args table: the arguments after "budget"; out, err: file handles
-- @return exit code 0, 1 or 2
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  local usage_error = not opts and pos
    or (#pos ~= 2 or pos[1] ~= "show") and "expected: show NAME"
    or not opts.redis and "--redis URL is required"
    or opts.timeout_ms and (opts.timeout_ms < 1 or opts.timeout_ms > 10000) and "--timeout-ms must be 1..10000"
  if usage_error then
    err:write("retryfreeze budget: ", usage_error, "\nusage: ", M.usage, "\n")
    return 2
  end
  local ok, tokens, ttl = pcall(core.retry_budget_peek, opts.redis, pos[2], opts.timeout_ms or 1000)
  if not ok then
    err:write("retryfreeze budget: ", (tostring(tokens):gsub("^retry_budget_peek: ", "")), "\n")
    return 2
  end
  if type(ttl) == "string" then -- (nil, message): Redis could not be reached
    err:write("retryfreeze budget: ", ttl, "\n")
    return 1
  end
  if tokens == nil then
    out:write(pos[2], ": no bucket in Redis (new, or expired while idle: it starts full)\n")
  else
    out:write(string.format("%s tokens %s idle expiry in %d ms\n", pos[2], (("%.3f"):format(tokens):gsub("%.?0+$", "")),
      ttl or -1))
  end
  return 0
end

return M
