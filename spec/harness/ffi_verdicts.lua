-- Draws attempts' facts and prints one line per decider call: its verdict (retry, reason, delay_ms, timeout_ms,
-- class) or its error, under whichever decision path the module took (spec/80-luajit_ffi_spec.lua runs it under
-- LuaJIT twice, with the FFI path on and with RF_NO_FFI=1, and compares the outputs line by line).
-- Usage: luajit spec/harness/ffi_verdicts.lua SEED DRAWS LOCK... (the first line printed is "ffi true|false").
-- The draws are adversarial: statuses at and past their edges (and non-integers, NaN, infinities, strings), every
-- transport plus unknown names and non-strings, Retry-After as delay-seconds, the three HTTP-date forms, a past
-- date, spaces, signs, overflow and garbage (and non-strings), Date present or not, attempts and elapsed_ms at,
-- below and past the routes' limits and 2^53, now_ms absent, 0, a real clock and out of range; the deciders are
-- made for methods and paths that match a route, match none, or are refused (lowercase), with and without a key.
local rf = require "retryfreeze"

local draws, random, pick, policies = require("spec.support.harness")(rf)

-- Each fact is drawn from its valid values most of the time (the verdicts), and from its edges and invalid values
-- otherwise (the refusals, which the FFI path hands to the classic one).
local NAN, INF = 0 / 0, math.huge
local STATUSES = { 0, 100, 200, 204, 304, 400, 404, 408, 422, 429, 500, 501, 502, 503, 504, 599 }
local BAD_STATUSES = { 99, 101, 199, 299, 300, 399, 499, 600, -1, 1.5, 503.5, NAN, INF, -INF, "503", true, 2 ^ 53 }
local TRANSPORTS = rf.transports
local BAD_TRANSPORTS = { "bogus", "OK", "", 5, false }
local RETRY_AFTERS = { "0", "1", "2", "120", "3600", " 5 ", "5 ", "", "Sun, 06 Nov 1994 08:49:39 GMT",
  "Sunday, 06-Nov-94 08:49:39 GMT", "Sun Nov  6 08:49:39 1994", "Sat, 05 Nov 1994 08:49:37 GMT",
  "Sun, 06 Nov 1994 08:49:41 GMT" }
local BAD_RETRY_AFTERS = { "-1", "+1", "1.5", "1e3", "99999999999999999999999", "Sun, 06 Nov 1994 08:49:39 UTC",
  "soon", "1\0002", 5, false }
local DATES = { "Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:39 GMT", "garbage", "" }
local BAD_DATES = { 7, true }
local BAD_ATTEMPTS = { 0, -1, 1000000, 1000001, 1.5, NAN, "1", 2 ^ 53 }
local ELAPSED = { 0, 5, 100, 999, 1000, 1999, 2000, 2499, 2500, 2501, 2800, 3999, 4000, 4001, 99999, 2 ^ 53 - 1 }
local BAD_ELAPSED = { 2 ^ 53, -1, 0.5, INF, NAN, "0" }
local NOWS = { 784111777000, 0, 1, 2 ^ 53 - 1 }
local BAD_NOWS = { 2 ^ 53, -1, 1.5, "1" }
local REQUESTS = { { "POST", "/v1/jobs" }, { "GET", "/v1/jobs/7" }, { "DELETE", "/v1/jobs/7" }, { "POST", "/v1/refunds" },
  { "GET", "/v1/other/x" }, { "POST", "/v1/jobs?x=1" }, { "GET", "/v1/jobs/7#frag" } }
local BAD_REQUESTS = { { "GET", "/v1/jobs" }, { "PUT", "/v1/jobs" }, { "POST", "/nowhere" }, { "POST", "/v1/jobs/" },
  { "post", "/v1/jobs" }, { "", "/v1/jobs" }, { "POST", "" } }

--- A fact drawn from good (nil allowed: absent) or, one time in `one_in`, from bad.
local function fact(good, bad, one_in, absent_one_in)
  if absent_one_in and random(absent_one_in) == 1 then return nil end
  if random(one_in) == 1 then return pick(bad) end
  return pick(good)
end

--- A value as one line: strings quoted (%q escapes newlines), numbers through %.17g (NaN and infinities too).
local function show(v)
  if type(v) == "string" then return (string.format("%q", v):gsub("\n", "n")) end
  if type(v) == "number" then return string.format("%.17g", v) end
  return tostring(v)
end

for d = 1, draws do
  local policy = pick(policies)
  local req = fact(REQUESTS, BAD_REQUESTS, 6)
  local has_key = random(2) == 1
  local made, decide = pcall(policy.decider, policy, req[1], req[2], has_key, rf.rng(d))
  local line = { d, req[1], req[2], tostring(has_key) }
  if not made then
    line[#line + 1] = "made: " .. show(decide)
    print(table.concat(line, " "))
  else
    for attempt = 1, random(4) do
      local status = fact(STATUSES, BAD_STATUSES, 30)
      local transport = fact(TRANSPORTS, BAD_TRANSPORTS, 30, 2)
      local retry_after = fact(RETRY_AFTERS, BAD_RETRY_AFTERS, 6, 2)
      local date = fact(DATES, BAD_DATES, 30, 3)
      local attempts = fact({ attempt, attempt, attempt + 1, 2, 3, 4, 10 }, BAD_ATTEMPTS, 30, 6)
      local elapsed = fact(ELAPSED, BAD_ELAPSED, 30, 6)
      local now = fact(NOWS, BAD_NOWS, 30, 4)
      if retry_after ~= nil and now == nil then now = 784111777000 end -- else the wall clock decides HTTP-dates
      local args = { status, transport, attempts, elapsed, retry_after, date, now }
      local shown = {}
      for k = 1, 7 do shown[k] = show(args[k]) end
      local out = { pcall(decide, status, transport, attempts, elapsed, retry_after, date, now) }
      local verdict = {}
      for k = 1, 6 do verdict[k] = show(out[k]) end
      print(table.concat(line, " ") .. " | " .. table.concat(shown, ",") .. " -> " .. table.concat(verdict, " "))
    end
  end
end
