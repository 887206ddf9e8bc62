-- Two lock pairs whose widening an enumeration of sampled request shapes missed: `diff` and `verify` passed the
-- new lock although one route's requests gain attempts, time, classes and lose their key requirement. Each pair
-- also narrows one other route a little, so that the diff finds a difference and does not fail closed on "digest
-- changed but no rule difference was found". Shared by spec/10-diff_spec.lua and spec/11-signoff_spec.lua.
local json = require "retryfreeze.json"

local M = {}

local function defaults()
  return { maxAttempts = 1, perAttemptTimeoutMs = 1000, totalBudgetMs = 2000, minAttemptMs = 100,
    retryable = json.array(), notRetryable = json.array(), idempotencyRequired = { "GET", "POST" } }
end

-- The widened route: 10 attempts, 600 s per try, a 1 h budget, every 4xx/5xx retryable, no key required.
local function widen(route)
  route.maxAttempts, route.perAttemptTimeoutMs, route.totalBudgetMs = 10, 600000, 3600000
  route.retryable, route.idempotencyRequired = { "HTTP_4XX", "HTTP_5XX" }, json.array()
  return route
end

--- Placeholder collision: the shapes stood for "any other segment" by the literal `rf~`, which the lock names
--- itself, so GET /a/{id} never decided a shape and its widening went unseen.
function M.placeholder()
  local old = { version = 1, defaults = defaults(), routes = {
    { endpoint = "GET /a/rf~", maxAttempts = 2, retryable = { "HTTP_503" } },
    { endpoint = "GET /a/{id}" },
    { endpoint = "GET /b", maxAttempts = 3, retryable = { "HTTP_503" } },
  } }
  local new = json.decode(json.encode(old))
  widen(new.routes[2])
  new.routes[3].maxAttempts = 2 -- the small narrowing elsewhere
  return json.encode(old), json.encode(new), "GET /a/{id}"
end

--- Empty segments: a last "*" matches /a/ and /a//x, which a {param} refuses. GET /a and GET /a/{id}/* take
--- every path of GET /a/* without an empty segment, and the shapes had none.
function M.empty_segment()
  local old = { version = 1, defaults = defaults(), routes = {
    { endpoint = "GET /a" },
    { endpoint = "GET /a/{id}/*", maxAttempts = 3, retryable = { "HTTP_503" } },
    { endpoint = "GET /a/*" },
  } }
  local new = json.decode(json.encode(old))
  widen(new.routes[3])
  new.routes[2].maxAttempts = 2
  return json.encode(old), json.encode(new), "GET /a/*"
end

return M
