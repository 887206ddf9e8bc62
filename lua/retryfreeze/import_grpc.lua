--- The gRPC importer of `retryfreeze import --from grpc`: reads a gRPC service config (JSON, grpc/service_config.proto
--- and gRFC A6) and writes the retry policy a gRPC channel applies with it as a lock: a route per `methodConfig`
--- name (`POST /pkg.Svc/Method`, `POST /pkg.Svc/*` for a whole service, `POST /*` for the channel's default).
--- grpc-go drops a key it does not know and runs without it (a misspelt `retryPolicy` means no retries); the
--- import refuses every key it does not know, naming its JSON path, so that what is checked is what was meant.
--- The rules the channel applies (gRFC A6):
---   * `maxAttempts` above 5 is treated as 5 (said in a note);
---   * the backoff before retry n is uniform in [0, min(initialBackoff × backoffMultiplier^(n−1), maxBackoff)]:
---     the lock's `full` jitter;
---   * a server's `grpc-retry-pushback-ms` replaces the backoff, a negative one stops the retries;
---   * `retryThrottling` is the lock's token-bucket `retryBudget` (tokenRatio is cut to 3 decimals, as gRPC does);
---   * `timeout` is the call's deadline across all attempts (`totalBudgetMs`), `perAttemptRecvTimeout` an attempt's.
local json = require "retryfreeze.json"

local M = {}

--- The gRPC status codes 1..16 by number (grpc/doc/statuscodes.md); each is the lock's class GRPC_<name>
--- (core/include/retryfreeze/vocabulary.h, RF_GRPC_CLASSES, in the same order: spec 90 holds them equal).
M.STATUS = { "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
  "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED" }

--- The transport classes a gRPC channel reports as a status: a connection refused, reset, unresolved or whose
--- TLS handshake failed is UNAVAILABLE to it, and an attempt that timed out is DEADLINE_EXCEEDED. A status
--- listed as retryable therefore makes these retryable too (the lock's client sees them as transport outcomes).
M.TRANSPORT_OF = {
  UNAVAILABLE = { "CONNECT_REFUSED", "CONNECT_RESET", "DNS_FAILURE", "TLS_FAILURE" },
  DEADLINE_EXCEEDED = { "TIMEOUT" },
}

--- gRPC's own cap on maxAttempts (gRFC A6: "values greater than 5 are treated as 5").
M.MAX_ATTEMPTS = 5

-- The lock's ranges (docs/lock.md).
local MAX_PER_TRY_MS, MAX_TOTAL_MS, MAX_BACKOFF_MS = 600000, 3600000, 600000

-- The keys each object may hold: a key outside is refused. A value of true is not evaluated (it does not change
-- how many attempts a call makes or when).
local KEYS = {
  top = { methodConfig = "methodConfig", retryThrottling = "retryThrottling", loadBalancingPolicy = true,
    loadBalancingConfig = true, healthCheckConfig = true },
  methodConfig = { name = "name", timeout = "timeout", retryPolicy = "retryPolicy", hedgingPolicy = "hedgingPolicy",
    waitForReady = true, maxRequestMessageBytes = true, maxResponseMessageBytes = true },
  name = { service = true, method = true },
  retryPolicy = { maxAttempts = true, initialBackoff = true, maxBackoff = true, backoffMultiplier = true,
    retryableStatusCodes = true, perAttemptRecvTimeout = true },
  hedgingPolicy = { maxAttempts = true, hedgingDelay = true, nonFatalStatusCodes = true },
  retryThrottling = { maxTokens = true, tokenRatio = true },
}

local Refusal = {}
local function refuse(code, fmt, ...) error(setmetatable({ code = code, text = string.format(fmt, ...) }, Refusal), 0) end

local function is_object(v) return type(v) == "table" and getmetatable(v) ~= json.array_mt and v ~= json.null end
local function is_array(v) return type(v) == "table" and (getmetatable(v) == json.array_mt or next(v) == nil or v[1] ~= nil) end

local function check_keys(obj, kind, path, file)
  if not is_object(obj) then refuse(2, "%s: %s: must be an object", file, path) end
  local keys = {}
  for k in pairs(obj) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if not KEYS[kind][k] then
      local known = {}
      for name in pairs(KEYS[kind]) do known[#known + 1] = name end
      table.sort(known)
      refuse(1, "%s: %s.%s: unknown key (gRPC would drop it silently; one of: %s)", file, path, k,
        table.concat(known, ", "))
    end
  end
end

--- A proto3 JSON Duration ("1.5s", "0.000001s") in milliseconds, rounded up to a whole millisecond, or nil.
function M.duration_ms(v)
  if type(v) ~= "string" then return nil end
  local whole, frac = v:match("^(%d+)%.?(%d*)s$")
  if not whole or #frac > 9 or (v:find(".", 1, true) and frac == "") then return nil end
  local nanos = tonumber(whole) * 1e9 + tonumber((frac .. "000000000"):sub(1, 9))
  return math.tointeger and math.tointeger(math.ceil(nanos / 1e6)) or math.ceil(nanos / 1e6)
end

local function duration(obj, key, path, file, required)
  local v = obj[key]
  if v == nil then
    if required then refuse(2, "%s: %s.%s: required", file, path, key) end
    return nil
  end
  local ms = M.duration_ms(v)
  if not ms then refuse(2, "%s: %s.%s: must be a duration such as \"0.1s\", got %s", file, path, key, json.encode(v)) end
  return ms
end

local CODE_OF = {}
for i, name in ipairs(M.STATUS) do CODE_OF[name] = i end

-- A list of status codes (names or numbers) → the lock's classes, with the transport classes they stand for.
local function classes_of(list, path, file)
  if not is_array(list) then refuse(2, "%s: %s: must be an array of status codes", file, path) end
  local out, seen = {}, {}
  local function add(c)
    if not seen[c] then seen[c], out[#out + 1] = true, c end
  end
  for i, v in ipairs(list) do
    local name = type(v) == "number" and M.STATUS[v] or (type(v) == "string" and CODE_OF[v:upper()] and v:upper())
    if not name then
      refuse(1, "%s: %s[%d]: %s is no gRPC status code other than OK", file, path, i - 1, json.encode(v))
    end
    add("GRPC_" .. name)
    for _, c in ipairs(M.TRANSPORT_OF[name] or {}) do add(c) end
  end
  return out
end

local function endpoint_of(name, path, file)
  check_keys(name, "name", path, file)
  local service, method = name.service, name.method
  if service ~= nil and type(service) ~= "string" then refuse(2, "%s: %s.service: must be a string", file, path) end
  if method ~= nil and type(method) ~= "string" then refuse(2, "%s: %s.method: must be a string", file, path) end
  if (service == nil or service == "") then
    if method ~= nil and method ~= "" then
      refuse(2, "%s: %s.method: a method needs its service", file, path)
    end
    return "POST /*"
  end
  local seg = "^[%w%-%._~!%$&'%(%)%+,;=:@%%]+$"
  if not service:match(seg) then refuse(1, "%s: %s.service: %q is no literal path segment of a lock", file, path, service) end
  if method == nil or method == "" then return "POST /" .. service .. "/*" end
  if not method:match(seg) then refuse(1, "%s: %s.method: %q is no literal path segment of a lock", file, path, method) end
  return "POST /" .. service .. "/" .. method
end

local function positive_int(obj, key, path, file, min)
  local v = obj[key]
  if v == nil then refuse(2, "%s: %s.%s: required", file, path, key) end
  if type(v) ~= "number" or v ~= math.floor(v) or v < min then
    refuse(2, "%s: %s.%s: must be an integer of at least %d, got %s", file, path, key, min, json.encode(v))
  end
  return math.tointeger and math.tointeger(v) or v
end

--- Reads a gRPC service config and returns its effective retry policy as a lock (see retryfreeze.import).
-- @param path string; opts table (unused)
-- @return lock table, notes | nil, message, code
function M.read(path)
  local ok, lock, notes = pcall(function()
    local f = io.open(path, "rb")
    if not f then refuse(2, "cannot read %s", path) end
    local text = f:read("a")
    f:close()
    local doc, why = json.decode(text)
    if doc == nil then refuse(2, "%s: not JSON: %s", path, tostring(why)) end
    check_keys(doc, "top", "$", path)
    local notes = {}
    local configs = doc.methodConfig
    if configs == nil or not is_array(configs) or #configs == 0 then
      refuse(1, "%s: $.methodConfig: no method config: the channel has no retry policy to import", path)
    end
    local routes, seen = {}, {}
    for i, mc in ipairs(configs) do
      local at = string.format("$.methodConfig[%d]", i - 1)
      check_keys(mc, "methodConfig", at, path)
      if mc.retryPolicy ~= nil and mc.hedgingPolicy ~= nil then
        refuse(2, "%s: %s: retryPolicy and hedgingPolicy are exclusive", path, at)
      end
      local total = duration(mc, "timeout", at, path, false)
      if not total then
        refuse(1, "%s: %s.timeout: absent: the call's deadline is then whatever the caller's code sets, and a lock "
          .. "needs totalBudgetMs", path, at)
      end
      if total < 1 or total > MAX_TOTAL_MS then
        refuse(1, "%s: %s.timeout: %d ms: a lock's totalBudgetMs is 1..%d", path, at, total, MAX_TOTAL_MS)
      end
      local route = { maxAttempts = 1, totalBudgetMs = total, retryable = json.array() }
      local per_try = total
      local rp, hp = mc.retryPolicy, mc.hedgingPolicy
      if rp ~= nil then
        local rat = at .. ".retryPolicy"
        check_keys(rp, "retryPolicy", rat, path)
        local attempts = positive_int(rp, "maxAttempts", rat, path, 2)
        if attempts > M.MAX_ATTEMPTS then
          notes[#notes + 1] = string.format("%s.maxAttempts %d: gRPC treats it as %d", rat, attempts, M.MAX_ATTEMPTS)
          attempts = M.MAX_ATTEMPTS
        end
        local base = duration(rp, "initialBackoff", rat, path, true)
        local cap = duration(rp, "maxBackoff", rat, path, true)
        local mult = rp.backoffMultiplier
        if type(mult) ~= "number" or mult <= 0 then
          refuse(2, "%s: %s.backoffMultiplier: must be a number above 0, got %s", path, rat, json.encode(mult))
        end
        if mult < 1 or mult > 10 or not json.encode(mult):match("^%d+%.?%d?%d?%d?$") then
          refuse(1, "%s: %s.backoffMultiplier: %s: a lock's multiplier is 1..10 with at most 3 decimals", path, rat,
            json.encode(mult))
        end
        if base < 1 or cap < 1 then refuse(2, "%s: %s: initialBackoff and maxBackoff must be above 0", path, rat) end
        if cap > MAX_BACKOFF_MS then
          refuse(1, "%s: %s.maxBackoff: %d ms: a lock's backoff.maxMs is at most %d", path, rat, cap, MAX_BACKOFF_MS)
        end
        local codes = rp.retryableStatusCodes
        if codes == nil or (is_array(codes) and #codes == 0) then
          refuse(2, "%s: %s.retryableStatusCodes: required, and not empty", path, rat)
        end
        route.maxAttempts = attempts
        route.retryable = json.array(classes_of(codes, rat .. ".retryableStatusCodes", path))
        route.backoff = { baseMs = math.min(base, cap), maxMs = cap, multiplier = mult, jitter = "full" }
        local recv = duration(rp, "perAttemptRecvTimeout", rat, path, false)
        if recv then per_try = math.min(per_try, recv) end
      elseif hp ~= nil then
        local hat = at .. ".hedgingPolicy"
        check_keys(hp, "hedgingPolicy", hat, path)
        local attempts = positive_int(hp, "maxAttempts", hat, path, 2)
        if attempts > M.MAX_ATTEMPTS then
          notes[#notes + 1] = string.format("%s.maxAttempts %d: gRPC treats it as %d", hat, attempts, M.MAX_ATTEMPTS)
          attempts = M.MAX_ATTEMPTS
        end
        local delay = duration(hp, "hedgingDelay", hat, path, false) or 0
        if delay < 1 then
          refuse(1, "%s: %s.hedgingDelay: %d ms sends every hedge at once; a lock's hedgingDelayMs is at least 1",
            path, hat, delay)
        end
        local non_fatal = hp.nonFatalStatusCodes ~= nil
          and classes_of(hp.nonFatalStatusCodes, hat .. ".nonFatalStatusCodes", path) or {}
        route.maxAttempts = attempts
        route.retryable = json.array(non_fatal)
        route.hedging = { maxAttempts = attempts, hedgingDelayMs = math.min(delay, MAX_PER_TRY_MS),
          nonFatalClasses = json.array(non_fatal) }
        route.backoff = { baseMs = 0, maxMs = 0, multiplier = 1, jitter = "none" }
      end
      if per_try > MAX_PER_TRY_MS then
        refuse(1, "%s: %s: an attempt may take %d ms (timeout%s): a lock's perAttemptTimeoutMs is at most %d", path,
          at, per_try, rp and " or retryPolicy.perAttemptRecvTimeout" or "", MAX_PER_TRY_MS)
      end
      route.perAttemptTimeoutMs = per_try
      route.retryAfter = { honor = true, headers = json.array({ "grpc-retry-pushback-ms" }),
        maxMs = math.min(total, MAX_TOTAL_MS) }
      local names = mc.name
      if not is_array(names) or #names == 0 then refuse(2, "%s: %s.name: required, an array of names", path, at) end
      for j, name in ipairs(names) do
        local nat = string.format("%s.name[%d]", at, j - 1)
        local endpoint = endpoint_of(name, nat, path)
        if seen[endpoint] then refuse(2, "%s: %s: %s is also named at %s", path, nat, endpoint, seen[endpoint]) end
        seen[endpoint] = nat
        local r = {}
        for k, v in pairs(route) do r[k] = v end
        r.endpoint = endpoint
        routes[#routes + 1] = r
      end
    end
    table.sort(routes, function(a, b) return a.endpoint < b.endpoint end)
    local lock = { version = 1, defaults = { minAttemptMs = 0, idempotencyRequired = json.array() }, routes = routes }
    local rt = doc.retryThrottling
    if rt ~= nil then
      check_keys(rt, "retryThrottling", "$.retryThrottling", path)
      local tokens = positive_int(rt, "maxTokens", "$.retryThrottling", path, 1)
      if tokens > 1000 then refuse(2, "%s: $.retryThrottling.maxTokens: gRPC takes at most 1000", path) end
      local ratio = rt.tokenRatio
      if type(ratio) ~= "number" or ratio <= 0 then
        refuse(2, "%s: $.retryThrottling.tokenRatio: must be a number above 0", path)
      end
      -- Cut, not rounded, in decimal (ratio * 1000 in binary may fall just below a whole number).
      local whole, frac = string.format("%.9f", ratio):match("^(%d+)%.(%d%d%d)")
      local cut = tonumber(whole .. "." .. frac)
      if cut ~= ratio then
        notes[#notes + 1] = string.format("$.retryThrottling.tokenRatio %s: gRPC keeps 3 decimals, %s", json.encode(ratio),
          json.encode(cut))
      end
      if cut < 0.001 then refuse(1, "%s: $.retryThrottling.tokenRatio: below 0.001, which gRPC reads as 0", path) end
      lock.retryBudget = { maxTokens = tokens, tokenRatio = cut }
    end
    notes[#notes + 1] = "a status listed retryable makes the transport failures gRPC reports as it retryable too "
      .. "(UNAVAILABLE: a refused, reset, unresolved or TLS-failed connection; DEADLINE_EXCEEDED: a timeout)"
    notes[#notes + 1] = "gRPC's transparent retry of a call that never left the client is not counted in maxAttempts"
    lock["$comment"] = "imported from gRPC service config " .. path .. " by retryfreeze import: "
      .. table.concat(notes, "; ")
    return lock, notes
  end)
  if ok then return lock, notes end
  if getmetatable(lock) == Refusal then return nil, lock.text, lock.code end
  error(lock, 0)
end

--- The key order of an imported lock's JSON.
M.ORDER = { "$comment", "version", "defaults", "routes", "retryBudget", "endpoint", "maxAttempts",
  "perAttemptTimeoutMs", "totalBudgetMs", "minAttemptMs", "retryable", "idempotencyRequired", "backoff", "hedging",
  "retryAfter", "baseMs", "multiplier", "maxMs", "jitter", "honor", "headers", "hedgingDelayMs", "nonFatalClasses",
  "maxTokens", "tokenRatio" }

return M
