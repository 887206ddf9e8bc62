--- `retryfreeze signoff LOCK --by NAME --by NAME [--solo] [--note TEXT] [--log FILE]`: appends one hash-chained
--- sign-off entry for the lock to the pairing log (retryfreeze.signoff), with the diff against the lock's
--- previous sign-off. Two distinct signers are required unless --solo is given (and recorded).
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local output = require "retryfreeze.output"
local signoff = require "retryfreeze.signoff"

local M = {
  summary = "record a pairing sign-off of a lock's digest in the pairing log",
  usage = "retryfreeze signoff LOCK --by NAME --by NAME [--solo] [--note TEXT] [--log FILE]\n\n"
    .. "  Appends one JSON line to the pairing log (default pairing-log.jsonl beside LOCK; one log may\n"
    .. "  serve several locks): UTC date, the lock's path relative to the log, its digest and canonical\n"
    .. "  policy, the signers, the note, the changes since this lock's previous sign-off, the hash of the\n"
    .. "  line before and the line's own hash. --by is repeatable and may hold \"A & B\"; two distinct\n"
    .. "  names are required, or one with --solo (recorded in the entry). The log is append-only: one\n"
    .. "  write per entry, existing lines never rewritten.\n"
    .. "  Exit 0 signed, 2 on bad usage, too few signers, an invalid lock, or a tampered or torn log.",
}

local spec = { ["--by"] = "list NAME", ["--solo"] = "flag", ["--note"] = "string TEXT", ["--log"] = "string FILE" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--by"] = "who signs; repeatable, or several names in one value (\"Ana & Bo\"); two distinct names needed",
  ["--solo"] = "one person signs alone (exactly one --by name; recorded as solo)",
  ["--note"] = "why the lock changed (default \"\")",
  ["--log"] = "the pairing log to append to (default pairing-log.jsonl beside LOCK)",
}

--- Runs the subcommand.
-- @param args table: the arguments after "signoff"; out, err: file handles
-- @return exit code 0 or 2
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  local function usage_error(msg)
    err:write("retryfreeze signoff: ", msg, "\nusage: ", M.usage, "\n")
    return 2
  end
  if not opts then return usage_error(pos) end
  if #pos ~= 1 then return usage_error("expected exactly one LOCK") end
  if #signoff.signers(opts.by) == 0 then return usage_error("--by NAME is required") end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze signoff: ", cli_args.lock_error(pos[1], why), "\n")
    return 2
  end
  local log_path = opts.log or signoff.default_log(pos[1])
  local log_ok, log_err = output.check({ { log_path, "append", "pairing log" } })
  if not log_ok then
    err:write("retryfreeze signoff: ", log_err, "\n")
    return 2
  end
  local log, rerr, code = signoff.read(log_path)
  if not log and code ~= "missing" then
    err:write("retryfreeze signoff: ", rerr, "\n")
    return 2
  end
  local lock = signoff.lock_name(pos[1], log_path)
  local latest = log and signoff.latest(log, lock)
  local entry, eerr = signoff.entry(policy, { lock = lock, by = opts.by, solo = opts.solo, note = opts.note, log = log })
  if not entry then return usage_error(eerr) end
  local line, aerr = signoff.append(log_path, signoff.encode(entry))
  if not line then
    err:write("retryfreeze signoff: ", aerr, "\n")
    return 2
  end
  out:write(string.format("signed off %s %s by %s%s (%s line %d)\n", lock, entry.digest, table.concat(entry.by, " & "),
    entry.solo and " (solo)" or "", log_path, line))
  if latest and latest.digest == entry.digest then
    out:write("this digest was already the lock's latest sign-off; the new entry records another approval\n")
  end
  local c = entry.changes
  if latest then
    out:write(string.format("changes since %s (line %d): %d widening, %d narrowing, %d neutral\n", latest.digest,
      latest.line, c.widening, c.narrowing, c.neutral))
  end
  for _, l in ipairs(c.lines) do out:write(l, "\n") end
  return 0
end

return M
