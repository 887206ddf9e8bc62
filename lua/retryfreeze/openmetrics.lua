--- Ledger stats as metrics text for Prometheus (`retryfreeze stats --format openmetrics`): for node_exporter's
--- textfile collector or a Pushgateway. Every number comes from retryfreeze.ledger_stats (the same as
--- `stats --json`); this module only names and prints them.
---
--- Naming follows the Prometheus conventions (prometheus.io/docs/practices/naming): the prefix
--- `retryfreeze_`, counters end in `_total`, durations are in seconds (base units), ratios end in `_ratio`.
--- Every series carries a `route` label (the ledger's route; "(no route)" for requests no route matched), and
--- no series sums the routes, so `sum by (…)` over routes never counts a request twice.
---
--- Format: the OpenMetrics 1.0 text layout (`# HELP`, `# TYPE`, `# UNIT`, samples, `# EOF` last), with one
--- deliberate choice: a counter's `# HELP`/`# TYPE` lines name the sample (`retryfreeze_requests_total`),
--- as the Prometheus text format 0.0.4 and `promtool check metrics` require, rather than the bare family name
--- of the OpenMetrics spec. Prometheus' scrape parsers read both; node_exporter's textfile collector reads the
--- 0.0.4 form and takes `# EOF` and `# UNIT` for comments.
local math = require("retryfreeze.compat").math
local ledger_stats = require "retryfreeze.ledger_stats"
local util = require "retryfreeze.util"

local M = {}

-- Label values: backslash, double quote and line feed escaped (OpenMetrics §"Escaping"), after the other
-- control characters are written out as \u00XX (util.printable): OpenMetrics has no escape for them, and the
-- text is printed to terminals too.
local function label_value(v)
  return (util.printable(v, "text"):gsub("[\\\"\n]", { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }))
end

-- {k1 = v1, …} in the given key order → `{k1="v1",…}`.
local function labels(keys, values)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = k .. '="' .. label_value(values[i]) .. '"' end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- A number as OpenMetrics wants it: integers as such, floats with enough digits to round-trip.
local function number(x)
  if math.type(x) == "integer" then return tostring(x) end
  if x ~= x then return "NaN" end
  if x == math.huge then return "+Inf" end
  if x == -math.huge then return "-Inf" end
  if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return string.format("%d", x) end
  local short = string.format("%.15g", x)
  return tonumber(short) == x and short or string.format("%.17g", x)
end

local sorted_keys = util.sorted_keys

-- The per-route counters and gauges: {name, type, help, field of the route's stats}.
local simple = {
  { "retryfreeze_requests_total", "counter", "Logical requests in the ledger (one record each).", "requests" },
  { "retryfreeze_successes_total", "counter", "Requests that ended ok.", "successes" },
  { "retryfreeze_attempts_total", "counter", "Attempts sent on the wire.", "attempts" },
  { "retryfreeze_retries_total", "counter", "Attempts after the first.", "retries" },
  { "retryfreeze_retried_successes_total", "counter", "Successes that needed more than one attempt.",
    "retried_successes" },
  { "retryfreeze_terminal_failures_total", "counter",
    "Requests stopped on a failure class the route does not retry (outcome terminal).", "terminal" },
  { "retryfreeze_hedges_total", "counter", "Hedges started (attempts beside others in flight: the lock's hedging).",
    "hedges" },
  { "retryfreeze_hedge_wins_total", "counter", "Requests a hedge won.", "hedge_wins" },
  { "retryfreeze_success_ratio", "gauge", "Successes / requests.", "success_rate" },
  { "retryfreeze_retried_success_ratio", "gauge", "Retried successes / successes.", "retried_success_ratio" },
  { "retryfreeze_terminal_ratio", "gauge", "Terminal failures / requests.", "terminal_rate" },
  { "retryfreeze_attempts_per_success_ratio", "gauge", "Attempts of successful requests / successes.",
    "attempts_per_success" },
  { "retryfreeze_retries_per_request_ratio", "gauge", "Retries / requests.", "retry_ratio" },
}

--- Renders ledger stats as metrics text.
-- @param s table: from ledger_stats.stats (the whole-input table, with by_route)
-- @return string: the exposition, ending in "# EOF\n"
function M.render(s)
  local out = {}
  local function line(...) out[#out + 1] = table.concat({ ... }) end
  local routes = sorted_keys(s.by_route)
  local function family(name, kind, help, unit)
    line("# HELP ", name, " ", help)
    line("# TYPE ", name, " ", kind)
    if unit then line("# UNIT ", name, " ", unit) end
  end
  for _, m in ipairs(simple) do
    family(m[1], m[2], m[3])
    for _, route in ipairs(routes) do
      line(m[1], labels({ "route" }, { ledger_stats.route_label(route) }), " ", number(s.by_route[route][m[4]]))
    end
  end

  -- A counter by route and what one of the route's count tables is keyed by (label_values(key) → its labels).
  local function counter_by(name, help, field, label_names, label_values)
    family(name, "counter", help)
    for _, route in ipairs(routes) do
      local counts = s.by_route[route][field]
      for _, k in ipairs(sorted_keys(counts)) do
        line(name, labels(label_names, { ledger_stats.route_label(route), label_values(k) }), " ", number(counts[k]))
      end
    end
  end
  local function itself(k) return k end
  counter_by("retryfreeze_outcomes_total", "Requests by final outcome and verdict reason.", "by_reason",
    { "route", "outcome", "reason" }, function(k) return k:match("^(%S+) (.*)$") end)
  counter_by("retryfreeze_retried_attempts_total", "Attempts that were retried, by failure class.",
    "retried_classes", { "route", "class" }, itself)
  counter_by("retryfreeze_retry_after_total",
    "Attempts whose response carried Retry-After, by what became of it (honored, ignored-invalid, ...).",
    "retry_after", { "route", "use" }, itself)

  local h = "retryfreeze_request_duration_seconds"
  family(h, "histogram", "Duration of whole requests (all attempts and backoff), from the ledger's elapsed_ms.",
    "seconds")
  for _, route in ipairs(routes) do
    local r, label = s.by_route[route], ledger_stats.route_label(route)
    for _, b in ipairs(r.elapsed_buckets) do
      line(h, "_bucket", labels({ "route", "le" }, { label, number(b.le_ms / 1000) }), " ", number(b.count))
    end
    line(h, "_bucket", labels({ "route", "le" }, { label, "+Inf" }), " ", number(r.requests))
    line(h, "_sum", labels({ "route" }, { label }), " ", number(r.elapsed_ms_sum / 1000))
    line(h, "_count", labels({ "route" }, { label }), " ", number(r.requests))
  end
  line("# EOF")
  out[#out + 1] = ""
  return table.concat(out, "\n")
end

return M
