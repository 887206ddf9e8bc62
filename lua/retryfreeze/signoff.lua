--- The pairing log: an append-only, hash-chained JSONL file of sign-offs that verifies itself, shared by any
--- number of locks (docs/governance.md "The pairing log").
---
--- An entry is one JSON object on one line, with exactly these keys, in this order:
---   date      "YYYY-MM-DDTHH:MM:SSZ" (UTC, RFC 3339)
---   lock      the signed lock's path relative to the log's directory ("service.lock.json", "api/x.lock.json")
---   digest    the signed policy's digest, "sha256:<64 lowercase hex>"
---   policy    the signed policy's canonical JSON, as a string: `verify` reloads it and recomputes `digest`
---   by        the signers' names, an array of distinct non-empty strings: two or more, or one with solo
---   solo      true when one person signed alone (`signoff --solo`), else false
---   note      free text ("" when none was given)
---   changes   {widening = n, narrowing = n, neutral = n, lines = [...]}: the diff against this lock's
---             previous signed version in the log (zeros and [] for its first)
---   evidence  only with `signoff --evidence REPLAY.json` (M.evidence): the replay the signers cite, {file, sha256
---             (of the evidence file), candidate (the signed digest), seed, ledgers = [{path, sha256, lines}],
---             locks = [{digest, requests}] (the locks the ledgers ran under), predicted = {figure = number},
---             interval = {ratio = [lo, hi]}, beyond (some attempts lie beyond the record)}
---   previous  the `entry` hash of the line before, or null on the first line (the chain)
---   entry     "sha256:<hex>" of the line's own text up to this member, with "}" appended (written last)
--- The entry hash covers every byte before it, so editing any field of any line breaks that line's hash, and
--- rewriting the hash as well breaks the next line's `previous`; `verify --base git:REV` also checks that the
--- log committed at REV is a prefix of today's, so a rewritten tail is caught against history.
--- Each entry is appended with one write(2) on an O_APPEND descriptor; an existing line is never rewritten.
--- A last line without its newline is torn (an interrupted write): readers report it and ignore it.
--- The log records approvals; it is not a signature: anyone who can write the file can append an entry,
--- which is why it is committed and reviewed with the lock.
local math = require("retryfreeze.compat").math
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local output = require "retryfreeze.output"
local json = require "retryfreeze.json"
local diff = require "retryfreeze.diff"
local git = require "retryfreeze.git"
local replay = require "retryfreeze.replay"
local util = require "retryfreeze.util"

local M = {}

--- The log's file name when none is given: beside the lock.
M.DEFAULT_NAME = "pairing-log.jsonl"

--- The message `verify` prints when the lock needs a new sign-off.
M.CHANGED_MESSAGE = "lock changed; pairing sign-off required"

--- The entry keys, in the order they are written.
M.KEYS = { "date", "lock", "digest", "policy", "by", "solo", "note", "changes", "evidence", "previous", "entry" }

--- The entry keys that may be absent (an entry without evidence, and every entry written before it existed).
M.OPTIONAL = { evidence = true }

--- The keys of an entry's evidence, in the order they are written (M.evidence).
M.EVIDENCE_KEYS = { "file", "sha256", "candidate", "seed", "ledgers", "locks", "predicted", "interval", "beyond" }

--- The predicted counts an evidence records beside the figures of retryfreeze.replay.figures.
M.EVIDENCE_COUNTS = { "upstream_attempts", "extra_attempts", "exact", "modelled", "unmodelled", "no_route" }

local change_keys = { widening = true, narrowing = true, neutral = true, lines = true }

--- sha256 of a string as "sha256:<64 lowercase hex>" (libcrypto, through the engine).
-- @param text string
-- @return string
function M.sha256(text) return core.sha256(text) end

local function dirname(path)
  local dir = path:match("^(.*)/[^/]*$")
  if dir == nil then return "." end
  return dir == "" and "/" or dir
end

--- The default log path for a lock: pairing-log.jsonl in the lock's directory.
-- @param lock_path string
-- @return string
function M.default_log(lock_path)
  local dir = lock_path:match("^(.*)/[^/]*$")
  if dir == nil then return M.DEFAULT_NAME end
  return (dir == "" and "/" or dir .. "/") .. M.DEFAULT_NAME
end

local cwd_cache
local function cwd()
  if cwd_cache == nil then
    local p = io.popen("pwd -P 2>/dev/null")
    cwd_cache = p and p:read("*l") or os.getenv("PWD") or "."
    if p then p:close() end
  end
  return cwd_cache
end

-- An absolute path with "." and ".." resolved lexically (symbolic links are not followed).
local function absolute(path)
  if path:sub(1, 1) ~= "/" then path = cwd() .. "/" .. path end
  local parts = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      parts[#parts] = nil
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  return "/" .. table.concat(parts, "/")
end

--- The lock's path relative to the log's directory, as entries name it ("service.lock.json", "../x.lock.json").
-- @param lock_path string: as given on the command line
-- @param log_path string
-- @return string
function M.lock_name(lock_path, log_path)
  local lock, dir = absolute(lock_path), absolute(dirname(log_path))
  local a, b = {}, {}
  for seg in lock:gmatch("[^/]+") do a[#a + 1] = seg end
  for seg in dir:gmatch("[^/]+") do b[#b + 1] = seg end
  local i = 1
  while i <= #a - 1 and i <= #b and a[i] == b[i] do i = i + 1 end
  local out = {}
  for _ = i, #b do out[#out + 1] = ".." end
  for k = i, #a do out[#out + 1] = a[k] end
  return table.concat(out, "/")
end

local function is_digest(s) return type(s) == "string" and #s == 71 and s:match("^sha256:[0-9a-f]+$") ~= nil end
local function is_count(n) return math.type(n) == "integer" and n >= 0 end
local function is_object(t) return type(t) == "table" and getmetatable(t) ~= json.array_mt and t ~= json.null end

--- The signers from --by values: each value may hold several names separated by "&" or ","; names are
--- trimmed; the same name twice (ignoring case) is one signer.
-- @param values array of strings
-- @return array of names (first spelling kept, in order)
function M.signers(values)
  local names, seen = {}, {}
  for _, v in ipairs(values or {}) do
    for name in (v .. "&"):gmatch("([^&,]*)[&,]") do
      name = name:match("^%s*(.-)%s*$")
      if name ~= "" and not seen[name:lower()] then
        seen[name:lower()] = true
        names[#names + 1] = name
      end
    end
  end
  return names
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

local function is_number(n) return type(n) == "number" and n == n and n ~= math.huge and n ~= -math.huge end
local function is_array(t) return getmetatable(t) == json.array_mt end

--- Checks the shape of an entry's evidence (M.EVIDENCE_KEYS), signed as digest.
-- @param ev any: the decoded `evidence` member
-- @param digest string: the entry's digest (the evidence's candidate must be it)
-- @return nil, or a message naming the member ("bad \"evidence.ledgers[0].sha256\" (…)")
function M.check_evidence(ev, digest)
  if not is_object(ev) then return "bad \"evidence\" (expected an object)" end
  local allowed = {}
  for _, k in ipairs(M.EVIDENCE_KEYS) do allowed[k] = true end
  for k in pairs(ev) do
    if not allowed[k] then return string.format("unknown field \"evidence.%s\"", k) end
  end
  if type(ev.file) ~= "string" or ev.file == "" then return "bad \"evidence.file\" (expected the evidence's path)" end
  if not is_digest(ev.sha256) then return "bad \"evidence.sha256\" (expected \"sha256:<64 lowercase hex>\")" end
  if ev.candidate ~= digest then
    return string.format("\"evidence.candidate\" is %s, not the entry's digest %s", tostring(ev.candidate), digest)
  end
  if not is_count(ev.seed) then return "bad \"evidence.seed\" (expected a count)" end
  if not is_array(ev.ledgers) or #ev.ledgers == 0 then
    return "bad \"evidence.ledgers\" (expected a non-empty array)"
  end
  for i, l in ipairs(ev.ledgers) do
    local at = string.format("evidence.ledgers[%d]", i - 1)
    if not is_object(l) or type(l.path) ~= "string" or l.path == "" or not is_digest(l.sha256)
      or not is_count(l.lines) then
      return string.format("bad \"%s\" (expected {path, sha256, lines})", at)
    end
  end
  if not is_array(ev.locks) then return "bad \"evidence.locks\" (expected an array)" end
  for i, l in ipairs(ev.locks) do
    if not is_object(l) or type(l.digest) ~= "string" or not is_count(l.requests) then
      return string.format("bad \"evidence.locks[%d]\" (expected {digest, requests})", i - 1)
    end
  end
  if not is_object(ev.predicted) then return "bad \"evidence.predicted\" (expected an object)" end
  for k, v in pairs(ev.predicted) do
    if not is_number(v) then return string.format("bad \"evidence.predicted.%s\" (expected a number)", k) end
  end
  if not is_object(ev.interval) then return "bad \"evidence.interval\" (expected an object)" end
  for k, v in pairs(ev.interval) do
    if not is_array(v) or #v ~= 2 or not is_number(v[1]) or not is_number(v[2]) or v[1] > v[2] then
      return string.format("bad \"evidence.interval.%s\" (expected [lo, hi])", k)
    end
  end
  if type(ev.beyond) ~= "boolean" then return "bad \"evidence.beyond\" (expected true or false)" end
  return nil
end

--- Reads the evidence a sign-off cites: the JSON `retryfreeze replay --json` printed for the lock being signed,
--- and the ledgers it names, each digested now (core.sha256_file) and checked against the lines the replay read.
-- @param path string: the evidence file (as given on the command line)
-- @param policy policy: the lock being signed
-- @param log_path string: the pairing log (the evidence's `file` is named relative to its directory)
-- @return evidence table (M.EVIDENCE_KEYS), or nil, message naming the file and what is wrong: unreadable, not
--   JSON, not a replay's output (the JSON path of the member), a candidate that is not the lock being signed, a
--   ledger that cannot be read or whose lines are not those the replay read
function M.evidence(path, policy, log_path)
  local text, rerr = core.read_file(path, core.LOG_MAX_BYTES, "evidence")
  if not text then return nil, "--evidence: " .. rerr end
  local r, jerr = json.decode(text)
  if r == nil then return nil, string.format("--evidence %s: not valid JSON: %s", path, jerr) end
  local function bad(at, expected)
    return nil, string.format("--evidence %s: %s is not %s (expected the output of `retryfreeze replay --json`)",
      path, at, expected)
  end
  if not is_object(r) then return bad("$", "an object") end
  if not is_digest(r.candidate) then return bad("$.candidate", "a lock digest") end
  if r.candidate ~= policy.digest then
    return nil, string.format("--evidence %s: the replay's candidate is %s, not the lock being signed (%s): "
      .. "replay the ledgers under this lock and cite that", path, r.candidate, policy.digest)
  end
  if not is_array(r.ledgers) or #r.ledgers == 0 then return bad("$.ledgers", "a non-empty array") end
  local ledgers = json.array()
  for i, l in ipairs(r.ledgers) do
    local at = string.format("$.ledgers[%d]", i - 1)
    if not is_object(l) or type(l.path) ~= "string" or l.path == "" or l.path:find("%z") or not is_count(l.lines)
    then
      return bad(at, "{path, lines}")
    end
    local digest, lines = core.sha256_file(l.path, "ledger") -- on failure: nil, message
    if not digest then return nil, string.format("--evidence %s: %s: %s", path, at, lines) end
    if lines ~= l.lines then
      return nil, string.format("--evidence %s: ledger %s has %d lines, the replay read %d: it changed since the "
        .. "replay (replay it again)", path, l.path, lines, l.lines)
    end
    ledgers[i] = { path = l.path, sha256 = digest, lines = lines }
  end
  local locks = json.array()
  if not is_array(r.locks) then return bad("$.locks", "an array") end
  for i, l in ipairs(r.locks) do
    if not is_object(l) or type(l.digest) ~= "string" or not is_count(l.requests) then
      return bad(string.format("$.locks[%d]", i - 1), "{digest, requests}")
    end
    locks[i] = { digest = l.digest, requests = l.requests }
  end
  if not is_object(r.info) or not is_count(r.info.seed) then return bad("$.info.seed", "a count") end
  local p = r.predicted
  if not is_object(p) then return bad("$.predicted", "an object") end
  local predicted = {}
  for _, list in ipairs({ replay.figures, replay.ratios }) do
    for _, k in ipairs(list) do
      if not is_number(p[k]) then return bad("$.predicted." .. k, "a number") end
      predicted[k] = p[k]
    end
  end
  for _, k in ipairs(M.EVIDENCE_COUNTS) do
    if not is_count(p[k]) and not (k == "extra_attempts" and math.type(p[k]) == "integer") then
      return bad("$.predicted." .. k, "a count")
    end
    predicted[k] = p[k]
  end
  local whole = is_object(r.interval) and r.interval.whole
  if not is_object(whole) then return bad("$.interval.whole", "an object") end
  local interval = {}
  for _, k in ipairs(replay.ratios) do
    local lo, hi = whole[k .. "_lo"], whole[k .. "_hi"]
    if not is_number(lo) or not is_number(hi) or lo > hi then
      return bad("$.interval.whole." .. k .. "_lo/_hi", "an interval")
    end
    interval[k] = json.array({ lo, hi })
  end
  if whole.beyond ~= nil and type(whole.beyond) ~= "boolean" then return bad("$.interval.whole.beyond", "a boolean") end
  return { file = M.lock_name(path, log_path), sha256 = M.sha256(text), candidate = r.candidate, seed = r.info.seed,
    ledgers = ledgers, locks = locks, predicted = predicted, interval = interval, beyond = whole.beyond == true }
end

--- The lines `signoff` and `verify` print of an entry's evidence (every string from a file made printable).
-- @param ev table: an entry's evidence
-- @return array of strings
function M.evidence_lines(ev)
  local lines = { util.format("evidence: %s %s (replay under %s, seed %d)", ev.file, ev.sha256, ev.candidate,
    ev.seed) }
  for _, l in ipairs(ev.ledgers) do
    lines[#lines + 1] = util.format("  ledger %s %s (%d lines)", l.path, l.sha256, l.lines)
  end
  for _, l in ipairs(ev.locks) do
    lines[#lines + 1] = util.format("  recorded under %s (%d requests)", l.digest, l.requests)
  end
  local p, parts = ev.predicted, {}
  for _, k in ipairs(replay.ratios) do
    local iv = ev.interval[k]
    if p[k] ~= nil and iv then parts[#parts + 1] = string.format("%s %.4f [%.4f, %.4f]", k, p[k], iv[1], iv[2]) end
  end
  lines[#lines + 1] = "  predicted: " .. table.concat(parts, ", ")
  lines[#lines + 1] = string.format("  predicted: %s requests, %s attempts (%+d), %s exact, %s modelled, %s not "
    .. "modelled%s", tostring(p.requests), tostring(p.upstream_attempts), p.extra_attempts or 0, tostring(p.exact),
    tostring(p.modelled), tostring(p.unmodelled), ev.beyond and "; some attempts lie beyond the record" or "")
  return lines
end

-- Validates one decoded entry's shape; returns nil or a message.
local function check_shape(e)
  if not is_object(e) then return "not a JSON object" end
  local allowed = {}
  for _, k in ipairs(M.KEYS) do allowed[k] = true end
  for k in pairs(e) do
    if not allowed[k] then return string.format("unknown field \"%s\"", k) end
  end
  for _, k in ipairs(M.KEYS) do
    if e[k] == nil and not M.OPTIONAL[k] then
      return string.format("missing field \"%s\"%s", k, (k == "lock" or k == "entry") and
        " (an entry in the old, unchained format: sign the locks again into a new log)" or "")
    end
  end
  if type(e.date) ~= "string" or not e.date:match("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$") then
    return "bad date (expected UTC RFC 3339 \"YYYY-MM-DDTHH:MM:SSZ\")"
  end
  if type(e.lock) ~= "string" or e.lock == "" or e.lock:sub(1, 1) == "/" or e.lock:find("[%z\n]") then
    return "bad \"lock\" (expected the lock's path relative to the log)"
  end
  if not is_digest(e.digest) then return "bad digest format (expected \"sha256:<64 lowercase hex>\")" end
  if type(e.policy) ~= "string" then return "bad \"policy\" (expected the canonical JSON text)" end
  if getmetatable(e.by) ~= json.array_mt or #e.by == 0 then return "bad \"by\" (expected an array of names)" end
  local seen = {}
  for _, n in ipairs(e.by) do
    if type(n) ~= "string" or n:match("^%s*$") then return "bad \"by\" (expected an array of names)" end
    if seen[n:lower()] then return string.format("\"by\" names %q twice", n) end
    seen[n:lower()] = true
  end
  if type(e.solo) ~= "boolean" then return "bad \"solo\" (expected true or false)" end
  if not e.solo and #e.by < 2 then return "\"by\" has one name but \"solo\" is false (two signers are required)" end
  if e.solo and #e.by ~= 1 then return "\"solo\" is true but \"by\" has more than one name" end
  if type(e.note) ~= "string" then return "bad \"note\" (expected a string)" end
  local c = e.changes
  if not is_object(c) then return "bad \"changes\" (expected an object)" end
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
  if e.evidence ~= nil then
    local why = M.check_evidence(e.evidence, e.digest)
    if why then return why end
  end
  if e.previous ~= json.null and not is_digest(e.previous) then return "bad \"previous\" (expected a hash or null)" end
  if not is_digest(e.entry) then return "bad \"entry\" (expected \"sha256:<64 lowercase hex>\")" end
  return nil
end

--- The entry hash of a line: sha256 of its text up to the `"entry"` member, with "}" appended.
-- @param line string: one log line without its newline
-- @return hash string, or nil when the line does not end with the `,"entry":"sha256:…"}` member
function M.entry_hash(line)
  local head = line:match('^(.*),"entry":"sha256:[0-9a-f]+"}%s*$')
  if head == nil then return nil end
  return M.sha256(head .. "}")
end

--- Reloads the policy an entry signed, from its canonical JSON.
-- @param entry table from read() (or entry())
-- @return policy, or nil, message (it does not load, or its digest is not the entry's `digest`)
function M.signed_policy(entry)
  if type(entry.policy) ~= "string" then return nil, "the entry stores no policy" end
  local name = "sign-off " .. tostring(entry.digest)
  local p, err = rf.load_string(entry.policy, name)
  if not p then
    -- Absent optional sections are spelled null in the canonical JSON; a lock omits them.
    local text = entry.policy:gsub('^{"gate":null,', "{"):gsub('^{"retryBudget":null,', "{")
    p, err = rf.load_string(text, name)
  end
  if not p then return nil, err end
  if p.digest ~= entry.digest then
    return nil, string.format("the stored policy's digest is %s, not %s", p.digest, tostring(entry.digest))
  end
  return p
end

--- Reads a pairing log and verifies every entry: its shape, its own hash, the chain, and that its stored
--- policy loads and has the digest it claims.
-- @param path string
-- @param opts table|nil: {text = string} to check this text instead of reading path (verify --base)
-- @return log {path, text, entries = {entry…}, torn = false or the torn last line's number}, each entry the
--   decoded object plus `line` (1-based) and `raw` (its text); or nil, message, code with code "missing" ("PATH:
--   no such file"), "unreadable" or "tampered" ("PATH:LINE: tampered entry: why")
function M.read(path, opts)
  local text = opts and opts.text
  if text == nil then
    local err, kind
    text, err, kind = core.read_file(path, core.LOG_MAX_BYTES, "pairing log")
    if not text then
      if kind == "missing" then return nil, path .. ": no such file", "missing" end
      return nil, err, "unreadable"
    end
  end
  local log = { path = path, text = text, entries = {}, torn = false }
  local n, prev, pos = 0, json.null, 1
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
      why = at and ("a NUL character in " .. at .. " (no string of an entry may hold NUL)") or check_shape(e)
    end
    if not why then
      local h = M.entry_hash(line)
      if h == nil then
        why = "\"entry\" is not the last member"
      elseif h ~= e.entry then
        why = string.format("the line hashes to %s, not to its \"entry\" %s (the line was edited)", h, e.entry)
      elseif e.previous ~= prev then
        why = string.format("\"previous\" is %s but the line before hashes to %s (a line was removed, inserted "
          .. "or rewritten)", tostring(e.previous == json.null and "null" or e.previous),
          tostring(prev == json.null and "null (no line before)" or prev))
      else
        local _, perr = M.signed_policy(e)
        if perr then why = "\"policy\" does not match \"digest\": " .. perr end
      end
    end
    if why then return nil, string.format("%s:%d: tampered entry: %s", path, n, why), "tampered" end
    e.line, e.raw = n, line
    prev = e.entry
    log.entries[#log.entries + 1] = e
  end
  return log
end

--- The latest entry of a log, or of one lock in it.
-- @param log table from read()
-- @param lock string|nil: the lock's name in the log (M.lock_name); nil for any lock
-- @return entry or nil
function M.latest(log, lock)
  for i = #log.entries, 1, -1 do
    local e = log.entries[i]
    if lock == nil or e.lock == lock then return e end
  end
  return nil
end

local function utc_now() return os.date("!%Y-%m-%dT%H:%M:%SZ") end

--- Builds a new entry for `policy`, with the diff against the lock's latest sign-off in `log`.
-- @param policy policy: the lock being signed
-- @param opts table: {lock = the lock's name in the log (required), by = array of names (required: two
--   distinct, or exactly one with solo = true), solo = boolean, note = string|nil, log = log from read() or nil
--   for a new log, date = "YYYY-MM-DDTHH:MM:SSZ"|nil (default: now, UTC), evidence = table from M.evidence|nil}
-- @return entry table without `entry` (M.encode adds it); or nil, message for too few signers
function M.entry(policy, opts)
  if type(opts) ~= "table" or type(opts.lock) ~= "string" or type(opts.by) ~= "table" then
    error("bad argument #2 to 'entry' (lock = NAME and by = {names} are required)", 2)
  end
  local by = M.signers(opts.by)
  if #by == 0 then return nil, "--by NAME is required" end
  if opts.solo and #by ~= 1 then
    return nil, string.format("--solo signs alone, but --by names %d people", #by)
  end
  if not opts.solo and #by < 2 then
    return nil, string.format("a pairing sign-off needs two distinct names (--by \"A\" --by \"B\" or \"A & B\"), "
      .. "got %s; sign alone with --solo (recorded as such)", #by == 1 and ("only \"" .. by[1] .. "\"") or "none")
  end
  local latest = opts.log and M.latest(opts.log, opts.lock)
  local changes = { widening = 0, narrowing = 0, neutral = 0, lines = json.array() }
  if latest then
    local old, err = M.signed_policy(latest)
    if not old then error("a verified log holds an entry that does not load: " .. err) end
    local list = diff.compare(old, policy)
    local s = diff.summary(list)
    changes.widening, changes.narrowing, changes.neutral = s.widening, s.narrowing, s.neutral
    for i, l in ipairs(diff.lines(list)) do changes.lines[i] = l end
  end
  local last = opts.log and M.latest(opts.log)
  return {
    date = opts.date or utc_now(),
    lock = opts.lock,
    digest = policy.digest,
    policy = policy:canonical_json(),
    by = json.array(by),
    solo = opts.solo and true or false,
    note = opts.note or "",
    changes = changes,
    evidence = opts.evidence,
    previous = last and last.entry or json.null,
  }
end

--- Encodes an entry as its log line (without the newline), computing its `entry` hash.
-- @param entry table from entry()
-- @return string
function M.encode(entry)
  local e = {}
  for _, k in ipairs(M.KEYS) do
    if k ~= "entry" then e[k] = entry[k] end
  end
  local order = {}
  for _, k in ipairs(M.KEYS) do order[#order + 1] = k end
  order[#order + 1] = "path" -- an evidence ledger's: path, lines, sha256
  for _, k in ipairs({ "widening", "narrowing", "neutral", "lines" }) do order[#order + 1] = k end
  for _, k in ipairs(M.EVIDENCE_KEYS) do order[#order + 1] = k end
  order[#order + 1] = "requests"
  local head = json.encode(e, order)
  assert(head:sub(-1) == "}" and head:sub(-2) ~= "{}", "an entry encodes as a JSON object")
  return head:sub(1, -2) .. ',"entry":"' .. M.sha256(head) .. '"}'
end

--- Appends an entry to a log with one write(2) on an O_APPEND descriptor (the file is created if missing).
--- Refuses a log whose last line is torn: appending would bury the torn line in the middle of the log.
-- @param path string
-- @param line string from encode()
-- @return the new entry's line number, or nil, message
function M.append(path, line)
  line = line .. "\n"
  local lines = 0
  local text, rerr, kind = core.read_file(path, core.LOG_MAX_BYTES, "pairing log")
  if not text and kind ~= "missing" then return nil, rerr end
  if text then
    local _, count = text:gsub("\n", "")
    if text ~= "" and text:sub(-1) ~= "\n" then
      return nil, string.format("%s:%d: the last line is torn (no newline); the log is append-only, so remove "
        .. "the partial line by hand before signing off", path, count + 1)
    end
    lines = count
  end
  local ok, err = output.append(path, line, "pairing log") -- one write(2), O_APPEND; a regular file only
  if not ok then return nil, err end
  return lines + 1
end

--- Checks a policy against a verified log.
-- @param policy policy
-- @param log table from read()
-- @param lock string: the lock's name in the log (M.lock_name)
-- @return result {ok = boolean, status = "signed" (the digest is the lock's latest sign-off) | "not-widened"
--   (every change since the latest sign-off is narrowing or neutral) | "widened" | "unsigned" (no entry for
--   this lock), latest = entry|nil, changes = array from diff.compare (against latest; empty when signed),
--   older = entry|nil (an earlier entry of this lock that signed this same digest)}
function M.verify(policy, log, lock)
  local latest = M.latest(log, lock)
  local result = { ok = false, status = "unsigned", latest = latest, changes = {} }
  if latest == nil then return result end
  if latest.digest == policy.digest then
    result.ok, result.status = true, "signed"
    return result
  end
  for i = #log.entries, 1, -1 do
    local e = log.entries[i]
    if e.lock == lock and e.digest == policy.digest and e ~= latest then
      result.older = e
      break
    end
  end
  local old = assert(M.signed_policy(latest)) -- read() verified it
  result.changes = diff.compare(old, policy)
  if diff.widens(result.changes) then
    result.status = "widened"
  else
    result.ok, result.status = true, "not-widened"
  end
  return result
end

--- Checks that a log committed earlier is a prefix of the log now: nothing deleted or rewritten.
-- @param base_text string: the log's text at the base revision ("" when it did not exist)
-- @param log table from read()
-- @return true, or nil, message naming the first line that differs
function M.check_prefix(base_text, log)
  if log.text:sub(1, #base_text) == base_text then return true end
  local n, pos = 0, 1
  while true do
    local a_end = base_text:find("\n", pos, true) or #base_text + 1
    local b_end = log.text:find("\n", pos, true) or #log.text + 1
    n = n + 1
    if base_text:sub(pos, a_end) ~= log.text:sub(pos, b_end) then
      if pos > #log.text then
        return nil, string.format("the base log has %d or more lines but this one ends before line %d (lines were "
          .. "deleted)", n, n)
      end
      return nil, string.format("line %d differs from the base log's (an entry was rewritten or removed)", n)
    end
    pos = a_end + 1
  end
end

--- Reads a log file as committed at a git revision: `git -C DIR show REV:./NAME`, run in the log's directory.
-- @param rev string: the revision (not starting with "-")
-- @param log_path string
-- @return text ("" when the log did not exist at REV), or nil, message (git's own error, or a log at REV over
--   the pairing log's cap, which is never read whole)
function M.git_text(rev, log_path)
  if rev == "" or rev:sub(1, 1) == "-" or rev:find("[%z\n:]") then
    return nil, "git:" .. rev .. ": expected git:REV (REV not empty, not starting with '-', without ':')"
  end
  local text, why, kind = git.show(rev .. ":./" .. log_path:match("([^/]*)$"),
    { dir = dirname(log_path), max_bytes = core.LOG_MAX_BYTES })
  if text then return text end
  if kind == "absent" then return "" end
  if kind == "too-large" then return nil, string.format("git:%s: pairing log %s at %s is %s", rev, log_path, rev, why) end
  return nil, "git:" .. rev .. ": " .. why
end

return M
