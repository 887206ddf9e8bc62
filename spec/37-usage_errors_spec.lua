-- Bad usage, every way, for every command: an unknown option, an option without its value, and a value no
-- option takes. Each ends in exit 2 with one message that names what was wrong (and at most one usage), never
-- an internal error or a Lua traceback. The cases are not listed by hand: the commands come from the CLI's own
-- list (retryfreeze.cli.commands) and each command's options from its option table, so a new command or option
-- is covered by this file as it is. A bad value is drawn by what the option takes (its kind, its range, its
-- choices, or the name of its value); a value name this file does not know fails the test until it says what
-- a bad value of that kind is, or why there is none.
local h = require "spec.helper"
local cli = require "retryfreeze.cli"

local q = h.shell_quote
local root = (io.popen("pwd"):read("*l"))
local cli_path = h.cli:sub(1, 1) == "/" and h.cli or root .. "/" .. h.cli

local dir, lock, ledger, nginx_conf
setup(function()
  dir = h.temp_dir("usage")
  -- A copy: a case that wrongly passes must not sign off or write beside the project's own example.
  lock = h.write_file(dir .. "/retry-budget.lock.json", h.read_file(h.desk_lock))
  ledger = h.write_file(dir .. "/ledger.jsonl", "")
  nginx_conf = h.write_file(dir .. "/nginx.conf", "http { server { location / { proxy_pass http://127.0.0.1:9; } } }")
end)
teardown(function() os.execute("rm -rf " .. q(dir)) end)

-- A bad value for each value name an option declares ("string FILE" → FILE), or false with the reason none
-- exists. A value name missing here fails "knows a bad value for every option" below.
local function bad_values()
  return {
    FILE = dir, LOCK = dir, CANDIDATE = dir, ["TABLE.tsv"] = dir, ["FLOW.lua"] = dir, ["REPLAY.json"] = dir, -- a directory is no file
    DIR = dir .. "/nowhere",                                          -- no examples there
    SPEC = "garbage",                                                 -- no fault grammar
    URL = "garbage",                                                  -- neither a loopback http nor a redis URL
    ["git:REV"] = "HEAD",                                             -- not git:REV
    ["NAME=VALUE"] = "novalue",
    REASON = "no-such-reason",
    CLASS = "NO_SUCH_CLASS",
    FIELD = "noSuchField",                                            -- neither a lock field nor a route
    ROUTE = "NOPE /nope",                                             -- no route of the lock or the ledger
    NAME = " & ",                                                     -- --by without a name in it
    METHOD = false, PATH = false, VALUE = false, ["HTTP-DATE"] = false, KEY = false, SOURCE = false,
    -- decide's facts: the engine decides any value (an unparsable Retry-After or Date is itself a fact)
    TEXT = false, TITLE = false,                                      -- free text (a note, a page title)
  }
end

-- Options whose bad value is not refused by design, and what happens instead (checked).
local NOT_REFUSED = {
  -- The report shows everything about the sign-off, an unreadable pairing log included, on its page.
  ["report --log"] = function(out, err, code)
    assert.equal(0, code, err)
    assert.matches("^report: ", out)
    assert.matches("cannot open pairing log " .. dir:gsub("%p", "%%%0") .. ": it is a directory",
      h.read_file(dir .. "/out.html"))
  end,
}

-- A good value for each value name a required option, or an option another one needs, declares.
local function good_values()
  return { METHOD = "GET", PATH = "/x", URL = "redis://127.0.0.1:" .. require("spec.support.servers").closed_port(),
    FILE = dir .. "/out.html", NAME = "Ana & Bo", LOCK = lock, CANDIDATE = lock,
    -- by option where one value name serves two: import reads FILE (nginx_conf) as nginx; export writes gRPC
    ["--from TARGET"] = "nginx", ["--to TARGET"] = "grpc",
    ["TABLE.tsv"] = root .. "/examples/decisions.tsv" }
end

-- A good value for each positional argument a command declares ("LOCK", "LEDGER...", "show NAME").
local function good_positional(word)
  local values = { LOCK = lock, LEDGER = ledger, OLD = lock, NEW = lock, show = "show", NAME = "x", FILE = nginx_conf }
  return assert(values[word], "no good value for the argument " .. word .. ": add one here")
end

-- Runs the CLI in the scratch folder (a demo or soak that runs writes its ledger there), bounded.
local function run(args)
  local words = {}
  for i, a in ipairs(args) do words[i] = q(a) end
  return h.sh("cd " .. q(dir) .. " && timeout 60 " .. q(cli_path) .. " " .. table.concat(words, " "))
end

-- The options of a command: its table's rows, or for one that hands its arguments to a program (serve), the
-- program's own options as its --help lists them ({name, "integer N"|"string SPEC"}).
local function options_of(mod)
  if not mod.passes_to then return mod.options end
  local out, _, code = h.run_cli(mod.name, "--help-upstream")
  assert.equal(0, code)
  local rows = {}
  for name, value in out:gmatch("\n  (%-%-[%l%-]+) (%u+)") do
    rows[#rows + 1] = { name, (value == "SPEC" and "string " or "integer ") .. value }
  end
  assert.is_true(#rows >= 5, mod.name .. ": the program's --help lists no options")
  return rows
end

-- The command line every case adds to: the positional arguments and the required options (and the options
-- `row` needs, and what those need in turn: --seed needs --replay, which needs --lock), with good values; a flag
-- is given alone.
local function base_of(mod, row)
  local args = {}
  if not mod.passes_on and not mod.passes_to then
    for _, w in ipairs(mod.positionals) do
      if not w.optional then args[#args + 1] = good_positional(w.word) end
    end
  end
  local needed, by_name = {}, {}
  for _, other in ipairs(mod.options) do by_name[other[1]] = other end
  local need = row and row.needs
  while need and not needed[need] do
    needed[need] = true
    need = by_name[need] and by_name[need].needs
  end
  for _, other in ipairs(mod.options) do
    if other.required or needed[other[1]] then
      local value = other[2]:match("^%S+%s+(%S+)")
      args[#args + 1] = other[1]
      if other[2] ~= "flag" then
        local good = good_values()
        args[#args + 1] = assert(good[other[1] .. " " .. tostring(value)] or good[value],
          "no good value for " .. other[1] .. " " .. tostring(value))
      end
    end
  end
  return args
end

local function concat(a, b)
  local t = {}
  for _, v in ipairs(a) do t[#t + 1] = v end
  for _, v in ipairs(b) do t[#t + 1] = v end
  return t
end

-- The bad values of one option: {value, why}…
local function bad_of(row)
  local kind, value = row[2]:match("^(%S+)%s*(%S*)")
  local cases = {}
  if kind == "integer" then
    cases[#cases + 1] = { "abc", "not an integer" }
    cases[#cases + 1] = { "1.5", "not an integer" }
  elseif kind == "number" then
    cases[#cases + 1] = { "abc", "not a number" }
  end
  if row.range then
    cases[#cases + 1] = { tostring(row.range[1] - 1), "below its range" }
    if row.range[2] ~= math.huge then cases[#cases + 1] = { tostring(row.range[2] + 1), "above its range" } end
  end
  if row.choices then cases[#cases + 1] = { "no-such-choice", "not one of its choices" } end
  if (kind == "string" or kind == "list") and not row.choices then
    local bad = bad_values()[value]
    assert(bad ~= nil, row[1] .. " takes " .. value .. ", a value this spec knows no bad value of: add it")
    if bad then cases[#cases + 1] = { bad, "a bad " .. value } end
  end
  return cases
end

-- Exit 2, nothing on stdout unless the command ran before it met the value (demo --report), one message
-- prefixed with the command that names `what` (or one of them: the option or the value), at most one usage,
-- and nothing of Lua's internals.
local function assert_usage_error(name, what, out, err, code)
  what = type(what) == "table" and what or { what }
  local shown = ("%q"):format(err)
  assert.equal(2, code, "exit " .. tostring(code) .. ", stderr " .. shown)
  assert.is_nil(err:find("traceback", 1, true), "a traceback: " .. shown)
  assert.is_nil(err:find("internal error", 1, true), "an internal error: " .. shown)
  assert.is_nil(err:find("%.lua:%d+:"), "a Lua position: " .. shown)
  local prefix = name == "serve" and "retryfreeze%-serve: " or "retryfreeze " .. name .. ": "
  local messages = 0
  for line in err:gmatch("[^\n]+") do
    if line:find("^" .. prefix) then messages = messages + 1 end
  end
  assert.equal(1, messages, "one message: " .. shown)
  local _, usages = err:gsub("\nusage: ", "")
  assert.is_true(usages <= 1, "one usage at most: " .. shown)
  local named = false
  for _, w in ipairs(what) do named = named or err:find(w, 1, true) ~= nil end
  assert.is_true(named, "the message names " .. table.concat(what, " or ") .. ": " .. shown)
  if name ~= "demo" and name ~= "soak" then assert.equal("", out) end
end

describe("bad usage of every command exits 2 with one message", function()
  it("covers every command of the CLI", function()
    local n = 0
    for _, name in ipairs(cli.commands) do
      if cli.load_command(name) then n = n + 1 end
    end
    assert.equal(#cli.commands, n)
  end)

  for _, name in ipairs(cli.commands) do
    local mod = cli.load_command(name)
    if mod then
      it(name .. ": an unknown option", function()
        local out, err, code = run(concat({ name, "--nosuch" }, base_of(mod)))
        assert_usage_error(name, "'--nosuch'", out, err, code)
      end)

      it(name .. ": knows a bad value for every option", function()
        for _, row in ipairs(options_of(mod)) do bad_of(row) end
      end)

      for _, row in ipairs(options_of(mod)) do
        local opt, kind = row[1], row[2]:match("^%S+")
        if kind == "flag" then
          it(name .. ": " .. opt .. " given a value", function()
            local out, err, code = run(concat({ name }, concat(base_of(mod, row), { opt .. "=yes" })))
            assert_usage_error(name, opt, out, err, code)
          end)
        else
          it(name .. ": " .. opt .. " without its value", function()
            local out, err, code = run(concat({ name }, concat(base_of(mod, row), { opt })))
            assert_usage_error(name, opt, out, err, code)
          end)
          for _, bad in ipairs(bad_of(row)) do
            it(name .. ": " .. opt .. " " .. bad[1] .. " (" .. bad[2] .. ")", function()
              local out, err, code = run(concat({ name }, concat(base_of(mod, row), { opt, bad[1] })))
              local instead = NOT_REFUSED[name .. " " .. opt]
              if instead then return instead(out, err, code) end
              assert_usage_error(name, { opt, row.short or opt, bad[1] }, out, err, code)
            end)
          end
        end
      end
    end
  end
end)
