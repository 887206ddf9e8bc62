--- `retryfreeze diff OLD NEW [--json] [--log FILE]`: classifies every change between two locks as widening,
--- narrowing or neutral (retryfreeze.diff) and exits 1 when something widens, unless NEW's digest is the
--- latest sign-off in the pairing log.
local cli_args = require "retryfreeze.cli.args"
local diff = require "retryfreeze.diff"
local json = require "retryfreeze.json"
local signoff = require "retryfreeze.signoff"

local function change_json(c)
  local t = { kind = c.kind, route = c.route, field = c.field, old = c.old, new = c.new, text = c.text,
    line = diff.format(c), requests = json.array() }
  for i, r in ipairs(c.requests or {}) do t.requests[i] = r end
  if t.old == nil then t.old = json.null end
  if t.new == nil then t.new = json.null end
  return t
end

--- Runs the subcommand (see retryfreeze.cli for ctx).
local function run(ctx, opts, pos)
  local out = ctx.out
  local old, old_text = diff.load(pos[1])
  if not old then ctx.fail(old_text) end
  local new, new_text = diff.load(pos[2])
  if not new then ctx.fail(new_text) end
  local changes = diff.compare(old, new, { old_text = old_text, new_text = new_text })
  local widens = diff.widens(changes)

  -- The pairing log: read when a widening needs a sign-off, and always when --log names one (a wrong --log is
  -- an error even on a day nothing widens, never ignored).
  local signed, log, unsigned_why
  local log_path = opts.log or (widens and not pos[2]:match("^git:") and signoff.default_log(pos[2])) or nil
  if log_path then
    local why, code
    log, why, code = signoff.read(log_path)
    if not log and code ~= "missing" then ctx.fail(why) end
    if log and log.torn then ctx.note(string.format("%s:%d: torn last line ignored", log_path, log.torn)) end
  end
  if widens then
    if log_path then
      -- Signed: NEW's digest is its lock's latest sign-off (for a git: NEW, the latest of any lock).
      local lock = not pos[2]:match("^git:") and signoff.lock_name(pos[2], log_path) or nil
      local latest = log and signoff.latest(log, lock)
      if lock == nil and log then
        for i = #log.entries, 1, -1 do
          local e = log.entries[i]
          if e.digest == new.digest and signoff.latest(log, e.lock) == e then latest = e break end
        end
      end
      if latest and latest.digest == new.digest then
        signed = latest
      elseif not log then -- as verify says it: no log, no sign-off
        unsigned_why = string.format("no sign-off exists: %s not found", log_path)
      elseif lock and not latest then
        unsigned_why = string.format("no sign-off exists for %s in %s", lock, log_path)
      elseif lock then
        unsigned_why = string.format("%s is not the latest sign-off of %s in %s (that is %s, line %d)", new.digest,
          lock, log_path, latest.digest, latest.line)
      else
        unsigned_why = string.format("%s is not the latest sign-off of any lock in %s", new.digest, log_path)
      end
    else -- NEW is a git: blob and no --log: nothing to look in
      unsigned_why = new.digest .. " is not signed off (NEW is git:REV:PATH; --log FILE names the pairing log)"
    end
  end

  if opts.json then
    local list = json.array()
    for i, c in ipairs(changes) do list[i] = change_json(c) end
    local doc = {
      from = { source = pos[1], digest = old.digest }, to = { source = pos[2], digest = new.digest },
      changes = list, summary = diff.summary(changes),
      signed_off = signed and { date = signed.date, by = table.concat(signed.by, " & "), log = log_path,
        line = signed.line } or json.null,
    }
    out:json(doc, { "kind", "route", "field", "old", "new", "text", "line", "requests", "from", "to", "summary",
      "signed_off", "changes", "source", "digest", "widening", "narrowing", "neutral", "date", "by", "log" })
  else
    for _, c in ipairs(changes) do out:write(diff.format(c), "\n") end
    if #changes == 0 then out:printf("no changes (%s)\n", new.digest) end
    if signed then
      out:printf("widening signed off: %s on %s by %s (%s line %d)\n", new.digest, signed.date,
        table.concat(signed.by, " & "), log_path, signed.line)
    elseif widens then
      out:printf("widening without sign-off: %s\n", unsigned_why)
    end
  end
  if widens and not signed then return 1 end
  return 0
end

return cli_args.command {
  name = "diff",
  summary = "classify the changes between two locks; exit 1 if one widens without sign-off",
  args = "OLD NEW",
  description = "  Compares two locks route by route and prints one line per change:\n"
    .. "    WIDENING  POST /v1/jobs  maxAttempts 2 → 5\n"
    .. "  OLD (or NEW) may be git:REV:PATH to read a committed version with `git show REV:PATH`.\n"
    .. "  Exit 0 when nothing widens, or when NEW's digest is its lock's latest sign-off in the pairing log\n"
    .. "  (--log, default pairing-log.jsonl beside NEW); 1 when something widens without sign-off;\n"
    .. "  2 on bad usage, an unreadable or invalid lock, a failing git, or a tampered log.",
  options = {
    { "--json", "flag", "print one JSON object: {from, to, summary, signed_off, changes}" },
    { "--log", "string FILE", "the pairing log that may sign off a widening (default pairing-log.jsonl beside NEW)" },
  },
  run = run,
}

