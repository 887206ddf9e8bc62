--- JSON (RFC 8259) for the governance files (pairing log, lock comments) and the CLI's JSON output, through
--- cJSON in the binding (retryfreeze.core, bindings/lua_json.c): the parser the lock loader uses, with the
--- checks the governance files need around it. Refused: a NUL byte or a `\u0000` escape, a control character
--- outside a string, duplicate object keys, nesting deeper than 128, numbers beyond the double range, and
--- anything after the value but whitespace.
--- An integral number within ±2^53 (RFC 8259 §6: the range where integers are exact and interoperable)
--- decodes as a Lua integer, any other as a float. JSON null decodes to the sentinel `json.null` (so an
--- object keeps its key); arrays decode to sequences marked with `json.array_mt`, so they encode back as
--- arrays even when empty.
local core = require "retryfreeze.core"

local M = {}

--- The value JSON null decodes to (and encodes from). Compare with `==`.
M.null = setmetatable({}, { __name = "json.null", __tostring = function() return "null" end })

--- Metatable marking a table as a JSON array (decoded arrays carry it; `json.array(t)` sets it).
M.array_mt = { __name = "json.array" }

local decode, encode = core.json_codec(M.null, M.array_mt)

--- Decodes one JSON text.
-- @param text string: the JSON text (UTF-8; a BOM is not accepted)
-- @return value (table, string, number, boolean or json.null), or nil, "byte N: message" for text cJSON or
--   the lexical checks refuse (N is 1-based), "$.a[2]: message" for a refused value (duplicate key, range),
--   or "nesting deeper than 128"
function M.decode(text)
  if type(text) ~= "string" then
    error("bad argument #1 to 'decode' (string expected, got " .. type(text) .. ")", 2)
  end
  return decode(text)
end

--- Marks a table as a JSON array (so an empty one encodes as `[]`) and returns it.
-- @param t table|nil: a sequence (default: a new empty table)
-- @return t
function M.array(t) return setmetatable(t or {}, M.array_mt) end

--- Encodes a value as compact JSON on one line.
-- @param value nil|json.null|boolean|number|string|table: a table marked with json.array_mt, or a non-empty
--   sequence, encodes as an array; any other table as an object with string keys
-- @param order table|nil: keys to put first in every object, in this order; the rest follow sorted
-- @return string; raises on a non-finite number, a non-string object key, a NUL byte in a string,
--   nesting deeper than 128 (a cycle) or a function/userdata value
function M.encode(value, order)
  local ok, s = pcall(encode, value, order)
  if not ok then error(s, 2) end
  return s
end

return M
