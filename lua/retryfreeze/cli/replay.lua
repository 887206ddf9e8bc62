--- `retryfreeze replay LEDGER… --lock CANDIDATE [--json] [--by route|host] [--seed S] [--report FILE]`: the requests
--- the ledgers recorded, decided again under a candidate lock; the recorded and the predicted figures side by side,
--- with the names `stats --json` gives them (retryfreeze.replay); --report also writes them as an HTML page
--- (retryfreeze.report's A vs B view).
local cli_args = require "retryfreeze.cli.args"
local cli_stats = require "retryfreeze.cli.stats"
local output = require "retryfreeze.output"
local replay = require "retryfreeze.replay"

local M = cli_args.command {
  name = "replay",
  summary = "predict a candidate lock's figures from recorded ledgers: recorded vs predicted, by route",
  args = "LEDGER...",
  description = "  Each recorded request is decided again, try by try, under the candidate through the engine's own\n"
    .. "  calls, with the facts its line recorded. Where the candidate stops at or before the record's last try the\n"
    .. "  prediction is exact; tries the record never made are drawn from the tries it did make on the same\n"
    .. "  route at the same attempt after the same failure class (a request's next try as the record's requests\n"
    .. "  that failed as often fared; the upstream unchanged by the extra load), with an interval, and a class\n"
    .. "  with too few samples is named. An attempt the record's requests did not reach often enough is drawn\n"
    .. "  as the deepest they did, said so, and its interval spans those tries failing and succeeding. Notes\n"
    .. "  say what could not be predicted (mixed locks, no-route requests, seed-harness and older lines).\n"
    .. "  --report writes the same as an HTML page, written whole or not at all. Exit 0, or 2 on bad usage, an\n"
    .. "  unreadable lock or ledger, a corrupt line, or a report path that is a directory, FIFO or device or\n"
    .. "  cannot be written.",
  options = {
    { "--lock", "string CANDIDATE", "the candidate lock to replay the ledgers under", required = true },
    { "--json", "flag", "print one JSON object: recorded, predicted (with the extra load, throttles and deadline "
      .. "cuts), interval, gaps, beyond, locks, notes" },
    { "--by", "string route|host", "group by route (default) or by host (the ledger's host field)",
      choices = { "route", "host" } },
    { "--seed", "integer S", "the seed of the candidate's jitter and of the model's draws: the same seed, the same "
      .. "prediction", default = 0, range = { 0, math.huge } },
    { "--min-samples", "integer N", "fewer recorded tries than this after a failure class at an attempt on a route "
      .. "is too few samples to model it (default 30)", range = { 1, 1000000 } },
    { "--skip-corrupt", "flag", "count and skip corrupt lines instead of stopping at the first" },
    { "--report", "string FILE", "also write the HTML page of recorded vs predicted by route (as `retryfreeze report "
      .. "--replay`; - for standard output, the text then on standard error)",
      check = function(v) if v == "" then return "--report FILE names no file (an empty path)" end end },
  },
}

--- Key order of the JSON object (other keys follow, sorted): the head, then stats' order inside each side.
M.json_order = { "candidate", "files", "ledgers", "path", "lines", "torn", "torn_lines", "corrupt", "corrupt_lines", "locks", "notes",
  "recorded", "predicted", "upstream_attempts", "extra_attempts", "duration_ms", "upstream_attempts_per_second",
  "extra_attempts_per_second", "throttled", "deadline_cut", "no_route", "exact", "modelled", "unmodelled", "harness",
  "interval", "gaps", "beyond", "info" }
for _, k in ipairs(cli_stats.json_order) do M.json_order[#M.json_order + 1] = k end

--- Runs `retryfreeze replay` (see retryfreeze.cli for ctx).
function M.run(ctx, opts, pos)
  local policy = ctx.load_lock(opts.lock)
  local report_ok, report_err = output.check({ { opts.report, "replace", "report" } })
  if not report_ok then ctx.fail(report_err) end
  local out = output.text_stream(ctx.out, ctx.err, opts.report) -- the page alone on standard output with --report -
  local r, why = replay.replay(pos, policy, { seed = opts.seed, by = opts.by, skip_corrupt = opts.skip_corrupt,
    min_samples = opts.min_samples })
  if not r then ctx.fail_ledgers(why) end
  if opts.report then
    local written, rerr = require("retryfreeze.report").write(opts.report, r.files, { lock = opts.lock,
      skip_corrupt = opts.skip_corrupt, replay = { result = r, by = opts.by } })
    if not written then ctx.fail("--report: " .. rerr) end
  end
  if opts.json then
    out:json(r, M.json_order)
  else
    out:write(replay.render(r, opts.by == "host" and "by_host" or "by_route"))
    if opts.report then out:printf("report: %s\n", opts.report) end
  end
  return 0
end

return M
