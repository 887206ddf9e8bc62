-- The nginx example's front CPU per request against nginx's own proxy_pass doing the same retries, in one run.
-- One nginx (examples/nginx/nginx.conf.in filled in as docs/embedding.md says, plus two servers of this bench's own)
-- in front of retryfreeze-serve answering 503 to a share of attempts (no Retry-After, so both fronts retry at once
-- or after the lock's short backoff):
--   proxy       the example: every request through rf.flow (examples/nginx/retry_proxy.lua), its ledger on;
--   keepalive   proxy_pass + proxy_next_upstream (error, timeout, 503; 3 tries) over an upstream keepalive pool;
--   fresh       the same without the pool: a new upstream connection per attempt.
-- wrk drives each front on loopback for a round of SECONDS, the fronts in turn and their order rotated every round,
-- ROUNDS rounds. A front's CPU is the utime + stime of nginx's worker processes over its rounds (/proc/PID/stat), per
-- request wrk counted. The upstream's attempt count per request says that the fronts retried alike. The ratio is the
-- median of the rounds' own ratios (each round runs both fronts seconds apart), which a loaded machine moves less.
-- Prints `ratio:` lines for bench/run (never fails on a target; fails when a part does not start).
-- Usage: lua5.4 bench/embedding/bench_nginx.lua BUILD_DIR [SECONDS [ROUNDS]] (from the source root).
local build, seconds, rounds = arg[1] or "build", tonumber(arg[2] or "4"), tonumber(arg[3] or "3")
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = build .. "/lib/lua/5.4/?.so;" .. package.cpath
local upstream = require "retryfreeze.upstream"
local nginx_front = require "bench.lib.nginx_front"
local shell = require "spec.support.shell"
local sh, q = shell.sh, shell.q

local missing = nginx_front.missing(build, { "wrk" })
if missing then
  print("bench_nginx: skipped (no " .. missing .. ")")
  return
end

local dir = nginx_front.temp_dir("nginx")
local up = assert(upstream.start{ bindir = build .. "/bin", faults = "503=0.1", max_seconds = 600 })

-- proxy_pass doing the example lock's retries: 3 tries (the lock's maxAttempts) on error, timeout and 503 within the
-- lock's 2.5 s, each try bounded by its 1 s per-try timeout. One upstream server listed three times, because
-- proxy_next_upstream moves to the next server of the group, never back to the one that failed.
local function baseline(name, port, pool)
  local servers = ("    server 127.0.0.1:%d max_fails=0;\n"):format(up.port):rep(3)
  return ([[
  upstream rf_bench_%s {
%s%s  }
  server {
    listen 127.0.0.1:%d;
    location / {
      proxy_pass http://rf_bench_%s;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_next_upstream error timeout http_503;
      proxy_next_upstream_tries 3;
      proxy_next_upstream_timeout 2500ms;
      proxy_connect_timeout 1s;
      proxy_send_timeout 1s;
      proxy_read_timeout 1s;
    }
  }
]]):format(name, servers, pool and "    keepalive 64;\n" or "", port, name)
end

local ports = { proxy = nginx_front.free_port(), keepalive = nginx_front.free_port(), fresh = nginx_front.free_port() }
local src = sh("pwd"):gsub("%s+$", "")
local url = {}
for name, port in pairs(ports) do url[name] = "http://127.0.0.1:" .. port .. "/items/1" end
local ok_start, front = pcall(nginx_front.start, { what = "bench_nginx", dir = dir,
  conf_in = "examples/nginx/nginx.conf.in", urls = url,
  servers = baseline("keepalive", ports.keepalive, true) .. baseline("fresh", ports.fresh, false),
  values = { SRC = src, CPATH = src .. "/" .. build .. "/lib/lua/luajit",
    LOCK = src .. "/examples/nginx/proxy.lock.json", LEDGER = dir .. "/ledger.jsonl",
    UPSTREAM_PORT = tostring(up.port), PORT = tostring(ports.proxy) } })
local function stop()
  if ok_start then front.stop() end
  up.stop()
end
if not ok_start then
  stop()
  error(front, 0)
end

-- CPU seconds of nginx's worker processes (bench/lib/proc_cpu.lua).
local workers_cpu = front.workers_cpu

local function upstream_attempts() return assert(upstream.stats(up.url)).requests end

local totals = {}
local order = { "proxy", "keepalive", "fresh" }
local round_ratios = {} -- proxy / keepalive per round: the two ran seconds apart, under the same load
-- A warm-up round each (JIT traces, connection pools), not counted.
for _, name in ipairs(order) do sh("wrk -t1 -c32 -d1s " .. url[name]) end
for round = 1, rounds do
  local us_round = {}
  for k = 0, #order - 1 do
    local name = order[(round - 1 + k) % #order + 1]
    local t = totals[name] or { cpu = 0, requests = 0, attempts = 0, non2xx = 0 }
    totals[name] = t
    local attempts0, cpu0 = upstream_attempts(), workers_cpu()
    local out = sh("wrk -t1 -c32 -d" .. seconds .. "s " .. url[name])
    local cpu1, attempts1 = workers_cpu(), upstream_attempts()
    local requests = tonumber(out:match("(%d+) requests in"))
    if not requests then
      stop()
      error("bench_nginx: wrk gave no count for " .. name .. ":\n" .. out)
    end
    t.cpu, t.requests = t.cpu + (cpu1 - cpu0), t.requests + requests
    us_round[name] = (cpu1 - cpu0) / requests
    t.attempts = t.attempts + (attempts1 - attempts0 - 1) -- minus the /__stats read between
    t.non2xx = t.non2xx + (tonumber(out:match("Non%-2xx or 3xx responses: (%d+)")) or 0)
  end
  round_ratios[round] = us_round.proxy / us_round.keepalive
end
local rounds_lib = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../lib/rounds.lua")
local median = rounds_lib.median(round_ratios) -- sorted in place: the per-round note below lists them in order
stop()
local lines = 0
for _ in io.lines(dir .. "/ledger.jsonl") do lines = lines + 1 end
os.execute("rm -rf " .. q(dir))

local us = {}
for _, name in ipairs(order) do
  local t = totals[name]
  us[name] = t.cpu / t.requests * 1e6
  print(("bench_nginx: %-9s %8d requests, %6.1f us front CPU per request, %.3f upstream attempts per request, "
    .. "%.2f%% not 2xx"):format(name, t.requests, us[name], t.attempts / t.requests, 100 * t.non2xx / t.requests))
end
print(("bench_nginx: the example's ledger holds %d lines"):format(lines))
local ratio = rounds_lib.ratio
-- The median of the rounds' ratios: a round in which other work loaded the machine moves one ratio, not the figure.
ratio("nginx example front CPU per request vs proxy_pass with keepalive", median, "<=", 1.5)
local parts = {}
for i, r in ipairs(round_ratios) do parts[i] = ("%.2f"):format(r) end
print(("note: nginx example vs proxy_pass with keepalive, all rounds together: %.2fx; per round, sorted: %s")
  :format(us.proxy / us.keepalive, table.concat(parts, " ")))
print(("note: nginx example front CPU per request vs proxy_pass with a new upstream connection per attempt: %.2fx "
  .. "(%.1f vs %.1f us; wrk on loopback, %d rounds of %d s alternated)"):format(us.proxy / us.fresh, us.proxy, us.fresh,
  rounds, seconds))
