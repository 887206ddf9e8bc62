-- Instructions (callgrind) per request of nginx's worker for the gateway mode, for nginx's own keepalive proxy_pass
-- and for the floor (the Lua phases with no engine), the configuration bench_gateway.lua runs
-- (examples/gateway/nginx.conf.in plus the same two servers, here with one worker and no master process), and the
-- gateway's share per phase handler. The counts are deterministic where
-- the CPU-time ratio of bench_gateway.lua moves by about 0.1 between runs on a loaded machine: use them to compare
-- two versions of the gateway. They cover user space only (the kernel's part of a request, its sockets, is the
-- same for both fronts). Each front runs in an nginx of its own: REQUESTS / 2 requests to warm up (LuaJIT's
-- traces), the counters zeroed, then REQUESTS requests counted, 8 in flight, from rf.client.
-- Prints `note:` lines (no target). Usage: lua5.4 bench/embedding/gateway_instructions.lua BUILD_DIR [REQUESTS
-- [FORM]] (from the source root; FORM "full", the default, "lean": examples/gateway/lean.nginx.conf.in with
-- lean.lock.json, or "native": the nginx module, examples/gateway/native.nginx.conf.in with lean.lock.json; needs
-- valgrind, nginx with its Lua module, the build's LuaJIT module, and for "native" the build's nginx module).
local build, count = arg[1] or "build", tonumber(arg[2] or "2000")
local FORMS = { full = { conf = "examples/gateway/nginx.conf.in", lock = "examples/gateway/gateway.lock.json" },
                lean = { conf = "examples/gateway/lean.nginx.conf.in", lock = "examples/gateway/lean.lock.json" },
                native = { conf = "examples/gateway/native.nginx.conf.in", lock = "examples/gateway/lean.lock.json",
                           module = true } }
local form = FORMS[arg[3] or "full"]
if not form then error("gateway_instructions: FORM must be full, lean or native, got " .. tostring(arg[3]), 0) end
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = build .. "/lib/lua/5.4/?.so;" .. package.cpath
local rf = require "retryfreeze"
local scheduler = require "retryfreeze.scheduler"
local upstream = require "retryfreeze.upstream"
local nginx_front = require "bench.lib.nginx_front"
local shell = require "spec.support.shell"
local sh, q = shell.sh, shell.q

local missing = nginx_front.missing(build, { "valgrind", "callgrind_control", "callgrind_annotate" }, form.module)
if missing then
  print("gateway_instructions: skipped (no " .. missing .. ")")
  return
end

local src = sh("pwd"):gsub("%s+$", "")
local up1 = assert(upstream.start{ bindir = build .. "/bin", faults = "503=0.1", max_seconds = 900, seed = 1 })
local up2 = assert(upstream.start{ bindir = build .. "/bin", faults = "503=0.1", max_seconds = 900, seed = 2 })

local driver_policy = assert(rf.load_string('{"endpoint": "GET /items/*", "maxAttempts": 1, "perAttemptTimeoutMs": '
  .. '60000, "totalBudgetMs": 60000, "retryable": []}', "gateway_instructions driver"))
local REQUEST = { method = "GET", path = "/items/1" }
local function drive(base_url, requests)
  local client = rf.client{ policy = driver_policy, base_url = base_url }
  local failed = scheduler.run_requests(client, requests, 8, function() return REQUEST end)
  client:close()
  if failed > 0 then error(("gateway_instructions: %d requests to %s got no response"):format(failed, base_url)) end
end

-- The phase handlers and calls whose inclusive counts are printed for the gateway: the Lua forms' phases, or the
-- module's hooks.
local PARTS = form.module and { { "init_peer", "rf_ngx_init_peer " }, { "get_peer", "rf_ngx_get_peer " },
  { "request's end", "rf_ngx_cleanup " }, { "rf_step_init", "rf_step_init " } }
  or { { "access_by_lua", "ngx_http_lua_access_handler " }, { "balancer_by_lua", "ngx_http_lua_balancer_handler_inline " },
  { "header_filter_by_lua", "ngx_http_lua_header_filter_inline " }, { "log_by_lua", "ngx_http_lua_log_handler " },
  { "core.step", "bindings/lua_step.c:l_step_new" }, { "ngx.var reads", "ngx_http_lua_ffi_var_get " } }

-- Runs one front under callgrind: {total = instructions per request, parts = {name = per request}}.
local function measure(front_name)
  local dir = nginx_front.temp_dir("gateway-instr")
  local ports = { gateway = nginx_front.free_port(), keepalive = nginx_front.free_port(),
                  floor = nginx_front.free_port() }
  local conf = assert(io.open(form.conf)):read("a")
  conf = conf:gsub("\nworker_processes %d+;", "\nworker_processes 1;\nmaster_process off;", 1)
  if form.module then conf = nginx_front.LUA_PRELUDE .. conf end -- the floor's Lua phases
  conf = conf:gsub("@(%u[%u%d_]*)@", { DIR = dir, SRC = src, CPATH = src .. "/" .. build .. "/lib/lua/luajit",
    MODULE = src .. "/" .. nginx_front.module(build),
    LOCK = src .. "/" .. form.lock, LEDGER = dir .. "/ledger.jsonl",
    UPSTREAM_PORT = tostring(up1.port), UPSTREAM2_PORT = tostring(up2.port), PORT = tostring(ports.gateway) })
  local servers = nginx_front.gateway_baseline(ports.keepalive, up1.port, up2.port)
    .. nginx_front.gateway_floor(ports.floor, up1.port, up2.port)
  conf = conf:gsub("\n}%s*$", function() return "\n" .. servers .. "}\n" end)
  local f = assert(io.open(dir .. "/nginx.conf", "w"))
  f:write(conf)
  f:close()
  local pid = tonumber(sh("cd " .. q(dir) .. " && (valgrind --tool=callgrind --smc-check=all-non-file "
    .. "--callgrind-out-file=" .. q(dir .. "/cg.out") .. " " .. nginx_front.binary() .. " -p " .. q(dir)
    .. " -c nginx.conf >nginx.out 2>&1 & echo $!)"))
  local base = "http://127.0.0.1:" .. ports[front_name]
  local up = false
  for _ = 1, 600 do
    if sh("curl -s -o /dev/null -w '%{http_code}' " .. base .. "/items/1 2>/dev/null") ~= "000" then
      up = true
      break
    end
    os.execute("sleep 0.2")
  end
  local ok, err = up, "nginx under valgrind did not answer: " .. sh("cat " .. q(dir) .. "/nginx.out")
  local out = ""
  if up then
    ok, err = pcall(function()
      drive(base, count // 2)
      sh("callgrind_control -z " .. pid .. " 2>&1")
      drive(base, count)
      sh("callgrind_control -d " .. pid .. " 2>&1")
      os.execute("sleep 1")
      local dump = sh("ls " .. q(dir) .. "/cg.out.* | tail -1"):gsub("%s+$", "")
      out = sh("callgrind_annotate --inclusive=yes " .. q(dump) .. " 2>/dev/null")
    end)
  end
  os.execute("kill -QUIT " .. pid .. " 2>/dev/null; sleep 2; kill " .. pid .. " 2>/dev/null")
  os.execute("rm -rf " .. q(dir))
  if not ok then
    up1.stop()
    up2.stop()
    error(err, 0)
  end
  local function count_of(text) return tonumber((text:gsub(",", ""))) end
  local result = { total = count_of(out:match("([%d,]+)%s+%(100%.0%%%)%s+PROGRAM TOTALS") or "0") / count, parts = {} }
  for _, part in ipairs(PARTS) do
    local n = 0
    for line in out:gmatch("[^\n]+") do
      local counted = line:find(part[2], 1, true) and line:match("^%s*([%d,]+)") -- not a line of another listing
      if counted then n = math.max(n, count_of(counted)) end
    end
    result.parts[part[1]] = n / count
  end
  return result
end

local gateway, keepalive, floor = measure("gateway"), measure("keepalive"), measure("floor")
up1.stop()
up2.stop()
print(("note: nginx worker instructions per request (callgrind, %d requests, 8 in flight): gateway %.1fk, keepalive "
  .. "proxy_pass %.1fk, %.2fx; the floor (the Lua phases with no engine, bench_gateway.lua) %.1fk, %.2fx"):format(count,
  gateway.total / 1e3, keepalive.total / 1e3, gateway.total / keepalive.total, floor.total / 1e3,
  floor.total / keepalive.total))
local parts = {}
for i, part in ipairs(PARTS) do parts[i] = ("%s %.1fk"):format(part[1], gateway.parts[part[1]] / 1e3) end
print("note: the gateway's per request, inclusive: " .. table.concat(parts, ", "))
