--- The Lua 5.3 standard library on every Lua the module supports. On Lua 5.3 and 5.4 these are the globals;
--- on Lua 5.1, 5.2 and LuaJIT they come from Debian's lua-compat53 (compat53.module: math.type,
--- math.tointeger, table.move, table.unpack, utf8, …) without changing any global. Numbers there are doubles:
--- an integer is exact up to ±2^53 (math.maxinteger is the largest exact one).
if _VERSION >= "Lua 5.3" then
  return { math = math, table = table, utf8 = utf8, string = string } -- luacheck: ignore 143
end
local ok, m = pcall(require, "compat53.module")
if not ok then
  error("retryfreeze on " .. _VERSION .. " needs lua-compat53 (require \"compat53.module\"): " .. tostring(m), 2)
end
return { math = m.math, table = m.table, utf8 = m.utf8, string = m.string }
