-- ctest nginx_lua: nginx with lua-nginx-module (LuaJIT) in front of retryfreeze-serve, every request through
-- rf.flow (examples/nginx), its steps through the FFI (rf.ffi is checked true in the workers). 200 requests with
-- curl (20 at a time), with a graceful reload (SIGHUP) one second in, then a SIGTERM: the ledger holds exactly a
-- line per request (each worker holds its lines: none lost as old workers exit); the upstream saw exactly the
-- attempts the ledger records; keyed POSTs kept one key
-- on every attempt (a "503,200" script succeeds in 2 attempts only when the retry carries the first attempt's
-- key); keyless POSTs were sent once; Retry-After was honoured;
-- no request outlived the lock's totalBudgetMs + 50 ms; nginx's error log holds no Lua error.
-- Usage: luajit spec/nginx_lua_check.lua BUILD_DIR SOURCE_DIR (ctest: the build's luajit, whose module nginx loads
-- too, so that a LuaJIT-only build runs it; any Lua the build made the module for will do).
local build, src = arg[1], arg[2]
dofile(src .. "/spec/support/check_paths.lua")(build, src)
local rf = require "retryfreeze"
local upstream = require "retryfreeze.upstream"

local shell = require "spec.support.shell"
local sh, q = shell.sh, shell.q
local checks = require("spec.support.checks")("nginx_lua")
local check = checks.check

local dir = sh("mktemp -d /tmp/rf-nginx-lua.XXXXXX"):gsub("%s+$", "")
local lock_path = src .. "/examples/nginx/proxy.lock.json"
local policy = assert(rf.load(lock_path))
local budget_ms = policy:routes()[1].total_budget_ms
local up = assert(upstream.start{ bindir = build .. "/bin", stall_ms = 2000, max_seconds = 300,
                                  faults = "503=0.1,429=0.03,timeout=0.03,reset=0.03,ra=1" })
-- A free loopback port below the ephemeral range (32768..60999), so that no outgoing connection holds it; if
-- nginx still cannot bind it (another test took it meanwhile), another port, up to 5 times.
local function pick_port()
  return tonumber(sh([[bash -c 'for p in $(shuf -i 20000-32000 -n 50); do ]]
    .. [[(echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; break; }; done']]))
end
local conf_in = assert(io.open(src .. "/examples/nginx/nginx.conf.in")):read("a")
-- One location of the check's own: which decision path nginx's LuaJIT took (rf.ffi: the FFI path, docs/lua.md).
local conf_ffi, found = conf_in:gsub("location / {", "location = /__rf_ffi { content_by_lua_block { "
  .. "ngx.print(tostring(require('retryfreeze').ffi)) } }\n    location / {", 1)
assert(found == 1, "examples/nginx/nginx.conf.in has no 'location / {'")
conf_in = conf_ffi
local ledger = dir .. "/ledger.jsonl"
-- Started as root, nginx's workers run as nobody, as the example documents: the master loads the lock and the
-- Lua modules and opens the ledger before they drop privileges (init_by_lua_block), so the workers read no file
-- of the source or build tree (which may sit under a 0700 folder: a clone in /root) and append to a ledger only
-- root can write. The folder stays traversable (0755) for nginx's temp paths.
os.execute("chmod 0755 " .. q(dir))
local port, nginx_pid
local started = false
for _ = 1, 5 do
  port = pick_port()
  local conf = conf_in:gsub("@(%u[%u_]*)@", { DIR = dir, SRC = src, CPATH = build .. "/lib/lua/luajit",
    LOCK = lock_path, LEDGER = ledger, UPSTREAM_PORT = tostring(up.port), PORT = tostring(port) })
  local f = assert(io.open(dir .. "/nginx.conf", "w"))
  f:write(conf)
  f:close()
  nginx_pid = tonumber(sh("cd " .. q(dir) .. " && (nginx -p " .. q(dir) .. " -c nginx.conf >nginx.out 2>&1 & echo $!)"))
  for _ = 1, 100 do
    if sh("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" .. port .. "/items/warmup 2>/dev/null") ~= "000" then
      started = true
      break
    end
    if sh("kill -0 " .. nginx_pid .. " 2>/dev/null && echo alive") == "" then break end -- it could not bind
    os.execute("sleep 0.1")
  end
  if started then break end
  os.execute("kill " .. nginx_pid .. " 2>/dev/null; sleep 0.2")
end
check(started, "nginx with the Lua module answers on 127.0.0.1:" .. port)
local ffi_on = sh("curl -s http://127.0.0.1:" .. port .. "/__rf_ffi 2>/dev/null")
check(ffi_on == "true", "nginx's workers decide through the FFI path (rf.ffi: " .. ffi_on .. ")")

-- 200 requests: 60 keyed "503,200", 30 keyed "429;retry-after=1,200", 30 keyless "503,200", 80 GETs with the
-- upstream's random faults. Each line: kind method path key script ("-" for none); 20 curls at a time.
local lines = {}
local run_id = tostring(os.time())
for i = 1, 200 do
  if i <= 60 then
    lines[#lines + 1] = "keyed POST /v1/jobs k" .. run_id .. "-" .. i .. " 503,200"
  elseif i <= 90 then
    lines[#lines + 1] = "ra POST /v1/jobs r" .. run_id .. "-" .. i .. " 429;retry-after=1,200"
  elseif i <= 120 then
    lines[#lines + 1] = "keyless POST /v1/jobs - 503,200"
  else
    lines[#lines + 1] = "get GET /items/" .. i .. " - -"
  end
end
local list = dir .. "/requests.txt"
local f = assert(io.open(list, "w"))
f:write(table.concat(lines, "\n"), "\n")
f:close()
local worker_sh = dir .. "/one.sh"
f = assert(io.open(worker_sh, "w"))
f:write([[
kind=$1 method=$2 path=$3 key=$4 script=$5
set --
[ "$key" != - ] && set -- "$@" -H "Idempotency-Key: $key"
[ "$script" != - ] && set -- "$@" -H "X-Fault-Script: $script"
[ "$method" = POST ] && set -- "$@" -X POST -d "x=1"
curl -s -o /dev/null -D - -w 'TOTAL %{time_total}\n' "$@" "http://127.0.0.1:]] .. port .. [[$path" | tr -d '\r' |
  awk -v k="$kind" '/^X-Retryfreeze-Outcome:/{o=$2} /^X-Retryfreeze-Attempts:/{a=$2} /^TOTAL/{print k, o, a, $2}'
]])
f:close()
-- A graceful reload (SIGHUP) one second in, mid-traffic: the old workers finish their requests and exit while the
-- new ones take the rest. Each worker holds its ledger lines (ledger:hold); none may be lost on the way out.
local results_file = dir .. "/results.txt"
sh("(xargs -P 20 -L 1 bash " .. q(worker_sh) .. " < " .. q(list) .. " > " .. q(results_file) .. ") & sleep 1; kill -HUP "
  .. nginx_pid .. "; wait")
local results = assert(io.open(results_file)):read("a")
-- Then a fast shutdown (SIGTERM), which runs exit_worker_by_lua too; the ledger is read once nginx is gone.
os.execute("kill " .. nginx_pid)
for _ = 1, 100 do
  if sh("kill -0 " .. nginx_pid .. " 2>/dev/null && echo alive") == "" then break end
  os.execute("sleep 0.05")
end
local stats = assert(upstream.stats(up.url))
up.stop()

local by_kind, n_results, overrun = {}, 0, 0
for line in results:gmatch("[^\n]+") do
  local kind, outcome, attempts, total = line:match("^(%a+) (%a+) (%d+) ([%d.]+)")
  if kind then
    n_results = n_results + 1
    by_kind[kind] = by_kind[kind] or {}
    table.insert(by_kind[kind], { outcome = outcome, attempts = tonumber(attempts) })
    if tonumber(total) * 1000 > budget_ms + 50 then overrun = overrun + 1 end
  end
end
check(n_results == 200, "200 responses carry the flow's outcome (got " .. n_results .. ")")
check(overrun == 0, "no request outlived totalBudgetMs " .. budget_ms .. " + 50 ms at the client (" .. overrun .. " did)")

local records, attempts_sum, ledger_overrun = {}, 0, 0
for rec in rf.ledger.read(ledger) do
  records[#records + 1] = rec
  attempts_sum = attempts_sum + rec.attempts
  if rec.elapsed_ms > budget_ms + 50 then ledger_overrun = ledger_overrun + 1 end
end
-- The warm-up GET (the first that nginx answered) went through the flow too: a line per request nginx served, none
-- lost in the reload nor at the shutdown.
check(#records == n_results + 1, "the ledger holds a line per request, through a reload and a shutdown (" .. #records
  .. " lines for " .. n_results + 1 .. " requests)")
check(stats.requests == attempts_sum, -- /__stats is not an attempt: the upstream does not count it
  "the upstream saw exactly the attempts the ledger records (" .. stats.requests .. " vs " .. attempts_sum .. ")")
check(ledger_overrun == 0, "no ledger line has elapsed_ms over the budget + 50 ms")
check(stats.duplicate_executions == 0, "no key executed twice upstream")

local keyed_ok = 0
for _, r in ipairs(by_kind.keyed or {}) do if r.outcome == "success" and r.attempts == 2 then keyed_ok = keyed_ok + 1 end end
check(keyed_ok == 60, "keyed POSTs kept one key on every attempt: 60 of 60 '503,200' succeeded on attempt 2 (" .. keyed_ok .. ")")
local once = 0
for _, r in ipairs(by_kind.keyless or {}) do if r.attempts == 1 then once = once + 1 end end
check(once == 30, "keyless POSTs were sent once (" .. once .. " of 30)")
local honoured, ra_seen = 0, 0
for _, rec in ipairs(records) do
  for i, t in ipairs(rec.tries) do
    if t.retry_after and rec.tries[i + 1] then
      ra_seen = ra_seen + 1
      local wait = rf.parse_retry_after(t.retry_after)
      if wait and rec.tries[i + 1].delay_ms >= wait then honoured = honoured + 1 end
    end
  end
end
check(ra_seen >= 30 and honoured == ra_seen, "Retry-After honoured before every retry that followed one (" ..
  honoured .. " of " .. ra_seen .. ")")
local log = assert(io.open(dir .. "/error.log")):read("a")
local _, old_workers = log:gsub("gracefully shutting down", "")
check(log:find("signal 1 (SIGHUP) received", 1, true) ~= nil and old_workers >= 2,
  "nginx reloaded mid-traffic: SIGHUP received, " .. old_workers .. " old workers shut down gracefully")
local lua_errors = 0
for line in log:gmatch("[^\n]+") do
  -- Lua errors: an aborted handler, a runtime error, a failed init_worker; and any alert or crit. The
  -- injected resets' "recv() failed (104: …)" lines are nginx logging the upstream's faults, not Lua errors.
  local lua_error = line:find("lua entry thread aborted", 1, true) or line:find("runtime error", 1, true)
    or line:find("_by_lua", 1, true) and line:find("%[error%]") or line:find("%[alert%]") or line:find("%[crit%]")
  if lua_error then
    lua_errors = lua_errors + 1
    if lua_errors <= 5 then print("  " .. line) end
  end
end
check(lua_errors == 0, "nginx's error log holds no Lua error (" .. lua_errors .. ")")
checks.finish(dir)
