--- The retryfreeze command line: dispatches subcommands. Exit codes: 0 ok, 1 a check failed,
--- 2 bad usage or bad input. Each subcommand lives in retryfreeze.cli.<name> and exports
--- {summary = "...", usage = "...", run = function(args, out, err, bindir) → exit code}; bindir is the
--- directory of the running retryfreeze binary (where retryfreeze-serve lives).
local table = require("retryfreeze.compat").table
local argparse = require "argparse"
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"

local M = {}

local commands = { "check", "decide", "run", "demo", "serve", "stats", "gate", "report", "soak", "model", "diff",
  "signoff", "verify", "budget" }

--- The subcommand names, in help order (a name whose module is absent is skipped).
M.commands = commands

--- The commands of the dispatcher itself (no module of their own).
M.builtins = { "help" }

local known = {}
for _, name in ipairs(commands) do known[name] = true end

local function load_command(name)
  if not known[name] then return nil end
  local ok, mod = pcall(require, "retryfreeze.cli." .. name)
  if ok then return mod end
  if tostring(mod):find("module 'retryfreeze.cli." .. name .. "' not found", 1, true) then return nil end
  error(mod, 0)
end

--- The top-level parser: one argparse command per subcommand, so a mistyped name gets "Did you mean 'check'?".
-- Each command takes its arguments verbatim (handle_options off): the command parses them itself.
local function top_parser()
  local p = argparse("retryfreeze"):add_help(false):help_max_width(110)
    :usage("usage: retryfreeze <command> [options]\n       retryfreeze help [COMMAND]")
    :epilog("retryfreeze <command> --help (or retryfreeze help <command>) shows a command's options.\n"
      .. "exit codes: 0 ok, 1 a check failed, 2 bad usage or bad input")
    :command_target("command")
  for _, name in ipairs(commands) do
    local cmd = load_command(name)
    if cmd then p:command(name):summary(cmd.summary):handle_options(false):argument("args"):args("*") end
  end
  p:command("help"):summary("show this list, or a command's help: retryfreeze help COMMAND")
    :handle_options(false):argument("args"):args("*")
  return p
end

local function usage(out)
  out:write(top_parser():get_help(), "\n")
end

--- A command's help: generated from its option table (retryfreeze.cli.args) when it has one, else its usage.
local function command_help(name, cmd)
  if cmd.options then return cli_args.help(name, cmd.options, cmd.usage, cmd.option_help) end
  return "usage: " .. cmd.usage .. "\n"
end

-- Whether the arguments ask for help: for a command that parses its options, "--help" or "-h" anywhere before
-- "--"; for one that passes its arguments on (run, serve), only as the first argument.
local function wants_help(cmd, args)
  if not cmd.options then return args[1] == "--help" or args[1] == "-h" end
  for _, a in ipairs(args) do
    if a == "--" then return false end
    if a == "--help" or a == "-h" then return true end
  end
  return false
end

--- Runs the command line.
-- @param argv table: argv[0] is the program, argv[1..] the arguments
-- @return integer exit code
function M.main(argv)
  local name = argv[1]
  if name == nil then
    usage(io.stderr)
    return 2
  end
  if name == "--help" or name == "-h" then
    usage(io.stdout)
    return 0
  end
  if name == "--version" then
    local curl = rf.libcurl
    io.stdout:write("retryfreeze ", rf.VERSION, "\n", "libcurl ", curl.version, curl.ssl and (" " .. curl.ssl) or "",
      ", HTTP/2: ", curl.http2 and "yes" or "no", "\n")
    return 0
  end
  -- A known command is loaded alone; the parser, which loads every command for its list and its "did you
  -- mean", is built only for a name that is not one (compiling every command cost more than a short run).
  local cmd = name ~= "help" and load_command(name)
  if not cmd then
    local ok, parsed = top_parser():pparse({ name })
    if not ok then
      io.stderr:write("retryfreeze: ", parsed, "\n", "retryfreeze help lists the commands.\n")
      return 2
    end
  end
  local args = table.move(argv, 2, #argv, 1, {})
  if name == "help" then
    if #args == 0 or (#args == 1 and args[1] == "help") then
      usage(io.stdout)
      return 0
    end
    local target = args[1]
    cmd = load_command(target)
    if #args > 1 or not cmd then
      local _, why = top_parser():pparse({ target })
      io.stderr:write("retryfreeze help: ", #args > 1 and "expected one COMMAND" or why, "\n")
      return 2
    end
    io.stdout:write(command_help(target, cmd))
    return 0
  end
  if wants_help(cmd, args) then
    io.stdout:write(command_help(name, cmd))
    return 0
  end
  return cmd.run(args, io.stdout, io.stderr, argv.bindir)
end

return M
