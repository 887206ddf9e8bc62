-- The diff's promise, asked of the engine request by request: what one request gets under a policy, and whether
-- it gains between two (more attempts, more time, a new retryable class, a dropped key requirement, an earlier
-- or less spread delay window, a changed wait header list, or a route where there was none). The property tests
-- of spec/10-diff_spec.lua and spec/17-diff_partition_spec.lua judge retryfreeze.diff against it, with the
-- generator helpers below.
local M = {}

--- The failure classes a request is probed with.
M.FAULTS = { { status = 500 }, { status = 502 }, { status = 503 }, { status = 504 }, { status = 404 },
  { status = 429 }, { status = 400 }, { transport = "timeout" }, { transport = "connect-reset" } }

--- What one request gets under p, or nil when no route takes it. cache (optional table) keeps the effects of a
--- route per method: they depend on nothing else.
function M.effects(p, method, path, cache)
  local ep = p:match(method, path)
  if not ep then return nil end
  local key = ep .. "\0" .. method
  if cache and cache[key] then return cache[key] end
  local r
  for _, x in ipairs(p:routes()) do if x.endpoint == ep then r = x end end
  local e = { route = ep, attempts = r.max_attempts, per = r.per_attempt_timeout_ms, total = r.total_budget_ms,
    min = r.min_attempt_ms, ra_honor = r.retry_after.honor, ra_max = r.retry_after.max_ms, classes = {},
    key = false, windows = {}, caps = {}, headers = table.concat(r.retry_after.headers, ",") }
  for _, m in ipairs(r.idempotency_required) do e.key = e.key or m == method end
  for i, f in ipairs(M.FAULTS) do
    e.classes[i] = p:class_retryable(ep, f)
    e.caps[i] = p:class_attempts(ep, f)
  end
  for n = 1, r.max_attempts - 1 do e.windows[n] = { p:delay_window(ep, n) } end
  if cache then cache[key] = e end
  return e
end

--- Whether a request gains from effects a (old; nil: no route) to b (new): the widening the diff must report.
function M.gains(a, b)
  if b == nil then return false end
  if a == nil then return true end
  if b.attempts > a.attempts or b.per > a.per or b.total > a.total or b.min < a.min or b.ra_max > a.ra_max
      or (a.ra_honor and not b.ra_honor) or (a.key and not b.key) then
    return true
  end
  for i = 1, #M.FAULTS do if b.classes[i] and not a.classes[i] then return true end end
  for i = 1, #M.FAULTS do if a.classes[i] and b.classes[i] and b.caps[i] > a.caps[i] then return true end end
  if a.headers ~= b.headers then return true end
  for n = 1, math.min(#a.windows, #b.windows) do
    local lo_a, hi_a, lo_b, hi_b = a.windows[n][1], a.windows[n][2], b.windows[n][1], b.windows[n][2]
    if lo_b < lo_a or hi_b - lo_b < hi_a - lo_a then return true end
  end
  return false
end

--- A reproducible generator: Park-Miller (MINSTD), exact in doubles (LuaJIT and Lua 5.1 too). rng(n) → 1..n.
function M.rng(seed)
  local state = seed % 2147483646 + 1
  return function(n)
    state = state * 48271 % 2147483647
    return math.floor(state / 2147483647 * n) + 1
  end
end

--- A random element of list.
function M.pick(rng, list) return list[rng(#list)] end

--- 0..2 distinct random elements of list, as a JSON array (json.array() when none).
function M.subset(rng, list)
  local out, seen = {}, {}
  for _ = 1, rng(3) - 1 do
    local c = M.pick(rng, list)
    if not seen[c] then
      seen[c] = true
      out[#out + 1] = c
    end
  end
  return #out > 0 and out or require("retryfreeze.json").array()
end

return M
