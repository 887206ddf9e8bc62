-- Draws rf.flow requests with scripted io.send results and prints one line per request: its response (outcome,
-- reason, status, attempts, elapsed_ms, route and every try's fields) or its error, under whichever path the module
-- took for step:begin and step:after (spec/80-luajit_ffi_spec.lua runs it under LuaJIT with the FFI path on and
-- with RF_NO_FFI=1 and compares the outputs line by line).
-- Usage: luajit spec/harness/ffi_flows.lua SEED DRAWS LOCK... (the first line printed is "ffi true|false").
-- The results drawn: statuses valid and not (0, 1xx..5xx, 600, -1, 1.5, strings), every transport, unknown ones and
-- non-strings, none; not_sent; an error message or a non-string; headers absent, not a table, or a table of wait
-- headers (each name the route may read, in any letter case, one spelling per table) and Date, with valid, past,
-- garbage and non-string values, and names holding a NUL byte; sometimes an on_attempt hook (which takes the methods' path), which may stop.
local rf = require "retryfreeze"

local draws, random, pick, policies = require("spec.support.harness")(rf)

local STATUSES = { 200, 200, 204, 429, 500, 502, 503, 503, 504, 504, 404, 0 }
local BAD_STATUSES = { 600, -1, 1.5, "503", 99, true }
local TRANSPORTS = rf.transports
local BAD_TRANSPORTS = { "bogus", 7, "" }
local WAIT_NAMES = { "Retry-After", "retry-after", "RETRY-AFTER", "Retry-After-Ms", "x-ms-retry-after-ms",
  "RateLimit-Reset", "RateLimit", "X-RateLimit-Reset", "grpc-retry-pushback-ms", "Date", "date", "X-Other",
  "Retry-After\0x", "date\0" }
local WAIT_VALUES = { "0", "1", "2", "30", "250", "-1", "soon", "", "Sun, 06 Nov 1994 08:49:39 GMT",
  "Sun, 06 Nov 1994 08:49:37 GMT", "limit=10, remaining=0, reset=2", '"default";r=0;t=1', "99999999999", 5 }
local REQUESTS = { { "POST", "/v1/jobs" }, { "GET", "/v1/jobs/7" }, { "DELETE", "/v1/jobs/7" }, { "POST", "/v1/refunds" },
  { "GET", "/v1/other/x" }, { "GET", "/nowhere" } }

local function show(v)
  if type(v) == "string" then return (string.format("%q", v):gsub("\n", "n")) end
  if type(v) == "number" then return string.format("%.17g", v) end
  return tostring(v)
end

local function result()
  local res = {}
  res.status = random(20) == 1 and pick(BAD_STATUSES) or pick(STATUSES)
  if random(3) == 1 then
    -- tls often: with not_sent it is a failure that never left (a transparent retry), without it one that may have
    res.transport = random(15) == 1 and pick(BAD_TRANSPORTS) or random(3) == 1 and "tls" or pick(TRANSPORTS)
  end
  if res.transport == nil and res.status == 0 then res.transport = "timeout" end
  if random(2) == 1 then res.not_sent = random(2) == 1 end
  if random(4) == 1 then res.error = random(5) == 1 and 42 or "connection reset by peer" end
  local h = random(25)
  if h == 1 then
    res.headers = "Retry-After: 1"
  elseif h <= 15 then
    -- One spelling per header and table: which of two spellings a traversal meets first depends on the string
    -- hashes, which LuaJIT seeds per process (the spec compares that precedence within one process instead).
    res.headers = {}
    local seen = {}
    for _ = 1, random(4) do
      local name = pick(WAIT_NAMES)
      local canon = name:match("^[^%z]*"):lower() -- the name C compares: up to a NUL, any letter case
      if not seen[canon] then
        seen[canon] = true
        res.headers[name] = pick(WAIT_VALUES)
      end
    end
  end
  return res
end

for d = 1, draws do
  local policy = pick(policies)
  local req = pick(REQUESTS)
  local request = { method = req[1], path = req[2], idempotency_key = random(2) == 1 and ("k" .. d) or nil }
  local clock = 1000
  local hooked = random(6) == 1
  local io = {
    send = function() clock = clock + random(400); return result() end,
    sleep = function(ms) clock = clock + ms end,
    now_ms = function() return clock end,
    wall_ms = function() return 784111777000 + clock end,
    rng = rf.rng(d),
    on_attempt = hooked and function(try) return try.status ~= 503 end or nil,
  }
  local ok, r = pcall(rf.flow, policy, request, io)
  local line = { d, req[1], req[2], tostring(request.idempotency_key ~= nil), tostring(hooked) }
  if not ok then
    line[#line + 1] = "error: " .. show(r)
  else
    for _, k in ipairs({ "outcome", "reason", "status", "ok", "attempts", "elapsed_ms", "route" }) do
      line[#line + 1] = k .. "=" .. show(r[k])
    end
    for i, t in ipairs(r.tries) do
      local fields = {}
      for _, k in ipairs({ "class", "status", "transport", "elapsed_ms", "delay_ms", "timeout_ms", "reason",
        "retry_after", "retry_after_header", "error" }) do
        fields[#fields + 1] = show(t[k])
      end
      line[#line + 1] = "try" .. i .. "=" .. table.concat(fields, ",")
    end
  end
  print(table.concat(line, " "))
end
