-- Real servers for the network specs, each started on free loopback ports in its own temporary directory and
-- stopped by the spec's teardown: nginx (a generated config), tinyproxy (a forward proxy), and certificates
-- made with the openssl CLI (a private CA, server certificates good, for the wrong host and expired, a
-- client certificate). Ports are drawn from 20000..32000, below Linux's ephemeral range (32768..60999).
local h = require "spec.helper"
local M = {}

local shell_quote = h.shell_quote

--- The text of a file, "" where there is none (a process gone from /proc, a log or pid file not written yet).
local function text_of(path) return h.try_read_file(path) or "" end

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

M.nginx_bin = M.find_binary("RF_NGINX", { "nginx" }, { "/usr/sbin/nginx", "/usr/local/sbin/nginx" })
M.tinyproxy_bin = M.find_binary("RF_TINYPROXY", { "tinyproxy" }, { "/usr/bin/tinyproxy", "/usr/sbin/tinyproxy" })
M.openssl_bin = M.find_binary("RF_OPENSSL", { "openssl" }, { "/usr/bin/openssl" })

--- Waits (bounded) for a process to exit; a zombie counts as gone. Then kills it for certain.
local function wait_gone(pid)
  if not pid then return end
  for _ = 1, 100 do
    local stat = text_of("/proc/" .. pid .. "/stat")
    if stat == "" or stat:match("^%d+ %b() Z") then break end
    os.execute("sleep 0.05")
  end
  os.execute("kill -9 " .. pid .. " 2>/dev/null")
end

local function pid_in(path) return math.tointeger(tonumber((text_of(path):match("%d+")) or "")) end

--- Starts nginx with the server blocks servers(ports) returns, where ports is a list of n random ports;
--- retries other ports when a bind fails. nginx binds before it daemonizes, so exit status 0 = listening.
--- The access log (format "method uri request_length protocol connection") is at ng.access.
--- opts: {worker_connections = 64}.
-- @return {dir=, ports=, access=, stop=, log_lines=} or nil, message
function M.nginx(n, servers, opts)
  assert(M.nginx_bin, "nginx not installed")
  local dir = M.temp_dir("net-nginx")
  local last
  for _ = 1, 5 do
    local ports, seen = {}, {}
    while #ports < n do
      local p = math.random(20000, 32000)
      if not seen[p] then seen[p], ports[#ports + 1] = true, p end
    end
    local conf = dir .. "/nginx.conf"
    h.write_file(conf, (([[
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
      :gsub("@WC@", tostring(math.tointeger(opts and opts.worker_connections or 64)))))
    local cmd = table.concat({ shell_quote(M.nginx_bin), "-p", shell_quote(dir .. "/"), "-c", shell_quote(conf),
      "2>" .. shell_quote(dir .. "/start.err") }, " ")
    if os.execute(cmd) then
      local ng = { dir = dir, ports = ports, access = dir .. "/access.log" }
      function ng.log_lines()
        local lines = {}
        for line in text_of(ng.access):gmatch("[^\n]+") do lines[#lines + 1] = line end
        return lines
      end
      function ng.stop()
        if ng.stopped then return end
        ng.stopped = true
        local pid = pid_in(dir .. "/nginx.pid")
        os.execute(table.concat({ shell_quote(M.nginx_bin), "-p", shell_quote(dir .. "/"), "-c", shell_quote(conf),
          "-s stop 2>/dev/null" }, " "))
        wait_gone(pid)
        os.execute("rm -rf " .. shell_quote(dir))
      end
      return ng
    end
    last = text_of(dir .. "/start.err")
    if not last:find("Address already in use", 1, true) then break end
  end
  os.execute("rm -rf " .. shell_quote(dir))
  return nil, "cannot start nginx: " .. (last or "?")
end

--- Starts tinyproxy as a forward proxy on a random loopback port, logging every request (LogLevel Info).
-- @return {port=, url=, log=, stop=} or nil, message
function M.tinyproxy()
  assert(M.tinyproxy_bin, "tinyproxy not installed")
  local dir = M.temp_dir("net-proxy")
  for _ = 1, 10 do
    local port = math.random(20000, 32000)
    while M.port_open(port) do port = math.random(20000, 32000) end -- taken: another run's server
    local conf = dir .. "/tinyproxy.conf"
    h.write_file(conf, table.concat({
      "Port " .. port, "Listen 127.0.0.1", "Timeout 10", "MaxClients 20",
      "LogFile \"" .. dir .. "/tinyproxy.log\"", "LogLevel Info", "PidFile \"" .. dir .. "/tinyproxy.pid\"",
      "Allow 127.0.0.1", "DisableViaHeader Yes", "" }, "\n"))
    -- Foreground (-d) in the background of a shell, so the pid is ours whatever the user.
    os.execute(shell_quote(M.tinyproxy_bin) .. " -d -c " .. shell_quote(conf) .. " >" ..
      shell_quote(dir .. "/out.log") .. " 2>&1 & echo $! > " .. shell_quote(dir .. "/shell.pid"))
    local pid = pid_in(dir .. "/shell.pid")
    -- Wait (bounded) until it listens: a connect through it answers.
    local up = false
    for _ = 1, 50 do
      if M.port_open(port) then
        up = true
        break
      end
      if text_of("/proc/" .. pid .. "/stat") == "" then break end
      os.execute("sleep 0.05")
    end
    -- Still alive: the listener is ours (a tinyproxy that could not bind exits at once).
    os.execute("sleep 0.1")
    if up and text_of("/proc/" .. pid .. "/stat") ~= "" then
      local px = { port = port, url = "http://127.0.0.1:" .. port, log = dir .. "/tinyproxy.log" }
      function px.log_text() return text_of(px.log) end
      function px.stop()
        if px.stopped then return end
        px.stopped = true
        os.execute("kill " .. pid .. " 2>/dev/null")
        wait_gone(pid)
        os.execute("rm -rf " .. shell_quote(dir))
      end
      return px
    end
    os.execute("kill -9 " .. pid .. " 2>/dev/null")
  end
  local out = text_of(dir .. "/out.log")
  os.execute("rm -rf " .. shell_quote(dir))
  return nil, "cannot start tinyproxy: " .. out
end

--- Starts `openssl s_server -www` on a random loopback port with the given extra arguments (certificates,
--- -Verify …), in the background; a TLS server whose handshake rules are OpenSSL's own.
-- @return {port=, stop=} or nil, message
function M.s_server(args)
  assert(M.openssl_bin, "openssl not installed")
  local dir = M.temp_dir("net-sserver")
  for _ = 1, 5 do
    local port = math.random(20000, 32000)
    if not M.port_open(port) then
      os.execute(shell_quote(M.openssl_bin) .. " s_server -quiet -www -accept 127.0.0.1:" .. port .. " " .. args ..
        " </dev/null >" .. shell_quote(dir .. "/out.log") .. " 2>&1 & echo $! > " .. shell_quote(dir .. "/pid"))
      local pid = pid_in(dir .. "/pid")
      for _ = 1, 50 do
        if M.port_open(port) or text_of("/proc/" .. pid .. "/stat") == "" then break end
        os.execute("sleep 0.05")
      end
      if M.port_open(port) then
        local srv = { port = port }
        function srv.stop()
          if srv.stopped then return end
          srv.stopped = true
          os.execute("kill " .. pid .. " 2>/dev/null")
          wait_gone(pid)
          os.execute("rm -rf " .. shell_quote(dir))
        end
        return srv
      end
      os.execute("kill -9 " .. pid .. " 2>/dev/null")
    end
  end
  local out = text_of(dir .. "/out.log")
  os.execute("rm -rf " .. shell_quote(dir))
  return nil, "cannot start openssl s_server: " .. out
end

--- Does a TCP connect to 127.0.0.1:port succeed? (bash's /dev/tcp)
function M.port_open(port)
  return os.execute("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" .. math.tointeger(port) .. "' 2>/dev/null") == true
end

--- A loopback port nothing listens on right now (a connect is refused).
function M.closed_port()
  for _ = 1, 50 do
    local port = math.random(20000, 32000)
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

return M
