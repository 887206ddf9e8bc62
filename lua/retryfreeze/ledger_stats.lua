--- Ledger statistics (`retryfreeze stats`, `rf.ledger.stats`): streams ledgers record by record through the
--- C reader into the core's tally (retryfreeze/ledger_tally.h), which keeps only counters and a fixed-size
--- latency histogram per route, so memory does not grow with the ledger's size (only with the number of distinct
--- routes, outcomes, reasons and failure classes). Every count, ratio and percentile is the tally's: this module
--- resolves the files, hands them to it and names the results; `gate`, `report`, the OpenMetrics text and `soak`
--- all read these tables.
---
--- Latency percentiles come from the tally's log-linear histogram of elapsed_ms (every value 0..127 ms has its
--- own bucket; above, each power of two is split into 64 buckets, up to 2^53): exact below 128 ms, within 1/128
--- (0.78 %) of the true nearest-rank value above.
-- The binding directly, not "retryfreeze": init.lua requires this module for rf.ledger.stats.
local core = require "retryfreeze.core"
local glob = require "retryfreeze.glob"
local util = require "retryfreeze.util"

local M = {}

--- The histogram bucket (0-based) of a duration in ms; negative values count as 0 (the tally's own function).
-- @param v integer ms
-- @return integer bucket index, 0..3071 for 0..2^53 − 1
M.bucket = core.ledger_bucket

--- The inclusive range of durations a bucket holds (the tally's own function).
-- @param idx integer bucket index (from M.bucket), 0..3071
-- @return lo, hi integers (ms)
M.bucket_range = core.ledger_bucket_range

--- The upper bounds (ms) of the exact elapsed_ms counts behind `elapsed_buckets` (and the OpenMetrics
--- histogram): the tally's list (RF_TALLY_LE_MS).
M.le_ms = core.ledger_le_ms

--- Ratio that never divides by zero: a / b, or 0 when b is 0.
-- @param a number; b number
-- @return number
function M.ratio(a, b) return b > 0 and a / b or 0 end

-- A binding error as this module returns it: the binding raises with the calling Lua line's position, and the
-- message already names the ledger file and line, so that position goes.
local function message_of(err) return (tostring(err):gsub("^[^\n]-ledger_stats%.lua:%d+: ", "")) end

-- Reads each file into tally t; result gets the per-file facts (torn = {[path] = first torn line}, corrupt =
-- {[path] = n}). Returns true, or nil, message.
local function read_files(t, files, opts, result)
  local skip = opts and opts.skip_corrupt or false
  for _, path in ipairs(files) do
    local ok, file = pcall(t.read, t, path, skip, opts and opts.after_line and opts.after_line[path] or 0)
    if not ok then return nil, message_of(file) end
    if file.torn then result.torn[path] = file.torn end
    if file.corrupt > 0 then result.corrupt[path] = file.corrupt end
  end
  return true
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
--    (success_attempts / successes), attempts_per_request, retry_ratio (retries / requests), hedged, hedges,
--    hedge_wins, hedges_per_request, hedge_win_rate (docs/evidence.md: a hedged request's tries),
--    elapsed_ms = {p50, p95, p99, min, max, mean} (ms; empty when no requests), elapsed_ms_sum (ms), by_outcome = {[outcome] = n},
--    by_reason = {["outcome reason"] = n}, reasons = {[reason] = n},
--    retried_classes = {[class] = n: attempts of that failure class that were retried},
--    by_attempts = {["n"] = requests that made n attempts (0..32)},
--    elapsed_buckets = {{le_ms = bound, count = requests with elapsed_ms <= bound}…} (exact, cumulative,
--      bounds M.le_ms), retry_after = {[use] = tries} (honored, ignored-invalid, not-honored, not-needed: what
--      became of each try's Retry-After, told from the ledger as docs/evidence.md says)}.
--   The whole stats table also has ts_min_ms and ts_max_ms (the records' ts range; absent without records).
--   A ratio whose denominator is 0 is 0.
function M.stats(paths, opts)
  local files, why = glob.reader_arguments(paths, opts, 2, "stats")
  if not files then return nil, why end
  local by = opts and opts.by or "route"
  if by ~= "route" and by ~= "host" then
    error("bad argument #2 to 'stats' (by must be \"route\" or \"host\", got " .. tostring(by) .. ")", 2)
  end
  local t = core.ledger_tally{ by = by }
  local result = { torn = {}, corrupt = {} }
  local ok, err = read_files(t, files, opts, result)
  if not ok then return nil, err end
  local s = t:stats()
  s.files, s.torn, s.corrupt = files, result.torn, result.corrupt
  return s
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
  local s = ledger:_appended()
  s.files, s.torn, s.corrupt = { path }, {}, {}
  return s
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
  local t = core.ledger_tally{ timeline = tl }
  local ok, err = read_files(t, files, opts, { torn = {}, corrupt = {} })
  if not ok then return nil, err end
  return t:timeline()
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
  local t = core.ledger_tally()
  local ok, file = pcall(t.read, t, path, true)
  if ok then return file.lines end
  local err = tostring(file)
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

--- The host's label in text output: "(no host)" for the lines that name no host.
-- @param host string
-- @return string
function M.host_label(host) return host == "" and "(no host)" or host end

--- The label of a scope of a grouping: M.host_label for "by_host", else M.route_label.
-- @param group string "by_route" or "by_host"; name string
-- @return string
function M.scope_label(group, name)
  if group == "by_host" then return M.host_label(name) end
  return M.route_label(name)
end

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
  if s.hedges > 0 then -- only ledgers of hedged routes (the lock's hedging) have hedges
    line("  %-22s %10d  (%.3f per request, in %d requests)", "hedges", s.hedges, s.hedges_per_request, s.hedged)
    line("  %-22s %10d  (%s of requests)", "won by a hedge", s.hedge_wins, pct(s.hedge_win_rate))
  end
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
  if s.by_host then by, label = s.by_host, M.host_label end
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
