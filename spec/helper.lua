-- busted helper: shared fixtures for the specs. Paths are relative to the project root (busted's cwd).
local M = {}

M.desk_lock = "examples/retry-budget.lock.json"

--- The CLI under test: $RF_CLI (set by ctest), else ./build/bin/retryfreeze.
M.cli = os.getenv("RF_CLI") or "build/bin/retryfreeze"

--- The build's bin/ folder (retryfreeze-serve lives there).
M.bindir = M.cli:match("^(.*)/[^/]*$") or "."

--- Runs the CLI with a shell-quoted argument list; returns stdout, stderr and the exit code.
function M.run_cli(...)
  local args = {}
  for i, a in ipairs({ ... }) do args[i] = "'" .. tostring(a):gsub("'", "'\\''") .. "'" end
  local err_file = os.tmpname()
  local p = io.popen(M.cli .. " " .. table.concat(args, " ") .. " 2>" .. err_file)
  local out = p:read("a")
  local _, _, code = p:close()
  local f = io.open(err_file)
  local err = f:read("a")
  f:close()
  os.remove(err_file)
  return out, err, code
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
