-- A real redis-server for the specs: started on a free loopback port with no persistence (no RDB, no AOF),
-- its files in a temporary directory, stopped (SIGKILL-able mid-test) by the spec that started it.
-- A port where something already answers is skipped, and the server that answers is checked to be ours (its
-- process id against our pid file), so a spec never uses, or kills, another run's Redis.
-- Without redis-server the caller gets nil, why and marks its specs pending.
local h = require "spec.helper"
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
  local dir = h.temp_dir("redis")
  local pidfile = dir .. "/redis.pid"
  for _ = 1, 20 do
    local port = opts.port or math.random(33000, 45000)
    if not answers(port) then
      os.remove(pidfile)
      local args = {
        "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "''", "--appendonly", "no",
        "--dir", shell_quote(dir), "--logfile", shell_quote(dir .. "/redis.log"), "--daemonize", "yes",
        "--pidfile", shell_quote(pidfile), "--enable-debug-command", opts.debug and "yes" or "no",
      }
      os.execute(table.concat(args, " ") .. " >/dev/null 2>&1")
      for _ = 1, 100 do -- until it answers (at most 5 s)
        local mine = tonumber((h.try_read_file(pidfile) or ""):match("%d+"))
        if mine and answers(port) then
          local _, info = sh("redis-cli -p " .. port .. " info server")
          if tonumber(info:match("process_id:(%d+)")) ~= mine then -- someone else's took the port first
            os.execute("kill " .. mine .. " 2>/dev/null")
            break
          end
          local srv = { port = port, url = "redis://127.0.0.1:" .. port .. "/0", pid = mine, dir = dir }
          function srv.cli(...)
            local a = {}
            for i, v in ipairs({ ... }) do a[i] = shell_quote(v) end
            local _, o = sh("redis-cli -p " .. port .. " " .. table.concat(a, " "))
            return o
          end
          function srv.stop(signal)
            if srv.pid then os.execute("kill -" .. (signal or "TERM") .. " " .. srv.pid .. " 2>/dev/null") end
            for _ = 1, 100 do -- until the port is closed
              if not answers(port) then break end
              os.execute("sleep 0.05")
            end
            srv.pid = nil
          end
          return srv
        end
        os.execute("sleep 0.05")
      end
    end
    if opts.port then break end
  end
  return nil, "redis-server did not start (see " .. dir .. "/redis.log)"
end

return M
