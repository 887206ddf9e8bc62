--- `retryfreeze run FLOW.lua [args…]`: runs a flow script with retryfreeze loaded.
local table = require("retryfreeze.compat").table
local cli_args = require "retryfreeze.cli.args"
local flow = require "retryfreeze.flow"
local util = require "retryfreeze.util"

return cli_args.command {
  name = "run",
  summary = "run a Lua flow script with retryfreeze loaded",
  args = "FLOW.lua [ARGS...]",
  description = "  Runs FLOW.lua with `arg` set as lua(1) does (arg[0] = FLOW.lua); every argument after FLOW.lua is\n"
    .. "  the script's (a FLOW.lua that starts with '-' follows \"--\"). Exit 0 when the script returns, its own\n"
    .. "  os.exit code, 1 when it raises an error, 2 without FLOW.lua or when FLOW.lua cannot be read (missing,\n"
    .. "  not a regular file, over the cap) or does not compile.",
  passes_on = true,

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, _, pos)
    local ok, why, stage = flow.run(pos[1], table.move(pos, 2, #pos, 1, {}))
    if ok then return 0 end
    if stage == "load" then ctx.fail(why) end -- 2: input that cannot be used, as a missing lock is for check
    -- The script's error message is one value (it may quote anything); its traceback keeps its lines.
    local message, traceback = tostring(why):match("^(.-)(\nstack traceback:\n.*)$")
    ctx.err:write("retryfreeze run: ", util.printable(message or tostring(why)), traceback or "", "\n")
    return 1
  end,
}
