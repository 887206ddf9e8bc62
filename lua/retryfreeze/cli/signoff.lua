--- `retryfreeze signoff LOCK --by "NAMES" [--note TEXT] [--log FILE]`: appends one sign-off entry for the
--- lock's digest to the pairing log (retryfreeze.signoff), with the diff against the previous sign-off.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local signoff = require "retryfreeze.signoff"

local M = {
  summary = "record a pairing sign-off of a lock's digest in the pairing log",
  usage = "retryfreeze signoff LOCK --by \"NAMES\" [--note TEXT] [--log FILE]\n\n"
    .. "  Appends one JSON line to the pairing log (default pairing-log.jsonl beside LOCK): UTC date,\n"
    .. "  digest, signers, note, the previous signed digest and the changes since it. The log is\n"
    .. "  append-only: one write per entry, existing lines never rewritten.\n"
    .. "  Exit 0 signed, 2 on bad usage, an invalid lock, or a tampered or torn log.",
}

local spec <const> = { ["--by"] = "string", ["--note"] = "string", ["--log"] = "string" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec

--- Runs the subcommand.
-- @param args table: the arguments after "signoff"; out, err: file handles
-- @return exit code 0 or 2
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  if opts and #pos == 1 and (opts.by == nil or opts.by:match("^%s*$")) then pos = "--by \"NAMES\" is required" end
  if not opts or type(pos) ~= "table" or #pos ~= 1 then
    err:write("retryfreeze signoff: ", type(pos) == "string" and pos or "expected exactly one LOCK", "\nusage: ",
      M.usage, "\n")
    return 2
  end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze signoff: invalid lock: ", why, "\n")
    return 2
  end
  local log_path = opts.log or signoff.default_log(pos[1])
  local log, rerr, code = signoff.read(log_path)
  if not log and code ~= "missing" then
    err:write("retryfreeze signoff: ", rerr, "\n")
    return 2
  end
  local latest = log and signoff.latest(log)
  local entry = signoff.entry(policy, { by = opts.by, note = opts.note, log = log })
  local line, aerr = signoff.append(log_path, entry)
  if not line then
    err:write("retryfreeze signoff: ", aerr, "\n")
    return 2
  end
  out:write(string.format("signed off %s by %s (%s line %d)\n", entry.digest, entry.by, log_path, line))
  if latest and latest.digest == entry.digest then
    out:write("this digest was already the latest sign-off; the new entry records another approval\n")
  end
  local c = entry.changes
  if entry.previous ~= nil and type(entry.previous) == "string" then
    out:write(string.format("changes since %s: %d widening, %d narrowing, %d neutral\n", entry.previous,
      c.widening, c.narrowing, c.neutral))
  end
  for _, l in ipairs(c.lines) do out:write(l, "\n") end
  return 0
end

return M
