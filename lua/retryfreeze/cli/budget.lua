--- `retryfreeze budget show NAME --redis URL [--timeout-ms MS] [--ca-file FILE] [--ca-path DIR] [--cert FILE]
--- [--key FILE] [--window]`: a retry budget shared by a fleet in Redis (the lock's retryBudget.shared.name; rf.retry_budget with
--- redis): a token bucket's tokens, or a ratio's window (requests, retries, allowance). Reads, never changes. The
--- TLS options are rf.retry_budget's (rediss:// only).
local core = require "retryfreeze.core"
local cli_args = require "retryfreeze.cli.args"

-- Each command-line option and the rf.retry_budget option it sets (core.retry_budget_peek's names).
local PEEK_OPTION = { redis = "redis", timeout_ms = "timeout_ms", ca_file = "ca_file", ca_path = "ca_path",
  cert = "cert", key = "key" }

return cli_args.command {
  name = "budget",
  summary = "show a fleet's shared retry budget (tokens or ratio window in Redis)",
  args = "show NAME",
  description = "  Prints the tokens of the shared bucket NAME (retryBudget.shared.name in the lock) held in Redis\n"
    .. "  under retryfreeze:budget:NAME, and how long until it expires while idle. A bucket Redis does not\n"
    .. "  hold is new or expired: the next decision finds it full. With --window, prints a ratio budget's\n"
    .. "  window instead (under retryfreeze:budget:NAME:window): its requests and retries over the last\n"
    .. "  ttlMs and the retries they allow (retryRatio x requests + minRetriesPerSecond x ttlMs / 1000), on\n"
    .. "  Redis' clock. rediss:// speaks TLS, checking the\n"
    .. "  server's certificate against the system's CAs or --ca-file/--ca-path.\n"
    .. "  Exit 0 shown, 1 when Redis cannot be reached or refuses, 2 on bad usage.",
  options = {
    { "--redis", "string URL", "redis:// or rediss://[user:password@]host[:port][/db] of the fleet's Redis",
      required = true },
    { "--timeout-ms", "integer MS", "how long to wait for Redis", default = 1000, range = { 1, 10000 } },
    { "--ca-file", "string FILE", "rediss://: a PEM file of CAs to trust (default: the system's)" },
    { "--ca-path", "string DIR", "rediss://: a directory of CA certificates (openssl rehash layout)" },
    { "--cert", "string FILE", "rediss://: a client certificate, PEM, for a server that asks for one" },
    { "--key", "string FILE", "rediss://: the client certificate's key, PEM (default: read from --cert)",
      needs = "--cert" },
    { "--window", "flag", "read a ratio budget's window (retryBudget.retryRatio), not a token bucket" },
  },

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local peek = {}
    for from, to in pairs(PEEK_OPTION) do peek[to] = opts[from] end
    -- in the command line's words: the option, not the binding's
    local function usage_fail(err)
      local msg = tostring(err):gsub("^retry_budget_peek[%w_]*: ", ""):gsub("^url ", "--redis URL ")
      ctx.fail((msg:gsub("^(%l[%l_]*) ", function(o)
        return PEEK_OPTION[o] and "--" .. o:gsub("_", "-") .. " " or nil
      end)))
    end
    -- What peek_fn read: a bad argument is a usage error; (nil, message) means Redis could not be reached (exit 1).
    local function read(peek_fn)
      local ok, value, extra = pcall(peek_fn, pos[2], peek)
      if not ok then usage_fail(value) end
      if type(extra) == "string" then ctx.fail(extra, 1) end
      return value, extra
    end
    -- A number to 3 decimals without trailing zeros (0.5, not 0.500).
    local function short(x) return (("%.3f"):format(x):gsub("%.?0+$", "")) end
    if opts.window then -- a ratio budget: its window, on Redis' own clock
      local window, idle = read(core.retry_budget_peek_window)
      if window == nil then
        ctx.out:printf("%s: no window in Redis (new, or expired while idle: it starts empty)\n", pos[2])
      else
        ctx.out:printf("%s window %d ms: requests %d retries %d allowed %s idle expiry in %d ms\n", pos[2],
          window.ttl_ms, window.requests, window.retries, short(window.allowance), idle or -1)
      end
      return 0
    end
    local tokens, ttl = read(core.retry_budget_peek)
    if tokens == nil then
      ctx.out:printf("%s: no bucket in Redis (new, or expired while idle: it starts full)\n", pos[2])
    else
      ctx.out:printf("%s tokens %s idle expiry in %d ms\n", pos[2], short(tokens), ttl or -1)
    end
    return 0
  end,
}
