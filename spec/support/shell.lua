-- Running commands from the specs, the ctest checks and the benches that drive real programs (nginx, wrk, curl):
-- one quoting rule (retryfreeze.util.shell_quote) and one way to read what a command printed.
local util = require "retryfreeze.util"
local M = {}

--- One word for a POSIX shell (retryfreeze.util.shell_quote): s through tostring, in single quotes.
M.q = util.shell_quote

--- What the shell command cmd printed on standard output, whole (its exit status is not judged).
-- @param cmd string: a shell command line
-- @return string
function M.sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end

--- Whether the command name cmd is on PATH (`command -v`).
-- @param cmd string: a command name
-- @return boolean
function M.have(cmd) return M.sh("command -v " .. cmd .. " 2>/dev/null") ~= "" end

return M
