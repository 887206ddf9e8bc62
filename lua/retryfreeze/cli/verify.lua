--- `retryfreeze verify LOCK [--log FILE] [--base git:REV]`: the CI step. Verifies the whole pairing log (every
--- entry's hash, the chain, every stored policy against its digest; with --base, that the log committed at REV
--- is a prefix of today's), then passes when the lock's digest is its latest sign-off, or when every change
--- since that sign-off is narrowing or neutral (and says so). Otherwise prints "lock changed; pairing sign-off
--- required" with the changes, and exits 1.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local diff = require "retryfreeze.diff"
local signoff = require "retryfreeze.signoff"

local M = {
  summary = "verify the pairing log and pass only a signed or non-widening lock (a CI step)",
  usage = "retryfreeze verify LOCK [--log FILE] [--base git:REV]\n\n"
    .. "  Verifies the pairing log (default pairing-log.jsonl beside LOCK): every entry's own hash, the\n"
    .. "  chain of hashes, and that every stored policy has the digest its entry claims. With --base\n"
    .. "  git:REV, the log as committed at REV must also be a prefix of today's (nothing deleted or\n"
    .. "  rewritten; a log that did not exist at REV passes this check).\n"
    .. "  Exit 0 when LOCK's digest is its latest sign-off, or when every change since that sign-off is\n"
    .. "  narrowing or neutral (printed). Otherwise prints \"" .. signoff.CHANGED_MESSAGE .. "\" and the\n"
    .. "  changes, and exits 1 (also when the lock has no sign-off). Exit 2 on bad usage, an invalid lock,\n"
    .. "  a tampered log, or a base that is not a prefix. A torn last line is reported and ignored.",
}

local spec = { ["--log"] = "string FILE", ["--base"] = "string git:REV" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--log"] = "the pairing log (default pairing-log.jsonl beside LOCK)",
  ["--base"] = "git:REV: also check that the log committed at REV is a prefix of today's",
}

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
  if opts.base and not opts.base:match("^git:") then
    err:write("retryfreeze verify: --base must be git:REV, got '", opts.base, "'\n")
    return 2
  end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze verify: ", cli_args.lock_error(pos[1], why), "\n")
    return 2
  end
  local log_path = opts.log or signoff.default_log(pos[1])
  local lock = signoff.lock_name(pos[1], log_path)
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
  out:write(string.format("log verified: %s, %d entr%s, every hash and stored policy checked\n", log_path,
    #log.entries, #log.entries == 1 and "y" or "ies"))
  if opts.base then
    local rev = opts.base:sub(5)
    local base_text, gerr = signoff.git_text(rev, log_path)
    if not base_text then
      err:write("retryfreeze verify: ", gerr, "\n")
      return 2
    end
    local ok, perr = signoff.check_prefix(base_text, log)
    if not ok then
      err:write(string.format("retryfreeze verify: %s: the log at %s is not a prefix of this one: %s\n", log_path,
        rev, perr))
      return 2
    end
    local _, base_lines = base_text:gsub("\n", "")
    out:write(string.format("log at %s is a prefix (%d line%s kept, %d added)\n", rev, base_lines,
      base_lines == 1 and "" or "s", #log.entries - base_lines))
  end
  local result = signoff.verify(policy, log, lock)
  local latest = result.latest
  if result.status == "signed" then
    out:write(string.format("signed off: %s %s on %s by %s%s (%s line %d)\n", lock, policy.digest, latest.date,
      table.concat(latest.by, " & "), latest.solo and " (solo)" or "", log_path, latest.line))
    return 0
  end
  if result.status == "not-widened" then
    out:write(string.format("not widened: %s %s is not signed off, but every change since its last sign-off "
      .. "(%s line %d, %s) is narrowing or neutral\n", lock, policy.digest, log_path, latest.line, latest.digest))
    for _, c in ipairs(result.changes) do out:write(diff.format(c), "\n") end
    return 0
  end
  out:write(signoff.CHANGED_MESSAGE, "\n")
  if latest == nil then
    out:write(string.format("  no sign-off exists for %s in %s\n", lock, log_path))
  end
  out:write(string.format("  lock:   %s %s\n", pos[1], policy.digest))
  if latest then
    out:write(string.format("  signed: %s on %s by %s (%s line %d)\n", latest.digest, latest.date,
      table.concat(latest.by, " & "), log_path, latest.line))
  end
  if result.older then
    out:write(string.format("  this digest was signed off earlier (%s line %d) but is not the latest sign-off\n",
      log_path, result.older.line))
  end
  for _, c in ipairs(result.changes) do out:write(diff.format(c), "\n") end
  return 1
end

return M
