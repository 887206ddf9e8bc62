-- The BASELINE of bench/lua/bench_lua.lua, not part of retryfreeze: a minimal pure-Lua port of the kind of
-- classifier the project's seed had. Facts {status, transport, attempts} → a failure class string by the
-- engine's rules (core/src/engine/failure_class.c: a transport outcome names the class, else HTTP_<status>
-- for 100..599, else UNKNOWN), a lookup in the route's retryable / not-retryable class sets (a status's own
-- token beats its family's, HTTP_4XX / HTTP_5XX; GATEWAY_TIMEOUT = TIMEOUT + HTTP_504, HANDLER_5XX =
-- HTTP_5XX), attempts < maxAttempts → retry, and exponential backoff with full jitter from a seeded RNG
-- (xorshift64*). It returns a fresh {retry, reason, delay_ms, class}.
--
-- Left out, compared with the engine's rf_decide: route matching (every request gets the one route it was
-- built from), the total deadline and per-try timeout, Retry-After and the other wait headers, retry budgets,
-- idempotency keys (idempotencyRequired), classLimits, unpinned sources and redirects. It is the yardstick
-- of "the Lua side does little", so that the binding's cost is seen against Lua doing the work itself. The fuller
-- port of the seed's classifier (Retry-After, idempotency keys, unpinned sources), bench/lua/seed001_classifier.lua,
-- shares its classify, class sets and backoff.
-- Lua 5.3+ (integer arithmetic) and LuaJIT 2.1 (the same xorshift64* on a uint64_t through the FFI and the bit
-- library, the idiomatic LuaJIT form, which the JIT compiles without boxing): the same draws on both.
local M = {}

local TRANSPORT_CLASS = {
  timeout = "TIMEOUT",
  ["connect-reset"] = "CONNECT_RESET",
  ["got-nothing"] = "CONNECT_RESET",
  ["connect-refused"] = "CONNECT_REFUSED",
  dns = "DNS_FAILURE",
  tls = "TLS_FAILURE",
  ["proxy-refused"] = "PROXY_REFUSED",
  ["too-many-redirects"] = "TOO_MANY_REDIRECTS",
  other = "UNKNOWN",
}

-- backoff(seed, base_ms, max_ms) → delay(attempts): exponential backoff with full jitter, an integer in
-- [0, min(max_ms, base_ms * 2^(attempts-1))], drawn by xorshift64* seeded with seed. The source is compiled by the
-- running Lua (neither parses the other's 64-bit integer syntax); the 5.3+ one is the port as it always was.
local backoff_source = rawget(_G, "jit") and [[
  local ffi, bit = require "ffi", require "bit"
  return function(seed, base_ms, max_ms)
    local state = ffi.new("uint64_t[1]", ffi.cast("uint64_t", seed) * 0x9E3779B97F4A7C15ULL)
    state[0] = bit.bor(state[0], 1ULL) -- xorshift64* must not start at 0
    return function(attempts)
      local cap = attempts <= 62 and base_ms * 2 ^ (attempts - 1) or 0
      if cap > max_ms or cap <= 0 then cap = max_ms end
      local s = state[0]
      s = bit.bxor(s, bit.rshift(s, 12))
      s = bit.bxor(s, bit.lshift(s, 25))
      s = bit.bxor(s, bit.rshift(s, 27))
      state[0] = s
      return tonumber(bit.rshift(s * 0x2545F4914F6CDD1DULL, 11) % (cap + 1))
    end
  end]] or [[
  return function(seed, base_ms, max_ms)
    local state = seed * 0x9E3779B97F4A7C15 | 1 -- xorshift64* must not start at 0
    return function(attempts)
      local cap = base_ms * (1 << (attempts - 1))
      if cap > max_ms or cap <= 0 then cap = max_ms end
      state = state ~ (state >> 12)
      state = state ~ (state << 25)
      state = state ~ (state >> 27)
      return ((state * 0x2545F4914F6CDD1D) >> 11) % (cap + 1)
    end
  end]]
local backoff = assert((loadstring or load)(backoff_source, "=seed_classifier.backoff"))() -- luacheck: ignore 113
--- backoff(seed, base_ms, max_ms) → delay(attempts), above (bench/lua/seed001_classifier.lua draws with it too).
M.backoff = backoff

--- The failure class of one attempt's facts (rf_classify's rules): "HTTP_503", "TIMEOUT", "UNKNOWN", …
function M.classify(status, transport)
  if transport ~= nil and transport ~= "ok" then return TRANSPORT_CLASS[transport] or "UNKNOWN" end
  if status ~= nil and status >= 100 and status <= 599 then return "HTTP_" .. status end
  return "UNKNOWN"
end

--- A token list of the lock ({"GATEWAY_TIMEOUT", "HTTP_429", "HANDLER_5XX", …}) as a set of class names.
local function class_set(tokens)
  local set = {}
  for _, token in ipairs(tokens) do
    if token == "GATEWAY_TIMEOUT" then
      set.TIMEOUT, set.HTTP_504 = true, true
    elseif token == "HANDLER_5XX" then
      set.HTTP_5XX = true
    else
      set[token] = true
    end
  end
  return set
end
M.class_set = class_set

-- retryable_class(class, status) → whether the class is retryable on a route whose retryable and not-retryable
-- token lists are given: a transport class by its own token; a status by its own token, then its family's
-- (HTTP_4XX / HTTP_5XX), a status's own token beating its family's.
local function retryable_classes(retryable_tokens, not_retryable_tokens)
  local retryable, not_retryable = class_set(retryable_tokens), class_set(not_retryable_tokens or {})
  return function(class, status)
    if class:sub(1, 5) ~= "HTTP_" then return retryable[class] == true end
    if retryable[class] then return true end
    if not_retryable[class] then return false end
    local family = status >= 500 and "HTTP_5XX" or status >= 400 and "HTTP_4XX" or nil
    return family ~= nil and retryable[family] == true
  end
end
M.retryable_classes = retryable_classes

--- A classifier for one route: opts = {retryable = {tokens}, not_retryable = {tokens}, max_attempts = n,
--- base_ms = n, max_ms = n, seed = integer} (the shape of policy:routes()' entries, flattened).
function M.new(opts)
  local retryable_class = retryable_classes(opts.retryable, opts.not_retryable)
  local max_attempts, base_ms, max_ms = opts.max_attempts, opts.base_ms, opts.max_ms
  local delay = backoff(opts.seed, base_ms, max_ms)

  --- facts {status=, transport=, attempts=} → {retry, reason, delay_ms, class}.
  return function(facts)
    local status, transport, attempts = facts.status or 0, facts.transport, facts.attempts or 1
    local class = M.classify(status, transport)
    if (transport == nil or transport == "ok") and status >= 200 and status <= 399 then
      return { retry = false, reason = "success", delay_ms = 0, class = class }
    end
    if attempts >= max_attempts then
      return { retry = false, reason = "max-attempts", delay_ms = 0, class = class }
    end
    if not retryable_class(class, status) then
      return { retry = false, reason = "status-not-retryable", delay_ms = 0, class = class }
    end
    return { retry = true, reason = "within-budget", delay_ms = delay(attempts), class = class }
  end
end

--- The classifier for a route of policy:routes() (its classes, max_attempts and backoff), seeded with seed.
function M.for_route(route, seed)
  return M.new({ retryable = route.retryable, not_retryable = route.not_retryable, max_attempts = route.max_attempts,
    base_ms = route.backoff.base_ms, max_ms = route.backoff.max_ms, seed = seed })
end

return M
