--- `retryfreeze diff OLD NEW [--json] [--log FILE]`: classifies every change between two locks as widening,
--- narrowing or neutral (retryfreeze.diff) and exits 1 when something widens, unless NEW's digest is the
--- latest sign-off in the pairing log.
local cli_args = require "retryfreeze.cli.args"
local diff = require "retryfreeze.diff"
local json = require "retryfreeze.json"
local signoff = require "retryfreeze.signoff"

local M = {
  summary = "classify the changes between two locks; exit 1 if one widens without sign-off",
  usage = "retryfreeze diff OLD NEW [--json] [--log FILE]\n\n"
    .. "  Compares two locks route by route and prints one line per change:\n"
    .. "    WIDENING  POST /v1/jobs  maxAttempts 2 → 5\n"
    .. "  OLD (or NEW) may be git:REV:PATH to read a committed version with `git show REV:PATH`.\n"
    .. "  Exit 0 when nothing widens, or when NEW's digest is its lock's latest sign-off in the pairing log\n"
    .. "  (--log, default pairing-log.jsonl beside NEW); 1 when something widens without sign-off;\n"
    .. "  2 on bad usage, an unreadable or invalid lock, a failing git, or a tampered log.\n"
    .. "  --json prints one JSON object: {from, to, summary, signed_off, changes}.",
}

local spec = { ["--json"] = "flag", ["--log"] = "string FILE" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--json"] = "print one JSON object: {from, to, summary, signed_off, changes}",
  ["--log"] = "the pairing log that may sign off a widening (default pairing-log.jsonl beside NEW)",
}

local function change_json(c)
  local t = { kind = c.kind, route = c.route, field = c.field, old = c.old, new = c.new, text = c.text,
    line = diff.format(c), requests = json.array() }
  for i, r in ipairs(c.requests or {}) do t.requests[i] = r end
  if t.old == nil then t.old = json.null end
  if t.new == nil then t.new = json.null end
  return t
end

--- Runs the subcommand.
-- @param args table: the arguments after "diff"; out, err: file handles
-- @return exit code 0, 1 or 2
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  if not opts or #pos ~= 2 then
    err:write("retryfreeze diff: ", type(pos) == "string" and pos or "expected OLD and NEW", "\nusage: ", M.usage,
      "\n")
    return 2
  end
  local old, old_text = diff.load(pos[1])
  if not old then
    err:write("retryfreeze diff: ", old_text, "\n")
    return 2
  end
  local new, new_text = diff.load(pos[2])
  if not new then
    err:write("retryfreeze diff: ", new_text, "\n")
    return 2
  end
  local changes = diff.compare(old, new, { old_text = old_text, new_text = new_text })
  local widens = diff.widens(changes)

  local signed, log_path, unsigned_why
  if widens then
    log_path = opts.log or (not pos[2]:match("^git:") and signoff.default_log(pos[2])) or nil
    if log_path then
      local log, why, code = signoff.read(log_path)
      if not log and code ~= "missing" then
        err:write("retryfreeze diff: ", why, "\n")
        return 2
      end
      if log and log.torn then
        err:write(string.format("retryfreeze diff: %s:%d: torn last line ignored\n", log_path, log.torn))
      end
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
    out:write(json.encode(doc, { "kind", "route", "field", "old", "new", "text", "line", "requests", "from", "to",
      "summary",
      "signed_off", "changes", "source", "digest", "widening", "narrowing", "neutral", "date", "by", "log" }), "\n")
  else
    for _, c in ipairs(changes) do out:write(diff.format(c), "\n") end
    if #changes == 0 then out:write("no changes (", new.digest, ")\n") end
    if signed then
      out:write(string.format("widening signed off: %s on %s by %s (%s line %d)\n", new.digest, signed.date,
        table.concat(signed.by, " & "), log_path, signed.line))
    elseif widens then
      out:write("widening without sign-off: ", unsigned_why, "\n")
    end
  end
  if widens and not signed then return 1 end
  return 0
end

return M
