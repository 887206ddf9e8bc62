--- `retryfreeze run FLOW.lua [args…]`: runs a flow script with retryfreeze loaded.
local table = require("retryfreeze.compat").table
local flow = require "retryfreeze.flow"

local M = {
  summary = "run a Lua flow script with retryfreeze loaded",
  usage = "retryfreeze run FLOW.lua [args...]\n\n  Runs FLOW.lua with `arg` set as lua(1) does (arg[0] = FLOW.lua).\n"
    .. "  Exit 0 when the script returns, its own os.exit code, 1 when it raises an error, 2 without FLOW.lua or\n"
    .. "  when FLOW.lua cannot be read (missing, not a regular file, over the cap) or does not compile.",
}

function M.run(args, _, err)
  if #args < 1 then
    err:write("retryfreeze run: expected FLOW.lua\nusage: ", M.usage, "\n")
    return 2
  end
  local path = args[1]
  local ok, why, stage = flow.run(path, table.move(args, 2, #args, 1, {}))
  if not ok then
    err:write("retryfreeze run: ", tostring(why), "\n")
    return stage == "load" and 2 or 1 -- 2: input that cannot be used, as a missing lock is for check
  end
  return 0
end

return M
