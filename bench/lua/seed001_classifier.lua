-- A BASELINE of bench/lua/bench_lua.lua and bench/lua/bench_luajit.lua, not product code and not part of
-- retryfreeze: a pure-Lua port of seed 001's classifier (the pinned classifier the project grew out of,
-- docs/porting.md) as the seed decided, Retry-After included. The seed's code is not in the repository; this port
-- follows what is known of it (its pinned cases) and, where the seed's rule is the engine's, the engine's own
-- reading (core/src/engine/decide.c, retry_after.c), so that its decisions can be checked against policy:decide
-- (spec/41-seed_port_spec.lua) and its cost is the cost of that work done in Lua.
--
-- Ported, in the seed's order (the engine's order where both have the rule):
--   * an unpinned source fails closed: facts.source present and not exactly "pinned-map" → `unpinned-source`;
--   * a success (transport ok, status 200..399) → `success`;
--   * attempts counted from 0: the seed's counter is facts.attempts - 1 (facts are retryfreeze's, which count from
--     1) and it retries while the counter is below its maxAttempts M, the lock's maxAttempts - 1; past it →
--     `budget-exhausted` (the engine's `max-attempts`);
--   * the failure class (bench/lua/seed_classifier.lua's classify: core/src/engine/failure_class.c's rules)
--     looked up in the pinned map, the route's retryable / not-retryable sets (a status's own token beats its
--     family's) → `status-not-retryable`; the seed's pinned cases: 404 and 409 never retry, a keyed 503 retries;
--   * the idempotency-key rule: a method of the route's idempotencyRequired (POST, PATCH, DELETE by default)
--     without a key → `mutating-without-idempotency` (the seed's: a POST without a key stops);
--   * Retry-After, RFC 9110 §10.2.3, as retry_after.c accepts it: optional whitespace (SP, HTAB) trimmed;
--     delay-seconds (1*DIGIT) → that many seconds; an HTTP-date in its three forms (IMF-fixdate, the obsolete
--     RFC 850 form with RFC 9110 §5.6.7's 50-year rule for its two-digit year, asctime) → the time from the
--     response's Date, when it parses, else from facts.now_ms (else the clock, as the binding does), 0 for a date
--     in the past. A wait over the cap (the route's retryAfter.maxMs, 120000 by default) stops:
--     `retry-after-too-long` (the engine's `retry-after-exceeds-budget`; the seed's "9999" case); a value that is
--     neither form is ignored and the backoff applies; retryAfter.honor false ignores the header;
--   * otherwise exponential backoff with full jitter (seed_classifier.lua's xorshift64* draw), `retryable`.
-- Left out, compared with rf_decide: route matching (the classifier serves the one route it was built from), the
-- facts' checks (nothing is refused), the total deadline, minAttemptMs and the per-try timeout (a wait the cap
-- allows is honoured however little time is left: the one place where its verdicts on the bench's mix differ from
-- the engine's), the wait headers other than Retry-After, retry budgets, classLimits, transparentRetry,
-- propagation, hedging, redirects and gRPC classes.
-- It returns a fresh {retry, reason, delay_ms, class, retry_after} per call (retry_after: "honored" when the header
-- decided, its wait or its stop; "ignored-invalid" when it was neither form; nil when not read), as the minimal port.
-- Retry-After has two parsers, chosen when the classifier is made (opts.parse), the rules shared, only the reading
-- of the header and of Date differing; spec/41-seed_port_spec.lua checks both against the engine:
--   * "patterns" (the default): string.match with Lua patterns, one per form. The seed parsed Retry-After with
--     Date.parse and a regular expression; ported to Lua, that is string.match, so this is the port of what the seed
--     did. LuaJIT 2.1 compiles no string.match: every trace that reaches it ends there, and under LuaJIT this parser
--     runs in the interpreter (four to four and a half times the byte parser's time on the bench's mix; about
--     the same time under Lua 5.4).
--   * "bytes": string.byte, string.sub and table lookups, which LuaJIT compiles: how a Lua port would be written
--     for LuaJIT's compiler rather than ported from the seed. The benches report it beside the default.
-- Lua 5.3+ and LuaJIT 2.1 (no integer division operator, no bit operators outside seed_classifier.lua's backoff).
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local minimal = dofile(here .. "/seed_classifier.lua")
local classify, backoff = minimal.classify, minimal.backoff

local byte, sub, match, floor, tonumber = string.byte, string.sub, string.match, math.floor, tonumber

local M = {}

--- The engine's name of each of this port's reasons (docs/reasons.md), for comparing the two.
M.ENGINE_REASON = {
  ["unpinned-source"] = "unpinned-source",
  success = "success",
  ["budget-exhausted"] = "max-attempts",
  ["status-not-retryable"] = "status-not-retryable",
  ["mutating-without-idempotency"] = "mutating-without-idempotency",
  ["retry-after-too-long"] = "retry-after-exceeds-budget",
  retryable = "pinned-status",
}

--- The statuses seed 001's pinned cases name: a keyed 503 retries, 404 and 409 never do. The rest of the seed's
--- table is not known; a classifier for a lock takes the lock's classes (M.for_route).
M.SEED001_PINNED = { retryable = { "HTTP_503" }, not_retryable = { "HTTP_404", "HTTP_409" } }

local MS_PER_DAY = 86400000
local DEFAULT_REF_MS = 946684800000 -- 2000-01-01T00:00:00Z: the RFC 850 year's reference without a clock
local MAX_REF_MS = 253402300799999 -- 9999-12-31T23:59:59.999Z: a later reference is clamped
local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8, Sep = 9, Oct = 10, Nov = 11,
                 Dec = 12 }
local WEEKDAYS = { Mon = true, Tue = true, Wed = true, Thu = true, Fri = true, Sat = true, Sun = true }
local LONG_WEEKDAYS = { Monday = true, Tuesday = true, Wednesday = true, Thursday = true, Friday = true,
                        Saturday = true, Sunday = true }
local MONTH_DAYS = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

local function days_in_month(y, m)
  if m == 2 and ((y % 4 == 0 and y % 100 ~= 0) or y % 400 == 0) then return 29 end
  return MONTH_DAYS[m]
end

-- Days since 1970-01-01 of the civil date y-m-d, and back (Howard Hinnant's algorithms, as retry_after.c).
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local doy = floor((153 * (m > 2 and m - 3 or m + 9) + 2) / 5) + d - 1
  return era * 146097 + yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return yoe + era * 400 + (m <= 2 and 1 or 0), m, d
end

-- Seconds of the day of hour h, minute mi, second sec (00-23, 00-59, 00-60: a leap second), or nil.
local function seconds_of_day(h, mi, sec)
  if h == nil or mi == nil or sec == nil or h > 23 or mi > 59 or sec > 60 then return nil end
  return h * 3600 + mi * 60 + sec
end

-- Epoch ms of a civil date and seconds of the day, or nil when the day is not in the month.
local function civil_ms(y, m, d, sod)
  if m == nil or d < 1 or d > days_in_month(y, m) then return nil end
  return days_from_civil(y, m, d) * MS_PER_DAY + sod * 1000
end

-- The RFC 850 two-digit year yy (RFC 9110 §5.6.7): the latest year ending in yy whose timestamp is at most 50 years
-- after the reference ref_ms (retry_after.c's rfc850_resolve; ref_ms 0 or less: 2000-01-01, clamped to year 9999).
local function rfc850_ms(yy, m, d, sod, ref_ms)
  if d < 1 or d > days_in_month(2000, m) then return nil end
  if ref_ms <= 0 then ref_ms = DEFAULT_REF_MS elseif ref_ms > MAX_REF_MS then ref_ms = MAX_REF_MS end
  local ref_days = floor(ref_ms / MS_PER_DAY)
  local ry, rm, rd = civil_from_days(ref_days)
  local limit_y = ry + 50
  local limit_ms = days_from_civil(limit_y, rm, rd) * MS_PER_DAY + (ref_ms - ref_days * MS_PER_DAY)
  local y = limit_y - (limit_y - yy) % 100
  for _ = 1, 5 do
    local t = civil_ms(y, m, d, sod)
    if t ~= nil and t <= limit_ms then return t end
    y = y - 100
  end
  return nil
end

-- The byte parser ------------------------------------------------------------------------------------------------

-- The value of the n ASCII digits of s at i, or nil.
local function digits(s, i, n)
  local v = 0
  for k = i, i + n - 1 do
    local c = byte(s, k)
    if c == nil or c < 48 or c > 57 then return nil end
    v = v * 10 + (c - 48)
  end
  return v
end

-- "HH:MM:SS" of s at i as seconds of the day, or nil.
local function time_of_day(s, i)
  if byte(s, i + 2) ~= 58 or byte(s, i + 5) ~= 58 then return nil end
  return seconds_of_day(digits(s, i, 2), digits(s, i + 3, 2), digits(s, i + 6, 2))
end

-- Epoch ms of an HTTP-date (trimmed) in one of its three forms, or nil; ref_ms is the RFC 850 year's reference.
local function http_date_ms_bytes(s, ref_ms)
  local n = #s
  if n < 24 then return nil end
  local c4 = byte(s, 4)
  if c4 == 44 then -- IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    if n ~= 29 or not WEEKDAYS[sub(s, 1, 3)] or byte(s, 5) ~= 32 or byte(s, 8) ~= 32 or byte(s, 12) ~= 32
      or byte(s, 17) ~= 32 or byte(s, 26) ~= 32 or sub(s, 27, 29) ~= "GMT" then
      return nil
    end
    local d, y, sod = digits(s, 6, 2), digits(s, 13, 4), time_of_day(s, 18)
    if d == nil or y == nil or sod == nil then return nil end
    return civil_ms(y, MONTHS[sub(s, 9, 11)], d, sod)
  elseif c4 == 32 then -- asctime: "Sun Nov  6 08:49:37 1994"
    if n ~= 24 or not WEEKDAYS[sub(s, 1, 3)] or byte(s, 8) ~= 32 or byte(s, 11) ~= 32 or byte(s, 20) ~= 32 then
      return nil
    end
    local d = byte(s, 9) == 32 and digits(s, 10, 1) or digits(s, 9, 2)
    local y, sod = digits(s, 21, 4), time_of_day(s, 12)
    if d == nil or y == nil or sod == nil then return nil end
    return civil_ms(y, MONTHS[sub(s, 5, 7)], d, sod)
  end
  -- RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT" (a long weekday name, then 24 bytes)
  local p = n - 23
  if not LONG_WEEKDAYS[sub(s, 1, p - 1)] or byte(s, p) ~= 44 or byte(s, p + 1) ~= 32 or byte(s, p + 4) ~= 45
    or byte(s, p + 8) ~= 45 or byte(s, p + 11) ~= 32 or byte(s, p + 20) ~= 32 or sub(s, p + 21, n) ~= "GMT" then
    return nil
  end
  local d, m, yy, sod = digits(s, p + 2, 2), MONTHS[sub(s, p + 5, p + 7)], digits(s, p + 9, 2), time_of_day(s, p + 12)
  if d == nil or m == nil or yy == nil or sod == nil then return nil end
  return rfc850_ms(yy, m, d, sod, ref_ms)
end

-- s without its leading and trailing SP and HTAB.
local function trim_bytes(s)
  local i, j = 1, #s
  local c = byte(s, i)
  while c == 32 or c == 9 do i = i + 1; c = byte(s, i) end
  c = byte(s, j)
  while j >= i and (c == 32 or c == 9) do j = j - 1; c = byte(s, j) end
  if i == 1 and j == #s then return s end
  return sub(s, i, j)
end

-- A trimmed, non-empty value in the delay-seconds form (1*DIGIT) → "ok", its ms | "too-long" (over cap_ms); a value
-- starting with a digit and not all digits → "invalid"; any other → nil (not delay-seconds: an HTTP-date, maybe).
local function delay_seconds_bytes(value, cap_ms)
  local n = #value
  local c = byte(value, 1)
  if c < 48 or c > 57 then return nil end
  for k = 2, n do
    c = byte(value, k)
    if c < 48 or c > 57 then return "invalid" end
  end
  local seconds = 0
  for k = 1, n do
    seconds = seconds * 10 + (byte(value, k) - 48)
    if seconds * 1000 > cap_ms then return "too-long" end
  end
  return "ok", seconds * 1000
end

-- The pattern parser ---------------------------------------------------------------------------------------------

local IMF_FIXDATE = "^(%a%a%a), (%d%d) (%a%a%a) (%d%d%d%d) (%d%d):(%d%d):(%d%d) GMT$"
local RFC850_DATE = "^(%a+), (%d%d)%-(%a%a%a)%-(%d%d) (%d%d):(%d%d):(%d%d) GMT$"
local ASCTIME_DATE = "^(%a%a%a) (%a%a%a) ([ %d]%d) (%d%d):(%d%d):(%d%d) (%d%d%d%d)$"

-- As http_date_ms_bytes, each form one string.match.
local function http_date_ms_patterns(s, ref_ms)
  local wd, d, mon, y, h, mi, sec = match(s, IMF_FIXDATE)
  if wd ~= nil then
    local sod = seconds_of_day(tonumber(h), tonumber(mi), tonumber(sec))
    if not WEEKDAYS[wd] or sod == nil then return nil end
    return civil_ms(tonumber(y), MONTHS[mon], tonumber(d), sod)
  end
  wd, d, mon, y, h, mi, sec = match(s, RFC850_DATE)
  if wd ~= nil then
    local m, sod = MONTHS[mon], seconds_of_day(tonumber(h), tonumber(mi), tonumber(sec))
    if not LONG_WEEKDAYS[wd] or m == nil or sod == nil then return nil end
    return rfc850_ms(tonumber(y), m, tonumber(d), sod, ref_ms)
  end
  wd, mon, d, h, mi, sec, y = match(s, ASCTIME_DATE)
  if wd ~= nil then
    local sod = seconds_of_day(tonumber(h), tonumber(mi), tonumber(sec))
    if not WEEKDAYS[wd] or sod == nil then return nil end
    return civil_ms(tonumber(y), MONTHS[mon], tonumber(d), sod) -- tonumber(" 6") is 6: asctime's space-padded day
  end
  return nil
end

local function trim_patterns(s)
  return match(s, "^[ \t]*(.-)[ \t]*$")
end

-- As delay_seconds_bytes; a value not all digits → nil (the HTTP-date forms then find it invalid).
local function delay_seconds_patterns(value, cap_ms)
  if not match(value, "^%d+$") then return nil end
  local seconds = tonumber(value) -- a float past 2^63 under Lua 5.4: compared before it is multiplied
  if seconds > cap_ms / 1000 then return "too-long" end
  return "ok", seconds * 1000
end

-- The rule, shared ------------------------------------------------------------------------------------------------

-- Retry-After read with a parser's trim, delay-seconds and HTTP-date functions (M.retry_after's contract).
local function reader(trim, delay_seconds, http_date_ms)
  return function(value, date, now_ms, cap_ms)
    value = trim(value)
    if value == "" then return "absent" end
    local state, ms = delay_seconds(value, cap_ms)
    if state ~= nil then return state, ms end
    local date_ms = date ~= nil and http_date_ms(trim(date), now_ms or 0) or nil
    local at_ms = http_date_ms(value, now_ms or date_ms or 0)
    if at_ms == nil then return "invalid" end
    local base_ms = date_ms or now_ms or os.time() * 1000
    local wait_ms = at_ms > base_ms and at_ms - base_ms or 0
    if wait_ms > cap_ms then return "too-long" end
    return "ok", wait_ms
  end
end

--- The Retry-After parsers by name: PARSERS[name](value, date, now_ms, cap_ms) → "ok", wait_ms | "too-long" (a wait
--- over cap_ms) | "invalid" | "absent" (empty or only whitespace). value is the header (a string), date the
--- response's Date (or nil), now_ms the clock in Unix ms (or nil: the clock is read when an HTTP-date needs it and
--- Date gives no reference), cap_ms the longest wait allowed. "patterns" (string.match, as the seed's Date.parse and
--- regular expression port to Lua) and "bytes" (string.byte, which LuaJIT compiles) give the same answers.
M.PARSERS = {
  patterns = reader(trim_patterns, delay_seconds_patterns, http_date_ms_patterns),
  bytes = reader(trim_bytes, delay_seconds_bytes, http_date_ms_bytes),
}

--- The default parser, M.PARSERS.patterns (the seed's parse, ported).
M.retry_after = M.PARSERS.patterns

--- A classifier: opts = {retryable = {tokens}, not_retryable = {tokens}, max_attempts = M (the seed's: retries while
--- the counter, attempts - 1, is below it), idempotency_required = {methods} (default POST, PATCH, DELETE),
--- retry_after_max_ms = n (default 120000), honor_retry_after = boolean (default true), base_ms = n, max_ms = n,
--- seed = integer, parse = "patterns" (default) | "bytes": the Retry-After parser of M.PARSERS}. Raises on another
--- parse, naming it. Returns decide(facts) → {retry, reason, delay_ms, class, retry_after}; facts are policy:decide's
--- (method, status, transport, attempts, retry_after, date, now_ms, idempotency_key, source; the others unread).
function M.new(opts)
  local retryable_class = minimal.retryable_classes(opts.retryable, opts.not_retryable)
  local max_attempts, cap_ms = opts.max_attempts, opts.retry_after_max_ms or 120000
  local honor = opts.honor_retry_after ~= false
  local key_methods = {}
  for _, method in ipairs(opts.idempotency_required or { "POST", "PATCH", "DELETE" }) do key_methods[method] = true end
  local delay = backoff(opts.seed, opts.base_ms, opts.max_ms)
  local parse = opts.parse
  if parse == nil then parse = "patterns" end
  local retry_after = M.PARSERS[parse]
  if retry_after == nil then
    error(string.format('seed001_classifier.new: opts.parse must be "patterns" or "bytes", got %q',
      tostring(opts.parse)), 2)
  end

  return function(facts)
    local status, transport, source = facts.status or 0, facts.transport, facts.source
    local class = classify(status, transport)
    if source ~= nil and source ~= "pinned-map" then
      return { retry = false, reason = "unpinned-source", delay_ms = 0, class = class }
    end
    if (transport == nil or transport == "ok") and status >= 200 and status <= 399 then
      return { retry = false, reason = "success", delay_ms = 0, class = class }
    end
    local counter = (facts.attempts or 1) - 1
    if counter >= max_attempts then
      return { retry = false, reason = "budget-exhausted", delay_ms = 0, class = class }
    end
    if not retryable_class(class, status) then
      return { retry = false, reason = "status-not-retryable", delay_ms = 0, class = class }
    end
    local key = facts.idempotency_key
    if (key == nil or key == false or key == "") and key_methods[facts.method] then
      return { retry = false, reason = "mutating-without-idempotency", delay_ms = 0, class = class }
    end
    local value = facts.retry_after
    if value ~= nil and honor then
      local state, wait_ms = retry_after(value, facts.date, facts.now_ms, cap_ms)
      if state == "ok" then
        return { retry = true, reason = "retryable", delay_ms = wait_ms, class = class, retry_after = "honored" }
      elseif state == "too-long" then
        return { retry = false, reason = "retry-after-too-long", delay_ms = 0, class = class, retry_after = "honored" }
      elseif state == "invalid" then
        return { retry = true, reason = "retryable", delay_ms = delay(counter + 1), class = class,
                 retry_after = "ignored-invalid" }
      end
    end
    return { retry = true, reason = "retryable", delay_ms = delay(counter + 1), class = class }
  end
end

--- The classifier for a route of policy:routes() (its classes, maxAttempts - 1 as the seed's M, idempotencyRequired,
--- retryAfter and backoff), seeded with seed, parsing Retry-After with parse (M.new's opts.parse; nil: "patterns").
function M.for_route(route, seed, parse)
  return M.new({ retryable = route.retryable, not_retryable = route.not_retryable,
    max_attempts = route.max_attempts - 1, idempotency_required = route.idempotency_required,
    retry_after_max_ms = route.retry_after.max_ms, honor_retry_after = route.retry_after.honor,
    base_ms = route.backoff.base_ms, max_ms = route.backoff.max_ms, seed = seed, parse = parse })
end

return M
