--- Lock diff: compares two policies route by route and classifies every change as widening, narrowing or
--- neutral (docs/governance.md has the full table). Widening means a change that allows more attempts, more
--- time, more retryable classes or less protection for the upstream; narrowing is the reverse; neutral changes
--- no decision (a `$comment`, formatting, a renamed path parameter, a route removed in favour of an identical
--- one). A change this module cannot classify is reported as widening (fail closed).
---
--- The engine decides; this module only reads the effective policy (policy:routes(), policy.gate and the
--- canonical JSON) and policy:match() to find where a removed or added route's requests go.
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local json = require "retryfreeze.json"

local M = {}

--- Jitter ranks, from least to most jittered: how widely the delay is spread for a backoff cap c —
--- none: exactly c; equal: [c/2, c]; full: [0, c]; decorrelated: [min(baseMs, c), min(maxMs, 3c)], which is
--- never earlier and never narrower than full. A lower rank is "less jittered", so a move down is widening:
--- retries from many clients line up in waves against the upstream (AWS, "Exponential Backoff and Jitter").
M.jitter_rank = { none = 0, equal = 1, full = 2, decorrelated = 3 }

--- The label used as `route` for changes that concern the whole lock (retryBudget, gate, comments).
M.POLICY = "(policy)"

local function show(v)
  if v == nil or v == json.null then return "none" end
  if math.type(v) == "float" then return string.format("%.14g", v) end
  return tostring(v)
end

local function greater_wider(a, b) return b > a end
local function smaller_wider(a, b) return b < a end

-- Route scalar fields: lock spelling, accessor on a policy:routes() entry, "is b wider than a?".
local scalar_fields <const> = {
  { "maxAttempts", function(r) return r.max_attempts end, greater_wider },
  { "perAttemptTimeoutMs", function(r) return r.per_attempt_timeout_ms end, greater_wider },
  { "totalBudgetMs", function(r) return r.total_budget_ms end, greater_wider },
  { "minAttemptMs", function(r) return r.min_attempt_ms end, smaller_wider },
  { "backoff.baseMs", function(r) return r.backoff.base_ms end, smaller_wider },
  { "backoff.multiplier", function(r) return r.backoff.multiplier end, smaller_wider },
  { "backoff.maxMs", function(r) return r.backoff.max_ms end, smaller_wider },
  { "backoff.jitter", function(r) return r.backoff.jitter end,
    function(a, b) return M.jitter_rank[b] < M.jitter_rank[a] end },
  { "retryAfter.honor", function(r) return r.retry_after.honor end, function(a, b) return a and not b end },
  { "retryAfter.maxMs", function(r) return r.retry_after.max_ms end, greater_wider },
}

-- Route set fields: lock spelling, accessor, whether adding a member widens.
local set_fields <const> = {
  { "retryable", function(r) return r.retryable end, true },
  { "notRetryable", function(r) return r.not_retryable end, false },
  { "idempotencyRequired", function(r) return r.idempotency_required end, false },
}

-- Gate thresholds (policy.gate, snake_case): lock spelling, key, whether a larger value is looser (a
-- maximum) or stricter (a minimum). An absent threshold (not checked) is the loosest; minSuccesses absent
-- counts as 0 (the gate always applies). A gate added or removed as a whole is one change.
local gate_fields <const> = {
  { "gate.maxRetriedSuccess", "max_retried_success", true },
  { "gate.maxAttemptsPerSuccess", "max_attempts_per_success", true },
  { "gate.maxTerminalRate", "max_terminal_rate", true },
  { "gate.maxRetryRatio", "max_retry_ratio", true },
  { "gate.minSuccessRate", "min_success_rate", false },
}

local function change(kind, route, field, old, new, text)
  return { kind = kind, route = route, field = field, old = old, new = new,
    text = text or string.format("%s %s → %s", field, show(old), show(new)) }
end

local function as_set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

-- Field-by-field changes between two routes a (before) and b (after), labelled with `label`.
local function compare_routes(a, b, label)
  local out = {}
  for _, f in ipairs(scalar_fields) do
    local name, get, wider = f[1], f[2], f[3]
    local va, vb = get(a), get(b)
    if va ~= vb then
      out[#out + 1] = change(wider(va, vb) and "widening" or "narrowing", label, name, va, vb)
    end
  end
  for _, f in ipairs(set_fields) do
    local name, get, add_widens = f[1], f[2], f[3]
    local sa, sb = as_set(get(a)), as_set(get(b))
    for _, v in ipairs(sorted_keys(sa)) do
      if not sb[v] then
        out[#out + 1] = change(add_widens and "narrowing" or "widening", label, name, v, nil, name .. " -" .. v)
      end
    end
    for _, v in ipairs(sorted_keys(sb)) do
      if not sa[v] then
        out[#out + 1] = change(add_widens and "widening" or "narrowing", label, name, nil, v, name .. " +" .. v)
      end
    end
  end
  return out
end

local function aggregate(changes)
  local kind = "neutral"
  for _, c in ipairs(changes) do
    if c.kind == "widening" then return "widening" end
    if c.kind == "narrowing" then kind = "narrowing" end
  end
  return kind
end

local function shape(route) return route.method .. " " .. route.pattern:gsub("{[^}]*}", "{}") end

--- A concrete path that a route's pattern matches: every `{param}` and a final `*` become "rf-sample".
-- @param pattern string: a route pattern such as "/v1/jobs/{id}" or "/v1/*"
-- @return string
function M.sample_path(pattern)
  return (pattern:gsub("{[^}]*}", "rf-sample"):gsub("%*$", "rf-sample"))
end

local function by_endpoint(routes)
  local t = {}
  for _, r in ipairs(routes) do t[r.endpoint] = r end
  return t
end

local function retries(r) return r.max_attempts > 1 and #r.retryable > 0 end

local function detail_text(sub)
  local parts = {}
  for i, c in ipairs(sub) do parts[i] = c.text end
  return #parts > 0 and " (" .. table.concat(parts, "; ") .. ")" or " (identical rules)"
end

-- A route present only in `old`: its requests now go wherever `new` matches its sample path.
local function removed_route(r, new_policy, new_routes)
  local home = new_policy:match(r.method, M.sample_path(r.pattern))
  if home == nil then
    return change("narrowing", r.endpoint, "route", r.endpoint, "no-route",
      "route removed; its requests are now refused (no-route)")
  end
  local sub = compare_routes(r, new_routes[home], r.endpoint)
  local c = change(aggregate(sub), r.endpoint, "route", r.endpoint, home,
    "route removed; its requests now go to " .. home .. detail_text(sub))
  c.details = sub
  return c
end

-- A route present only in `new`: its requests used to go wherever `old` matched its sample path.
local function added_route(r, old_policy, old_routes)
  local home = old_policy:match(r.method, M.sample_path(r.pattern))
  if home == nil then
    local what = retries(r) and string.format("it retries (maxAttempts %d, retryable %s)", r.max_attempts,
      table.concat(r.retryable, ", ")) or string.format("maxAttempts %d", r.max_attempts)
    return change("widening", r.endpoint, "route", "no-route", r.endpoint,
      "route added; its requests were refused before (no-route); " .. what)
  end
  local sub = compare_routes(old_routes[home], r, r.endpoint)
  local c = change(aggregate(sub), r.endpoint, "route", home, r.endpoint,
    "route added; its requests used to go to " .. home .. detail_text(sub))
  c.details = sub
  return c
end

local function decode_canonical(policy)
  local doc, err = json.decode(policy:canonical_json())
  if not doc then error("canonical JSON of " .. policy.digest .. " does not decode: " .. err) end
  return doc
end

local function compare_retry_budget(a, b, out)
  local none_a, none_b = a == nil or a == json.null, b == nil or b == json.null
  local function desc(rb)
    return string.format("{maxTokens %s, tokenRatio %s}", show(rb.maxTokens), show(rb.tokenRatio))
  end
  if none_a and none_b then return end
  if none_b then
    out[#out + 1] = change("widening", M.POLICY, "retryBudget", desc(a), nil,
      "retryBudget " .. desc(a) .. " → none (retries never throttled)")
  elseif none_a then
    out[#out + 1] = change("narrowing", M.POLICY, "retryBudget", nil, desc(b),
      "retryBudget none → " .. desc(b))
  else
    for _, k in ipairs({ "maxTokens", "tokenRatio" }) do
      if a[k] ~= b[k] then
        out[#out + 1] = change(b[k] > a[k] and "widening" or "narrowing", M.POLICY, "retryBudget." .. k, a[k], b[k])
      end
    end
  end
end

local function gate_desc(g)
  local parts = {}
  for _, f in ipairs(gate_fields) do
    if g[f[2]] ~= nil then parts[#parts + 1] = f[1]:sub(6) .. " " .. show(g[f[2]]) end
  end
  if g.min_successes ~= nil then parts[#parts + 1] = "minSuccesses " .. show(g.min_successes) end
  if #(g.forbid_reasons or {}) > 0 then parts[#parts + 1] = "forbidReasons " .. table.concat(g.forbid_reasons, ", ") end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function compare_gate(a, b, out)
  if a == nil and b == nil then return end
  if b == nil then
    out[#out + 1] = change("widening", M.POLICY, "gate", gate_desc(a), nil,
      "gate " .. gate_desc(a) .. " → none (ledger stats no longer judged)")
    return
  elseif a == nil then
    out[#out + 1] = change("narrowing", M.POLICY, "gate", nil, gate_desc(b), "gate none → " .. gate_desc(b))
    return
  end
  for _, f in ipairs(gate_fields) do
    local va, vb = a[f[2]], b[f[2]]
    if va ~= vb then
      local wider = vb == nil or (va ~= nil and (f[3] and vb > va or not f[3] and vb < va))
      out[#out + 1] = change(wider and "widening" or "narrowing", M.POLICY, f[1], va, vb)
    end
  end
  local ma, mb = a.min_successes or 0, b.min_successes or 0
  if ma ~= mb then
    out[#out + 1] = change(mb > ma and "widening" or "narrowing", M.POLICY, "gate.minSuccesses", ma, mb)
  end
  local sa, sb = as_set(a.forbid_reasons or {}), as_set(b.forbid_reasons or {})
  for _, v in ipairs(sorted_keys(sa)) do
    if not sb[v] then
      out[#out + 1] = change("widening", M.POLICY, "gate.forbidReasons", v, nil, "gate.forbidReasons -" .. v)
    end
  end
  for _, v in ipairs(sorted_keys(sb)) do
    if not sa[v] then
      out[#out + 1] = change("narrowing", M.POLICY, "gate.forbidReasons", nil, v, "gate.forbidReasons +" .. v)
    end
  end
end

-- Every "$comment" in a lock text, keyed "route label\0field" (routes by endpoint, the rest by JSON path).
local function comments(text)
  if text == nil then return nil end
  local doc = json.decode((text:gsub("^\239\187\191", "")))
  if type(doc) ~= "table" then return nil end
  local found = {}
  local function walk(node, route, path)
    if type(node) ~= "table" or node == json.null then return end
    if getmetatable(node) == json.array_mt then
      for _, v in ipairs(node) do
        walk(v, type(v) == "table" and type(v.endpoint) == "string" and v.endpoint or route,
          type(v) == "table" and type(v.endpoint) == "string" and "" or path)
      end
      return
    end
    for k, v in pairs(node) do
      if k == "$comment" and type(v) == "string" then
        found[route .. "\0" .. path .. "$comment"] = v
      else
        walk(v, route, path .. k .. ".")
      end
    end
  end
  local top = type(doc.endpoint) == "string" and doc.endpoint or M.POLICY
  walk(doc, top, "")
  return found
end

local function clip(s)
  if s == nil then return "none" end
  local n = utf8.len(s)
  if n and n > 60 then
    s = s:sub(1, utf8.offset(s, 58) - 1) .. "..."
  elseif not n and #s > 60 then
    s = s:sub(1, 57) .. "..."
  end
  return '"' .. s .. '"'
end

local function compare_comments(old_text, new_text, out)
  local ca, cb = comments(old_text), comments(new_text)
  if ca == nil or cb == nil then return end
  local keys = {}
  for k in pairs(ca) do keys[k] = true end
  for k in pairs(cb) do keys[k] = true end
  for _, k in ipairs(sorted_keys(keys)) do
    if ca[k] ~= cb[k] then
      local route, field = k:match("^(.-)%z(.*)$")
      out[#out + 1] = change("neutral", route, field, ca[k], cb[k],
        string.format("%s %s → %s", field, clip(ca[k]), clip(cb[k])))
    end
  end
end

local function check_policy(p, n)
  if type(p) ~= "userdata" or type(p.digest) ~= "string" then
    error(string.format("bad argument #%d to 'compare' (policy expected, got %s)", n, type(p)), 3)
  end
end

--- Compares two policies and classifies every change.
-- @param old policy: the signed-off or committed policy (from rf.load / rf.load_string)
-- @param new policy: the proposed policy
-- @param opts table|nil: {old_text = string, new_text = string} — the raw lock texts; with them, `$comment`
--   edits and formatting-only edits are reported as neutral changes (a policy alone has no comments)
-- @return array of changes {kind = "widening"|"narrowing"|"neutral", route = "METHOD /pattern" or "(policy)",
--   field = lock spelling ("maxAttempts", "backoff.jitter", "retryable", "route", "retryBudget.maxTokens",
--   "$comment", …), old = value or nil, new = value or nil, text = "maxAttempts 2 → 5" [, details = the
--   field changes behind a route added or removed]}; values are integers, numbers, booleans or strings, set
--   members (retryable …) appear one per change with nil on the side that lacks them. Raises on a non-policy.
function M.compare(old, new, opts)
  check_policy(old, 1)
  check_policy(new, 2)
  opts = opts or {}
  local out = {}
  local doc_a, doc_b = decode_canonical(old), decode_canonical(new)

  compare_retry_budget(doc_a.retryBudget, doc_b.retryBudget, out)
  compare_gate(old.gate, new.gate, out)
  for _, k in ipairs(sorted_keys(doc_a)) do
    if doc_b[k] == nil then doc_b[k] = json.null end
  end
  for _, k in ipairs(sorted_keys(doc_b)) do
    if k ~= "routes" and k ~= "retryBudget" and k ~= "gate" and json.encode(doc_a[k]) ~= json.encode(doc_b[k]) then
      out[#out + 1] = change("widening", M.POLICY, k, json.encode(doc_a[k] or json.null), json.encode(doc_b[k]),
        k .. " changed (not classified, so treated as widening)")
    end
  end

  local ra, rb = old:routes(), new:routes()
  local by_a, by_b = by_endpoint(ra), by_endpoint(rb)
  local canon_a, canon_b = {}, {}
  for _, r in ipairs(doc_a.routes) do canon_a[r.endpoint] = r end
  for _, r in ipairs(doc_b.routes) do canon_b[r.endpoint] = r end
  local shapes_a, shapes_b, labels = {}, {}, {}
  for _, r in ipairs(ra) do shapes_a[shape(r)] = r; labels[shape(r)] = r.endpoint end
  for _, r in ipairs(rb) do shapes_b[shape(r)] = r; labels[shape(r)] = r.endpoint end
  local order = sorted_keys(labels)
  table.sort(order, function(x, y) return labels[x] < labels[y] end)
  for _, s in ipairs(order) do
    local a, b = shapes_a[s], shapes_b[s]
    if a and b then
      if a.endpoint ~= b.endpoint then
        out[#out + 1] = change("neutral", b.endpoint, "endpoint", a.endpoint, b.endpoint,
          "endpoint " .. a.endpoint .. " → " .. b.endpoint .. " (path parameter renamed)")
      end
      local sub = compare_routes(a, b, b.endpoint)
      table.move(sub, 1, #sub, #out + 1, out)
      local ja, jb = canon_a[a.endpoint], canon_b[b.endpoint]
      ja.endpoint, jb.endpoint = nil, nil
      if #sub == 0 and json.encode(ja) ~= json.encode(jb) then
        out[#out + 1] = change("widening", b.endpoint, "route", json.encode(ja), json.encode(jb),
          "rules changed (not classified, so treated as widening)")
      end
    elseif a then
      out[#out + 1] = removed_route(a, new, by_b)
    else
      out[#out + 1] = added_route(b, old, by_a)
    end
  end

  if old.digest ~= new.digest then
    local decided = false
    for _, c in ipairs(out) do
      decided = decided or c.kind ~= "neutral" or c.field == "endpoint" or c.field == "route"
    end
    if not decided then
      out[#out + 1] = change("widening", M.POLICY, "digest", old.digest, new.digest,
        "digest changed but no rule difference was found (treated as widening)")
    end
  end
  local before = #out
  compare_comments(opts.old_text, opts.new_text, out)
  if old.digest == new.digest and #out == before and opts.old_text and opts.new_text
      and opts.old_text ~= opts.new_text then
    out[#out + 1] = change("neutral", M.POLICY, "text", nil, nil,
      "formatting, key order or alias spelling only (digest unchanged)")
  end
  return out
end

--- Counts changes by kind.
-- @param changes array from compare()
-- @return {widening = n, narrowing = n, neutral = n}
function M.summary(changes)
  local s = { widening = 0, narrowing = 0, neutral = 0 }
  for _, c in ipairs(changes) do s[c.kind] = s[c.kind] + 1 end
  return s
end

--- Whether any change widens.
-- @param changes array from compare()
-- @return boolean
function M.widens(changes)
  for _, c in ipairs(changes) do
    if c.kind == "widening" then return true end
  end
  return false
end

--- One change as a line: "WIDENING  POST /v1/jobs  maxAttempts 2 → 5" (kind, two spaces, route, two spaces,
--- text; no trailing newline).
-- @param c table: a change from compare()
-- @return string
function M.format(c)
  return c.kind:upper() .. "  " .. c.route .. "  " .. c.text
end

--- Every change as a line (see format).
-- @param changes array from compare()
-- @return array of strings
function M.lines(changes)
  local t = {}
  for i, c in ipairs(changes) do t[i] = M.format(c) end
  return t
end

--- Loads a lock from a file path or from git.
-- @param source string: a file path, or "git:REV:PATH" — read with `git show REV:PATH` in the current
--   directory (PATH is relative to the repository root, or "./x" relative to the current directory)
-- @param opts table|nil: passed to rf.load / rf.load_string ({pin = "sha256:…"})
-- @return policy, text (the lock's raw text) — or nil, message (an unreadable file, an invalid lock, a
--   malformed git: source, or git's own error text when `git show` fails)
function M.load(source, opts)
  if type(source) ~= "string" then
    error("bad argument #1 to 'load' (string expected, got " .. type(source) .. ")", 2)
  end
  local text
  local object = source:match("^git:(.*)$")
  if object then
    if not object:find(":", 1, true) or object:sub(1, 1) == "-" or object:find("[%z\n]") then
      return nil, source .. ": expected git:REV:PATH (REV not starting with '-')"
    end
    local err_file = os.tmpname()
    local quoted = "'" .. object:gsub("'", "'\\''") .. "'"
    local p = io.popen("git show " .. quoted .. " 2>" .. err_file, "r")
    text = p:read(core.LOCK_MAX_BYTES + 1) or "" -- the lock's cap: a larger blob is refused, never read whole
    local ok, _, code = p:close()
    local ef = io.open(err_file, "r")
    local err_text = ef and ef:read("a") or ""
    if ef then ef:close() end
    os.remove(err_file)
    if #text > core.LOCK_MAX_BYTES then -- checked first: git was cut off by the closed pipe
      return nil, string.format("%s: lock %s is over the %d byte limit", source, source, core.LOCK_MAX_BYTES)
    end
    if not ok then
      err_text = err_text:gsub("%s+$", ""):gsub("\n", "; ")
      return nil, string.format("%s: git show failed (exit %s): %s", source, tostring(code),
        err_text ~= "" and err_text or "no output")
    end
    local policy, err = rf.load_string(text, source, opts)
    if not policy then return nil, err end
    return policy, text
  end
  local ferr
  text, ferr = core.read_file(source, core.LOCK_MAX_BYTES, "lock")
  if not text then return nil, ferr end
  -- One read: the policy and the text (for comments) come from the same bytes.
  local policy, err = rf.load_string(text, source, opts)
  if not policy then return nil, err end
  return policy, text
end

return M
