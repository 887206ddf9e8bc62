--- Encodes a flat or nested Lua value as one line of JSON (for CLI output). Keys are sorted so the output
--- is stable; integers print as integers. Strings are escaped per RFC 8259 §7.
local M = {}

local escapes <const> = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
  ["\r"] = "\\r", ["\t"] = "\\t" }

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function is_array(t)
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return n > 0 or next(t) == nil
end

--- @param value any: nil, boolean, number, string, or tables of them (arrays or string-keyed objects)
--- @param order table|nil: preferred key order for objects; other keys follow, sorted
--- @return string
function M.encode(value, order)
  local t = type(value)
  if value == nil then return "null" end
  if t == "boolean" then return tostring(value) end
  if t == "number" then
    if math.type(value) == "integer" then return string.format("%d", value) end
    if value ~= value or value == math.huge or value == -math.huge then error("cannot encode a non-finite number") end
    for _, fmt in ipairs({ "%.15g", "%.16g", "%.17g" }) do -- the shortest that reads back exactly
      local text = string.format(fmt, value)
      if tonumber(text) == value then return text end
    end
  end
  if t == "string" then return encode_string(value) end
  if t ~= "table" then error("cannot encode a " .. t) end
  if is_array(value) and next(value) ~= nil then
    local parts = {}
    for i = 1, #value do parts[i] = M.encode(value[i], order) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys, seen = {}, {}
  for _, k in ipairs(order or {}) do
    if value[k] ~= nil then keys[#keys + 1] = k; seen[k] = true end
  end
  local rest = {}
  for k in pairs(value) do
    if type(k) ~= "string" then error("cannot encode a non-string object key") end
    if not seen[k] then rest[#rest + 1] = k end
  end
  table.sort(rest)
  table.move(rest, 1, #rest, #keys + 1, keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = encode_string(k) .. ":" .. M.encode(value[k], order) end
  return "{" .. table.concat(parts, ",") .. "}"
end

return M
