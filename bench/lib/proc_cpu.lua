-- CPU seconds of processes, from /proc: what the nginx benches (bench/embedding/) compare, the front's own work.
local M = {}

local ticks -- the clock ticks per second /proc counts in (getconf CLK_TCK), read once

--- The CPU seconds (utime + stime, fields 14 and 15 of /proc/PID/stat) the children of process `parent` used so
--- far: nginx's worker processes, given its master's pid. A child gone between the listing and the read counts 0.
-- @param parent integer: a pid
-- @return number: seconds
function M.children_cpu_s(parent)
  if not ticks then
    local p = io.popen("getconf CLK_TCK")
    ticks = tonumber(p:read("a")) or 100
    p:close()
  end
  local list = io.popen("pgrep -P " .. math.tointeger(parent))
  local pids = list:read("a")
  list:close()
  local total = 0
  for pid in pids:gmatch("%d+") do
    local s = io.open("/proc/" .. pid .. "/stat")
    if s then
      local fields = s:read("a"):match("%) (.*)$")
      s:close()
      local i, utime, stime = 2, nil, nil -- field 3 (state) is the first after ") "
      for v in fields:gmatch("%S+") do
        i = i + 1
        if i == 14 then utime = tonumber(v) elseif i == 15 then stime = tonumber(v) break end
      end
      total = total + (utime + stime) / ticks
    end
  end
  return total
end

return M
