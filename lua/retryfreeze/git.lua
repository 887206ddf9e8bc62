--- Reading a committed file with git: `git show REV:PATH` through io.popen, bounded by a byte cap and in time.
--- Used by `diff git:REV:PATH` (retryfreeze.diff.load) and `verify --base git:REV` (retryfreeze.signoff.git_text).
--- Reading a blob is local, except where git must ask: a partial clone fetches a missing blob from its remote (a
--- network that may hang), and a fetch may prompt for credentials or a host key. So git runs with no terminal
--- prompt (GIT_TERMINAL_PROMPT=0), no lazy fetch where git knows the switch (GIT_NO_LAZY_FETCH=1, git 2.44+),
--- standard input from /dev/null, and under timeout(1), which ends it and every process it started after
--- M.TIMEOUT_S seconds.
local util = require "retryfreeze.util"

local M = {}

--- The longest a `git show` may take, in seconds; then it is ended and the caller fails, saying so.
M.TIMEOUT_S = 30

-- Reads and removes a temporary file; "" when it cannot be read.
local function take(path)
  local f = io.open(path, "r")
  local text = f and f:read("*a") or ""
  if f then f:close() end
  os.remove(path)
  return text
end

--- The contents of a git object, as `git show OBJECT` prints them.
-- @param object string: "REV:PATH" (PATH relative to the repository root, or "./x" relative to dir); not
--   starting with '-', without NUL or line feed (the caller refuses those with its own message)
-- @param opts table: {max_bytes = integer (the reader's cap: one byte more is never read), dir = string|nil (run
--   in this directory: git -C DIR; default the current one)}
-- @return text; or nil, message, kind: kind "too-large" with "over the N byte limit"; "timeout" when git ran past
--   M.TIMEOUT_S ("git show OBJECT did not finish within N s and was ended …"); otherwise "git show failed (exit
--   N): git's error text on one line", kind "absent" when PATH is not in REV (git's "does not exist in" /
--   "exists on disk, but not in") and "failed" for any other failure
function M.show(object, opts)
  local err_file, code_file = os.tmpname(), os.tmpname()
  local cmd = "GIT_TERMINAL_PROMPT=0 GIT_NO_LAZY_FETCH=1 timeout " .. math.floor(M.TIMEOUT_S) .. " git "
    .. (opts.dir and "-C " .. util.shell_quote(opts.dir) .. " " or "") .. "show " .. util.shell_quote(object)
    .. " </dev/null 2>" .. util.shell_quote(err_file)
  -- The exit code through a file: popen's close() does not return it on Lua 5.1 and LuaJIT.
  local p = io.popen(cmd .. "; echo $? >" .. util.shell_quote(code_file), "r")
  local text = p:read(opts.max_bytes + 1) or ""
  p:close()
  local err_text = take(err_file)
  local code = tonumber(take(code_file):match("%d+")) or -1
  if #text > opts.max_bytes then -- checked first: git was cut off by the closed pipe
    return nil, string.format("over the %d byte limit", opts.max_bytes), "too-large"
  end
  if code == 0 then return text end
  if code == 124 then
    return nil, string.format("git show %s did not finish within %d s and was ended (a partial clone fetching the "
      .. "blob from its remote?)", object, M.TIMEOUT_S), "timeout"
  end
  local absent = err_text:find("does not exist in", 1, true) or err_text:find("exists on disk, but not in", 1, true)
  err_text = err_text:gsub("%s+$", ""):gsub("\n", "; ")
  return nil, string.format("git show failed (exit %s): %s", tostring(code), err_text ~= "" and err_text
    or "no output"), absent and "absent" or "failed"
end

return M
