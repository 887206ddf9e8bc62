-- busted helper: shared fixtures for the specs. Paths are relative to the project root (busted's cwd).
local M = {}

-- Lua 5.1 / LuaJIT: the specs use the Lua 5.3 library (math.type, math.tointeger, table.move, utf8) through
-- Debian's lua-compat53, loaded here for the specs only (the module itself never changes a global).
if _VERSION < "Lua 5.3" then require "compat53" end

--- The largest elapsed_ms a fact may carry: INT64_MAX / 4 where Lua has 64-bit integers, else 2^53 - 1 (the
--- largest integer a double holds exactly with its neighbours; the binding refuses beyond it).
M.largest_elapsed_ms = _VERSION >= "Lua 5.3" and load("return math.maxinteger // 4")() or 2 ^ 53 - 1

--- Whether numbers are 64-bit integers and doubles (Lua 5.3+), or doubles only (Lua 5.1, LuaJIT).
M.has_integers = _VERSION >= "Lua 5.3"

M.desk_lock = "examples/retry-budget.lock.json"

--- The CLI under test: $RF_CLI (set by ctest), else ./build/bin/retryfreeze.
M.cli = os.getenv("RF_CLI") or "build/bin/retryfreeze"

--- The build's bin/ folder (retryfreeze-serve lives there).
M.bindir = M.cli:match("^(.*)/[^/]*$") or "."

--- Runs a shell command; returns its stdout, its stderr and its exit code. The code travels through a file:
--- LuaJIT's and Lua 5.1's popen close() does not return it.
function M.sh(cmd)
  local err_file, code_file = os.tmpname(), os.tmpname()
  local p = io.popen("(" .. cmd .. ") 2>'" .. err_file .. "'; echo $? >'" .. code_file .. "'")
  local out = p:read("*a")
  p:close()
  local f = io.open(err_file)
  local err = f:read("*a")
  f:close()
  local cf = io.open(code_file)
  local code = tonumber(cf:read("*l"))
  cf:close()
  os.remove(err_file)
  os.remove(code_file)
  return out, err, code
end

--- Runs the CLI with a shell-quoted argument list; returns stdout, stderr and the exit code.
function M.run_cli(...)
  local args = {}
  for i, a in ipairs({ ... }) do args[i] = "'" .. tostring(a):gsub("'", "'\\''") .. "'" end
  return M.sh(M.cli .. " " .. table.concat(args, " "))
end

--- Writes text to a fresh temporary file and returns its path.
function M.temp_file(text)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

package.loaded["spec.helper"] = M
_G.rf_spec_helper = M
return M
