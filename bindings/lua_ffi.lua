-- The Lua half of the binding's FFI path under LuaJIT (bindings/lua_ffi.c; docs/lua.md, "LuaJIT: the FFI path").
-- Embedded in the module at build time and run once per Lua state when the module opens, so that it always matches
-- the C side and cannot be swapped through package.path. Every classic Lua C API call ends a LuaJIT trace; a call
-- through the FFI does not, so the per-attempt decision of policy:decider is made here with one FFI call.
--
-- Given: loaded (the registry's _LOADED), cdef (the C declarations of the ABI table, from lua_ffi.c), abi_type and
-- verdict_type (the versioned type names of the ABI table and of a decision's out struct), abi_address (a light
-- userdata: the module's read-only ABI table), version,
-- reasons and transports (the engine's names, in enum order), class_name(status, transport_index) (the engine's
-- rf_classify). Returns wrap(state, classic) → the decider closure, or nil when this Lua has no FFI (not LuaJIT, or
-- a sandbox took `ffi` out) or the ABI table is not the one these declarations describe.
--
-- What a script sees: the closure wrap returns, nothing else. Its upvalues (reachable only through the debug
-- library) are the decider's state (the userdata the classic closure uses, checked by its tag on every call), the
-- classic closure, one verdict struct and the ABI's function pointer: no policy pointer exists on this side, so none
-- can be kept past the policy's end, and the verdict's strings are Lua strings made once from the engine's tables.
local loaded, cdef, abi_type, verdict_type, abi_address, version, reasons, transports, class_name = ...

if type(loaded) ~= "table" or type(loaded.jit) ~= "table" then return nil end -- not LuaJIT
local ffi = loaded.ffi
if ffi == nil and type(require) == "function" then
  local ok, m = pcall(require, "ffi")
  if ok then ffi = m end
end
if type(ffi) ~= "table" then return nil end -- a sandbox took the FFI out

-- The types are versioned by name (abi_type): a second copy of the module in this state finds them defined.
if not pcall(ffi.typeof, abi_type) then ffi.cdef(cdef) end
local abi = ffi.cast(abi_type .. " *", abi_address)
if abi.size ~= ffi.sizeof(abi_type) or abi.version ~= version then return nil end

local type, error = type, error
local decide = abi.decide -- the function pointer: one indirect call, compiled into the trace
local new_verdict = ffi.typeof(verdict_type)

local transport_ids, transport_class = {}, {}
for i, name in ipairs(transports) do
  transport_ids[name] = i - 1
  transport_class[i - 1] = class_name(0, i - 1) -- a transport's class, or UNKNOWN for ok without a status
end
local reason_names = {}
for i, name in ipairs(reasons) do reason_names[i - 1] = name end
local http_class = {} -- HTTP_<status>, made on first use from the engine's classifier
local function http_class_of(status)
  local name = class_name(status, 0)
  http_class[status] = name
  return name
end
if #reason_names ~= #reasons - 1 or transport_ids.ok ~= 0 then error("retryfreeze.ffi: the engine's names moved") end

--- The decider closure over state (a decider's userdata) with classic (policy:decider's C closure over the same
--- state) as the slow path: arguments the fast checks below do not pass, a closed decider and a refusal of the
--- engine are handed to classic, which raises the classic message (or decides, when the checks were stricter).
--- The Lua side checks the types (which the trace guards anyway): status a number, transport nil or a name, attempts,
--- elapsed_ms and now_ms numbers or nil, retry_after and date strings or nil; the ranges are checked in C, as
--- read_attempt_facts checks them (lua_policy.c, rfl_decider_attempt).
return function(state, classic)
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
