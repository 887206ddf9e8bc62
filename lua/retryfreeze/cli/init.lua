--- The retryfreeze command line: dispatches subcommands. Exit codes: 0 ok, 1 a check failed,
--- 2 bad usage or bad input. Each subcommand lives in retryfreeze.cli.<name> and exports
--- {summary = "...", usage = "...", run = function(args, out, err, bindir) → exit code}; bindir is the
--- directory of the running retryfreeze binary (where retryfreeze-serve lives).
local rf = require "retryfreeze"

local M = {}

local commands <const> = { "check", "decide", "run", "demo", "serve", "stats", "gate", "soak", "model", "diff",
  "signoff", "verify" }

--- The subcommand names, in help order (a name whose module is absent is skipped).
M.commands = commands

local function load_command(name)
  local ok, mod = pcall(require, "retryfreeze.cli." .. name)
  if ok then return mod end
  if tostring(mod):find("module 'retryfreeze.cli." .. name .. "' not found", 1, true) then return nil end
  error(mod, 0)
end

local function usage(out)
  out:write("usage: retryfreeze <command> [options]\n\ncommands:\n")
  for _, name in ipairs(commands) do
    local cmd = load_command(name)
    if cmd then out:write(string.format("  %-8s %s\n", name, cmd.summary)) end
  end
  out:write("\nretryfreeze <command> --help shows a command's options.\n",
    "exit codes: 0 ok, 1 a check failed, 2 bad usage or bad input\n")
end

--- Runs the command line.
-- @param argv table: argv[0] is the program, argv[1..] the arguments
-- @return integer exit code
function M.main(argv)
  local name = argv[1]
  if name == nil or name == "--help" or name == "-h" or name == "help" then
    usage(name and io.stdout or io.stderr)
    return name and 0 or 2
  end
  if name == "--version" then
    io.stdout:write("retryfreeze ", rf.VERSION, "\n")
    return 0
  end
  local cmd = load_command(name)
  if cmd == nil then
    io.stderr:write("retryfreeze: unknown command '", name, "'\n")
    usage(io.stderr)
    return 2
  end
  local args = table.move(argv, 2, #argv, 1, {})
  if args[1] == "--help" or args[1] == "-h" then
    io.stdout:write("usage: ", cmd.usage, "\n")
    return 0
  end
  return cmd.run(args, io.stdout, io.stderr, argv.bindir)
end

return M
