--- The pairing log: an append-only JSONL file of sign-offs, one entry per line (docs/governance.md).
---
--- An entry is one JSON object on one line, with exactly these keys:
---   date      "YYYY-MM-DDTHH:MM:SSZ" (UTC, RFC 3339)
---   digest    the signed lock's digest, "sha256:<64 lowercase hex>"
---   by        who signed (a non-empty string, e.g. "Ana Ruiz & Bo Chen")
---   note      free text ("" when none was given)
---   previous  the digest of the entry before it, or null for the first entry (a broken chain is tampering)
---   changes   {widening = n, narrowing = n, neutral = n, lines = ["WIDENING  POST /v1/jobs  maxAttempts 2 → 5", …]}:
---             the diff against the previous signed-off policy
---   policy    (optional) the signed policy's canonical JSON, as a string, so that `verify` can list what
---             changed since without the old file
--- Each entry is appended with one write(2) on an O_APPEND descriptor; an existing line is never rewritten.
--- A last line without its newline is torn (an interrupted write): readers report it and ignore it.
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local json = require "retryfreeze.json"
local diff = require "retryfreeze.diff"

local M = {}

--- The log's file name when none is given: beside the lock.
M.DEFAULT_NAME = "pairing-log.jsonl"

--- The message `verify` prints when the lock's digest is not the latest signed-off one.
M.CHANGED_MESSAGE = "lock changed; pairing sign-off required"

local entry_keys <const> = { "date", "digest", "by", "note", "previous", "changes", "policy" }
local change_keys <const> = { widening = true, narrowing = true, neutral = true, lines = true }

--- The default log path for a lock: pairing-log.jsonl in the lock's directory.
-- @param lock_path string
-- @return string
function M.default_log(lock_path)
  local dir = lock_path:match("^(.*)/[^/]*$")
  if dir == nil then return M.DEFAULT_NAME end
  return (dir == "" and "/" or dir .. "/") .. M.DEFAULT_NAME
end

local function is_digest(s) return type(s) == "string" and #s == 71 and s:match("^sha256:[0-9a-f]+$") ~= nil end

local function is_count(n) return math.type(n) == "integer" and n >= 0 end

-- Validates one decoded entry; returns nil or a message.
local function check_entry(e, prev_digest)
  if type(e) ~= "table" or getmetatable(e) == json.array_mt or e == json.null then return "not a JSON object" end
  local allowed = {}
  for _, k in ipairs(entry_keys) do allowed[k] = true end
  for k in pairs(e) do
    if not allowed[k] then return string.format("unknown field \"%s\"", k) end
  end
  for _, k in ipairs(entry_keys) do
    if e[k] == nil and k ~= "policy" then return string.format("missing field \"%s\"", k) end
  end
  if type(e.date) ~= "string" or not e.date:match("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$") then
    return "bad date (expected UTC RFC 3339 \"YYYY-MM-DDTHH:MM:SSZ\")"
  end
  if not is_digest(e.digest) then return "bad digest format (expected \"sha256:<64 lowercase hex>\")" end
  if type(e.by) ~= "string" or e.by:match("^%s*$") then return "bad \"by\" (expected the signers' names)" end
  if type(e.note) ~= "string" then return "bad \"note\" (expected a string)" end
  if e.previous ~= json.null and not is_digest(e.previous) then
    return "bad \"previous\" (expected a digest or null)"
  end
  local expected = prev_digest or json.null
  if e.previous ~= expected then
    return string.format("\"previous\" is %s but the entry before it signed %s", tostring(e.previous),
      tostring(expected))
  end
  local c = e.changes
  if type(c) ~= "table" or getmetatable(c) == json.array_mt or c == json.null then
    return "bad \"changes\" (expected an object)"
  end
  for k in pairs(c) do
    if not change_keys[k] then return string.format("unknown field \"changes.%s\"", k) end
  end
  for _, k in ipairs({ "widening", "narrowing", "neutral" }) do
    if not is_count(c[k]) then return string.format("bad \"changes.%s\" (expected a count)", k) end
  end
  if getmetatable(c.lines) ~= json.array_mt then return "bad \"changes.lines\" (expected an array of strings)" end
  for _, l in ipairs(c.lines) do
    if type(l) ~= "string" then return "bad \"changes.lines\" (expected an array of strings)" end
  end
  if e.policy ~= nil and type(e.policy) ~= "string" then return "bad \"policy\" (expected canonical JSON text)" end
  return nil
end

-- The JSON path of the first key or string in v that holds a NUL character (escaped \u0000 or raw), or nil:
-- C reads such a string only up to the NUL, so it is refused rather than cut.
local function nul_at(v, path)
  if type(v) == "string" then return v:find("\0", 1, true) and path or nil end
  if type(v) ~= "table" then return nil end
  for k, x in pairs(v) do
    local sub = math.type(k) == "integer" and string.format("%s[%d]", path, k - 1) or path .. "." .. tostring(k)
    if type(k) == "string" and k:find("\0", 1, true) then return (sub:gsub("%z", "\\u0000")) end
    local at = nul_at(x, sub)
    if at then return at end
  end
  return nil
end

--- Reads and checks a pairing log (at most core.LOG_MAX_BYTES, 16 MiB; a regular file only).
-- @param path string
-- @return log {path = path, entries = {entry…}, torn = false or the torn last line's number}, where each entry
--   is the decoded object plus `line` (its 1-based line number); or nil, message, code with code
--   "missing" (no such file: message "PATH: no such file"), "unreadable" (another I/O error) or "tampered"
--   (message "PATH:LINE: tampered entry: why" — not JSON, a missing or unknown field, a bad digest or date
--   format, an empty line, or a "previous" that does not chain to the entry before)
function M.read(path)
  local text, err, kind = core.read_file(path, core.LOG_MAX_BYTES, "pairing log")
  if not text then
    if kind == "missing" then return nil, path .. ": no such file", "missing" end
    return nil, err, "unreadable"
  end
  local log = { path = path, entries = {}, torn = false }
  local n, prev, pos = 0, nil, 1
  while pos <= #text do
    n = n + 1
    local nl = text:find("\n", pos, true)
    if nl == nil then
      log.torn = n
      break
    end
    local line = text:sub(pos, nl - 1)
    pos = nl + 1
    local why
    local e, jerr = json.decode(line)
    if line:match("^%s*$") then
      why = "empty line"
    elseif e == nil then
      why = "not valid JSON: " .. jerr
    else
      local at = nul_at(e, "$")
      why = at and ("a NUL character in " .. at .. " (no string of an entry may hold NUL)") or check_entry(e, prev)
    end
    if why then return nil, string.format("%s:%d: tampered entry: %s", path, n, why), "tampered" end
    e.line = n
    prev = e.digest
    log.entries[#log.entries + 1] = e
  end
  return log
end

--- The latest sign-off of a log.
-- @param log table from read()
-- @return entry or nil when the log has none
function M.latest(log) return log.entries[#log.entries] end

--- Reloads the policy an entry signed, from its stored canonical JSON.
-- @param entry table from read() (or entry())
-- @return policy, or nil, message (no policy stored, it does not load, or its digest differs from the entry's:
--   the lock schema changed since, or the entry was edited)
function M.signed_policy(entry)
  if type(entry.policy) ~= "string" then return nil, "the entry stores no policy" end
  local name = "sign-off " .. entry.digest
  local p, err = rf.load_string(entry.policy, name)
  if not p then
    -- Absent optional sections are spelled null in the canonical JSON; a lock omits them.
    local text = entry.policy:gsub('^{"gate":null,', "{"):gsub('^{"retryBudget":null,', "{")
    p, err = rf.load_string(text, name)
  end
  if not p then return nil, err end
  if p.digest ~= entry.digest then
    return nil, string.format("the stored policy's digest is %s, not %s", p.digest, entry.digest)
  end
  return p
end

--- Builds a new entry for `policy`, with the diff against the latest sign-off of `log`.
-- @param policy policy: the lock being signed
-- @param opts table: {by = "NAMES" (required, non-empty), note = string|nil, log = log from read() or nil
--   for a new log, date = "YYYY-MM-DDTHH:MM:SSZ"|nil (default: now, UTC)}
-- @return entry table (keys as in the module comment); raises on a missing `by`
function M.entry(policy, opts)
  if type(opts) ~= "table" or type(opts.by) ~= "string" or opts.by:match("^%s*$") then
    error("bad argument #2 to 'entry' (by = \"NAMES\" is required)", 2)
  end
  local latest = opts.log and M.latest(opts.log)
  local changes = { widening = 0, narrowing = 0, neutral = 0, lines = json.array() }
  if latest then
    local old, err = M.signed_policy(latest)
    if old then
      local list = diff.compare(old, policy)
      local s = diff.summary(list)
      changes.widening, changes.narrowing, changes.neutral = s.widening, s.narrowing, s.neutral
      for i, l in ipairs(diff.lines(list)) do changes.lines[i] = l end
    else
      changes.lines[1] = "changes since " .. latest.digest .. " unknown: " .. err
    end
  end
  return {
    date = opts.date or os.date("!%Y-%m-%dT%H:%M:%SZ"),
    digest = policy.digest,
    by = opts.by,
    note = opts.note or "",
    previous = latest and latest.digest or json.null,
    changes = changes,
    policy = policy:canonical_json(),
  }
end

--- Encodes an entry as its log line (without the newline).
-- @param entry table from entry()
-- @return string
function M.encode(entry)
  local e = {}
  for _, k in ipairs(entry_keys) do e[k] = entry[k] end
  return json.encode(e, { "date", "digest", "by", "note", "previous", "changes", "policy", "widening", "narrowing",
    "neutral", "lines" })
end

--- Appends an entry to a log with one write(2) on an O_APPEND descriptor (the file is created if missing).
--- Refuses a log whose last line is torn: appending would bury the torn line in the middle of the log.
-- @param path string
-- @param entry table from entry()
-- @return the new entry's line number, or nil, message
function M.append(path, entry)
  local line = M.encode(entry) .. "\n"
  local lines = 0
  local text, rerr, kind = core.read_file(path, core.LOG_MAX_BYTES, "pairing log")
  if not text and kind ~= "missing" then return nil, rerr end
  if text then
    if text ~= "" and text:sub(-1) ~= "\n" then
      local _, count = text:gsub("\n", "")
      return nil, string.format("%s:%d: the last line is torn (no newline); the log is append-only, so remove "
        .. "the partial line by hand before signing off", path, count + 1)
    end
    local _, count = text:gsub("\n", "")
    lines = count
  end
  local f, err = io.open(path, "ab")
  if not f then return nil, err end
  -- One buffer larger than the line: the whole line leaves in one write(2) when the file is closed.
  f:setvbuf("full", #line + 1024)
  local ok, werr = f:write(line)
  local cok, cerr = f:close()
  if not ok then return nil, path .. ": " .. tostring(werr) end
  if not cok then return nil, path .. ": " .. tostring(cerr) end
  return lines + 1
end

--- Checks a policy against a log: signed off only when its digest is the latest entry's.
-- @param policy policy
-- @param log table from read()
-- @return result {ok = boolean, latest = entry|nil, changes = array from diff.compare (empty when ok or when no
--   policy is stored), changes_error = message|nil (why the changes could not be listed), older = entry|nil
--   (an earlier entry that signed this same digest, when the latest did not)}
function M.verify(policy, log)
  local latest = M.latest(log)
  local result = { ok = false, latest = latest, changes = {} }
  if latest == nil then
    result.changes_error = "the log has no sign-off"
    return result
  end
  if latest.digest == policy.digest then
    result.ok = true
    return result
  end
  for i = #log.entries - 1, 1, -1 do
    if log.entries[i].digest == policy.digest then
      result.older = log.entries[i]
      break
    end
  end
  local old, err = M.signed_policy(latest)
  if old then
    result.changes = diff.compare(old, policy)
  else
    result.changes_error = err
  end
  return result
end

return M
