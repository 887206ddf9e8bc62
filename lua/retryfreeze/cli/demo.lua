--- `retryfreeze demo`: the main job, end to end on this machine. Starts the fault-injecting upstream on a
--- free loopback port, runs examples/jobs_flow.lua through the real client under the pinned locks, writes
--- demo-ledger.jsonl and prints what the ledger and the upstream say. Exit 1 if any keyed request executed
--- twice or the ledger lost a request.
local cli_args = require "retryfreeze.cli.args"
local compat = require "retryfreeze.compat"
local flow = require "retryfreeze.flow"
local output = require "retryfreeze.output"
local stats = require "retryfreeze.ledger_stats"
local upstream = require "retryfreeze.upstream"

local DEFAULT_FAULTS = "503=0.06,504=0.05,429=0.04,500=0.02,timeout=0.01,reset=0.02,empty=0.01,ra=1"

local M = {
  summary = "run the demo: real HTTP flows under the pinned locks against a fault-injecting upstream",
  usage = "retryfreeze demo [--requests N] [--seed S] [--faults SPEC] [--ledger FILE] [--examples DIR]\n"
    .. "                 [--report FILE]\n\n"
    .. "  Defaults: 300 requests, seed 7, faults " .. DEFAULT_FAULTS .. ",\n"
    .. "  ledger demo-ledger.jsonl, examples from the project's examples/ folder. The run appends to the\n"
    .. "  ledger (never truncates it) and reports only the lines it appended; a ledger whose last line is\n"
    .. "  torn is refused. The same seed gives the same counts.\n"
    .. "  --report FILE also writes the HTML report of the lines this run appended (as `retryfreeze report`);\n"
    .. "  with --report - the page goes to standard output and the run's text to standard error.\n"
    .. "  A rock has no retryfreeze-serve: set RF_SERVE to one (e.g. build/bin/retryfreeze-serve of a CMake build),\n"
    .. "  and run from a checkout or pass --examples DIR (its examples/ folder).\n"
    .. "  Exit 0, or 1 when a keyed request executed twice or a request is missing from the ledger,\n"
    .. "  2 bad usage, missing examples, no retryfreeze-serve to start, a ledger it cannot append to, or a\n"
    .. "  ledger or report path that is a directory, FIFO or device.",
}

local spec = { ["--requests"] = "integer N", ["--seed"] = "integer S", ["--faults"] = "string SPEC",
  ["--ledger"] = "string FILE", ["--examples"] = "string DIR", ["--report"] = "string FILE" }
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help.
M.option_help = {
  ["--requests"] = "logical requests to send (default 300)",
  ["--seed"] = "the seed of the upstream's faults and of the flow (default 7)",
  ["--faults"] =
    "the upstream's random faults, as for serve (default: a mix of 503, 504, 429, 500, timeouts, resets)",
  ["--ledger"] = "the ledger to append to (default demo-ledger.jsonl)",
  ["--examples"] = "the folder holding jobs_flow.lua and the example locks (default: the project's examples/)",
  ["--report"] = "also write the HTML report of this run's lines to this file (- for standard output)",
}

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

function M.run(args, out, err, bindir)
  local opts, pos = cli_args.parse(args, spec)
  if not opts or #pos > 0 then
    err:write("retryfreeze demo: ", pos and ("unexpected argument " .. pos[1]) or "", "\nusage: ", M.usage, "\n")
    return 2
  end
  if _VERSION ~= "Lua 5.4" then -- the command runs on every Lua a rock is built for; the demo's flow does not
    err:write("retryfreeze demo: the demo runs examples/jobs_flow.lua, a Lua 5.4 script (<close>, <const>), ",
      "and this command runs on ", _VERSION, ": use a Lua 5.4 build (luarocks --lua-version=5.4 make)\n")
    return 2
  end
  local requests, seed = opts.requests or 300, opts.seed or 7
  local ledger_path, faults = opts.ledger or "demo-ledger.jsonl", opts.faults or DEFAULT_FAULTS
  -- Everything the run needs is checked before anything is printed, appended or started. The upstream first:
  -- a rock user who fixed --examples would only then learn that the rock cannot run the demo at all.
  if not bindir and (os.getenv("RF_SERVE") or "") == "" then
    err:write("retryfreeze demo: ", ROCK_NO_SERVE, "\n")
    return 2
  end
  local _, serve_err = upstream.program(bindir)
  if serve_err then
    err:write("retryfreeze demo: ", serve_err, "\n")
    return 2
  end
  local dir, dir_err = examples_dir(opts.examples)
  if not dir then
    err:write("retryfreeze demo: ", dir_err, "\n")
    return 2
  end
  local outputs_ok, outputs_err = output.check({ { ledger_path, "append", "ledger" }, { opts.report, "replace", "report" } })
  if not outputs_ok then
    err:write("retryfreeze demo: ", outputs_err, "\n")
    return 2
  end
  out = output.text_stream(out, err, opts.report) -- the page alone on standard output with --report -
  local lines_before, lerr = stats.lines_before_append(ledger_path)
  if not lines_before then
    err:write("retryfreeze demo: ", lerr, "\n")
    return 2
  end
  local up, why = upstream.start{ bindir = bindir, faults = faults, seed = seed, stall_ms = 3000 }
  if not up then
    err:write("retryfreeze demo: ", why, "\n")
    return 1
  end
  out:write(string.format("retryfreeze demo: %d requests against the fault-injecting upstream at %s\n", requests, up.url))
  out:write(string.format("faults: %s (seed %d)\n", faults, seed))
  local ok, flow_err = flow.run(dir .. "/jobs_flow.lua", { up.url, ledger_path, tostring(requests), tostring(seed) })
  local server = ok and upstream.stats(up.url)
  up.stop()
  if not ok then
    err:write("retryfreeze demo: the flow failed: ", tostring(flow_err), "\n")
    return 1
  end
  local s = stats.summarize({ ledger_path }, { after_line = { [ledger_path] = lines_before } })
  local sent_attempts = server and server.requests or -1
  local dups = server and server.duplicate_executions or -1
  out:write(string.format("ledger: %s (%d requests, %d attempts%s)\n\n", ledger_path, s.requests, s.attempts,
    lines_before > 0 and string.format(", appended after line %d", lines_before) or ""))
  out:write(string.format("  %-24s %8d\n", "requests", s.requests))
  out:write(string.format("  %-24s %8d  (%.2f%%)\n", "successes", s.successes, 100 * stats.ratio(s.successes, s.requests)))
  out:write(string.format("  %-24s %8d  (%.2f%% of successes)\n", "retried successes", s.retried_successes,
    100 * stats.ratio(s.retried_successes, s.successes)))
  out:write(string.format("  %-24s %8.3f\n", "attempts per success", stats.ratio(s.success_attempts, s.successes)))
  out:write(string.format("  %-24s %8.3f\n", "attempts per request", stats.ratio(s.attempts, s.requests)))
  out:write(string.format("  %-24s %8d\n", "attempts the upstream saw", sent_attempts))
  out:write(string.format("  %-24s %8d\n\n", "duplicate executions", dups))
  out:write(string.format("  %-10s %-30s %6s\n", "outcome", "reason", "count"))
  local keys = {}
  for k in pairs(s.by_reason) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return s.by_reason[a] > s.by_reason[b] or (s.by_reason[a] == s.by_reason[b] and a < b) end)
  for _, k in ipairs(keys) do
    local outcome, reason = k:match("^(%S+) (%S+)$")
    out:write(string.format("  %-10s %-30s %6d\n", outcome, reason, s.by_reason[k]))
  end
  local failed = false
  if dups ~= 0 then
    err:write("retryfreeze demo: FAIL: ", dups, " duplicate executions of keyed requests\n")
    failed = true
  end
  if s.requests ~= requests then
    err:write(string.format("retryfreeze demo: FAIL: the ledger holds %d of %d requests\n", s.requests, requests))
    failed = true
  end
  if sent_attempts ~= s.attempts then
    err:write(string.format("retryfreeze demo: FAIL: the ledger counts %d attempts, the upstream saw %d\n",
      s.attempts, sent_attempts))
    failed = true
  end
  if opts.report then
    local written, rerr = require("retryfreeze.report").write(opts.report, { ledger_path },
      { title = "retryfreeze demo", after_line = { [ledger_path] = lines_before } })
    if not written then
      err:write("retryfreeze demo: --report: ", rerr, "\n")
      return 2
    end
    out:write("\nreport: ", opts.report, "\n")
  end
  return failed and 1 or 0
end

return M
