--- Small helpers the library and the command line share: sorted keys, shell quoting, the message for a lock
--- rf.load refused, and the one function that makes text safe to print (printable), with string.format's
--- counterpart that applies it to every value it formats.
--- Runs on every Lua the module supports (5.1 to 5.4, LuaJIT): no integer division, no utf8 library.
local table = require("retryfreeze.compat").table

local M = {}

--- The keys of a table, sorted (keys must be mutually comparable: all strings or all numbers).
-- @param t table
-- @return array of the keys in ascending order
function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

--- The keys of a table of counts, most counted first, ties in ascending key order.
-- @param t table: {[key] = number}
-- @return array of the keys
function M.keys_by_count(t)
  local keys = M.sorted_keys(t)
  table.sort(keys, function(a, b) return t[a] > t[b] or (t[a] == t[b] and a < b) end)
  return keys
end

--- Appends v to list unless seen[v] says it is there already, and marks it seen: a list of distinct values in the
--- order they first came.
-- @param list table: the array appended to
-- @param seen table: {[v] = true} for the values in list
-- @param v any value but nil
-- @return boolean: whether v was new
function M.add_once(list, seen, v)
  if seen[v] then return false end
  seen[v] = true
  list[#list + 1] = v
  return true
end

--- One word for a POSIX shell: s (through tostring) in single quotes, a ' inside written '\''.
-- @param s any value
-- @return string
function M.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- The whole of the file at path, read in binary.
-- @param path string
-- @return string; or nil and io.open's reason (which names the path) when it cannot be opened
function M.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local text = f:read("*a")
  f:close()
  return text
end

--- A ratio as a percentage with two decimals, the way every text output shows one: 0.0996 → "9.96%".
-- @param x number: a ratio (1 = 100 %)
-- @return string
function M.percent(x) return string.format("%.2f%%", 100 * x) end

--- How to name a lock that rf.load refused: "invalid lock: PATH: $.x: rule" when the file was read and the lock
--- is wrong, or rf.load's own sentence when the file could not be read ("cannot open lock PATH: No such file or
--- directory": not invalid, missing).
-- @param path string: the lock's path as given to rf.load
-- @param why string: rf.load's message
-- @return string
function M.lock_error(path, why)
  if why:sub(1, #path + 2) == path .. ": " then return "invalid lock: " .. why end
  return why
end

-- ---------------------------------------------------------------------------------------------------------
-- Printable text
-- ---------------------------------------------------------------------------------------------------------

-- A control character (C0, DEL, or C1 met as UTF-8) as the six characters \u00XX; also a JSON escape, so
-- the escaped text of a JSON document is the same JSON document.
local function control(c) return string.format("\\u%04x", c) end

-- A byte that does not belong to a well-formed UTF-8 sequence (raw 0x80–0x9F among them) as \xHH.
local function stray(c) return string.format("\\x%02x", c) end

-- The bytes of C0 controls and DEL: every one (value mode), or all but tab and line feed (text mode).
local C0_ALL = "[%z\1-\31\127]"
local C0_TEXT = "[%z\1-\8\11-\31\127]"

-- The length of the well-formed UTF-8 sequence (RFC 3629 §4) starting at byte i of s, or nil.
local function sequence_length(s, i)
  local c = s:byte(i)
  local n, lo, hi -- the sequence's length, and the range its second byte must fall in
  if c >= 0xC2 and c <= 0xDF then n, lo, hi = 2, 0x80, 0xBF
  elseif c == 0xE0 then n, lo, hi = 3, 0xA0, 0xBF -- no overlong form
  elseif c == 0xED then n, lo, hi = 3, 0x80, 0x9F -- no surrogate
  elseif c >= 0xE1 and c <= 0xEF then n, lo, hi = 3, 0x80, 0xBF
  elseif c == 0xF0 then n, lo, hi = 4, 0x90, 0xBF -- no overlong form
  elseif c >= 0xF1 and c <= 0xF3 then n, lo, hi = 4, 0x80, 0xBF
  elseif c == 0xF4 then n, lo, hi = 4, 0x80, 0x8F -- nothing past U+10FFFF
  else return nil end
  local b = s:byte(i + 1)
  if not b or b < lo or b > hi then return nil end
  for k = i + 2, i + n - 1 do
    b = s:byte(k)
    if not b or b < 0x80 or b > 0xBF then return nil end
  end
  return n
end

-- A run of bytes >= 0x80: well-formed sequences kept, C1 controls (U+0080–U+009F) and stray bytes escaped.
local function escape_high(run, stray_text)
  local out, i = {}, 1
  while i <= #run do
    local n = sequence_length(run, i)
    if n == 2 and run:byte(i) == 0xC2 and run:byte(i + 1) <= 0x9F then
      out[#out + 1] = control(run:byte(i + 1))
    elseif n then
      out[#out + 1] = run:sub(i, i + n - 1)
    else
      out[#out + 1] = stray_text(run:byte(i))
      n = 1
    end
    i = i + n
  end
  return table.concat(out)
end

local function stray_json() return "\\ufffd" end

--- s as well-formed UTF-8 (RFC 3629): each byte that belongs to no well-formed sequence replaced by U+FFFD (one per
--- byte: a truncated sequence of two bytes gives two); everything else kept, C1 controls included. For a string
--- from the wire (a request's path, a header) that must go where only UTF-8 is accepted (a ledger line) rather
--- than be refused there. The engine's rule (core.utf8_repair, rf_utf8_repair), which the nginx module applies too.
-- @param s string
-- @return string: s itself when it is well-formed UTF-8 (a pure-ASCII string is checked by one find)
function M.well_formed_utf8(s)
  if not s:find("[\128-\255]") then return s end
  return require("retryfreeze.core").utf8_repair(s)
end

--- Text with every character that could steer a terminal written out visibly. The one place where the command
--- line's output is made safe: a value from a ledger, a lock, a pairing log, a table, a file name or an
--- argument can never retitle, clear or rewrite the terminal, nor start a line of its own.
--- Escaped: C0 controls (U+0000–U+001F), DEL (U+007F) and C1 controls (U+0080–U+009F, as UTF-8) as `\u00XX`;
--- each byte that is not part of well-formed UTF-8 (raw 0x80–0x9F among them) as `\xHH`. Everything else,
--- backslashes included, is kept: text output is for people (`--json` gives the exact values).
-- @param s any value (through tostring)
-- @param mode nil|"text"|"json": nil escapes every control character (a value inside a line); "text" keeps tab
--   and line feed (whole lines of output); "json" is "text" for a JSON document, whose strings already escape
--   tab and line feed: a stray byte becomes `\ufffd` so that the document stays UTF-8, hence valid JSON
--   (`\u00XX` is a JSON escape of the same character, so DEL and C1 stay exact)
-- @return string: s unchanged when it needs nothing (printable ASCII, well-formed UTF-8 without controls)
function M.printable(s, mode)
  s = tostring(s)
  local c0 = mode and C0_TEXT or C0_ALL
  if not s:find(mode and "[%z\1-\8\11-\31\127-\255]" or "[%z\1-\31\127-\255]") then return s end
  s = s:gsub(c0, function(ch) return control(ch:byte()) end)
  local stray_text = mode == "json" and stray_json or stray
  return (s:gsub("[\128-\255]+", function(run) return escape_high(run, stray_text) end))
end

--- string.format for a line of text output: every string argument passes through printable (value mode)
--- first, so no value can carry a control character into the line. The format itself is the program's.
-- @param fmt string: a string.format format
-- @param ... the values
-- @return string
function M.format(fmt, ...)
  local args = { ... }
  for i = 1, select("#", ...) do
    if type(args[i]) == "string" then args[i] = M.printable(args[i]) end
  end
  return string.format(fmt, table.unpack(args, 1, select("#", ...)))
end

return M
