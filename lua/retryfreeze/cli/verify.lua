--- `retryfreeze verify LOCK [--log FILE]`: exit 0 only when the lock's digest is the latest sign-off in the
--- pairing log; otherwise prints "lock changed; pairing sign-off required" and the changes since the last
--- signed digest, and exits 1. Meant as a CI step.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local diff = require "retryfreeze.diff"
local signoff = require "retryfreeze.signoff"

local M = {
  summary = "exit 0 only if a lock's digest is the latest pairing sign-off (a CI step)",
  usage = "retryfreeze verify LOCK [--log FILE]\n\n"
    .. "  Exit 0 when LOCK's digest is the latest sign-off in the pairing log (default\n"
    .. "  pairing-log.jsonl beside LOCK). Otherwise prints \"" .. signoff.CHANGED_MESSAGE .. "\"\n"
    .. "  and the widening/narrowing changes since the last signed digest, and exits 1 (also when\n"
    .. "  no sign-off exists). Exit 2 on bad usage, an invalid lock, or a tampered log entry.\n"
    .. "  A torn last line (an interrupted append) is reported and ignored.",
}

local spec <const> = { ["--log"] = "string" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec

--- Runs the subcommand.
-- @param args table: the arguments after "verify"; out, err: file handles
-- @return exit code 0, 1 or 2
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  if not opts or #pos ~= 1 then
    err:write("retryfreeze verify: ", type(pos) == "string" and pos or "expected exactly one LOCK", "\nusage: ",
      M.usage, "\n")
    return 2
  end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze verify: invalid lock: ", why, "\n")
    return 2
  end
  local log_path = opts.log or signoff.default_log(pos[1])
  local log, rerr, code = signoff.read(log_path)
  if not log then
    if code ~= "missing" then
      err:write("retryfreeze verify: ", rerr, "\n")
      return 2
    end
    out:write(signoff.CHANGED_MESSAGE, "\n", string.format("  no sign-off exists: %s not found\n", log_path),
      string.format("  lock:   %s %s\n", pos[1], policy.digest))
    return 1
  end
  if log.torn then
    err:write(string.format("retryfreeze verify: %s:%d: torn last line ignored\n", log_path, log.torn))
  end
  local result = signoff.verify(policy, log)
  local latest = result.latest
  if result.ok then
    out:write(string.format("signed off: %s %s on %s by %s (%s line %d)\n", pos[1], policy.digest, latest.date,
      latest.by, log_path, latest.line))
    return 0
  end
  out:write(signoff.CHANGED_MESSAGE, "\n")
  if latest == nil then
    out:write(string.format("  no sign-off exists: %s has no entries\n", log_path))
  end
  out:write(string.format("  lock:   %s %s\n", pos[1], policy.digest))
  if latest then
    out:write(string.format("  signed: %s on %s by %s (%s line %d)\n", latest.digest, latest.date, latest.by,
      log_path, latest.line))
  end
  if result.older then
    out:write(string.format("  this digest was signed off earlier (%s line %d) but is not the latest sign-off\n",
      log_path, result.older.line))
  end
  if latest and result.changes_error then
    out:write("  changes unknown: ", result.changes_error, "\n")
  end
  for _, c in ipairs(result.changes) do out:write(diff.format(c), "\n") end
  return 1
end

return M
