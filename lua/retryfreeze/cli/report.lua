--- `retryfreeze report LEDGER… -o FILE [--lock LOCK] [--log FILE] [--title T] [--skip-corrupt] [--replay]`: writes
--- one self-contained HTML page (retryfreeze.report) with the gate verdict, the summary line, charts over time and
--- by route, and the worst routes by retried-success ratio; with --replay also recorded vs predicted under --lock.
local cli_args = require "retryfreeze.cli.args"
local output = require "retryfreeze.output"
local report = require "retryfreeze.report"

return cli_args.command {
  name = "report",
  summary = "write an HTML report of ledgers: gate verdict, charts over time and by route, worst routes",
  args = "LEDGER...",
  description = "  Writes one HTML page that opens offline (the charts are inlined). Ledgers are streamed twice (stats,\n"
    .. "  then time buckets sized to at most 60). The file is replaced whole (a temporary file renamed over it;\n"
    .. "  through a symlink); - writes the page to standard output. With --replay the ledgers are also replayed\n"
    .. "  under --lock (retryfreeze replay): the page adds recorded vs predicted by route, with the replay's notes,\n"
    .. "  and the verdict judges the prediction. Exit 0 when written (whatever the verdict),\n"
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
    { "--replay", "flag", "add the A vs B view: the ledgers replayed under --lock (the candidate, as `retryfreeze "
      .. "replay` predicts it), recorded vs predicted by route, and judge the prediction", needs = "--lock" },
    { "--seed", "integer S", "the replay's seed (its jitter and draws)", default = 0, range = { 0, math.huge },
      needs = "--replay" },
  },

  --- Runs `retryfreeze report` (see retryfreeze.cli for ctx).
  run = function(ctx, opts, pos)
    local model, why = report.write(opts.output, pos, { lock = opts.lock, log = opts.log, title = opts.title,
      skip_corrupt = opts.skip_corrupt, replay = opts.replay and { seed = opts.seed } or nil })
    if not model then ctx.fail_ledgers(why) end
    local text = output.text_stream(ctx.out, ctx.err, opts.output) -- the page alone on standard output with -o -
    text:printf("report: %s (%d requests, %sgate %s)\n", opts.output, model.stats.requests,
      opts.replay and "predicted " or "", model.verdict.state)
    text:printf("%s%s\n", opts.replay and "predicted: " or "", model.summary)
    return 0
  end,
}
