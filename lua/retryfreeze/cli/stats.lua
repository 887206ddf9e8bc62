--- `retryfreeze stats LEDGER… [--json] [--skip-corrupt]`: requests, successes, terminal failure rate,
--- retried-success ratio, attempts per success and per request, elapsed_ms percentiles, outcomes and reasons,
--- by route — streamed in constant memory (retryfreeze.ledger_stats).
local cli_args = require "retryfreeze.cli.args"
local json = require "retryfreeze.json"
local ledger_stats = require "retryfreeze.ledger_stats"
local openmetrics = require "retryfreeze.openmetrics"
local output = require "retryfreeze.output"

local M = {
  summary = "summarize ledgers: success, retried successes, attempts, latency, reasons, by route",
  usage = "retryfreeze stats LEDGER… [--json | --format text|json|openmetrics] [--skip-corrupt] [--by route|host]\n"
    .. "                 [--output FILE]\n\n"
    .. "  Streams the ledgers (rotated files too: a quoted glob such as 'ledger.jsonl*' is expanded) and prints\n"
    .. "  requests, successes, terminal failure rate, retried-success ratio, attempts per success and per\n"
    .. "  request, p50/p95/p99 of elapsed_ms, outcomes and reasons with counts, and the same by route.\n"
    .. "  --json          print everything as one JSON object instead (the same as --format json)\n"
    .. "  --format F      text (the default), json, or openmetrics: metrics text for Prometheus (counters,\n"
    .. "                  ratio gauges and a request-duration histogram in seconds, by route; ends in # EOF)\n"
    .. "  --skip-corrupt  count and skip corrupt lines (default: stop at the first, naming file and line)\n"
    .. "  --by host       group by the host that wrote each line (ledgers from a fleet) instead of by route\n"
    .. "  --output FILE   write to FILE instead of standard output, replaced whole (a temporary file renamed\n"
    .. "                  over it; through a symlink): what node_exporter's textfile collector needs\n"
    .. "  A torn line (a write cut short) is reported and skipped, never counted as a request.\n"
    .. "  Exit 0, or 2 on bad usage, an unreadable ledger, a corrupt line, or an output that is a directory,\n"
    .. "  FIFO or device or cannot be written.",
}

local spec = { ["--json"] = "flag", ["--format"] = "string FORMAT", ["--skip-corrupt"] = "flag",
  ["--by"] = "string route|host", ["--output"] = "string FILE" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--json"] = "print everything as one JSON object (the same as --format json)",
  ["--format"] = "text (default), json, or openmetrics (for Prometheus)",
  ["--skip-corrupt"] = "count and skip corrupt lines instead of stopping at the first",
  ["--by"] = "group by route (default) or by host (the ledger's host field)",
  ["--output"] = "write to this file (replaced whole, atomically) instead of standard output",
}

local formats = { text = true, json = true, openmetrics = true }

--- Key order of the JSON object (other keys follow, sorted).
M.json_order = { "files", "lines", "torn", "torn_lines", "corrupt", "corrupt_lines", "requests", "successes",
  "failures", "terminal", "retried_successes", "attempts", "success_attempts", "retries", "success_rate",
  "terminal_rate", "retried_success_ratio", "attempts_per_success", "attempts_per_request", "retry_ratio",
  "ts_min_ms", "ts_max_ms", "elapsed_ms", "p50", "p95", "p99", "min", "max", "mean", "elapsed_ms_sum", "elapsed_buckets",
  "le_ms", "count", "by_attempts", "by_outcome", "by_reason", "reasons", "retried_classes", "retry_after",
  "by_route", "by_host" }

--- Runs `retryfreeze stats`.
-- @param args array of strings: the arguments after "stats"
-- @param out, err file handles (io.stdout, io.stderr in the CLI)
-- @return integer exit code (see the usage text)
function M.run(args, out, err)
  local opts, pos = cli_args.parse(args, spec)
  if not opts or #pos == 0 then
    err:write("retryfreeze stats: ", opts and "expected at least one LEDGER" or pos, "\nusage: ", M.usage, "\n")
    return 2
  end
  local format = opts.format or (opts.json and "json" or "text")
  if not formats[format] or (opts.json and format ~= "json") then
    err:write("retryfreeze stats: ", formats[format] and "--json contradicts --format " .. format
      or "--format must be text, json or openmetrics, got '" .. format .. "'", "\nusage: ", M.usage, "\n")
    return 2
  end
  if opts.by ~= nil and opts.by ~= "route" and opts.by ~= "host" then
    err:write("retryfreeze stats: --by must be route or host, got '", opts.by, "'\n")
    return 2
  end
  if opts.by == "host" and format == "openmetrics" then -- metrics carry a route label; a host is a scrape target
    err:write("retryfreeze stats: --by host goes with --format text or json (OpenMetrics are labelled by route)\n")
    return 2
  end
  local outputs_ok, outputs_err = output.check({ { opts.output, "replace", "stats output" } })
  if not outputs_ok then
    err:write("retryfreeze stats: ", outputs_err, "\n")
    return 2
  end
  local s, why = ledger_stats.stats(pos, { skip_corrupt = opts.skip_corrupt, by = opts.by })
  if not s then
    err:write("retryfreeze stats: ", why, "\n")
    if why:find("corrupt ledger line", 1, true) then
      err:write("retryfreeze stats: --skip-corrupt counts and skips corrupt lines\n")
    end
    return 2
  end
  local text
  if format == "json" then
    text = json.encode(s, M.json_order) .. "\n"
  elseif format == "openmetrics" then
    text = openmetrics.render(s)
  else
    text = ledger_stats.render(s)
  end
  if not opts.output then
    out:write(text)
    return 0
  end
  local written, werr = output.write(opts.output, text, "stats output")
  if not written then
    err:write("retryfreeze stats: ", werr, "\n")
    return 2
  end
  return 0
end

return M
