-- ctest layers: retries across three layers on loopback, end to end. A Lua client (rf.client) → nginx running the
-- project's proxy (examples/nginx, rf.flow) → a second such nginx → an upstream nginx that always answers 503 (or
-- answers it after 1 s) and logs when each request started and what it carried. Every layer's lock allows 3
-- attempts. Checked:
--   without propagation, the upstream sees 3 × 3 × 3 = 27 requests per client request (measured);
--   with propagation in every lock, it sees at most 3, every attempt's headers say 1, 2, 3 and a deadline that
--   shrinks and is never above totalBudgetMs, and the client's request ends within its deadline;
--   against the slow upstream, no request starts there after the client's deadline, and the client ends by it.
-- Usage: luajit spec/layers_check.lua BUILD_DIR SOURCE_DIR (the nginx module is the build's LuaJIT one).
local build, src = arg[1], arg[2]
dofile(src .. "/spec/support/check_paths.lua")(build, src)
local rf = require "retryfreeze"

local shell = require "spec.support.shell"
local stall = require "spec.support.stall"
local sh, q = shell.sh, shell.q
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
local checks = require("spec.support.checks")("layers")
local check = checks.check

local dir = sh("mktemp -d /tmp/rf-layers.XXXXXX"):gsub("%s+$", "")
os.execute("chmod 0755 " .. q(dir)) -- nginx's workers may run as nobody: its temp paths must be traversable

-- Each layer's lock: 3 attempts of 503 with a short fixed backoff; a per-try timeout of 2 s, room for a layer below
-- that itself retries. PROPAGATION is "" or the propagation object.
local function lock(propagation)
  return ([[{"version": 1,
  "defaults": {"maxAttempts": 3, "perAttemptTimeoutMs": 2000, "totalBudgetMs": 6000, "minAttemptMs": 50,
    "retryable": ["HTTP_503", "HTTP_502", "TIMEOUT"],
    "backoff": {"baseMs": 20, "multiplier": 1, "maxMs": 20, "jitter": "none"}@P@},
  "routes": [{"endpoint": "GET /*"}]}]]):gsub("@P@", propagation)
end
local PLAIN, PROPAGATED = lock(""), lock(', "propagation": {}')
write(dir .. "/plain.lock.json", PLAIN)
write(dir .. "/propagated.lock.json", PROPAGATED)

-- Free loopback ports below the ephemeral range (32768..60999).
local function pick_port()
  return tonumber(sh([[bash -c 'for p in $(shuf -i 20000-32000 -n 50); do ]]
    .. [[(echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; break; }; done']]))
end

local running = {}
-- Starts nginx with conf_of(port) in dir/name (a folder of its own); returns its port once it answers.
local function start(name, conf_of)
  local d = dir .. "/" .. name
  os.execute("mkdir -p " .. q(d) .. " && chmod 0755 " .. q(d))
  for _ = 1, 5 do
    local port = pick_port()
    write(d .. "/nginx.conf", conf_of(port, d))
    local pid = tonumber(sh("cd " .. q(d) .. " && (nginx -p " .. q(d .. "/") .. " -c nginx.conf >nginx.out 2>&1 & echo $!)"))
    for _ = 1, 100 do
      if sh("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" .. port .. "/__up 2>/dev/null") ~= "000" then
        running[#running + 1] = pid
        return port, d
      end
      if sh("kill -0 " .. pid .. " 2>/dev/null && echo alive") == "" then break end -- it could not bind
      os.execute("sleep 0.1")
    end
    os.execute("kill " .. pid .. " 2>/dev/null; sleep 0.2")
  end
  error("cannot start nginx " .. name .. ": " .. read(d .. "/nginx.out") .. read(d .. "/error.log"))
end

-- The upstream: /fail answers 503 at once, /slow after 1 s; each request logged with its start (msec minus
-- request_time, in ms) and the propagation headers it carried.
local up_port, up_dir = start("upstream", function(port, d)
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
  log_format layers '$uri|$msec|$request_time|$http_x_envoy_attempt_count|$http_x_envoy_expected_rq_timeout_ms';
  server {
    listen 127.0.0.1:@PORT@;
    access_log @D@/access.log layers;
    location = /__up { return 200; }
    location /fail { return 503 "down\n"; }
    location /slow { content_by_lua_block { ngx.sleep(1) ngx.status = 503 ngx.say("slow") } }
  }
}
]]):gsub("@D@", d):gsub("@PORT@", tostring(port))
end)

-- A layer: the project's proxy (examples/nginx/nginx.conf.in filled in) in front of upstream_port.
local conf_in = read(src .. "/examples/nginx/nginx.conf.in")
local function layer(name, lock_path, upstream_port)
  return start(name, function(port, d)
    return (conf_in:gsub("@(%u[%u_]*)@", { DIR = d, SRC = src, CPATH = build .. "/lib/lua/luajit", LOCK = lock_path,
      LEDGER = d .. "/ledger.jsonl", UPSTREAM_PORT = tostring(upstream_port), PORT = tostring(port) }))
  end)
end

-- The upstream's log lines since mark (a count), once it has want of them (nginx logs after answering).
local function upstream_lines()
  local lines = {}
  for line in read(up_dir .. "/access.log"):gmatch("[^\n]+") do
    local f = {}
    for part in (line .. "|"):gmatch("([^|]*)|") do f[#f + 1] = part end
    if f[1] ~= "/__up" then
      lines[#lines + 1] = { uri = f[1], start_ms = (tonumber(f[2]) - tonumber(f[3])) * 1000, attempt = f[4],
                            deadline = f[5] }
    end
  end
  return lines
end
local function since(mark, want, wait_s)
  local lines
  for _ = 1, (wait_s or 3) * 20 do
    lines = upstream_lines()
    if #lines >= mark + want then break end
    os.execute("sleep 0.05")
  end
  os.execute("sleep 0.2")
  lines = upstream_lines()
  local out = {}
  for i = mark + 1, #lines do out[#out + 1] = lines[i] end
  return out
end

-- Client, layer 1, layer 2, upstream; each chain under one lock everywhere.
local function chain(tag, text, lock_path)
  local l2 = layer(tag .. "-2", lock_path, up_port)
  local l1 = layer(tag .. "-1", lock_path, l2)
  local client = rf.client{ policy = assert(rf.load_string(text, tag)), base_url = "http://127.0.0.1:" .. l1,
    rng_seed = 1 }
  return client
end

local ok_run, err = pcall(function()
  -- Without propagation: every layer retries what the one below already retried.
  local plain = chain("plain", PLAIN, dir .. "/plain.lock.json")
  local mark = #upstream_lines()
  local n = 2
  for _ = 1, n do plain:request{ method = "GET", path = "/fail" } end
  local seen = #since(mark, 27 * n)
  print(("  without propagation: %d upstream requests for %d client requests"):format(seen, n))
  check(seen == 27 * n, "without propagation the upstream sees 27 requests per client request (" .. seen / n .. ")")
  plain:close()

  -- With propagation in every lock: retried at one layer only.
  local prop = chain("prop", PROPAGATED, dir .. "/propagated.lock.json")
  local worst, within = 0, true
  for _ = 1, n do
    local before = #upstream_lines()
    local t0 = rf.monotonic_ms()
    local r = prop:request{ method = "GET", path = "/fail", deadline_ms = 4000 }
    local took = rf.monotonic_ms() - t0
    within = within and took <= 4000 and r.elapsed_ms <= 4000
    local got = since(before, 3)
    if #got > worst then worst = #got end
    check(r.attempts == 1 and r.reason == "upstream-overloaded",
      "the client, told the layers below retried, does not retry (" .. r.attempts .. " attempt, " .. r.reason .. ")")
    local attempts, shrinking, capped = {}, true, true
    local before_deadline = math.huge
    for i, line in ipairs(got) do
      attempts[i] = line.attempt
      local d = tonumber(line.deadline)
      shrinking = shrinking and d ~= nil and d < before_deadline
      capped = capped and d ~= nil and d <= 6000
      before_deadline = d or -1
    end
    check(table.concat(attempts, ",") == "1,2,3", "the upstream saw attempts 1, 2, 3 (" .. table.concat(attempts, ",") .. ")")
    check(shrinking and capped, "each attempt's deadline header shrank and stayed within totalBudgetMs")
  end
  print(("  with propagation: at most %d upstream requests per client request"):format(worst))
  check(worst <= 3, "with propagation the upstream sees at most 3 requests per client request (" .. worst .. ")")
  check(within, "the client's requests ended within their deadline")

  -- A slow upstream (1 s to a 503): nothing starts after the client's deadline, and the client ends by it.
  mark = #upstream_lines()
  local deadline = 1500
  local t0_wall = rf.now_ms()
  local t0 = rf.monotonic_ms()
  local r, stalled = stall.across(function()
    return prop:request{ method = "GET", path = "/slow", deadline_ms = deadline }
  end)
  local took = rf.monotonic_ms() - t0
  local slow = since(mark, 1, 3)
  os.execute("sleep 1.2") -- a request that started late would be logged when its second ends
  slow = since(mark, #slow, 1)
  local late = 0
  for _, line in ipairs(slow) do
    if line.start_ms > t0_wall + deadline + 5 then late = late + 1 end -- 5 ms: the wall clock's and nginx's rounding
  end
  print(("  slow upstream: %d requests, the client ended after %d ms (elapsed_ms %d, deadline %d ms, %s, machine "
    .. "stall %d ms)"):format(#slow, took, r.elapsed_ms, deadline, r.reason, math.floor(stalled)))
  check(#slow >= 1 and late == 0, "no request started at the upstream after the client's deadline (" .. late .. " did)")
  -- 50 ms: libcurl's timeout and the connection's teardown, as for nginx_lua's totalBudgetMs + 50 ms; plus the time
  -- the machine kept this process from running (spec/support/stall.lua), which no client can make up for.
  local slack = 50 + stalled
  check(took <= deadline + slack and r.elapsed_ms <= deadline + slack,
    "the client's request ended within its deadline (" .. took .. " ms, machine stall " .. math.floor(stalled) .. " ms)")
  prop:close()
end)
check(ok_run, "the chains ran" .. (ok_run and "" or (": " .. tostring(err))))

for _, pid in ipairs(running) do os.execute("kill " .. pid .. " 2>/dev/null") end
os.execute("sleep 0.5")
local lua_errors = 0
for _, name in ipairs({ "plain-1", "plain-2", "prop-1", "prop-2", "upstream" }) do
  for line in read(dir .. "/" .. name .. "/error.log"):gmatch("[^\n]+") do
    if line:find("lua entry thread aborted", 1, true) or line:find("runtime error", 1, true)
      or line:find("%[alert%]") or line:find("%[crit%]") then
      lua_errors = lua_errors + 1
      if lua_errors <= 5 then print("  " .. name .. ": " .. line) end
    end
  end
end
check(lua_errors == 0, "no nginx error log holds a Lua error (" .. lua_errors .. ")")
checks.finish(dir)
