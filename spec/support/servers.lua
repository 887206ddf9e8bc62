-- Real servers for the network specs, each started on free loopback ports in its own temporary directory and
-- stopped by the spec's teardown: nginx (a generated config), tinyproxy (a forward proxy), openssl s_server,
-- and certificates made with the openssl CLI (a private CA, server certificates good, for the wrong host and
-- expired, a client certificate). M.start is what every server shares (free ports, the wait until it answers,
-- the check that the answer is ours, the stop); spec/redis_server.lua uses it too. Ports are drawn from
-- 20000..32000, below Linux's ephemeral range (32768..60999).
local h = require "spec.helper"
local M = {}

local shell_quote = h.shell_quote

--- The text of a file, "" where there is none (a process gone from /proc, a log or pid file not written yet).
local function text_of(path) return h.try_read_file(path) or "" end

--- A port drawn from lo..hi (inclusive) with the kernel's randomness: ctest runs many spec files side by side,
--- and LuaJIT's and Lua 5.1's math.random start every process from the same state, so two files would draw the
--- same ports in the same order (and a spec may reseed math.random for its own draws).
function M.random_port(lo, hi)
  local f = assert(io.open("/dev/urandom", "rb"))
  local b1, b2, b3 = f:read(3):byte(1, 3)
  f:close()
  return lo + (b1 * 65536 + b2 * 256 + b3) % (hi - lo + 1)
end

--- Runs a shell command; raises with its stderr when it fails.
function M.sh(cmd)
  local err = os.tmpname()
  local ok = os.execute("(" .. cmd .. ") >/dev/null 2>" .. shell_quote(err))
  local msg = text_of(err)
  os.remove(err)
  if not ok then error("command failed: " .. cmd .. "\n" .. msg, 2) end
end

--- A fresh directory /tmp/rf-TAG.XXXXXX, mode 755: nginx workers may run as another user.
function M.temp_dir(tag)
  local dir = h.temp_dir(tag)
  os.execute("chmod 755 " .. shell_quote(dir))
  return dir
end

--- The first executable found: $env_name, then each name on PATH, then the given absolute paths.
function M.find_binary(env_name, names, paths)
  local env = os.getenv(env_name)
  if env and env ~= "" then return os.execute("test -x " .. shell_quote(env)) and env or nil end
  for _, name in ipairs(names) do
    local p = io.popen("command -v " .. name .. " 2>/dev/null")
    local found = p:read("l")
    p:close()
    if found and found ~= "" then return found end
  end
  for _, cand in ipairs(paths or {}) do
    if os.execute("test -x " .. shell_quote(cand)) then return cand end
  end
  return nil
end

M.nginx_bin = M.find_binary("RF_NGINX", { "nginx" },
  { "/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx" })
M.tinyproxy_bin = M.find_binary("RF_TINYPROXY", { "tinyproxy" }, { "/usr/bin/tinyproxy", "/usr/sbin/tinyproxy" })
M.openssl_bin = M.find_binary("RF_OPENSSL", { "openssl" }, { "/usr/bin/openssl" })

--- Does the process run? A zombie (exited, awaiting its reaper) does not.
local function alive(pid)
  local stat = text_of("/proc/" .. pid .. "/stat")
  return stat ~= "" and not stat:match("^%d+ %b() Z")
end

--- Waits (bounded) for a process to exit. Then kills it for certain.
local function wait_gone(pid)
  if not pid then return end
  for _ = 1, 100 do
    if not alive(pid) then break end
    os.execute("sleep 0.05")
  end
  os.execute("kill -9 " .. pid .. " 2>/dev/null")
end

local function pid_in(path) return math.tointeger(tonumber((text_of(path):match("%d+")) or "")) end

--- Runs cmd in the background of a shell with its output in log; returns the pid it runs as (whatever the user).
function M.spawn(cmd, log, dir)
  os.execute(cmd .. " >" .. shell_quote(log) .. " 2>&1 & echo $! > " .. shell_quote(dir .. "/spawn.pid"))
  return pid_in(dir .. "/spawn.pid")
end

--- Starts a server on free loopback ports in its own directory and returns it once it answers there and the
--- answer is from the process started here: a port where something already answers is skipped, and a start
--- that fails on its ports (a bind lost to another run) is tried on others. The server's own parts, in s:
---   name: for messages; dir: its directory (removed by stop, and when no start succeeds);
---   ports (1), tries (5), range ({20000, 32000}: below Linux's ephemeral range 32768..60999), avoid (a port
---   never drawn), port (a fixed port, tried once);
---   launch(ports) → pid | nil, why, again: starts it and gives the pid that will serve, or why it did not start
---     and whether other ports may help (default: they may);
---   pid_file: a daemon's pid file, read while waiting where launch gives no pid;
---   answers(ports): it answers (default: a TCP connect to ports[1] succeeds);
---   ours(pid, ports): the answer is from pid (default: pid still runs a moment later — a server that lost the
---     bind exits at once);
---   log: the file whose text says why, when no start succeeded.
-- @return {name=, dir=, ports=, port=, pid=, stop=function(signal)} (stop: the signal, default TERM, then a
--   bounded wait until the process is gone, then the directory removed; a second stop does nothing) or nil, why
function M.start(s)
  local range = s.range or { 20000, 32000 }
  local answers = s.answers or function(ports) return M.port_open(ports[1]) end
  local ours = s.ours or function(pid)
    os.execute("sleep 0.1")
    return alive(pid)
  end
  local why
  for _ = 1, s.port and 1 or (s.tries or 5) do
    local ports, taken = {}, {}
    while #ports < (s.ports or 1) do
      local p = s.port or M.random_port(range[1], range[2])
      if not taken[p] and p ~= s.avoid then taken[p], ports[#ports + 1] = true, p end
    end
    local open = false
    for _, p in ipairs(ports) do open = open or M.port_open(p) end -- another run's server
    if not open then
      if s.pid_file then os.remove(s.pid_file) end
      local pid, err, again = s.launch(ports)
      why = err
      if pid or not err then
        local up = false
        for _ = 1, 100 do -- until it answers (at most 5 s) or its process is gone
          pid = pid or (s.pid_file and pid_in(s.pid_file))
          if pid and answers(ports) then
            up = true
            break
          end
          if pid and not alive(pid) then break end
          os.execute("sleep 0.05")
        end
        if up and ours(pid, ports) then
          local srv = { name = s.name, dir = s.dir, ports = ports, port = ports[1], pid = pid }
          function srv.stop(signal)
            if srv.stopped then return end
            srv.stopped = true
            os.execute("kill -" .. (signal or "TERM") .. " " .. pid .. " 2>/dev/null")
            wait_gone(pid)
            os.execute("rm -rf " .. shell_quote(s.dir))
          end
          return srv
        end
        if pid then os.execute("kill -9 " .. pid .. " 2>/dev/null") end
      elseif again == false then
        break
      end
    end
  end
  why = why or (s.log and text_of(s.log)) or "?"
  os.execute("rm -rf " .. shell_quote(s.dir))
  return nil, "cannot start " .. s.name .. ": " .. why
end

--- Starts nginx with the nginx.conf conf_of(ports, dir) returns, where ports is a list of n free loopback ports.
--- nginx binds before it daemonizes, so a zero exit status means it listens; a failed bind is retried on other
--- ports. opts: {tag = "net-nginx" (its directory's name), avoid = a port never drawn}.
-- @return {dir=, ports=, port=, pid=, conf=, url=, access=, log_lines=, stop=} or nil, message
function M.nginx_with(n, conf_of, opts)
  assert(M.nginx_bin, "nginx not installed")
  opts = opts or {}
  local dir = M.temp_dir(opts.tag or "net-nginx")
  local conf = dir .. "/nginx.conf"
  local function nginx(args) return table.concat({ shell_quote(M.nginx_bin), "-p", shell_quote(dir .. "/"), "-c",
      shell_quote(conf), args }, " ")
  end
  local ng, err = M.start{ name = "nginx", dir = dir, ports = n, avoid = opts.avoid, pid_file = dir .. "/nginx.pid",
    answers = function() return true end,
    launch = function(ports)
      h.write_file(conf, conf_of(ports, dir))
      if os.execute(nginx("2>" .. shell_quote(dir .. "/start.err"))) then return nil end
      local why = text_of(dir .. "/start.err")
      return nil, why, why:find("Address already in use", 1, true) ~= nil
    end }
  if not ng then return nil, err end
  --- The base URL of the port ports[i], "http" unless scheme says otherwise.
  function ng.url_of(i, scheme) return (scheme or "http") .. "://127.0.0.1:" .. ng.ports[i] end
  ng.conf, ng.url, ng.access = conf, ng.url_of(1), dir .. "/access.log"
  local stop = ng.stop
  function ng.stop() -- nginx's own stop (a graceful master), then the common wait and clean-up
    if not ng.stopped then os.execute(nginx("-s stop 2>/dev/null")) end
    stop()
  end
  function ng.log_lines()
    local lines = {}
    for line in text_of(ng.access):gmatch("[^\n]+") do lines[#lines + 1] = line end
    return lines
  end
  --- Waits, bounded (h.poll: 100 × 20 ms), until the access log holds count lines: nginx logs after answering.
  function ng.await_lines(count) h.poll(100, 0.02, function() return #ng.log_lines() >= count end) end
  return ng
end

--- Starts nginx with the server blocks servers(ports, dir) returns, where ports is a list of n random ports.
--- The access log (format "method uri request_length protocol connection") is at ng.access.
--- opts: {worker_connections = 64}.
-- @return {dir=, ports=, access=, stop=, log_lines=} or nil, message
function M.nginx(n, servers, opts)
  return M.nginx_with(n, function(ports, dir)
    return (([[
worker_processes 1;
pid @DIR@/nginx.pid;
lock_file @DIR@/nginx.lock;
error_log @DIR@/error.log notice;
events { worker_connections @WC@; }
http {
  log_format rf '$request_method $request_uri $request_length $server_protocol $connection $http_authorization|$http_cookie|$http_user_agent';
  access_log @DIR@/access.log rf;
  client_body_temp_path @DIR@/client_body;
  proxy_temp_path @DIR@/proxy;
  fastcgi_temp_path @DIR@/fastcgi;
  uwsgi_temp_path @DIR@/uwsgi;
  scgi_temp_path @DIR@/scgi;
@SERVERS@
}
]]):gsub("@SERVERS@", function() return servers(ports, dir) end):gsub("@DIR@", dir)
      :gsub("@WC@", tostring(math.tointeger(opts and opts.worker_connections or 64))))
  end)
end

--- Whether a program a spec needs is not installed (names: "nginx", "openssl", "tinyproxy", as M.NAME_bin); if so,
--- a pending describe block named block says which programs it needs, and the spec returns at once.
-- @param block string: the block's name; ... the programs' names
-- @return boolean
function M.missing(block, ...)
  local names, absent = { ... }, false
  for _, name in ipairs(names) do absent = absent or not M[name .. "_bin"] end
  if not absent then return false end
  local busted = require "busted" -- the running suite's API, as a spec file sees it
  busted.describe(block, function() busted.pending(table.concat(names, " or ") .. " not installed (bash .ci/deps)") end)
  return true
end

--- Starts nginx (M.nginx) with a private CA and certificates made for it (M.make_certs, in a fresh directory):
--- servers(ports, certs) returns the server blocks, certs being that directory. ng.certs is the directory, and
--- ng.stop removes it too.
-- @return the nginx of M.nginx with certs=, or nil, message
function M.nginx_tls(n, servers, opts)
  local certs = M.temp_dir("net-certs")
  M.make_certs(certs)
  local ng, err = M.nginx(n, function(ports) return servers(ports, certs) end, opts)
  if not ng then
    os.execute("rm -rf " .. shell_quote(certs))
    return nil, err
  end
  ng.certs = certs
  local stop = ng.stop
  function ng.stop()
    stop()
    os.execute("rm -rf " .. shell_quote(certs))
  end
  return ng
end

--- An nginx server block on 127.0.0.1:port over TLS that answers 200 with text and a line feed on every path.
-- @param certs string: M.make_certs's directory; opts: {cert = "server" (certs/CERT.pem and .key),
--   listen = more listen parameters ("http2"), extra = more directives}
function M.tls_server(port, certs, text, opts)
  opts = opts or {}
  local cert = opts.cert or "server"
  return ("server { listen 127.0.0.1:%d ssl%s; ssl_certificate %s/%s.pem; ssl_certificate_key %s/%s.key; %s"
    .. "location / { return 200 \"%s\\n\"; } }"):format(port, opts.listen and " " .. opts.listen or "", certs, cert,
    certs, cert, opts.extra and opts.extra .. " " or "", text)
end

--- Starts tinyproxy as a forward proxy on a random loopback port, logging every request (LogLevel Info).
-- @return {port=, url=, log=, log_text=, stop=} or nil, message
function M.tinyproxy()
  assert(M.tinyproxy_bin, "tinyproxy not installed")
  local dir = M.temp_dir("net-proxy")
  local px, err = M.start{ name = "tinyproxy", dir = dir, tries = 10, log = dir .. "/out.log",
    launch = function(ports)
      local conf = dir .. "/tinyproxy.conf"
      h.write_file(conf, table.concat({
        "Port " .. ports[1], "Listen 127.0.0.1", "Timeout 10", "MaxClients 20",
        "LogFile \"" .. dir .. "/tinyproxy.log\"", "LogLevel Info", "PidFile \"" .. dir .. "/tinyproxy.pid\"",
        "Allow 127.0.0.1", "DisableViaHeader Yes", "" }, "\n"))
      -- Foreground (-d), so the pid is the server's own.
      return M.spawn(shell_quote(M.tinyproxy_bin) .. " -d -c " .. shell_quote(conf), dir .. "/out.log", dir)
    end }
  if not px then return nil, err end
  px.url, px.log = "http://127.0.0.1:" .. px.port, dir .. "/tinyproxy.log"
  function px.log_text() return text_of(px.log) end
  return px
end

--- Starts `openssl s_server -www` on a random loopback port with the given extra arguments (certificates,
--- -Verify …), in the background; a TLS server whose handshake rules are OpenSSL's own.
-- @return {port=, stop=} or nil, message
function M.s_server(args)
  assert(M.openssl_bin, "openssl not installed")
  local dir = M.temp_dir("net-sserver")
  return M.start{ name = "openssl s_server", dir = dir, log = dir .. "/out.log",
    launch = function(ports)
      return M.spawn(shell_quote(M.openssl_bin) .. " s_server -quiet -www -accept 127.0.0.1:" .. ports[1] .. " " ..
        args .. " </dev/null", dir .. "/out.log", dir)
    end }
end

--- Does a TCP connect to 127.0.0.1:port succeed? (bash's /dev/tcp)
function M.port_open(port)
  return os.execute("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" .. math.tointeger(port) .. "' 2>/dev/null") == true
end

--- A loopback port nothing listens on right now (a connect is refused).
function M.closed_port()
  for _ = 1, 50 do
    local port = M.random_port(20000, 32000)
    if not M.port_open(port) then return port end
  end
  error("no closed loopback port found")
end

--- Makes a private CA and certificates with the openssl CLI in dir:
---   ca.pem/ca.key; server.pem/key (CN and SAN 127.0.0.1, localhost); wronghost.pem/key (SAN other.example);
---   expired.pem/key (valid 2020-01-01 .. 2020-01-02); client.pem/key (client auth; client.key is encrypted
---   with the password "secret"); other-ca.pem (a CA that signed none of them).
function M.make_certs(dir)
  local o = shell_quote(M.openssl_bin)
  local function q(name) return shell_quote(dir .. "/" .. name) end
  M.sh(o .. " req -x509 -newkey rsa:2048 -nodes -keyout " .. q("ca.key") .. " -out " .. q("ca.pem") ..
    " -days 30 -subj '/CN=retryfreeze test CA'")
  M.sh(o .. " req -x509 -newkey rsa:2048 -nodes -keyout " .. q("other-ca.key") .. " -out " .. q("other-ca.pem") ..
    " -days 30 -subj '/CN=another CA'")
  local function leaf(name, cn, san, ext_usage, days)
    M.sh(o .. " req -newkey rsa:2048 -nodes -keyout " .. q(name .. ".key") .. " -out " .. q(name .. ".csr") ..
      " -subj " .. shell_quote("/CN=" .. cn))
    h.write_file(dir .. "/" .. name .. ".ext", "subjectAltName=" .. san .. "\nextendedKeyUsage=" .. ext_usage .. "\n")
    M.sh(o .. " x509 -req -in " .. q(name .. ".csr") .. " -CA " .. q("ca.pem") .. " -CAkey " .. q("ca.key") ..
      " -CAcreateserial -out " .. q(name .. ".pem") .. " -days " .. (days or 30) .. " -extfile " .. q(name .. ".ext"))
  end
  leaf("server", "127.0.0.1", "IP:127.0.0.1,DNS:localhost", "serverAuth")
  leaf("wronghost", "other.example", "DNS:other.example", "serverAuth")
  leaf("client", "retryfreeze client", "DNS:client.example", "clientAuth")
  M.sh(o .. " pkey -in " .. q("client.key") .. " -aes256 -passout pass:secret -out " .. q("client-enc.key"))
  -- An expired certificate: `openssl ca` takes explicit start and end dates.
  M.sh(o .. " req -newkey rsa:2048 -nodes -keyout " .. q("expired.key") .. " -out " .. q("expired.csr") ..
    " -subj /CN=127.0.0.1")
  h.write_file(dir .. "/index.txt", "")
  h.write_file(dir .. "/serial", "1000\n")
  h.write_file(dir .. "/ca.cnf", table.concat({
    "[ca]", "default_ca = rf", "[rf]", "dir = " .. dir, "database = $dir/index.txt", "serial = $dir/serial",
    "new_certs_dir = $dir", "certificate = $dir/ca.pem", "private_key = $dir/ca.key", "default_md = sha256",
    "policy = any", "copy_extensions = none", "x509_extensions = leaf", "[any]", "commonName = supplied",
    "[leaf]", "subjectAltName = IP:127.0.0.1", "extendedKeyUsage = serverAuth", "" }, "\n"))
  M.sh(o .. " ca -batch -config " .. q("ca.cnf") .. " -in " .. q("expired.csr") .. " -out " .. q("expired.pem") ..
    " -startdate 20200101000000Z -enddate 20200102000000Z -notext")
  os.execute("chmod 644 " .. dir .. "/*")
end

--- A client of policy against base_url writing to a ledger in a fresh temporary file: { client, ledger,
--- ledger_path, stop = function } (stop closes the client and the ledger and removes the ledger file).
-- @param opts {rng_seed = 1, ledger = rf.ledger.open's options} or nil
function M.ledgered_client(policy, base_url, opts)
  local rf = require "retryfreeze"
  opts = opts or {}
  local fx = { ledger_path = os.tmpname() }
  fx.ledger = assert(rf.ledger.open(fx.ledger_path, opts.ledger))
  fx.client = rf.client{ policy = policy, base_url = base_url, ledger = fx.ledger, rng_seed = opts.rng_seed or 1 }
  function fx.stop()
    fx.client:close()
    fx.ledger:close()
    os.remove(fx.ledger_path)
  end
  return fx
end

--- The project's fault-injecting upstream with a client of policy in front of it, writing to a fresh ledger
--- (M.ledgered_client): { up, client, ledger, ledger_path, stop = function } (stop also stops the upstream). The
--- upstream stalls opts.stall_ms (default 5000) at most and exits by itself after 120 s.
function M.client_on_upstream(policy, opts)
  local upstream = require "retryfreeze.upstream"
  local stall_ms = opts and opts.stall_ms or 5000
  local up = assert(upstream.start{ bindir = h.bindir, stall_ms = stall_ms, max_seconds = 120 })
  local fx = M.ledgered_client(policy, up.url)
  fx.up = up
  local stop = fx.stop
  function fx.stop()
    stop()
    up.stop()
  end
  return fx
end

return M
