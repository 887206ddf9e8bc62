--- `git show` for the commands that read a committed version (`diff git:REV:PATH`, `verify --base git:REV`),
--- bounded in time. Reading a blob is local, except where git must ask: a partial clone fetches a missing blob
--- from its remote (a network that may hang), and a fetch may prompt for credentials or a host key. So git runs
--- with no terminal prompt (GIT_TERMINAL_PROMPT=0), no lazy fetch where git knows the switch
--- (GIT_NO_LAZY_FETCH=1, git 2.44+), standard input from /dev/null, and under timeout(1), which ends it and every
--- process it started (its process group) after TIMEOUT_S seconds.
local M = {}

--- The longest a `git show` may take, in seconds; then it is ended and the command exits 2, saying so.
M.TIMEOUT_S = 30

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- Runs `git [-C dir] show object`.
-- @param object string: REV:PATH, not starting with "-" (the caller checks)
-- @param opts table|nil: {dir = a directory for git -C, cap = read at most this many bytes + 1 (default all)}
-- @return text (stdout, at most cap + 1 bytes), code (git's exit status; 124 when it ran past TIMEOUT_S), err_text
--   (git's stderr, or the sentence saying that it was ended)
function M.show(object, opts)
  opts = opts or {}
  local err_file, code_file = os.tmpname(), os.tmpname()
  -- The exit code through a file: popen's close() does not return it on Lua 5.1 and LuaJIT.
  local cmd = "GIT_TERMINAL_PROMPT=0 GIT_NO_LAZY_FETCH=1 timeout " .. math.floor(M.TIMEOUT_S) .. " git "
    .. (opts.dir and "-C " .. q(opts.dir) .. " " or "") .. "show " .. q(object) .. " </dev/null 2>" .. q(err_file)
    .. "; echo $? >" .. q(code_file)
  local p = io.popen(cmd, "r")
  local text = p:read(opts.cap and opts.cap + 1 or "*a") or ""
  p:close()
  local ef = io.open(err_file, "r")
  local err_text = ef and ef:read("*a") or ""
  if ef then ef:close() end
  local cf = io.open(code_file, "r")
  local code = cf and tonumber(cf:read("*l")) or -1
  if cf then cf:close() end
  os.remove(err_file)
  os.remove(code_file)
  if code == 124 then
    err_text = string.format("git show %s did not finish within %d s and was ended (a partial clone fetching the "
      .. "blob from its remote?)", object, M.TIMEOUT_S)
  end
  return text, code, err_text
end

return M
