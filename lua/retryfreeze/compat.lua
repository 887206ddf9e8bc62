--- The Lua 5.3 standard library on every Lua the module supports. On Lua 5.3 and 5.4 these are the globals;
--- on Lua 5.1, 5.2 and LuaJIT they come from Debian's lua-compat53 (compat53.module: math.type,
--- math.tointeger, table.move, table.unpack, utf8, …) without changing any global. Numbers there are doubles:
--- an integer is exact up to ±2^53 (math.maxinteger is the largest exact one).

--- package.searchpath (Lua 5.2+; LuaJIT has it too), for Lua 5.1: the first file of path's `;`-separated
--- templates, with `?` replaced by name (its dots turned into `/`), that opens for reading.
-- @param name string module name, e.g. "retryfreeze.report"
-- @param path string templates, e.g. package.path
-- @return string file name, or nil and the list of files tried ("\n\tno file 'X'" each), as Lua 5.2 does
local searchpath = package.searchpath or function(name, path) -- luacheck: ignore 143
  local file_name, tried = name:gsub("%.", "/"), {}
  for template in path:gmatch("[^;]+") do
    local candidate = template:gsub("%?", file_name)
    local f = io.open(candidate, "r")
    if f then
      f:close()
      return candidate
    end
    tried[#tried + 1] = "\n\tno file '" .. candidate .. "'"
  end
  return nil, table.concat(tried)
end

if _VERSION >= "Lua 5.3" then
  return { math = math, table = table, utf8 = utf8, string = string, searchpath = searchpath } -- luacheck: ignore 143
end
local ok, m = pcall(require, "compat53.module")
if not ok then
  error("retryfreeze on " .. _VERSION .. " needs lua-compat53 (require \"compat53.module\"): " .. tostring(m), 2)
end
return { math = m.math, table = m.table, utf8 = m.utf8, string = m.string, searchpath = searchpath }
