--- `retryfreeze signoff LOCK --by NAME --by NAME [--solo] [--note TEXT] [--evidence REPLAY.json] [--log FILE]`:
--- appends one hash-chained sign-off entry for the lock to the pairing log (retryfreeze.signoff), with the diff
--- against the lock's previous sign-off, and the evidence it cites (a replay of ledgers under this lock: their
--- digests and the predicted figures). Two distinct signers are required unless --solo is given (and recorded).
local cli_args = require "retryfreeze.cli.args"
local output = require "retryfreeze.output"
local signoff = require "retryfreeze.signoff"

return cli_args.command {
  name = "signoff",
  summary = "record a pairing sign-off of a lock's digest in the pairing log",
  args = "LOCK",
  description = "  Appends one JSON line to the pairing log (one log may serve several locks): UTC date, the lock's\n"
    .. "  path relative to the log, its digest and canonical policy, the signers, the note, the changes since\n"
    .. "  this lock's previous sign-off, the hash of the line before and the line's own hash. Two distinct names\n"
    .. "  are required, or one with --solo (recorded in the entry). With --evidence, the entry also records the\n"
    .. "  replay the signers cite (the JSON `retryfreeze replay` prints for this lock, saved): the evidence\n"
    .. "  file's digest, each ledger it read with its digest (taken now; its lines must be those the replay\n"
    .. "  read), the locks they ran under, and the predicted figures with their intervals. The log is\n"
    .. "  append-only: one write per entry, existing lines never rewritten.\n"
    .. "  Exit 0 signed, 2 on bad usage, too few signers, an invalid lock, a tampered or torn log, or evidence\n"
    .. "  that does not parse, is not a replay under this lock, or names a ledger that is gone or changed.",
  options = {
    { "--by", "list NAME", "who signs; repeatable, or several names in one value (\"Ana & Bo\"); two distinct names "
      .. "needed", required = true,
      check = function(v) if #signoff.signers({ v }) == 0 then return "--by needs a name, got '" .. v .. "'" end end },
    { "--solo", "flag", "one person signs alone (exactly one --by name; recorded as solo)" },
    { "--note", "string TEXT", "why the lock changed (default \"\")" },
    { "--evidence", "string REPLAY.json", "cite a replay of ledgers under this lock (the JSON `retryfreeze replay` "
      .. "prints for it, saved to a file): its ledgers' digests and predicted figures go into the entry",
      check = function(v) if v == "" then return "--evidence REPLAY.json names no file (an empty path)" end end },
    { "--log", "string FILE", "the pairing log to append to (default pairing-log.jsonl beside LOCK)" },
  },

  --- Runs the subcommand (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local out = ctx.out
    local policy = ctx.load_lock(pos[1])
    local log_path = opts.log or signoff.default_log(pos[1])
    local log_ok, log_err = output.check({ { log_path, "append", "pairing log" } })
    if not log_ok then ctx.fail(log_err) end
    local log, rerr, code = signoff.read(log_path)
    if not log and code ~= "missing" then ctx.fail(rerr) end
    local lock = signoff.lock_name(pos[1], log_path)
    local latest = log and signoff.latest(log, lock)
    local evidence
    if opts.evidence then
      local why
      evidence, why = signoff.evidence(opts.evidence, policy, log_path)
      if not evidence then ctx.fail(why) end
    end
    local entry, eerr = signoff.entry(policy, { lock = lock, by = opts.by, solo = opts.solo, note = opts.note,
      log = log, evidence = evidence })
    if not entry then ctx.usage_error(eerr) end
    local line, aerr = signoff.append(log_path, signoff.encode(entry))
    if not line then ctx.fail(aerr) end
    out:printf("signed off %s %s by %s%s (%s line %d)\n", lock, entry.digest, table.concat(entry.by, " & "),
      entry.solo and " (solo)" or "", log_path, line)
    if latest and latest.digest == entry.digest then
      out:write("this digest was already the lock's latest sign-off; the new entry records another approval\n")
    end
    local c = entry.changes
    if latest then
      out:printf("changes since %s (line %d): %d widening, %d narrowing, %d neutral\n", latest.digest, latest.line,
        c.widening, c.narrowing, c.neutral)
    end
    for _, l in ipairs(c.lines) do out:printf("%s\n", l) end
    if evidence then
      for _, l in ipairs(signoff.evidence_lines(evidence)) do out:printf("%s\n", l) end
    end
    return 0
  end,
}
