--- `retryfreeze serve [options]`: the fault-injecting upstream in the foreground (retryfreeze-serve), which
--- reads and checks every option itself (its own usage errors exit 2).
local cli_args = require "retryfreeze.cli.args"
local upstream = require "retryfreeze.upstream"
local util = require "retryfreeze.util"

return cli_args.command {
  name = "serve",
  summary = "run the fault-injecting test upstream on 127.0.0.1",
  args = "[--port N] [--faults SPEC] [--seed S] [--stall-ms MS] [--max-seconds SEC]",
  description = "  Runs retryfreeze-serve with these arguments (see `retryfreeze serve --help-upstream` for its options\n"
    .. "  and the fault grammar).",
  passes_on = true,
  passes_to = "retryfreeze-serve",

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, _, args)
    local program, missing = upstream.program(ctx.bindir)
    if not program then ctx.fail(missing, 127) end -- as a shell says for a command it cannot find
    local passed = {}
    for i, a in ipairs(args) do
      -- No option of the upstream takes a control character, and its messages quote what it refuses as is.
      if util.printable(a) ~= a then ctx.usage_error("argument " .. i .. " holds a control character: " .. a) end
      passed[i] = a == "--help-upstream" and "--help" or a
    end
    -- In the CLI host, become the server (execv), so SIGTERM and SIGINT reach it and nothing is left behind.
    local has_host, host = pcall(require, "retryfreeze.host")
    if has_host then
      local _, why = host.exec(program, passed)
      ctx.fail(why, 127)
    end
    local parts = { util.shell_quote(program) }
    for _, a in ipairs(passed) do parts[#parts + 1] = util.shell_quote(a) end
    local ok, how, code = os.execute(table.concat(parts, " "))
    if ok then return 0 end
    return how == "exit" and code or 1
  end,
}
