-- ctest gateway: the gateway mode (examples/gateway, retryfreeze.gateway) with real nginx. nginx proxies natively
-- (proxy_pass to an upstream {} block whose balancer_by_lua runs the gateway) to two upstream servers (one nginx
-- listening on two ports, each logging every request it saw). Checked:
--   request headers pass (Authorization, Content-Type, Cookie, X-Request-Id; Host kept) and response headers come
--   back (Content-Type, Set-Cookie, Cache-Control);
--   an always-503 route gets exactly the lock's attempts, across both peers; a keyless POST is sent once, a keyed
--   one retried; a path no route matches answers 404 and reaches no upstream;
--   a peer that refuses connections is retried on the other;
--   the ledger holds a line per request whose attempts equal what the upstreams saw, each read by stats, and each
--   try's peer is the upstream that saw it (per request, in order; a refused try's the peer that refused it);
--   three gateways in a chain send 27 upstream requests per client request without propagation, at most 3 with;
--   with the budget in a lua_shared_dict (init_worker{shared_dict=}), two workers (both serving) spend one budget:
--   the upstream tries of N always-503 requests are what the engine allows one budget, token bucket and ratio;
--   a key of that budget spoiled (a string put under it): the workers fall back to their own budgets and say so,
--   once each;
--   a lock with a route that asks for a wait fails `nginx -t` with the route and the reason, and with opts.fallback
--   that route goes to the fallback location, its body with it;
--   the lean form (lean.nginx.conf.in: balancer and log phases only) passes the same checks as the full one, from
--   headers to ledger, and refuses at start a lock with propagation, a route that asks for a wait, or a fallback;
--   so does the nginx module (native.nginx.conf.in: no Lua phase), whose refusals `nginx -t` prints: a lock with
--   propagation, a route that asks for a wait, a lock it cannot read, a budget a fleet shares, a backup server and
--   a bad ledger argument;
--   nginx's error logs hold no Lua error, and no alert or crit line.
-- Usage: luajit spec/gateway_check.lua BUILD_DIR SOURCE_DIR [NGINX_MODULE] (the Lua module is the build's LuaJIT
-- one; NGINX_MODULE, the build's ngx_http_retryfreeze_module.so, adds the module's checks).
local build, src, module = arg[1], arg[2], arg[3] ~= "" and arg[3] or nil
dofile(src .. "/spec/support/check_paths.lua")(build, src)
local rf = require "retryfreeze"

local shell = require "spec.support.shell"
local sh, q = shell.sh, shell.q
local checks = require("spec.support.checks")("gateway")
local check = checks.check

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end
local function read(path)
  local f = io.open(path)
  if not f then return "" end
  local text = f:read("*a")
  f:close()
  return text
end

local dir = sh("mktemp -d /tmp/rf-gateway.XXXXXX"):gsub("%s+$", "")
os.execute("chmod 0755 " .. q(dir)) -- nginx's workers may run as nobody: its temp paths must be traversable

-- Free loopback ports below the ephemeral range (32768..60999), none of them in taken.
local taken = {}
local function pick_port()
  for _ = 1, 20 do
    local p = tonumber(sh([[bash -c 'for p in $(shuf -i 20000-32000 -n 50); do ]]
      .. [[(echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; break; }; done']]))
    if p and not taken[p] then
      taken[p] = true
      return p
    end
  end
  error("no free port")
end

local running = {}
-- Starts nginx with conf_of(ports, d) in dir/name (a folder of its own), where ports are `count` free ports;
-- returns the ports once the first answers.
local function start(name, count, conf_of)
  local d = dir .. "/" .. name
  os.execute("mkdir -p " .. q(d) .. " && chmod 0755 " .. q(d))
  for _ = 1, 5 do
    local ports = {}
    for i = 1, count do ports[i] = pick_port() end
    write(d .. "/nginx.conf", conf_of(ports, d))
    local pid = tonumber(sh("cd " .. q(d) .. " && (nginx -p " .. q(d .. "/") .. " -c nginx.conf >nginx.out 2>&1 & echo $!)"))
    for _ = 1, 100 do
      if sh("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" .. ports[1] .. "/__up 2>/dev/null") ~= "000" then
        running[#running + 1] = pid
        return ports, d
      end
      if sh("kill -0 " .. pid .. " 2>/dev/null && echo alive") == "" then break end -- it could not bind
      os.execute("sleep 0.1")
    end
    os.execute("kill " .. pid .. " 2>/dev/null; sleep 0.2")
  end
  error("cannot start nginx " .. name .. ": " .. read(d .. "/nginx.out") .. read(d .. "/error.log"))
end

-- The upstream: one nginx on two ports (the gateway's two peers). /echo answers with the request headers it got
-- and three response headers; /fail and POST /v1/jobs answer 503; /items/s999 999 (no HTTP status); /items/slow 200
-- after a second; /items/big a head larger than the gateway's buffer; other /items/* 200. Every request is logged with the
-- port it came in on, its method, path, idempotency key and propagated attempt number.
local up_ports, up_dir = start("upstream", 2, function(ports, d)
  local servers = {}
  for _, port in ipairs(ports) do
    servers[#servers + 1] = ([[
  server {
    listen 127.0.0.1:@PORT@;
    access_log @D@/access.log seen;
    location = /__up { access_log off; return 200; }
    location = /echo {
      content_by_lua_block {
        local h = ngx.req.get_headers()
        ngx.header["Content-Type"] = "application/x-echo"
        ngx.header["Set-Cookie"] = "session=abc; Path=/"
        ngx.header["Cache-Control"] = "no-store"
        ngx.print("host=", h.host or "", "\nauthorization=", h.authorization or "", "\ncontent-type=",
          h["content-type"] or "", "\ncookie=", h.cookie or "", "\nx-request-id=", h["x-request-id"] or "", "\n")
      }
    }
    location = /fail { return 503 "down\n"; }
    location = /items/s999 { return 999 "odd\n"; }
    location = /items/slow { content_by_lua_block { ngx.sleep(1) ngx.say("late") } }
    location = /items/big { content_by_lua_block { ngx.header["X-Big"] = ("b"):rep(9000) ngx.say("big") } }
    location = /v1/jobs { return 503 "busy\n"; }
    location /items/ { return 200 "item\n"; }
  }
]]):gsub("@PORT@", tostring(port)):gsub("@D@", d)
  end
  return ([[
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
worker_processes 1;
error_log @D@/error.log notice;
pid @D@/nginx.pid;
daemon off;
events { worker_connections 256; }
http {
  client_body_temp_path @D@/tmp_body;
  proxy_temp_path @D@/tmp_proxy;
  fastcgi_temp_path @D@/tmp_fastcgi;
  uwsgi_temp_path @D@/tmp_uwsgi;
  scgi_temp_path @D@/tmp_scgi;
  log_format seen '$server_port|$request_method|$uri|$http_idempotency_key|$http_x_envoy_attempt_count';
@SERVERS@}
]]):gsub("@D@", d):gsub("@SERVERS@", table.concat(servers))
end)

-- What the upstreams saw: {port=, method=, uri=, key=, attempt=} per request, once `want` more than mark are
-- there (nginx logs after answering).
local function seen()
  local lines = {}
  for line in read(up_dir .. "/access.log"):gmatch("[^\n]+") do
    local f = {}
    for part in (line .. "|"):gmatch("([^|]*)|") do f[#f + 1] = part end
    lines[#lines + 1] = { port = tonumber(f[1]), method = f[2], uri = f[3], key = f[4], attempt = f[5] }
  end
  return lines
end
local function since(mark, want)
  local lines
  for _ = 1, 60 do
    lines = seen()
    if #lines >= mark + want then break end
    os.execute("sleep 0.05")
  end
  os.execute("sleep 0.2")
  lines = seen()
  local out = {}
  for i = mark + 1, #lines do out[#out + 1] = lines[i] end
  return out
end

-- A gateway: examples/gateway/nginx.conf.in filled in, in front of peers p1 and p2, under lock_path.
local conf_in = read(src .. "/examples/gateway/nginx.conf.in")
local function gateway(name, lock_path, p1, p2, conf)
  local ports, d = start(name, 1, function(ports, d)
    return ((conf or conf_in):gsub("@(%u[%u%d_]*)@", { DIR = d, SRC = src, CPATH = build .. "/lib/lua/luajit",
      LOCK = lock_path, LEDGER = d .. "/ledger.jsonl", UPSTREAM_PORT = tostring(p1), UPSTREAM2_PORT = tostring(p2),
      PORT = tostring(ports[1]), MODULE = module }))
  end)
  return ports[1], d
end

-- curl: status, response headers (lowercase name → value), body.
local function curl(port, path, args)
  local out = sh("curl -s -D - " .. (args or "") .. " http://127.0.0.1:" .. port .. path .. " 2>/dev/null")
  local head, body = out:match("^(.-)\r\n\r\n(.*)$")
  head = head or out
  local status = tonumber(head:match("^HTTP/%d%.?%d? (%d+)"))
  local headers = {}
  for name, value in head:gmatch("\n([^:\r\n]+):%s*([^\r\n]*)") do headers[name:lower()] = value end
  return status, headers, body or ""
end

local lock_path = src .. "/examples/gateway/gateway.lock.json"
-- The two forms of the gateway, each checked alike below: the full one (four phases, the example lock with
-- propagation) and the lean one (balancer and log only, the same lock without propagation).
local FORMS = {
  { name = "full", conf = conf_in, lock = lock_path },
  { name = "lean", conf = read(src .. "/examples/gateway/lean.nginx.conf.in"),
    lock = src .. "/examples/gateway/lean.lock.json" },
}
-- The nginx module (no Lua phase), under the lean form's lock: what it serves is what the lean form serves.
local native_in = read(src .. "/examples/gateway/native.nginx.conf.in")
if module then
  check(io.open(module) ~= nil, "the nginx module was built: " .. module)
  FORMS[#FORMS + 1] = { name = "native", conf = native_in, lock = FORMS[2].lock }
end
-- Headers both ways, exact attempts across both peers, the idempotency rule, 404, a refusing peer and the ledger
-- against what the upstreams saw, for one form of the gateway.
local function battery(form)
  local function fcheck(ok, message) check(ok, form.name .. " form: " .. message) end
  local requests = 0 -- client requests this form's first gateway answered (its ledger lines)
  local first_seen = #seen() -- what the upstreams saw before this form's gateways
  local gw_port, gw_dir = gateway(form.name, form.lock, up_ports[1], up_ports[2], form.conf)
  -- start() asked for /__up, which no route matches: 404 before any step (in the access phase, or the lean form's
  -- balancer), so no ledger line.

  -- Headers both ways.
  local mark = #seen()
  local status, headers, body = curl(gw_port, "/echo", "-H 'Host: shop.example' -H 'Authorization: Bearer t0k'"
    .. " -H 'Content-Type: text/x-test' -H 'Cookie: a=1; b=2' -H 'X-Request-Id: req-42'")
  requests = requests + 1
  fcheck(status == 200, "GET /echo answers 200 through the gateway (" .. tostring(status) .. ")")
  for _, want in ipairs({ "host=shop.example", "authorization=Bearer t0k", "content-type=text/x-test",
                          "cookie=a=1; b=2", "x-request-id=req-42" }) do
    fcheck(body:find(want, 1, true) ~= nil, "the upstream got " .. want)
  end
  fcheck(headers["content-type"] == "application/x-echo" and headers["set-cookie"] == "session=abc; Path=/"
    and headers["cache-control"] == "no-store", "the client got the upstream's Content-Type, Set-Cookie and "
    .. "Cache-Control (" .. tostring(headers["content-type"]) .. " | " .. tostring(headers["set-cookie"]) .. " | "
    .. tostring(headers["cache-control"]) .. ")")
  fcheck(#since(mark, 1) == 1, "one GET /echo reached the upstreams")

  -- A caller's propagation headers never pass through as they came: the full form sends its own attempt number (its
  -- lock has propagation), the lean form and the module none.
  mark = #seen()
  local s_prop = curl(gw_port, "/items/prop", "-H 'X-Envoy-Attempt-Count: 7' -H 'X-Envoy-Expected-Rq-Timeout-Ms: 900'")
  requests = requests + 1
  local prop = since(mark, 1)
  local want_attempt = form.name == "full" and "1" or "-"
  fcheck(s_prop == 200 and #prop == 1 and prop[1].attempt == want_attempt, "a caller's X-Envoy-Attempt-Count: 7 "
    .. "reached the upstream as " .. want_attempt .. " (" .. tostring(s_prop) .. ", " .. #prop .. " tries, attempt "
    .. tostring(prop[1] and prop[1].attempt) .. ")")

  -- An always-503 route: exactly maxAttempts, across both peers.
  local policy = assert(rf.load(form.lock))
  local max = policy:routes()[1].max_attempts
  local n = 6
  local exact, both, statuses = 0, 0, {}
  local fail_peers = {} -- per request, the peers that saw its tries in turn: "127.0.0.1:P1,127.0.0.1:P2,…"
  for _ = 1, n do
    mark = #seen()
    local s, _, fail_body = curl(gw_port, "/fail")
    requests = requests + 1
    -- the last try is one nginx is not told to come back on: the upstream's answer reaches the client whole
    statuses[#statuses + 1] = tostring(s) .. (fail_body == "down\n" and "" or " with body " .. ("%q"):format(fail_body))
    local got = since(mark, max)
    local ports, order = {}, {}
    for i, line in ipairs(got) do
      ports[line.port] = true
      order[i] = "127.0.0.1:" .. line.port
    end
    fail_peers[#fail_peers + 1] = table.concat(order, ",")
    if #got == max then exact = exact + 1 end
    if ports[up_ports[1]] and ports[up_ports[2]] then both = both + 1 end
  end
  fcheck(exact == n, ("an always-503 route got exactly the lock's %d attempts (%d of %d requests)"):format(max, exact, n))
  fcheck(both == n, ("each went to both peers (%d of %d)"):format(both, n))
  fcheck(table.concat(statuses, ",") == ("503,"):rep(n - 1) .. "503", "the client got the upstream's 503 and its "
    .. "body, \"down\" (" .. table.concat(statuses, ",") .. ")")

  -- A keyless POST is sent once; a keyed one is retried with its key.
  mark = #seen()
  local s_keyless = curl(gw_port, "/v1/jobs", "-X POST -d x=1")
  requests = requests + 1
  local keyless = since(mark, 1)
  fcheck(#keyless == 1 and s_keyless == 503, "a keyless POST was sent once (" .. #keyless .. " times, status "
    .. tostring(s_keyless) .. ")")
  mark = #seen()
  curl(gw_port, "/v1/jobs", "-X POST -d x=1 -H 'Idempotency-Key: k-gw-1'")
  requests = requests + 1
  local keyed = since(mark, max)
  local same_key = true
  for _, line in ipairs(keyed) do same_key = same_key and line.key == "k-gw-1" end
  fcheck(#keyed == max and same_key, "a keyed POST was tried " .. max .. " times, each with its key (" .. #keyed .. ")")

  -- No route: 404, nothing upstream.
  mark = #seen()
  local s404 = curl(gw_port, "/nowhere/at/all")
  fcheck(s404 == 404, "a path no route matches answers 404 (" .. tostring(s404) .. ")")
  fcheck(#since(mark, 0) == 0, "and reaches no upstream")

  -- What a client or an upstream can send that is not what the engine expects: each gets its ledger line.
  -- A status outside 100..599 (nginx passes it on): an UNKNOWN try, not a Lua error (the error logs are read last).
  mark = #seen()
  local s999 = curl(gw_port, "/items/s999")
  requests = requests + 1
  fcheck(s999 == 999 and #since(mark, 1) == 1, "an upstream's status 999 reaches the client, sent once ("
    .. tostring(s999) .. ")")
  -- A response head larger than nginx's proxy buffer (invalid_header): a broken try like a reset, which the engine
  -- retries (a GET) up to the lock's attempts, then answered 502.
  mark = #seen()
  local s_big = curl(gw_port, "/items/big")
  requests = requests + 1
  local big = since(mark, 3)
  fcheck(s_big == 502 and #big == 3, "a head too large for nginx is retried as the lock allows: 3 tries, then 502 ("
    .. tostring(s_big) .. ", " .. #big .. " tries)")
  -- A client that leaves before the answer: stopped-by-caller, not an upstream's 499.
  mark = #seen()
  curl(gw_port, "/items/slow", "--max-time 0.3")
  requests = requests + 1
  fcheck(#since(mark, 1) == 1, "a request whose client left reached the upstream once")
  -- An Idempotency-Key that is not UTF-8 (0xC3 then "("): recorded with U+FFFD, not refused by the ledger.
  mark = #seen()
  local s_key = curl(gw_port, "/items/badkey", "-H \"$(printf 'Idempotency-Key: \\303(')\"")
  requests = requests + 1
  fcheck(s_key == 200 and #since(mark, 1) == 1, "a key that is not UTF-8 is served (" .. tostring(s_key) .. ")")
  -- The route is matched on the path as sent upstream, not nginx's normalised one: /nope/%2e%2e/items/x is no
  -- /items/* request.
  mark = #seen()
  local s_dots = curl(gw_port, "/nope/%2e%2e/items/x", "--path-as-is")
  fcheck(s_dots == 404 and #since(mark, 0) == 0, "a path that is /items/x only once normalised answers 404 and "
    .. "reaches no upstream (" .. tostring(s_dots) .. ")")

  -- GETs to a route that succeeds, spread over the peers.
  mark = #seen()
  local ok200 = 0
  for i = 1, 10 do
    if curl(gw_port, "/items/" .. i) == 200 then ok200 = ok200 + 1 end
    requests = requests + 1
  end
  fcheck(ok200 == 10 and #since(mark, 10) == 10, "10 GETs answered 200 in one try each (" .. ok200 .. ")")

  -- A peer that refuses connections: retried on the other.
  local dead = pick_port()
  local gw2_port, gw2_dir = gateway(form.name .. "-dead-peer", form.lock, up_ports[1], dead, form.conf)
  mark = #seen()
  local all_ok = 0
  for i = 1, 8 do
    if curl(gw2_port, "/items/d" .. i) == 200 then all_ok = all_ok + 1 end
  end
  local got = since(mark, 8)
  fcheck(all_ok == 8 and #got == 8, "with one peer refusing, 8 of 8 GETs answered 200 (" .. all_ok .. "), the "
    .. "live peer saw each once (" .. #got .. ")")
  os.execute("sleep 0.5") -- the held ledger lines are written within ledger_flush_ms (200 ms)
  local refused_retried, lines2, peers_right = 0, 0, 0
  local live_peer, dead_peer = "127.0.0.1:" .. up_ports[1], "127.0.0.1:" .. dead
  for rec in rf.ledger.read(gw2_dir .. "/ledger.jsonl") do
    lines2 = lines2 + 1
    if rec.attempts == 2 and rec.tries[1].class == "CONNECT_REFUSED" and rec.tries[2].status == 200 then
      refused_retried = refused_retried + 1
    end
    -- every refused try's peer is the dead one, every answered try's the live one
    local right = true
    for _, t in ipairs(rec.tries) do
      right = right and t.peer == (t.class == "CONNECT_REFUSED" and dead_peer or live_peer)
    end
    if right then peers_right = peers_right + 1 end
  end
  fcheck(lines2 == 8 and refused_retried >= 1, "its ledger: 8 lines, " .. refused_retried .. " with a refused try "
    .. "retried on the other peer (" .. lines2 .. " lines)")
  fcheck(peers_right == 8, "each try's peer in its ledger is the peer that refused it or answered it (" .. peers_right
    .. " of 8 lines)")

  -- The first gateway's ledger: a line per request, its attempts what the upstreams saw from it.
  os.execute("sleep 0.5")
  local lines, attempts, reasons = 0, 0, {}
  local ledger_fail_peers, tries_at = {}, {} -- the /fail lines' peers in turn; tries per peer, all lines
  for rec in rf.ledger.read(gw_dir .. "/ledger.jsonl") do
    lines = lines + 1
    attempts = attempts + rec.attempts
    local classes, peers = {}, {}
    for i, t in ipairs(rec.tries) do
      classes[i], peers[i] = t.class, tostring(t.peer)
      tries_at[peers[i]] = (tries_at[peers[i]] or 0) + 1
    end
    if rec.path == "/fail" then ledger_fail_peers[#ledger_fail_peers + 1] = table.concat(peers, ",") end
    local k = rec.method .. " " .. rec.path .. " " .. rec.reason .. " " .. table.concat(classes, ",")
    reasons[k] = (reasons[k] or 0) + 1
  end
  for rec in rf.ledger.read(gw_dir .. "/ledger.jsonl") do
    local classes = {}
    for i, t in ipairs(rec.tries) do classes[i] = t.class end
    local what = rec.reason .. " " .. table.concat(classes, ",")
    if rec.path == "/items/s999" then
      fcheck(what == "status-not-retryable UNKNOWN" or what:find("^[%w-]+ UNKNOWN$") ~= nil,
        "the status-999 request's ledger line has one UNKNOWN try (" .. what .. ")")
    elseif rec.path == "/items/slow" then
      local t = rec.tries[1] or {}
      fcheck(rec.reason == "stopped-by-caller" and rec.attempts == 1 and classes[1] == "UNKNOWN"
        and t.transport == "other" and t.status == 0 and t.peer ~= nil, "the request whose client left is "
        .. "stopped-by-caller, its try UNKNOWN (transport other, no status) with its peer, no HTTP_499 (" .. what
        .. ", " .. tostring(t.transport) .. ", " .. tostring(t.status) .. ", " .. tostring(t.peer) .. ")")
    elseif rec.path == "/items/big" then
      fcheck(what == "max-attempts CONNECT_RESET,CONNECT_RESET,CONNECT_RESET", "the too-large head's line: "
        .. "3 CONNECT_RESET tries, max-attempts (" .. what .. ")")
    elseif rec.path == "/items/badkey" then
      fcheck(rec.key == "\239\191\189(", "the key that is not UTF-8 is recorded with U+FFFD (" .. ("%q"):format(
        tostring(rec.key)) .. ")")
    end
  end
  local fails = "GET /fail max-attempts HTTP_503,HTTP_503,HTTP_503"
  fcheck(reasons[fails] == n, "the ledger records each always-503 request as " .. fails .. " (" ..
    tostring(reasons[fails]) .. " of " .. n .. ")")
  local keyless_line = "POST /v1/jobs mutating-without-idempotency HTTP_503"
  fcheck(reasons[keyless_line] == 1, "and the keyless POST as " .. keyless_line .. " (" ..
    tostring(reasons[keyless_line]) .. ")")
  if reasons[fails] ~= n or reasons[keyless_line] ~= 1 then
    for k, v in pairs(reasons) do print("  ledger: " .. v .. " × " .. k) end
  end
  local upstream_total, seen_at = 0, {}
  local all_seen = seen()
  for i = first_seen + 1, #all_seen do
    local line = all_seen[i]
    if line.uri ~= "/__up" and not line.uri:find("^/items/d") then
      upstream_total = upstream_total + 1
      local peer = "127.0.0.1:" .. line.port
      seen_at[peer] = (seen_at[peer] or 0) + 1
    end
  end
  -- the ledger's lines come in the order each worker wrote its held lines: compared as sorted lists
  table.sort(fail_peers)
  table.sort(ledger_fail_peers)
  fcheck(#fail_peers == n and table.concat(ledger_fail_peers, " ") == table.concat(fail_peers, " "),
    "each always-503 request's tries name, in turn, the peers that saw them (ledger " ..
    table.concat(ledger_fail_peers, " ") .. " | upstreams " .. table.concat(fail_peers, " ") .. ")")
  local per_peer = {}
  for peer, count in pairs(seen_at) do per_peer[#per_peer + 1] = peer .. "=" .. count end
  table.sort(per_peer)
  local per_peer_ledger = {}
  for peer, count in pairs(tries_at) do per_peer_ledger[#per_peer_ledger + 1] = peer .. "=" .. count end
  table.sort(per_peer_ledger)
  fcheck(table.concat(per_peer_ledger, " ") == table.concat(per_peer, " "), "the ledger's tries per peer are what "
    .. "each upstream saw (" .. table.concat(per_peer_ledger, " ") .. " | " .. table.concat(per_peer, " ") .. ")")
  fcheck(lines == requests, "the ledger holds a line per request (" .. lines .. " for " .. requests .. ")")
  fcheck(attempts == upstream_total, "its attempts equal what the upstreams saw (" .. attempts .. " vs " ..
    upstream_total .. ")")
  local stats = rf.ledger.stats({ gw_dir .. "/ledger.jsonl" })
  fcheck(stats and stats.requests == requests, "retryfreeze stats reads every line (" ..
    tostring(stats and stats.requests) .. ")")
end
for _, form in ipairs(FORMS) do
  local ok_run, err = pcall(battery, form)
  check(ok_run, "the " .. form.name .. " gateway's checks ran" .. (ok_run and "" or (": " .. tostring(err))))
end

-- The module under proxy_next_upstream_tries 2: nginx's cap narrows the lock's maxAttempts (3), and the last try
-- it allows reaches the client whole.
if module then
  local ok_cap, cap_err = pcall(function()
    local capped = native_in:gsub("proxy_next_upstream_tries 0;", "proxy_next_upstream_tries 2;", 1)
    assert(capped ~= native_in, "the module's example sets proxy_next_upstream_tries 0")
    local port = gateway("native-tries-2", FORMS[2].lock, up_ports[1], up_ports[2], capped)
    local mark = #seen()
    local s, _, body = curl(port, "/fail")
    local got = since(mark, 2)
    check(s == 503 and body == "down\n" and #got == 2, "under proxy_next_upstream_tries 2 the module makes 2 tries "
      .. "and the second's 503 reaches the client with its body (" .. tostring(s) .. ", " .. ("%q"):format(body) .. ", "
      .. #got .. " tries)")
  end)
  check(ok_cap, "the module's proxy_next_upstream_tries check ran" .. (ok_cap and "" or (": " .. tostring(cap_err))))
end

-- The module governs the request the upstream gets: after a rewrite, under a proxy_pass URI and in a subrequest
-- (mirror), its method, path and key are the request proxy_pass built (a key proxy_set_header blanks is none); a
-- request nginx sends on to a second governed upstream (error_page) is the same request, its lock's limits and its
-- ledger line one; a server marked down never makes a retry go back to the server that just failed. The main block
-- has a `zone` (its servers a list in shared memory).
if module then
  local ok_paths, paths_err = pcall(function()
    local dead, down = pick_port(), pick_port()
    local conf = native_in:gsub("\n    retryfreeze;\n", "\n    retryfreeze;\n    zone rf_zone 64k;\n", 1)
      :gsub("\n  server {", ("\n  upstream rf_dead {\n    retryfreeze;\n    server 127.0.0.1:%d;\n  }"
      .. "\n  upstream rf_three {\n    retryfreeze;\n    server 127.0.0.1:@UPSTREAM_PORT@;\n"
      .. "    server 127.0.0.1:@UPSTREAM2_PORT@;\n    server 127.0.0.1:%d down;\n  }\n  server {"):format(dead, down), 1)
      :gsub("\n    location / {", [[

    location = /items/rw {
      rewrite ^ /fail break;
      proxy_pass http://rf_upstream;
      proxy_next_upstream error timeout http_503;
      error_page 500 = @rf_stopped;
    }
    location /api/ { proxy_pass http://rf_upstream/items/; error_page 500 = @rf_stopped; }
    location = /items/m { mirror /rf_mirror; proxy_pass http://rf_upstream; error_page 500 = @rf_stopped; }
    location = /rf_mirror { internal; proxy_pass http://rf_upstream/items/mirrored; }
    location = /items/fb {
      proxy_pass http://rf_dead;
      proxy_next_upstream error timeout;
      proxy_next_upstream_tries 1;
      error_page 500 = @rf_stopped;
      error_page 502 504 = @rf_fallback;
    }
    location = /fb/jobs {
      rewrite ^ /v1/jobs break;
      proxy_pass http://rf_upstream;
      proxy_intercept_errors on;
      error_page 503 = @rf_fallback;
    }
    location @rf_fallback { proxy_pass http://rf_upstream; }
    location /strip/ {
      proxy_set_header Idempotency-Key "";
      proxy_pass http://rf_upstream/;
      proxy_next_upstream error timeout http_503 non_idempotent;
      error_page 500 = @rf_stopped;
    }
    location = /three/fail {
      rewrite ^ /fail break;
      proxy_pass http://rf_three;
      proxy_next_upstream error timeout http_503;
      error_page 500 = @rf_stopped;
    }
    location = /items/lower { proxy_method get; proxy_pass http://rf_upstream; error_page 500 = @rf_stopped; }
    location / {]], 1)
    assert(conf:find("rf_dead", 1, true) and conf:find("/rf_mirror", 1, true) and conf:find("rf_zone", 1, true),
      "the module's example changed")
    local port, d = gateway("native-paths", FORMS[2].lock, up_ports[1], up_ports[2], conf)
    local mark = #seen()
    local s_rw, _, b_rw = curl(port, "/items/rw")
    local s_api = curl(port, "/api/7")
    local s_m = curl(port, "/items/m")
    local s_fb = curl(port, "/items/fb")
    local s_post = curl(port, "/fb/jobs", "-X POST -d x=1")
    local s_strip = curl(port, "/strip/v1/jobs", "-X POST -d x=1 -H 'Idempotency-Key: k-strip'")
    local s_three = {}
    for k = 1, 9 do s_three[k] = tostring(curl(port, "/three/fail")) end
    local s_lower = curl(port, "/items/lower")
    local got = since(mark, 7 + 2 + 27 + 1)
    local uris = {}
    for _, line in ipairs(got) do
      -- nginx logs an absent header as "-"
      if line.uri ~= "/fail" then uris[#uris + 1] = line.uri .. ((line.key ~= "" and line.key ~= "-") and "#" .. line.key or "") end
    end
    table.sort(uris)
    check(s_rw == 503 and b_rw == "down\n" and s_api == 200 and s_m == 200 and s_fb == 200, "the rewritten, "
      .. "prefixed, mirrored and fallen-back requests answer 503 (the upstream's body), 200, 200, 200 (" ..
      table.concat({ tostring(s_rw), tostring(s_api), tostring(s_m), tostring(s_fb) }, ", ") .. ")")
    check(s_post == 500 and s_strip == 503, "a keyless POST its error_page would send to another governed upstream is "
      .. "refused there (500), and one whose key proxy_set_header blanks is answered as keyless (503) (" ..
      tostring(s_post) .. ", " .. tostring(s_strip) .. ")")
    check(s_lower == 500, "a request line with a method that is no HTTP method (proxy_method get) is refused, not "
      .. "routed (" .. tostring(s_lower) .. ")")
    check(table.concat(uris, " ") == "/items/7 /items/fb /items/m /items/mirrored /v1/jobs /v1/jobs", "besides /fail "
      .. "the upstreams saw /items/7, /items/m, /items/mirrored, the fallback's /items/fb, each POST once and neither "
      .. "with a key (" .. table.concat(uris, " ") .. ")")
    os.execute("sleep 0.5")
    local lines, three_ok, three = {}, 0, 0
    for rec in rf.ledger.read(d .. "/ledger.jsonl") do
      local classes, peers = {}, {}
      for k, t in ipairs(rec.tries) do classes[k], peers[k] = t.class, t.peer end
      if rec.path == "/fail" and rec.attempts == 3 then
        three = three + 1
        if peers[1] ~= peers[2] and peers[2] ~= peers[3] then three_ok = three_ok + 1 end
      else
        lines[#lines + 1] = rec.method .. " " .. rec.path .. " " .. tostring(rec.key) .. " " .. rec.reason .. " "
          .. table.concat(classes, ",")
      end
    end
    table.sort(lines)
    local want = { "GET /items/7 nil success HTTP_200", "GET /items/fb nil success CONNECT_REFUSED,HTTP_200",
      "GET /items/m nil success HTTP_200", "GET /items/mirrored nil success HTTP_200",
      "POST /v1/jobs nil mutating-without-idempotency HTTP_503", "POST /v1/jobs nil mutating-without-idempotency HTTP_503" }
    check(table.concat(lines, " | ") == table.concat(want, " | "), "the ledger governs and records what each "
      .. "upstream got, one line per client request across upstreams (" .. table.concat(lines, " | ") .. ")")
    check(three == 10 and three_ok == 10, "with a server marked down, no retry went back to the server that just "
      .. "failed (" .. three_ok .. " of " .. three .. " always-503 lines; statuses " .. table.concat(s_three, ",") .. ")")
  end)
  check(ok_paths, "the module's request-line checks ran" .. (ok_paths and "" or (": " .. tostring(paths_err))))
end

-- Three gateways in a chain in front of the always-503 upstream: 27 upstream requests per client request without
-- propagation, at most 3 with it.
local ok_chain, chain_err = pcall(function()
  local plain = read(lock_path):gsub(',%s*"propagation": {}', "")
  assert(plain ~= read(lock_path), "the example lock has propagation: {}")
  write(dir .. "/plain.lock.json", plain)
  -- the middle gateway reads the three headers itself (no opts.request_var), as a host without the variable does
  local reads = conf_in:gsub(' request_var = "rf_request",', '', 1)
  assert(reads ~= conf_in, "the example configuration passes request_var")
  local function chain(tag, lock)
    local c = gateway(tag .. "-3", lock, up_ports[1], up_ports[2])
    local b = gateway(tag .. "-2", lock, c, c, reads)
    return (gateway(tag .. "-1", lock, b, b))
  end
  -- The most upstream requests one client request caused, their mean, and the attempt headers the upstream saw.
  local function per_request(front, n)
    local worst, total, attempts = 0, 0, {}
    for _ = 1, n do
      local mark = #seen()
      curl(front, "/fail")
      local got = since(mark, 27)
      total = total + #got
      if #got > worst then worst = #got end
      local a = {}
      for i, line in ipairs(got) do a[i] = line.attempt end
      attempts[#attempts + 1] = table.concat(a, ",")
    end
    return worst, total / n, attempts
  end
  -- request_var given, but the configuration does not set the variable: access() fails closed, naming it (that
  -- gateway's error log is checked here and then removed, so that the scan of Lua errors below passes it over)
  local unset = conf_in:gsub('\n      set %$rf_request [^\n]*', '', 1)
  assert(unset ~= conf_in, "the example configuration sets $rf_request")
  local unset_port, unset_dir = gateway("no-request-var", lock_path, up_ports[1], up_ports[2], unset)
  local s_unset = curl(unset_port, "/items/u")
  os.execute("sleep 0.2")
  check(s_unset == 500 and read(unset_dir .. "/error.log"):find("retryfreeze.gateway: $rf_request must be set to "
    .. "\"$http_idempotency_key\\n$http_x_envoy_attempt_count$http_x_envoy_expected_rq_timeout_ms\" "
    .. "(opts.request_var), got nil", 1, true) ~= nil, "a request_var the configuration does not set answers 500 and "
    .. "its error names the variable and the value it must hold (" .. tostring(s_unset) .. ")")
  os.remove(unset_dir .. "/error.log")
  local plain_front = chain("plain", dir .. "/plain.lock.json")
  local _, plain_avg = per_request(plain_front, 2)
  print(("  without propagation: %.1f upstream requests per client request"):format(plain_avg))
  check(plain_avg == 27, "three gateways without propagation send 27 upstream requests per client request (" ..
    plain_avg .. ")")
  local prop_front = chain("prop", lock_path)
  local worst, _, attempts = per_request(prop_front, 3)
  print(("  with propagation: at most %d upstream requests per client request"):format(worst))
  check(worst >= 1 and worst <= 3, "with propagation, at most 3 (" .. worst .. ")")
  check(table.concat(attempts, " ") == "1,2,3 1,2,3 1,2,3", "each carried its attempt number, 1, 2, 3, to the "
    .. "upstream (" .. table.concat(attempts, " ") .. ")")
end)
check(ok_chain, "the chains ran" .. (ok_chain and "" or (": " .. tostring(chain_err))))

-- A lock with a route the gateway cannot serve natively (a backoff) and opts.fallback: that route goes to the fallback
-- location (here one that answers with what it got: the method, the path and the request body), reaching no
-- upstream; the other routes are proxied as before, and a path no route matches still answers 404.
local ok_fallback, fallback_err = pcall(function()
  local lock = dir .. "/fallback.lock.json"
  local with_backoff = read(lock_path):gsub('{"endpoint": "POST /v1/jobs"}',
    '{"endpoint": "POST /v1/jobs", "backoff": {"baseMs": 10, "maxMs": 50, "jitter": "none"}}')
  assert(with_backoff ~= read(lock_path), "the example lock has no POST /v1/jobs route")
  write(lock, with_backoff)
  local fallback_conf = conf_in:gsub('peers = {', 'fallback = "@rf_fallback", peers = {', 1):gsub(
    "\n    location @rf_stopped", [[

    location @rf_fallback {
      content_by_lua_block {
        ngx.req.read_body()
        ngx.status = 200
        ngx.print("fallback ", ngx.req.get_method(), " ", ngx.var.uri, " ", ngx.req.get_body_data() or "")
      }
    }
    location @rf_stopped]], 1)
  assert(fallback_conf:find("@rf_fallback {", 1, true) and fallback_conf:find('fallback = "@rf_fallback"', 1, true),
    "the example configuration changed: the fallback variant no longer applies")
  local port = gateway("gw-fallback", lock, up_ports[1], up_ports[2], fallback_conf)
  local mark = #seen()
  local status, _, body = curl(port, "/v1/jobs", "-X POST -d x=42 -H 'Idempotency-Key: k-fb'")
  check(status == 200 and body == "fallback POST /v1/jobs x=42", "a route that is not native goes to the fallback "
    .. "location with its method, path and body (" .. tostring(status) .. " " .. body .. ")")
  local s_items = curl(port, "/items/fb")
  local s_none = curl(port, "/nowhere")
  local got = since(mark, 1)
  check(s_items == 200 and s_none == 404 and #got == 1 and got[1].uri == "/items/fb", "beside it a native route is "
    .. "proxied and a path no route matches answers 404; only the native one reached an upstream (" ..
    tostring(s_items) .. ", " .. tostring(s_none) .. ", " .. #got .. " upstream requests)")
end)
check(ok_fallback, "the fallback checks ran" .. (ok_fallback and "" or (": " .. tostring(fallback_err))))

-- The retry budget in a lua_shared_dict: one for both workers. The gateway listens with reuseport (each new connection
-- to a worker by its source port) and names the worker that answered (every location: a stopped request's too); the
-- upstream tries of n always-503 requests are what the engine allows one budget of the lock on the same sequence
-- (core.step with one rf.retry_budget).
local core = require "retryfreeze.core"
local ok_budget, budget_err = pcall(function()
  local shared_conf = conf_in:gsub("\nhttp {\n", "\nhttp {\n  lua_shared_dict rf_budget 1m;\n", 1)
    :gsub('init_worker%(%)', 'init_worker{ shared_dict = "rf_budget" }', 1)
    :gsub("listen 127%.0%.0%.1:@PORT@;",
      "listen 127.0.0.1:@PORT@ reuseport;\n    add_header X-RF-Worker $pid always;", 1)
    -- what a stranger to the budget could do: put a string under one of its keys
    :gsub("\n    location / {", "\n    location = /spoil { content_by_lua_block { "
      .. "ngx.shared.rf_budget:set(ngx.var.arg_key, 'spoiled') ngx.say('spoiled') } }%0", 1)
  assert(shared_conf:find("rf_budget 1m", 1, true) and shared_conf:find("reuseport", 1, true)
    and shared_conf:find("X-RF-Worker", 1, true) and shared_conf:find('shared_dict = "rf_budget"', 1, true)
    and shared_conf:find("location = /spoil", 1, true),
    "the example configuration changed: the shared-dict variant no longer applies")
  -- tries one budget allows n always-503 requests of lock (every try fails with a 503)
  local function engine_tries(lock, n)
    local p = assert(rf.load(lock))
    local budget = rf.retry_budget(p)
    local tries = 0
    for i = 1, n do
      local step = core.step(p, { method = "GET", path = "/fail" }, { rng = rf.rng(i), retry_budget = budget }, 0)
      local reason
      for now = 1, 100 do
        local timeout_ms, why = step:begin(now)
        if not timeout_ms then reason = why break end
        tries = tries + 1
        local retry, x = step:after({ status = 503 }, now, 784111777000)
        if not retry then reason = x break end
      end
      step:finish(reason, 200, 784111777000)
    end
    budget:close()
    return tries
  end
  for _, case in ipairs({
    { name = "token bucket", n = 20, budget = '"retryBudget": {"maxTokens": 10, "tokenRatio": 0.1}' },
    { name = "ratio", n = 40, budget = '"retryBudget": {"retryRatio": 0, "minRetriesPerSecond": 1, "ttlMs": 60000}' },
  }) do
    local tag = case.name:gsub(" ", "-")
    local lock = dir .. "/" .. tag .. ".lock.json"
    write(lock, (read(lock_path):gsub('"retryBudget": {[^}]*}', case.budget)))
    local port, gw_d = gateway("budget-" .. tag, lock, up_ports[1], up_ports[2], shared_conf)
    local mark = #seen()
    -- at least case.n requests, and more until each worker served a third of them (which one serves a connection
    -- is the kernel's choice): the engine's count depends only on how many there were
    local served, n = {}, 0
    local function least()
      local counts = {}
      for _, c in pairs(served) do counts[#counts + 1] = c end
      return #counts < 2 and 0 or math.min(counts[1], counts[2]), #counts
    end
    while n < 400 and (n < case.n or least() < math.floor(case.n / 3)) do
      local _, headers = curl(port, "/fail")
      n = n + 1
      local w = headers["x-rf-worker"] or "?"
      served[w] = (served[w] or 0) + 1
    end
    local fewest, n_workers = least()
    local want = engine_tries(lock, n)
    local got = #since(mark, want)
    check(n_workers == 2 and fewest >= math.floor(case.n / 3), ("%s: both workers served the requests (%d workers, the "
      .. "fewer served %d of %d)"):format(case.name, n_workers, fewest, n))
    check(got == want, ("%s: %d always-503 requests through two workers made %d upstream tries, what one budget "
      .. "allows (%d)"):format(case.name, n, got, want))
    if case.name == "token bucket" then
      -- A key of the budget's spoiled: each worker's decisions fall back to its own budget, and it says so once.
      local key = "rf:budget:" .. assert(rf.load(lock)).digest .. ":tokens"
      curl(port, "/spoil?key=" .. key)
      for _ = 1, 8 do curl(port, "/fail") end
      local said = 0
      for w in (read(gw_d .. "/error.log")):gmatch("[^\n]+") do
        said = said + (w:find("retryfreeze: retry budget in lua_shared_dict rf_budget falls back to the worker's own "
          .. "budget: the dict refused to change " .. key .. ": not a number (a key under rf:budget: is the "
          .. "budget's own: nothing else may set it) (said once per worker for this kind of failure)", 1, true)
          and 1 or 0)
      end
      check(said >= 1 and said <= 2, ("token bucket: a budget key spoiled under the workers: the fall back is said "
        .. "once per worker that decided (%d lines, 1 or 2 workers)"):format(said))
    end
  end
end)
check(ok_budget, "the shared-dict budget checks ran" .. (ok_budget and "" or (": " .. tostring(budget_err))))

-- A lock with a route that asks for a wait: nginx does not start, naming the route and why. (`nginx -t` does not run
-- init_by_lua: lua-nginx-module skips it in test mode, so it passes; docs/embedding.md says so.)
do
  local d = dir .. "/refused"
  os.execute("mkdir -p " .. q(d) .. " && chmod 0755 " .. q(d))
  local conf = conf_in:gsub("@(%u[%u%d_]*)@", { DIR = d, SRC = src, CPATH = build .. "/lib/lua/luajit",
    LOCK = src .. "/examples/nginx/proxy.lock.json", LEDGER = d .. "/ledger.jsonl", UPSTREAM_PORT = "1",
    UPSTREAM2_PORT = "2", PORT = tostring(pick_port()) })
  write(d .. "/nginx.conf", conf)
  local out = sh("timeout 10 nginx -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
  check(out:find("rc=1", 1, true) and out:find("cannot serve these routes natively", 1, true)
    and out:find("GET /items/*: backoff", 1, true), "nginx does not start with a lock whose routes ask for a "
    .. "backoff: its error names the route and why")
  if not out:find("GET /items/*: backoff", 1, true) then print(out) end
  local bad = conf_in:gsub("@(%u[%u%d_]*)@", { DIR = d, SRC = src, CPATH = build .. "/lib/lua/luajit",
    LOCK = d .. "/missing.lock.json", LEDGER = d .. "/ledger.jsonl", UPSTREAM_PORT = "1", UPSTREAM2_PORT = "2",
    PORT = tostring(pick_port()) })
  write(d .. "/nginx.conf", bad)
  out = sh("timeout 10 nginx -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
  check(out:find("rc=1", 1, true) and out:find("missing.lock.json", 1, true), "nor with a lock it cannot read, "
    .. "whose error it prints")
  write(d .. "/nginx.conf", (conf:gsub('request_var = "rf_request"', 'request_var = "$rf_request"', 1)))
  out = sh("timeout 10 nginx -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
  check(out:find("rc=1", 1, true) and out:find("request_var must be the name of an nginx variable (letters, digits, "
    .. "_), got $rf_request", 1, true), "nor with a request_var that is no variable's name")
  -- propagation headers other than the ones the configuration sends
  write(d .. "/other-headers.lock.json", (read(lock_path):gsub('"propagation": {}',
    '"propagation": {"attemptHeader": "x-my-attempt"}')))
  local other = conf_in:gsub("@(%u[%u%d_]*)@", { DIR = d, SRC = src, CPATH = build .. "/lib/lua/luajit",
    LOCK = d .. "/other-headers.lock.json", LEDGER = d .. "/ledger.jsonl", UPSTREAM_PORT = "1",
    UPSTREAM2_PORT = "2", PORT = tostring(pick_port()) })
  write(d .. "/nginx.conf", other)
  out = sh("timeout 10 nginx -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
  check(out:find("rc=1", 1, true) and out:find("GET /echo: the route's propagation sends x-my-attempt and "
    .. "x-envoy-expected-rq-timeout-ms, but the gateway sends x-envoy-attempt-count", 1, true),
    "nor with a lock whose propagation headers are not the ones the configuration sends")
  -- The lean form: a lock with propagation, then one with a route that asks for a wait, then a fallback
  local lean_in = FORMS[2].conf
  local function lean_conf(lock, extra)
    return (lean_in:gsub('"@LEDGER@", lean = true,', '"@LEDGER@", lean = true,' .. (extra or ""), 1):gsub("@(%u[%u%d_]*)@", { DIR = d,
      SRC = src, CPATH = build .. "/lib/lua/luajit", LOCK = lock, LEDGER = d .. "/ledger.jsonl", UPSTREAM_PORT = "1",
      UPSTREAM2_PORT = "2", PORT = tostring(pick_port()) }))
  end
  write(d .. "/nginx.conf", lean_conf(lock_path))
  out = sh("timeout 10 nginx -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
  check(out:find("rc=1", 1, true) and out:find("the lean gateway (balancer and log phases) cannot serve these "
    .. "routes", 1, true) and out:find("GET /echo: propagation: a caller's headers are read, and the overloaded header told",
    1, true) and select(2, out:gsub(": propagation: ", "")) == 4, "the lean form does not start with a lock whose "
    .. "routes have propagation: its error names each of the 4 routes and why")
  if not out:find("GET /echo: propagation", 1, true) then print(out) end
  write(d .. "/nginx.conf", lean_conf(src .. "/examples/nginx/proxy.lock.json"))
  out = sh("timeout 10 nginx -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
  check(out:find("rc=1", 1, true) and out:find("the lean gateway (balancer and log phases) cannot serve", 1, true)
    and out:find("GET /items/*: backoff", 1, true), "nor with a lock whose routes ask for a backoff")
  write(d .. "/nginx.conf", lean_conf(FORMS[2].lock, ' fallback = "@rf_stopped",'))
  out = sh("timeout 10 nginx -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
  check(out:find("rc=1", 1, true) and out:find("lean and fallback exclude each other", 1, true),
    "nor with a fallback, which only an access phase could reach")
  -- The nginx module: `nginx -t` loads the lock and checks it, so each refusal is there before a start.
  if module then
    local function native_t(lock, edit)
      local text = native_in:gsub("@(%u[%u%d_]*)@", { DIR = d, MODULE = module, LOCK = lock,
        LEDGER = d .. "/ledger.jsonl", UPSTREAM_PORT = "1", UPSTREAM2_PORT = "2", PORT = tostring(pick_port()) })
      if edit then
        local edited = edit(text)
        assert(edited ~= text, "the module's example configuration changed: a variant no longer applies")
        text = edited
      end
      write(d .. "/nginx.conf", text)
      return sh("timeout 10 nginx -t -p " .. q(d .. "/") .. " -c nginx.conf 2>&1; echo rc=$?")
    end
    out = native_t(FORMS[2].lock)
    check(out:find("rc=0", 1, true) and out:find("test is successful", 1, true), "the module's example passes "
      .. "`nginx -t` with the lean lock")
    if not out:find("rc=0", 1, true) then print(out) end
    out = native_t(lock_path)
    check(out:find("rc=1", 1, true) and select(2, out:gsub("the nginx module cannot serve [^\n]-: propagation: ",
      "")) == 4 and out:find("the nginx module cannot serve GET /echo: propagation: a caller's headers are read, and "
      .. "the overloaded header told", 1, true), "`nginx -t` refuses the module a lock whose routes have propagation, each of "
      .. "the 4 routes named with why")
    out = native_t(src .. "/examples/nginx/proxy.lock.json")
    check(out:find("rc=1", 1, true) and out:find("cannot serve GET /items/*: backoff: the retry after attempt 1 "
      .. "waits up to", 1, true), "and a lock whose routes ask for a backoff")
    out = native_t(d .. "/missing.lock.json")
    check(out:find("rc=1", 1, true) and out:find("retryfreeze_lock: ", 1, true) and out:find("missing.lock.json",
      1, true), "and a lock it cannot read, naming it")
    write(d .. "/shared.lock.json", (read(FORMS[2].lock):gsub('"retryBudget": {', '"retryBudget": {"shared": '
      .. '{"name": "fleet"}, ', 1)))
    out = native_t(d .. "/shared.lock.json")
    check(out:find("rc=1", 1, true) and out:find("retryBudget.shared names a budget a fleet shares", 1, true),
      "and a lock whose retry budget a fleet shares (the module has no Redis store)")
    if not out:find("retryBudget.shared names", 1, true) then print(out) end
    -- a backup server: after `retryfreeze;` nginx refuses the parameter itself, before it the module refuses it
    out = native_t(FORMS[2].lock, function(text)
      return (text:gsub("(server 127%.0%.0%.1:2;)", "%1\n    server 127.0.0.1:3 backup;", 1))
    end)
    check(out:find("rc=1", 1, true) and out:find('balancing method does not support parameter "backup"', 1, true),
      "and an upstream block with a backup server after `retryfreeze;`")
    out = native_t(FORMS[2].lock, function(text)
      return (text:gsub("\n    retryfreeze;", "", 1):gsub("(server 127%.0%.0%.1:2;)",
        "%1\n    server 127.0.0.1:3 backup;\n    retryfreeze;", 1))
    end)
    check(out:find("rc=1", 1, true) and out:find('retryfreeze: upstream "rf_upstream" has a backup server', 1, true),
      "and one with a backup server before it")
    -- max_conns, which the module does not count: refused by nginx after `retryfreeze;`, by the module before it
    out = native_t(FORMS[2].lock, function(text)
      return (text:gsub("(server 127%.0%.0%.1:2);", "%1 max_conns=5;", 1))
    end)
    check(out:find("rc=1", 1, true) and out:find('balancing method does not support parameter "max_conns=5"', 1, true),
      "and a server with max_conns after `retryfreeze;`")
    out = native_t(FORMS[2].lock, function(text)
      return (text:gsub("\n    retryfreeze;", "", 1):gsub("(server 127%.0%.0%.1:2);", "%1 max_conns=5;\n    retryfreeze;", 1))
    end)
    check(out:find("rc=1", 1, true) and out:find('upstream "rf_upstream" has a server with max_conns', 1, true),
      "and one before it")
    -- each argument of retryfreeze_ledger read as what it names: a bad value or an unknown name refused
    for _, case in ipairs({ { "flush_ms=0", "flush_ms must be an integer from 1 to 60000, got \"flush_ms=0\"" },
                            { "flush_ms=60001", "flush_ms must be an integer from 1 to 60000, got \"flush_ms=60001\"" },
                            { "hold=5", "unknown argument \"hold=5\" (hold_bytes=N or flush_ms=N)" },
                            { "hold_bytes=0 flush_ms=1", nil } }) do
      out = native_t(FORMS[2].lock, function(text)
        return (text:gsub("(retryfreeze_ledger [^;]*);", "%1 " .. case[1] .. ";", 1))
      end)
      if case[2] then
        check(out:find("rc=1", 1, true) and out:find("retryfreeze_ledger: " .. case[2], 1, true), "and retryfreeze_ledger "
          .. case[1] .. ", naming it")
      else
        check(out:find("rc=0", 1, true), "retryfreeze_ledger " .. case[1] .. " is accepted")
      end
    end
    -- a lock's error names the file, the JSON path and the rule
    write(d .. "/bad.lock.json", (read(FORMS[2].lock):gsub('"maxAttempts": 3', '"maxAttempts": "three"', 1)))
    out = native_t(d .. "/bad.lock.json")
    check(out:find("rc=1", 1, true) and out:find("retryfreeze_lock: " .. d .. "/bad.lock.json: $.defaults.maxAttempts: "
      .. "must be an integer", 1, true), "and a bad lock, its error naming the file, the JSON path and the rule")
    if not out:find("$.defaults.maxAttempts", 1, true) then print(out) end
    -- a balancing method after retryfreeze replaces it: the block would run without the engine
    for _, method in ipairs({ "least_conn;", "hash $request_uri;" }) do
      out = native_t(FORMS[2].lock, function(text)
        return (text:gsub("\n    retryfreeze;", "\n    retryfreeze;\n    " .. method, 1))
      end)
      check(out:find("rc=1", 1, true) and out:find('retryfreeze: upstream "rf_upstream" (retryfreeze; on line ', 1, true)
        and out:find("has another balancing method after retryfreeze;, which replaced it", 1, true), "and " .. method
        .. " after retryfreeze;")
    end
    -- retryfreeze_stopped beside another content handler, in either order; retryfreeze twice
    for _, edit in ipairs({ { "location @rf_stopped { retryfreeze_stopped; }",
                              "location @rf_stopped { retryfreeze_stopped; proxy_pass http://rf_upstream; }" },
                            { "location @rf_stopped { retryfreeze_stopped; }",
                              "location @rf_stopped { proxy_pass http://rf_upstream; retryfreeze_stopped; }" } }) do
      out = native_t(FORMS[2].lock, function(text) return (text:gsub(edit[1]:gsub("%p", "%%%0"), edit[2], 1)) end)
      check(out:find("rc=1", 1, true) and out:find("is in a location with another content handler", 1, true),
        "and " .. edit[2])
    end
    out = native_t(FORMS[2].lock, function(text) return (text:gsub("\n    retryfreeze;", "%0%0", 1)) end)
    check(out:find("rc=1", 1, true) and out:find('"retryfreeze" directive is duplicate', 1, true),
      "and retryfreeze; twice in a block")
    -- keepalive (or another balancing method) before retryfreeze would be dropped
    out = native_t(FORMS[2].lock, function(text)
      return (text:gsub("\n    retryfreeze;", "", 1):gsub("\n    keepalive 64;", "\n    keepalive 64;\n    retryfreeze;", 1))
    end)
    check(out:find("rc=1", 1, true) and out:find('"retryfreeze" directive must come first in the upstream block', 1,
      true), "and keepalive before retryfreeze;")
    out = native_t(FORMS[2].lock, function(text) return (text:gsub("\n  retryfreeze_lock [^\n]*", "", 1)) end)
    check(out:find("rc=1", 1, true) and out:find('retryfreeze: upstream "rf_upstream" is governed by retryfreeze, but '
      .. "http{} has no retryfreeze_lock", 1, true), "and `retryfreeze;` with no retryfreeze_lock")
    out = native_t(FORMS[2].lock, function(text)
      return (text:gsub("(retryfreeze_ledger [^;]*);", "%1 hold_bytes=999999999;", 1))
    end)
    check(out:find("rc=1", 1, true) and out:find("retryfreeze_ledger: hold_bytes must be an integer from 0 to "
      .. "262144, got \"hold_bytes=999999999\"", 1, true), "and a ledger argument out of range, naming it")
  end
end

-- The Lua gateway (both forms) governs the request the upstream gets: after a rewrite its rewritten path; a subrequest
-- (mirror) to a governed upstream is refused, its error naming it (the full form runs no access phase for it, the
-- lean form no log phase: it would go ungoverned, or lose its line); and a request whose upstream's tries all failed
-- and whose error_page sends it to a named location, proxied to an upstream without the gateway or governed again,
-- keeps its first upstream's ledger line (nginx clears ngx.ctx there), with that upstream's own tries.
local function lua_errors_in(text, but)
  local n = 0
  for line in text:gmatch("[^\n]+") do
    if (line:find("lua entry thread aborted", 1, true) or line:find("runtime error", 1, true)
      or line:find("_by_lua", 1, true) and line:find("%[error%]")) and not (but and line:find(but, 1, true)) then
      n = n + 1
    end
  end
  return n
end
for i = 1, 2 do
  local form = FORMS[i]
  local ok_lua, lua_err = pcall(function()
    local function fcheck(ok, message) check(ok, form.name .. " form: " .. message) end
    local ends = form.name == "full" and [[

      header_filter_by_lua_block { retryfreeze_gateway.header_filter() }
      log_by_lua_block { retryfreeze_gateway.log() }]] or [[

      log_by_lua_block { retryfreeze_gateway.log() }]]
    local govern = form.name == "full" and [[

      set $rf_request "$http_idempotency_key\n$http_x_envoy_attempt_count$http_x_envoy_expected_rq_timeout_ms";
      access_by_lua_block { retryfreeze_gateway.access() }]] .. ends or ends
    local conf = form.conf:gsub("\n  server {", ("\n  upstream rf_plain {\n    server 127.0.0.1:%d;\n  }\n  server {")
      :format(up_ports[1]), 1):gsub("\n    location / {", ([[

    location = /norule/rw {%s
      rewrite ^ /fail break;
      proxy_pass http://rf_upstream;
      proxy_next_upstream error timeout http_503;
      error_page 500 = @rf_stopped;
    }
    location = /items/m {%s
      mirror /items/mirrored;
      proxy_pass http://rf_upstream;
      error_page 500 = @rf_stopped;
    }
    location = /items/fb {%s
      proxy_pass http://rf_upstream;
      proxy_next_upstream error timeout;
      error_page 500 = @rf_stopped;
      error_page 502 504 = @rf_plain;
    }
    location @rf_plain {%s
      proxy_pass http://rf_plain;
    }
    location = /items/fb2 {%s
      proxy_pass http://rf_upstream;
      proxy_next_upstream error timeout;
      error_page 500 = @rf_stopped;
      error_page 502 504 = @rf_again;
    }
    location @rf_again {%s
      proxy_pass http://rf_upstream;
      proxy_next_upstream error timeout;
    }
    location / {]]):format(govern, govern, govern, ends, govern, govern), 1)
    assert(conf:find("rf_plain {", 1, true) and conf:find("@rf_again {", 1, true), "the " .. form.name
      .. " form's example changed")
    local function ledger_lines(d)
      os.execute("sleep 0.5") -- the held ledger lines are written within ledger_flush_ms (200 ms)
      local lines = {}
      for rec in rf.ledger.read(d .. "/ledger.jsonl") do
        local classes = {}
        for k, t in ipairs(rec.tries) do classes[k] = t.class end
        lines[#lines + 1] = rec.method .. " " .. rec.path .. " " .. rec.reason .. " " .. table.concat(classes, ",")
      end
      table.sort(lines)
      return table.concat(lines, " | ")
    end
    -- a rewrite, and a mirror into the governed location /
    local port, d = gateway(form.name .. "-paths", form.lock, up_ports[1], up_ports[2], conf)
    local mark = #seen()
    local s_rw, _, b_rw = curl(port, "/norule/rw")
    local s_m = curl(port, "/items/m")
    local uris = {}
    for k, line in ipairs(since(mark, 4)) do uris[k] = line.uri end
    table.sort(uris)
    fcheck(s_rw == 503 and b_rw == "down\n" and s_m == 200, "a request rewritten to /fail answers 503 with the "
      .. "upstream's body, the mirrored one 200 (" .. tostring(s_rw) .. " " .. b_rw:gsub("\n", "\\n") .. ", "
      .. tostring(s_m) .. ")")
    fcheck(table.concat(uris, " ") == "/fail /fail /fail /items/m", "the upstreams saw /fail 3 times (the lock's "
      .. "attempts for GET /fail) and /items/m, not the refused mirror (" .. table.concat(uris, " ") .. ")")
    local got = ledger_lines(d)
    fcheck(got == "GET /fail max-attempts HTTP_503,HTTP_503,HTTP_503 | GET /items/m success HTTP_200", "the ledger "
      .. "records the rewritten request as the upstream got it, GET /fail (" .. got .. ")")
    local log = read(d .. "/error.log")
    local refusal = "retryfreeze.gateway: GET /items/mirrored: a subrequest (mirror, auth_request) to a governed "
      .. "upstream: the Lua gateway does not govern subrequests"
    fcheck(log:find(refusal, 1, true) ~= nil and lua_errors_in(log, refusal) == 0, "the mirror's subrequest is "
      .. "refused, its error naming it, and no other Lua error (" .. lua_errors_in(log, refusal) .. ")")
    os.remove(d .. "/error.log") -- read here: the scan below would count the refusal
    -- both peers refuse: the first upstream's 3 tries, then error_page 502 to a named location
    local dead = pick_port()
    local dport, dd = gateway(form.name .. "-fallback", form.lock, dead, dead, conf)
    mark = #seen()
    local s_fb, _, b_fb = curl(dport, "/items/fb")
    local s_fb2 = curl(dport, "/items/fb2")
    local fb_seen = since(mark, 1)
    fcheck(s_fb == 200 and b_fb == "item\n" and #fb_seen == 1 and fb_seen[1].uri == "/items/fb" and s_fb2 == 502,
      "a request whose tries were all refused is answered by the error_page's upstream (200, " .. #fb_seen
      .. " request there), or, governed again, 502 (" .. tostring(s_fb) .. ", " .. tostring(s_fb2) .. ")")
    got = ledger_lines(dd)
    local refused3 = "max-attempts CONNECT_REFUSED,CONNECT_REFUSED,CONNECT_REFUSED"
    local want = "GET /items/fb " .. refused3 .. " | GET /items/fb2 " .. refused3 .. " | GET /items/fb2 " .. refused3
    fcheck(got == want, "each governed upstream of a request that error_page sent on has its own line, its own 3 "
      .. "refused tries (" .. got .. ")")
  end)
  check(ok_lua, "the " .. form.name .. " form's request-line checks ran" .. (ok_lua and "" or (": " .. tostring(lua_err))))
end

for _, pid in ipairs(running) do os.execute("kill " .. pid .. " 2>/dev/null") end
os.execute("sleep 0.5")
local lua_errors = 0
for name in sh("ls " .. q(dir)):gmatch("%S+") do
  for line in read(dir .. "/" .. name .. "/error.log"):gmatch("[^\n]+") do
    if line:find("lua entry thread aborted", 1, true) or line:find("runtime error", 1, true)
      or line:find("_by_lua", 1, true) and line:find("%[error%]") or line:find("%[alert%]") or line:find("%[crit%]") then
      lua_errors = lua_errors + 1
      if lua_errors <= 5 then print("  " .. name .. ": " .. line) end
    end
  end
end
check(lua_errors == 0, "no nginx error log holds a Lua error (" .. lua_errors .. ")")
checks.finish(dir)
