--- Running a flow script (a Lua file that uses require "retryfreeze") with an `arg` table as `lua` sets it.
local table = require("retryfreeze.compat").table
local core = require "retryfreeze.core"

local M = {}

-- Lua 5.1 (LuaJIT too) loads a string with loadstring; 5.2+ has only load, which 5.1 gives a function alone.
local load_string = _VERSION == "Lua 5.1" and loadstring or load -- luacheck: ignore 113

--- Loads a flow script like loadfile, through core.read_file: a regular file of at most core.SCRIPT_MAX_BYTES
--- (a FIFO or a device is refused at once instead of blocking the read).
-- @return the chunk, or nil and a message: "cannot open script PATH: …" (it cannot be read), "cannot load script
--   PATH: PATH:LINE: …" (it does not compile)
function M.load(path)
  local text, err = core.read_file(path, core.SCRIPT_MAX_BYTES, "script")
  if not text then return nil, err end
  local chunk, why = load_string(text, "@" .. path)
  if not chunk then return nil, "cannot load script " .. path .. ": " .. why end
  return chunk
end

--- Runs the script at path with arguments args[1..n]; arg[0] is the script's path. The chunk's `...` holds
--- args[1..n], then extra[1..m] (values a caller hands the script that are not command-line words, such as the
--- progress function `retryfreeze demo` passes examples/jobs_flow.lua); arg holds args alone.
-- @return true; or false, message, "load" for a script that cannot be read or compiled (M.load's message); or
--   false, message (with a traceback), "run" for a script that raised
function M.run(path, args, extra)
  local chunk, err = M.load(path)
  if not chunk then return false, err, "load" end
  local arg_table = { [0] = path }
  table.move(args, 1, #args, 1, arg_table)
  local saved = _G.arg
  _G.arg = arg_table
  local values = table.move(args, 1, #args, 1, {})
  if extra then table.move(extra, 1, #extra, #values + 1, values) end
  local ok, run_err = xpcall(chunk, debug.traceback, table.unpack(values, 1, #values))
  _G.arg = saved
  if not ok then return false, run_err, "run" end
  return true
end

return M
