--- `retryfreeze report LEDGER… -o FILE [--lock LOCK] [--log FILE] [--title T] [--skip-corrupt]`: writes one
--- self-contained HTML page (retryfreeze.report) with the gate verdict, the summary line, charts over time and
--- by route, and the worst routes by retried-success ratio.
local cli_args = require "retryfreeze.cli.args"
local output = require "retryfreeze.output"
local report = require "retryfreeze.report"

return cli_args.command {
  name = "report",
  summary = "write an HTML report of ledgers: gate verdict, charts over time and by route, worst routes",
  args = "LEDGER...",
  description = "  Writes one HTML page that opens offline (the charts are inlined). Ledgers are streamed twice (stats,\n"
    .. "  then time buckets sized to at most 60). The file is replaced whole (a temporary file renamed over it;\n"
    .. "  through a symlink); - writes the page to standard output. Exit 0 when written (whatever the verdict),\n"
    .. "  2 on bad usage, an invalid lock, an unreadable ledger, a corrupt line, or an output that is a\n"
    .. "  directory, FIFO or device or cannot be written.",
  options = {
    { "--output", "string FILE", "the HTML file to write (replaced whole; - for standard output)", short = "-o", required = true,
      check = function(v) if v == "" then return "-o FILE is required (an empty path names no file)" end end },
    { "--lock", "string LOCK", "judge with this lock's gate thresholds (as `gate --lock`) and show its digest and "
      .. "sign-off" },
    { "--log", "string FILE", "the pairing log whose sign-off to show (default pairing-log.jsonl beside the lock)",
      needs = "--lock" },
    { "--title", "string TITLE", "the page's title (default \"retryfreeze report\")" },
    { "--skip-corrupt", "flag", "count and skip corrupt ledger lines instead of stopping" },
  },

  --- Runs `retryfreeze report` (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local model, why = report.write(opts.output, pos, { lock = opts.lock, log = opts.log, title = opts.title,
      skip_corrupt = opts.skip_corrupt })
    if not model then ctx.fail_ledgers(why) end
    local text = output.text_stream(ctx.out, ctx.err, opts.output) -- the page alone on standard output with -o -
    text:printf("report: %s (%d requests, gate %s)\n", opts.output, model.stats.requests, model.verdict.state)
    text:printf("%s\n", model.summary)
    return 0
  end,
}
