--- `retryfreeze demo`: the main job, end to end on this machine. Starts the fault-injecting upstream on a
--- free loopback port, runs examples/jobs_flow.lua through the real client under the pinned locks, writes
--- demo-ledger.jsonl and prints what the ledger and the upstream say. Exit 1 if any keyed request executed
--- twice or the ledger lost a request.
local cli_args = require "retryfreeze.cli.args"
local compat = require "retryfreeze.compat"
local math = compat.math
local flow = require "retryfreeze.flow"
local output = require "retryfreeze.output"
local progress = require "retryfreeze.cli.progress"
local stats = require "retryfreeze.ledger_stats"
local upstream = require "retryfreeze.upstream"
local util = require "retryfreeze.util"

local DEFAULT_FAULTS = "503=0.06,504=0.05,429=0.04,500=0.02,timeout=0.01,reset=0.02,empty=0.01,ra=1"

-- A LuaRocks install (no binary directory) without RF_SERVE: the rock builds only the Lua module, not the C
-- upstream, so the demo runs from a CMake build (or borrows its retryfreeze-serve).
local ROCK_NO_SERVE = "the demo needs retryfreeze-serve, a C program a LuaRocks install does not build: run "
  .. "build/bin/retryfreeze demo from a CMake build of the checkout, or set RF_SERVE=<checkout>/build/bin/"
  .. "retryfreeze-serve (and, outside the checkout, pass --examples <checkout>/examples)"

-- What the demo runs from the examples folder: the flow and the two locks it loads.
local EXAMPLES = { "jobs_flow.lua", "retry-budget.lock.json", "service.lock.json" }

local function missing_examples(dir)
  local missing = {}
  for _, name in ipairs(EXAMPLES) do
    local f = io.open(dir .. "/" .. name)
    if f then f:close() else missing[#missing + 1] = name end
  end
  return missing
end

--- The examples folder: --examples, else beside the source tree or the install tree of the Lua library, else
--- ./examples (a checkout's root).
-- @return dir; or nil, a message naming what is missing and --examples
local function examples_dir(opt)
  if opt then
    local missing = missing_examples(opt)
    if #missing == 0 then return opt end
    return nil, string.format("%s lacks %s: --examples DIR names the folder that holds them (examples/ of a "
      .. "retryfreeze checkout)", opt, table.concat(missing, ", "))
  end
  local src = compat.searchpath("retryfreeze", package.path) or ""
  for _, candidate in ipairs({ (src:gsub("lua/retryfreeze/init%.lua$", "examples")), "examples",
                               (src:gsub("lua/5%.%d/retryfreeze/init%.lua$", "retryfreeze/examples")) }) do
    if #missing_examples(candidate) == 0 then return candidate end
  end
  return nil, "cannot find the demo's examples (" .. table.concat(EXAMPLES, ", ") .. ") beside the library or in "
    .. "./examples: run it from a retryfreeze checkout, or pass --examples DIR (the checkout's examples/ folder)"
end

--- Runs the demo (see retryfreeze.cli for ctx).
local function run(ctx, opts)
  local out = ctx.out
  if _VERSION ~= "Lua 5.4" then -- the command runs on every Lua a rock is built for; the demo's flow does not
    ctx.fail("the demo runs examples/jobs_flow.lua, a Lua 5.4 script (<close>, <const>), and this command runs on "
      .. _VERSION .. ": use a Lua 5.4 build (luarocks --lua-version=5.4 make)")
  end
  local requests, seed, ledger_path, faults = opts.requests, opts.seed, opts.ledger, opts.faults
  -- Everything the run needs is checked before anything is printed, appended or started. The upstream first:
  -- a rock user who fixed --examples would only then learn that the rock cannot run the demo at all.
  if not ctx.bindir and (os.getenv("RF_SERVE") or "") == "" then ctx.fail(ROCK_NO_SERVE) end
  local _, serve_err = upstream.program(ctx.bindir)
  if serve_err then ctx.fail(serve_err) end
  local dir, dir_err = examples_dir(opts.examples)
  if not dir then ctx.fail(dir_err) end
  local outputs_ok, outputs_err = output.check({ { ledger_path, "append", "ledger" },
    { opts.report, "replace", "report" } })
  if not outputs_ok then ctx.fail(outputs_err) end
  out = output.text_stream(out, ctx.err, opts.report) -- the page alone on standard output with --report -
  local lines_before, lerr = stats.lines_before_append(ledger_path)
  if not lines_before then ctx.fail(lerr) end
  local up, why = upstream.start{ bindir = ctx.bindir, faults = faults, seed = seed, stall_ms = 3000 }
  if not up then ctx.fail(why, 1) end
  out:printf("retryfreeze demo: %d requests against the fault-injecting upstream at %s\n", requests, up.url)
  out:printf("faults: %s (seed %d)\n", faults, seed)
  local bar = progress.bar(ctx.err, requests) -- on a terminal only: 300 requests take some seconds
  local ok, flow_err = flow.run(dir .. "/jobs_flow.lua", { up.url, ledger_path, tostring(requests), tostring(seed) },
    { bar and function(done) bar.update(done) end or nil })
  if bar then bar.finish() end
  local server = ok and upstream.stats(up.url)
  up.stop()
  if not ok then ctx.fail("the flow failed: " .. tostring(flow_err), 1) end
  local s = stats.summarize({ ledger_path }, { after_line = { [ledger_path] = lines_before } })
  local sent_attempts = server and server.requests or -1
  local dups = server and server.duplicate_executions or -1
  out:printf("ledger: %s (%d requests, %d attempts%s)\n\n", ledger_path, s.requests, s.attempts,
    lines_before > 0 and string.format(", appended after line %d", lines_before) or "")
  out:printf("  %-24s %8d\n", "requests", s.requests)
  out:printf("  %-24s %8d  (%.2f%%)\n", "successes", s.successes, 100 * stats.ratio(s.successes, s.requests))
  out:printf("  %-24s %8d  (%.2f%% of successes)\n", "retried successes", s.retried_successes,
    100 * stats.ratio(s.retried_successes, s.successes))
  out:printf("  %-24s %8.3f\n", "attempts per success", stats.ratio(s.success_attempts, s.successes))
  out:printf("  %-24s %8.3f\n", "attempts per request", stats.ratio(s.attempts, s.requests))
  out:printf("  %-24s %8d\n", "attempts the upstream saw", sent_attempts)
  out:printf("  %-24s %8d\n\n", "duplicate executions", dups)
  out:printf("  %-10s %-30s %6s\n", "outcome", "reason", "count")
  for _, k in ipairs(util.keys_by_count(s.by_reason)) do
    local outcome, reason = k:match("^(%S+) (.*)$")
    out:printf("  %-10s %-30s %6d\n", outcome, reason, s.by_reason[k])
  end
  local failed = false
  if dups ~= 0 then
    ctx.note(string.format("FAIL: %d duplicate executions of keyed requests", dups))
    failed = true
  end
  if s.requests ~= requests then
    ctx.note(string.format("FAIL: the ledger holds %d of %d requests", s.requests, requests))
    failed = true
  end
  if sent_attempts ~= s.attempts then
    ctx.note(string.format("FAIL: the ledger counts %d attempts, the upstream saw %d", s.attempts, sent_attempts))
    failed = true
  end
  if opts.report then
    local written, rerr = require("retryfreeze.report").write(opts.report, { ledger_path },
      { title = "retryfreeze demo", after_line = { [ledger_path] = lines_before } })
    if not written then ctx.fail("--report: " .. rerr) end
    out:printf("\nreport: %s\n", opts.report)
  end
  return failed and 1 or 0
end

return cli_args.command {
  name = "demo",
  summary = "run the demo: real HTTP flows under the pinned locks against a fault-injecting upstream",
  description = "  The run appends to the ledger (never truncates it) and reports only the lines it appended; a ledger\n"
    .. "  whose last line is torn is refused. The same seed gives the same counts.\n"
    .. "  A rock has no retryfreeze-serve: set RF_SERVE to one (e.g. build/bin/retryfreeze-serve of a CMake build),\n"
    .. "  and run from a checkout or pass --examples DIR (its examples/ folder).\n"
    .. "  With --report - the page goes to standard output and the run's text to standard error.\n"
    .. "  Exit 0, or 1 when a keyed request executed twice or a request is missing from the ledger,\n"
    .. "  2 bad usage, missing examples, no retryfreeze-serve to start, a ledger it cannot append to, or a\n"
    .. "  ledger or report path that is a directory, FIFO or device.",
  options = {
    { "--requests", "integer N", "logical requests to send", default = 300, range = { 1, math.huge } },
    { "--seed", "integer S", "the seed of the upstream's faults and of the flow", default = 7,
      range = { 0, math.huge } },
    { "--faults", "string SPEC", "the upstream's random faults, as for serve", default = DEFAULT_FAULTS,
      check = function(spec, ctx) return upstream.faults_error(ctx.bindir, spec) end },
    { "--ledger", "string FILE", "the ledger to append to", default = "demo-ledger.jsonl" },
    { "--examples", "string DIR", "the folder holding jobs_flow.lua and the example locks (default: the "
      .. "project's examples/)" },
    { "--report", "string FILE", "also write the HTML report of this run's lines to this file (as `retryfreeze "
      .. "report`; - for standard output)" },
  },
  run = run,
}
