-- The start the FFI harness scripts share (spec/harness/ffi_*.lua, run as SCRIPT SEED DRAWS LOCK...): their draws
-- from spec.support.minstd seeded with SEED, the locks loaded, and the first line printed, "ffi true|false" (which
-- path the module took), so that a comparison of two runs' outputs starts by saying which is which.
local minstd = require "spec.support.minstd"

--- Reads arg, prints the ffi line and loads the locks; raises when a lock does not load.
-- @param rf the retryfreeze module
-- @return draws integer, random and pick (spec.support.minstd), policies (list, in the order given)
return function(rf)
  local seed, draws = tonumber(arg[1]), tonumber(arg[2])
  local random, pick = minstd(seed)
  print("ffi " .. tostring(rf.ffi))
  local policies = {}
  for i = 3, #arg do policies[#policies + 1] = assert(rf.load(arg[i])) end
  return draws, random, pick, policies
end
