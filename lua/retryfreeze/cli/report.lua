--- `retryfreeze report LEDGER… -o FILE [--lock LOCK] [--log FILE] [--title T] [--skip-corrupt]`: writes one
--- self-contained HTML page (retryfreeze.report) with the gate verdict, the summary line, charts over time and
--- by route, and the worst routes by retried-success ratio.
local cli_args = require "retryfreeze.cli.args"
local output = require "retryfreeze.output"
local report = require "retryfreeze.report"

local M = {
  summary = "write an HTML report of ledgers: gate verdict, charts over time and by route, worst routes",
  usage = "retryfreeze report LEDGER… -o FILE [--lock LOCK] [--log FILE] [--title T] [--skip-corrupt]\n\n"
    .. "  -o, --output FILE  the HTML file to write (replaced whole, through a symlink; - for standard output;\n"
    .. "                     it opens offline: the charts are inlined)\n"
    .. "  --lock LOCK        judge with the lock's gate thresholds (as `gate --lock`) and show its digest\n"
    .. "  --log FILE         the pairing log whose sign-off of LOCK to show (default pairing-log.jsonl beside LOCK)\n"
    .. "  --title T          the page's title (default \"retryfreeze report\")\n"
    .. "  --skip-corrupt     count and skip corrupt ledger lines (default: stop at the first)\n"
    .. "  Ledgers are streamed twice (stats, then time buckets sized to at most 60). Exit 0 when written\n"
    .. "  (whatever the verdict), 2 on bad usage, an invalid lock, an unreadable ledger, a corrupt line, or an\n"
    .. "  output that is a directory, FIFO or device or cannot be written.",
}

local spec = { ["--output"] = "string FILE", ["--lock"] = "string LOCK", ["--log"] = "string FILE", ["--title"] = "string TITLE",
  ["--skip-corrupt"] = "flag" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--output"] = "the HTML file to write (required; also -o; - for standard output)",
  ["--lock"] = "judge with this lock's gate thresholds and show its digest and sign-off",
  ["--log"] = "the pairing log whose sign-off to show (needs --lock; default beside the lock)",
  ["--title"] = "the page's title (default \"retryfreeze report\")",
  ["--skip-corrupt"] = "count and skip corrupt ledger lines instead of stopping",
}

--- Runs `retryfreeze report`.
-- @param args array of strings: the arguments after "report"; out, err: file handles
-- @return integer exit code (see the usage text)
function M.run(args, out, err)
  local rest, after_dashes = {}, false
  for i, a in ipairs(args) do -- -o, the usual short form of --output (not after "--", where a file may be "-o")
    rest[i] = (a == "-o" and not after_dashes) and "--output" or a
    after_dashes = after_dashes or a == "--"
  end
  local opts, pos = cli_args.parse(rest, spec)
  local function usage_error(msg)
    err:write("retryfreeze report: ", msg, "\nusage: ", M.usage, "\n")
    return 2
  end
  if not opts then return usage_error(pos) end
  if #pos == 0 then return usage_error("expected at least one LEDGER") end
  if not opts.output or opts.output == "" then return usage_error("-o FILE is required (the HTML file to write)") end
  if opts.log and not opts.lock then return usage_error("--log needs --lock (the lock whose sign-off to show)") end
  local model, why = report.write(opts.output, pos, { lock = opts.lock, log = opts.log, title = opts.title,
    skip_corrupt = opts.skip_corrupt })
  if not model then
    err:write("retryfreeze report: ", why, "\n")
    if why:find("corrupt ledger line", 1, true) then
      err:write("retryfreeze report: --skip-corrupt counts and skips corrupt lines\n")
    end
    return 2
  end
  local text = output.text_stream(out, err, opts.output) -- the page alone on standard output with -o -
  text:write(string.format("report: %s (%d requests, gate %s)\n", opts.output, model.stats.requests,
    model.verdict.state))
  text:write(model.summary, "\n")
  return 0
end

return M
