-- The client against a server no one here wrote: nginx on a free loopback port, started by this spec with a
-- generated config in a temporary directory (pid, logs and temp paths all inside it), stopped in teardown.
-- Its locations answer 503 and 429 with Retry-After, 429 without, 404, 200, 301, 502 (a proxy_pass to a
-- closed loopback port) and 444 (nginx closes the connection unanswered); a request to a closed port
-- directly gives a transport failure (connect-refused). nginx's access log is the witness of how many
-- attempts really went out. Without nginx the specs are pending (set RF_NGINX to a binary elsewhere).
local rf = require "retryfreeze"
local helper = require "spec.helper"
local servers = require "spec.support.servers"
local stall = require "spec.support.stall"

local shell_quote = helper.shell_quote

--- The text of a file, "" where there is none (a process gone from /proc, a log not written yet).
local function read_file(path) return helper.try_read_file(path) or "" end

-- The lock under test: one route per nginx location, each with values the assertions can pin exactly.
-- jitter "none" makes every backoff delay equal to its cap (baseMs × multiplier^(n−1)).
local LOCK = [[
{
  "$comment": "06-nginx_spec: one route per nginx location",
  "version": 1,
  "defaults": {
    "maxAttempts": 2, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 5000,
    "retryable": [], "notRetryable": ["HTTP_4XX"],
    "backoff": {"baseMs": 40, "multiplier": 2, "maxMs": 1000, "jitter": "none"},
    "retryAfter": {"honor": true, "maxMs": 3000}
  },
  "routes": [
    {"endpoint": "GET /ok"},
    {"endpoint": "HEAD /ok"},
    {"endpoint": "GET /moved"},
    {"endpoint": "GET /idle"},
    {"endpoint": "GET /drop", "retryable": ["CONNECT_RESET"]},
    {"endpoint": "GET /unavailable", "retryable": ["HTTP_503"]},
    {"endpoint": "POST /unavailable", "retryable": ["HTTP_503"]},
    {"endpoint": "GET /throttle", "retryable": ["HTTP_429"]},
    {"endpoint": "GET /throttle-bare", "retryable": ["HTTP_429"]},
    {"endpoint": "GET /throttle-long", "retryable": ["HTTP_429"]},
    {"endpoint": "GET /throttle-twice", "retryable": ["HTTP_429"]},
    {"endpoint": "GET /many-headers"},
    {"endpoint": "GET /huge"},
    {"endpoint": "GET /trickle", "perAttemptTimeoutMs": 500, "totalBudgetMs": 800, "retryable": ["TIMEOUT"]},
    {"endpoint": "GET /missing", "retryable": ["HTTP_5XX"]},
    {"endpoint": "GET /gateway", "maxAttempts": 3, "retryable": ["HTTP_502"]},
    {"endpoint": "GET /refused"},
    {"endpoint": "GET /refused-listed", "maxAttempts": 3, "retryable": ["CONNECT_REFUSED"]}
  ]
}
]]

local nginx = servers.nginx_bin

-- 1000 response headers X-H-1 … X-H-1000.
local function many_headers()
  local h = {}
  for i = 1, 1000 do h[i] = string.format("add_header X-H-%d v%d always;", i, i) end
  return table.concat(h, " ")
end

local function nginx_conf(dir, port, dead_port)
  return (([[
worker_processes 1;
pid @DIR@/nginx.pid;
lock_file @DIR@/nginx.lock;
error_log @DIR@/error.log notice;
events { worker_connections 64; }
http {
  access_log @DIR@/access.log;
  client_body_temp_path @DIR@/client_body;
  proxy_temp_path @DIR@/proxy;
  fastcgi_temp_path @DIR@/fastcgi;
  uwsgi_temp_path @DIR@/uwsgi;
  scgi_temp_path @DIR@/scgi;
  server {
    listen 127.0.0.1:@PORT@;
    location = /ok { return 200 "ok\n"; }
    location = /unavailable { add_header Retry-After 1 always; return 503; }
    location = /throttle { add_header Retry-After 1 always; return 429; }
    location = /throttle-bare { return 429; }
    location = /throttle-long { add_header Retry-After 30 always; return 429; }
    location = /throttle-twice { add_header Retry-After 1 always; add_header Retry-After 2 always; return 429; }
    location = /missing { return 404; }
    location = /gateway { proxy_pass http://127.0.0.1:@DEAD@; proxy_connect_timeout 1s; }
    location = /moved { return 301 /ok; }
    location = /drop { return 444; }
    location = /idle { keepalive_timeout 200ms; return 200 "idle\n"; }
    location = /many-headers { @HEADERS@ return 200 "many\n"; }
    location = /huge { alias @DIR@/huge.bin; default_type application/octet-stream; }
    location = /trickle { alias @DIR@/huge.bin; limit_rate 2k; default_type application/octet-stream; }
  }
}
]]):gsub("@HEADERS@", many_headers()):gsub("@DIR@", dir):gsub("@PORT@", tostring(port))
    :gsub("@DEAD@", tostring(dead_port)))
end

--- Starts nginx on a random loopback port other than dead_port, with a 100 MB body for /huge and /trickle (a
--- sparse file, so it costs no disk).
-- @return {dir=, port=, url=, conf=, pid=, stop=function} or nil, message
local function start_nginx(dead_port)
  return servers.nginx_with(1, function(ports, dir)
    os.execute("truncate -s 100M " .. shell_quote(dir .. "/huge.bin") .. " && chmod 644 " .. shell_quote(dir .. "/huge.bin"))
    return nginx_conf(dir, ports[1], dead_port)
  end, { tag = "nginx", avoid = dead_port })
end

if not nginx then
  describe("rf.client against nginx", function()
    pending("nginx not installed: no nginx on PATH, in /usr/sbin or /usr/local/sbin, and no RF_NGINX; "
      .. "install nginx-light (bash .ci/deps) to run these specs")
  end)
  return
end

describe("rf.client against nginx", function()
  local policy, ng, dead_port, fx, client, ledger_path
  local access_lines

  setup(function()
    policy = assert(rf.load_string(LOCK, "06-nginx.lock"))
    dead_port = servers.closed_port()
    ng = assert(start_nginx(dead_port))
    fx = servers.ledgered_client(policy, ng.url, { rng_seed = 7 })
    client, ledger_path = fx.client, fx.ledger_path
    -- Readiness: a 200 means a worker is serving (the master wrote its pid file before starting it).
    local r = client:request{ method = "GET", path = "/ok" }
    assert(r.ok, "nginx did not answer /ok: " .. tostring(r.reason) .. " " .. read_file(ng.dir .. "/error.log"))
    assert(ng.pid, "nginx wrote no pid file")
  end)

  -- Lines in nginx's access log (matching `needle` if given), sentinels excluded. nginx writes a request's
  -- line just after sending its response, so the client may read the response first; its one worker
  -- handles requests in turn, so once it has answered a later (sentinel) request every earlier line is in.
  access_lines = function(needle)
    assert.is_true(client:request{ method = "GET", path = "/ok", query = "sentinel=1" }.ok)
    local n = 0
    for line in read_file(ng.dir .. "/access.log"):gmatch("[^\n]*\n") do
      if not line:find("sentinel", 1, true) and (not needle or line:find(needle, 1, true)) then n = n + 1 end
    end
    return n
  end

  teardown(function()
    if fx then fx.stop() end
    if ng then ng.stop() end
  end)

  it("gets a 200 from nginx: success on the first attempt", function()
    local r = client:request{ method = "GET", path = "/ok" }
    assert.same({ true, 200, "success", "success", 1, "GET /ok" }, { r.ok, r.status, r.outcome, r.reason, r.attempts, r.route })
    assert.equal("ok\n", r.body)
    assert.matches("^nginx", r.headers.server)
    assert.equal("HTTP_200", r.tries[1].class)
    assert.equal("ok", r.tries[1].transport)
    assert.equal(2000, r.tries[1].timeout_ms)
  end)

  it("sends HEAD without reading a body", function()
    local r = client:request{ method = "HEAD", path = "/ok" }
    assert.same({ true, 200, "success", 1, "" }, { r.ok, r.status, r.outcome, r.attempts, r.body })
    assert.equal("3", r.headers["content-length"])
  end)

  it("takes a response with 1000 headers", function()
    local r = client:request{ method = "GET", path = "/many-headers" }
    assert.same({ true, 200, "many\n" }, { r.ok, r.status, r.body })
    assert.equal("v1", r.headers["x-h-1"])
    assert.equal("v1000", r.headers["x-h-1000"])
  end)

  it("stops a 100 MB body at max_body_bytes with a clear error, without holding it in memory", function()
    local small = rf.client{ policy = policy, base_url = ng.url, max_body_bytes = 1024 * 1024 }
    local before = collectgarbage("count")
    local r = small:request{ method = "GET", path = "/huge" }
    small:close()
    assert.same({ false, "terminal", "UNKNOWN", "other" }, { r.ok, r.outcome, r.tries[1].class, r.tries[1].transport })
    assert.equal("response body over max_body_bytes (1048576)", r.tries[1].error)
    assert.is_true(#r.body <= 1024 * 1024)
    assert.is_true(collectgarbage("count") - before < 4 * 1024, "Lua memory grew by more than 4 MiB")
  end)

  it("ends a trickling (slow-loris) response at the per-try timeout and never outlives the deadline", function()
    local r, stalled = stall.across(function() return client:request{ method = "GET", path = "/trickle" } end)
    assert.is_false(r.ok)
    assert.equal("TIMEOUT", r.tries[1].class)
    assert.equal(500, r.tries[1].timeout_ms)
    assert.is_true(r.elapsed_ms <= 800 + 50 + stalled, "elapsed " .. r.elapsed_ms)
  end)

  it("uses the first of two Retry-After headers (docs/reasons.md)", function()
    local r = client:request{ method = "GET", path = "/throttle-twice" }
    assert.same({ "exhausted", 2 }, { r.outcome, r.attempts })
    assert.equal("1", r.tries[1].retry_after)
    assert.equal(1000, r.tries[2].delay_ms)
  end)

  it("returns nginx's 301 as a success without following it (follow_redirects defaults to false)", function()
    local r = client:request{ method = "GET", path = "/moved" }
    assert.same({ true, 301, "success", "success", 1 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.equal(ng.url .. "/ok", r.headers.location)
    assert.equal("ok", r.tries[1].transport)
  end)

  -- A regression test: the client's guard against libcurl's hidden resend used to abort the redirect's send.
  -- Each hop is a try of its own and counts in attempts (attempts = the requests nginx saw).
  it("follows nginx's 301 when follow_redirects = true", function()
    local follower = rf.client{ policy = policy, base_url = ng.url, follow_redirects = true, rng_seed = 7 }
    local r = follower:request{ method = "GET", path = "/moved" }
    follower:close()
    assert.same({ true, 200, "success", 2, "ok\n" }, { r.ok, r.status, r.outcome, r.attempts, r.body })
    assert.same({ "HTTP_301", "ok", "redirect" }, { r.tries[1].class, r.tries[1].transport, r.tries[1].reason })
    assert.same({ "HTTP_200", "ok", "success" }, { r.tries[2].class, r.tries[2].transport, r.tries[2].reason })
    assert.is_nil(r.headers.location) -- the headers are the final response's
    assert.equal("GET /moved", r.route)
  end)

  it("classifies nginx closing the connection unanswered (return 444) as CONNECT_RESET and retries it", function()
    local before = access_lines("GET /drop ")
    local r = client:request{ method = "GET", path = "/drop" }
    assert.same({ false, 0, "exhausted", "max-attempts", 2 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    for i = 1, 2 do
      assert.equal("CONNECT_RESET", r.tries[i].class)
      -- got-nothing on a fresh connection; connect-reset on a reused one (libcurl's own resend blocked)
      assert.is_truthy(({ ["got-nothing"] = true, ["connect-reset"] = true })[r.tries[i].transport], r.tries[i].transport)
    end
    assert.equal(40, r.tries[2].delay_ms)
    -- nginx received exactly the two attempts: libcurl's own silent resend never ran.
    assert.equal(before + 2, access_lines("GET /drop "))
    assert.is_true(client:request{ method = "GET", path = "/ok" }.ok) -- the client recovers
  end)

  it("fails an attempt whose body exceeds max_body_bytes (nginx's 3-byte body, a 2-byte cap)", function()
    local small = rf.client{ policy = policy, base_url = ng.url, max_body_bytes = 2, rng_seed = 7 }
    local r = small:request{ method = "GET", path = "/ok" }
    small:close()
    assert.same({ false, "terminal", "status-not-retryable", 1 }, { r.ok, r.outcome, r.reason, r.attempts })
    assert.same({ "UNKNOWN", "other" }, { r.tries[1].class, r.tries[1].transport })
    assert.matches("max_body_bytes", r.tries[1].error, 1, true)
  end)

  it("opens a new connection, without a failed attempt, after nginx closed the idle keep-alive one", function()
    local r = client:request{ method = "GET", path = "/idle" }
    assert.same({ true, 1 }, { r.ok, r.attempts })
    -- The scenario itself is idle time: nginx closes the connection after 200 ms without a request.
    os.execute("sleep 0.5")
    r = client:request{ method = "GET", path = "/ok" }
    assert.same({ true, 200, 1, "ok" }, { r.ok, r.status, r.attempts, r.tries[1].transport })
  end)

  it("honours nginx's Retry-After: 1 on a 503 and stops at maxAttempts", function()
    local r = client:request{ method = "GET", path = "/unavailable" }
    assert.same({ false, 503, "exhausted", "max-attempts", 2 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.equal(2, #r.tries)
    assert.same({ "HTTP_503", 503, "pinned-status", "1", 0 },
      { r.tries[1].class, r.tries[1].status, r.tries[1].reason, r.tries[1].retry_after, r.tries[1].delay_ms })
    assert.same({ "HTTP_503", 503, "max-attempts", "1", 1000 },
      { r.tries[2].class, r.tries[2].status, r.tries[2].reason, r.tries[2].retry_after, r.tries[2].delay_ms })
    assert.equal("1", r.headers["retry-after"])
    assert.is_true(r.elapsed_ms >= 1000, "elapsed " .. r.elapsed_ms)
    -- The retry's per-try timeout is what is left of the 5000 ms budget, capped at 2000.
    assert.equal(2000, r.tries[2].timeout_ms)
  end)

  it("sends a POST to a 503 once without an idempotency key, and retries it with one", function()
    local r = client:request{ method = "POST", path = "/unavailable", body = "{}" }
    assert.same({ false, 503, "refused", "mutating-without-idempotency", 1 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    r = client:request{ method = "POST", path = "/unavailable", body = "{}", idempotency_key = rf.new_key() }
    assert.same({ "exhausted", "max-attempts", 2, 1000 }, { r.outcome, r.reason, r.attempts, r.tries[2].delay_ms })
  end)

  it("honours Retry-After: 1 on a 429", function()
    local r = client:request{ method = "GET", path = "/throttle" }
    assert.same({ false, 429, "exhausted", "max-attempts", 2 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.same({ "HTTP_429", "pinned-status", "1" }, { r.tries[1].class, r.tries[1].reason, r.tries[1].retry_after })
    assert.equal(1000, r.tries[2].delay_ms)
    assert.is_true(r.elapsed_ms >= 1000, "elapsed " .. r.elapsed_ms)
  end)

  it("backs off (jitter none: baseMs) on a 429 without Retry-After", function()
    local r = client:request{ method = "GET", path = "/throttle-bare" }
    assert.same({ false, 429, "exhausted", "max-attempts", 2 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.is_nil(r.tries[1].retry_after)
    assert.is_nil(r.headers["retry-after"])
    assert.same({ "HTTP_429", "pinned-status", 40 }, { r.tries[1].class, r.tries[1].reason, r.tries[2].delay_ms })
    assert.is_true(r.elapsed_ms >= 40 and r.elapsed_ms < 1000, "elapsed " .. r.elapsed_ms)
  end)

  it("stops at once when nginx's Retry-After (30 s) exceeds retryAfter.maxMs", function()
    local r = client:request{ method = "GET", path = "/throttle-long" }
    assert.same({ false, 429, "deadline", "retry-after-exceeds-budget", 1 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.equal("30", r.tries[1].retry_after)
    assert.is_true(r.elapsed_ms < 1000, "elapsed " .. r.elapsed_ms)
  end)

  it("never retries a 404 (HTTP_4XX is notRetryable): terminal", function()
    local r = client:request{ method = "GET", path = "/missing" }
    assert.same({ false, 404, "terminal", "status-not-retryable", 1 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.same({ "HTTP_404", "ok" }, { r.tries[1].class, r.tries[1].transport })
    assert.matches("404 Not Found", r.body, 1, true)
  end)

  it("retries nginx's 502 (proxy_pass to a closed port) with exponential backoff until maxAttempts", function()
    local r = client:request{ method = "GET", path = "/gateway" }
    assert.same({ false, 502, "exhausted", "max-attempts", 3 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    for i = 1, 3 do
      assert.same({ "HTTP_502", 502, "ok" }, { r.tries[i].class, r.tries[i].status, r.tries[i].transport })
    end
    assert.same({ 0, 40, 80 }, { r.tries[1].delay_ms, r.tries[2].delay_ms, r.tries[3].delay_ms })
    assert.same({ "pinned-status", "pinned-status", "max-attempts" }, { r.tries[1].reason, r.tries[2].reason, r.tries[3].reason })
    assert.matches("Connection refused", read_file(ng.dir .. "/error.log"), 1, true)
  end)

  it("classifies a refused connection (no server at all) as CONNECT_REFUSED: not retryable unless listed", function()
    local dead = rf.client{ policy = policy, base_url = "http://127.0.0.1:" .. dead_port, rng_seed = 7 }
    local r = dead:request{ method = "GET", path = "/refused" }
    assert.same({ false, 0, "terminal", "status-not-retryable", 1 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.same({ "CONNECT_REFUSED", "connect-refused", 0 }, { r.tries[1].class, r.tries[1].transport, r.tries[1].status })
    assert.is_truthy(r.tries[1].error and r.tries[1].error ~= "")
    r = dead:request{ method = "GET", path = "/refused-listed" }
    assert.same({ false, 0, "exhausted", "max-attempts", 3 }, { r.ok, r.status, r.outcome, r.reason, r.attempts })
    assert.same({ "CONNECT_REFUSED", "CONNECT_REFUSED", "CONNECT_REFUSED" }, { r.tries[1].class, r.tries[2].class, r.tries[3].class })
    assert.same({ 0, 40, 80 }, { r.tries[1].delay_ms, r.tries[2].delay_ms, r.tries[3].delay_ms })
    dead:close()
  end)

  it("counts in nginx's access log exactly the attempts the client reports", function()
    local before = access_lines()
    local sent = 0
    for _, path in ipairs({ "/ok", "/missing", "/throttle-bare", "/gateway" }) do
      sent = sent + client:request{ method = "GET", path = path }.attempts
    end
    assert.equal(1 + 1 + 2 + 3, sent)
    assert.equal(before + sent, access_lines())
  end)

  it("writes one ledger line per logical request with nginx's statuses and Retry-After", function()
    local r = client:request{ method = "GET", path = "/unavailable" }
    local last
    local it, st = rf.ledger.read(ledger_path)
    for rec in it, st do last = rec end
    assert.is_false(st.torn)
    assert.same({ "GET /unavailable", "exhausted", "max-attempts", 2, 503, policy.digest },
      { last.route, last.outcome, last.reason, last.attempts, last.status, last.policy })
    assert.same({ "HTTP_503", 503, "1", 1000 }, { last.tries[2].class, last.tries[2].status, last.tries[2].retry_after, last.tries[2].delay_ms })
    assert.equal(r.elapsed_ms, last.elapsed_ms)
  end)
end)

-- The embedding example (examples/nginx): nginx with lua-nginx-module runs every request through rf.flow. A bad
-- lock passed `nginx -t` and started nginx, whose every request then answered 500 (`attempt to index upvalue
-- 'worker'`); started as root, its `nobody` workers could not open the ledger.
local EXAMPLE = "examples/nginx/nginx.conf.in"
local lua_module = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
local luajit_cpath = helper.build_dir .. "/lib/lua/luajit"
local missing = not nginx and "nginx" or not helper.try_read_file(lua_module) and lua_module
  or not helper.try_read_file(luajit_cpath .. "/retryfreeze/core.so") and (luajit_cpath .. "/retryfreeze/core.so")

--- The absolute path of a path relative to the project root.
local function absolute(path)
  local p = io.popen("readlink -f " .. shell_quote(path))
  local abs = p:read("l")
  p:close()
  return abs
end

--- nginx.conf.in with its placeholders filled from values (every @NAME@ must have one: a placeholder left over
--- would reach nginx as text).
local function example_conf(values)
  local conf = assert(helper.try_read_file(EXAMPLE)):gsub("@(%u[%u_]*)@", function(name)
    return assert(values[name], "no value for the placeholder @" .. name .. "@")
  end)
  return conf
end

--- The values of the placeholders for a run in dir.
local function example_values(dir, lock, port, upstream_port)
  return { DIR = dir, SRC = absolute("."), CPATH = absolute(luajit_cpath), LOCK = lock, LEDGER = dir .. "/ledger.jsonl",
    PORT = tostring(port), UPSTREAM_PORT = tostring(upstream_port) }
end

if missing then
  describe("the nginx embedding example", function()
    pending("needs " .. missing .. " (bash .ci/deps --tests installs nginx and libnginx-mod-http-lua; RF_LUA=auto "
      .. "builds the LuaJIT module)")
  end)
  return
end

describe("the nginx embedding example", function()
  local servers_dir = require("spec.support.servers")

  -- The placeholders of an nginx.conf.in (sorted) and those the table of its section of docs/embedding.md lists.
  local function placeholders(conf_path, section_title)
    local names, seen = {}, {}
    for name in assert(helper.try_read_file(conf_path)):gmatch("@(%u[%u%d_]*)@") do
      if not seen[name] then names[#names + 1], seen[name] = name, true end
    end
    table.sort(names)
    local docs = assert(helper.try_read_file("docs/embedding.md"))
    local from = assert(docs:find("\n## " .. section_title .. "\n", 1, true), "no section " .. section_title)
    local to = docs:find("\n## ", from + 1, true) or #docs
    local documented = {}
    for name in docs:sub(from, to):gmatch("\n| `@(%u[%u%d_]*)@` |") do documented[#documented + 1] = name end
    table.sort(documented)
    return names, documented
  end

  it("documents each placeholder of nginx.conf.in in docs/embedding.md", function()
    local names, documented = placeholders(EXAMPLE, "nginx with Lua")
    assert.same(names, documented)
    assert.equal(7, #names)
  end)

  it("documents each placeholder of the gateway's nginx.conf.in in docs/embedding.md", function()
    local names, documented = placeholders("examples/gateway/nginx.conf.in",
      "Gateway mode: nginx proxies, the engine governs")
    assert.same(names, documented)
    assert.same({ "CPATH", "DIR", "LEDGER", "LOCK", "PORT", "SRC", "UPSTREAM2_PORT", "UPSTREAM_PORT" }, names)
  end)

  --- A copy of the example's lock broken at $.defaults.maxAttempts, in dir; and the error rf.load gives for it.
  local function bad_lock(dir)
    local lock = dir .. "/bad.lock.json"
    local f = assert(io.open(lock, "w"))
    f:write((assert(helper.try_read_file("examples/nginx/proxy.lock.json")):gsub('"maxAttempts": 3', '"maxAttempts": 0')))
    f:close()
    local _, why = rf.load(lock)
    assert.matches("$.defaults.maxAttempts", why, 1, true) -- the lock's error names its JSON path
    return lock, why
  end

  local function write_conf(dir, lock, port, upstream_port)
    local f = assert(io.open(dir .. "/nginx.conf", "w"))
    f:write(example_conf(example_values(dir, lock, port, upstream_port)))
    f:close()
  end

  --- A command of a tool this spec runs, without the sanitized run's preload (.ci/run puts libasan in
  --- LD_PRELOAD): ps and curl hang under it.
  local function plain(cmd) return "env -u LD_PRELOAD " .. cmd end

  local function nginx_cmd(dir, args)
    return table.concat({ shell_quote(nginx), "-p", shell_quote(dir .. "/"), "-c", shell_quote(dir .. "/nginx.conf"),
      args or "" }, " ")
  end

  it("fails the start on a bad lock with the lock's error and its JSON path, and nothing listens", function()
    local dir = servers_dir.temp_dir("nginx-badlock")
    finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
    local lock, why = bad_lock(dir)
    local port = servers_dir.closed_port() -- so that a listener found there afterwards is nginx's
    write_conf(dir, lock, port, 9) -- nginx never starts: no upstream needed
    local out, err, code = helper.sh("timeout 20 " .. nginx_cmd(dir))
    assert.is_true(code ~= 0 and code ~= 124, "nginx started with a bad lock (exit " .. code .. ")")
    assert.truthy(err:find("init_by_lua error: " .. why, 1, true), "the start did not print the lock's error:\n"
      .. out .. err)
    assert.is_false(servers_dir.port_open(port))
  end)

  -- lua-nginx-module runs no Lua under `nginx -t` (nor for `nginx -s`): ngx_http_lua_init returns at once when
  -- ngx_test_config is set. So the check docs/embedding.md gives is `retryfreeze check LOCK && nginx -t …`.
  it("is checked as documented: retryfreeze check LOCK && nginx -t fails with the lock's error", function()
    local dir = servers_dir.temp_dir("nginx-check")
    finally(function() os.execute("rm -rf " .. shell_quote(dir)) end)
    local lock, why = bad_lock(dir)
    write_conf(dir, lock, servers_dir.closed_port(), 9)
    local out, err, code = helper.sh(nginx_cmd(dir, "-t"))
    assert.equal(0, code, "nginx -t now fails on a bad lock (update docs/embedding.md):\n" .. out .. err)
    out, err, code = helper.sh(shell_quote(helper.cli) .. " check " .. shell_quote(lock) .. " >/dev/null && "
      .. nginx_cmd(dir, "-t"))
    assert.equal(2, code)
    assert.equal("", out)
    assert.truthy(err:find(why, 1, true), err)
    assert.falsy(err:find("test is successful", 1, true)) -- nginx -t did not run
    -- and the example's own header says so (it said a bad lock fails `nginx -t`)
    local header = assert(helper.try_read_file(EXAMPLE)):match("^(.-)\nload_module")
    assert.falsy(header:find("fails `nginx -t`", 1, true), header)
    assert.truthy(header:find("`nginx -t` cannot see a bad lock", 1, true), header)
    assert.truthy(header:find("retryfreeze check LOCK >/dev/null && nginx -t", 1, true), header)
  end)

  -- The example's own nginx serves as its upstream too (a second server block, one worker, so that one pool serves
  -- every request): each answer's body names the upstream connection it came on ($connection), so the proxy's
  -- answers show which connection each attempt used.
  it("pools upstream connections across framings, and closes one the upstream closes or an error leaves", function()
    local dir = servers_dir.temp_dir("nginx-pool")
    -- The example's lock, with HEAD routed too.
    local lock = dir .. "/proxy.lock.json"
    local text, n = assert(helper.try_read_file("examples/nginx/proxy.lock.json"))
      :gsub('{"endpoint": "GET /items/%*"}', '%0, {"endpoint": "HEAD /items/*"}')
    assert.equal(1, n)
    local f = assert(io.open(lock, "w"))
    f:write(text)
    f:close()
    local started, err = servers_dir.start{ name = "nginx (examples/nginx, pooled)", dir = dir, ports = 2,
      launch = function(ports)
        local conf = example_conf(example_values(dir, lock, ports[1], ports[2]))
        conf = conf:gsub("worker_processes %d+;", "worker_processes 1;")
        conf = conf:gsub("\n}%s*$", "\n" .. ([[
  server {
    listen 127.0.0.1:%d;
    keepalive_requests 1000;
    location /items/cl { return 200 "$connection"; }
    location /items/empty { return 204; }
    location /items/chunked {
      content_by_lua_block { ngx.print(ngx.var.connection); ngx.flush(true); ngx.print("-chunked") }
    }
    location /items/close { keepalive_timeout 0; return 200 "$connection"; }
    location /items/stall {
      content_by_lua_block {
        ngx.header["Content-Length"] = 20
        ngx.print("0123456789"); ngx.flush(true); ngx.sleep(1.2); ngx.print("late bytes")
      }
    }
  }
}
]]):format(ports[2]))
        local cf = assert(io.open(dir .. "/nginx.conf", "w"))
        cf:write(conf)
        cf:close()
        return servers_dir.spawn(nginx_cmd(dir), dir .. "/nginx.out", dir)
      end,
      log = dir .. "/nginx.out" }
    assert(started, err)
    local base = "http://127.0.0.1:" .. started.port
    --- method path → status, body, attempts (the proxy's answer)
    local function call(method, path)
      local out = helper.sh(plain("curl -s -m 10 " .. (method == "HEAD" and "-I" or "-X " .. method .. " -D -") .. " "
        .. shell_quote(base .. path)))
      local status = tonumber(out:match("^HTTP/1.1 (%d+)"))
      local attempts = tonumber(out:match("X%-Retryfreeze%-Attempts: (%d+)"))
      return status, out:match("\r\n\r\n(.*)$"), attempts -- HEAD: "" after the head
    end
    local ok_run, run_err = pcall(function()
      local _, c1 = call("GET", "/items/cl")
      assert.matches("^%d+$", c1)
      assert.same({ 200, c1, 1 }, { call("GET", "/items/cl") }) -- Content-Length: the connection went back
      assert.same({ 200, c1 .. "-chunked", 1 }, { call("GET", "/items/chunked") }) -- chunked
      assert.same({ 204, "", 1 }, { call("GET", "/items/empty") }) -- 204: no body
      assert.same({ 200, "", 1 }, { call("HEAD", "/items/cl") }) -- HEAD: a Content-Length and no body
      assert.same({ 200, c1, 1 }, { call("GET", "/items/cl") })
      -- The upstream says Connection: close: the proxy closes it too, and the next attempt opens another.
      assert.same({ 200, c1, 1 }, { call("GET", "/items/close") })
      local _, c2 = call("GET", "/items/cl")
      assert.matches("^%d+$", c2)
      assert.are_not.equal(c1, c2)
      -- A body cut by the per-try timeout (1 s) leaves a connection in an unknown state: closed, never pooled,
      -- so no later attempt reads its late bytes as its own response.
      local status, _, attempts = call("GET", "/items/stall")
      assert.same({ 502, 3 }, { status, attempts })
      for _ = 1, 3 do
        local st, body, tries = call("GET", "/items/cl")
        assert.same({ 200, 1 }, { st, tries })
        assert.matches("^%d+$", body)
      end
    end)
    started.stop("QUIT")
    assert(ok_run, run_err)
  end)

  local as_root = helper.sh("id -u") == "0\n"
  it("runs as documented" .. (as_root and ", started as root: the nobody workers append to a ledger only root can "
    .. "write" or "") .. "; a reload onto a bad lock is refused and the old policy serves on", function()
    local upstream = require "retryfreeze.upstream"
    local up = assert(upstream.start{ bindir = helper.bindir, faults = "", max_seconds = 120 })
    local dir = servers_dir.temp_dir("nginx-example")
    local ledger = dir .. "/ledger.jsonl"
    local good = dir .. "/proxy.lock.json"
    assert(os.execute("cp examples/nginx/proxy.lock.json " .. shell_quote(good)))
    local started, err = servers_dir.start{ name = "nginx (examples/nginx)", dir = dir,
      launch = function(ports)
        write_conf(dir, good, ports[1], up.port)
        return servers_dir.spawn(nginx_cmd(dir), dir .. "/nginx.out", dir)
      end,
      log = dir .. "/nginx.out" }
    if not started then up.stop() end
    assert(started, err)
    local base = "http://127.0.0.1:" .. started.port
    local function get(i)
      local head = helper.sh(plain("curl -s -m 10 -o /dev/null -D - " .. shell_quote(base .. "/items/" .. i)))
      assert.matches("^HTTP/1.1 200", head)
      assert.matches("X%-Retryfreeze%-Outcome: success", head)
    end
    local ok_run, run_err = pcall(function()
      if as_root then
        -- The workers dropped to nobody, nginx's default user when it starts as root.
        assert.matches("^nobody\n", (helper.sh(plain("ps -o user= --ppid " .. started.pid))))
        -- The ledger is root's, 0644 in a 0755 folder: the workers append through the descriptor they inherit.
        assert.equal("root 644\n", (helper.sh(plain("stat -c '%U %a' " .. shell_quote(ledger)))))
      end
      for i = 1, 4 do get(i) end
      -- A reload onto a bad lock: the master's init_by_lua refuses it, the running workers keep the good policy.
      local _, why = rf.load(select(1, bad_lock(dir)))
      assert(os.execute("cp " .. shell_quote(dir .. "/bad.lock.json") .. " " .. shell_quote(good)))
      why = why:gsub("bad%.lock%.json", "proxy.lock.json")
      local _, serr, scode = helper.sh(nginx_cmd(dir, "-s reload"))
      assert.equal(0, scode, serr)
      local log = helper.poll(100, 0.05, function()
        local text = helper.try_read_file(dir .. "/error.log") or ""
        return text:find(why, 1, true) ~= nil, text
      end)
      assert.truthy(log:find("init_by_lua error: " .. why, 1, true), log)
      get(5)
      -- Each worker holds its lines and writes them within ledger_flush_ms (200 ms by default).
      local n = helper.poll(100, 0.05, function()
        local count = 0
        for rec in rf.ledger.read(ledger) do
          count = count + 1
          assert.equal("GET /items/*", rec.route)
        end
        return count >= 5, count
      end)
      assert.equal(5, n)
      -- No sanitizer report from nginx (the sanitized run's module runs in it), no error but the refused reload's.
      local out = helper.try_read_file(dir .. "/nginx.out") or ""
      assert.falsy(out:find("Sanitizer", 1, true) or out:find("runtime error", 1, true), out)
      for line in log:gmatch("[^\n]+") do
        if line:find("%[error%]") or line:find("%[alert%]") or line:find("%[crit%]") then
          assert.truthy(line:find("init_by_lua error: " .. why, 1, true), line)
        end
      end
    end)
    started.stop("QUIT")
    up.stop()
    assert(ok_run, run_err)
  end)
end)
