-- One nginx for the nginx benches (bench/embedding/bench_nginx.lua, bench_gateway.lua): an example configuration
-- filled in as docs/embedding.md says, plus the bench's own baseline servers, started from a temporary folder; its
-- workers' CPU seconds (bench/lib/proc_cpu.lua), and its stop. Run from the source root (`require
-- "bench.lib.nginx_front"`), with spec/ on package.path.
local proc_cpu = require "bench.lib.proc_cpu"
local shell = require "spec.support.shell"
local sh, q, have = shell.sh, shell.q, shell.have

local M = {}

--- The Lua module the Lua examples load (their load_module line), and the kit it needs loaded before it.
M.LUA_MODULE = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
M.NDK_MODULE = "/usr/lib/nginx/modules/ndk_http_module.so"

--- The load_module lines of nginx's Lua module, for a configuration that does not load it (the native gateway's)
--- in front of a baseline that runs Lua (gateway_floor).
M.LUA_PRELUDE = ("load_module %s;\nload_module %s;\n"):format(M.NDK_MODULE, M.LUA_MODULE)

--- nginx's binary: $RF_NGINX, else `nginx` on PATH, else /usr/sbin/nginx when it exists; nil without one.
-- @return string or nil
function M.binary()
  return os.getenv("RF_NGINX") or (have("nginx") and "nginx") or (io.open("/usr/sbin/nginx") and "/usr/sbin/nginx")
    or nil
end

--- What a bench of the build at `build` cannot run without, named for its "skipped (no …)" line, or nil: nginx, its
--- Lua module, the build's LuaJIT module (RF_LUA), retryfreeze-serve, then each of the commands `tools` lists, and
--- with `module` the build's nginx module.
-- @param build string: the build directory; tools nil or an array of command names (e.g. {"wrk"}); module true to
--   need the nginx module (M.module)
-- @return string or nil
function M.missing(build, tools, module)
  if not M.binary() then return "nginx" end
  if not io.open(M.LUA_MODULE) then return M.LUA_MODULE end
  if module and not io.open(M.module(build)) then return M.module(build) .. " (RF_NGINX_MODULE, nginx-dev)" end
  for _, tool in ipairs(tools or {}) do
    if not have(tool) then return tool end
  end
  if not io.open(build .. "/lib/lua/luajit/retryfreeze/core.so") then return build .. "/lib/lua/luajit (RF_LUA)" end
  if not io.open(build .. "/bin/retryfreeze-serve") then return build .. "/bin/retryfreeze-serve" end
  return nil
end

--- The build's nginx module (cmake/nginx_module.cmake), relative to the source root as build is.
-- @param build string: the build directory
-- @return string: its path
function M.module(build)
  return build .. "/lib/nginx/ngx_http_retryfreeze_module.so"
end

--- A new temporary folder /tmp/rf-bench-TAG.XXXXXX, mode 0755 (nginx's workers may run as nobody).
-- @param tag string
-- @return string: its path
function M.temp_dir(tag)
  local dir = sh("mktemp -d /tmp/rf-bench-" .. tag .. ".XXXXXX"):gsub("%s+$", "")
  os.execute("chmod 0755 " .. q(dir))
  return dir
end

--- A loopback port nothing listens on, from 20000..32000 (below the ephemeral range).
-- @return integer or nil
function M.free_port()
  return tonumber(sh([[bash -c 'for p in $(shuf -i 20000-32000 -n 50); do ]]
    .. [[(echo >/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; break; }; done']]))
end

--- The gateway benches' baseline: nginx's own proxy_pass doing the gateway lock's retries (3 tries, its
--- maxAttempts, on error, timeout and 503 within its 2.5 s, each bounded by its 1 s per-try timeout) over the two
--- upstream servers (the first listed twice: proxy_next_upstream moves to the next server of the group, never back
--- to one that failed), with a keepalive pool: upstream rf_bench_keepalive and a server on port.
-- @param port integer: the baseline server's port; port1, port2 integers: the two upstream servers' ports
-- @return string: configuration text for the end of the http block (M.start's servers)
function M.gateway_baseline(port, port1, port2)
  return ([[
  upstream rf_bench_keepalive {
    server 127.0.0.1:%d max_fails=0;
    server 127.0.0.1:%d max_fails=0;
    server 127.0.0.1:%d max_fails=0;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:%d;
    location / {
      proxy_pass http://rf_bench_keepalive;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_next_upstream error timeout http_503;
      proxy_next_upstream_tries 3;
      proxy_next_upstream_timeout 2500ms;
      proxy_connect_timeout 1s;
      proxy_send_timeout 1s;
      proxy_read_timeout 1s;
    }
  }
]]):format(port1, port2, port1, port)
end

--- The floor under the gateway mode's cost (bench_gateway.lua): a server whose upstream block runs the lean gateway's
--- two Lua phases doing only what any balancer must, and no engine: the balancer keeps a table in ngx.ctx, sets each
--- try's timeouts, allows a third try and sets the peer (port1 and port2 in turn); the log phase reads the table. No
--- route, no decision, no ledger line: what it costs over gateway_baseline is what nginx's Lua phases cost before a
--- gateway does anything. Needs lua-resty-core (the gateway's configuration loads it).
-- @param port the port it listens on; port1, port2 the upstreams' ports
-- @return the configuration text, for the end of the http block
function M.gateway_floor(port, port1, port2)
  return ([[
  upstream rf_bench_floor {
    server 0.0.0.1;
    balancer_by_lua_block {
      local balancer = require "ngx.balancer"
      local ctx = ngx.ctx.floor
      if not ctx then
        ctx = { tries = 0 }
        ngx.ctx.floor = ctx
      end
      ctx.tries = ctx.tries + 1
      local turn = package.loaded.rf_bench_floor -- the worker's peer rotation
      if not turn then
        turn = { next = 0 }
        package.loaded.rf_bench_floor = turn
      end
      turn.next = turn.next %% 2 + 1
      balancer.set_timeouts(1, 1, 1)
      if ctx.tries < 3 then balancer.set_more_tries(1) end
      balancer.set_current_peer("127.0.0.1", turn.next == 1 and %d or %d)
    }
    keepalive 64;
  }
  server {
    listen 127.0.0.1:%d;
    location / {
      proxy_pass http://rf_bench_floor;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_next_upstream error timeout invalid_header http_502 http_503 http_504 http_429 non_idempotent;
      proxy_next_upstream_tries 0;
      proxy_next_upstream_timeout 0;
      log_by_lua_block {
        local ctx = ngx.ctx.floor
        if ctx then ctx.status = ngx.status end
      }
    }
  }
]]):format(port1, port2, port)
end

--- Starts nginx on an example configuration and waits until every url answers (any status but none).
-- @param opts {what = the bench's name (its messages), dir = M.temp_dir's folder, conf_in = the example's path
--   (examples/…/nginx.conf.in), values = {PLACEHOLDER = value, …} (each @NAME@ of conf_in; DIR is dir unless
--   given), servers = configuration text added at the end of its http block (the baselines), prelude = nil or
--   configuration text put before it (load_module lines the baselines need and the example does not load),
--   urls = {name = url}}
-- @return {master = the master's pid, workers_cpu = function() → the CPU seconds its workers used so far,
--   stop = function() (kill -QUIT, then half a second)}; raises with nginx's output and error log when a url never
--   answered (nginx stopped first)
function M.start(opts)
  local dir = opts.dir
  local conf = assert(io.open(opts.conf_in)):read("a")
  local values = { DIR = dir }
  for k, v in pairs(opts.values) do values[k] = v end
  conf = (opts.prelude or "") .. conf:gsub("@(%u[%u%d_]*)@", values)
  local n
  conf, n = conf:gsub("\n}%s*$", function() return "\n" .. opts.servers .. "}\n" end)
  assert(n == 1, opts.conf_in .. " does not end with the http block's '}'")
  local f = assert(io.open(dir .. "/nginx.conf", "w"))
  f:write(conf)
  f:close()
  local master = tonumber(sh("cd " .. q(dir) .. " && (" .. M.binary() .. " -p " .. q(dir)
    .. " -c nginx.conf >nginx.out 2>&1 & echo $!)"))
  local front = { master = master }
  function front.stop() os.execute("kill -QUIT " .. master .. " 2>/dev/null; sleep 0.5") end
  function front.workers_cpu() return proc_cpu.children_cpu_s(master) end
  local ready = false
  for _ = 1, 100 do
    ready = true
    for _, u in pairs(opts.urls) do
      if sh("curl -s -o /dev/null -w '%{http_code}' " .. u .. " 2>/dev/null") == "000" then ready = false end
    end
    if ready then break end
    os.execute("sleep 0.1")
  end
  if not ready then
    print(sh("cat " .. q(dir) .. "/nginx.out " .. q(dir) .. "/error.log"))
    front.stop()
    error(opts.what .. ": nginx did not answer on every port")
  end
  return front
end

return M
