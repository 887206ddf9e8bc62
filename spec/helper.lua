-- busted helper: shared fixtures for the specs. Paths are relative to the project root (busted's cwd).
local M = {}

-- Lua 5.1 / LuaJIT: the specs use the Lua 5.3 library (math.type, math.tointeger, table.move, utf8) through
-- Debian's lua-compat53, loaded here for the specs only (the module itself never changes a global).
if _VERSION < "Lua 5.3" then require "compat53" end
local util = require "retryfreeze.util"

--- The largest elapsed_ms a fact may carry: INT64_MAX / 4 where Lua has 64-bit integers, else 2^53 - 1 (the
--- largest integer a double holds exactly with its neighbours; the binding refuses beyond it).
M.largest_elapsed_ms = _VERSION >= "Lua 5.3" and load("return math.maxinteger // 4")() or 2 ^ 53 - 1

--- Whether numbers are 64-bit integers and doubles (Lua 5.3+), or doubles only (Lua 5.1, LuaJIT).
M.has_integers = _VERSION >= "Lua 5.3"

M.desk_lock = "examples/retry-budget.lock.json"

--- The CLI under test: $RF_CLI (set by ctest), else ./build/bin/retryfreeze.
M.cli = os.getenv("RF_CLI") or "build/bin/retryfreeze"

--- The build tree under test: $RF_BUILD_DIR (set by ctest), else ./build.
M.build_dir = os.getenv("RF_BUILD_DIR") or "build"

--- Whether the build under test has the module for runtime dir ("5.4", "5.1", "luajit"…): RF_LUA says which it
--- builds (a LuaJIT-only build, as OpenResty users configure it, has no 5.4 module).
function M.has_module(dir)
  local f = io.open(M.build_dir .. "/lib/lua/" .. dir .. "/retryfreeze/core.so", "rb")
  if f then f:close() end
  return f ~= nil
end

--- The Lua a spec's child runs when the spec names none: lua5.4 with the build's 5.4 module, or the build's LuaJIT
--- in a build without a 5.4 module (so that every build configuration runs its own specs).
M.child_lua, M.child_dir = "lua5.4", "5.4"
if not M.has_module("5.4") and M.has_module("luajit") then M.child_lua, M.child_dir = "luajit", "luajit" end

--- The environment a child Lua needs to load the module from this tree: a shell prefix setting LUA_PATH to
--- lua/ and LUA_CPATH to the build's module for runtime `dir` ("5.4", "5.1", "luajit"…; default M.child_dir).
function M.lua_env(dir)
  return string.format("LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH=%s ",
    M.shell_quote(M.build_dir .. "/lib/lua/" .. (dir or M.child_dir) .. "/?.so;;"))
end

--- The entries of the X-macro `name` defined in the C header at path (X(C_NAME, "string", …)): a list of
--- {c_name, string, rest} in order, rest being what follows the string (nil when nothing does). Raises when the
--- header has no such list or it parses empty.
function M.x_macro(path, name)
  local src = M.read_file(path)
  local body = assert(src:match("#define " .. name .. "%(X%)(.-[^\\])\n"), path .. " has no " .. name)
  local entries = {}
  for c_name, str, rest in body:gmatch('X%(([%w_]+),%s*"([^"]*)"([^)]*)%)') do
    entries[#entries + 1] = { c_name, str, rest:match("^,%s*(.-)%s*$") }
  end
  assert(#entries > 0, name .. " parsed empty")
  return entries
end

--- Runs Lua source in a child interpreter with the module on its paths (a crash there fails one test instead
--- of killing busted). opts: {lua = M.child_lua (the interpreter), dir = M.child_dir (see lua_env), timeout_s = 60}.
--- Returns stdout, stderr and the exit code (124 when the timeout killed it).
function M.run_lua(source, opts)
  opts = opts or {}
  local path = M.temp_file(source)
  local out, err, code = M.sh(string.format("%stimeout %d %s %s", M.lua_env(opts.dir), opts.timeout_s or 60,
    opts.lua or M.child_lua, M.shell_quote(path)))
  os.remove(path)
  return out, err, code
end

--- Asserts a clean child exit (code 0, no sanitizer report on stderr) and returns its stdout.
function M.clean_exit(out, err, code)
  local luassert = require "luassert" -- busted's assert
  luassert.equal(0, code, "exit " .. tostring(code) .. ", stderr:\n" .. err)
  luassert.not_matches("Sanitizer", err)
  luassert.not_matches("runtime error", err)
  return out
end

--- The build's bin/ folder (retryfreeze-serve lives there).
M.bindir = M.cli:match("^(.*)/[^/]*$") or "."

--- Runs a shell command; returns its stdout, its stderr and its exit code. The code travels through a file:
--- LuaJIT's and Lua 5.1's popen close() does not return it.
function M.sh(cmd)
  local err_file, code_file = os.tmpname(), os.tmpname()
  local p = io.popen("(" .. cmd .. ") 2>'" .. err_file .. "'; echo $? >'" .. code_file .. "'")
  local out = p:read("*a")
  p:close()
  local f = io.open(err_file)
  local err = f:read("*a")
  f:close()
  local cf = io.open(code_file)
  local code = tonumber(cf:read("*l"))
  cf:close()
  os.remove(err_file)
  os.remove(code_file)
  return out, err, code
end

--- Whether git is installed (the git:REV:PATH sources need it).
M.has_git = M.sh("git --version") ~= ""

--- Runs `git ARGS` in the directory dir as a fixed committer (user t), for a spec's temporary repository;
--- raises with the command and git's stderr when git fails.
-- @param dir string: the repository's directory; args string: git's arguments, written for a shell
function M.git(dir, args)
  local _, err, code = M.sh("cd " .. M.shell_quote(dir) .. " && git -c user.name=t -c user.email=t@example.com "
    .. args)
  assert(code == 0, "git " .. args .. ": " .. err)
end

--- Runs the CLI with a shell-quoted argument list; returns stdout, stderr and the exit code.
function M.run_cli(...)
  local args = {}
  for i, a in ipairs({ ... }) do args[i] = M.shell_quote(a) end
  return M.sh(M.cli .. " " .. table.concat(args, " "))
end

--- A sorted copy of a list (the list itself is left as it is).
function M.sorted(list)
  local copy = table.move(list, 1, #list, 1, {})
  table.sort(copy)
  return copy
end

--- Quotes s (any value, through tostring) as one word for a POSIX shell (retryfreeze.util.shell_quote).
M.shell_quote = util.shell_quote

--- The whole of the file at path, or nil and io.open's reason when it cannot be opened (not there yet: a log a
--- server has not written, a file a command should not have made).
M.try_read_file = util.read_file

--- The whole of the file at path; raises with io.open's reason (which names the path) when it cannot be opened.
function M.read_file(path) return assert(M.try_read_file(path)) end

--- Writes text to the file at path (binary, replacing what was there) and returns path; raises when it cannot.
function M.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

--- Writes text to a fresh temporary file and returns its path.
function M.temp_file(text) return M.write_file(os.tmpname(), text) end

--- Scratch files a spec removes at its end: scratch.file(text) writes text to a fresh temporary file and returns its
--- path; scratch.track(path) adds a path the spec made itself (a file or a directory); scratch.remove() removes them
--- all (give it to teardown).
function M.scratch()
  local paths, scratch = {}, {}
  function scratch.track(path)
    paths[#paths + 1] = path
    return path
  end
  function scratch.file(text) return scratch.track(M.temp_file(text)) end
  function scratch.remove()
    for _, p in ipairs(paths) do os.execute("rm -rf " .. M.shell_quote(p)) end
    paths = {}
  end
  return scratch
end

--- Asserts that each CLI call in cases fails as bad usage: exit code 2, nothing on stdout, and stderr holding the
--- case's text, or being the whole text given as `whole`. cases: a list of {{argument, …}, text} or
--- {{argument, …}, whole = text}.
function M.assert_usage_errors(cases)
  local luassert = require "luassert" -- busted's assert
  for _, c in ipairs(cases) do
    local out, err, code = M.run_cli(table.unpack(c[1]))
    luassert.equal(2, code, table.concat(c[1], " "))
    luassert.equal("", out)
    if c.whole then luassert.equal(c.whole, err) else luassert.matches(c[2], err, 1, true) end
  end
end

--- Waits, bounded, for what a server writes a moment after it answered (an access log line, a ledger line): calls
--- probe() up to tries times, sleeping pause_s seconds between calls, until it returns true.
-- @param tries integer; pause_s number: seconds; probe function: returns done (boolean) and a value
-- @return the value of probe's last call
function M.poll(tries, pause_s, probe)
  local done, value
  for i = 1, tries do
    done, value = probe()
    if done then break end
    if i < tries then os.execute("sleep " .. pause_s) end
  end
  return value
end

--- The items of a list written "a, b, c" (as every "allowed: …" message and the docs write one), in order.
-- @param list string
-- @return array of strings
function M.split_list(list)
  local items = {}
  for item in (list .. ", "):gmatch("(.-), ") do items[#items + 1] = item end
  return items
end

--- Asserts that text holds each string of parts, as plain text (no pattern), each anywhere in it.
-- @param text string: what a command printed; parts: list of strings
function M.assert_holds(text, parts)
  local luassert = require "luassert" -- busted's assert
  for _, part in ipairs(parts) do luassert.matches(part, text, 1, true) end
end

--- Asserts that assigning each key of keys on obj (a function, as a script replacing a method would) raises an
--- error that says "immutable".
function M.assert_immutable(obj, keys)
  local luassert = require "luassert" -- busted's assert
  for _, key in ipairs(keys) do
    local ok, err = pcall(function() obj[key] = function() return { retry = true } end end)
    luassert.is_false(ok, tostring(key))
    luassert.matches("immutable", err)
  end
end

--- Makes a fresh empty directory /tmp/rf-TAG.XXXXXX (mktemp -d: mode 700, a name no other run has) and returns
--- its path; the caller removes it. tag: a word naming the user (default "spec").
function M.temp_dir(tag)
  local p = io.popen("mktemp -d " .. M.shell_quote("/tmp/rf-" .. (tag or "spec") .. ".XXXXXX"))
  local dir = p:read("*l")
  p:close()
  assert(dir and dir:match("^/tmp/rf%-"), "mktemp -d failed")
  return dir
end

package.loaded["spec.helper"] = M
_G.rf_spec_helper = M
return M
