-- The gateway mode's front CPU per request against nginx's own keepalive proxy_pass to the same upstreams, in one
-- nginx: examples/gateway/nginx.conf.in filled in as docs/embedding.md says (its lock, its ledger on), plus two
-- servers of this bench's own, all in front of two retryfreeze-serve answering 503 to a share of attempts:
--   gateway     proxy_pass to the gateway's upstream block: every try started and decided by the engine in the
--               balancer (retryfreeze.gateway), one ledger line per request;
--   floor       the lean form's two Lua phases doing only what any balancer must, and no engine (no decision, no
--               ledger; nginx_front.gateway_floor): what nginx's Lua phases cost before a gateway does anything,
--               which bounds what any gateway built on them reaches. No target: the target is read against it;
--   keepalive   proxy_pass + proxy_next_upstream (error, timeout, 503; 3 tries, the lock's maxAttempts) to the same
--               two servers over an upstream keepalive pool.
-- FORM "lean" runs the lean form as the gateway (examples/gateway/lean.nginx.conf.in and lean.lock.json: the balancer
-- and log phases only, no propagation); FORM "native" the nginx module (examples/gateway/native.nginx.conf.in, the
-- lean lock: no Lua phase; skipped when the build has no module, RF_NGINX_MODULE).
-- The project's client drives each front on loopback (rf.client through retryfreeze.scheduler: libcurl's multi
-- interface, 32 requests in flight on keep-alive connections, one attempt each: the driver never retries) for a
-- round of REQUESTS requests, the fronts in turn and their order turned every round, ROUNDS rounds. A front's CPU is
-- the utime + stime of nginx's worker processes over its rounds (/proc/PID/stat), per request sent. The upstreams'
-- attempt count per request says that the fronts retried alike. A ratio is the median of the rounds' own ratios
-- (each round runs the fronts seconds apart), which a loaded machine moves less.
-- Prints `ratio:` lines for bench/run (never fails on a target; fails when a part does not start).
-- Usage: lua5.4 bench/embedding/bench_gateway.lua BUILD_DIR [REQUESTS [ROUNDS [FORM]]] (from the source root; FORM
-- "full", the default, "lean" or "native"); RF_BENCH_GATEWAY_LOCK names another lock for the gateway (its routes must take
-- GET /items/1).
local build, count, rounds = arg[1] or "build", tonumber(arg[2] or "20000"), tonumber(arg[3] or "5")
-- the form's configuration, its lock, and the words its ratio line starts with
local FORMS = {
  full = { conf = "examples/gateway/nginx.conf.in", lock = "examples/gateway/gateway.lock.json", says = "nginx gateway" },
  lean = { conf = "examples/gateway/lean.nginx.conf.in", lock = "examples/gateway/lean.lock.json",
           says = "nginx lean gateway" },
  native = { conf = "examples/gateway/native.nginx.conf.in", lock = "examples/gateway/lean.lock.json",
             says = "nginx module gateway", module = true },
}
local form = FORMS[arg[4] or "full"]
if not form then error("bench_gateway: FORM must be full, lean or native, got " .. tostring(arg[4]), 0) end
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = build .. "/lib/lua/5.4/?.so;" .. package.cpath
local rf = require "retryfreeze"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"
local nginx_front = require "bench.lib.nginx_front"
local shell = require "spec.support.shell"
local q = shell.q

local missing = nginx_front.missing(build, nil, form.module)
if missing then
  print("bench_gateway: skipped (no " .. missing .. ")")
  return
end

local dir = nginx_front.temp_dir("gateway")
local up1 = assert(upstream.start{ bindir = build .. "/bin", faults = "503=0.1", max_seconds = 600, seed = 1 })
local up2 = assert(upstream.start{ bindir = build .. "/bin", faults = "503=0.1", max_seconds = 600, seed = 2 })

local ports = { gateway = nginx_front.free_port(), keepalive = nginx_front.free_port(),
                floor = nginx_front.free_port() }
local src = shell.sh("pwd"):gsub("%s+$", "")
local url, base = {}, {}
for name, port in pairs(ports) do
  base[name] = "http://127.0.0.1:" .. port
  url[name] = base[name] .. "/items/1"
end
local ok_start, front = pcall(nginx_front.start, { what = "bench_gateway", dir = dir,
  conf_in = form.conf, prelude = form.module and nginx_front.LUA_PRELUDE or nil,
  servers = nginx_front.gateway_baseline(ports.keepalive, up1.port, up2.port)
    .. nginx_front.gateway_floor(ports.floor, up1.port, up2.port), urls = url,
  values = { SRC = src, CPATH = src .. "/" .. build .. "/lib/lua/luajit", MODULE = src .. "/" .. nginx_front.module(build),
    LOCK = os.getenv("RF_BENCH_GATEWAY_LOCK") or (src .. "/" .. form.lock),
    LEDGER = dir .. "/ledger.jsonl", UPSTREAM_PORT = tostring(up1.port), UPSTREAM2_PORT = tostring(up2.port),
    PORT = tostring(ports.gateway) } })
local function stop()
  if ok_start then front.stop() end
  up1.stop()
  up2.stop()
end
if not ok_start then
  stop()
  error(front, 0)
end

-- The driver: one attempt per request (maxAttempts 1), a per-try timeout far above any answer here.
local driver_policy = assert(rf.load_string('{"endpoint": "GET /items/*", "maxAttempts": 1, "perAttemptTimeoutMs": '
  .. '10000, "totalBudgetMs": 10000, "retryable": []}', "bench_gateway driver"))
local REQUEST = { method = "GET", path = "/items/1" }
local function request() return REQUEST end
-- Sends `requests` requests to base_url, 32 in flight; raises when one failed (no response: a front that broke).
local function drive(base_url, requests)
  local client = rf.client{ policy = driver_policy, base_url = base_url }
  local failed = scheduler.run_requests(client, requests, 32, request)
  client:close()
  if failed > 0 then
    error(("bench_gateway: %d of %d requests to %s got no response"):format(failed, requests, base_url))
  end
end

-- CPU seconds of nginx's worker processes (bench/lib/proc_cpu.lua).
local workers_cpu = front.workers_cpu

-- Both upstreams' attempts so far (each /__stats read is not counted by the upstream it reads).
local function upstream_attempts()
  return assert(upstream.stats(up1.url)).requests + assert(upstream.stats(up2.url)).requests
end

local totals = {}
local order = { "gateway", "floor", "keepalive" }
-- per round: gateway / keepalive, floor / keepalive, gateway / floor (the fronts ran seconds apart, under one load)
local round_ratios, floor_ratios, over_floor = {}, {}, {}
-- A warm-up round each (JIT traces, connection pools), not counted.
for _, name in ipairs(order) do drive(base[name], count // 4) end
-- The ledger's lines so far.
local function ledger_lines()
  local n = 0
  for _ in io.lines(dir .. "/ledger.jsonl") do n = n + 1 end
  return n
end
local lines0 = ledger_lines()
for round = 1, rounds do
  local us_round = {}
  for k = 0, #order - 1 do
    local name = order[(round - 1 + k) % #order + 1]
    local t = totals[name] or { cpu = 0, requests = 0, attempts = 0 }
    totals[name] = t
    local attempts0, cpu0 = upstream_attempts(), workers_cpu()
    local ok, err = pcall(drive, base[name], count)
    local cpu1, attempts1 = workers_cpu(), upstream_attempts()
    if not ok then
      stop()
      error(err, 0)
    end
    t.cpu, t.requests = t.cpu + (cpu1 - cpu0), t.requests + count
    us_round[name] = (cpu1 - cpu0) / count
    t.attempts = t.attempts + (attempts1 - attempts0)
  end
  round_ratios[round] = us_round.gateway / us_round.keepalive
  floor_ratios[round] = us_round.floor / us_round.keepalive
  over_floor[round] = us_round.gateway / us_round.floor
end
local rounds_lib = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../lib/rounds.lua")
local median_of = rounds_lib.median -- sorts the list in place
-- A sorted list of ratios as text.
local function sorted_text(list)
  local parts = {}
  for i, r in ipairs(list) do parts[i] = ("%.2f"):format(r) end
  return table.concat(parts, " ")
end
local median = median_of(round_ratios)
stop()
local lines = ledger_lines()
os.execute("rm -rf " .. q(dir))

local us = {}
for _, name in ipairs(order) do
  local t = totals[name]
  us[name] = t.cpu / t.requests * 1e6
  print(("bench_gateway: %-9s %8d requests, %6.1f us front CPU per request, %.3f upstream attempts per request")
    :format(name, t.requests, us[name], t.attempts / t.requests))
end
print(("bench_gateway: the gateway's ledger holds %d lines for the %d requests it served in the rounds")
  :format(lines - lines0, totals.gateway.requests))
rounds_lib.ratio(form.says .. " front CPU per request vs proxy_pass with keepalive", median, "<=", 1.25)
print(("note: the floor (nginx's balancer and log phases with no engine) vs proxy_pass with keepalive in the same "
  .. "rounds: %.2fx, the median of the rounds (sorted: %s); %s over the floor: %.2fx"):format(median_of(floor_ratios),
  sorted_text(floor_ratios), form.says, median_of(over_floor)))
print(("note: " .. form.says .. " vs proxy_pass with keepalive, all rounds together: %.2fx (%.1f vs %.1f us); per round, "
  .. "sorted: %s (rf.client on loopback, 32 in flight, %d rounds of %d requests alternated)"):format(
  us.gateway / us.keepalive, us.gateway, us.keepalive, sorted_text(round_ratios), rounds, count))
