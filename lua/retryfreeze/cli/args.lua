--- A command's option table, and everything made from it: the lua-argparse parser
--- (https://github.com/mpeterv/argparse, Debian `lua-argparse`: typed values, "did you mean" for a mistyped
--- option), the usage synopsis, the generated `--help`, and the checks of each value (range, choices, a
--- grammar), of the options one needs, and of the positional arguments. A command declares its options once,
--- as rows of its `options` table; nothing about an option is written anywhere else.
--- Options take "--name value" and "--name=value"; a value may start with '-' ("--now-ms -5"). An unknown
--- option, a missing or mistyped value, a value out of its range, a repeated single option or a wrong number of
--- arguments is a usage error (the command line exits 2), never ignored.
local math, table = require("retryfreeze.compat").math, require("retryfreeze.compat").table
local argparse = require "argparse"
local json = require "retryfreeze.json"

local M = {}

--- How each kind of option reads its value, the placeholder --help shows when the row names none, and how
--- --help describes it when the row gives no description.
M.kinds = {
  string = { argname = "TEXT", help = "text" },
  integer = { argname = "N", help = "an integer" },
  number = { argname = "X", help = "a number" },
  list = { argname = "TEXT", help = "text; repeatable, each use adds one" },
  flag = { help = "a flag (takes no value)" },
}

-- The fields an option row may have besides its name, value and description (rows are checked when a command
-- is defined, so a misspelt field fails at once instead of being ignored).
local ROW_FIELDS = { short = true, required = true, default = true, range = true, choices = true, check = true,
  needs = true, excludes = true }

--- A number in a message as the user wrote it: the shortest of %.15g and %.17g that reads back as the same
--- number (tostring's 14 digits would print 1.0000000000000002 as "1.0", which looks in range), as the engine's
--- lock errors print one.
-- @param x number
-- @return string
function M.number_text(x)
  if math.type(x) == "integer" then return tostring(x) end
  local short = string.format("%.15g", x)
  if tonumber(short) == x then return short end
  return string.format("%.17g", x)
end

-- The row's kind and its value's placeholder ("string FILE" → "string", "FILE"; "integer" → "integer", "N").
local function split(row)
  local kind, arg = row[2]:match("^(%S+)%s*(.-)$")
  return kind, arg ~= "" and arg or M.kinds[kind].argname
end

-- The text of a range: "1..16", "0 or more".
local function range_text(range)
  if range[2] == math.huge then return M.number_text(range[1]) .. " or more" end
  return M.number_text(range[1]) .. ".." .. M.number_text(range[2])
end

-- The text of a list of choices: "a or b", "a, b or c", "one of a, b, c, d".
local function choices_text(choices)
  if #choices > 3 then return "one of " .. table.concat(choices, ", ") end
  return table.concat(choices, ", ", 1, #choices - 1) .. " or " .. choices[#choices]
end

--- One option's line in --help: its description, then what the row says of its value (range, default, the
--- option it needs or excludes), "; repeatable" for a list option. A row with choices names them in its
--- description (from the same list).
-- @param row table: an option row
-- @return string
function M.describe(row)
  local kind = split(row)
  local extra = {}
  if row.range then extra[#extra + 1] = range_text(row.range) end
  if row.default ~= nil then extra[#extra + 1] = "default " .. tostring(row.default) end
  if row.needs then extra[#extra + 1] = "only with " .. row.needs end
  if row.excludes then extra[#extra + 1] = "not with " .. row.excludes end
  if row.short then extra[#extra + 1] = "also " .. row.short end
  local text = row[3] or M.kinds[kind].help
  if #extra > 0 then text = text .. " (" .. table.concat(extra, "; ") .. ")" end
  if kind == "list" and not text:find("repeatable", 1, true) then text = text .. "; repeatable" end
  return text
end

-- Checks a command's table when it is defined: every row well formed, every default within its own rules.
local function check_rows(name, options)
  local seen = {}
  for i, row in ipairs(options) do
    local where = "retryfreeze.cli." .. name .. ": options[" .. i .. "]"
    assert(type(row[1]) == "string" and row[1]:match("^%-%-%l[%l%d%-]*$"), where .. ": name must be --lower-case")
    assert(not seen[row[1]], where .. ": " .. row[1] .. " is declared twice")
    seen[row[1]] = true
    assert(type(row[2]) == "string", where .. ": the value's kind is missing")
    local kind = row[2]:match("^%S+")
    assert(M.kinds[kind], where .. ": unknown kind " .. tostring(row[2]))
    assert(kind ~= "flag" or row[2] == "flag", where .. ": a flag takes no value name")
    assert(type(row[3]) == "string" and row[3] ~= "", where .. ": " .. row[1] .. " has no description")
    for k in pairs(row) do
      assert(k == 1 or k == 2 or k == 3 or ROW_FIELDS[k], where .. ": unknown field " .. tostring(k))
    end
    assert(not row.range or kind == "integer" or kind == "number", where .. ": a range needs a number")
  end
  for _, row in ipairs(options) do
    for _, other in ipairs({ row.needs, row.excludes }) do
      assert(seen[other], "retryfreeze.cli." .. name .. ": " .. row[1] .. " refers to " .. other .. ", not declared")
    end
  end
end

-- The positional words of a command's `args` ("LOCK", "LEDGER...", "OLD NEW", "show NAME", "FLOW.lua [ARGS...]"):
-- {word, literal = a lower-case word the user types as is, many = "X..." (one or more), optional = "[X]"}.
local function positional_words(args)
  local words = {}
  for w in (args or ""):gmatch("%S+") do
    local optional = w:match("^%[(.*)%]$")
    local word = optional or w
    words[#words + 1] = { word = word:gsub("%.%.%.$", ""), literal = word:match("^%l+$") ~= nil,
      many = word:sub(-3) == "...", optional = optional ~= nil }
  end
  return words
end

-- The synopsis: "retryfreeze NAME ARGS OPTIONS", each option as the row declares it ("--seed N", "[--json]",
-- "[--hint NAME=VALUE]..."), wrapped at 110 columns under the first option.
local function synopsis(cmd)
  local head = "retryfreeze " .. cmd.name .. (cmd.args and " " .. cmd.args or "")
  local parts = {}
  for _, row in ipairs(cmd.options) do
    local kind, arg = split(row)
    local word = (row.short or row[1]) .. (kind == "flag" and "" or " " .. arg)
    if not row.required then word = "[" .. word .. "]" end
    if kind == "list" then word = word .. "..." end
    parts[#parts + 1] = word
  end
  local lines, line = {}, head
  local indent = string.rep(" ", #("retryfreeze " .. cmd.name) + 1)
  for _, p in ipairs(parts) do
    if #line + 1 + #p > 110 then
      lines[#lines + 1] = line
      line = indent .. p
    else
      line = line .. " " .. p
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

--- Defines a command from its table: checks every option row and sets `synopsis` and `usage` (the synopsis,
--- then the description), generated from the rows.
-- @param cmd table: {name = "check", summary = one line, args = "LOCK" (the positional arguments, as the
--   synopsis shows them: an upper-case word is a value, "X..." one or more, "[X]" optional, a lower-case word
--   is typed as is), description = the paragraphs --help shows after the synopsis (nil: none),
--   options = {row…}, passes_on = true for a command that hands everything after its first positional
--   argument to something else (run), passes_to = "program" for one that hands all its arguments to a program
--   that reads its own options (serve: nothing is parsed here), run = function(ctx, opts, positionals) → exit
--   code}.
--   A row is {"--name", "KIND [VALUE-NAME]", "what it does", …} with KIND string, integer, number, list
--   (repeatable string) or flag, and optionally short = "-o", required = true, default = value (applied when the
--   option is absent), range = {lo, hi} (hi math.huge: no upper bound), choices = {…}, check =
--   function(value, ctx) → nil or a message (a grammar: ctx.bindir is the CLI's binary directory), needs =
--   "--other" (only with that option), excludes = "--other".
-- @return cmd
function M.command(cmd)
  cmd.options = cmd.options or {}
  check_rows(cmd.name, cmd.options)
  cmd.positionals = positional_words(cmd.args)
  cmd.synopsis = synopsis(cmd)
  cmd.usage = cmd.synopsis .. (cmd.description and "\n\n" .. cmd.description or "")
  return cmd
end

local function converter(name, kind)
  if kind == "integer" then
    return function(v)
      local n = v:match("^%-?%d+$") and math.tointeger(tonumber(v))
      if not n then return nil, string.format("option %s needs an integer, got '%s'", name, v) end
      return n
    end
  elseif kind == "number" then
    -- Read as a lock reads a number: by the lock's JSON parser (retryfreeze.json, cJSON), so "+5", "0x10", ".5",
    -- "inf" and "nan" are refused here as a lock refuses them; and as one token, so " 5" and "5 " (JSON whitespace
    -- around a value) are refused too. tonumber took all of them.
    return function(v)
      local n = not v:find("^%s") and not v:find("%s$") and json.decode(v)
      if type(n) ~= "number" then
        return nil, string.format("option %s needs a number (as JSON writes one: 0.25, 5, 1e-3), got '%s'", name, v)
      end
      return n
    end
  end
  return nil
end

--- Builds the argparse parser of one command.
-- @param cmd table: as M.command returns it
-- @return an argparse parser whose result holds the options (keys without dashes, '-' → '_') and `args`, the
--   positional arguments
function M.parser(cmd)
  local p = argparse("retryfreeze " .. cmd.name):add_help(false):help_max_width(110):help_description_margin(36)
  p:usage("usage: " .. cmd.synopsis)
  if cmd.description then p:description(cmd.description) end
  p:argument("args"):args("*"):hidden(true)
  for _, row in ipairs(cmd.options) do
    local kind, arg = split(row)
    local names = row[1] -- a short form is read as this name (join_values): --help shows one line an option
    local target = row[1]:sub(3):gsub("%-", "_")
    if kind == "flag" then
      p:flag(names):target(target):description(M.describe(row))
    else
      local o = p:option(names):target(target):argname("<" .. arg .. ">"):description(M.describe(row))
      local convert = converter(row[1], kind)
      if convert then o:convert(convert) end
      if kind == "list" then o:count("*") end
    end
  end
  p:flag("-h --help"):description("show this help and exit")
  return p
end

--- The generated help of one command: its synopsis and description, then every option with the value it takes
--- and what it does.
-- @param cmd table: as M.command returns it
-- @return string, ending in a newline
function M.help(cmd)
  return M.parser(cmd):get_help() .. "\n"
end

-- "--name value" → "--name=value" for the options that take a value, so that a value starting with '-'
-- reads as the value, not as an option (argparse alone would take "-5" for an option); a short form
-- ("-o") becomes its long name. For a command that passes its arguments on, the first positional argument
-- ends the options: it and all after it are kept as they are, behind "--".
local function join_values(args, cmd)
  local takes_value, long = {}, {}
  for _, row in ipairs(cmd.options) do
    takes_value[row[1]] = split(row) ~= "flag"
    if row.short then long[row.short] = row[1] end
  end
  local joined, i = {}, 1
  while i <= #args do
    local a = long[args[i]] or args[i]
    if a == "--" or (cmd.passes_on and a:sub(1, 1) ~= "-") then
      if a ~= "--" then joined[#joined + 1] = "--" end
      table.move(args, i, #args, #joined + 1, joined)
      break
    end
    if takes_value[a] and args[i + 1] ~= nil then
      joined[#joined + 1] = a .. "=" .. args[i + 1]
      i = i + 2
    else
      joined[#joined + 1] = a
      i = i + 1
    end
  end
  return joined
end

-- Whether the value of a row is within its rules: nil, or the message naming the option and the value.
local function value_error(row, v, ctx)
  local name = row[1]
  if row.range and not (v >= row.range[1] and v <= row.range[2]) then
    return string.format("%s must be %s, got %s", name, range_text(row.range), M.number_text(v))
  end
  if row.choices then
    local ok = false
    for _, c in ipairs(row.choices) do ok = ok or c == v end
    if not ok then return string.format("%s must be %s, got '%s'", name, choices_text(row.choices), v) end
  end
  if row.check then return row.check(v, ctx) end
  return nil
end

-- The message for positional arguments that do not fit the command's `args`, or nil.
local function positional_error(cmd, pos)
  local words = cmd.positionals
  local min, max, names = 0, 0, {}
  for _, w in ipairs(words) do
    if not w.optional then min = min + 1 end
    max = (w.many or max == math.huge) and math.huge or max + 1
    if not w.optional then names[#names + 1] = w.word end
  end
  if cmd.passes_on then max = math.huge end
  for i, w in ipairs(words) do
    if w.literal and pos[i] ~= nil and pos[i] ~= w.word then return "expected: " .. cmd.args end
  end
  if #pos >= min and #pos <= max then return nil end
  if max == 0 then return "unexpected argument '" .. pos[1] .. "'" end
  if words[1].literal then return "expected: " .. cmd.args end
  if #words == 1 and words[1].many then return "expected at least one " .. words[1].word end
  if #names == 1 then return "expected exactly one " .. names[1] end
  return "expected " .. table.concat(names, ", ", 1, #names - 1) .. " and " .. names[#names]
end

--- Parses and checks a command's arguments: the options (argparse), each value against its row (range,
--- choices, check), the options each one needs or excludes, the positional arguments, then the required
--- options; fills in defaults last.
-- @param cmd table: as M.command returns it
-- @param args table: the arguments after the command's name
-- @param ctx table|nil: passed to each row's check ({bindir = …})
-- @return opts table (keys without the leading dashes, '-' → '_'; a list option is an array), positionals
--   table; or nil, message (argparse's or a check's), and for a near miss argparse's suggestion ("Did you mean
--   '--table'?")
function M.parse(cmd, args, ctx)
  if cmd.passes_to then return {}, args end
  local ok, result = M.parser(cmd):pparse(join_values(args, cmd))
  if not ok then -- argparse's message, and its "Did you mean '--table'?" apart (the message may quote anything)
    local message, suggestion = result:match("^(.*)\n(Did you mean '[^\n]*'%?)$")
    return nil, message or result, suggestion
  end
  local pos = result.args
  result.args = nil
  if result.help then
    return nil, "--help is only accepted first (retryfreeze help " .. cmd.name .. " shows the command's help)"
  end
  result.help = nil
  for key, v in pairs(result) do
    if type(v) == "table" and #v == 0 then result[key] = nil end -- a list option not given
  end
  local given = {}
  for _, row in ipairs(cmd.options) do
    local key = row[1]:sub(3):gsub("%-", "_")
    local v = result[key]
    if v ~= nil and v ~= false then
      given[row[1]] = true
      for _, each in ipairs(type(v) == "table" and v or { v }) do
        local why = value_error(row, each, ctx or {})
        if why then return nil, why end
      end
    end
  end
  for _, row in ipairs(cmd.options) do
    if given[row[1]] and row.needs and not given[row.needs] then
      return nil, row[1] .. " needs " .. row.needs
    end
    if given[row[1]] and row.excludes and given[row.excludes] then
      return nil, row[1] .. " does not go with " .. row.excludes
    end
  end
  local why = positional_error(cmd, pos)
  if why then return nil, why end
  for _, row in ipairs(cmd.options) do
    local key = row[1]:sub(3):gsub("%-", "_")
    if row.required and not given[row[1]] then
      return nil, (row.short or row[1]) .. " " .. select(2, split(row)) .. " is required"
    end
    if row.default ~= nil and result[key] == nil then result[key] = row.default end
  end
  return result, pos
end

return M
