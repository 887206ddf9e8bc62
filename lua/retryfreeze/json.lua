--- A small strict JSON (RFC 8259) decoder and encoder for the governance files (pairing log, lock comments).
--- Strict: one value and nothing after it but whitespace; no comments, trailing commas, NaN, leading zeros or
--- raw control characters in strings; duplicate object keys are refused; nesting deeper than 128 is refused.
--- Numbers without a fraction or exponent that fit a Lua integer decode as integers, all others as floats.
--- JSON null decodes to the sentinel `json.null` (so an object keeps its key); arrays decode to sequences
--- marked with `json.array_mt`, so they encode back as arrays even when empty.
local math, table, utf8 = require("retryfreeze.compat").math, require("retryfreeze.compat").table, require("retryfreeze.compat").utf8
local M = {}

--- The value JSON null decodes to (and encodes from). Compare with `==`.
M.null = setmetatable({}, { __name = "json.null", __tostring = function() return "null" end })

--- Metatable marking a table as a JSON array (decoded arrays carry it; `json.array(t)` sets it).
M.array_mt = { __name = "json.array" }

local max_depth = 128
-- Where a string's plain run ends: a quote, a backslash or a control character (Lua 5.1 and LuaJIT need %z
-- for the NUL byte in a pattern; 5.2+ take it literally).
local STRING_STOP = _VERSION == "Lua 5.1" and '["\\%z\1-\31]' or '["\\\0-\31]'

local literals = { ["true"] = true, ["false"] = false, null = M.null }

local encode_escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local escapes = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r",
  t = "\t" }

--- Decodes one JSON text.
-- @param text string: the JSON text (UTF-8; a BOM is not accepted)
-- @return value (table, string, number, boolean or json.null), or nil, "byte N: message" (N is 1-based)
function M.decode(text)
  if type(text) ~= "string" then
    error("bad argument #1 to 'decode' (string expected, got " .. type(text) .. ")", 2)
  end
  local pos = 1
  local function fail(msg, at) error({ json_error = string.format("byte %d: %s", at or pos, msg) }, 0) end
  local function skip() pos = text:find("[^ \t\r\n]", pos) or #text + 1 end
  local value

  local function str()
    local parts, start = {}, pos + 1
    local i = start
    while true do
      local j = text:find(STRING_STOP, i)
      if j == nil then fail("unterminated string", pos) end
      local c = text:sub(j, j)
      parts[#parts + 1] = text:sub(i, j - 1)
      if c == '"' then
        pos = j + 1
        return table.concat(parts)
      elseif c == "\\" then
        local e = text:sub(j + 1, j + 1)
        if escapes[e] then
          parts[#parts + 1] = escapes[e]
          i = j + 2
        elseif e == "u" then
          local hex = text:match("^%x%x%x%x", j + 2)
          if not hex then fail("bad \\u escape", j) end
          local cp = tonumber(hex, 16)
          i = j + 6
          if cp >= 0xD800 and cp <= 0xDBFF then
            local lo = text:match("^\\u(%x%x%x%x)", i)
            lo = lo and tonumber(lo, 16)
            if not lo or lo < 0xDC00 or lo > 0xDFFF then fail("unpaired surrogate in \\u escape", j) end
            cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00)
            i = i + 6
          elseif cp >= 0xDC00 and cp <= 0xDFFF then
            fail("unpaired surrogate in \\u escape", j)
          end
          parts[#parts + 1] = utf8.char(cp)
        else
          fail("bad escape '\\" .. e .. "'", j)
        end
      else
        fail("control character in string", j)
      end
    end
  end

  local function number()
    local start = pos
    local int = text:match("^-?%d+", pos)
    if not int or int:match("^-?0%d") then fail("bad number") end
    pos = pos + #int
    local frac = text:match("^%.%d*", pos)
    if frac then
      if #frac == 1 then fail("bad number", start) end
      pos = pos + #frac
    end
    local exp = text:match("^[eE][-+]?%d*", pos)
    if exp then
      if not exp:match("%d$") then fail("bad number", start) end
      pos = pos + #exp
    end
    local n = tonumber(text:sub(start, pos - 1))
    if not frac and not exp and math.type(n) == "integer" then return n end
    n = n + 0.0
    if n == math.huge or n == -math.huge then fail("number out of range", start) end
    return n
  end

  local function array(depth)
    local t = setmetatable({}, M.array_mt)
    pos = pos + 1
    skip()
    if text:sub(pos, pos) == "]" then
      pos = pos + 1
      return t
    end
    while true do
      t[#t + 1] = value(depth)
      skip()
      local c = text:sub(pos, pos)
      pos = pos + 1
      if c == "]" then return t end
      if c ~= "," then fail(c == "" and "unexpected end of text" or "expected ',' or ']'", pos - 1) end
      skip()
    end
  end

  local function object(depth)
    local t = {}
    pos = pos + 1
    skip()
    if text:sub(pos, pos) == "}" then
      pos = pos + 1
      return t
    end
    while true do
      if text:sub(pos, pos) ~= '"' then fail("expected a string key") end
      local at = pos
      local k = str()
      if t[k] ~= nil then fail("duplicate key \"" .. k .. "\"", at) end
      skip()
      if text:sub(pos, pos) ~= ":" then fail("expected ':'") end
      pos = pos + 1
      skip()
      t[k] = value(depth)
      skip()
      local c = text:sub(pos, pos)
      pos = pos + 1
      if c == "}" then return t end
      if c ~= "," then fail(c == "" and "unexpected end of text" or "expected ',' or '}'", pos - 1) end
      skip()
    end
  end

  function value(depth)
    local c = text:sub(pos, pos)
    if depth >= max_depth and (c == "{" or c == "[") then fail("nesting deeper than " .. max_depth) end
    if c == "{" then return object(depth + 1) end
    if c == "[" then return array(depth + 1) end
    if c == '"' then return str() end
    if c == "-" or c:match("%d") then return number() end
    for word, v in pairs(literals) do
      if text:sub(pos, pos + #word - 1) == word then
        pos = pos + #word
        return v
      end
    end
    fail(c == "" and "unexpected end of text" or "unexpected character '" .. c .. "'")
  end

  local ok, result = pcall(function()
    skip()
    local v = value(0)
    skip()
    if pos <= #text then fail("trailing data after the JSON value") end
    return v
  end)
  if ok then return result end
  if type(result) == "table" and result.json_error then return nil, result.json_error end
  error(result, 0)
end

--- Marks a table as a JSON array (so an empty one encodes as `[]`) and returns it.
-- @param t table|nil: a sequence (default: a new empty table)
-- @return t
function M.array(t) return setmetatable(t or {}, M.array_mt) end

local function is_sequence(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n > 0 and n == #t and t[n] ~= nil
end

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return encode_escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

--- Encodes a value as compact JSON on one line.
-- @param value nil|json.null|boolean|number|string|table: a table marked with json.array_mt, or a non-empty
--   sequence, encodes as an array; any other table as an object with string keys
-- @param order table|nil: keys to put first in every object, in this order; the rest follow sorted
-- @return string; raises on a non-finite number, a non-string object key or a function/userdata value
function M.encode(value, order)
  if value == nil or value == M.null then return "null" end
  local t = type(value)
  if t == "boolean" then return tostring(value) end
  if t == "number" then
    if math.type(value) == "integer" then return string.format("%d", value) end
    if value ~= value or value == math.huge or value == -math.huge then
      error("cannot encode a non-finite number", 2)
    end
    local s = string.format("%.14g", value)
    if tonumber(s) ~= value then s = string.format("%.17g", value) end
    return s
  end
  if t == "string" then return encode_string(value) end
  if t ~= "table" then error("cannot encode a " .. t, 2) end
  if getmetatable(value) == M.array_mt or is_sequence(value) then
    local parts = {}
    for i = 1, #value do parts[i] = M.encode(value[i], order) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys, seen = {}, {}
  for _, k in ipairs(order or {}) do
    if value[k] ~= nil and not seen[k] then
      keys[#keys + 1] = k
      seen[k] = true
    end
  end
  local rest = {}
  for k in pairs(value) do
    if type(k) ~= "string" then error("cannot encode a non-string object key", 2) end
    if not seen[k] then rest[#rest + 1] = k end
  end
  table.sort(rest)
  table.move(rest, 1, #rest, #keys + 1, keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = encode_string(k) .. ":" .. M.encode(value[k], order) end
  return "{" .. table.concat(parts, ",") .. "}"
end

return M
