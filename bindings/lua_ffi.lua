-- The Lua half of the binding's FFI path under LuaJIT (bindings/lua_ffi.c; docs/lua.md, "LuaJIT: the FFI path").
-- Embedded in the module at build time and run once per Lua state when the module opens, so that it always matches
-- the C side and cannot be swapped through package.path. Every classic Lua C API call ends a LuaJIT trace; a call
-- through the FFI does not. So policy:decider's per-attempt decision, and rf.flow's step:begin and step:after, are
-- made here with one FFI call each; whatever the fast path does not take (a bad argument, a closed object, an
-- on_attempt hook) goes to the classic function, which raises the classic message or does the work.
--
-- Given: loaded (the registry's _LOADED), cdef (the C declarations of the ABI table, from lua_ffi.c), abi_address (a
-- light userdata: the module's read-only ABI table), version (the ABI's: its type names end in _v<version>), and the
-- engine's names in enum order (reasons, transports, wait_headers) and class_name(status, transport_index)
-- (rf_classify). Returns {decider = wrap, step_begin = f, step_after = f, step_end = f, step_propagation = f,
-- step_reuser = f, monotonic_ms = f, wall_ms = f}, or nil when this Lua has no
-- FFI (not LuaJIT, or a sandbox took `ffi` out) or the ABI table is not the one these declarations describe.
--
-- What a script sees: the functions returned, nothing else. Their upvalues (reachable only through the debug
-- library) are the objects' userdata (checked by their tags in C on every call), the classic functions, scratch
-- structs and the ABI's function pointers: no policy pointer exists on this side, so none can be kept past the
-- policy's end, and the strings handed back are Lua strings made once from the engine's tables.
local loaded, cdef, abi_address, version, reasons, transports, wait_headers, class_name = ...

if type(loaded) ~= "table" or type(loaded.jit) ~= "table" then return nil end -- not LuaJIT
local ffi = loaded.ffi
if ffi == nil and type(require) == "function" then
  local ok, m = pcall(require, "ffi")
  if ok then ffi = m end
end
if type(ffi) ~= "table" then return nil end -- a sandbox took the FFI out

-- The types are versioned by name: a second copy of the module in this state finds them defined.
local abi_type = "rfl_ffi_abi_v" .. version
if not pcall(ffi.typeof, abi_type) then ffi.cdef(cdef) end
local abi = ffi.cast(abi_type .. " *", abi_address)
if abi.size ~= ffi.sizeof(abi_type) or abi.version ~= version then return nil end

local type, error, next, lower, find, getmetatable = type, error, next, string.lower, string.find, getmetatable
local decide, step_begin_c, step_after_c, step_end_c = abi.decide, abi.step_begin, abi.step_after, abi.step_end -- one
-- indirect call each
local step_propagation_c = abi.step_propagation
local new_verdict = ffi.typeof("rfl_ffi_verdict_v" .. version)
local new_step_out = ffi.typeof("rfl_ffi_step_v" .. version)

local transport_ids, transport_class = {}, {}
for i, name in ipairs(transports) do
  transport_ids[name] = i - 1
  transport_class[i - 1] = class_name(0, i - 1) -- a transport's class, or UNKNOWN for ok without a status
end
local reason_names, reason_ids = {}, {}
for i, name in ipairs(reasons) do reason_names[i - 1], reason_ids[name] = name, i - 1 end
local http_class = {} -- HTTP_<status>, made on first use from the engine's classifier
local function http_class_of(status)
  local name = class_name(status, 0)
  http_class[status] = name
  return name
end
local wait_ids = {} -- lowercase wait header name → its index in the hints array
for i, name in ipairs(wait_headers) do wait_ids[name] = i - 1 end
local n_waits = #wait_headers
if reason_names[#reasons - 1] == nil or transport_ids.ok ~= 0 then error("retryfreeze.ffi: the engine's names moved") end

--- wrap(state, classic) → the decider closure over state (a decider's userdata), with classic (policy:decider's C
--- closure over the same state) as its slow path. The Lua side checks the types (which the trace guards anyway):
--- status a number, transport nil or a name, attempts, elapsed_ms and now_ms numbers or nil, retry_after and date
--- strings or nil; C checks the ranges as read_attempt_facts does (lua_policy.c, rfl_decider_attempt). Anything
--- else, a closed decider and a refusal of the engine go to classic, which raises the classic message.
local function wrap(state, classic)
  local out = new_verdict()
  return function(status, transport, attempts, elapsed_ms, retry_after, date, now_ms)
    local d, t, a, e, n = state, 0, attempts, elapsed_ms, now_ms -- state first: it is upvalue 1, as in the C closure
    if transport ~= nil then t = transport_ids[transport] end
    if a == nil then a = 1 end
    if e == nil then e = 0 end
    if n == nil then n = 0 end
    if t ~= nil and type(status) == "number" and type(a) == "number" and type(e) == "number" and type(n) == "number" then
      local ra_len, date_len = 0, 0
      if retry_after ~= nil then
        if type(retry_after) ~= "string" then return classic(status, transport, attempts, elapsed_ms, retry_after,
          date, now_ms) end
        ra_len = #retry_after
      end
      if date ~= nil then
        if type(date) ~= "string" then return classic(status, transport, attempts, elapsed_ms, retry_after, date,
          now_ms) end
        date_len = #date
      end
      if decide(d, status, t, a, e, retry_after, ra_len, date, date_len, n, out) == 0 then
        local class
        if t == 0 and status ~= 0 then class = http_class[status] or http_class_of(status) else class = transport_class[t] end
        return out.retry, reason_names[out.reason], out.delay_ms, out.timeout_ms, class
      end
    end
    return classic(status, transport, attempts, elapsed_ms, retry_after, date, now_ms)
  end
end

local step_out = new_step_out() -- one per state: nothing runs between an FFI call and the read of its result
local hints = ffi.new("const char *[?]", n_waits)
-- Whether hints may hold a pointer: set before the first hint is stored, cleared with them. Most responses carry no
-- wait header, and each store into a cdata array costs the interpreter (nginx runs much of a handler interpreted).
local hints_set = false
local function clear_hints()
  for i = 0, n_waits - 1 do hints[i] = nil end
  hints_set = false
end

-- Response header names lowercased, the first LOWERED_MAX met: a host's few names (its parser's, the upstream's) are
-- each lowercased once, not on every attempt (string.lower makes a string, which the interpreter pays for); past the
-- cap a name is lowercased each time, so that no stream of names grows the table.
local lowered, n_lowered, LOWERED_MAX = {}, 0, 256

--- step_begin(step, now_ms) → step:begin(now_ms): the per-try timeout, or nil, reason.
local function step_begin(step, now_ms)
  if type(now_ms) == "number" then
    local rc = step_begin_c(step, now_ms, step_out)
    if rc == 0 then return step_out.ms end
    if rc == 1 then return nil, reason_names[step_out.reason] end
  end
  return step:begin(now_ms)
end

--- step_after(step, res, now_ms, wall_ms, on_attempt) → step:after(...): true, delay_ms, or false, reason. The
--- result's fields are read as step:after reads them (status, transport, not_sent, error, peer, then the headers raw,
--- names case-insensitive, the first a traversal meets winning). The method itself runs for a result with a
--- metatable (its metamethods must run while the method has pinned the step, as they do there), with an
--- on_attempt hook, for a header name holding a NUL byte, and for anything the method would refuse.
local function step_after(step, res, now_ms, wall_ms, on_attempt)
  if on_attempt == nil and type(res) == "table" and getmetatable(res) == nil and type(now_ms) == "number"
    and type(wall_ms) == "number" then
    local status, transport, not_sent, err, headers = res.status, res.transport, res.not_sent, res.error, res.headers
    local peer = res.peer
    local t = -1
    if transport ~= nil then t = transport_ids[transport] end
    if status == nil then status = 0 end
    if t ~= nil and type(status) == "number" and (headers == nil or type(headers) == "table")
      and (peer == nil or type(peer) == "string") then
      if type(err) ~= "string" then err = nil end
      local date, fast = nil, true
      if hints_set then clear_hints() end -- left set only if a call above raised between a store and its clearing
      if headers ~= nil then
        for name, value in next, headers do
          if type(name) == "string" and type(value) == "string" then
            if find(name, "\0", 1, true) then -- C compares up to the NUL: left to the method
              fast = false
              break
            end
            local lname = lowered[name]
            if lname == nil then
              lname = lower(name)
              if n_lowered < LOWERED_MAX then lowered[name], n_lowered = lname, n_lowered + 1 end
            end
            if lname == "date" then
              if date == nil then date = value end
            else
              local w = wait_ids[lname]
              if w ~= nil and hints[w] == nil then
                hints_set = true
                hints[w] = value
              end
            end
          end
        end
      end
      if fast then
        local rc = step_after_c(step, status, t, not_sent and true or false, err, date, hints, n_waits, peer,
          peer and #peer or 0, now_ms, wall_ms, step_out)
        if hints_set then clear_hints() end -- no pointer into a Lua string outlives the call
        if rc == 0 then return true, step_out.ms end
        if rc == 1 then return false, reason_names[step_out.reason] end
      elseif hints_set then
        clear_hints()
      end
    end
  end
  return step:after(res, now_ms, wall_ms, on_attempt)
end

--- step_end(step, reason, now_ms, wall_ms) → whether the response is overloaded: step:finish(reason, now_ms,
--- wall_ms).overloaded, the same ledger record appended, without the response table. step:finish itself runs for
--- anything the fast path does not take (a reason not in rf.reasons, a bad clock, a closed or busy step, an attempt
--- in flight), and raises as it does.
local function step_end(step, reason, now_ms, wall_ms)
  local id = reason_ids[reason]
  if id ~= nil and type(now_ms) == "number" and type(wall_ms) == "number" then
    local rc = step_end_c(step, id, now_ms, wall_ms)
    if rc >= 0 then return rc == 1 end
  end
  return step:finish(reason, now_ms, wall_ms).overloaded
end

local attempt_out, deadline_out -- made on first use: scratch structs of this state's own

--- step_propagation(step) → attempt, deadline_ms: the numbers of the propagation headers step:propagation() gives
--- for the attempt step:begin just allowed (the attempt header's, then the deadline header's), without its table; nil
--- when the step's route has no propagation. A step the fast path does not take (closed, busy) goes to
--- step:propagation, which raises as it does.
local function step_propagation(step)
  if attempt_out == nil then attempt_out, deadline_out = new_step_out(), new_step_out() end
  local rc = step_propagation_c(step, attempt_out, deadline_out)
  if rc == 0 then return attempt_out.ms, deadline_out.ms end
  if rc == 1 then return nil end
  step:propagation()
  error("retryfreeze.ffi: step_propagation: the step is neither open nor refused by step:propagation")
end

local step_reuse_c, monotonic_c, wall_c = abi.step_reuse, abi.monotonic_ms, abi.wall_ms
local new_flags, new_route = ffi.typeof("uint8_t[?]"), ffi.typeof("int32_t[1]")

--- step_reuser(serve) → reuse(step, method, path, key, now_ms) → route, reused: reuses a step step_end ended for a new
--- request (rfl_step_reuse: core.step's request {method =, path =, idempotency_key = key} with the policy and io the
--- step was made with), with no userdata, holdings or keeper table of its own. serve: an array of booleans, one per
--- route of policy:routes() (copied once): whether a step may serve it. route: the index in policy:routes() of the
--- route method and path match, or nil. reused: true (the step serves the request, open, its clock started at now_ms),
--- false (no route, or serve refuses it: nothing done), or nil with route nil (nothing done: the step is no step
--- step_end ended, its ledger or retry budget is closed, an argument is one core.step refuses, or a string is not
--- one; the host then makes a new step with core.step, which raises what it refuses).
local function step_reuser(serve)
  local n = #serve
  local flags = new_flags(n > 0 and n or 1)
  for i = 1, n do flags[i - 1] = serve[i] and 1 or 0 end
  local route = new_route()
  return function(step, method, path, key, now_ms)
    if type(step) ~= "userdata" or type(method) ~= "string" or type(path) ~= "string" or type(now_ms) ~= "number"
      or (key ~= nil and type(key) ~= "string") then
      return nil, nil
    end
    local rc = step_reuse_c(step, method, #method, path, #path, key, key and #key or 0, flags, n, now_ms, route)
    if rc == -1 then return nil, nil end
    local r = route[0]
    return r >= 0 and r + 1 or nil, rc == 0
  end
end

--- monotonic_ms() and wall_ms(): core.monotonic_ms() and core.wall_ms() through the FFI (any argument is ignored).
local function monotonic_ms() return monotonic_c() end
local function wall_ms() return wall_c() end

return { decider = wrap, step_begin = step_begin, step_after = step_after, step_end = step_end,
         step_propagation = step_propagation, step_reuser = step_reuser, monotonic_ms = monotonic_ms,
         wall_ms = wall_ms }
