-- A real redis-server for the specs: started on a free loopback port with no persistence (no RDB, no AOF),
-- its files in a temporary directory, stopped (SIGKILL-able mid-test) by the spec that started it.
-- A port where something already answers is skipped, and the server that answers is checked to be ours (its
-- process id against our pid file), so a spec never uses, or kills, another run's Redis.
-- Without redis-server the caller gets nil, why and marks its specs pending.
-- With opts.tls it listens with TLS only (--tls-port, certificates from servers.make_certs), and with opts.users
-- it has ACL users (a redis.conf of `user` lines), checked by the helper as an admin user of its own.
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

--- redis-cli for a server: its port, TLS (tls.dir's CA, and the client certificate, which a server with
--- tls-auth-clients yes needs) and its admin user. Takes the server's options and port.
local function cli_of(opts, port)
  local words = { "redis-cli", "-p", port }
  if opts.tls then
    local d = opts.tls.dir .. "/"
    for _, w in ipairs({ "--tls", "--cacert", d .. "ca.pem", "--cert", d .. "client.pem", "--key", d .. "client.key" }) do
      words[#words + 1] = shell_quote(w)
    end
  end
  if opts.admin then
    for _, w in ipairs({ "--user", opts.admin.user, "--pass", opts.admin.password, "--no-auth-warning" }) do
      words[#words + 1] = shell_quote(w)
    end
  end
  return table.concat(words, " ")
end

local function answers(cli)
  local _, out = sh(cli .. " ping")
  return out:match("PONG") ~= nil
end

--- Starts redis-server on a random free loopback port (another port when it is taken or the bind fails).
-- @param opts table|nil: {port = n} to reuse a port (a restart); {debug = true} allows DEBUG SLEEP;
--   {tls = {dir = D, auth_clients = "no"|"yes"|"optional"}}: TLS only, with D's server.pem/key and ca.pem
--   (servers.make_certs), clients' certificates not asked for unless auth_clients says so;
--   {users = {"app on >pw ~key:* +get", ...}}: ACL users, each a redis.conf `user` line without the word "user"
--   (the default user stays as Redis makes it unless one of them is "default ...")
-- @return {port=, url=, pid=, cli=function(...) → output, stop=function(signal)} or nil, why (url: redis:// or
--   rediss://127.0.0.1:PORT/0, no user)
function M.start(opts)
  opts = setmetatable({}, { __index = opts or {} })
  local dir = servers.temp_dir("redis")
  local pidfile = dir .. "/redis.pid"
  local conf = dir .. "/redis.conf"
  local lines = {}
  if opts.users then
    -- The helper's own user, for its checks: a password no test knows.
    opts.admin = { user = "rf-admin", password = ("admin-%d-%d"):format(os.time(), math.random(1000000000)) }
    lines[1] = ("user %s on >%s ~* &* +@all"):format(opts.admin.user, opts.admin.password)
    for _, u in ipairs(opts.users) do lines[#lines + 1] = "user " .. u end
  end
  h.write_file(conf, table.concat(lines, "\n") .. "\n")
  local srv, err = servers.start{ name = "redis-server", dir = dir, tries = 20, port = opts.port,
    range = { 33000, 45000 }, pid_file = pidfile, log = dir .. "/redis.log",
    answers = function(ports) return answers(cli_of(opts, ports[1])) end,
    -- Our pid answers: someone else's server that took the port first does not.
    ours = function(pid, ports)
      local _, info = sh(cli_of(opts, ports[1]) .. " info server")
      return tonumber(info:match("process_id:(%d+)")) == pid
    end,
    launch = function(ports)
      local listen = { "--port", ports[1] }
      if opts.tls then
        local d = opts.tls.dir .. "/"
        listen = { "--port", "0", "--tls-port", ports[1], "--tls-cert-file", shell_quote(d .. "server.pem"),
          "--tls-key-file", shell_quote(d .. "server.key"), "--tls-ca-cert-file", shell_quote(d .. "ca.pem"),
          "--tls-auth-clients", opts.tls.auth_clients or "no" }
      end
      local args = { "redis-server", shell_quote(conf), table.unpack(listen) }
      for _, a in ipairs({ "--bind", "127.0.0.1", "--save", "''", "--appendonly", "no",
        "--dir", shell_quote(dir), "--logfile", shell_quote(dir .. "/redis.log"), "--daemonize", "yes",
        "--pidfile", shell_quote(pidfile), "--enable-debug-command", opts.debug and "yes" or "no" }) do
        args[#args + 1] = a
      end
      os.execute(table.concat(args, " ") .. " >/dev/null 2>&1")
    end }
  if not srv then return nil, err end
  srv.url = (opts.tls and "rediss" or "redis") .. "://127.0.0.1:" .. srv.port .. "/0"
  function srv.cli(...)
    local a = {}
    for i, v in ipairs({ ... }) do a[i] = shell_quote(v) end
    local _, o = sh(cli_of(opts, srv.port) .. " " .. table.concat(a, " "))
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
