--- The project's fault-injecting upstream (retryfreeze-serve) as a child process on a free loopback port.
local math = require("retryfreeze.compat").math
local M = {}

local shell_quote = require("retryfreeze.util").shell_quote

local function executable(path)
  local ok = os.execute("test -f " .. shell_quote(path) .. " && test -x " .. shell_quote(path))
  return ok == true or ok == 0 -- Lua 5.1 and LuaJIT return the status
end

--- Path of retryfreeze-serve: $RF_SERVE when set, else retryfreeze-serve beside the running retryfreeze binary
--- (a CMake build or install). A LuaRocks install has no binary directory and no retryfreeze-serve: RF_SERVE
--- must name one.
-- @param bindir string|nil: directory of the running CLI (nil for the rock's Lua script)
-- @return path; or nil, a message that says what to set (RF_SERVE unset in a rock, or naming no executable file)
function M.program(bindir)
  local env = os.getenv("RF_SERVE")
  if env and env ~= "" then
    if not executable(env) then return nil, "RF_SERVE names " .. env .. ", which is not an executable file" end
    return env
  end
  if not bindir then
    return nil, "no retryfreeze-serve to start: this retryfreeze has none beside it (a LuaRocks install has none); "
      .. "set RF_SERVE to one, for example RF_SERVE=build/bin/retryfreeze-serve of a CMake build"
  end
  local path = bindir .. "/retryfreeze-serve"
  if not executable(path) then
    return nil, "no retryfreeze-serve beside this retryfreeze (" .. path .. "); set RF_SERVE to one"
  end
  return path
end

--- Checks a fault spec (--faults) as the upstream itself reads it, before anything is started: runs
--- `retryfreeze-serve --faults SPEC --version`, which parses its arguments in order and stops at --version.
-- @param bindir string|nil: as for M.program
-- @param spec string: the fault spec
-- @return nil when the spec is good or there is no upstream to ask (M.start then says so), else the
--   upstream's message ("--faults: expected NAME=VALUE in token 'x'")
function M.faults_error(bindir, spec)
  local program = M.program(bindir)
  if not program then return nil end
  local p = io.popen(shell_quote(program) .. " --faults " .. shell_quote(spec) .. " --version 2>&1 >/dev/null")
  local err = p:read("*a")
  p:close()
  if err == "" then return nil end
  return (err:gsub("^retryfreeze%-serve: ", ""):gsub("%s*%(see %-%-help%)%s*$", ""):gsub("%s+$", ""))
end

--- Starts the upstream. opts: {bindir=, faults=, seed=, stall_ms=, max_seconds=, log=} (log: a file for
--- the server's stderr, default /dev/null).
-- @return {url=, port=, pid=, stop=function} or nil, message (M.program's when there is nothing to start)
function M.start(opts)
  local program, why = M.program(opts.bindir)
  if not program then return nil, why end
  local args = { shell_quote(program), "--port 0" }
  if opts.faults then args[#args + 1] = "--faults " .. shell_quote(opts.faults) end
  if opts.seed then args[#args + 1] = "--seed " .. math.tointeger(opts.seed) end
  if opts.stall_ms then args[#args + 1] = "--stall-ms " .. math.tointeger(opts.stall_ms) end
  args[#args + 1] = "--max-seconds " .. math.tointeger(opts.max_seconds or 600)
  -- `exec` keeps the shell's pid, so the first line is the server's own pid.
  args[#args + 1] = "2>>" .. shell_quote(opts.log or "/dev/null")
  local p = io.popen("echo $$; exec " .. table.concat(args, " "), "r")
  local pid = math.tointeger(tonumber(p:read("*l") or ""))
  local line = p:read("*l") or ""
  local port = math.tointeger(tonumber(line:match("^listening on 127%.0%.0%.1:(%d+)$") or ""))
  if not pid or not port then
    p:close()
    return nil, "cannot start " .. program .. " (" .. (line ~= "" and line or "no output") .. ")"
  end
  local up = { pid = pid, port = port, url = "http://127.0.0.1:" .. port }
  function up.stop()
    if up.stopped then return end
    up.stopped = true
    os.execute("kill " .. pid .. " 2>/dev/null")
    p:close()
  end
  -- A caller that raises before stop() must not leave the server running: closing the pipe alone (at exit)
  -- would wait for it. Finalizers run in reverse order of creation, so this one runs before the pipe's.
  return setmetatable(up, { __gc = up.stop })
end

-- One request to a control endpoint of the upstream at url (METHOD /__NAME), through a client of one attempt with a
-- 2 s timeout: the response, or nil and "METHOD PATH: outcome reason" when it did not succeed.
local function control(url, method, path)
  local rf = require "retryfreeze"
  local lock = assert(rf.load_string('{"endpoint":"' .. method .. " " .. path .. '","maxAttempts":1,'
    .. '"perAttemptTimeoutMs":2000,"totalBudgetMs":2000,"retryable":[]}', "control.lock"))
  local probe = rf.client{ policy = lock, base_url = url }
  local r = probe:request{ method = method, path = path }
  probe:close()
  if not r.ok then return nil, method .. " " .. path .. ": " .. r.outcome .. " " .. r.reason end
  return r
end

--- Resets the upstream (POST /__reset): its stats and sequences forgotten and its generator reseeded, so the same
--- requests draw the same faults again.
-- @param url string: the upstream's base URL
-- @return true, or nil, why
function M.reset(url)
  local r, why = control(url, "POST", "/__reset")
  if not r then return nil, why end
  return true
end

--- The upstream's counters, read with GET /__stats through a one-attempt client (loopback only).
-- @param url string: the upstream's base URL
-- @return {requests=, executions=, duplicate_executions=, keys=, max_in_flight=} (integers), or nil, why
function M.stats(url)
  local r, why = control(url, "GET", "/__stats")
  if not r then return nil, why end
  local function num(key) return math.tointeger(tonumber(r.body:match('"' .. key .. '":(%d+)'))) end
  return { requests = num("requests"), executions = num("executions"),
           duplicate_executions = num("duplicate_executions"), keys = num("keys"), max_in_flight = num("max_in_flight") }
end

return M
