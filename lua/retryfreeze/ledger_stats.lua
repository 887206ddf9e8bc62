--- Ledger statistics (`retryfreeze stats`, `rf.ledger.stats`): streams ledgers record by record through the
--- C reader and keeps only counters and a fixed-size latency histogram per route, so memory does not grow
--- with the ledger's size (only with the number of distinct routes, outcomes, reasons and failure classes).
---
--- Latency percentiles come from a log-linear histogram of elapsed_ms: every value 0..127 ms has its own
--- bucket (exact); above that each power of two [2^e, 2^(e+1)) is split into 64 equal buckets, up to 2^53.
--- A percentile is the nearest-rank value's bucket midpoint, clamped to the observed min and max, so it is
--- exact below 128 ms and within 1/128 (0.78 %) of the true nearest-rank value above. At most 3 072
--- buckets per route (values up to 2^53 − 1), whatever the ledger's length.
-- The binding directly, not "retryfreeze": init.lua requires this module for rf.ledger.stats.
local math = require("retryfreeze.compat").math
local core = require "retryfreeze.core"
local glob = require "retryfreeze.glob"
local util = require "retryfreeze.util"

local M = {}

local EXACT = 128 -- values below this have a bucket each
local SUB = 64 -- buckets per power of two above EXACT (EXACT = 2 × SUB)

-- 2^n as an integer (no bit operators: the module also runs on Lua 5.1 and LuaJIT, where numbers are doubles,
-- exact up to 2^53).
local function pow2(n) return math.floor(2 ^ n) end

--- The histogram bucket (0-based) of a duration in ms; negative values count as 0.
-- @param v integer ms
-- @return integer bucket index, 0..3071 for 0..2^53 − 1
function M.bucket(v)
  if v < EXACT then
    if v < 0 then return 0 end
    return v
  end
  local e, t = 7, math.floor(v / 256)
  while t > 0 do
    e = e + 1
    t = math.floor(t / 2)
  end
  return EXACT + (e - 7) * SUB + math.floor(v / pow2(e - 6)) - SUB
end

--- The inclusive range of durations a bucket holds.
-- @param idx integer bucket index (from M.bucket)
-- @return lo, hi integers (ms)
function M.bucket_range(idx)
  if idx < EXACT then return idx, idx end
  local octave, sub = math.floor((idx - EXACT) / SUB), (idx - EXACT) % SUB
  local shift = octave + 1
  local lo = (SUB + sub) * pow2(shift)
  return lo, lo + pow2(shift) - 1
end

--- The upper bounds (ms) of the exact elapsed_ms counts behind `elapsed_buckets` (and the OpenMetrics
--- histogram): the C tally's list, so the two cannot differ.
M.le_ms = core.ledger_le_ms

local function new_scope()
  return { requests = 0, successes = 0, retried_successes = 0, attempts = 0, success_attempts = 0,
           retries = 0, elapsed_sum = 0, elapsed_min = math.maxinteger, elapsed_max = math.mininteger,
           outcomes = {}, retried_classes = {}, hist = {}, by_attempts = {}, elapsed_le = {}, retry_after = {} }
end

-- Adds scope b's raw counters into a.
local function merge(a, b)
  for _, k in ipairs({ "requests", "successes", "retried_successes", "attempts", "success_attempts", "retries",
                       "elapsed_sum" }) do
    a[k] = a[k] + b[k]
  end
  if b.elapsed_min < a.elapsed_min then a.elapsed_min = b.elapsed_min end
  if b.elapsed_max > a.elapsed_max then a.elapsed_max = b.elapsed_max end
  for outcome, reasons in pairs(b.outcomes) do
    local into = a.outcomes[outcome] or {}
    a.outcomes[outcome] = into
    for reason, n in pairs(reasons) do into[reason] = (into[reason] or 0) + n end
  end
  for class, n in pairs(b.retried_classes) do a.retried_classes[class] = (a.retried_classes[class] or 0) + n end
  for i, n in pairs(b.hist) do a.hist[i] = (a.hist[i] or 0) + n end
  for _, k in ipairs({ "by_attempts", "elapsed_le", "retry_after" }) do
    local into = a[k]
    for i, n in pairs(b[k]) do into[i] = (into[i] or 0) + n end
  end
end

--- Ratio that never divides by zero: a / b, or 0 when b is 0.
-- @param a number; b number
-- @return number
function M.ratio(a, b) return b > 0 and a / b or 0 end

-- Nearest-rank percentiles from a histogram (keys are bucket index + 1).
local function percentiles(s, qs)
  local idx = {}
  for i in pairs(s.hist) do idx[#idx + 1] = i end
  table.sort(idx)
  local out, k, cum = {}, 1, 0
  for _, q in ipairs(qs) do
    local rank = math.max(1, math.ceil(q * s.requests - 1e-9))
    while cum + s.hist[idx[k]] < rank do
      cum = cum + s.hist[idx[k]]
      k = k + 1
    end
    local lo, hi = M.bucket_range(idx[k] - 1)
    local v = math.floor((lo + hi) / 2)
    if v < s.elapsed_min then v = s.elapsed_min end
    if v > s.elapsed_max then v = s.elapsed_max end
    out[#out + 1] = v
  end
  return out
end

-- The public shape of one scope (all requests, or one route).
local function finish(s)
  local by_outcome, by_reason, reasons = {}, {}, {}
  for outcome, rs in pairs(s.outcomes) do
    local n = 0
    for reason, c in pairs(rs) do
      n = n + c
      by_reason[outcome .. " " .. reason] = c
      reasons[reason] = (reasons[reason] or 0) + c
    end
    by_outcome[outcome] = n
  end
  local terminal = by_outcome.terminal or 0
  local r = {
    requests = s.requests, successes = s.successes, failures = s.requests - s.successes,
    retried_successes = s.retried_successes, attempts = s.attempts, success_attempts = s.success_attempts,
    retries = s.retries, terminal = terminal,
    success_rate = M.ratio(s.successes, s.requests),
    terminal_rate = M.ratio(terminal, s.requests),
    retried_success_ratio = M.ratio(s.retried_successes, s.successes),
    attempts_per_success = M.ratio(s.success_attempts, s.successes),
    attempts_per_request = M.ratio(s.attempts, s.requests),
    retry_ratio = M.ratio(s.retries, s.requests),
    by_outcome = by_outcome, by_reason = by_reason, reasons = reasons, retried_classes = s.retried_classes,
    elapsed_ms = {}, elapsed_ms_sum = s.elapsed_sum, by_attempts = {}, elapsed_buckets = {}, retry_after = {},
  }
  for i, n in pairs(s.by_attempts) do
    if n > 0 then r.by_attempts[tostring(i - 1)] = n end
  end
  local cum = 0
  for i, le in ipairs(M.le_ms) do
    cum = cum + (s.elapsed_le[i] or 0)
    r.elapsed_buckets[i] = { le_ms = le, count = cum }
  end
  for use, n in pairs(s.retry_after) do r.retry_after[use] = n end
  if s.requests > 0 then
    local p = percentiles(s, { 0.50, 0.95, 0.99 })
    r.elapsed_ms = { p50 = p[1], p95 = p[2], p99 = p[3], min = s.elapsed_min, max = s.elapsed_max,
                     mean = s.elapsed_sum / s.requests }
  end
  return r
end

-- Tallies one ledger into the per-route scopes (counted in C by core.ledger_tally, so a long ledger makes no
-- Lua table per record); raises "path:line: corrupt ledger line: …" (unless skip_corrupt) or "cannot open
-- ledger …".
local function add_file(scopes, path, skip_corrupt, result, after_line, by)
  local tallied, info = core.ledger_tally(path, skip_corrupt, nil, after_line or 0, by)
  for route, t in pairs(tallied) do
    local s = scopes[route]
    if s then merge(s, t) else scopes[route] = t end
  end
  result.lines = result.lines + info.lines
  if info.ts_min and (result.ts_min_ms == nil or info.ts_min < result.ts_min_ms) then result.ts_min_ms = info.ts_min end
  if info.ts_max and (result.ts_max_ms == nil or info.ts_max > result.ts_max_ms) then result.ts_max_ms = info.ts_max end
  if info.torn then
    result.torn[path] = info.torn
    result.torn_lines = result.torn_lines + info.torn_lines
  end
  if info.corrupt > 0 then
    result.corrupt[path] = info.corrupt
    result.corrupt_lines = result.corrupt_lines + info.corrupt
  end
end

-- The stats table of the tallied scopes ({[route or host] = raw scope}) and the file facts in result.
local function build(scopes, result, by)
  local total, by_key = new_scope(), {}
  for key, s in pairs(scopes) do
    merge(total, s)
    by_key[key] = finish(s)
  end
  local r = finish(total)
  for k, v in pairs(result) do r[k] = v end
  r["by_" .. by] = by_key
  return r
end

--- Statistics over one or more ledgers, streamed in constant memory.
-- @param paths string|array of strings: ledger files; a path that does not exist and holds a wildcard
--   (`*`, `?`, `[…]`) is expanded as a glob (retryfreeze.glob), so "ledger.jsonl*" takes rotated files too
-- @param opts table|nil: {skip_corrupt = true} counts corrupt lines instead of stopping at the first;
--   {after_line = {[path] = n}} reads but does not count lines 1..n of that file (what a run appended is
--   summarized apart from what the ledger held before)
--   {by = "host"} groups by the ledger's host field (by_host = {[host] = scope}, "" for lines without a
--   host) instead of by route (by_route, the default)
-- @return stats, or nil, message ("path:line: corrupt ledger line: …", "cannot open ledger …",
--   "no file matches '…'"). stats:
--   {files = {path…}, lines = n (lines read, torn and corrupt included), torn = {[path] = line},
--    torn_lines = n, corrupt = {[path] = n}, corrupt_lines = n, by_route = {[route] = scope}, …scope}
--   where a scope (the whole stats table, or one route; route "" is a request no route matched) is
--   {requests, successes, failures (requests − successes), terminal (outcome "terminal": stopped on a
--    non-retryable class), retried_successes (ok after more than one attempt), attempts, success_attempts
--    (attempts of the successful requests), retries (attempts after the first), success_rate, terminal_rate
--    (terminal / requests), retried_success_ratio (retried_successes / successes), attempts_per_success
--    (success_attempts / successes), attempts_per_request, retry_ratio (retries / requests),
--    elapsed_ms = {p50, p95, p99, min, max, mean} (ms; empty when no requests), elapsed_ms_sum (ms), by_outcome = {[outcome] = n},
--    by_reason = {["outcome reason"] = n}, reasons = {[reason] = n},
--    retried_classes = {[class] = n: attempts of that failure class that were retried},
--    by_attempts = {["n"] = requests that made n attempts (0..16)},
--    elapsed_buckets = {{le_ms = bound, count = requests with elapsed_ms <= bound}…} (exact, cumulative,
--      bounds M.le_ms), retry_after = {[use] = tries} (honored, ignored-invalid, not-honored, not-needed: what
--      became of each try's Retry-After, told from the ledger as bindings/lua_ledger_tally.c says)}.
--   The whole stats table also has ts_min_ms and ts_max_ms (the records' ts range; absent without records).
--   A ratio whose denominator is 0 is 0.
function M.stats(paths, opts)
  if type(paths) == "string" then paths = { paths } end
  if type(paths) ~= "table" then
    error("bad argument #1 to 'stats' (string or array of strings expected, got " .. type(paths) .. ")", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #2 to 'stats' (table expected, got " .. type(opts) .. ")", 2)
  end
  for i, p in ipairs(paths) do
    if type(p) ~= "string" then
      error("bad argument #1 to 'stats' (paths[" .. i .. "] is a " .. type(p) .. ", expected a string)", 2)
    end
  end
  local files, why = glob.resolve(paths)
  if not files then return nil, why end
  local skip = opts and opts.skip_corrupt or false
  local by = opts and opts.by or "route"
  if by ~= "route" and by ~= "host" then
    error("bad argument #2 to 'stats' (by must be \"route\" or \"host\", got " .. tostring(by) .. ")", 2)
  end
  local scopes = {}
  local result = { files = files, lines = 0, torn = {}, torn_lines = 0, corrupt = {}, corrupt_lines = 0 }
  for _, path in ipairs(files) do
    local ok, err = pcall(add_file, scopes, path, skip, result, opts and opts.after_line and opts.after_line[path],
      by)
    if not ok then
      -- The binding raises with luaL_error, which prefixes the calling Lua line; the message already names
      -- the ledger file and line, so drop this module's position.
      return nil, (tostring(err):gsub("^[^\n]-ledger_stats%.lua:%d+: ", ""))
    end
  end
  return build(scopes, result, by)
end

--- The statistics of the lines one ledger appended since ledger:_tally_appends(), counted as they were written
--- (`retryfreeze soak`: its run's numbers without reading the ledger back). The same numbers M.stats gives for
--- those lines of the file, since the writer's observer gets exactly what a reader gets back
--- (rf_ledger_observe); spec/07-soak_spec.lua checks the two agree.
-- @param ledger a rf.ledger on which ledger:_tally_appends() was called (open or closed)
-- @param path string|nil: the ledger's file, listed in files
-- @return stats as M.stats returns them (by_route), with lines = the lines counted and no torn or corrupt
--   lines; raises when counting never started or memory ran out while counting
function M.of_appends(ledger, path)
  local scopes, info = ledger:_appended()
  local result = { files = { path }, lines = info.lines, torn = {}, torn_lines = 0, corrupt = {}, corrupt_lines = 0,
                   ts_min_ms = info.ts_min, ts_max_ms = info.ts_max }
  return build(scopes, result, "route")
end

--- The same statistics per time bucket, for charts over time: one more streamed pass over the ledgers, each
--- record counted into the bucket of its ts (all routes together; seed-harness lines, which carry no ts, in
--- none). Memory: one scope per bucket.
-- @param paths string|array of strings: as for stats
-- @param tl table: {origin_ms = integer (the first bucket's start, Unix ms), bucket_ms = integer > 0,
--   buckets = 1..1024}; a record before the first bucket or after the last counts in that bucket
-- @param opts table|nil: as for stats (skip_corrupt, after_line)
-- @return array of {start_ms = integer, …scope (as in stats, without by_route)}, one per bucket in time order;
--   or nil, message as for stats
function M.timeline(paths, tl, opts)
  if type(paths) == "string" then paths = { paths } end
  local files, why = glob.resolve(paths)
  if not files then return nil, why end
  local buckets = {}
  for _, path in ipairs(files) do
    local ok, err = pcall(function()
      local _, _, scopes = core.ledger_tally(path, opts and opts.skip_corrupt or false, tl,
        opts and opts.after_line and opts.after_line[path] or 0)
      for i, t in ipairs(scopes) do
        if buckets[i] then merge(buckets[i], t) else buckets[i] = t end
      end
    end)
    if not ok then return nil, (tostring(err):gsub("^[^\n]-ledger_stats%.lua:%d+: ", "")) end
  end
  local out = {}
  for i = 1, tl.buckets do
    out[i] = finish(buckets[i] or new_scope())
    out[i].start_ms = tl.origin_ms + (i - 1) * tl.bucket_ms
  end
  return out
end

--- Prepares a ledger for a run that appends to it (soak, demo): how many lines it holds now, so that the run's
--- own lines can be summarized apart (stats's after_line). A missing file holds 0 lines. The lines are counted
--- by the ledger reader (a regular file only: a FIFO or a device is refused, never read), a torn last line
--- included: the writer ends it with a newline before its first line (rf.ledger.open), so the run's lines
--- start after it.
-- @param path string
-- @return integer lines, or nil, message ("cannot open ledger PATH: it is a FIFO, not a regular file", or the
--   I/O error)
function M.lines_before_append(path)
  local ok, _, info = pcall(core.ledger_tally, path, true)
  if ok then return info.lines end
  local err = tostring(_)
  if err:find(": No such file or directory$") then return 0 end
  return nil, err
end

--- Like stats, but raises instead of returning nil, message (used by `retryfreeze demo`).
-- @param paths string|array of strings; opts table|nil: as for stats
-- @return stats (see M.stats)
function M.summarize(paths, opts)
  local s, err = M.stats(paths, opts)
  if not s then error(err, 2) end
  return s
end

local pct = util.percent

local sorted_counts = util.keys_by_count

--- The route's label in text output: "(no route)" for the empty route of a request no route matched.
-- @param route string
-- @return string
function M.route_label(route) return route == "" and "(no route)" or route end

--- Renders stats as the text `retryfreeze stats` prints. Every string from the ledgers (routes, hosts,
--- outcomes, reasons, classes, file names) is shown through util.printable: a control character in a ledger
--- is written out, never sent to the terminal.
-- @param s table: from M.stats
-- @return string (several lines, ending in a newline)
function M.render(s)
  local out = {}
  local function line(fmt, ...) out[#out + 1] = util.format(fmt, ...) end
  line("ledgers: %d file%s, %d lines", #s.files, #s.files == 1 and "" or "s", s.lines)
  for _, path in ipairs(s.files) do
    if s.torn[path] then
      line("torn line: %s:%d (a write cut short; not counted as a request)", path, s.torn[path])
    end
    if s.corrupt[path] then line("corrupt lines skipped: %s: %d", path, s.corrupt[path]) end
  end
  line("")
  line("  %-22s %10d", "requests", s.requests)
  line("  %-22s %10d  (%s)", "successes", s.successes, pct(s.success_rate))
  line("  %-22s %10d  (%s of requests)", "terminal failures", s.terminal, pct(s.terminal_rate))
  line("  %-22s %10d  (%s of successes)", "retried successes", s.retried_successes, pct(s.retried_success_ratio))
  line("  %-22s %10.3f", "attempts per success", s.attempts_per_success)
  line("  %-22s %10.3f", "attempts per request", s.attempts_per_request)
  line("  %-22s %10d  (%.3f per request)", "retries", s.retries, s.retry_ratio)
  local e = s.elapsed_ms
  if e.p50 then
    line("  %-22s p50 %d  p95 %d  p99 %d  max %d", "elapsed_ms", e.p50, e.p95, e.p99, e.max)
  end
  line("")
  line("  %-10s %-30s %10s", "outcome", "reason", "count")
  for _, k in ipairs(sorted_counts(s.by_reason)) do
    local outcome, reason = k:match("^(%S+) (.*)$")
    line("  %-10s %-30s %10d", outcome, reason, s.by_reason[k])
  end
  if next(s.retried_classes) then
    line("")
    line("  %-41s %10s", "retried after", "attempts")
    for _, class in ipairs(sorted_counts(s.retried_classes)) do
      line("  %-41s %10d", class, s.retried_classes[class])
    end
  end
  line("")
  local by, label = s.by_route, M.route_label
  if s.by_host then by, label = s.by_host, function(h) return h == "" and "(no host)" or h end end
  line("  %-28s %9s %9s %9s %9s %9s %8s %8s %8s", s.by_host and "host" or "route", "requests", "success",
    "terminal", "retried-ok", "att/ok", "p50", "p95", "p99")
  for _, key in ipairs(util.sorted_keys(by)) do
    local r = by[key]
    line("  %-28s %9d %9s %9s %9s %9.3f %8d %8d %8d", label(key), r.requests, pct(r.success_rate),
      pct(r.terminal_rate), pct(r.retried_success_ratio), r.attempts_per_success, r.elapsed_ms.p50,
      r.elapsed_ms.p95, r.elapsed_ms.p99)
  end
  out[#out + 1] = ""
  return table.concat(out, "\n")
end

return M
