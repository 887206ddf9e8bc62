--- Shell-style globs for ledger paths, expanded without a shell by POSIX glob(3) through the binding
--- (retryfreeze.core.glob): `*`, `?` and `[…]` within one path component, `\` escaping the next character; a
--- pattern with wildcards in several components (`logs/*/ledger.jsonl*`) walks each matching directory. As in
--- sh, a wildcard never matches `/`, and a leading `.` in a name is matched only by a literal `.`.
local core = require "retryfreeze.core"
local table = require("retryfreeze.compat").table

local M = {}

--- Whether s holds an unescaped glob wildcard (`*`, `?` or `[`).
-- @param s string
-- @return boolean
function M.has_magic(s)
  local i = 1
  while i <= #s do
    local c = s:sub(i, i)
    if c == "\\" then
      i = i + 2
    else
      if c == "*" or c == "?" or c == "[" then return true end
      i = i + 1
    end
  end
  return false
end

--- Natural order: digit runs compare as numbers, so ledger.jsonl.2 sorts before ledger.jsonl.10.
-- @param a string; b string
-- @return boolean: a before b
function M.natural_less(a, b)
  local i, j = 1, 1
  while i <= #a and j <= #b do
    local da, db = a:match("^%d+", i), b:match("^%d+", j)
    if da and db then
      local na, nb = tonumber(da), tonumber(db)
      if na ~= nb then return na < nb end
      if #da ~= #db then return #da < #db end
      i, j = i + #da, j + #db
    else
      local ca, cb = a:sub(i, i), b:sub(j, j)
      if ca ~= cb then return ca < cb end
      i, j = i + 1, j + 1
    end
  end
  return #a - i < #b - j
end

--- Expands one glob pattern into the paths that exist, in natural order.
-- @param pattern string: e.g. "logs/ledger.jsonl*" or "/var/log/app/*/ledger.jsonl"
-- @return array of paths (empty when nothing matches); raises on a pattern holding a NUL byte or when glob(3)
--   runs out of memory
function M.expand(pattern)
  if type(pattern) ~= "string" then
    error("bad argument #1 to 'expand' (string expected, got " .. type(pattern) .. ")", 2)
  end
  local out = assert(core.glob(pattern))
  table.sort(out, M.natural_less)
  return out
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

--- Resolves ledger arguments: a path that exists is taken as it is; one that does not and holds a wildcard
--- is expanded (a shell that already expanded it changes nothing). A plain missing path is kept, so the
--- reader names it when it cannot open it.
-- @param args array of strings
-- @return array of paths, or nil, "no file matches 'PATTERN'"
function M.resolve(args)
  local out = {}
  for _, a in ipairs(args) do
    if M.has_magic(a) and not exists(a) then
      local matches = M.expand(a)
      if #matches == 0 then return nil, "no file matches '" .. a .. "'" end
      table.move(matches, 1, #matches, #out + 1, out)
    else
      out[#out + 1] = a
    end
  end
  return out
end

--- The arguments of a ledger reader (ledger_stats.stats, replay.replay): its ledger paths, argument 1, one path or
--- an array of paths (globs expanded, M.resolve), and its options, argument opts_arg, nil or a table. A wrong
--- shape raises "bad argument #N to 'FN' (…)" at the reader's caller.
-- @param paths string or array of strings; opts nil or table
-- @param opts_arg integer: the options' argument number; fn string: the reader's name for the message
-- @return array of files (M.resolve), or nil and why when a path or glob names no file
function M.reader_arguments(paths, opts, opts_arg, fn)
  if type(paths) == "string" then paths = { paths } end
  if type(paths) ~= "table" then
    error("bad argument #1 to '" .. fn .. "' (string or array of strings expected, got " .. type(paths) .. ")", 3)
  end
  for i, p in ipairs(paths) do
    if type(p) ~= "string" then
      error("bad argument #1 to '" .. fn .. "' (paths[" .. i .. "] is a " .. type(p) .. ", expected a string)", 3)
    end
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #" .. opts_arg .. " to '" .. fn .. "' (table expected, got " .. type(opts) .. ")", 3)
  end
  return M.resolve(paths)
end

return M
