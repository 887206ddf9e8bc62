--- Command-line parsing for the retryfreeze subcommands, built on lua-argparse
--- (https://github.com/mpeterv/argparse, Debian `lua-argparse`): typed options from a spec table, usage
--- errors with "did you mean" for a mistyped option, and each command's generated `--help`.
--- Options take "--name value" and "--name=value"; a value may start with '-' ("--now-ms -5").
--- An unknown option, a missing or mistyped value, or a repeated single option is a usage error
--- (the caller exits 2), never ignored.
local math, table = require("retryfreeze.compat").math, require("retryfreeze.compat").table
local argparse = require "argparse"

local M = {}

-- How each option kind reads its value, the placeholder --help shows when the declaration names none, and how
-- --help describes it when the command gives no description (the command's option_help table describes each
-- option; spec/04-cli_spec.lua checks that every one does).
local kinds = {
  string = { argname = "<TEXT>", help = "text" },
  integer = { argname = "<N>", help = "an integer" },
  number = { argname = "<X>", help = "a number" },
  list = { argname = "<TEXT>", help = "text; repeatable, each use adds one" },
  flag = { help = "a flag (takes no value)" },
}

-- An option's line in --help: the command's one-line description, "; repeatable" for a list option.
local function described(kind, text)
  if not text then return kinds[kind].help end
  return kind == "list" and text:find("repeatable", 1, true) == nil and text .. "; repeatable" or text
end

-- An option's declaration: its kind, then optionally the value's name for --help ("string FILE" → "string",
-- "<FILE>"; "string" → "string", nil).
local function split(decl)
  local kind, arg = tostring(decl):match("^(%S+)%s*(.-)$")
  return kind, arg ~= "" and "<" .. arg .. ">" or nil
end

local function converter(name, kind)
  if kind == "integer" then
    return function(v)
      local n = v:match("^%-?%d+$") and math.tointeger(tonumber(v))
      if not n then return nil, string.format("option %s needs an integer, got '%s'", name, v) end
      return n
    end
  elseif kind == "number" then
    return function(v)
      local n = tonumber(v)
      if n == nil then return nil, string.format("option %s needs a number, got '%s'", name, v) end
      return n
    end
  end
  return nil
end

local function sorted_names(spec)
  local names = {}
  for name, decl in pairs(spec) do
    local kind, arg = split(decl)
    if not kinds[kind] or (kind == "flag" and arg) then
      error("retryfreeze.cli.args: option " .. name .. " has unknown kind " .. tostring(decl), 2)
    end
    names[#names + 1] = name
  end
  table.sort(names)
  return names
end

--- Builds the argparse parser of one command.
-- @param name string: the command ("check")
-- @param spec table: {["--name"] = "string"|"integer"|"number"|"flag"|"list"}, a kind that takes a value
--   optionally followed by the value's name for --help ("string FILE" shows `--name <FILE>`; without one, the
--   kind's <TEXT>, <N> or <X>)
-- @param usage string|nil: the command's usage text (its first paragraph is the synopsis, the rest the
--   description), as the command module's `usage` field holds it
-- @param help table|nil: {["--name"] = "one line that says what the option does"}, the command module's
--   `option_help`; an option without one is described by its kind alone ("text", "an integer")
-- @return an argparse parser whose result holds the options (keys without dashes, '-' → '_') and `args`, the
--   positional arguments
function M.parser(name, spec, usage, help)
  help = help or {}
  local p = argparse("retryfreeze " .. name):add_help(false):help_max_width(110):help_description_margin(36)
  if usage then
    local synopsis, rest = usage:match("^(.-)\n\n(.*)$")
    p:usage("usage: " .. (synopsis or usage))
    if rest then p:description(rest) end
  end
  p:argument("args"):args("*"):hidden(true)
  for _, opt in ipairs(sorted_names(spec)) do
    local kind, arg = split(spec[opt])
    local target = opt:sub(3):gsub("%-", "_")
    if kind == "flag" then
      p:flag(opt):target(target):description(described(kind, help[opt]))
    else
      local o = p:option(opt):target(target):argname(arg or kinds[kind].argname):description(described(kind, help[opt]))
      local convert = converter(opt, kind)
      if convert then o:convert(convert) end
      if kind == "list" then o:count("*") end
    end
  end
  p:flag("-h --help"):description("show this help and exit")
  return p
end

--- The generated help of one command: its usage text, then every option with the value it takes and what it does.
-- @param name string, spec table, usage string, help table|nil: as for M.parser
-- @return string, ending in a newline
function M.help(name, spec, usage, help)
  return M.parser(name, spec, usage, help):get_help() .. "\n"
end

-- "--name value" → "--name=value" for the options that take a value, so that a value starting with '-'
-- reads as the value, not as an option (argparse alone would take "-5" for an option).
local function join_values(args, spec)
  local joined, i = {}, 1
  while i <= #args do
    local a = args[i]
    if a == "--" then
      table.move(args, i, #args, #joined + 1, joined)
      break
    end
    local kind = spec[a] and split(spec[a])
    if kind and kind ~= "flag" and args[i + 1] ~= nil then
      joined[#joined + 1] = a .. "=" .. args[i + 1]
      i = i + 2
    else
      joined[#joined + 1] = a
      i = i + 1
    end
  end
  return joined
end

--- Parses a command's arguments.
-- @param args table: the arguments after the subcommand name
-- @param spec table: as for M.parser
-- @return opts table (keys without the leading dashes, '-' → '_'; a list option is an array), positionals
--   table; or nil, message (argparse's, with "Did you mean '--table'?" for a near miss)
function M.parse(args, spec)
  local ok, result = M.parser("", spec):pparse(join_values(args, spec))
  if not ok then return nil, result end
  local positionals = result.args
  result.args = nil
  if result.help then
    result.help = nil
    return nil, "--help is only accepted first (retryfreeze help COMMAND shows a command's help)"
  end
  for key, v in pairs(result) do
    if type(v) == "table" and #v == 0 then result[key] = nil end -- a list option not given
  end
  return result, positionals
end

--- A number in a message as the user wrote it: the shortest of %.15g and %.17g that reads back as the same
--- number (tostring's 14 digits would print 1.0000000000000002 as "1.0", which looks in range), as the engine's
--- lock errors print one.
-- @param x number
-- @return string
function M.number_text(x)
  local short = string.format("%.15g", x)
  if tonumber(short) == x then return short end
  return string.format("%.17g", x)
end

--- How a command names a lock that rf.load refused: "invalid lock: PATH: $.x: rule" when the file was read and
--- the lock is wrong, or rf.load's own sentence when the file could not be read ("cannot open lock PATH: No such
--- file or directory": not invalid, missing).
-- @param path string: the lock's path as given to rf.load
-- @param why string: rf.load's message
-- @return string
function M.lock_error(path, why)
  if why:sub(1, #path + 2) == path .. ": " then return "invalid lock: " .. why end
  return why
end

return M
