--- Peak resident memory of this process (VmHWM in /proc/self/status), in KiB; -1 where /proc has no such line.
-- The benches that measure memory run each measurement in a process of its own, so the peak is that run's.
return function()
  local f = io.open("/proc/self/status")
  if not f then return -1 end
  local kb = f:read("a"):match("VmHWM:%s*(%d+)")
  f:close()
  return math.tointeger(tonumber(kb)) or -1
end
