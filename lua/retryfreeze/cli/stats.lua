--- `retryfreeze stats LEDGER… [--json] [--skip-corrupt]`: requests, successes, terminal failure rate,
--- retried-success ratio, attempts per success and per request, elapsed_ms percentiles, outcomes and reasons,
--- by route — streamed in constant memory (retryfreeze.ledger_stats).
local cli_args = require "retryfreeze.cli.args"
local ledger_stats = require "retryfreeze.ledger_stats"
local openmetrics = require "retryfreeze.openmetrics"
local output = require "retryfreeze.output"

local formats = { "text", "json", "openmetrics" }

local M = cli_args.command {
  name = "stats",
  summary = "summarize ledgers: success, retried successes, attempts, latency, reasons, by route",
  args = "LEDGER...",
  description = "  Streams the ledgers (rotated files too: a quoted glob such as 'ledger.jsonl*' is expanded) and prints\n"
    .. "  requests, successes, terminal failure rate, retried-success ratio, attempts per success and per\n"
    .. "  request, p50/p95/p99 of elapsed_ms, outcomes and reasons with counts, and the same by route.\n"
    .. "  OpenMetrics is metrics text for Prometheus (counters, ratio gauges and a request-duration histogram in\n"
    .. "  seconds, by route; ends in # EOF). A torn line (a write cut short) is reported and skipped, never\n"
    .. "  counted as a request. --output FILE replaces FILE whole (a temporary file renamed over it; through a\n"
    .. "  symlink): what node_exporter's textfile collector needs. Exit 0, or 2 on bad usage, an unreadable\n"
    .. "  ledger, a corrupt line, or an output that is a directory, FIFO or device or cannot be written.",
  options = {
    { "--json", "flag", "print everything as one JSON object (the same as --format json)" },
    { "--format", "string FORMAT", "text (default), json, or openmetrics (for Prometheus)", choices = formats },
    { "--skip-corrupt", "flag", "count and skip corrupt lines instead of stopping at the first" },
    { "--by", "string route|host", "group by route (default) or by host (the ledger's host field)",
      choices = { "route", "host" } },
    { "--output", "string FILE", "write to this file (replaced whole, atomically) instead of standard output" },
  },
}

--- Key order of the JSON object (other keys follow, sorted).
M.json_order = { "files", "lines", "torn", "torn_lines", "corrupt", "corrupt_lines", "requests", "successes",
  "failures", "terminal", "retried_successes", "attempts", "success_attempts", "retries", "success_rate",
  "terminal_rate", "retried_success_ratio", "attempts_per_success", "attempts_per_request", "retry_ratio",
  "ts_min_ms", "ts_max_ms", "elapsed_ms", "p50", "p95", "p99", "min", "max", "mean", "elapsed_ms_sum", "elapsed_buckets",
  "le_ms", "count", "by_attempts", "by_outcome", "by_reason", "reasons", "retried_classes", "retry_after",
  "by_route", "by_host" }

--- Runs `retryfreeze stats` (see retryfreeze.cli for ctx).
function M.run(ctx, opts, pos)
  local format = opts.format or (opts.json and "json" or "text")
  if opts.json and format ~= "json" then ctx.usage_error("--json contradicts --format " .. format) end
  if opts.by == "host" and format == "openmetrics" then -- metrics carry a route label; a host is a scrape target
    ctx.usage_error("--by host goes with --format text or json (OpenMetrics are labelled by route)")
  end
  local outputs_ok, outputs_err = output.check({ { opts.output, "replace", "stats output" } })
  if not outputs_ok then ctx.fail(outputs_err) end
  local s, why = ledger_stats.stats(pos, { skip_corrupt = opts.skip_corrupt, by = opts.by })
  if not s then ctx.fail_ledgers(why) end
  -- With --output, the same printable text goes to the file, replaced whole.
  local parts = {}
  local out = opts.output and require("retryfreeze.cli").writer({ write = function(_, ...)
    for i = 1, select("#", ...) do parts[#parts + 1] = select(i, ...) end
  end }) or ctx.out
  if format == "json" then
    out:json(s, M.json_order)
  elseif format == "openmetrics" then
    out:write(openmetrics.render(s))
  else
    out:write(ledger_stats.render(s))
  end
  if opts.output then
    local written, werr = output.write(opts.output, table.concat(parts), "stats output")
    if not written then ctx.fail(werr) end
  end
  return 0
end

return M
