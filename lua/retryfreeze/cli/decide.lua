--- `retryfreeze decide LOCK --method M --path P [facts…]`: one decision, printed as one JSON line.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"

local order = { "retry", "reason", "class", "delay_ms", "timeout_ms", "retry_after", "retry_after_header",
  "route" }

--- The --hint NAME=VALUE options as facts.hints; nil, message for a malformed or repeated one.
local function hints_of(list)
  if list == nil then return nil end
  local hints = {}
  for _, h in ipairs(list) do
    local name, value = h:match("^([^=]+)=(.*)$")
    if not name then return nil, "--hint needs NAME=VALUE, got '" .. h .. "'" end
    if hints[name] ~= nil then return nil, "--hint " .. name .. " is given twice" end
    hints[name] = value
  end
  return hints
end

return cli_args.command {
  name = "decide",
  summary = "decide retry or stop for one attempt's facts; print the verdict as JSON",
  args = "LOCK",
  description = "  Prints {retry, reason, class, delay_ms, timeout_ms, retry_after, retry_after_header, route} as one JSON\n"
    .. "  line. --hint gives a wait header the route reads (retryAfter.headers), e.g. --hint retry-after-ms=250.\n"
    .. "  Exit 0, or 2 on bad usage, an invalid lock, or facts the engine refuses.",
  options = {
    { "--method", "string METHOD", "the request's method, e.g. POST", required = true },
    { "--path", "string PATH", "the request's path, e.g. /v1/jobs", required = true },
    { "--status", "integer STATUS", "the response status: 0 (none received) or 100..599" },
    { "--grpc-status", "integer CODE", "the response's grpc-status (header or trailer), 0..16: 1..16 is the "
      .. "failure class GRPC_<name> whatever the status; 0 (OK) leaves it to the status" },
    { "--transport", "string OUTCOME", "the transport outcome: " .. table.concat(rf.transports, ", "),
      choices = rf.transports }, -- the engine's list
    { "--retry-after", "string VALUE", "the raw Retry-After value" },
    { "--date", "string HTTP-DATE", "the response's Date header (an HTTP-date Retry-After is measured against it)" },
    { "--attempts", "integer N", "attempts made so far, this one included (default 1)" },
    { "--elapsed-ms", "integer MS", "ms since the first attempt started (default 0)" },
    { "--idempotency-key", "string KEY", "the request's idempotency key (only its presence matters)" },
    { "--source", "string SOURCE", "where the policy came from; anything but pinned-map (an empty S too) gives "
      .. "unpinned-source" },
    { "--now-ms", "integer MS", "the wall clock in Unix ms, for an HTTP-date (default the clock)" },
    { "--hint", "list NAME=VALUE",
      "a wait header the route reads (retryAfter.headers), e.g. retry-after-ms=250; once per name",
      check = function(v) return select(2, hints_of({ v })) end },
    { "--not-sent", "flag", "no byte of the request was sent (a keyless TLS failure may then be retried)" },
    { "--seed", "integer N", "the jitter seed, so delay_ms is reproducible (default random)" },
  },

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local hints, bad = hints_of(opts.hint)
    if bad then ctx.usage_error(bad) end
    local policy = ctx.load_lock(pos[1])
    local facts = {
      method = opts.method, path = opts.path, status = opts.status, transport = opts.transport,
      retry_after = opts.retry_after, date = opts.date, attempts = opts.attempts, elapsed_ms = opts.elapsed_ms,
      idempotency_key = opts.idempotency_key, source = opts.source, now_ms = opts.now_ms, hints = hints,
      not_sent = opts.not_sent and true or nil, grpc_status = opts.grpc_status,
    }
    local rng = opts.seed and rf.rng(opts.seed) or nil
    local ok, verdict = pcall(policy.decide, policy, facts, rng)
    if not ok then
      -- Say it in the command line's words: the option, not the binding's argument and fact key.
      local msg = tostring(verdict)
      msg = msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg
      msg = msg:gsub("facts%.hints", "--hint"):gsub("unknown hint", "--hint: unknown header")
      msg = msg:gsub("facts%.([%w_]+)", function(k) return "--" .. k:gsub("_", "-") end)
      ctx.fail(msg)
    end
    ctx.out:json(verdict, order)
    return 0
  end,
}
