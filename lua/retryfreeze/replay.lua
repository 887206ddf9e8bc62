--- Replay (`retryfreeze replay`, `rf.replay`, `gate --replay`): the requests ledgers recorded, decided again try by
--- try under a candidate lock by the core (retryfreeze/replay.h: rf_budget and rf_decide_on_route over the recorded
--- facts, one retry budget fed in record order), counted as recorded and as predicted by the core's ledger tally,
--- so both sides carry the figures `retryfreeze stats` prints, by the same names (docs/evidence.md "Replay").
--- This module resolves the files, adds what the tally does not count (the extra load on the upstream, the notes
--- that say what could not be predicted exactly) and renders the text.
local math = require("retryfreeze.compat").math
local core = require "retryfreeze.core"
local glob = require "retryfreeze.glob"
local json = require "retryfreeze.json"
local ledger_stats = require "retryfreeze.ledger_stats"
local util = require "retryfreeze.util"

local M = {}

--- What a modelled prediction assumes of the tries the record never made (docs/evidence.md "Modelled where it does
--- not"), as the notes and the report say it.
M.ASSUMPTION = "a request's next try as the record's requests that failed as often fared at that attempt, "
  .. "the upstream's behaviour unchanged by the extra load"

--- The figures compared side by side, by their `stats --json` names, in the order the text prints them.
M.figures = { "requests", "successes", "success_rate", "retried_successes", "retried_success_ratio", "attempts",
  "attempts_per_success", "attempts_per_request", "terminal_rate", "hedges", "hedge_wins", "hedges_per_request" }

-- The ratios whose interval is the hedges' best and worst case (rf_replay_interval: hedges_modelled).
local hedge_ratios = { hedges_per_request = true, hedge_win_rate = true }

--- The ratios that carry an interval (the tally's ratios, RF_TALLY_RATIOS).
M.ratios = { "success_rate", "terminal_rate", "retried_success_ratio", "attempts_per_success",
  "attempts_per_request", "retry_ratio" }

--- The denominator of each figure of the predicted table that is a quotient (RF_TALLY_RATIOS, then the load per
--- second): over a denominator of 0 the figure is 0 by convention, which says nothing of the candidate.
M.denominators = { success_rate = "requests", terminal_rate = "requests", retried_success_ratio = "successes",
  attempts_per_success = "successes", attempts_per_request = "requests", retry_ratio = "requests",
  hedges_per_request = "requests", hedge_win_rate = "requests", upstream_attempts_per_second = "duration_ms",
  extra_attempts_per_second = "duration_ms" }

-- A binding error as this module returns it (the message names the file and line).
local function message_of(err) return (tostring(err):gsub("^[^\n]-replay%.lua:%d+: ", "")) end

local function plural(n, one, many) return n .. " " .. (n == 1 and one or (many or one .. "s")) end

-- The notes: what the prediction assumed, and what it could not say.
local function notes_of(r)
  local i, notes = r.info, {}
  local function note(s) notes[#notes + 1] = s end
  if #r.locks > 1 then
    local parts = {}
    for _, l in ipairs(r.locks) do
      parts[#parts + 1] = (l.digest == "" and "(no lock: seed harness)" or l.digest) .. " (" .. l.requests .. ")"
    end
    note("the ledgers mix " .. #r.locks .. " locks: " .. table.concat(parts, ", ")
      .. "; every line is replayed under the candidate, the recorded figures are of all of them")
  end
  if i.harness > 0 then
    note(plural(i.harness, "seed-harness line") .. " (no method, path or tries): counted as recorded only; no "
      .. "figure of theirs can be predicted (requests, successes, attempts, reasons and the ratios leave them out)")
  end
  if i.no_route > 0 then
    note(plural(i.no_route, "request") .. " the candidate routes nowhere: predicted as refused (no-route), "
      .. "no attempt")
  end
  if i.modelled > 0 and (i.modelled_tries > 0 or i.assumed_timeouts > 0) then -- hedges alone: their own note
    note(plural(i.modelled, "request") .. " modelled (" .. plural(i.modelled_tries, "try", "tries")
      .. " the record never made, drawn from the tries it recorded on the same route at the same attempt after the "
      .. "same failure class; assumed: " .. M.ASSUMPTION .. "); interval: "
      .. "± 1.96 standard deviations over " .. i.replicates .. " redraws"
      .. (i.beyond_requests > 0 and ", and every case beyond the record (below)" or ""))
  end
  -- Attempts beyond the record, one note per route and class: its attempts and what stood in for them.
  local beyond, order = {}, {}
  for _, b in ipairs(r.beyond) do
    local k = b.route .. "\0" .. b.class
    if not beyond[k] then
      beyond[k] = { route = b.route, class = b.class, first = b.attempt, last = b.attempt, drawn_as = b.drawn_as,
        fallback = b.fallback, tries = 0, samples = b.samples }
      order[#order + 1] = k
    end
    local e = beyond[k]
    e.first, e.last = math.min(e.first, b.attempt), math.max(e.last, b.attempt)
    if b.attempt == e.first then e.drawn_as, e.fallback, e.samples = b.drawn_as, b.fallback, b.samples end
    e.tries = e.tries + b.tries
  end
  for _, k in ipairs(order) do
    local e = beyond[k]
    local attempts = e.first == e.last and ("attempt " .. e.first) or ("attempts " .. e.first .. "-" .. e.last)
    note(string.format("beyond the record: %s after %s, %s: the record has %d tries at attempt %d after it (fewer "
      .. "than %d), so it cannot say whether a request that failed as often fails again there; %s drawn as %s, "
      .. "and the interval spans them failing (for any number of them, then succeeding) and all failing",
      e.route, e.class, attempts, e.samples, e.first, i.min_samples, plural(e.tries, "try", "tries"),
      e.drawn_as == 1 and "the route's first tries" or ("its tries at attempt " .. e.drawn_as
        .. (e.fallback and (" after " .. e.fallback) or ""))))
  end
  for _, g in ipairs(r.gaps) do
    note(string.format("too few samples: %s after %s has %d recorded tries (fewer than %d); %s", g.route, g.class,
      g.samples, i.min_samples, g.fallback and ("drawn from its tries after " .. g.fallback)
        or "not predicted: those requests end as recorded"))
  end
  if i.unmodelled > 0 then
    note(plural(i.unmodelled, "request") .. " could not be modelled (no recorded try to draw from): counted as "
      .. "they ended in the record")
  end
  if i.hedged_requests > 0 or i.hedge_keyless > 0 then
    local p = r.predicted
    note(plural(p.hedges, "hedge") .. " predicted in " .. plural(p.hedged, "request") .. " of the "
      .. i.hedged_requests .. " the candidate hedges (each a start rf_hedge_decide allows while an attempt is in "
      .. "flight; a hedge is an attempt the upstream sees). Its own answer is not in the record: the prediction is "
      .. "the worst case (a hedge never wins, cancelled at the request's end); the best case (a hedge answers as the "
      .. "fastest success recorded on its route so far) gives " .. plural(i.hedges_best, "hedge") .. ", "
      .. i.hedge_wins_best .. " won by a hedge, " .. i.attempts_best .. " upstream attempts")
    if i.hedges_unbounded > 0 then
      note(plural(i.hedges_unbounded, "hedged request") .. " before any success recorded on its route: its best "
        .. "case taken as the worst")
    end
    if i.hedge_keyless > 0 then
      note(plural(i.hedge_keyless, "request") .. " on a hedging route not hedged: its method needs an idempotency "
        .. "key and it had none (sent one attempt at a time)")
    end
  end
  if i.assumed_timeouts > 0 then
    note(plural(i.assumed_timeouts, "recorded try", "recorded tries") .. " timed out at a per-try timeout shorter "
      .. "than the candidate's: assumed to time out again at the candidate's")
  end
  if i.sooner > 0 then
    note(plural(i.sooner, "retry", "retries") .. " sent sooner than recorded: the upstream's answer assumed the same")
  end
  if i.budget and i.overlapping > 0 then
    note(plural(i.overlapping, "request") .. " overlapped an earlier one: the retry budget sees requests in the "
      .. "order they were recorded, not their tries interleaved")
  end
  if i.older_records > 0 then
    local lacks = {}
    if i.older_timeouts > 0 then lacks[#lacks + 1] = i.older_timeouts .. " TIMEOUT tries (duration taken as the timeout)" end
    if i.older_waits > 0 then lacks[#lacks + 1] = i.older_waits .. " tries whose other wait headers are unknown" end
    if i.older_dates > 0 then lacks[#lacks + 1] = i.older_dates .. " date waits read against the try's end" end
    if i.older_tls > 0 then lacks[#lacks + 1] = i.older_tls .. " TLS failures taken as sent" end
    note(plural(i.older_records, "request") .. " from older lines without the replay facts (per-try timeout, "
      .. "transport outcome, every wait header, Date)" .. (#lacks > 0 and (": " .. table.concat(lacks, "; ")) or ""))
  end
  return notes
end

--- Replays ledgers under a candidate lock.
-- @param paths string|array of strings: ledger files (a missing path with a wildcard is a glob, as for stats)
-- @param policy a loaded policy (rf.load_file, rf.load_string): the candidate
-- @param opts table|nil: {seed = integer >= 0 (the candidate's jitter and the model's draws; default 0),
--   by = "route"|"host", skip_corrupt = true (count and skip corrupt lines), min_samples = 1..1000000 (default 30:
--   fewer recorded tries after a failure class is "too few samples"), replicates = 2..1000 (default 40)}
-- @return result, or nil, message (a corrupt line "path:line: corrupt ledger line: …", an unreadable file). result:
--   {files, ledgers = {{path, lines}…} (each file read, in order: what `signoff --evidence` digests), lines,
--    torn = {[path] = first torn line}, torn_lines, corrupt = {[path] = n}, corrupt_lines,
--    candidate = the candidate's digest, locks = {{digest, requests}…} (in order first met), recorded = the stats
--    table of retryfreeze.ledger_stats of the same lines, predicted = the same table for the requests as the
--    candidate would have sent them (by_route under the candidate's endpoints, "" for no route), plus
--    upstream_attempts (its attempts), extra_attempts (predicted − recorded attempts), duration_ms (the record's
--    ts range), upstream_attempts_per_second and extra_attempts_per_second (over that range; 0 when it is 0),
--    throttled (requests the retry budget stopped), hedges_lo/hedges_hi, hedge_wins_lo/hedge_wins_hi,
--    upstream_attempts_lo/upstream_attempts_hi (the candidate's hedges: best case, worst case = the prediction),
--    deadline_cut (requests a deadline stopped before the record did), no_route, exact, modelled, unmodelled
--    (requests by how they were predicted), harness;
--    interval = {whole = {success_rate_lo, success_rate_hi, … (each ratio), modelled, hedges_modelled, beyond},
--    [scope] = …},
--    gaps = {{route, class, samples, tries, fallback}…}, beyond = {{route, class, attempt, samples, drawn_as,
--    fallback, tries}…} (tries at an attempt the record's requests reached fewer than min_samples times after that
--    class: drawn as attempt drawn_as, the interval spanning their failing and succeeding), info (the core's
--    counts, rf_replay_info), notes = {string…}}
function M.replay(paths, policy, opts)
  local files, why = glob.reader_arguments(paths, opts, 3, "replay")
  if not files then return nil, why end
  local o = opts or {}
  local ok, r = pcall(core.ledger_replay, policy, files, { seed = o.seed, by = o.by, skip_corrupt = o.skip_corrupt,
    min_samples = o.min_samples, replicates = o.replicates })
  if not ok then
    local msg = message_of(r)
    if msg:find("bad argument", 1, true) then error(msg, 2) end
    return nil, msg
  end
  local rec, pred = r.recorded, r.predicted
  local result = { files = files, ledgers = json.array(), torn = {}, corrupt = {}, lines = 0, torn_lines = 0,
    corrupt_lines = 0,
    candidate = policy.digest, locks = r.locks, recorded = rec, predicted = pred, interval = r.interval,
    gaps = r.gaps, beyond = r.beyond, info = r.info }
  for _, path in ipairs(files) do
    local f = r.files[path]
    if f then
      result.ledgers[#result.ledgers + 1] = { path = path, lines = f.lines }
      result.lines = result.lines + f.lines
      result.torn_lines = result.torn_lines + f.torn_lines
      result.corrupt_lines = result.corrupt_lines + f.corrupt
      if f.torn > 0 then result.torn[path] = f.torn end
      if f.corrupt > 0 then result.corrupt[path] = f.corrupt end
    end
  end
  rec.files, rec.torn, rec.corrupt = files, result.torn, result.corrupt
  local i = r.info
  local duration_ms = rec.ts_min_ms and (rec.ts_max_ms - rec.ts_min_ms) or 0
  pred.upstream_attempts = pred.attempts
  pred.extra_attempts = pred.attempts - rec.attempts
  pred.duration_ms = duration_ms
  pred.upstream_attempts_per_second = duration_ms > 0 and pred.attempts * 1000 / duration_ms or 0
  pred.extra_attempts_per_second = duration_ms > 0 and pred.extra_attempts * 1000 / duration_ms or 0
  pred.throttled, pred.deadline_cut, pred.no_route = i.throttled, i.deadline_cut, i.no_route
  pred.exact, pred.modelled, pred.unmodelled, pred.harness = i.exact, i.modelled, i.unmodelled, i.harness
  -- the hedges' best (lo hedges and attempts, hi wins) and worst case (the prediction)
  pred.hedges_lo, pred.hedges_hi = i.hedges_best, pred.hedges
  pred.hedge_wins_lo, pred.hedge_wins_hi = pred.hedge_wins, i.hedge_wins_best
  pred.upstream_attempts_lo, pred.upstream_attempts_hi = i.attempts_best, pred.attempts
  result.notes = notes_of(result)
  return result
end

-- A count as an integer, a ratio with 4 decimals.
local function fmt(v)
  if math.type(v) == "integer" then return string.format("%d", v) end
  return string.format("%.4f", v)
end

-- The side-by-side lines of one scope: figure, recorded, predicted, interval.
local function scope_lines(lines, rec, pred, iv)
  lines[#lines + 1] = util.format("  %-24s %14s %14s  %s", "figure", "recorded", "predicted", "interval")
  for _, k in ipairs(M.figures) do
    local interval = ""
    if iv and iv[k .. "_lo"] and (iv.modelled or (iv.hedges_modelled and hedge_ratios[k])) then
      interval = util.format("[%.4f, %.4f]", iv[k .. "_lo"], iv[k .. "_hi"])
    end
    lines[#lines + 1] = util.format("  %-24s %14s %14s  %s", k, rec and fmt(rec[k]) or "-",
      pred and fmt(pred[k]) or "-", interval)
  end
  local reasons = {}
  for reason in pairs(rec and rec.reasons or {}) do reasons[reason] = true end
  for reason in pairs(pred and pred.reasons or {}) do reasons[reason] = true end
  for _, reason in ipairs(util.sorted_keys(reasons)) do
    lines[#lines + 1] = util.format("  %-24s %14s %14s", "reason " .. reason,
      tostring(rec and rec.reasons[reason] or 0), tostring(pred and pred.reasons[reason] or 0))
  end
end

--- The head of the replay's text: how many requests were predicted how, the load on the upstream, the throttles
--- and deadline cuts (printable; the report shows the same lines).
-- @param r a result of M.replay
-- @return headline string, array of the load lines
function M.head(r)
  local p = r.predicted
  local headline = util.format("replay under %s of %d recorded requests (%d exact, %d modelled, %d not modelled, "
    .. "%d no-route, %d seed-harness)", tostring(r.candidate), r.recorded.requests, p.exact, p.modelled, p.unmodelled,
    p.no_route, p.harness)
  local load = {
    util.format("upstream attempts %d (%+d; %.2f/s, %+.2f/s at the recorded rate over %d ms)",
      p.upstream_attempts, p.extra_attempts, p.upstream_attempts_per_second, p.extra_attempts_per_second,
      p.duration_ms),
    util.format("retry budget throttled %d requests; deadlines cut %d requests", p.throttled, p.deadline_cut) }
  if r.info.hedged_requests > 0 then
    load[#load + 1] = util.format("hedges %d in [%d, %d]; won by a hedge %d in [%d, %d]; upstream attempts %d in "
      .. "[%d, %d] (best case, worst case)", p.hedges, p.hedges_lo, p.hedges_hi, p.hedge_wins, p.hedge_wins_lo,
      p.hedge_wins_hi, p.upstream_attempts, p.upstream_attempts_lo, p.upstream_attempts_hi)
  end
  return headline, load
end

--- The text `retryfreeze replay` prints; every name from a ledger or a lock (routes, reasons, hosts, files, notes)
--- through util.printable, as `stats` prints them.
-- @param r a result of M.replay; group "by_route" or "by_host"
-- @return string
function M.render(r, group)
  group = group or "by_route"
  local p = r.predicted
  local headline, load = M.head(r)
  local lines = { headline }
  scope_lines(lines, r.recorded, p, r.interval.whole)
  for _, l in ipairs(load) do lines[#lines + 1] = "  " .. l end
  local names = {}
  for name in pairs(r.recorded[group] or {}) do names[name] = true end
  for name in pairs(p[group] or {}) do names[name] = true end
  for _, name in ipairs(util.sorted_keys(names)) do
    lines[#lines + 1] = util.format("%s %s", group == "by_host" and "host" or "route",
      ledger_stats.scope_label(group, name))
    scope_lines(lines, r.recorded[group][name], p[group][name], r.interval[name])
  end
  for _, path in ipairs(util.sorted_keys(r.torn)) do
    lines[#lines + 1] = util.format("note: torn line %s:%d", path, r.torn[path])
  end
  if r.corrupt_lines > 0 then lines[#lines + 1] = "note: " .. r.corrupt_lines .. " corrupt lines skipped" end
  for _, n in ipairs(r.notes) do lines[#lines + 1] = util.format("note: %s", n) end
  return table.concat(lines, "\n") .. "\n"
end

return M
