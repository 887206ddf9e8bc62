--- A lock exported as another system's retry configuration (`retryfreeze export LOCK --to TARGET`). Each target is
--- a row of M.targets: how it names a route, how it writes the configuration, and what it does with every field of
--- the lock schema (M.FIELDS, one table for every target, which docs/cli.md's losses table is checked against).
--- An export never widens silently: a narrowing rule the target cannot carry is a loss, and a loss stops the export
--- unless it is accepted by name; a value the target clamps is said in a note.
local import_grpc = require "retryfreeze.import_grpc"
local json = require "retryfreeze.json"
local rf = require "retryfreeze"

local M = {}

-- What a target does with a lock field: "carried" (written in the target's terms), "lost" (a narrowing rule the
-- target cannot carry: a loss when the lock uses it, see `lost`), or "irrelevant" (no effect on a request's tries).
M.KINDS = { "carried", "lost", "irrelevant" }

-- The gRPC status code name each class GRPC_<name> stands for (grpc/doc/statuscodes.md), from the engine's list.
local GRPC_CODES = {}
for _, c in ipairs(rf.grpc_classes) do GRPC_CODES[c] = c:sub(6) end

-- Does the route read gRPC's pushback and honour it (then retryAfter.maxMs caps it, which gRPC does not)?
local function reads_pushback(route)
  if not route.retryAfter.honor then return false end
  for _, hname in ipairs(route.retryAfter.headers or {}) do -- absent: the default, retry-after alone
    if hname == "grpc-retry-pushback-ms" then return true end
  end
  return false
end

-- What a list of classes (retryable, or hedging's non-fatal ones) becomes on a gRPC channel, as a loss text or nil.
-- gRPC reports a transport failure as a status (import_grpc.TRANSPORT_OF: a refused connection is UNAVAILABLE, a
-- timed-out attempt DEADLINE_EXCEEDED), so a listed code also retries those failures: where the lock does not list
-- them, the channel would retry more than the lock (a widening). A transport class so listed is carried by its code;
-- any other class that is no gRPC code is one the channel never sees (a narrowing it cannot carry). `what` names the
-- list in the text.
local function grpc_gaps(list, what)
  local listed, carried, widened, unseen = {}, {}, {}, {}
  for _, c in ipairs(list) do listed[c] = true end
  for _, c in ipairs(list) do
    for _, t in ipairs(GRPC_CODES[c] and import_grpc.TRANSPORT_OF[GRPC_CODES[c]] or {}) do
      carried[t] = true
      if not listed[t] then widened[#widened + 1] = t .. " (as " .. GRPC_CODES[c] .. ")" end
    end
  end
  for _, c in ipairs(list) do
    if not GRPC_CODES[c] and not carried[c] then unseen[#unseen + 1] = c end
  end
  local texts = {}
  if #unseen > 0 then texts[1] = what .. " gRPC does not see on a call: " .. table.concat(unseen, ", ") end
  if #widened > 0 then
    texts[#texts + 1] = "gRPC would also retry " .. table.concat(widened, ", ") .. ", which the lock does not list"
  end
  return #texts > 0 and table.concat(texts, "; ") or nil
end

local function ms(n) return tostring(n) .. " ms" end

--- Every lock schema field (rf.lock_schema()'s paths) and what each target does with it: {kind, why, lost =
--- function(route or lock) → text of the loss when this lock narrows with the field (nil: nothing lost)}. `lost`
--- takes a route for a route field and the lock (its canonical JSON) for a lock field.
M.FIELDS = {
  ["version"] = { grpc = { "irrelevant", "the lock format's version" } },
  ["defaults"] = { grpc = { "irrelevant", "expanded into each route before the export" } },
  ["routes"] = { grpc = { "carried", "one methodConfig per route" } },
  ["retryBudget"] = { grpc = { "carried", "retryThrottling, for a token bucket" } },
  ["retryBudget.maxTokens"] = { grpc = { "carried", "retryThrottling.maxTokens (the same bucket, gRFC A6)" } },
  ["retryBudget.tokenRatio"] = { grpc = { "carried", "retryThrottling.tokenRatio" } },
  ["retryBudget.retryRatio"] = { grpc = { "lost", "a ratio budget: gRPC throttles with a token bucket only",
    lost = function(lock) return lock.retryBudget and lock.retryBudget.retryRatio and
      ("a ratio retry budget (retryRatio " .. lock.retryBudget.retryRatio .. ")") end } },
  ["retryBudget.minRetriesPerSecond"] = { grpc = { "lost", "part of a ratio budget",
    lost = function(lock) return lock.retryBudget and lock.retryBudget.minRetriesPerSecond and
      ("minRetriesPerSecond " .. lock.retryBudget.minRetriesPerSecond) end } },
  ["retryBudget.ttlMs"] = { grpc = { "lost", "part of a ratio budget",
    lost = function(lock) return lock.retryBudget and lock.retryBudget.ttlMs and
      ("ttlMs " .. lock.retryBudget.ttlMs) end } },
  ["retryBudget.shared"] = { grpc = { "lost", "a fleet-wide bucket: gRPC's bucket is the channel's own",
    lost = function(lock) return lock.retryBudget and lock.retryBudget.shared and
      ("a retry budget shared by the fleet (" .. lock.retryBudget.shared.name .. ")") end } },
  ["retryBudget.shared.name"] = { grpc = { "lost", "part of retryBudget.shared",
    lost = function(lock) return lock.retryBudget and lock.retryBudget.shared and
      ("shared bucket name " .. lock.retryBudget.shared.name) end } },
  ["gate"] = { grpc = { "irrelevant", "judges ledgers, not a request's tries" } },
  ["gate.maxRetriedSuccess"] = { grpc = { "irrelevant", "a gate threshold" } },
  ["gate.maxAttemptsPerSuccess"] = { grpc = { "irrelevant", "a gate threshold" } },
  ["gate.maxTerminalRate"] = { grpc = { "irrelevant", "a gate threshold" } },
  ["gate.maxRetryRatio"] = { grpc = { "irrelevant", "a gate threshold" } },
  ["gate.minSuccessRate"] = { grpc = { "irrelevant", "a gate threshold" } },
  ["gate.minSuccesses"] = { grpc = { "irrelevant", "a gate threshold" } },
  ["gate.forbidReasons"] = { grpc = { "irrelevant", "a gate threshold" } },
  ["transparentRetry"] = { grpc = { "lost", "gRPC always retries an RPC that never left (gRFC A6)",
    lost = function(lock) return lock.transparentRetry == false and "transparentRetry false" or nil end } },
  ["endpoint"] = { grpc = { "carried", "methodConfig.name: {service, method}; /pkg.Svc/* names the service" } },
  ["maxAttempts"] = { grpc = { "carried", "retryPolicy.maxAttempts (gRPC caps it at 5; 1: no retryPolicy)" } },
  ["perAttemptTimeoutMs"] = { grpc = { "lost", "a per-try timeout: gRPC has only the call's timeout",
    lost = function(r) return r.perAttemptTimeoutMs < r.totalBudgetMs and
      ("a per-try timeout of " .. ms(r.perAttemptTimeoutMs) .. " under a deadline of " .. ms(r.totalBudgetMs)) end } },
  ["totalBudgetMs"] = { grpc = { "carried", "methodConfig.timeout" } },
  ["minAttemptMs"] = { grpc = { "lost", "gRPC starts a retry however little time is left",
    lost = function(r) return r.minAttemptMs > 0 and ("no retry with less than " .. ms(r.minAttemptMs) .. " left")
      or nil end } },
  ["retryable"] = { grpc = { "carried", "retryPolicy.retryableStatusCodes: the GRPC_* classes (a code also retries "
    .. "the transport failures gRPC reports as it: the lock must list them); any other is lost",
    lost = function(r) return grpc_gaps(r.retryable, "retryable classes") end } },
  ["notRetryable"] = { grpc = { "carried", "gRPC retries only the codes listed retryable" } },
  ["idempotencyRequired"] = { grpc = { "lost", "gRPC retries a method whatever its idempotency key",
    lost = function(r)
      for _, m in ipairs(r.idempotencyRequired) do
        if m == "POST" then return "a POST retried only with an idempotency key" end
      end
    end } },
  ["backoff"] = { grpc = { "carried", "retryPolicy's backoff; a hedgingPolicy has none",
    lost = function(r)
      return r.hedging and r.backoff.baseMs > 0 and ("a hedged route's backoff of " .. ms(r.backoff.baseMs)
        .. ": gRPC sends the next hedge at once after a non-fatal status") or nil
    end } },
  ["backoff.baseMs"] = { grpc = { "carried", "retryPolicy.initialBackoff (at least 1 ms)" } },
  ["backoff.multiplier"] = { grpc = { "carried", "retryPolicy.backoffMultiplier" } },
  ["backoff.maxMs"] = { grpc = { "carried", "retryPolicy.maxBackoff (at least 1 ms)" } },
  ["backoff.jitter"] = { grpc = { "lost", "gRPC always draws the delay in [0, backoff] (full jitter)",
    lost = function(r) return r.backoff.jitter ~= "full" and ("jitter " .. r.backoff.jitter) or nil end } },
  ["retryAfter"] = { grpc = { "irrelevant", "see its subfields" } },
  ["retryAfter.honor"] = { grpc = { "irrelevant", "gRPC always honours grpc-retry-pushback-ms, which only delays or stops" } },
  ["retryAfter.maxMs"] = { grpc = { "lost", "a cap on a server-asked wait: gRPC waits for any pushback",
    lost = function(r) return reads_pushback(r) and r.retryAfter.maxMs < r.totalBudgetMs and
      ("a pushback over " .. ms(r.retryAfter.maxMs) .. " stops the request") or nil end } },
  ["retryAfter.headers"] = { grpc = { "lost", "wait headers: gRPC reads grpc-retry-pushback-ms alone",
    lost = function(r)
      if not r.retryAfter.honor then return nil end
      local other = {}
      for _, hname in ipairs(r.retryAfter.headers or { "retry-after" }) do
        if hname ~= "grpc-retry-pushback-ms" then other[#other + 1] = hname end
      end
      return #other > 0 and ("a wait asked by " .. table.concat(other, ", ") .. " is not waited") or nil
    end } },
  ["classLimits"] = { grpc = { "lost", "per-class attempt limits",
    lost = function(r)
      local parts = {}
      for c, n in pairs(r.classLimits or {}) do parts[#parts + 1] = c .. " " .. n end
      table.sort(parts)
      return #parts > 0 and ("class limits " .. table.concat(parts, ", ")) or nil
    end } },
  ["hedging"] = { grpc = { "carried", "hedgingPolicy (instead of retryPolicy)" } },
  ["hedging.maxAttempts"] = { grpc = { "carried", "hedgingPolicy.maxAttempts" } },
  ["hedging.hedgingDelayMs"] = { grpc = { "carried", "hedgingPolicy.hedgingDelay" } },
  ["hedging.nonFatalClasses"] = { grpc = { "carried", "hedgingPolicy.nonFatalStatusCodes: the GRPC_* classes",
    lost = function(r) return r.hedging and grpc_gaps(r.hedging.nonFatalClasses, "non-fatal classes") or nil end } },
  ["propagation"] = { grpc = { "lost", "retries told across layers",
    lost = function(r) return r.propagation and "propagation (one layer retries)" or nil end } },
  ["propagation.attemptHeader"] = { grpc = { "lost", "part of propagation",
    lost = function(r) return r.propagation and r.propagation.attemptHeader and
      ("attempt header " .. r.propagation.attemptHeader) end } },
  ["propagation.deadlineHeader"] = { grpc = { "lost", "part of propagation",
    lost = function(r) return r.propagation and r.propagation.deadlineHeader and
      ("deadline header " .. r.propagation.deadlineHeader) end } },
  ["propagation.overloadedHeader"] = { grpc = { "lost", "part of propagation",
    lost = function(r) return r.propagation and r.propagation.overloadedHeader and
      ("overloaded header " .. r.propagation.overloadedHeader) end } },
  ["propagation.inboundDeadline"] = { grpc = { "lost", "part of propagation",
    lost = function(r) return r.propagation and r.propagation.inboundDeadline and "inboundDeadline" or nil end } },
  ["propagation.inboundAttempt"] = { grpc = { "lost", "part of propagation",
    lost = function(r) return r.propagation and r.propagation.inboundAttempt and "inboundAttempt" or nil end } },
}

-- A duration as gRPC's JSON writes a google.protobuf.Duration: seconds with a fraction and an "s".
local function duration(n_ms) return string.format("%d.%03ds", math.floor(n_ms / 1000), n_ms % 1000) end

-- The gRPC method a route's endpoint names: {service, method} for POST /pkg.Svc/Method, {service} for
-- POST /pkg.Svc/*; nil for any other endpoint. The service is package-qualified (it has a dot), which tells a gRPC
-- method from an HTTP path such as POST /v1/jobs.
local function grpc_name(endpoint)
  local service, method = endpoint:match("^POST /([%a_][%w_]*%.[%w_%.]*[%w_])/([%a_][%w_]*)$")
  if service then return { service = service, method = method } end
  service = endpoint:match("^POST /([%a_][%w_]*%.[%w_%.]*[%w_])/%*$")
  if service then return { service = service } end
  return nil
end

-- The gRPC status code names of a class list's GRPC_* classes, in the list's order.
local function codes_of(list)
  local out = json.array()
  for _, c in ipairs(list) do
    if GRPC_CODES[c] then out[#out + 1] = GRPC_CODES[c] end
  end
  return out
end

-- One methodConfig for a route, with its notes.
local function grpc_method_config(r, name, notes)
  local mc = { name = json.array({ name }), timeout = duration(r.totalBudgetMs) }
  local where = "route " .. r.endpoint
  if r.hedging then
    local nf = codes_of(r.hedging.nonFatalClasses)
    local n = r.hedging.maxAttempts
    if n > 5 then notes[#notes + 1] = where .. ": gRPC caps hedgingPolicy.maxAttempts " .. n .. " at 5" end
    notes[#notes + 1] = where .. ": hedgingPolicy; grpc-core (C++, Python, Ruby) and grpc-go do not hedge, so "
      .. "there the method makes one attempt (grpc-java hedges)"
    if r.maxAttempts > 1 and #codes_of(r.retryable) > 0 then
      notes[#notes + 1] = where .. ": a methodConfig has a retryPolicy or a hedgingPolicy, not both: the route's "
        .. "retries of " .. table.concat(codes_of(r.retryable), ", ") .. " are not written (fewer attempts)"
    end
    mc.hedgingPolicy = { maxAttempts = n, hedgingDelay = duration(r.hedging.hedgingDelayMs) }
    if #nf > 0 then mc.hedgingPolicy.nonFatalStatusCodes = nf end
    return mc
  end
  local codes = codes_of(r.retryable)
  if r.maxAttempts < 2 then
    notes[#notes + 1] = where .. ": maxAttempts 1, so no retryPolicy (one attempt, as the lock)"
  elseif #codes == 0 then
    notes[#notes + 1] = where .. ": no GRPC_* class is retryable, so no retryPolicy"
  else
    if r.maxAttempts > 5 then
      notes[#notes + 1] = where .. ": gRPC caps retryPolicy.maxAttempts " .. r.maxAttempts .. " at 5"
    end
    for _, f in ipairs({ "baseMs", "maxMs" }) do
      if r.backoff[f] == 0 then
        notes[#notes + 1] = where .. ": backoff." .. f .. " 0 is written as 1 ms (gRPC needs a positive backoff)"
      end
    end
    mc.retryPolicy = {
      maxAttempts = r.maxAttempts,
      initialBackoff = duration(math.max(1, r.backoff.baseMs)),
      maxBackoff = duration(math.max(1, r.backoff.maxMs)),
      backoffMultiplier = r.backoff.multiplier,
      retryableStatusCodes = codes,
    }
  end
  return mc
end

-- A lock value read from its canonical JSON: a decimal field such as multiplier is a number there.
local function canonical(policy) return json.decode(policy:canonical_json()) end

--- The export targets: {name = {route_name(endpoint) → the target's name of the route or nil (not one it can
--- carry), build(lock, routes, notes) → the configuration's JSON text, order (json.encode's key order)}}.
M.targets = {
  grpc = {
    about = "a gRPC service config (gRFC A6 retryPolicy/hedgingPolicy, retryThrottling)",
    route_name = grpc_name,
    build = function(lock, routes, notes)
      local configs = json.array()
      for _, rt in ipairs(routes) do configs[#configs + 1] = grpc_method_config(rt.route, rt.name, notes) end
      local out = { methodConfig = configs }
      local b = lock.retryBudget
      if b and b.maxTokens then out.retryThrottling = { maxTokens = b.maxTokens, tokenRatio = b.tokenRatio } end
      return json.encode(out, { "methodConfig", "name", "service", "method", "timeout", "retryPolicy",
        "hedgingPolicy", "maxAttempts", "initialBackoff", "maxBackoff", "backoffMultiplier", "retryableStatusCodes",
        "hedgingDelay", "nonFatalStatusCodes", "retryThrottling", "maxTokens", "tokenRatio" }) .. "\n"
    end,
  },
}

--- The target names, sorted (the CLI's --to choices).
function M.target_names()
  local names = {}
  for k in pairs(M.targets) do names[#names + 1] = k end
  table.sort(names)
  return names
end

--- Exports a loaded policy to a target.
-- @param policy a retryfreeze.Policy
-- @param target string, a key of M.targets
-- @param accept table|nil: set of accepted field paths (M.FIELDS keys) and route endpoints
-- @return {text (nil when a loss is not accepted), losses = {{field, route (endpoint or nil), what, accepted}},
--   notes = {string}}; raises for an unknown target
function M.export(policy, target, accept)
  local t = assert(M.targets[target], "unknown export target")
  accept = accept or {}
  local lock = canonical(policy)
  local result = { losses = {}, notes = {} }
  local function loss(field, route, what)
    result.losses[#result.losses + 1] = { field = field, route = route, what = what, accepted = accept[field] == true }
  end
  local schema = rf.lock_schema()
  local routes = {}
  for _, r in ipairs(lock.routes) do
    local name = t.route_name(r.endpoint)
    if not name then
      result.losses[#result.losses + 1] = { field = r.endpoint, accepted = accept[r.endpoint] == true,
        what = "not a " .. target .. " method (POST /package.Service/Method or POST /package.Service/*): the route "
          .. "is left out" }
    else
      routes[#routes + 1] = { route = r, name = name }
      for _, row in ipairs(schema) do
        local f = M.FIELDS[row.path][target]
        if row.place == "route" and f.lost then
          local what = f.lost(r)
          if what then loss(row.path, r.endpoint, what) end
        end
      end
    end
  end
  for _, row in ipairs(schema) do
    local f = M.FIELDS[row.path][target]
    if row.place ~= "route" and f.lost then
      local what = f.lost(lock)
      if what then loss(row.path, nil, what) end
    end
  end
  for _, l in ipairs(result.losses) do
    if not l.accepted then return result end
  end
  result.text = t.build(lock, routes, result.notes)
  return result
end

return M
