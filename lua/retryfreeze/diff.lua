--- Lock diff by effect: judges a change by what requests get, not by which field moved.
---
--- It partitions every request into classes that every route of both locks treats alike (each method either lock
--- names and any other; per path position each literal the routes still in play name there, any other non-empty
--- segment and the empty segment; every length up to the longest pattern plus one), finds the route that decides
--- each class before and after (policy:match, the engine's own matcher, on a witness no lock can name) and
--- compares the effects one by one: attempts, time, Retry-After, the key requirement of its method, the failure
--- classes retried (policy:class_retryable, the engine's class check) and the delay window of every retry number
--- (policy:delay_window, the engine's backoff and jitter). More of anything, a new retryable class, a dropped key
--- requirement, or an earlier or less spread delay window is widening; a window that moves both ways is widening
--- too (conservative). Every change names the requests that gain, e.g.
---   WIDENING  GET /v1/jobs/*  takes GET /v1/jobs, GET /v1/jobs/, GET /v1/jobs//…, GET /v1/jobs/{id}/… from
---   "GET /v1/*": maxAttempts 2 → 3
--- Lock-wide sections (retryBudget, gate, transparentRetry) are compared field by field. A change this module cannot classify
--- is reported as widening (fail closed). docs/governance.md has the full rules.
---
--- Extending: M.effects is the table of per-request effects. A new lock field is either covered by an entry
--- (its `covers` list) or, when it changes, reported as an unclassified widening.
local math, table, utf8 = require("retryfreeze.compat").math, require("retryfreeze.compat").table, require("retryfreeze.compat").utf8
local rf = require "retryfreeze"
local core = require "retryfreeze.core"
local git = require "retryfreeze.git"
local json = require "retryfreeze.json"
local util = require "retryfreeze.util"

local M = {}

--- The label used as `route` for changes that concern the whole lock (retryBudget, gate, comments).
M.POLICY = "(policy)"

--- How a request no route matches is named in change texts (the engine's reason: the request is refused).
M.NO_ROUTE = "no-route"

--- The most request classes one comparison enumerates; past it the diff fails closed (one widening change). A
--- generated lock of 2 000 routes has about 12 500 (docs/reliability.md).
M.MAX_SHAPES = 100000

local function show(v)
  if v == nil or v == json.null then return "none" end
  if math.type(v) == "float" then return string.format("%.14g", v) end
  return tostring(v)
end

local sorted_keys = util.sorted_keys

local function change(kind, route, field, old, new, text)
  return { kind = kind, route = route, field = field, old = old, new = new,
    text = text or string.format("%s %s → %s", field, show(old), show(new)) }
end

-- ---------------------------------------------------------------------------------------------------------
-- Per-request effects
-- ---------------------------------------------------------------------------------------------------------

--- Comparators for M.effects: function(a, b) → "widening", "narrowing" or nil (the same effect).
function M.more_is_wider(a, b)
  if a == b then return nil end
  return b > a and "widening" or "narrowing"
end

function M.less_is_wider(a, b)
  if a == b then return nil end
  return b < a and "widening" or "narrowing"
end

--- true → false widens (a protection dropped).
function M.dropping_is_wider(a, b)
  if a == b then return nil end
  return (a and not b) and "widening" or "narrowing"
end

-- The failure classes a route can see: every non-success status and every transport failure.
local class_probes
local function probes()
  if class_probes then return class_probes end
  class_probes = {}
  for s = 100, 199 do class_probes[#class_probes + 1] = { status = s } end
  for s = 400, 599 do class_probes[#class_probes + 1] = { status = s } end
  for _, t in ipairs(rf.transports) do
    if t ~= "ok" then class_probes[#class_probes + 1] = { transport = t } end
  end
  return class_probes
end

-- The set of failure classes the route retries: {[class token] = true}, asked of the engine class by class.
local function retryable_set(policy, endpoint)
  local set = {}
  for _, f in ipairs(probes()) do
    if policy:class_retryable(endpoint, f) then set[policy:classify(f)] = true end
  end
  return set
end

-- "HTTP_500..HTTP_502, HTTP_504, TIMEOUT": statuses as ranges, then the named classes.
local function class_list(set)
  local statuses, named = {}, {}
  for c in pairs(set) do
    local n = tonumber(c:match("^HTTP_(%d%d%d)$"))
    if n then statuses[#statuses + 1] = n else named[#named + 1] = c end
  end
  table.sort(statuses)
  table.sort(named)
  local parts, i = {}, 1
  while i <= #statuses do
    local j = i
    while j < #statuses and statuses[j + 1] == statuses[j] + 1 do j = j + 1 end
    parts[#parts + 1] = j > i and string.format("HTTP_%d..HTTP_%d", statuses[i], statuses[j])
      or string.format("HTTP_%d", statuses[i])
    i = j + 1
  end
  for _, c in ipairs(named) do parts[#parts + 1] = c end
  return table.concat(parts, ", ")
end

local function set_diff(a, b)
  local added, removed = {}, {}
  for c in pairs(b) do if not a[c] then added[c] = true end end
  for c in pairs(a) do if not b[c] then removed[c] = true end end
  return added, removed
end

-- Delay windows {{lo, hi}, …} for retries 1 .. maxAttempts − 1.
local function windows(policy, endpoint, r)
  local w = {}
  for n = 1, r.max_attempts - 1 do
    local lo, hi = policy:delay_window(endpoint, n)
    w[n] = { lo, hi }
  end
  return w
end

-- Per retry number present on both sides: widening when the window starts earlier or is less spread,
-- narrowing when it starts later or is more spread and neither of the former; both at once is widening.
local function compare_windows(a, b)
  local kind
  for n = 1, math.min(#a, #b) do
    local lo_a, hi_a, lo_b, hi_b = a[n][1], a[n][2], b[n][1], b[n][2]
    if lo_b < lo_a or hi_b - lo_b < hi_a - lo_a then return "widening" end
    if lo_b > lo_a or hi_b - lo_b > hi_a - lo_a then kind = "narrowing" end
  end
  return kind
end

local function windows_text(a, b, prefix)
  local parts = {}
  for n = 1, math.min(#a, #b) do
    if a[n][1] ~= b[n][1] or a[n][2] ~= b[n][2] then
      parts[#parts + 1] = string.format("retry %d [%d, %d] → [%d, %d] ms", n, a[n][1], a[n][2], b[n][1], b[n][2])
    end
  end
  return (prefix and prefix .. ": " or "") .. "delay window " .. table.concat(parts, ", ")
end

local backoff_fields = { { "baseMs", "base_ms" }, { "multiplier", "multiplier" }, { "maxMs", "max_ms" },
  { "jitter", "jitter" } }

-- "backoff.jitter full → none, backoff.baseMs 100 → 50" between two route views, or nil.
local function backoff_changes(ra, rb)
  local parts = {}
  for _, f in ipairs(backoff_fields) do
    local a, b = ra.backoff[f[2]], rb.backoff[f[2]]
    if a ~= b then parts[#parts + 1] = string.format("backoff.%s %s → %s", f[1], show(a), show(b)) end
  end
  return #parts > 0 and table.concat(parts, ", ") or nil
end

-- The lock schema (rf.lock_schema()): which change of each field widens, and where a policy's views hold it.
local SCHEMA = rf.lock_schema()

local function rf_row_index(path)
  for i, row in ipairs(SCHEMA) do
    if row.path == path then return i end
  end
  error("retryfreeze.diff: the lock schema has no field " .. path)
end

-- The value at a view key ("retry_after.max_ms") of a view table.
local function at_view(t, view)
  for part in view:gmatch("[^.]+") do
    if t == nil then return nil end
    t = t[part]
  end
  return t
end

--- Any other value widens (a header name: the next layer, or this one, no longer reads what the other says).
function M.changing_is_wider(a, b)
  if a == b then return nil end
  return "widening"
end

--- false → true widens (a permission turned on).
function M.gaining_is_wider(a, b)
  if a == b then return nil end
  return (b and not a) and "widening" or "narrowing"
end

-- The comparator of a scalar field by its row's widens: a larger or smaller value, true → false, false → true, or
-- any change of a single value (a list's any-change is judged as a whole: the composite below).
local scalar_compare = { grows = M.more_is_wider, shrinks = M.less_is_wider, ["true-to-false"] = M.dropping_is_wider,
  ["false-to-true"] = M.gaining_is_wider, ["any-change"] = M.changing_is_wider }
local LIST_TYPES = { classes = true, methods = true, ["wait-headers"] = true, reasons = true, ["class-limits"] = true }

local function set_of(...)
  local s = {}
  for _, v in ipairs({ ... }) do s[v] = true end
  return s
end

--- The field types (a row's type) the diff compares under each widening rule (a row's widens): a rule orders only
--- the values it can compare (grows: numbers; true-to-false: booleans, …). A row whose pair is not here is not
--- compared by its rule: its change is reported as an unclassified widening (fail closed), never compared as
--- another type (a boolean marked grows would compare true with false).
M.RULE_TYPES = {
  grows = set_of("integer", "decimal"),
  shrinks = set_of("integer", "decimal"),
  ["true-to-false"] = set_of("boolean"),
  ["false-to-true"] = set_of("boolean"),
  ["any-change"] = set_of("integer", "decimal", "boolean", "jitter", "name", "header", "wait-headers"),
  ["changed-or-removed"] = set_of("name", "header"),
  removed = set_of("object"),
  ["item-removed"] = set_of("reasons"),
  ["delay-window"] = set_of("integer", "decimal", "jitter"),
  retryable = set_of("classes"),
  ["own-method"] = set_of("methods"),
  ["class-attempts"] = set_of("class-limits"),
  requests = set_of("routes"),
  hedges = set_of("object", "integer", "classes"),
  fields = set_of("object"),
  never = set_of("integer", "endpoint"),
}

--- Whether the diff compares row (a rf.lock_schema() row) by its widening rule: its type is one the rule orders.
function M.compares(row)
  local types = M.RULE_TYPES[row.widens]
  return types ~= nil and types[row.type] == true
end

local function row_at(path)
  for _, row in ipairs(SCHEMA) do
    if row.path == path then return row end
  end
end

-- A route's object that a route may leave out (its row has no default: propagation), whose fields exist only with it.
local function optional_object(row)
  local parent = row.parent and row_at(row.parent)
  return parent ~= nil and parent.place == "route" and parent.if_absent == "none"
end

local function scalar(row)
  local field, compare = row.path, scalar_compare[row.widens]
  -- A field of an optional object is compared where the object is on both sides: the object's own effect judges
  -- it coming or going.
  if optional_object(row) then
    local own = compare
    compare = function(a, b)
      if a == nil or b == nil then return nil end
      return own(a, b)
    end
  end
  return { field = field, covers = { field },
    value = function(_, _, r) return at_view(r, row.view) end, compare = compare,
    text = function(a, b) return string.format("%s %s → %s", field, show(a), show(b)) end }
end

--- The per-request effects of the fields judged as a whole, by their rows' widens (rf.lock_schema()), in report
--- order after the scalar fields: each entry's field and covers come from the rows of its kind.
local composite = {}
-- A route's optional object (propagation) dropped: whatever it narrowed (a response's overloaded flag, a caller's
-- deadline and attempt) no longer narrows, and the next layer is told nothing. Its fields are judged by their own
-- rows while it stays.
composite[#composite + 1] = { widens = "removed",
    value = function(_, _, r, _, row) return at_view(r, row.view) ~= nil end,
    compare = M.dropping_is_wider,
    text = function(a, b, _, _, row)
      return string.format("%s %s → %s", row.path, a and "on" or "none", b and "on" or "none")
    end }
composite[#composite + 1] = { widens = "own-method",
    value = function(_, _, r, method)
      for _, m in ipairs(r.idempotency_required) do if m == method then return true end end
      return false
    end,
    compare = M.dropping_is_wider,
    text = function(a, b)
      return string.format("idempotency key required for retries: %s → %s", a and "yes" or "no", b and "yes" or "no")
    end }
composite[#composite + 1] = { widens = "retryable",
    value = function(policy, endpoint) return retryable_set(policy, endpoint) end,
    compare = function(a, b)
      local added, removed = set_diff(a, b)
      if next(added) then return "widening" end
      if next(removed) then return "narrowing" end
      return nil
    end,
    text = function(a, b)
      local added, removed = set_diff(a, b)
      local parts = {}
      if next(added) then parts[#parts + 1] = "+" .. class_list(added) end
      if next(removed) then parts[#parts + 1] = "-" .. class_list(removed) end
      return "retryable " .. table.concat(parts, " ")
    end }
-- The backoff's fields, by effect: every retry's delay window (the engine's backoff and jitter). Named after their
-- object ("backoff").
composite[#composite + 1] = { widens = "delay-window", by_object = true,
    value = function(policy, endpoint, r) return windows(policy, endpoint, r) end,
    compare = compare_windows,
    text = function(a, b, ra, rb) return windows_text(a, b, backoff_changes(ra, rb)) end }
-- Any change to the wait headers a route reads widens: a header added (anywhere in the list) can stand in
-- for a longer Retry-After or for the backoff with a shorter wait; a header removed or moved later can drop
-- a longer wait, a stop (grpc-retry-pushback-ms) or a retry-after-exceeds-budget stop.
composite[#composite + 1] = { widens = "any-change",
    value = function(_, _, r) return table.concat(r.retry_after.headers, ", ") end,
    compare = function(a, b) return a ~= b and "widening" or nil end,
    text = function(a, b) return string.format("retryAfter.headers [%s] → [%s]", a, b) end }
-- classLimits, by effect: for every class the route retries on both sides, the attempts it gets
-- (policy:class_attempts, the engine's own min(maxAttempts, limit)). Only classes a limit holds below
-- maxAttempts on either side are compared, so a maxAttempts change is judged once, by its own row.
composite[#composite + 1] = { widens = "class-attempts",
    value = function(policy, endpoint, r)
      local v = { max = r.max_attempts, caps = {}, retried = retryable_set(policy, endpoint) }
      for _, f in ipairs(probes()) do
        local n = policy:class_attempts(endpoint, f)
        if n < r.max_attempts then v.caps[policy:classify(f)] = n end
      end
      return v
    end,
    compare = function(a, b)
      local kind
      for _, caps in ipairs({ a.caps, b.caps }) do
        for c in pairs(caps) do
          if a.retried[c] and b.retried[c] then
            local na, nb = a.caps[c] or a.max, b.caps[c] or b.max
            if nb > na then return "widening" end
            if nb < na then kind = "narrowing" end
          end
        end
      end
      return kind
    end,
    text = function(a, b)
      local moves, order = {}, {}
      for _, caps in ipairs({ a.caps, b.caps }) do
        for c in pairs(caps) do
          local na, nb = a.caps[c] or a.max, b.caps[c] or b.max
          if a.retried[c] and b.retried[c] and na ~= nb then
            local key = na .. " → " .. nb
            if not moves[key] then
              moves[key] = {}
              order[#order + 1] = key
            end
            moves[key][c] = true
          end
        end
      end
      table.sort(order)
      local parts = {}
      for _, key in ipairs(order) do parts[#parts + 1] = class_list(moves[key]) .. " " .. key end
      return "attempts by class (classLimits): " .. table.concat(parts, ", ")
    end }

-- Hedging, by effect (gRPC A6 hedgingPolicy): more hedged attempts, or sooner, or hedging going on past more failure
-- classes, gives a request more attempts on the wire: hedging added, its maxAttempts raised, its hedgingDelayMs
-- lowered or a class made non-fatal widens; the reverse narrows; a change both ways is widening (fail closed).
local function hedging_of(r)
  local hg = r.hedging
  if hg == nil then return false end
  local set = {}
  for _, c in ipairs(hg.non_fatal_classes) do set[c] = true end
  return { max = hg.max_attempts, delay = hg.hedging_delay_ms, non_fatal = set }
end
local function hedging_text(h)
  if not h then return "none" end
  local classes = class_list(h.non_fatal)
  return string.format("{maxAttempts %d, hedgingDelayMs %d%s}", h.max, h.delay,
    classes ~= "" and ", nonFatalClasses " .. classes or "")
end
composite[#composite + 1] = { widens = "hedges", by_object = true,
    value = function(_, _, r) return hedging_of(r) end,
    compare = function(a, b)
      if not a and not b then return nil end
      if not a then return "widening" end
      if not b then return "narrowing" end
      local added, removed = set_diff(a.non_fatal, b.non_fatal)
      if b.max > a.max or b.delay < a.delay or next(added) then return "widening" end
      if b.max < a.max or b.delay > a.delay or next(removed) then return "narrowing" end
      return nil
    end,
    text = function(a, b) return "hedging " .. hedging_text(a) .. " → " .. hedging_text(b) end }

--- The per-request effects, in report order: one per scalar field of a route (its row's widens is grows, shrinks or
--- true-to-false), then the composite ones above. Each entry:
---   field    the name a change carries ("maxAttempts", "retryable", "backoff", …): the first row's path (for
---            the delay windows, their object's)
---   covers   the lock fields (route-relative JSON paths) whose changes it judges: the rows of its kind; "x.*"
---            covers every field under x (an object of classes such as classLimits flattens to
---            "classLimits.TIMEOUT", …)
---   value    function(policy, endpoint, route_view, method) → the effect on a request of that method; a
---            function of the route's own fields and the method (a route whose canonical fields did not change
---            is not compared again)
---   compare  function(old_value, new_value) → "widening", "narrowing" or nil (no difference)
---   text     function(old_value, new_value, old_route_view, new_route_view) → what changed, for people
--- A field of a route whose row's widens none of these judges is reported, when it changes, as an unclassified
--- widening (fail closed).
M.effects = {}
local scalar_rows = {}
for _, row in ipairs(SCHEMA) do
  if row.place == "route" and scalar_compare[row.widens] and not LIST_TYPES[row.type] and M.compares(row) then
    M.effects[#M.effects + 1] = scalar(row)
    scalar_rows[row] = true
  end
end
for _, e in ipairs(composite) do
  e.covers = {}
  for _, row in ipairs(SCHEMA) do
    if row.place == "route" and row.widens == e.widens and not scalar_rows[row] and M.compares(row) then
      e.field = e.field or (e.by_object and row.parent or row.path)
      e.row = e.row or row
      e.covers[#e.covers + 1] = row.type == "class-limits" and row.path .. ".*" or row.path
    end
  end
  if e.field then
    -- value and text get the (first) row the effect judges, for the effects that read one row.
    local value, text = e.value, e.text
    e.value = function(policy, endpoint, r, method) return value(policy, endpoint, r, method, e.row) end
    e.text = function(a, b, ra, rb) return text(a, b, ra, rb, e.row) end
    M.effects[#M.effects + 1] = e
  end
end

-- ---------------------------------------------------------------------------------------------------------
-- Request classes: a partition of every request (docs/governance.md "Request classes")
-- ---------------------------------------------------------------------------------------------------------

-- "Any other non-empty segment" at a position and "any other method": tables, compared by identity, so no string
-- a lock names can be taken for them. The engine routes them as core.OTHER_SEGMENT and core.OTHER_METHOD, which
-- no lock can name (a literal segment may not hold '<' or '>', a method is uppercase letters; policy.h).
local OTHER = setmetatable({}, { __tostring = function() return "(any other segment)" end })
local OTHER_METHOD = setmetatable({}, { __tostring = function() return "(any other method)" end })

local function witness(seg) return seg == OTHER and core.OTHER_SEGMENT or seg end
local function method_witness(method) return method == OTHER_METHOD and core.OTHER_METHOD or method end

-- The path the engine routes for a class: "/" and its segments' witnesses joined by "/".
local function class_path(segs)
  local t = {}
  for i, s in ipairs(segs) do t[i] = witness(s) end
  return "/" .. table.concat(t, "/")
end

local function segments(pattern)
  local s = {}
  for seg in pattern:gmatch("[^/]+") do s[#s + 1] = seg end
  return s
end

local function is_param(seg) return seg:match("^{.*}$") ~= nil end

-- Every request class of the two policies: an array of {method, segs}, each seg a literal, "" (the empty
-- segment) or OTHER; nil when there would be more than M.MAX_SHAPES.
-- Methods: each one a route of either lock has, and OTHER_METHOD. Paths: a tree walked from "/" (no segment).
-- At a node of k segments, the class of the paths of exactly those k segments, then, when some route of either
-- lock that can still match a longer path has a segment at k + 1 (policy:next_segments, which applies the
-- matcher's own segment rule), one child per literal those routes name there, one for OTHER and one for the
-- empty segment; when none has, one class for every longer path (only routes whose last "*" is already reached
-- can take them, whatever they hold). Query and fragment do not route; a path not starting with "/" matches no
-- route.
local function request_classes(old, new)
  local methods, seen = {}, {}
  for _, p in ipairs({ old, new }) do
    for _, r in ipairs(p:routes()) do util.add_once(methods, seen, r.method) end
  end
  table.sort(methods)
  methods[#methods + 1] = OTHER_METHOD
  local out = {}
  local function emit(method, segs, last)
    if #out == M.MAX_SHAPES then return false end
    local copy = table.move(segs, 1, #segs, 1, {})
    copy[#copy + 1] = last
    out[#out + 1] = { method = method, segs = copy }
    return true
  end
  local function visit(method, segs, prefix)
    -- One empty segment alone is the path "/", which has no segment: that class is the root's.
    if not (#segs == 1 and segs[1] == "") and not emit(method, segs) then return false end
    local named, set, continuing = {}, {}, false
    for _, p in ipairs({ old, new }) do
      local literals, params = p:next_segments(method_witness(method), prefix)
      continuing = continuing or params > 0 or #literals > 0
      for _, l in ipairs(literals) do util.add_once(named, set, l) end
    end
    if not continuing then return emit(method, segs, OTHER) end
    table.sort(named)
    named[#named + 1] = OTHER
    named[#named + 1] = ""
    for _, c in ipairs(named) do
      segs[#segs + 1] = c
      local ok = visit(method, segs, prefix .. witness(c) .. "/")
      segs[#segs] = nil
      if not ok then return false end
    end
    return true
  end
  for _, m in ipairs(methods) do
    if not visit(m, {}, "/") then return nil end
  end
  return out
end

-- {["v1/jobs"] = "{id}", …}: the {param} some pattern has right after a literal prefix (params as "{}").
local function param_names(routes)
  local names = {}
  for _, r in ipairs(routes) do
    local prefix = {}
    for _, seg in ipairs(segments(r.pattern)) do
      local key = table.concat(prefix, "/")
      if is_param(seg) then
        names[key] = names[key] or seg
        prefix[#prefix + 1] = "{}"
      else
        prefix[#prefix + 1] = seg
      end
    end
  end
  return names
end

-- A class for people: literals as they are, the empty segment as nothing (so "/a/" and "/a//…"), OTHER as the
-- {param} a pattern names at that place (the routes that take it first), else "…"; a run of "…" as one. No
-- literal holds '{', '}' or '…', so a shown class reads one way only.
local function display(method, segs, ro, rn, ctx)
  local own = {}
  for _, r in ipairs({ rn, ro }) do
    if r then
      for d, seg in ipairs(ctx.segments(r.pattern)) do
        if is_param(seg) and own[d] == nil then own[d] = seg end
      end
    end
  end
  local parts, prefix = {}, {}
  for d, seg in ipairs(segs) do
    local shown = seg
    if seg == OTHER then shown = own[d] or ctx.names[table.concat(prefix, "/")] or "…" end
    prefix[#prefix + 1] = seg == OTHER and "{}" or seg
    if not (shown == "…" and parts[#parts] == "…") then parts[#parts + 1] = shown end
  end
  return method .. " /" .. table.concat(parts, "/")
end

-- ---------------------------------------------------------------------------------------------------------
-- Comparing routes
-- ---------------------------------------------------------------------------------------------------------

local function by_endpoint(routes)
  local t = {}
  for _, r in ipairs(routes) do t[r.endpoint] = r end
  return t
end

local function pattern_shape(endpoint) return (endpoint:gsub("{[^}]*}", "{}")) end

local function decode_canonical(policy)
  local doc, err = json.decode(policy:canonical_json())
  if not doc then error("canonical JSON of " .. policy.digest .. " does not decode: " .. err) end
  return doc
end

-- A canonical route object flattened to {["backoff.baseMs"] = "100", ["retryable"] = "[…]", …} (JSON texts).
local function flatten(obj, prefix, out)
  out = out or {}
  for k, v in pairs(obj) do
    local key = prefix .. k
    if type(v) == "table" and getmetatable(v) ~= json.array_mt and v ~= json.null then
      flatten(v, key .. ".", out)
    elseif key ~= "endpoint" then
      out[key] = json.encode(v)
    end
  end
  return out
end

-- The effect that covers a flattened lock field: an exact `covers` entry, or one ending in ".*" that covers
-- every field under it ("classLimits.*" covers "classLimits.TIMEOUT").
local function covered()
  local exact, prefixes = {}, {}
  for _, e in ipairs(M.effects) do
    for _, f in ipairs(e.covers) do
      local prefix = f:match("^(.*)%.%*$")
      if prefix then prefixes[#prefixes + 1] = { prefix .. ".", e.field } else exact[f] = e.field end
    end
  end
  return setmetatable({}, { __index = function(_, k)
    if exact[k] then return exact[k] end
    for _, p in ipairs(prefixes) do
      if k:sub(1, #p[1]) == p[1] then return p[2] end
    end
    return nil
  end })
end

local function list_shapes(shapes)
  local max = 6
  local t = {}
  for i = 1, math.min(#shapes, max) do t[i] = shapes[i] end
  local s = table.concat(t, ", ")
  if #shapes > max then s = s .. string.format(" and %d more", #shapes - max) end
  return s
end

local function describe_route(r)
  local retries = r.max_attempts > 1 and #r.retryable > 0
  return retries and string.format("maxAttempts %d, retryable %s", r.max_attempts, table.concat(r.retryable, ", "))
    or string.format("maxAttempts %d, no retries", r.max_attempts)
end

-- The changes for one group of shapes that move from route `eo` (old) to `en` (new); nil means no route.
local function compare_group(g, ctx, out)
  local shapes = list_shapes(g.shapes)
  if g.eo == nil then
    local r = ctx.new_routes[g.en]
    local c = change("widening", g.en, "route", M.NO_ROUTE, g.en, string.format(
      "takes %s from %s (refused before): %s", shapes, M.NO_ROUTE, describe_route(r)))
    c.requests = g.shapes
    out[#out + 1] = c
    return
  end
  if g.en == nil then
    local c = change("narrowing", g.eo, "route", g.eo, M.NO_ROUTE, string.format(
      "%s now refused (%s); was \"%s\"", shapes, M.NO_ROUTE, g.eo))
    c.requests = g.shapes
    out[#out + 1] = c
    return
  end
  -- The same route with the same canonical fields gives every request the same effects (each effect's value is
  -- a function of the route and the method).
  if g.eo == g.en and ctx.text_old[g.eo] == ctx.text_new[g.en] then return end
  local ro, rn = ctx.old_routes[g.eo], ctx.new_routes[g.en]
  local same = g.eo == g.en or (pattern_shape(g.eo) == pattern_shape(g.en) and ctx.new_routes[g.eo] == nil
    and ctx.old_routes[g.en] == nil)
  local prefix = same and "" or string.format("takes %s from \"%s\": ", shapes, g.eo)
  local found = 0
  if same and g.eo ~= g.en then
    local c = change("neutral", g.en, "endpoint", g.eo, g.en, "endpoint " .. g.eo .. " → " .. g.en
      .. " (path parameter renamed)")
    out[#out + 1] = c
  end
  local judged = {}
  for i, e in ipairs(M.effects) do
    local a = ctx.value(i, e, "old", ctx.old, g.eo, ro, g.method)
    local b = ctx.value(i, e, "new", ctx.new, g.en, rn, g.method)
    local kind = e.compare(a, b)
    if kind then
      judged[e.field] = true
      found = found + 1
      local va, vb = a, b
      if type(va) == "table" then va = nil end
      if type(vb) == "table" then vb = nil end
      local c = change(kind, g.en, e.field, va, vb, prefix .. e.text(a, b, ro, rn))
      c.requests = g.shapes
      out[#out + 1] = c
    end
  end
  -- Lock fields that differ between the two routes but changed no effect: neutral when an effect covers
  -- them (said once per field), widening when none does (fail closed).
  local fa, fb = ctx.flat_old[g.eo], ctx.flat_new[g.en]
  local keys = {}
  for k in pairs(fa) do keys[k] = true end
  for k in pairs(fb) do keys[k] = true end
  for _, k in ipairs(sorted_keys(keys)) do
    if fa[k] ~= fb[k] then
      local effect = ctx.covered[k]
      -- A field inside an object whose own effect changed ("propagation" added) is said by that change.
      local said_by_parent = false
      for dot in k:gmatch("()%.") do said_by_parent = said_by_parent or judged[k:sub(1, dot - 1)] == true end
      if said_by_parent then -- luacheck: ignore 542
      elseif effect == nil then
        found = found + 1
        out[#out + 1] = change("widening", g.en, k, fa[k], fb[k], prefix .. string.format(
          "%s %s → %s (not classified, so treated as widening)", k, fa[k] or "none", fb[k] or "none"))
      elseif same and not judged[effect] and not ctx.noted[g.en .. "\0" .. k] then
        ctx.noted[g.en .. "\0" .. k] = true
        found = found + 1
        out[#out + 1] = change("neutral", g.en, k, fa[k], fb[k], string.format(
          "%s %s → %s (no request's %s changes)", k, fa[k] or "none", fb[k] or "none", effect))
      end
    end
  end
  if not same and found == 0 then
    local c = change("neutral", g.en, "route", g.eo, g.en, string.format("takes %s from \"%s\" (the same effects)",
      shapes, g.eo))
    c.requests = g.shapes
    out[#out + 1] = c
  end
end

-- Every route-level change: request classes grouped by (method, old route, new route).
local function compare_routes(old, new, out)
  local ra, rb = old:routes(), new:routes()
  local all = {}
  table.move(ra, 1, #ra, 1, all)
  table.move(rb, 1, #rb, #all + 1, all)
  local classes = request_classes(old, new)
  if classes == nil then
    out[#out + 1] = change("widening", M.POLICY, "routes", nil, nil, string.format(
      "more than %d request classes to compare (not classified, so treated as widening)", M.MAX_SHAPES))
    return
  end
  local pattern_segments, values = {}, {}
  local ctx = { old = old, new = new, old_routes = by_endpoint(ra), new_routes = by_endpoint(rb),
    flat_old = {}, flat_new = {}, text_old = {}, text_new = {}, covered = covered(), noted = {},
    names = param_names(all) }
  function ctx.segments(pattern)
    local s = pattern_segments[pattern]
    if not s then
      s = segments(pattern)
      pattern_segments[pattern] = s
    end
    return s
  end
  -- An effect's value for a route and method, computed once per comparison.
  function ctx.value(i, e, side, policy, endpoint, r, method)
    local key = side .. "\0" .. endpoint .. "\0" .. method .. "\0" .. i
    local v = values[key]
    if v == nil then
      v = { e.value(policy, endpoint, r, method) }
      values[key] = v
    end
    return v[1]
  end
  for _, r in ipairs(decode_canonical(old).routes) do
    ctx.flat_old[r.endpoint], ctx.text_old[r.endpoint] = flatten(r, ""), json.encode(r)
  end
  for _, r in ipairs(decode_canonical(new).routes) do
    ctx.flat_new[r.endpoint], ctx.text_new[r.endpoint] = flatten(r, ""), json.encode(r)
  end
  local groups, order = {}, {}
  for _, s in ipairs(classes) do
    local method, path = method_witness(s.method), class_path(s.segs)
    local eo, en = old:match(method, path), new:match(method, path)
    if eo or en then
      local key = method .. "\0" .. (eo or "") .. "\0" .. (en or "")
      local g = groups[key]
      if not g then
        g = { method = method, eo = eo, en = en, shapes = {}, seen = {}, same = eo ~= nil and eo == en }
        groups[key] = g
        order[#order + 1] = g
      end
      local shown = display(method, s.segs, eo and ctx.old_routes[eo], en and ctx.new_routes[en], ctx)
      if not g.seen[shown] then
        g.seen[shown] = true
        g.shapes[#g.shapes + 1] = shown
      end
    end
  end
  -- One group per route pair: a route's own requests first, then the ones it takes over, by label.
  table.sort(order, function(x, y)
    local lx, ly = x.en or x.eo, y.en or y.eo
    if lx ~= ly then return lx < ly end
    if x.same ~= y.same then return x.same end
    return (x.eo or "") < (y.eo or "")
  end)
  for _, g in ipairs(order) do
    table.sort(g.shapes)
    compare_group(g, ctx, out)
  end
end

-- ---------------------------------------------------------------------------------------------------------
-- Lock-wide sections
-- ---------------------------------------------------------------------------------------------------------

-- The rows of a lock-wide object ("gate", "retryBudget"), with their key in its view (policy.gate) and in the
-- canonical form (retryBudget): the fields judged one by one.
local function rows_under(object)
  local rows = {}
  for _, row in ipairs(SCHEMA) do
    if row.parent == object then
      rows[#rows + 1] = row
      row.view_key = row.view and row.view:match("[^.]+$")
    end
  end
  return rows
end

local function numeric(row) return row.type == "integer" or row.type == "decimal" end

-- One number of a lock-wide object compared by its row: a threshold absent on one side is the loosest (not
-- checked), unless its row says what its absence counts as (gate.minSuccesses: 0). Appends the change, if any.
local function compare_number(row, va, vb, out)
  if row.default ~= nil then va, vb = va or row.default, vb or row.default end
  if va == vb then return end
  if not (M.compares(row) and (row.widens == "grows" or row.widens == "shrinks")) then
    out[#out + 1] = change("widening", M.POLICY, row.path, va, vb, string.format(
      "%s %s → %s (not classified, so treated as widening)", row.path, show(va), show(vb)))
    return
  end
  local grows = row.widens == "grows"
  local wider = vb == nil or (va ~= nil and (grows and vb > va or not grows and vb < va))
  out[#out + 1] = change(wider and "widening" or "narrowing", M.POLICY, row.path, va, vb)
end

-- Gate thresholds (policy.gate): every number, then the forbidden reasons. A gate added or removed as a whole is
-- one change.
local GATE_ROWS = rows_under("gate")

local function as_set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

-- retryBudget (the canonical form's object, lock keys): its form (a token bucket or a ratio over a window), its
-- numbers, then whether the bucket is shared.
local BUDGET_ROWS = rows_under("retryBudget")

-- The ratio form is the one with retryRatio (the loader fills in its other fields); else a token bucket.
local function budget_form(rb) return rb.retryRatio ~= nil and "ratio" or "tokens" end

-- Whether a budget allows no retry and no hedge at all, whatever comes: a ratio with retryRatio 0 and no minimum; a
-- token bucket of at most 2 tokens, whose count after a failure (maxTokens - 1) is never above maxTokens / 2.
local function allows_none(rb)
  if budget_form(rb) == "ratio" then return rb.retryRatio == 0 and rb.minRetriesPerSecond == 0 end
  return rb.maxTokens <= 2
end

local function compare_retry_budget(a, b, out)
  local none_a, none_b = a == nil or a == json.null, b == nil or b == json.null
  local function desc(rb)
    local parts = {}
    for _, row in ipairs(BUDGET_ROWS) do
      if numeric(row) and rb[row.key] ~= nil then parts[#parts + 1] = row.key .. " " .. show(rb[row.key]) end
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  if none_a and none_b then return end
  if none_b then
    out[#out + 1] = change("widening", M.POLICY, "retryBudget", desc(a), nil,
      "retryBudget " .. desc(a) .. " → none (retries never throttled)")
  elseif none_a then
    out[#out + 1] = change("narrowing", M.POLICY, "retryBudget", nil, desc(b),
      "retryBudget none → " .. desc(b))
  elseif budget_form(a) ~= budget_form(b) then
    -- A token bucket allows a burst then stops while all fail; a ratio allows a share of the traffic for ever: neither
    -- bounds the other, so a switch widens unless the new budget allows no retry at all.
    local narrower = allows_none(b)
    out[#out + 1] = change(narrower and "narrowing" or "widening", M.POLICY, "retryBudget", desc(a), desc(b),
      "retryBudget " .. desc(a) .. " → " .. desc(b) .. (narrower and " (it allows no retry)"
        or " (another kind of budget: judged widening unless it allows no retry)"))
  else
    for _, row in ipairs(BUDGET_ROWS) do
      if numeric(row) and row.widens == "any-change" then -- the window: longer lets a burst spend more, shorter
        if a[row.key] ~= b[row.key] then -- forgets the retries it spent sooner; either can allow a retry refused now
          out[#out + 1] = change("widening", M.POLICY, row.path, a[row.key], b[row.key])
        end
      elseif numeric(row) then
        compare_number(row, a[row.key], b[row.key], out)
      end
    end
    -- A fleet-wide bucket throttles more than one per process: adding it narrows; removing it, or renaming it
    -- (a fresh, full bucket that no process has drawn on yet), widens.
    local name_a, name_b = a.shared and a.shared.name, b.shared and b.shared.name
    if name_a ~= name_b then
      local kind = name_b == nil and "widening" or name_a == nil and "narrowing" or "widening"
      out[#out + 1] = change(kind, M.POLICY, "retryBudget.shared.name", name_a, name_b,
        "retryBudget.shared " .. (name_a or "none (one bucket per process)") .. " → "
          .. (name_b or "none (one bucket per process)"))
    end
  end
end

-- transparentRetry (absent from the canonical form at its default, true): turning it on lets keyless requests
-- that never left be retried, so false → true is widening.
local TRANSPARENT = SCHEMA[rf_row_index("transparentRetry")]

local function compare_transparent(a, b, out)
  local on_a, on_b = a, b
  if on_a == nil then on_a = TRANSPARENT.default end
  if on_b == nil then on_b = TRANSPARENT.default end
  if on_a == on_b then return end
  out[#out + 1] = change(on_b and "widening" or "narrowing", M.POLICY, "transparentRetry", on_a, on_b,
    on_b and "transparentRetry false → true (keyless requests that never left are retried)"
      or "transparentRetry true → false (keyless requests that never left are no longer retried)")
end

local function gate_desc(g)
  local parts = {}
  for _, row in ipairs(GATE_ROWS) do
    local v = g[row.view_key]
    if numeric(row) and v ~= nil then
      parts[#parts + 1] = row.key .. " " .. show(v)
    elseif type(v) == "table" and #v > 0 then
      parts[#parts + 1] = row.key .. " " .. table.concat(v, ", ")
    end
  end
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
  for _, row in ipairs(GATE_ROWS) do
    if numeric(row) then compare_number(row, a[row.view_key], b[row.view_key], out) end
  end
  -- A list whose items each forbid something: an item dropped widens, one added narrows.
  for _, row in ipairs(GATE_ROWS) do
    if row.widens == "item-removed" then
      local sa, sb = as_set(a[row.view_key] or {}), as_set(b[row.view_key] or {})
      for _, v in ipairs(sorted_keys(sa)) do
        if not sb[v] then out[#out + 1] = change("widening", M.POLICY, row.path, v, nil, row.path .. " -" .. v) end
      end
      for _, v in ipairs(sorted_keys(sb)) do
        if not sa[v] then out[#out + 1] = change("narrowing", M.POLICY, row.path, nil, v, row.path .. " +" .. v) end
      end
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

-- The lock's top-level keys compared above (its own objects and fields, and routes, by request); any other key of
-- the canonical form that differs is an unclassified widening.
local JUDGED_TOP = {}
for _, row in ipairs(SCHEMA) do
  if row.parent == nil and (row.place == "lock" or row.type == "routes") then JUDGED_TOP[row.key] = true end
end

--- Compares two policies by effect and classifies every change.
-- @param old policy: the signed-off or committed policy (from rf.load / rf.load_string)
-- @param new policy: the proposed policy
-- @param opts table|nil: {old_text = string, new_text = string} — the raw lock texts; with them, `$comment`
--   edits and formatting-only edits are reported as neutral changes (a policy alone has no comments)
-- @return array of changes {kind = "widening"|"narrowing"|"neutral", route = the endpoint that decides the
--   requests now (or, for requests now refused, the one that did) or "(policy)", field = the effect or lock
--   field ("maxAttempts", "retryable", "backoff", "idempotencyRequired", "route", "retryBudget.maxTokens",
--   "$comment", …), old = value or nil, new = value or nil (scalars only), text = "maxAttempts 2 → 5" or
--   "takes GET /v1/jobs from \"GET /v1/*\": maxAttempts 2 → 3" [, requests = the request classes concerned]}.
--   Raises on a non-policy.
function M.compare(old, new, opts)
  check_policy(old, 1)
  check_policy(new, 2)
  opts = opts or {}
  local out = {}
  local doc_a, doc_b = decode_canonical(old), decode_canonical(new)

  compare_retry_budget(doc_a.retryBudget, doc_b.retryBudget, out)
  compare_gate(old.gate, new.gate, out)
  compare_transparent(doc_a.transparentRetry, doc_b.transparentRetry, out)
  for _, k in ipairs(sorted_keys(doc_a)) do
    if doc_b[k] == nil then doc_b[k] = json.null end
  end
  for _, k in ipairs(sorted_keys(doc_b)) do
    if not JUDGED_TOP[k] and json.encode(doc_a[k]) ~= json.encode(doc_b[k]) then
      out[#out + 1] = change("widening", M.POLICY, k, json.encode(doc_a[k] or json.null), json.encode(doc_b[k]),
        k .. " changed (not classified, so treated as widening)")
    end
  end
  compare_routes(old, new, out)

  if old.digest ~= new.digest then
    local decided = false
    for _, c in ipairs(out) do decided = decided or c.field ~= "$comment" end
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

--- The overall verdict of a list of changes: "widening" when any change widens, else "narrowing" when any
--- narrows, else "neutral".
-- @param changes array from compare()
-- @return string
function M.verdict(changes)
  local s = M.summary(changes)
  return s.widening > 0 and "widening" or s.narrowing > 0 and "narrowing" or "neutral"
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
--- text; no trailing newline). A control character from a lock (a comment, a name) is written out
--- (util.printable), so a change is always one line.
-- @param c table: a change from compare()
-- @return string
function M.format(c)
  return c.kind:upper() .. "  " .. util.printable(c.route) .. "  " .. util.printable(c.text)
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
    local why, kind
    text, why, kind = git.show(object, { max_bytes = core.LOCK_MAX_BYTES })
    if not text then
      if kind == "too-large" then return nil, string.format("%s: lock %s is %s", source, source, why) end
      return nil, source .. ": " .. why
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
