--- `retryfreeze verify LOCK [--log FILE] [--base git:REV]`: the CI step. Verifies the whole pairing log (every
--- entry's hash, the chain, every stored policy against its digest; with --base, that the log committed at REV
--- is a prefix of today's), then passes when the lock's digest is its latest sign-off, or when every change
--- since that sign-off is narrowing or neutral (and says so). Otherwise prints "lock changed; pairing sign-off
--- required" with the changes, and exits 1.
local cli_args = require "retryfreeze.cli.args"
local diff = require "retryfreeze.diff"
local signoff = require "retryfreeze.signoff"

--- Runs the subcommand (see retryfreeze.cli for ctx).
local function run(ctx, opts, pos)
  local out = ctx.out
  local policy = ctx.load_lock(pos[1])
  local log_path = opts.log or signoff.default_log(pos[1])
  local lock = signoff.lock_name(pos[1], log_path)
  local log, rerr, code = signoff.read(log_path)
  if not log then
    if code ~= "missing" then ctx.fail(rerr) end
    out:write(signoff.CHANGED_MESSAGE, "\n")
    out:printf("  no sign-off exists: %s not found\n  lock:   %s %s\n", log_path, pos[1], policy.digest)
    return 1
  end
  if log.torn then ctx.note(string.format("%s:%d: torn last line ignored", log_path, log.torn)) end
  out:printf("log verified: %s, %d entr%s, every hash and stored policy checked\n", log_path,
    #log.entries, #log.entries == 1 and "y" or "ies")
  if opts.base then
    local rev = opts.base:sub(5)
    local base_text, gerr = signoff.git_text(rev, log_path)
    if not base_text then ctx.fail(gerr) end
    local ok, perr = signoff.check_prefix(base_text, log)
    if not ok then ctx.fail(string.format("%s: the log at %s is not a prefix of this one: %s", log_path, rev, perr)) end
    local _, base_lines = base_text:gsub("\n", "")
    out:printf("log at %s is a prefix (%d line%s kept, %d added)\n", rev, base_lines,
      base_lines == 1 and "" or "s", #log.entries - base_lines)
  end
  local result = signoff.verify(policy, log, lock)
  local latest = result.latest
  if result.status == "signed" then
    out:printf("signed off: %s %s on %s by %s%s (%s line %d)\n", lock, policy.digest, latest.date,
      table.concat(latest.by, " & "), latest.solo and " (solo)" or "", log_path, latest.line)
    if latest.evidence then
      for _, l in ipairs(signoff.evidence_lines(latest.evidence)) do out:printf("%s\n", l) end
    end
    return 0
  end
  if result.status == "not-widened" then
    out:printf("not widened: %s %s is not signed off, but every change since its last sign-off "
      .. "(%s line %d, %s) is narrowing or neutral\n", lock, policy.digest, log_path, latest.line, latest.digest)
    for _, c in ipairs(result.changes) do out:printf("%s\n", diff.format(c)) end
    return 0
  end
  out:write(signoff.CHANGED_MESSAGE, "\n")
  if latest == nil then
    out:printf("  no sign-off exists for %s in %s\n", lock, log_path)
  end
  out:printf("  lock:   %s %s\n", pos[1], policy.digest)
  if latest then
    out:printf("  signed: %s on %s by %s (%s line %d)\n", latest.digest, latest.date,
      table.concat(latest.by, " & "), log_path, latest.line)
    if latest.evidence then
      for _, l in ipairs(signoff.evidence_lines(latest.evidence)) do out:printf("  %s\n", l) end
    end
  end
  if result.older then
    out:printf("  this digest was signed off earlier (%s line %d) but is not the latest sign-off\n",
      log_path, result.older.line)
  end
  for _, c in ipairs(result.changes) do out:printf("%s\n", diff.format(c)) end
  return 1
end

return cli_args.command {
  name = "verify",
  summary = "verify the pairing log and pass only a signed or non-widening lock (a CI step)",
  args = "LOCK",
  description = "  Verifies the pairing log: every entry's own hash, the chain of hashes, and that every stored\n"
    .. "  policy has the digest its entry claims. With --base git:REV, the log as committed at REV must also be\n"
    .. "  a prefix of today's (nothing deleted or rewritten; a log that did not exist at REV passes this check).\n"
    .. "  Exit 0 when LOCK's digest is its latest sign-off, or when every change since that sign-off is\n"
    .. "  narrowing or neutral (printed), with the evidence that sign-off cites (signoff --evidence).\n"
    .. "  Otherwise prints \"" .. signoff.CHANGED_MESSAGE .. "\" and the\n"
    .. "  changes, and exits 1 (also when the lock has no sign-off). Exit 2 on bad usage, an invalid lock,\n"
    .. "  a tampered log, or a base that is not a prefix. A torn last line is reported and ignored.",
  options = {
    { "--log", "string FILE", "the pairing log (default pairing-log.jsonl beside LOCK)" },
    { "--base", "string git:REV", "also check that the log committed at REV is a prefix of today's",
      check = function(v) if not v:match("^git:") then return "--base must be git:REV, got '" .. v .. "'" end end },
  },
  run = run,
}
