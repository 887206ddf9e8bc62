-- How long the machine kept this thread from running, so that a timing spec can judge the client net of it:
-- the time the thread waited, runnable, for a CPU (the second field of /proc/thread-self/schedstat, in ns: the
-- kernel's run-queue delay) plus the time the hypervisor took the machine's CPUs away (steal, the eighth field
-- of /proc/stat's "cpu" line, in USER_HZ ticks of 10 ms, summed over every CPU: an overestimate for one thread,
-- which only loosens a bound). A spec subtracts the stall that fell inside a window from the time it measured
-- there; the client's own work in the window (its CPU time) still counts in full.
local core = require "retryfreeze.core"
local M = {}

local function read_line(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local line = f:read("l")
  f:close()
  return line
end

-- Whether this kernel reports run-queue delay (schedstat needs CONFIG_SCHED_INFO, on in Debian's kernels).
local available = read_line("/proc/thread-self/schedstat") ~= nil

--- The clock of the windows (ms). The client's elapsed_ms is its own monotonic reading; a window only needs to
--- be placed around it, and a wall clock that moves a few ms widens or narrows it by as much.
M.now_ms = core.wall_ms

--- The stall so far, in ms (it never goes back). Always 0 where the kernel does not report it: the specs then
--- judge the client without any allowance, as strictly as they can.
function M.ms()
  if not available then return 0 end
  local sched = assert(read_line("/proc/thread-self/schedstat"), "no /proc/thread-self/schedstat")
  local wait_ns = assert(tonumber(sched:match("^%d+ (%d+)")), "schedstat: " .. sched)
  local steal_ticks = tonumber((read_line("/proc/stat") or ""):match("^cpu%s+" .. ("%d+%s+"):rep(7) .. "(%d+)")) or 0
  return wait_ns / 1e6 + steal_ticks * 10
end

--- Calls fn() and returns its first result and the stall (ms) during the call: for a spec that bounds one
--- request's time, `r.elapsed_ms <= budget + 50 + stalled` (the whole call is the window: looser, never tighter).
function M.across(fn)
  local before = M.ms()
  local r = fn()
  return r, M.ms() - before
end

--- The machine's CPU pressure so far, in ms (it never goes back): the time during which at least one runnable
--- task waited for a CPU ("some total" of /proc/pressure/cpu, in µs: the kernel's PSI). For a window in which a
--- child process does the work (the CLI), whose own run-queue delay this thread cannot read: an overestimate for
--- that child, which only loosens a bound. Always 0 where the kernel has no PSI (judged without allowance).
function M.machine_ms()
  local line = read_line("/proc/pressure/cpu")
  local us = line and tonumber(line:match("total=(%d+)"))
  return us and us / 1000 or 0
end

--- A face of `client` for retryfreeze.scheduler that samples the stall after every pass of the client
--- (client:_run), and the samples {t_ms, stall_ms} in time order (the first taken now).
function M.sampled(client)
  local samples = { { M.now_ms(), M.ms() } }
  local driven = setmetatable({
    _run = function(_, wait_ms)
      local done = client:_run(wait_ms)
      samples[#samples + 1] = { M.now_ms(), M.ms() }
      return done
    end,
  }, { __index = function(_, k) return function(_, ...) return client[k](client, ...) end end })
  return driven, samples
end

--- The stall (ms) between the time from_ms and a reading stall_end (M.ms(), taken when the window ended): the
--- reading minus the last sample at or before from_ms (an earlier sample only widens the window); 0 when the
--- window ended before it began.
function M.since(samples, from_ms, stall_end)
  local before = samples[1][2]
  for _, s in ipairs(samples) do
    if s[1] > from_ms then break end
    before = s[2]
  end
  return math.max(0, stall_end - before)
end

return M
