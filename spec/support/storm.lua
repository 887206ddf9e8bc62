-- A retry storm from several processes at once: each runs spec/fleet/storm_worker.lua (Lua 5.4, whatever Lua runs
-- the spec) against the fault-injecting upstream, its retry budget shared through Redis or kept local.
local h = require "spec.helper"
local upstream = require "retryfreeze.upstream"
local redis_server = require "spec.redis_server"
local M = {}

--- Runs `procs` workers at once, each sending `per_proc` requests under the lock at lock_file, and waits for all.
--- Raises when a worker fails or prints no `done` line.
-- @param up_url string: the upstream's base URL; lock_file string: path of the lock the workers load
-- @param redis_url string: the budget's Redis URL, or "local" for a budget of each process's own
-- @param procs integer; per_proc integer
-- @return the requests the upstream saw during the storm, the requests whose budget was shared, those that fell
--   back to a local budget, and a list of what each worker printed (stdout and stderr)
function M.run(up_url, lock_file, redis_url, procs, per_proc)
  local before = assert(upstream.stats(up_url)).requests
  local env = h.lua_env("5.4")
  local handles = {}
  for i = 1, procs do
    handles[i] = io.popen(env .. "lua5.4 spec/fleet/storm_worker.lua " .. h.shell_quote(lock_file) .. " " .. up_url
      .. " " .. redis_url .. " " .. per_proc .. " 2>&1")
  end
  local shared, fallback, outs = 0, 0, {}
  for i = 1, procs do
    local out = handles[i]:read("a")
    outs[i] = out
    assert(handles[i]:close(), out)
    local s, f = ("\n" .. out):match("\ndone %d+ %d+ (%d+) (%d+)")
    assert(s, out)
    shared, fallback = shared + tonumber(s), fallback + tonumber(f)
  end
  return assert(upstream.stats(up_url)).requests - before, shared, fallback, outs
end

--- The parts a storm needs: start() (a describe's setup) starts redis-server (debug commands on) and an upstream
--- that answers 503 to everything, and makes a fresh directory; stop() (its teardown) stops what started and removes
--- the directory. Without redis-server (skip) start() starts nothing and the specs say pending.
-- @param tag string: names the temporary directory (/tmp/rf-TAG.XXXXXX)
-- @return table: start, stop, skip, and srv, up, dir once started (srv may be replaced: stop() stops parts.srv)
function M.servers(tag)
  local parts = { skip = not redis_server.available() }
  function parts.start()
    if parts.skip then return end
    parts.srv = assert(redis_server.start({ debug = true }))
    parts.up = assert(upstream.start({ bindir = h.bindir, faults = "503=1" }))
    parts.dir = h.temp_dir(tag)
  end
  function parts.stop()
    if parts.srv then parts.srv.stop("KILL") end
    if parts.up then parts.up.stop() end
    if parts.dir then os.execute("rm -rf " .. h.shell_quote(parts.dir)) end
  end
  return parts
end

--- A describe block for a storm, pending in a build without the 5.4 module (the workers are Lua 5.4 scripts,
--- <close>): its parts (M.servers(tag)) start in its setup and stop in its teardown, and body(parts, it_redis)
--- declares its tests, it_redis being `it` that says pending without redis-server. A setup the body adds runs after
--- the parts started.
-- @param name string: the block's name; tag string: names the temporary directory; body function
function M.describe(name, tag, body)
  local busted = require "busted" -- the running suite's API (describe, it, …), as a spec file sees it
  local describe_54 = h.has_module("5.4") and busted.describe or busted.pending
  describe_54(name, function()
    local parts = M.servers(tag)
    busted.setup(parts.start)
    busted.teardown(parts.stop)
    body(parts, function(test, fn)
      if parts.skip then busted.pending(test .. " (no redis-server)") else busted.it(test, fn) end
    end)
  end)
end

return M
