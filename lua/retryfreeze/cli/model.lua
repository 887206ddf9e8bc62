--- `retryfreeze model LOCK [--failure-rate p] [--layers L] [--route R] [--class C] [--slow-share s] [--json]`: the
--- retry-storm arithmetic for a lock's routes (retryfreeze.model), before any traffic is sent; a hedged route's
--- hedges at a slow share s. With --class, each route's
--- attempts for failures of that class come from the engine itself (classLimits, retryable): no rule is
--- re-implemented here.
local math = require("retryfreeze.compat").math
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local model = require "retryfreeze.model"
local util = require "retryfreeze.util"

-- The routes to model: all, or the one --route names (an endpoint, or a request the policy matches).
local function pick_routes(policy, wanted)
  local routes = policy:routes()
  if not wanted then return routes end
  for _, r in ipairs(routes) do
    if r.endpoint == wanted then return { r } end
  end
  local method, path = wanted:match("^(%u+) (/%S*)$")
  if method then
    local b = policy:budget{ method = method, path = path, attempts = 0, elapsed_ms = 0 }
    for _, r in ipairs(routes) do
      if r.endpoint == b.route then return { r } end
    end
  end
  local names = {}
  for i, r in ipairs(routes) do names[i] = r.endpoint end
  return nil, "no route matches '" .. wanted .. "' (routes: " .. table.concat(names, ", ") .. ")"
end

-- The named classes a verdict can have, in the engine's order, with the transport outcome that gives each (the first
-- one, as connect-reset and got-nothing both give CONNECT_RESET): asked of the engine's classifier, so that a class
-- added there is known here (docs/reasons.md#transport-outcomes).
local function named_classes(policy)
  local names, seen, transport_of = {}, {}, {}
  for _, t in ipairs(rf.transports) do
    local class = t ~= "ok" and policy:classify{ transport = t }
    if class and util.add_once(names, seen, class) then transport_of[class] = t end
  end
  return names, transport_of
end

-- Facts whose failure class is `class` (HTTP_nnn is a status), checked with the engine's own classifier; or nil,
-- message.
local function class_facts(policy, class)
  local names, transport_of = named_classes(policy)
  local status = class:match("^HTTP_(%d%d%d)$")
  local facts = status and { status = math.tointeger(tonumber(status)) } or { transport = transport_of[class] }
  if (facts.status == nil and facts.transport == nil) or (facts.status and (facts.status < 100 or facts.status > 599))
    or policy:classify(facts) ~= class then
    return nil, "--class must be a failure class a verdict can have (HTTP_<100..599>, " .. table.concat(names, ", ")
      .. "), got '" .. class .. "'"
  end
  return facts
end

-- The attempts the engine allows one request of route r whose every attempt fails with `facts`' class, and the
-- reason it stops: 1 when the route does not retry the class (status-not-retryable), else min(maxAttempts, the
-- class's limit) (class-limit below maxAttempts, else max-attempts). Asked of the route itself
-- (policy:class_retryable, policy:class_attempts), never through a sample path that a more specific route could
-- take. A deadline or Retry-After stop is outside the model: it only lowers the numbers.
local function class_attempts(policy, r, facts)
  if not policy:class_retryable(r.endpoint, facts) then return 1, "status-not-retryable" end
  local n = policy:class_attempts(r.endpoint, facts)
  return n, n < r.max_attempts and "class-limit" or "max-attempts"
end

-- Routes grouped by their attempts per request (maxAttempts, or with --class what the engine allows that
-- class; the model depends on nothing else), fewest attempts first.
local function groups_of(routes)
  local by_n, ns = {}, {}
  for _, r in ipairs(routes) do
    local n = r.model_attempts or r.max_attempts
    local g = by_n[n]
    if not g then
      g = { max_attempts = n, routes = {} }
      by_n[n] = g
      ns[#ns + 1] = n
    end
    g.routes[#g.routes + 1] = r.endpoint
  end
  table.sort(ns)
  local out = {}
  for i, n in ipairs(ns) do
    table.sort(by_n[n].routes)
    out[i] = by_n[n]
  end
  return out
end

local pct = util.percent
local function num(x) return x == math.huge and "inf" or string.format("%.2f", x) end

local function render(out, g, layers, p, class)
  out:printf("%s %d: %s\n", class and ("attempts for " .. class) or "maxAttempts", g.max_attempts,
    table.concat(g.routes, ", "))
  if p then
    local m = model.predict{ max_attempts = g.max_attempts, p = p, layers = layers }
    out:printf("  at p = %s:\n", string.format("%.4g", p))
    out:printf("    %-26s %s\n", "attempts per request", num(m.attempts_per_request))
    out:printf("    %-26s %s\n", "success probability", pct(m.success_probability))
    out:printf("    %-26s %s\n", "attempts per success", num(m.attempts_per_success))
    out:printf("    %-26s %d attempts per request\n", "worst case", m.worst_case)
    if layers > 1 then
      local with = string.format("with %d layers:", layers)
      out:printf("    %-26s %d attempts per user request (%d^%d)\n", with .. " worst case",
        m.layered_worst_case, g.max_attempts, layers)
      out:printf("    %-26s %s attempts at the innermost service per user request\n",
        with .. " expected", num(m.layered_expected))
      out:printf("    %-26s %s\n", with .. " success", pct(m.layered_success_probability))
      local prop = "propagated:" -- the same layers, each with the lock's propagation (docs/lock.md)
      out:printf("    %-26s %d attempts per user request (one layer retries)\n", prop .. " worst case",
        m.propagated_worst_case)
      out:printf("    %-26s %s attempts at the innermost service per user request\n", prop .. " expected",
        num(m.propagated_expected))
      out:printf("    %-26s %s\n", prop .. " success", pct(m.propagated_success_probability))
    end
  end
  out:printf("  %5s %17s %9s %17s %6s", "p", "attempts/request", "success", "attempts/success", "worst")
  if layers > 1 then
    out:printf("   %-9s %9s %9s %7s", string.format("%d layers:", layers), "expected", "success", "worst")
    out:printf("   %-11s %9s %9s %7s", "propagated:", "expected", "success", "worst")
  end
  out:write("\n")
  for _, rate in ipairs(model.table_rates) do
    local m = model.predict{ max_attempts = g.max_attempts, p = rate, layers = layers }
    out:printf("  %5.1f %17s %9s %17s %6d", rate, num(m.attempts_per_request),
      pct(m.success_probability), num(m.attempts_per_success), m.worst_case)
    if layers > 1 then
      out:printf("   %-9s %9s %9s %7d", "", num(m.layered_expected), pct(m.layered_success_probability),
        m.layered_worst_case)
      out:printf("   %-11s %9s %9s %7d", "", num(m.propagated_expected), pct(m.propagated_success_probability),
        m.propagated_worst_case)
    end
    out:write("\n")
  end
end

-- The hedged routes among routes, each with its model at slow share s (retryfreeze.model.hedging). A hedged route
-- without --slow-share is a usage error: its hedges are load that no default share may stand for.
local function hedged_routes(ctx, routes, s)
  local out = {}
  for _, r in ipairs(routes) do
    local hg = r.hedging
    if hg then
      if not s then
        ctx.usage_error(string.format("%s hedges (hedging maxAttempts %d, hedgingDelayMs %d): give --slow-share S, "
          .. "the share of attempts unanswered until its last hedge may start (%d ms), to count its hedges as load",
          r.endpoint, hg.max_attempts, hg.hedging_delay_ms, (hg.max_attempts - 1) * hg.hedging_delay_ms))
      end
      out[#out + 1] = { route = r.endpoint, delay_ms = hg.hedging_delay_ms,
        model = model.hedging{ max_attempts = hg.max_attempts, slow_share = s } }
    end
  end
  return out
end

-- The hedging arithmetic of one hedged route at slow share s.
local function render_hedging(out, hr, s)
  local m, n, d = hr.model, hr.model.max_attempts, hr.delay_ms
  out:printf("\nhedging %s: maxAttempts %d, hedgingDelayMs %d, at slow share s = %s\n", hr.route, n, d,
    string.format("%.4g", s))
  out:printf("  (a share s of attempts unanswered until %d ms, the others answered within %d ms, independently):\n",
    (n - 1) * d, d)
  out:printf("    %-26s %s  (1 + s + ... + s^%d, even with no failure)\n", "attempts per request",
    num(m.attempts_per_request), n - 1)
  out:printf("    %-26s %s  (s + ... + s^%d)\n", "hedges per request", num(m.hedges_per_request), n - 1)
  out:printf("    %-26s %s  (s - s^%d: the first attempt slow, a hedge not)\n", "won by a hedge",
    pct(m.hedge_win_rate), n)
  out:printf("    %-26s %d attempts per request (under maxAttempts: hedges and retries share it)\n", "worst case",
    m.worst_case)
end

-- math.huge cannot be JSON: an attempts-per-success with no success becomes null.
local function json_safe(m)
  for k, v in pairs(m) do
    if v == math.huge then m[k] = nil end
  end
  return m
end

--- Runs `retryfreeze model` (see retryfreeze.cli for ctx).
local function run(ctx, opts, pos)
  local out = ctx.out
  local p, layers = opts.failure_rate, opts.layers
  local policy = ctx.load_lock(pos[1])
  local routes, rerr = pick_routes(policy, opts.route)
  if not routes then ctx.fail(rerr) end
  local class = opts.class
  if class then
    local facts, cerr = class_facts(policy, class)
    if not facts then ctx.usage_error(cerr) end
    for _, r in ipairs(routes) do r.model_attempts, r.model_reason = class_attempts(policy, r, facts) end
  end
  local groups = groups_of(routes)
  local hedged = hedged_routes(ctx, routes, opts.slow_share)
  if opts.json then
    local doc = { lock = pos[1], digest = policy.digest, layers = layers, failure_rate = p, class = class,
      models = {} }
    for i, g in ipairs(groups) do
      local entry = { max_attempts = g.max_attempts, routes = g.routes, table = {} }
      if p then entry.prediction = json_safe(model.predict{ max_attempts = g.max_attempts, p = p, layers = layers }) end
      for j, rate in ipairs(model.table_rates) do
        entry.table[j] = json_safe(model.predict{ max_attempts = g.max_attempts, p = rate, layers = layers })
      end
      doc.models[i] = entry
    end
    if #hedged > 0 then
      doc.slow_share, doc.hedging = opts.slow_share, {}
      for i, hr in ipairs(hedged) do
        local m = hr.model
        doc.hedging[i] = { route = hr.route, max_attempts = m.max_attempts, hedging_delay_ms = hr.delay_ms,
          attempts_per_request = m.attempts_per_request, hedges_per_request = m.hedges_per_request,
          hedge_win_rate = m.hedge_win_rate, worst_case = m.worst_case }
      end
    end
    out:json(doc, { "lock", "digest", "layers", "failure_rate", "class", "slow_share", "models", "hedging", "route",
      "max_attempts", "hedging_delay_ms", "routes", "prediction", "table", "p" })
    return 0
  end
  out:printf("model: %s (%s)%s\n", pos[1], policy.digest,
    layers > 1 and string.format(", the same policy at %d nested layers", layers) or "")
  out:printf("assumes: every failed attempt is of %s and fails independently with probability p;\n",
    class and "class " .. class or "a retryable class")
  out:write("  no deadline, Retry-After, retry budget or missing idempotency key stops a request early\n"
    .. "  (each of those only lowers the real numbers)\n")
  for _, r in ipairs(routes) do
    if #r.retryable == 0 then
      out:printf("note: %s retries no class: it makes 1 attempt per request whatever p is\n", r.endpoint)
    end
    local limits = {}
    for c, limit in pairs(r.class_limits) do limits[#limits + 1] = string.format("%s at most %d", c, limit) end
    table.sort(limits)
    if #limits > 0 and not class then
      out:printf("note: %s limits classes (classLimits): %s of its %d attempts; --class C models "
        .. "one class\n", r.endpoint, table.concat(limits, ", "), r.max_attempts)
    elseif class and r.model_attempts ~= r.max_attempts then
      out:printf("note: %s: a %s failure gets %d of its %d attempts (%s)\n", r.endpoint, class,
        r.model_attempts, r.max_attempts, r.model_reason)
    end
  end
  for _, hr in ipairs(hedged) do render_hedging(out, hr, opts.slow_share) end
  for _, g in ipairs(groups) do
    out:write("\n")
    render(out, g, layers, p, class)
  end
  return 0
end

return cli_args.command {
  name = "model",
  summary = "predict attempts per request and per success from a lock (independent failures, nested layers)",
  args = "LOCK",
  description = "  For independent failures with probability p per attempt: expected attempts per request, success\n"
    .. "  probability, attempts per success and the worst case, for each route's maxAttempts, and a table\n"
    .. "  over p = 0.1…0.9. Assumes every failure is of a retryable class and nothing stops a request\n"
    .. "  early (no deadline, Retry-After, retry budget or missing idempotency key): the real numbers can\n"
    .. "  only be lower. With --layers L, the worst case is maxAttempts^L, and beside it the same layers\n"
    .. "  with propagation at every one (the lock's propagation): maxAttempts, one layer's retries.\n"
    .. "  A route with hedging needs --slow-share S (the share of attempts unanswered until its last hedge\n"
    .. "  may start): its attempts per request, hedges and wins at S, load even when nothing fails.\n"
    .. "  Exit 0, or 2 on bad usage, an invalid lock or an unknown route.",
  options = {
    { "--failure-rate", "number P", "detail one failure rate p", range = { 0, 1 } },
    { "--layers", "integer L", "the same policy at L nested layers", default = 1, range = { 1, 16 } },
    { "--route", "string ROUTE", "one route: its endpoint (\"POST /v1/jobs\") or a request it matches "
      .. "(\"GET /v1/jobs/42\")" },
    { "--class", "string CLASS", "failures of one class (HTTP_503, TIMEOUT, UNKNOWN, ...): each route's attempts "
      .. "are what the engine allows that class (its classLimits entry, or 1 when not retryable)" },
    { "--slow-share", "number S", "the share of attempts unanswered until a hedged route's last hedge may start "
      .. "(required when a modelled route has hedging: its hedges are load)", range = { 0, 1 } },
    { "--json", "flag", "print the predictions as one JSON object" },
  },
  run = run,
}
