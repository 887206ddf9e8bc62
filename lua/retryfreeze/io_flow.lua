--- rf.flow: one logical request's attempt loop, driven by the host's own transport (nginx cosockets, luv,
--- cqueues, a coroutine loop, a test's fake). It never blocks by itself: every wait is io.sleep. The rules —
--- per-try timeout, verdict, the hook's narrowing, outcome and ledger line — run in C (core.step, the
--- transport-free attempt loop client:request also runs), so both give the same response and ledger line.
local core = require "retryfreeze.core"

local M = {}

-- step:begin and step:after: under LuaJIT through the FFI (core.ffi_step_begin and core.ffi_step_after: the same
-- results and errors, docs/lua.md "LuaJIT: the FFI path"), elsewhere the methods themselves.
local step_begin = core.ffi_step_begin or function(step, now_ms) return step:begin(now_ms) end
local function method_after(step, res, now_ms, wall_ms, on_attempt)
  return step:after(res, now_ms, wall_ms, on_attempt)
end
local step_after = core.ffi_step_after or method_after

local request_keys = { method = true, path = true, query = true, headers = true, body = true, idempotency_key = true,
                       inbound_headers = true }
local io_keys = { send = true, sleep = true, now_ms = true, wall_ms = true, ledger = true, rng = true,
                  on_attempt = true, retry_budget = true }

local required_io = { "send", "sleep", "now_ms" }

-- The request's own headers when it has none and no idempotency key: read only (each attempt copies it), never
-- written, so one empty table serves every such request.
local NO_HEADERS = {}

local function check_keys(t, allowed, what)
  for k in pairs(t) do
    if not allowed[k] then error("rf.flow: " .. what .. ": unknown key '" .. tostring(k) .. "'", 3) end
  end
end

-- Whether pcall lets a coroutine yield through it (Lua 5.2 and later, LuaJIT): io.send and io.sleep may yield (a
-- host's coroutine loop, nginx cosockets). Lua 5.1's does not.
local yieldable_pcall = rawget(_G, "jit") ~= nil or _VERSION ~= "Lua 5.1"

--- Whether rf.flow, called here and now, calls io.send and io.sleep protected, so that what they raise ends the
--- request with its ledger line before it goes on: always, except in a Lua 5.1 coroutine (no yield passes its
--- pcall), where the request then has no ledger line.
-- @return boolean
function M.protected()
  if yieldable_pcall then return true end
  local co, main = coroutine.running() -- 5.1: nil on the main thread; with a 5.2 shim: it and true
  return co == nil or main == true
end

local function now(io)
  local ms = io.now_ms()
  if type(ms) ~= "number" then error("rf.flow: io.now_ms() must return a number of milliseconds", 3) end
  return math.floor(ms)
end

-- A host callback raised (io.send, io.sleep) or io.send's result was refused: the request ends first, as
-- stopped-by-caller at the host's last clock reading at_ms (step:finish records an attempt still in flight as
-- cancelled: the host may have sent it), so that it keeps its ledger line; then the error goes on as it was raised.
local function give_up(step, at_ms, wall, err)
  local ok, w = pcall(wall)
  if not (ok and type(w) == "number" and w >= 0 and w < 2 ^ 53) then w = core.wall_ms() end
  step:finish("stopped-by-caller", at_ms, math.floor(w))
  error(err, 0)
end

local function settle(step, at_ms, wall, ok, ...)
  if not ok then give_up(step, at_ms, wall, (...)) end
  return ...
end

-- f(...) for the flow of step, protected (give_up when it raises) when protected is true: M.protected(), read once
-- per flow (where the flow runs does not change while it runs).
local function guarded(protected, step, at_ms, wall, f, ...)
  if not protected then return f(...) end
  return settle(step, at_ms, wall, pcall(f, ...))
end

--- Runs request under policy with the host's I/O.
-- @param policy a policy from rf.load
-- @param request {method=, path=, query=, headers={Name="value"}, body=, idempotency_key=, inbound_headers=} where
--   inbound_headers are the headers of the request this one serves ({name = value or {values}}, as
--   ngx.req.get_headers() gives them): with the route's propagation they narrow the deadline and the attempts.
-- @param io {send=function(attempt) → {status=, transport=, headers=, body=, error=, not_sent=},
--   sleep=function(ms), now_ms=function() → ms (monotonic), wall_ms=function() → Unix ms (default: the clock),
--   ledger=, rng=rf.rng(seed), on_attempt=function(try, verdict) → false stops, retry_budget=rf.retry_budget(p)}.
--   attempt = {number=, method=, path=, query=, headers= (with Idempotency-Key, and with the route's propagation
--   its attempt number and the ms it may take), body=, timeout_ms=}.
-- @return the response table of client:request: {status, ok, outcome, reason, attempts, elapsed_ms, body,
--   headers, tries, route, overloaded [, inbound_deadline_ms, inbound_attempt, ledger_error]}. Misuse raises; so
--   does an error raised by io.send or io.sleep, after the request has ended as stopped-by-caller with its ledger
--   line (M.protected(); not in a Lua 5.1 coroutine, whose pcall a yield cannot pass: there it has none).
function M.flow(policy, request, io)
  if type(request) ~= "table" then error("rf.flow: request must be a table", 2) end
  if type(io) ~= "table" then error("rf.flow: io must be a table", 2) end
  check_keys(request, request_keys, "request")
  check_keys(io, io_keys, "io")
  for _, f in ipairs(required_io) do
    if type(io[f]) ~= "function" then error("rf.flow: io." .. f .. " must be a function", 2) end
  end
  if io.on_attempt ~= nil and type(io.on_attempt) ~= "function" then
    error("rf.flow: io.on_attempt must be a function", 2)
  end
  local wall = io.wall_ms or core.wall_ms
  local protected = M.protected()
  local at_ms = now(io) -- the host's last clock reading
  -- io holds the step's options under their own names (ledger, rng, retry_budget): no table of its own per request.
  local step, propagates = core.step(policy, request, io, at_ms)
  local given, headers = request.headers, NO_HEADERS
  if given or request.idempotency_key then
    headers = {}
    -- core.step checked them (rf_request_header_check): strings, no framing header, no CR/LF, no Idempotency-Key.
    for name, value in pairs(given or headers) do headers[name] = value end
    if request.idempotency_key then headers["Idempotency-Key"] = request.idempotency_key end
  end
  local last, number = nil, 0
  local reason
  while true do
    at_ms = now(io)
    local timeout_ms, stop = step_begin(step, at_ms)
    if not timeout_ms then
      reason = stop
      break
    end
    number = number + 1
    -- with the route's propagation: this attempt's number and the ms it may take, replacing the request's own
    local sent = propagates and step:propagation() or nil
    local attempt_headers = {}
    for k, v in pairs(headers) do -- a fresh copy: the host may change its own
      if not (sent and sent[k:lower()]) then attempt_headers[k] = v end
    end
    if sent then for k, v in pairs(sent) do attempt_headers[k] = v end end
    local res = guarded(protected, step, at_ms, wall, io.send, { number = number, method = request.method, path = request.path,
      query = request.query, headers = attempt_headers, body = request.body, timeout_ms = timeout_ms })
    if type(res) ~= "table" then give_up(step, at_ms, wall, "rf.flow: io.send must return a table, got " .. type(res)) end
    last = res
    -- the response's overloaded header is read by the method (the FFI's fast path passes no headers but the wait's)
    local after = sent and method_after or step_after
    at_ms = now(io)
    local retry, x, hook_err = guarded(protected, step, at_ms, wall, after, step, res, at_ms, math.floor(wall()), io.on_attempt)
    if hook_err ~= nil then
      step:finish(x, now(io), math.floor(wall()), res.body, res.headers)
      error(hook_err, 0)
    end
    if not retry then
      reason = x
      break
    end
    if x > 0 then guarded(protected, step, at_ms, wall, io.sleep, x) end
  end
  return step:finish(reason, now(io), math.floor(wall()), last and last.body, last and last.headers)
end

return M
