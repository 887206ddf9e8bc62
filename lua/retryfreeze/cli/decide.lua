--- `retryfreeze decide LOCK --method M --path P [facts…]`: one decision, printed as one JSON line.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local json = require "retryfreeze.json"

local M = {
  summary = "decide retry or stop for one attempt's facts; print the verdict as JSON",
  usage = "retryfreeze decide LOCK --method M --path P [--status N] [--transport T] [--retry-after V]\n"
    .. "                   [--date HTTP-DATE] [--attempts N] [--elapsed-ms N] [--idempotency-key K]\n"
    .. "                   [--source S] [--now-ms N] [--hint NAME=VALUE]... [--not-sent] [--seed N]\n\n"
    .. "  Prints {retry, reason, class, delay_ms, timeout_ms, retry_after, retry_after_header, route} as one JSON\n"
    .. "  line. --hint gives a wait header the route reads (retryAfter.headers), e.g. --hint retry-after-ms=250.\n"
    .. "  --seed fixes the jitter (default: random). Exit 0, or 2 on bad usage or an invalid lock.",
}

local spec = {
  ["--method"] = "string METHOD", ["--path"] = "string PATH", ["--status"] = "integer STATUS", ["--transport"] = "string OUTCOME",
  ["--retry-after"] = "string VALUE", ["--date"] = "string HTTP-DATE", ["--attempts"] = "integer N", ["--elapsed-ms"] = "integer MS",
  ["--idempotency-key"] = "string KEY", ["--source"] = "string SOURCE", ["--now-ms"] = "integer MS", ["--seed"] = "integer N",
  ["--hint"] = "list NAME=VALUE", ["--not-sent"] = "flag",
}
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--method"] = "the request's method, e.g. POST (required)",
  ["--path"] = "the request's path, e.g. /v1/jobs (required)",
  ["--status"] = "the response status: 0 (none received) or 100..599",
  ["--transport"] = "the transport outcome: " .. table.concat(rf.transports, ", "), -- the engine's list
  ["--retry-after"] = "the raw Retry-After value",
  ["--date"] = "the response's Date header (an HTTP-date Retry-After is measured against it)",
  ["--attempts"] = "attempts made so far, this one included (default 1)",
  ["--elapsed-ms"] = "ms since the first attempt started (default 0)",
  ["--idempotency-key"] = "the request's idempotency key (only its presence matters)",
  ["--source"] = "where the policy came from; anything but pinned-map (an empty S too) gives unpinned-source",
  ["--now-ms"] = "the wall clock in Unix ms, for an HTTP-date (default the clock)",
  ["--seed"] = "the jitter seed, so delay_ms is reproducible (default random)",
  ["--hint"] =
    "NAME=VALUE: a wait header the route reads (retryAfter.headers), e.g. retry-after-ms=250; once per name",
  ["--not-sent"] = "no byte of the request was sent (a keyless TLS failure may then be retried)",
}

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

function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  if not opts or #pos ~= 1 or not opts.method or not opts.path then
    err:write("retryfreeze decide: ", opts and "expected LOCK, --method and --path" or pos, "\nusage: ", M.usage, "\n")
    return 2
  end
  local hints, bad = hints_of(opts.hint)
  if bad then
    err:write("retryfreeze decide: ", bad, "\nusage: ", M.usage, "\n")
    return 2
  end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze decide: ", cli_args.lock_error(pos[1], why), "\n")
    return 2
  end
  local facts = {
    method = opts.method, path = opts.path, status = opts.status, transport = opts.transport,
    retry_after = opts.retry_after, date = opts.date, attempts = opts.attempts, elapsed_ms = opts.elapsed_ms,
    idempotency_key = opts.idempotency_key, source = opts.source, now_ms = opts.now_ms, hints = hints,
    not_sent = opts.not_sent and true or nil,
  }
  local rng = opts.seed and rf.rng(opts.seed) or nil
  local ok, verdict = pcall(policy.decide, policy, facts, rng)
  if not ok then
    -- Say it in the command line's words: the option, not the binding's argument and fact key.
    local msg = tostring(verdict)
    msg = msg:match("^bad argument #%d+ to '[^']*' %((.*)%)$") or msg
    msg = msg:gsub("facts%.hints", "--hint"):gsub("unknown hint", "--hint: unknown header")
    msg = msg:gsub("facts%.([%w_]+)", function(k) return "--" .. k:gsub("_", "-") end)
    err:write("retryfreeze decide: ", msg, "\n")
    return 2
  end
  out:write(json.encode(verdict, order), "\n")
  return 0
end

return M
