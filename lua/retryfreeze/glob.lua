--- Shell-style globs for ledger paths, expanded without a shell: `*`, `?` and `[…]` (with `!` or `^` for
--- negation) within one path component, `\` escaping the next character. A pattern with wildcards in
--- several components (`logs/*/ledger.jsonl*`) walks each matching directory. As in sh, a wildcard never
--- matches `/`, and a leading `.` in a name is matched only by a literal `.` in the pattern.
--- Directories are listed with LuaFileSystem when it is installed, otherwise with `ls -1a` (the directory
--- name single-quoted, never the pattern: the shell sees no wildcard). The `ls` lister cannot represent a
--- file name containing a newline; lfs can.
local table = require("retryfreeze.compat").table
local M = {}

local has_lfs, lfs = pcall(require, "lfs")

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

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

--- Lists a directory's entries with `ls -1a` (fallback when lfs is missing).
-- @param dir string
-- @return array of names (without "." and ".."), or nil when dir cannot be listed
function M.list_dir_ls(dir)
  local p = io.popen("ls -1a -- " .. shell_quote(dir) .. " 2>/dev/null")
  if not p then return nil end
  local names = {}
  for name in p:lines() do
    if name ~= "." and name ~= ".." then names[#names + 1] = name end
  end
  local ok = p:close()
  if not ok then return nil end
  return names
end

--- Lists a directory's entries with LuaFileSystem; nil when lfs is not installed.
-- @param dir string
-- @return array of names (without "." and ".."), or nil when dir cannot be listed
M.list_dir_lfs = has_lfs and function(dir)
  local ok, iter, state = pcall(lfs.dir, dir)
  if not ok then return nil end
  local names = {}
  for name in iter, state do
    if name ~= "." and name ~= ".." then names[#names + 1] = name end
  end
  return names
end or nil

local function exists(path)
  if has_lfs then return lfs.attributes(path, "mode") ~= nil end
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

--- Translates one path component's glob into an anchored Lua pattern.
-- @param glob string: one component (no "/")
-- @return string: a Lua pattern; raises on an unterminated `[`
function M.to_lua_pattern(glob)
  local out, i, n = { "^" }, 1, #glob
  while i <= n do
    local c = glob:sub(i, i)
    if c == "\\" and i < n then
      i = i + 1
      local e = glob:sub(i, i)
      out[#out + 1] = e:match("%w") and e or "%" .. e
    elseif c == "*" then
      out[#out + 1] = ".*"
    elseif c == "?" then
      out[#out + 1] = "."
    elseif c == "[" then
      local j, set = i + 1, { "[" }
      if glob:sub(j, j) == "!" or glob:sub(j, j) == "^" then
        set[#set + 1] = "^"
        j = j + 1
      end
      local first = true
      while j <= n and (first or glob:sub(j, j) ~= "]") do
        local d = glob:sub(j, j)
        if d == "-" and not first and glob:sub(j + 1, j + 1) ~= "]" then
          set[#set + 1] = "-"
        elseif d:match("%w") then
          set[#set + 1] = d
        else
          set[#set + 1] = "%" .. d
        end
        first = false
        j = j + 1
      end
      if j > n then error("unterminated '[' in glob '" .. glob .. "'", 2) end
      set[#set + 1] = "]"
      out[#out + 1] = table.concat(set)
      i = j
    elseif c:match("%w") then
      out[#out + 1] = c
    else
      out[#out + 1] = "%" .. c
    end
    i = i + 1
  end
  out[#out + 1] = "$"
  return table.concat(out)
end

local function unescape(s) return (s:gsub("\\(.)", "%1")) end

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
-- @param opts table|nil: {list_dir = function(dir) → names|nil} (default: lfs, else `ls -1a`)
-- @return array of paths (empty when nothing matches); raises on a malformed pattern
function M.expand(pattern, opts)
  if type(pattern) ~= "string" then
    error("bad argument #1 to 'expand' (string expected, got " .. type(pattern) .. ")", 2)
  end
  local list_dir = opts and opts.list_dir or M.list_dir_lfs or M.list_dir_ls
  local absolute = pattern:sub(1, 1) == "/"
  local parts = {}
  for part in pattern:gmatch("[^/]+") do parts[#parts + 1] = part end
  local bases = { absolute and "/" or "" }
  for k, part in ipairs(parts) do
    local last = k == #parts
    local next_bases = {}
    for _, base in ipairs(bases) do
      if M.has_magic(part) then
        local lua_pat = M.to_lua_pattern(part)
        local names = list_dir(base == "" and "." or base) or {}
        for _, name in ipairs(names) do
          if name:match(lua_pat) and (name:sub(1, 1) ~= "." or part:sub(1, 1) == ".") then
            next_bases[#next_bases + 1] = base .. name .. (last and "" or "/")
          end
        end
      else
        local p = base .. unescape(part) .. (last and "" or "/")
        if not last or exists(p) then next_bases[#next_bases + 1] = p end
      end
    end
    bases = next_bases
  end
  local out = {}
  for _, p in ipairs(bases) do
    if exists(p) then out[#out + 1] = p end
  end
  table.sort(out, M.natural_less)
  return out
end

--- Resolves ledger arguments: a path that exists is taken as it is; one that does not and holds a wildcard
--- is expanded (a shell that already expanded it changes nothing). A plain missing path is kept, so the
--- reader names it when it cannot open it.
-- @param args array of strings
-- @param opts table|nil: as for expand
-- @return array of paths, or nil, "no file matches 'PATTERN'"
function M.resolve(args, opts)
  local out = {}
  for _, a in ipairs(args) do
    if M.has_magic(a) and not exists(a) then
      local matches = M.expand(a, opts)
      if #matches == 0 then return nil, "no file matches '" .. a .. "'" end
      table.move(matches, 1, #matches, #out + 1, out)
    else
      out[#out + 1] = a
    end
  end
  return out
end

return M
