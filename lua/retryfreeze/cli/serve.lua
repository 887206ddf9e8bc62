--- `retryfreeze serve [options]`: the fault-injecting upstream in the foreground (retryfreeze-serve).
local upstream = require "retryfreeze.upstream"

local M = {
  summary = "run the fault-injecting test upstream on 127.0.0.1",
  usage = "retryfreeze serve [--port N] [--faults SPEC] [--seed S] [--stall-ms MS] [--max-seconds SEC]\n\n"
    .. "  Runs retryfreeze-serve (see `retryfreeze serve --help-upstream` for the fault grammar).",
}

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

function M.run(args, _, err, bindir)
  local program, missing = upstream.program(bindir)
  if not program then
    err:write("retryfreeze serve: ", missing, "\n")
    return 127 -- as a shell says for a command it cannot find
  end
  local passed = {}
  for i, a in ipairs(args) do passed[i] = a == "--help-upstream" and "--help" or a end
  -- In the CLI host, become the server (execv), so SIGTERM and SIGINT reach it and nothing is left behind.
  local has_host, host = pcall(require, "retryfreeze.host")
  if has_host then
    local _, why = host.exec(program, passed)
    err:write("retryfreeze serve: ", why, "\n")
    return 127
  end
  local parts = { q(program) }
  for _, a in ipairs(args) do parts[#parts + 1] = a == "--help-upstream" and "--help" or q(a) end
  local ok, how, code = os.execute(table.concat(parts, " "))
  if ok then return 0 end
  return how == "exit" and code or 1
end

return M
