--- The HTML report of ledgers (`retryfreeze report`, `soak --report`, `demo --report`): one self-contained file
--- with the gate verdict, the summary line, charts over time and by route, and the worst routes.
---
--- Numbers: all from retryfreeze.ledger_stats (the same code as `stats --json`), in two streamed passes over
--- the ledgers: `stats` (whole input and by route; it also finds the time range), then `timeline` (the same
--- scope per time bucket). Memory is one scope per route and per time bucket, whatever the ledgers' length.
--- Verdict: retryfreeze.gate's merge, evaluate and summary, with the lock's thresholds.
--- A vs B (`replay --report`, `report --replay`): the ledgers replayed under the lock (retryfreeze.replay), whose
--- prediction the verdict then judges, and the recorded beside the predicted figures for the whole input and by
--- route, with the replay's notes (its assumption, its interval, what older lines could not support).
---
--- Charts: Vega-Lite compiled to Vega in the page and drawn as SVG. The minified builds are inlined from
--- lua/retryfreeze/vendor/vega/ (pinned npm versions with their licences; revendor.sh fetches them again), so
--- the file opens offline. A Content-Security-Policy of default-src 'none' forbids the page any fetch.
local compat = require "retryfreeze.compat"
local math = compat.math
local core = require "retryfreeze.core"
local gate = require "retryfreeze.gate"
local json = require "retryfreeze.json"
local ledger_stats = require "retryfreeze.ledger_stats"
local output = require "retryfreeze.output"
local rf = require "retryfreeze"
local replay = require "retryfreeze.replay"
local util = require "retryfreeze.util"

local M = {}

--- Time-bucket widths the report picks from (ms): round numbers a reader recognises.
M.bucket_steps = { 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000, 3600000,
  7200000, 10800000, 21600000, 43200000, 86400000, 172800000, 604800000, 2592000000, 31536000000 }

--- Routes the worst-routes table lists at most.
M.table_rows = 20

--- The time buckets for a ts range: the smallest width from M.bucket_steps that needs at most `target`
--- buckets, aligned to a multiple of that width.
-- @param ts_min, ts_max integer Unix ms (ts_min <= ts_max)
-- @param target integer: the most buckets wanted (default 60)
-- @return {origin_ms, bucket_ms, buckets} (buckets <= target)
function M.buckets_for(ts_min, ts_max, target)
  target = target or 60
  local width
  for _, step in ipairs(M.bucket_steps) do
    if math.floor(ts_max / step) - math.floor(ts_min / step) + 1 <= target then
      width = step
      break
    end
  end
  if not width then -- a span of centuries (a stray ts): whole multiples of the largest step
    local largest = M.bucket_steps[#M.bucket_steps]
    width = (math.floor(math.floor((ts_max - ts_min) / (target - 1)) / largest) + 1) * largest
  end
  local origin = math.floor(ts_min / width) * width
  return { origin_ms = origin, bucket_ms = width, buckets = math.max(1, math.floor((ts_max - origin) / width) + 1) }
end

--- The folder of the vendored chart library (beside this module, in the source or the install tree).
-- @return string path, or nil, message
function M.vendor_dir()
  local here = compat.searchpath("retryfreeze.report", package.path)
  if not here then return nil, "cannot locate retryfreeze/report.lua on package.path" end
  return (here:gsub("report%.lua$", "vendor/vega"))
end

local function null_if(cond, v) if cond then return json.null end return v end

--- One colour per request outcome and per final reason, the same in every chart that shows one (a chart's own
--- order of the names never picks the colour): success is green in both, never red; a failure that no retry
--- can fix is red, one the retries ran out on orange, the deadline's purple, the budget's yellow, a refusal brown,
--- a retry verdict's blue. Keyed by the names of rf.outcomes and rf.reasons (spec/24-report_spec.lua checks that
--- every one has a colour).
M.COLOURS = {
  outcome = { success = "#2e7d32", terminal = "#c62828", exhausted = "#ef6c00", deadline = "#6a1b9a",
    throttled = "#f9a825", refused = "#6d4c41" },
  reason = { success = "#2e7d32", ["status-not-retryable"] = "#c62828", ["hedge-fatal"] = "#ad1457",
    ["server-pushback"] = "#00838f", ["upstream-overloaded"] = "#5e35b1", ["inbound-retry"] = "#3949ab",
    ["stopped-by-caller"] = "#546e7a", ["max-attempts"] = "#ef6c00", ["class-limit"] = "#ffa726",
    deadline = "#6a1b9a", ["retry-after-exceeds-budget"] = "#ba68c8", ["retry-throttled"] = "#f9a825",
    ["no-route"] = "#6d4c41", ["unpinned-source"] = "#a1887f", ["mutating-without-idempotency"] = "#8d6e63",
    ["pinned-status"] = "#1565c0", ["within-budget"] = "#42a5f5", ["transparent-retry"] = "#26a69a",
    redirect = "#9e9d24" },
}

-- The colour scale of kind ("outcome" or "reason") for the names present: {domain = names in the engine's order,
-- range = their colours}, so a legend lists only what the charts show. A name the table lacks gets grey.
local function colour_scale(kind, present)
  local order = kind == "outcome" and rf.outcomes or rf.reasons
  local scale = { domain = {}, range = {} }
  for _, name in ipairs(order) do
    if present[name] then
      scale.domain[#scale.domain + 1] = name
      scale.range[#scale.range + 1] = M.COLOURS[kind][name]
      present[name] = nil
    end
  end
  for _, name in ipairs(util.sorted_keys(present)) do -- not in the vocabulary (a newer ledger): still drawn
    scale.domain[#scale.domain + 1] = name
    scale.range[#scale.range + 1] = "#9e9e9e"
  end
  return scale
end

-- The gate part, judged as `retryfreeze gate` judges: the given thresholds (soak passes its own), else the
-- lock's gate, else the seed's defaults (gate.with_defaults), then gate.evaluate.
local function verdict_of(s, policy, given)
  local thresholds, defaulted = given, false
  if not thresholds then
    thresholds, defaulted = gate.with_defaults(gate.merge(policy and policy.gate or nil, nil))
  end
  local v = gate.evaluate(s, thresholds)
  local state = (not v.pass) and "breach" or (v.skipped and "skip" or "pass")
  local text = ({ pass = "no threshold breached", breach = #v.breaches .. " threshold"
    .. (#v.breaches == 1 and "" or "s") .. " breached", skip = "not every threshold could be judged" })[state]
  local shown = {}
  for _, k in ipairs(gate.numeric) do
    if thresholds[k] ~= nil then shown[#shown + 1] = { name = (k:gsub("_", "-")), value = thresholds[k] } end
  end
  for _, k in ipairs({ "min_successes", "min_requests" }) do
    if thresholds[k] then shown[#shown + 1] = { name = (k:gsub("_", "-")), value = thresholds[k] } end
  end
  for _, r in ipairs(thresholds.forbid_reasons or {}) do shown[#shown + 1] = { name = "forbid-reason", value = r } end
  local source = given and "the run's" or defaulted and (policy and "the seed's defaults, as the lock has no gate"
    or "the seed's defaults, as no --lock was given") or "the lock's gate"
  return { state = state, text = text, breaches = v.breaches, notes = v.notes, thresholds = shown, source = source }
end

-- The lock part: its digest and, from the pairing log, whether that digest is the latest sign-off.
local function lock_of(lock_path, policy, log_path)
  local signoff = require "retryfreeze.signoff"
  local out = { path = lock_path, digest = policy.digest }
  log_path = log_path or signoff.default_log(lock_path)
  out.log = log_path
  local log, err, code = signoff.read(log_path)
  if not log then
    out.signoff = { state = code == "missing" and "no-log" or "error", text = err }
    return out
  end
  local r = signoff.verify(policy, log, signoff.lock_name(lock_path, log_path))
  local function signers(e) return table.concat(e.by, " & ") .. (e.solo and " (solo)" or "") end
  if r.status == "signed" then
    out.signoff = { state = "signed", text = string.format("signed off on %s by %s (%s line %d)", r.latest.date,
      signers(r.latest), log_path, r.latest.line) }
  elseif r.status == "not-widened" then
    out.signoff = { state = "signed", text = string.format("not widened since the sign-off of %s by %s (%s line %d):"
      .. " every change since is narrowing or neutral", r.latest.date, signers(r.latest), log_path, r.latest.line) }
  elseif r.latest then
    out.signoff = { state = "unsigned", text = string.format("%s: the latest sign-off (%s, %s by %s) is of %s",
      signoff.CHANGED_MESSAGE, r.latest.date, log_path, signers(r.latest), r.latest.digest) }
  else
    out.signoff = { state = "unsigned", text = signoff.CHANGED_MESSAGE .. ": " .. log_path .. " has no sign-off of "
      .. signoff.lock_name(lock_path, log_path) }
  end
  return out
end

local sorted_keys = util.sorted_keys

--- The label of the whole input among the routes of the A vs B view.
M.ALL = "(all requests)"

-- The A vs B view's data: each figure of replay.figures recorded and predicted, for the whole input and each
-- scope of the group (a ratio over a denominator of 0 is null: no bar), the prediction's interval where it was
-- modelled, and the final reasons of both sides.
local function versus_of(r, group)
  local figures, reasons, rows = {}, {}, {}
  local function scope(label, rec, pred, iv)
    local row = { scope = label }
    for _, side in ipairs({ { "recorded", rec }, { "predicted", pred } }) do
      local name, t = side[1], side[2]
      row[name] = {}
      for _, k in ipairs(replay.figures) do
        local den = replay.denominators[k]
        local v = json.null
        if t and not (den and t[den] == 0) then v = t[k] end
        local cell = { scope = label, side = name, figure = k, value = v }
        if name == "predicted" and iv and iv.modelled and iv[k .. "_lo"] and v ~= json.null then
          cell.lo, cell.hi = iv[k .. "_lo"], iv[k .. "_hi"]
        end
        figures[#figures + 1] = cell
        row[name][k] = cell
      end
      for _, reason in ipairs(sorted_keys(t and t.reasons or {})) do
        reasons[#reasons + 1] = { scope = label, side = name, row = label .. " — " .. name, order = #reasons,
          reason = reason, requests = t.reasons[reason] }
      end
    end
    rows[#rows + 1] = row
  end
  scope(M.ALL, r.recorded, r.predicted, r.interval.whole)
  local names = {}
  for name in pairs(r.recorded[group] or {}) do names[name] = true end
  for name in pairs(r.predicted[group] or {}) do names[name] = true end
  for _, name in ipairs(sorted_keys(names)) do
    scope(ledger_stats.scope_label(group, name), r.recorded[group][name], r.predicted[group][name], r.interval[name])
  end
  return { figures = figures, reasons = reasons }, rows
end

--- Computes everything the report shows.
-- @param paths array of strings: ledgers (globs as for ledger_stats.stats)
-- @param opts table|nil: {lock = path|nil, log = pairing log path|nil (default: beside the lock),
--   title = string|nil, skip_corrupt = boolean, buckets = integer (most time buckets, default 60),
--   thresholds = table|nil (gate thresholds as gate.merge returns them; default: the lock's gate),
--   after_line = {[path] = n}|nil (lines 1..n of that file are not counted: a soak's or demo's own run),
--   replay = {seed =, min_samples =, by = "route"|"host", result =}|nil (the A vs B view: the ledgers replayed
--   under the lock, the candidate, as retryfreeze.replay does with those options; `result`, a replay of these
--   ledgers under that lock already made, is shown instead of replaying again; the verdict judges the prediction)}
-- @return model table (plain data: what render shows; `data` is what the charts get), or nil, message
--   (an unreadable or corrupt ledger, an invalid lock, a tampered pairing log is shown, not an error)
function M.build(paths, opts)
  opts = opts or {}
  local policy
  if opts.lock then
    local why
    policy, why = rf.load(opts.lock)
    if not policy then return nil, util.lock_error(opts.lock, why) end
  end
  local sopts = { skip_corrupt = opts.skip_corrupt or false, after_line = opts.after_line }
  local replayed, err -- the replay's result, for the A vs B view
  if opts.replay then
    if not policy then return nil, "the A vs B view needs the candidate lock (opts.lock)" end
    local o = opts.replay
    replayed = o.result
    if not replayed then
      replayed, err = replay.replay(paths, policy, { seed = o.seed, by = o.by, skip_corrupt = sopts.skip_corrupt,
        min_samples = o.min_samples })
      if not replayed then return nil, err end
    end
  end
  local s
  s, err = ledger_stats.stats(paths, sopts)
  if not s then return nil, err end
  local timeline = {}
  local tl
  if s.ts_min_ms then
    tl = M.buckets_for(s.ts_min_ms, s.ts_max_ms, opts.buckets)
    timeline, err = ledger_stats.timeline(s.files, tl, sopts)
    if not timeline then return nil, err end
  end

  -- The seed harness's lines carry no ts (docs/evidence.md, Seed-harness lines): they fall in no time bucket.
  local harness = s.by_route[core.LEDGER_HARNESS_ROUTE]
  local untimed = harness and harness.requests or 0
  local data = { timeline = {}, attempts = {}, outcomes = {}, reasons = {}, retry_after = {}, routes = {} }
  for i, b in ipairs(timeline) do
    local none, no_ok = b.requests == 0, b.successes == 0
    data.timeline[i] = { t = b.start_ms, requests = b.requests,
      retried_success_ratio = null_if(no_ok, b.retried_success_ratio),
      attempts_per_success = null_if(no_ok, b.attempts_per_success),
      terminal_rate = null_if(none, b.terminal_rate),
      p50 = null_if(none, b.elapsed_ms.p50), p95 = null_if(none, b.elapsed_ms.p95),
      p99 = null_if(none, b.elapsed_ms.p99) }
  end
  local max_attempts = 1
  for k in pairs(s.by_attempts) do max_attempts = math.max(max_attempts, math.tointeger(k)) end
  for n = 0, max_attempts do
    data.attempts[#data.attempts + 1] = { attempts = n, requests = s.by_attempts[tostring(n)] or 0 }
  end
  local routes = sorted_keys(s.by_route)
  for _, route in ipairs(routes) do
    local r, label = s.by_route[route], ledger_stats.route_label(route)
    for _, outcome in ipairs(sorted_keys(r.by_outcome)) do
      data.outcomes[#data.outcomes + 1] = { route = label, outcome = outcome, requests = r.by_outcome[outcome] }
    end
    for _, reason in ipairs(sorted_keys(r.reasons)) do
      data.reasons[#data.reasons + 1] = { route = label, reason = reason, requests = r.reasons[reason] }
    end
    for _, use in ipairs(sorted_keys(r.retry_after)) do
      data.retry_after[#data.retry_after + 1] = { route = label, use = use, tries = r.retry_after[use] }
    end
  end
  -- Worst routes first: the highest retried-success ratio, then the most retried successes, then the name.
  table.sort(routes, function(a, b)
    local ra, rb = s.by_route[a], s.by_route[b]
    if ra.retried_success_ratio ~= rb.retried_success_ratio then
      return ra.retried_success_ratio > rb.retried_success_ratio
    end
    if ra.retried_successes ~= rb.retried_successes then return ra.retried_successes > rb.retried_successes end
    return a < b
  end)
  for i = 1, math.min(#routes, M.table_rows) do
    local r = s.by_route[routes[i]]
    data.routes[i] = { route = ledger_stats.route_label(routes[i]), requests = r.requests, successes = r.successes,
      retried_successes = r.retried_successes, retried_success_ratio = r.retried_success_ratio,
      attempts_per_success = r.attempts_per_success, terminal = r.terminal, terminal_rate = r.terminal_rate,
      p99 = r.elapsed_ms.p99 or json.null }
  end

  local versus
  if replayed then
    local group = opts.replay.by == "host" and "by_host" or "by_route"
    local rows
    data.versus, rows = versus_of(replayed, group)
    local headline, load = replay.head(replayed)
    versus = { result = replayed, rows = rows, headline = headline, load = load, group = group,
      recorded_summary = gate.summary(s) }
  end
  local outcomes, reasons = {}, {}
  for _, o in ipairs(data.outcomes) do outcomes[o.outcome] = true end
  for _, r in ipairs(data.reasons) do reasons[r.reason] = true end
  for _, r in ipairs(data.versus and data.versus.reasons or {}) do reasons[r.reason] = true end
  data.colours = { outcome = colour_scale("outcome", outcomes), reason = colour_scale("reason", reasons) }
  return {
    title = opts.title or (replayed and "retryfreeze replay: recorded vs predicted under " .. opts.lock)
      or "retryfreeze report",
    generated = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    stats = s,
    summary = gate.summary(replayed and replayed.predicted or s),
    verdict = verdict_of(replayed and replayed.predicted or s, policy, opts.thresholds),
    versus = versus,
    lock = policy and lock_of(opts.lock, policy, opts.log) or nil,
    buckets = tl,
    untimed = untimed,
    routes_total = #routes,
    data = data,
  }
end

--- A value as HTML text or an attribute: its control characters written out first (util.printable: C0, DEL and C1
--- as \u00XX, stray bytes as \xHH), as every text output does, so that the page, which `-o -` writes to a terminal,
--- carries no ESC or BEL from a ledger string; then &, <, >, " and ' as references.
local function html(s)
  return (util.printable(s):gsub("[&<>\"']", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;",
    ["'"] = "&#39;" }))
end

local pct = util.percent

local function duration(ms)
  local units = { { 86400000, "d" }, { 3600000, "h" }, { 60000, "min" }, { 1000, "s" } }
  for _, u in ipairs(units) do
    if ms >= u[1] and ms % u[1] == 0 then return string.format("%d %s", math.floor(ms / u[1]), u[2]) end
  end
  return string.format("%d ms", ms)
end

local STYLE = [[
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.meta{color:#57606a;font-size:13px}
.verdict{border-radius:8px;padding:12px 16px;margin:16px 0;border:1px solid}
.verdict.pass{background:#e6f4ea;border-color:#8cc79b}.verdict.breach{background:#fde8e8;border-color:#e39a9a}
.verdict.skip{background:#fff6dd;border-color:#e3c46f}
.verdict strong{font-size:18px;text-transform:uppercase;margin-right:10px}
pre{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;overflow-x:auto;margin:6px 0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:14px}
figure{background:#fff;border:1px solid #d0d7de;border-radius:8px;margin:0;padding:10px 12px;overflow-x:auto}
figcaption{font-weight:600;margin-bottom:6px}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:right}th{background:#eef1f4}
td:first-child,th:first-child{text-align:left}
.bad{color:#b42318}.ok{color:#137333}
footer{margin-top:28px;color:#57606a;font-size:12px}
]]

-- The page script: compiles each Vega-Lite spec and draws it as SVG, then records what it drew (and any error)
-- in #rf-render-status, a hidden element a test reads, and says how many charts it drew in #rf-drawn.
local SCRIPT = [[
(function () {
  var data = JSON.parse(document.getElementById('rf-data').textContent);
  // A 24-hour UTC clock at every tick level: d3's default labels hours and minutes on a 12-hour clock
  // ("08 PM", "08:15" for 20:15), which under a "time (UTC)" title reads as the wrong time.
  var clock = {milliseconds: '%H:%M:%S.%L', seconds: '%H:%M:%S', minutes: '%H:%M', hours: '%H:%M',
    date: '%b %d', day: '%b %d', week: '%b %d', month: '%b %Y', quarter: '%b %Y', year: '%Y'};
  var time = {field: 't', type: 'temporal', title: 'time (UTC)', scale: {type: 'utc'},
    axis: {format: clock, formatType: 'utcFormat'}};
  var w = 470, h = 170;
  function overTime(field, title, format) {
    return {data: {values: data.timeline}, width: w, height: h,
      mark: {type: 'line', point: true, interpolate: 'monotone'},
      encoding: {x: time, y: {field: field, type: 'quantitative', title: title, axis: format ? {format: format} : {}},
        tooltip: [{field: 't', type: 'temporal', title: 'bucket start (UTC)', format: '%Y-%m-%d %H:%M:%S',
          scale: {type: 'utc'}}, {field: field, type: 'quantitative', title: title, format: format || ',.3f'},
          {field: 'requests', type: 'quantitative'}]}};
  }
  function byRoute(values, color, title) {
    // Each route's label in full on a line of its own above its bar, so a long route neither is cut to "…" nor
    // pushes the bars or the legend out of the figure.
    return {data: {values: values}, width: w,
      height: {step: 36}, mark: 'bar',
      encoding: {y: {field: 'route', type: 'nominal', title: null, sort: 'ascending',
          scale: {paddingInner: 0.55, paddingOuter: 0.3},
          axis: {labelLimit: 0, labelAlign: 'left', labelBaseline: 'bottom', labelPadding: 0, labelOffset: -10,
            ticks: false, domain: false}},
        x: {field: 'requests', type: 'quantitative', stack: 'zero', title: 'requests'},
        color: {field: color, type: 'nominal', title: title, scale: data.colours[color], legend: {columns: 2}},
        tooltip: [{field: 'route'}, {field: color}, {field: 'requests', type: 'quantitative'}]}};
  }
  var charts = {
    'chart-requests': {data: {values: data.timeline}, width: w, height: h, mark: {type: 'area', line: true,
        interpolate: 'step-after', opacity: 0.6},
      encoding: {x: time, y: {field: 'requests', type: 'quantitative', title: 'requests per bucket'}}},
    'chart-retried': overTime('retried_success_ratio', 'retried successes / successes', '.1%'),
    'chart-attempts-per-success': overTime('attempts_per_success', 'attempts per success', '.2f'),
    'chart-terminal': overTime('terminal_rate', 'terminal / requests', '.1%'),
    'chart-attempts-hist': {data: {values: data.attempts}, width: w, height: h, mark: 'bar',
      encoding: {x: {field: 'attempts', type: 'ordinal', title: 'attempts per request', axis: {labelAngle: 0}},
        y: {field: 'requests', type: 'quantitative', title: 'requests'},
        tooltip: [{field: 'attempts'}, {field: 'requests', type: 'quantitative'}]}},
    'chart-latency': {data: {values: data.timeline}, width: w, height: h,
      transform: [{fold: ['p50', 'p95', 'p99'], as: ['percentile', 'ms']}],
      mark: {type: 'line', point: true},
      encoding: {x: time, y: {field: 'ms', type: 'quantitative', title: 'elapsed_ms'},
        color: {field: 'percentile', type: 'nominal', title: null, sort: ['p50', 'p95', 'p99']},
        tooltip: [{field: 'percentile'}, {field: 'ms', type: 'quantitative'}]}},
    'chart-outcomes': byRoute(data.outcomes, 'outcome', 'outcome'),
    'chart-reasons': byRoute(data.reasons, 'reason', 'final reason'),
    'chart-retry-after': {data: {values: data.retry_after}, width: w, height: h, mark: 'bar',
      encoding: {x: {field: 'use', type: 'nominal', title: 'Retry-After', axis: {labelAngle: 0},
          sort: ['honored', 'not-honored', 'ignored-invalid', 'not-needed']},
        y: {field: 'tries', type: 'quantitative', stack: 'zero', title: 'attempts with a Retry-After'},
        color: {field: 'route', type: 'nominal', title: 'route'},
        tooltip: [{field: 'route'}, {field: 'use'}, {field: 'tries', type: 'quantitative'}]}}
  };
  // A vs B: one figure, recorded and predicted side by side per route; a rule over a predicted bar is its interval.
  var sides = ['recorded', 'predicted'];
  function versus(figure, title, format) {
    var scope = {field: 'scope', type: 'nominal', title: null, sort: 'ascending', axis: {labelLimit: 0}};
    return {data: {values: data.versus.figures}, width: w,
      height: {step: 34},
      transform: [{filter: {field: 'figure', equal: figure}}, {filter: 'datum.value !== null'}],
      encoding: {y: scope, yOffset: {field: 'side', type: 'nominal', sort: sides}},
      layer: [{mark: 'bar', encoding: {
          x: {field: 'value', type: 'quantitative', title: title, axis: format ? {format: format} : {}},
          color: {field: 'side', type: 'nominal', title: null, sort: sides},
          tooltip: [{field: 'scope', title: 'route'}, {field: 'side'},
            {field: 'value', type: 'quantitative', title: title, format: format || ',.4f'},
            {field: 'lo', type: 'quantitative', title: 'interval low', format: format || ',.4f'},
            {field: 'hi', type: 'quantitative', title: 'interval high', format: format || ',.4f'}]}},
        {transform: [{filter: 'isValid(datum.lo)'}], mark: {type: 'rule', strokeWidth: 2, color: '#1b1f24'},
          encoding: {x: {field: 'lo', type: 'quantitative'}, x2: {field: 'hi'}}}]};
  }
  if (data.versus) {
    charts['chart-vs-attempts'] = versus('attempts', 'attempts (the upstream\'s load)', ',d');
    charts['chart-vs-success-rate'] = versus('success_rate', 'successes / requests', '.1%');
    charts['chart-vs-retried'] = versus('retried_success_ratio', 'retried successes / successes', '.1%');
    charts['chart-vs-attempts-per-success'] = versus('attempts_per_success', 'attempts per success', '.2f');
    charts['chart-vs-terminal'] = versus('terminal_rate', 'terminal / requests', '.1%');
    charts['chart-vs-reasons'] = {data: {values: data.versus.reasons}, width: w, height: {step: 22}, mark: 'bar',
      encoding: {y: {field: 'row', type: 'nominal', title: null, sort: {field: 'order', op: 'min'},
          axis: {labelLimit: 0}},
        x: {field: 'requests', type: 'quantitative', stack: 'zero', title: 'requests'},
        color: {field: 'reason', type: 'nominal', title: 'final reason', scale: data.colours.reason,
          legend: {orient: 'right', direction: 'vertical', columns: 1}},
        tooltip: [{field: 'scope', title: 'route'}, {field: 'side'}, {field: 'reason'},
          {field: 'requests', type: 'quantitative'}]}};
  }
  var status = {charts: {}, errors: window.__rfErrors, resources: []};
  // Only the charts the page holds: one with no data is left out, and the page says so in words.
  var ids = Object.keys(charts).filter(function (id) { return document.getElementById(id) !== null; });
  var jobs = ids.map(function (id) {
    var el = document.getElementById(id);
    var spec = charts[id];
    spec.$schema = 'https://vega.github.io/schema/vega-lite/v6.json';
    // customFormatTypes: Vega-Lite hands the axis' multi-format object (clock) to Vega instead of dropping it.
    spec.config = {font: 'system-ui, sans-serif', view: {stroke: null}, customFormatTypes: true,
      legend: {orient: 'bottom', direction: 'horizontal', columns: 3, labelLimit: 0}};
    var view = new vega.View(vega.parse(vegaLite.compile(spec).spec), {renderer: 'svg', container: el,
      hover: true});
    return view.runAsync().then(function () {
      var svg = el.querySelector('svg');
      status.charts[id] = {svg: !!svg, marks: svg ? svg.querySelectorAll('g.role-mark > *').length : 0,
        width: svg ? svg.getBoundingClientRect().width : 0,
        // drawn within its figure: nothing (a label, a legend) past the edge, where the figure would clip it
        fits: svg ? svg.getBoundingClientRect().width <= el.clientWidth + 1 : false};
    });
  });
  Promise.all(jobs).catch(function (e) {
    window.__rfErrors.push(String(e && e.stack || e));
    console.error(e);
  }).then(function () {
    // Anything the page loaded besides itself (there must be nothing: everything is inlined).
    status.resources = performance.getEntriesByType('resource').map(function (e) { return e.name; });
    var out = document.getElementById('rf-render-status');
    var drawn = ids.filter(function (id) { return status.charts[id] && status.charts[id].marks > 0; }).length;
    out.textContent = JSON.stringify(status);
    out.setAttribute('data-drawn', String(drawn));
    out.setAttribute('data-charts', String(ids.length));
    document.getElementById('rf-drawn').textContent = drawn + ' of ' + ids.length + ' charts drawn';
    document.body.setAttribute('data-rendered', 'true');
  });
})();
]]

-- The charts: id, caption, the data rows it draws (a function of the model's data), and what "no data" means
-- for it. A chart with no rows is not drawn (an empty frame with axes labelled "undefined" says nothing): the
-- page says so in words instead, and the script draws only the charts the page holds.
local function timeline(d) return d.timeline end
local charts = {
  { "chart-requests", "Requests over time", timeline, "no line with a ts" },
  { "chart-retried", "Retried-success ratio over time", timeline, "no line with a ts" },
  { "chart-attempts-per-success", "Attempts per success over time", timeline, "no line with a ts" },
  { "chart-terminal", "Terminal rate over time", timeline, "no line with a ts" },
  { "chart-latency", "elapsed_ms p50 / p95 / p99 over time", timeline, "no line with a ts" },
  { "chart-attempts-hist", "Attempts per request", function(d) return d.attempts end, "no request" },
  { "chart-outcomes", "Outcomes by route", function(d) return d.outcomes end, "no request" },
  { "chart-reasons", "Final reasons by route", function(d) return d.reasons end, "no request" },
  { "chart-retry-after", "Retry-After use", function(d) return d.retry_after end,
    "no attempt in these ledgers carried a Retry-After header" },
}

-- The A vs B charts (the script draws them when the data has `versus`).
local function figures(d) return d.versus.figures end
local versus_charts = {
  { "chart-vs-attempts", "Attempts: recorded vs predicted", figures, "no request" },
  { "chart-vs-success-rate", "Success rate: recorded vs predicted", figures, "no request" },
  { "chart-vs-retried", "Retried-success ratio: recorded vs predicted", figures, "no request" },
  { "chart-vs-attempts-per-success", "Attempts per success: recorded vs predicted", figures, "no request" },
  { "chart-vs-terminal", "Terminal rate: recorded vs predicted", figures, "no request" },
  { "chart-vs-reasons", "Final reasons: recorded vs predicted", function(d) return d.versus.reasons end,
    "no request" },
}

local function chart_grid(w, list, data)
  local empty = {}
  w('<div class="grid">\n')
  for _, c in ipairs(list) do
    if #c[3](data) > 0 then
      w('<figure><figcaption>', html(c[2]), '</figcaption><div class="chart" id="', c[1], '"></div></figure>\n')
    else
      empty[#empty + 1] = c
    end
  end
  w('</div>\n')
  for _, c in ipairs(empty) do
    w('<div class="meta no-data" data-chart="', c[1], '">', html(c[2] .. ": no data (" .. c[4] .. ")."), '</div>\n')
  end
end

-- A figure of the A vs B table: a count as an integer, a ratio with 4 decimals (as `retryfreeze replay` prints).
local function figure_text(v)
  if v == json.null then return "–" end
  if math.type(v) == "integer" then return string.format("%d", v) end
  return string.format("%.4f", v)
end

-- The A vs B section: what was predicted how, the method and its assumption, the notes, the charts and the table.
local function render_versus(w, model)
  local vs = model.versus
  local r = vs.result
  local p = r.predicted
  w('<section id="versus"><h2>A vs B: recorded vs predicted under the candidate</h2>\n')
  w('<div id="versus-head" data-exact="', p.exact, '" data-modelled="', p.modelled, '" data-unmodelled="',
    p.unmodelled, '" data-no-route="', p.no_route, '" data-harness="', p.harness, '">', html(vs.headline), '</div>\n')
  for _, l in ipairs(vs.load) do w('<div class="meta">', html(l), '</div>\n') end
  w('<pre id="recorded-summary">recorded: ', html(vs.recorded_summary), '</pre>\n')
  w('<p id="versus-method">', html("Each recorded request is decided again, try by try, under the candidate with "
    .. "the facts its line recorded. Where the candidate stops at or before the record's last try the prediction "
    .. "is exact. A try the record never made is modelled: drawn from the tries the record made on the same route "
    .. "at the same attempt after the same failure class, assuming " .. replay.ASSUMPTION .. "; its figures carry "
    .. "an interval (the rule over a predicted bar, and the table's last column), which spans every case at an "
    .. "attempt the record's requests did not reach often enough. "), html(p.modelled > 0
      and string.format("Here %d of %d requests were modelled.", p.modelled, p.requests)
      or "Here no request was modelled: every prediction is exact, and has no interval."), '</p>\n')
  w('<ul id="versus-notes">\n')
  for _, path in ipairs(sorted_keys(r.torn)) do
    w('<li>', html(string.format("torn line %s:%d", path, r.torn[path])), '</li>\n')
  end
  if r.corrupt_lines > 0 then w('<li>', html(r.corrupt_lines .. " corrupt lines skipped"), '</li>\n') end
  for _, n in ipairs(r.notes) do w('<li class="note">', html(n), '</li>\n') end
  w('</ul>\n')
  chart_grid(w, versus_charts, model.data)
  w('<table id="versus-table">\n<thead><tr><th>', vs.group == "by_host" and "host" or "route",
    '</th><th>figure</th><th>recorded</th><th>predicted</th><th>interval</th></tr></thead>\n<tbody>\n')
  for _, row in ipairs(vs.rows) do
    for _, k in ipairs(replay.figures) do
      local rec, pred = row.recorded[k], row.predicted[k]
      w('<tr data-scope="', html(row.scope), '" data-figure="', k, '"><td>', html(row.scope), '</td><td>', k,
        '</td><td data-side="recorded" data-value="', json.encode(rec.value), '">', figure_text(rec.value),
        '</td><td data-side="predicted" data-value="', json.encode(pred.value), '">', figure_text(pred.value),
        '</td><td>', pred.lo and string.format("[%.4f, %.4f]", pred.lo, pred.hi) or "", '</td></tr>\n')
    end
  end
  w('</tbody></table>\n</section>\n')
end

--- Renders a model (from M.build) as one self-contained HTML page.
-- @param model table
-- @return string HTML, or nil, message (the vendored chart library is missing)
function M.render(model)
  local dir, derr = M.vendor_dir()
  if not dir then return nil, derr end
  local libs = {}
  for _, name in ipairs({ "vega.min.js", "vega-lite.min.js" }) do
    local text, err = util.read_file(dir .. "/" .. name)
    if not text then return nil, "the report's chart library is missing: " .. tostring(err) end
    -- Inlined: no source map to fetch, and no "</script" to end the element early.
    libs[#libs + 1] = (text:gsub("\n//# sourceMappingURL=[^\n]*%s*$", "\n"):gsub("</(script)", "<\\/%1"))
  end
  local s, v = model.stats, model.verdict
  local out = {}
  local function w(...) for _, x in ipairs({ ... }) do out[#out + 1] = x end end
  w('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
    '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; script-src \'unsafe-inline\' ',
    '\'unsafe-eval\'; style-src \'unsafe-inline\'; img-src data:">\n',
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n<meta name="generator" content="retryfreeze ',
    html(rf.VERSION), '">\n<title>', html(model.title), '</title>\n<style>', STYLE, '</style>\n',
    '<script>window.__rfErrors = [];\n',
    'window.addEventListener("error", function (e) { window.__rfErrors.push(String(e.message || e.type)); }, true);\n',
    'document.addEventListener("securitypolicyviolation", function (e) { ',
    'window.__rfErrors.push("blocked " + e.blockedURI); });\n</script>\n</head>\n<body>\n<main>\n')
  w('<h1>', html(model.title), '</h1>\n<div class="meta">generated ', html(model.generated), ' from ')
  local files = {}
  for i, f in ipairs(s.files) do files[i] = "<code>" .. html(f) .. "</code>" end
  w(table.concat(files, ", "), string.format(" — %d lines", s.lines))
  if s.ts_min_ms then
    w(string.format(", %s to %s UTC", os.date("!%Y-%m-%d %H:%M:%S", math.floor(s.ts_min_ms / 1000)),
      os.date("!%Y-%m-%d %H:%M:%S", math.floor(s.ts_max_ms / 1000))))
  end
  if model.buckets then w(", buckets of ", duration(model.buckets.bucket_ms)) end
  w('</div>\n')
  for path, line in pairs(s.torn) do
    w('<div class="meta">torn last line ', html(path), ':', line, ' (a write cut short; not counted)</div>\n')
  end
  if s.corrupt_lines > 0 then
    w('<div class="meta bad">', s.corrupt_lines, ' corrupt lines skipped</div>\n')
  end

  w('<section class="verdict ', v.state, '" id="verdict" data-state="', v.state, '"><strong>',
    model.versus and "predicted gate: " or "gate: ", html(v.state), '</strong>', html(v.text),
    '\n<pre id="summary">', model.versus and "predicted: " or "", html(model.summary), '</pre>\n')
  if s.hedges > 0 then -- the lock's hedging: the attempts it added, and how often they won
    w('<div class="note" id="hedging" data-hedges="', s.hedges, '" data-hedge-wins="', s.hedge_wins, '">',
      html(string.format("hedges: %d in %d requests (%.3f per request); won by a hedge: %d (%s of requests)",
        s.hedges, s.hedged, s.hedges_per_request, s.hedge_wins, pct(s.hedge_win_rate))), '</div>\n')
  end
  for _, n in ipairs(v.notes) do w('<div class="note">', html(n), '</div>\n') end
  for _, b in ipairs(v.breaches) do w('<div class="bad breach">', html(b), '</div>\n') end
  local parts = {}
  for i, t in ipairs(v.thresholds) do parts[i] = html(t.name .. " " .. tostring(t.value)) end
  w('<div class="meta">thresholds (', html(v.source), '): ', table.concat(parts, ", "), '</div>\n')
  w('</section>\n')

  if model.lock then
    local l = model.lock
    w('<section id="lock"><h2>Lock</h2>\n<div><code>', html(l.path), '</code> digest <code id="lock-digest">',
      html(l.digest), '</code></div>\n<div id="signoff" data-state="', html(l.signoff.state), '" class="',
      l.signoff.state == "signed" and "ok" or "bad", '">', html(l.signoff.text), '</div>\n</section>\n')
  end

  if model.versus then render_versus(w, model) end

  w('<h2>', model.versus and "The record: over time and by route" or "Over time and by route", '</h2>\n')
  if model.untimed > 0 then
    w('<div class="meta" id="untimed">', model.untimed, model.untimed == 1 and " line" or " lines",
      html(" from the seed's harness carry no ts: they are counted in the summary, the charts by route and the "
        .. "table, but not in the charts over time."), '</div>\n')
  end
  chart_grid(w, charts, model.data)

  w('<h2>Worst routes by retried-success ratio</h2>\n<table id="worst-routes">\n<thead><tr><th>route</th>',
    '<th>requests</th><th>successes</th><th>retried successes</th><th>retried-success ratio</th>',
    '<th>attempts per success</th><th>terminal</th><th>terminal rate</th><th>p99 ms</th></tr></thead>\n<tbody>\n')
  for _, r in ipairs(model.data.routes) do
    local function num(field, shown)
      return string.format('<td data-field="%s" data-value="%s">%s</td>', field, json.encode(r[field]), html(shown))
    end
    w('<tr data-route="', html(r.route), '"><td>', html(r.route), '</td>', num("requests", r.requests),
      num("successes", r.successes), num("retried_successes", r.retried_successes),
      num("retried_success_ratio", pct(r.retried_success_ratio)),
      num("attempts_per_success", string.format("%.3f", r.attempts_per_success)), num("terminal", r.terminal),
      num("terminal_rate", pct(r.terminal_rate)), num("p99", r.p99 == json.null and "–" or r.p99), '</tr>\n')
  end
  w('</tbody></table>\n')
  if model.routes_total > #model.data.routes then
    w('<div class="meta">', #model.data.routes, ' of ', model.routes_total, ' routes shown</div>\n')
  end

  w('<footer>retryfreeze report: numbers from the same code as <code>retryfreeze stats --json</code>; charts by ',
    'Vega-Lite and Vega (BSD-3-Clause, University of Washington Interactive Data Lab), inlined. ',
    '<span id="rf-drawn">charts not drawn (scripts disabled?)</span>\n',
    '<pre id="rf-render-status" hidden data-drawn="0"></pre></footer>\n</main>\n')
  -- "<" escaped inside the JSON, so no data can end the script element.
  -- DEL and C1, which the encoder keeps as they are, as \u00XX escapes of the same characters (util.printable's
  -- json mode): the data stays exact, and no control byte reaches a terminal.
  w('<script type="application/json" id="rf-data">',
    (util.printable(json.encode(model.data), "json"):gsub("<", "\\u003c")), '</script>\n')
  for _, lib in ipairs(libs) do w('<script>', lib, '</script>\n') end
  w('<script>', SCRIPT, '</script>\n</body>\n</html>\n')
  return table.concat(out)
end

--- Builds and writes the report of ledgers to a file, whole or not at all (retryfreeze.output: a temporary file
--- beside the target renamed over it; through a symlink to its target; "-" for standard output). A path that is
--- a directory, FIFO or device is refused before any ledger is read.
-- @param out_path string; paths, opts: as for M.build
-- @return model, or nil, message (naming the ledger or the output path)
function M.write(out_path, paths, opts)
  local ok, cerr = output.check({ { out_path, "replace", "report" } })
  if not ok then return nil, cerr end
  local model, err = M.build(paths, opts)
  if not model then return nil, err end
  local page, rerr = M.render(model)
  if not page then return nil, rerr end
  local written, werr = output.write(out_path, page, "report")
  if not written then return nil, werr end
  return model
end

return M
