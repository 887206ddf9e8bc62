-- ctest import_nginx: `retryfreeze import --from nginx` against real nginx. For each configuration below, the lock
-- the import writes is read as an oracle (a failure whose class the route lists gets maxAttempts attempts, any
-- other one attempt), then nginx runs that same configuration in front of always-failing retryfreeze-serve
-- upstreams (always 503, or always a reset connection) and the upstreams' /__stats must count exactly those
-- attempts for one request. The configurations: the default proxy_next_upstream (error timeout) under 503 and
-- under resets (GET and POST), http_503 with tries 0 and three servers, tries 2, a backup server, and
-- non_idempotent with a POST.
-- Usage: lua5.4 spec/import_nginx_check.lua BUILD_DIR SOURCE_DIR (any Lua the build made the module for).
local build, src = arg[1], arg[2]
dofile(src .. "/spec/support/check_paths.lua")(build, src)
local import = require "retryfreeze.import"
local json = require "retryfreeze.json"
local rf = require "retryfreeze"
local upstream = require "retryfreeze.upstream"
local shell = require "spec.support.shell"
local sh, q = shell.sh, shell.q
local checks = require("spec.support.checks")("import_nginx")
local check = checks.check

local dir = sh("mktemp -d /tmp/rf-import-nginx.XXXXXX"):gsub("%s+$", "")
os.execute("chmod 0755 " .. q(dir))
local nginx_bin = os.getenv("RF_NGINX") or "nginx"

local function start_upstreams(faults, n)
  local ups = {}
  for i = 1, n do ups[i] = assert(upstream.start{ bindir = build .. "/bin", faults = faults, max_seconds = 300 }) end
  return ups
end
local fail503 = start_upstreams("503=1", 3)
local reset = start_upstreams("reset=1", 3)

local function pick_port()
  return tonumber(sh([[bash -c 'for p in $(shuf -i 20000-32000 -n 50); do ]]
    .. [[(echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; break; }; done']]))
end

-- The nginx.conf of one case: `upstream pool` over the given upstreams (a "backup" suffix marks one), the
-- case's directives in the location.
local function conf_text(port, ups, directives, backup_last)
  local servers = {}
  for i, up in ipairs(ups) do
    servers[#servers + 1] = "    server 127.0.0.1:" .. up.port .. ((backup_last and i == #ups) and " backup" or "")
      .. " max_fails=0;"
  end
  return table.concat({
    "worker_processes 1;", "pid " .. dir .. "/nginx.pid;", "error_log " .. dir .. "/error.log notice;",
    "events { worker_connections 64; }", "http {", "  access_log off;",
    "  client_body_temp_path " .. dir .. "/body;", "  proxy_temp_path " .. dir .. "/proxy;",
    "  fastcgi_temp_path " .. dir .. "/fastcgi;", "  uwsgi_temp_path " .. dir .. "/uwsgi;",
    "  scgi_temp_path " .. dir .. "/scgi;",
    "  upstream pool {", table.concat(servers, "\n"), "  }",
    "  server {", "    listen 127.0.0.1:" .. port .. ";",
    "    location /v1/ {", "      proxy_pass http://pool;", directives, "    }", "  }", "}", "" }, "\n")
end

-- The attempts the imported lock allows for one request of method whose every attempt fails with class.
local function allowed(lock, method, class)
  for _, r in ipairs(lock.routes) do
    if r.endpoint == method .. " /v1/*" then
      for _, c in ipairs(r.retryable) do
        if c == class then return r.maxAttempts end
      end
      return 1
    end
  end
  error("no route " .. method .. " /v1/*")
end

local function total_requests(ups)
  local n = 0
  for _, up in ipairs(ups) do n = n + assert(upstream.stats(up.url)).requests end
  return n
end

local cases = {
  { name = "default (error timeout), 503", ups = fail503, directives = "", method = "GET", class = "HTTP_503" },
  { name = "default (error timeout), reset, GET", ups = reset, directives = "", method = "GET",
    class = "CONNECT_RESET" },
  { name = "default (error timeout), reset, POST", ups = reset, directives = "", method = "POST",
    class = "CONNECT_RESET" },
  { name = "http_503, tries 0, 3 servers", ups = fail503,
    directives = "proxy_next_upstream http_503; proxy_next_upstream_tries 0;", method = "GET", class = "HTTP_503" },
  { name = "http_503, tries 2, 3 servers", ups = fail503,
    directives = "proxy_next_upstream http_503; proxy_next_upstream_tries 2;", method = "GET", class = "HTTP_503" },
  { name = "http_503, POST without non_idempotent", ups = fail503, directives = "proxy_next_upstream http_503;",
    method = "POST", class = "HTTP_503" },
  { name = "http_503 non_idempotent, POST", ups = fail503,
    directives = "proxy_next_upstream http_503 non_idempotent;", method = "POST", class = "HTTP_503" },
  { name = "error non_idempotent, reset, POST", ups = reset,
    directives = "proxy_next_upstream error non_idempotent;", method = "POST", class = "CONNECT_RESET" },
  { name = "http_503, 2 servers and a backup", ups = fail503, directives = "proxy_next_upstream http_503;",
    method = "GET", class = "HTTP_503", backup = true },
}

local expected_counts = {}
for _, case in ipairs(cases) do
  local port = pick_port()
  local conf = dir .. "/nginx.conf"
  local f = assert(io.open(conf, "w"))
  f:write(conf_text(port, case.ups, case.directives, case.backup))
  f:close()
  local lock, notes, code = import.read("nginx", conf)
  check(lock ~= nil, case.name .. ": imported (" .. tostring(lock and "ok" or (code .. " " .. notes)) .. ")")
  if lock then
    local text = json.encode(lock)
    check(rf.load_string(text, "imported.lock.json") ~= nil, case.name .. ": the imported lock loads")
    local want = allowed(lock, case.method, case.class)
    expected_counts[#expected_counts + 1] = want
    for _, up in ipairs(case.ups) do assert(upstream.reset(up.url)) end
    local started = os.execute(q(nginx_bin) .. " -p " .. q(dir .. "/") .. " -c " .. q(conf) .. " 2>" .. q(dir .. "/start.err"))
    check(started == true or started == 0, case.name .. ": nginx started")
    local status = sh("curl -s -o /dev/null -w '%{http_code}' -X " .. case.method
      .. (case.method == "POST" and " -d x=1" or "") .. " http://127.0.0.1:" .. port .. "/v1/items 2>/dev/null")
    local got = total_requests(case.ups)
    check(got == want, string.format("%s: %s %s → %s, upstreams counted %d requests, the imported lock allows %d",
      case.name, case.method, case.class, status, got, want))
    os.execute(q(nginx_bin) .. " -p " .. q(dir .. "/") .. " -c " .. q(conf) .. " -s stop 2>/dev/null")
    for _ = 1, 100 do
      if sh("test -e " .. q(dir .. "/nginx.pid") .. " && echo y") == "" then break end
      os.execute("sleep 0.05")
    end
  end
end
-- The counts must not all be one: the cases above retry (3, 2, 3, 3, 3) and do not (1, 1, 1).
table.sort(expected_counts)
check(expected_counts[#expected_counts] == 3 and expected_counts[1] == 1,
  "the cases span one attempt to three: " .. table.concat(expected_counts, ","))

for _, up in ipairs(fail503) do up.stop() end
for _, up in ipairs(reset) do up.stop() end
checks.finish(dir)
