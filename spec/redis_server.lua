-- A real redis-server for the specs: started on a free loopback port with no persistence (no RDB, no AOF),
-- its files in a temporary directory, stopped (SIGKILL-able mid-test) by the spec that started it.
-- A port where something already answers is skipped, and the server that answers is checked to be ours (its
-- process id against our pid file), so a spec never uses, or kills, another run's Redis.
-- Without redis-server the caller gets nil, why and marks its specs pending.
local h = require "spec.helper"
local servers = require "spec.support.servers"
local M = {}

local shell_quote = h.shell_quote

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  local ok = p:close()
  return ok, out
end

--- Is redis-server on PATH?
function M.available()
  return (sh("command -v redis-server && command -v redis-cli"))
end

local function answers(port)
  local _, out = sh("redis-cli -p " .. port .. " ping")
  return out:match("PONG") ~= nil
end

--- Starts redis-server on a random free loopback port (another port when it is taken or the bind fails).
-- @param opts table|nil: {port = n} to reuse a port (a restart); {debug = true} allows DEBUG SLEEP
-- @return {port=, url=, pid=, cli=function(...) → output, stop=function(signal)} or nil, why
function M.start(opts)
  opts = opts or {}
  local dir = servers.temp_dir("redis")
  local pidfile = dir .. "/redis.pid"
  local srv, err = servers.start{ name = "redis-server", dir = dir, tries = 20, port = opts.port,
    range = { 33000, 45000 }, pid_file = pidfile, log = dir .. "/redis.log",
    answers = function(ports) return answers(ports[1]) end,
    -- Our pid answers: someone else's server that took the port first does not.
    ours = function(pid, ports)
      local _, info = sh("redis-cli -p " .. ports[1] .. " info server")
      return tonumber(info:match("process_id:(%d+)")) == pid
    end,
    launch = function(ports)
      local args = {
        "redis-server", "--port", ports[1], "--bind", "127.0.0.1", "--save", "''", "--appendonly", "no",
        "--dir", shell_quote(dir), "--logfile", shell_quote(dir .. "/redis.log"), "--daemonize", "yes",
        "--pidfile", shell_quote(pidfile), "--enable-debug-command", opts.debug and "yes" or "no",
      }
      os.execute(table.concat(args, " ") .. " >/dev/null 2>&1")
    end }
  if not srv then return nil, err end
  srv.url = "redis://127.0.0.1:" .. srv.port .. "/0"
  function srv.cli(...)
    local a = {}
    for i, v in ipairs({ ... }) do a[i] = shell_quote(v) end
    local _, o = sh("redis-cli -p " .. srv.port .. " " .. table.concat(a, " "))
    return o
  end
  return srv
end

--- Starts the test build's hostile Redis (spec/core/fake_resp.c: build/fake_resp) on a random free loopback port.
-- @param mode string: ok, drip, stall, garbage, silent or backlog, optionally ":COMMAND" (misbehave on that
--   command's replies only), as fake_resp takes it
-- @param interval_ms integer|nil: drip's pause between two bytes (default 20)
-- @return {port=, url=, pid=, stop=function(signal)} or nil, why
function M.fake(mode, interval_ms)
  local dir = servers.temp_dir("fake-redis")
  local log = dir .. "/fake.log"
  local srv, err = servers.start{ name = "fake_resp " .. mode, dir = dir, log = log,
    -- It prints its port once it listens (a connect would hang on "backlog", whose queue is full on purpose).
    answers = function(ports) return (h.try_read_file(log) or ""):match("^(%d+)\n") == tostring(ports[1]) end,
    launch = function(ports)
      return servers.spawn(shell_quote(h.build_dir .. "/fake_resp") .. " " .. ports[1] .. " " .. shell_quote(mode)
        .. " " .. math.floor(interval_ms or 20), log, dir)
    end }
  if not srv then return nil, err end
  srv.url = "redis://127.0.0.1:" .. srv.port .. "/0"
  return srv
end

return M
