--- The retryfreeze command line: dispatches subcommands. Exit codes: 0 ok, 1 a check failed, 2 bad usage or
--- bad input. Each subcommand lives in retryfreeze.cli.<name> and is a table retryfreeze.cli.args.command
--- defined (its summary, arguments, description and option rows, and run(ctx, opts, positionals) → exit code);
--- this module parses its arguments against its option table before run is called, and hands it a ctx:
---   ctx.out, ctx.err   the standard streams as text writers (M.writer): every byte written is made printable
---   ctx.bindir         the directory of the running retryfreeze binary (where retryfreeze-serve lives), or nil
---   ctx.fail(msg [, code])   ends the command: "retryfreeze NAME: msg" on stderr, exit code (default 2)
---   ctx.usage_error(msg [, suggestion])   the same, then a line "Did you mean …?" and the synopsis (exit 2)
---   ctx.note(msg)            "retryfreeze NAME: msg" on stderr, and go on
---   ctx.fail_ledgers(msg)    ctx.fail for ledgers that could not be read, saying --skip-corrupt at a corrupt line
---   ctx.load_lock(path)      the policy rf.load gives, or ctx.fail with the lock's error (util.lock_error)
local table = require("retryfreeze.compat").table
local argparse = require "argparse"
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local json = require "retryfreeze.json"
local util = require "retryfreeze.util"

local M = {}

local commands = { "check", "decide", "run", "demo", "serve", "stats", "gate", "report", "soak", "model", "diff",
  "signoff", "verify", "budget", "replay", "import", "export" }

--- The subcommand names, in help order (a name whose module is absent is skipped).
M.commands = commands

--- The commands of the dispatcher itself (no module of their own).
M.builtins = { "help" }

local known = {}
for _, name in ipairs(commands) do known[name] = true end

--- A command's module (its table, as retryfreeze.cli.args.command returns it), or nil when the name is no
--- command or its module is absent from this install.
-- @param name string
-- @return table|nil
function M.load_command(name)
  if not known[name] then return nil end
  local ok, mod = pcall(require, "retryfreeze.cli." .. name)
  if ok then return mod end
  if tostring(mod):find("module 'retryfreeze.cli." .. name .. "' not found", 1, true) then return nil end
  error(mod, 0)
end

--- A text writer over a file handle: what the command line writes goes through util.printable, so no byte
--- from a ledger, a lock, a log or an argument can steer the terminal.
-- @param handle file handle (io.stdout, io.stderr)
-- @return {write(self, ...) (lines of text: tab and line feed kept, every other control character written
--   out), printf(self, fmt, ...) (one line: util.format, which also writes out a value's tab or line feed),
--   json(self, value, order) (json.encode, then a newline; stays valid JSON), json_text(self, text) (a JSON
--   document made elsewhere), redraw(self, line) (a carriage return, then the line: a progress line)}
function M.writer(handle)
  local w = {}
  function w:write(...)
    for i = 1, select("#", ...) do handle:write(util.printable((select(i, ...)), "text")) end
    return self
  end
  function w:printf(fmt, ...) return self:write(util.format(fmt, ...)) end
  function w:json_text(text)
    handle:write(util.printable(text, "json"))
    return self
  end
  function w:json(value, order) return self:json_text(json.encode(value, order) .. "\n") end
  function w:redraw(line)
    handle:write("\r", util.printable(line))
    return self
  end
  return w
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
    local cmd = M.load_command(name)
    if cmd then p:command(name):summary(cmd.summary):handle_options(false):argument("args"):args("*") end
  end
  p:command("help"):summary("show this list, or a command's help: retryfreeze help COMMAND")
    :handle_options(false):argument("args"):args("*")
  return p
end

-- Whether the arguments ask for help: "--help" or "-h" anywhere before "--"; for a command that passes its
-- arguments on (run), only before its first argument that is not an option; for one that hands them all to a
-- program (serve), only first.
local function wants_help(cmd, args)
  if cmd.passes_to then return args[1] == "--help" or args[1] == "-h" end
  for _, a in ipairs(args) do
    if a == "--" or (cmd.passes_on and a:sub(1, 1) ~= "-") then return false end
    if a == "--help" or a == "-h" then return true end
  end
  return false
end

-- The end of a command (ctx.fail): carried by error() to main, which writes it and exits with its code.
local Exit = {}

local function context(name, cmd, out, err, bindir)
  local ctx = { name = name, out = M.writer(out), err = M.writer(err), bindir = bindir }
  local prefix = "retryfreeze " .. name .. ": "
  function ctx.fail(msg, code) error(setmetatable({ code = code or 2, text = prefix .. util.printable(msg) .. "\n" }, Exit), 0) end
  function ctx.usage_error(msg, suggestion)
    error(setmetatable({ code = 2, text = prefix .. util.printable(msg) .. (suggestion and "\n"
      .. util.printable(suggestion) or "") .. "\nusage: " .. cmd.synopsis .. "\n(retryfreeze help " .. name
      .. " lists every option)\n" }, Exit), 0)
  end
  function ctx.note(msg) err:write(prefix, util.printable(msg), "\n") end
  function ctx.fail_ledgers(why)
    if why:find("corrupt ledger line", 1, true) then
      ctx.note(why)
      ctx.fail("--skip-corrupt counts and skips corrupt lines")
    end
    ctx.fail(why)
  end
  function ctx.load_lock(path)
    local policy, why = rf.load(path)
    if not policy then ctx.fail(util.lock_error(path, why)) end
    return policy
  end
  return ctx
end

--- Runs one command: parses its arguments against its option table, then calls its run.
-- @param name string; cmd table (M.load_command); args array of strings; out, err file handles; bindir
--   string|nil
-- @return integer exit code
local function run_command(name, cmd, args, out, err, bindir)
  local ctx = context(name, cmd, out, err, bindir)
  local ok, code = xpcall(function()
    local opts, pos, suggestion = cli_args.parse(cmd, args, ctx)
    if not opts then ctx.usage_error(pos, suggestion) end
    return cmd.run(ctx, opts, pos)
  end, function(e)
    if getmetatable(e) == Exit then return e end
    return debug.traceback(tostring(e), 2)
  end)
  if ok then return code end
  if getmetatable(code) == Exit then
    err:write(code.text)
    return code.code
  end
  ctx.err:write("retryfreeze: internal error: ", code, "\n")
  return 2
end

--- Runs the command line.
-- @param argv table: argv[0] is the program, argv[1..] the arguments; argv.bindir the directory of the
--   running binary (nil for the rock's Lua script)
-- @param out, err file handles|nil: where to write (default io.stdout, io.stderr)
-- @return integer exit code
function M.main(argv, out, err)
  out, err = out or io.stdout, err or io.stderr
  local sout, serr = M.writer(out), M.writer(err)
  local name = argv[1]
  if name == nil then
    serr:write(top_parser():get_help(), "\n")
    return 2
  end
  if name == "--help" or name == "-h" then
    sout:write(top_parser():get_help(), "\n")
    return 0
  end
  if name == "--version" then
    local curl = rf.libcurl
    sout:write("retryfreeze ", rf.VERSION, "\n", "libcurl ", curl.version, curl.ssl and (" " .. curl.ssl) or "",
      ", HTTP/2: ", curl.http2 and "yes" or "no", "\n")
    return 0
  end
  -- A known command is loaded alone; the parser, which loads every command for its list and its "did you
  -- mean", is built only for a name that is not one (compiling every command cost more than a short run).
  local cmd = name ~= "help" and M.load_command(name)
  if not cmd and name ~= "help" then
    local _, why = top_parser():pparse({ name })
    serr:write("retryfreeze: ", why, "\n", "retryfreeze help lists the commands.\n")
    return 2
  end
  local args = table.move(argv, 2, #argv, 1, {})
  if name == "help" then
    if #args == 0 or (#args == 1 and args[1] == "help") then
      sout:write(top_parser():get_help(), "\n")
      return 0
    end
    local target = args[1]
    cmd = M.load_command(target)
    if #args > 1 or not cmd then
      local _, why = top_parser():pparse({ target })
      serr:write("retryfreeze help: ", #args > 1 and "expected one COMMAND" or why, "\n")
      return 2
    end
    sout:write(cli_args.help(cmd))
    return 0
  end
  if wants_help(cmd, args) then
    sout:write(cli_args.help(cmd))
    return 0
  end
  return run_command(name, cmd, args, out, err, argv.bindir)
end

return M
