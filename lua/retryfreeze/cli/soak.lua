--- `retryfreeze soak LOCK [options]`: drives many concurrent flows through the real client (curl multi; the
--- default flow from C, scheduler.run_generated; a --script flow in Lua coroutines), writes a ledger, prints
--- its stats and applies gate thresholds. Exit 1 on a breach or a duplicate execution of a keyed request.
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local gate = require "retryfreeze.gate"
local output = require "retryfreeze.output"
local scheduler = require "retryfreeze.scheduler"
local stats = require "retryfreeze.ledger_stats"
local upstream = require "retryfreeze.upstream"

local M_DEFAULT_FAULTS = "503=0.1,429=0.02,reset=0.01"

local M = {
  summary = "drive concurrent flows through the real client; print ledger stats and apply the gate",
  usage = "retryfreeze soak LOCK [--requests N] [--concurrency C] [--faults SPEC] [--seed S] [--url URL]\n"
    .. "                 [--script FLOW.lua] [--ledger FILE] [--max-retry-ratio R] [--forbid-reason REASON]...\n"
    .. "                 [--max-retried-success R] [--max-attempts-per-success R] [--max-terminal-rate R]\n"
    .. "                 [--min-success-rate R] [--min-successes N] [--min-requests N] [--report FILE]\n\n"
    .. "  Defaults: 1000 requests, concurrency 16, seed 1, faults " .. M_DEFAULT_FAULTS .. "\n"
    .. "  (no Retry-After, so retries wait the lock's backoff), ledger soak-ledger.jsonl. The run appends to\n"
    .. "  the ledger (never truncates it) and summarizes only the lines it appended; a ledger whose last line\n"
    .. "  is torn is refused. Without --url the project's fault-injecting upstream runs on a free loopback\n"
    .. "  port and each request draws its faults by its own identity, so the same seed gives the same counts;\n"
    .. "  a --url must be loopback (127.0.0.0/8, localhost, [::1]). --script FLOW.lua returns\n"
    .. "  function(client, i) making requests with client:request. Thresholds not given on the command line\n"
    .. "  come from the lock's gate object. Exit 0 ok, 1 a threshold breached, no success at all, or a\n"
    .. "  duplicate execution, 2 bad usage or a ledger or report path that is a directory, FIFO or device.\n"
    .. "  --report FILE also writes the HTML report of this run's ledger lines (as `retryfreeze report`, judged\n"
    .. "  with the same thresholds); with --report - the page goes to standard output and the run's text to\n"
    .. "  standard error.",
}

local spec = {
  ["--requests"] = "integer N", ["--concurrency"] = "integer N", ["--faults"] = "string SPEC", ["--seed"] = "integer S",
  ["--url"] = "string URL", ["--script"] = "string FLOW.lua", ["--ledger"] = "string FILE", ["--max-retry-ratio"] = "number R",
  ["--forbid-reason"] = "list REASON", ["--max-retried-success"] = "number R", ["--max-attempts-per-success"] = "number R",
  ["--max-terminal-rate"] = "number R", ["--min-successes"] = "integer N", ["--min-success-rate"] = "number R",
  ["--min-requests"] = "integer N", ["--report"] = "string FILE",
}
--- The options and the kind of value each takes (retryfreeze.cli.args), for parsing and the generated --help.
M.options = spec
--- What each option does, one line each, for the generated --help (the thresholds as `retryfreeze gate` says).
M.option_help = {
  ["--requests"] = "how many flows (logical requests) to run (default 1000)",
  ["--concurrency"] = "flows in flight at once, 1..4096 (default 16)",
  ["--faults"] = "the upstream's injected faults, e.g. 503=0.1,429=0.02,reset=0.01 (default " .. M_DEFAULT_FAULTS
    .. "; not with --url)",
  ["--seed"] = "the seed of the faults and the jitter: the same seed gives the same counts (default 1)",
  ["--url"] = "send to this loopback upstream instead of starting the fault-injecting one",
  ["--script"] = "a flow script returning function(client, i) that makes flow i's requests",
  ["--ledger"] = "the ledger to append this run's lines to (default soak-ledger.jsonl)",
  ["--report"] = "also write the HTML report of this run's lines to this file (- for standard output)",
}
for opt, text in pairs(require("retryfreeze.cli.gate").option_help) do
  if spec[opt] then M.option_help[opt] = text end
end

--- The default faults: retryable statuses without Retry-After, so a default soak exercises the backoff.
M.DEFAULT_FAULTS = M_DEFAULT_FAULTS

--- Is url's host a loopback address? (127.0.0.0/8, localhost, [::1])
function M.is_loopback(url)
  local host = url:match("^https?://%[([^%]]+)%]") or url:match("^https?://([^:/]+)")
  if host == nil then return false end
  if host == "localhost" or host == "::1" then return true end
  local a, b, c, d = host:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  a, b, c, d = tonumber(a), tonumber(b), tonumber(c), tonumber(d)
  return a == 127 and b <= 255 and c <= 255 and d <= 255
end

--- The default flow's routes: the lock's routes in order, each as {method, pieces}; flow i uses route
--- (i - 1) % #routes + 1 and the path table.concat(pieces, i) ({param} → the flow number, a last "*" →
--- "soak/<flow number>"). The form scheduler.run_generated takes.
function M.default_routes(policy)
  local routes = {}
  for k, r in ipairs(policy:routes()) do
    local pieces, from = {}, 1
    for s, e in function() return r.pattern:find("{[%w_]+}", from) end do
      pieces[#pieces + 1] = r.pattern:sub(from, s - 1)
      from = e + 1
    end
    local last = r.pattern:sub(from)
    if last:sub(-2) == "/*" then
      pieces[#pieces + 1] = last:sub(1, -2) .. "soak/"
      last = ""
    end
    pieces[#pieces + 1] = last
    routes[k] = { method = r.method, pieces = pieces }
  end
  return routes
end

--- The default flow: one request per flow, round-robin over the lock's routes (M.default_routes). Every
--- request carries an idempotency key "<prefix>-<flow number>" (a key on a GET changes no decision): the
--- upstream draws a request's faults from its identity, so keys derived from the seed give the same counts for
--- the same seed. Against a --url the prefix also holds a fresh random part, so two runs never share keys (that
--- would count as duplicate executions). Returns function(i) → flow i's request table, for
--- scheduler.run_requests: the requests `soak` sends from C (scheduler.run_generated), as Lua tables.
function M.default_requests(policy, prefix)
  local routes, key_prefix = M.default_routes(policy), prefix .. "-"
  return function(i)
    local r = routes[(i - 1) % #routes + 1]
    return { method = r.method, path = table.concat(r.pieces, i), idempotency_key = key_prefix .. i }
  end
end

local function is_tty(stream_fd) return os.execute("test -t " .. stream_fd) == true end

function M.run(args, out, err, bindir)
  local opts, pos = cli_args.parse(args, spec)
  if not opts or #pos ~= 1 then
    err:write("retryfreeze soak: ", pos and (#pos == 0 and "expected LOCK" or "unexpected argument " .. pos[2]) or "",
      "\nusage: ", M.usage, "\n")
    return 2
  end
  local n, concurrency, seed = opts.requests or 1000, opts.concurrency or 16, opts.seed or 1
  if n < 1 or concurrency < 1 or concurrency > 4096 then
    err:write("retryfreeze soak: --requests must be >= 1 and --concurrency 1..4096\n")
    return 2
  end
  if opts.url and not M.is_loopback(opts.url) then
    err:write("retryfreeze soak: refusing --url ", opts.url, ": soak traffic goes to loopback addresses only\n")
    return 2
  end
  local policy, why = rf.load(pos[1])
  if not policy then
    err:write("retryfreeze soak: ", cli_args.lock_error(pos[1], why), "\n")
    return 2
  end
  local thresholds = gate.merge(policy.gate, {
    max_retry_ratio = opts.max_retry_ratio, max_retried_success = opts.max_retried_success,
    max_attempts_per_success = opts.max_attempts_per_success, max_terminal_rate = opts.max_terminal_rate,
    min_successes = opts.min_successes, forbid_reasons = opts.forbid_reason,
    min_success_rate = opts.min_success_rate, min_requests = opts.min_requests,
  })
  for _, reason in ipairs(thresholds.forbid_reasons) do
    local known = false
    for _, r in ipairs(rf.reasons) do known = known or r == reason end
    if not known then
      err:write("retryfreeze soak: --forbid-reason: unknown reason '", reason, "'\n")
      return 2
    end
  end
  local ledger_path = opts.ledger or "soak-ledger.jsonl"
  local outputs_ok, outputs_err = output.check({ { ledger_path, "append", "ledger" }, { opts.report, "replace", "report" } })
  if not outputs_ok then
    err:write("retryfreeze soak: ", outputs_err, "\n")
    return 2
  end
  out = output.text_stream(out, err, opts.report) -- the page alone on standard output with --report -
  local lines_before, lerr = stats.lines_before_append(ledger_path)
  if not lines_before then
    err:write("retryfreeze soak: ", lerr, "\n")
    return 2
  end
  local up
  local url = opts.url
  if not url then
    up, why = upstream.start{ bindir = bindir, seed = seed, stall_ms = 10000,
      faults = opts.faults or M.DEFAULT_FAULTS }
    if not up then
      err:write("retryfreeze soak: ", why, "\n")
      return 1
    end
    url = up.url
  end
  local ledger = assert(rf.ledger.open(ledger_path))
  ledger:_tally_appends() -- the run's stats, counted as its lines are written (no reading the ledger back)
  local client = rf.client{ policy = policy, base_url = url, ledger = ledger, rng_seed = seed,
    retry_budget = policy.retry_budget ~= nil }
  local flow
  if opts.script then
    local chunk, load_err = require("retryfreeze.flow").load(opts.script)
    local made = chunk and chunk()
    if type(made) ~= "function" then
      err:write("retryfreeze soak: --script must return function(client, i): ", load_err or type(made), "\n")
      client:close(); ledger:close(); if up then up.stop() end
      return 2
    end
    flow = function(i) made(client, i) end
  end
  local key_prefix = string.format("soak-%d", seed) .. (opts.url and "-" .. rf.new_key() or "") .. "-"
  local tty, done, flow_errors, t0 = is_tty(2), 0, {}, os.time()
  local clock0 = os.clock()
  -- The progress bar is redrawn at most every 64 flows and every PROGRESS_SECONDS of CPU, not per flow: a
  -- redraw is a formatted write to the terminal, dearer than a fast request.
  local PROGRESS_SECONDS, drawn_at = 0.1, -1
  local function progress(now_done)
    done = now_done
    local now = os.clock()
    if done == n or now - drawn_at >= PROGRESS_SECONDS then
      drawn_at = now
      local width = 30
      local filled = math.floor(done * width / n)
      local secs = math.max(os.time() - t0, 1)
      err:write(string.format("\r[%s%s] %d/%d  %.0f req/s ", string.rep("#", filled),
        string.rep(".", width - filled), done, n, done / secs))
    end
  end
  local failed
  if flow then
    failed = scheduler.run(client, n, concurrency, flow, function(i, ok, flow_err)
      if not ok and #flow_errors < 3 then flow_errors[#flow_errors + 1] = string.format("flow %d: %s", i, flow_err) end
      if tty and ((done + 1) % 64 == 0 or done + 1 == n) then progress(done + 1) else done = done + 1 end
    end)
  else
    -- The default flow runs from C: no Lua per request (its CPU is what soak measures).
    failed, flow_errors = scheduler.run_generated(client, n, concurrency, M.default_routes(policy), key_prefix,
      tty and progress or nil)
  end
  local cpu = os.clock() - clock0
  if tty then err:write("\n") end
  client:close()
  ledger:close()
  local server = upstream.stats(url)
  if up then up.stop() end
  for _, e in ipairs(flow_errors) do err:write("retryfreeze soak: ", e, "\n") end

  local s = stats.of_appends(ledger, ledger_path)
  out:write(string.format("soak: %d flows (%d failed), concurrency %d, against %s; ledger %s%s\n", n, failed,
    concurrency, url, ledger_path, lines_before > 0 and string.format(" (appended after line %d)", lines_before) or ""))
  out:write(string.format("requests=%d successes=%d attempts=%d retries=%d retry-ratio=%.3f client-cpu=%.0fus/request\n",
    s.requests, s.successes, s.attempts, s.retries, s.retry_ratio, 1e6 * stats.ratio(cpu, s.requests)))
  out:write(gate.summary(s), "\n")
  local keys = {}
  for k in pairs(s.by_reason) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out:write(string.format("  %-42s %d\n", k, s.by_reason[k])) end

  local verdict = gate.evaluate(s, thresholds)
  local breaches = verdict.breaches
  for _, note in ipairs(verdict.notes) do out:write(note, "\n") end
  if s.successes == 0 and s.requests < (thresholds.min_requests or gate.DEFAULT_MIN_REQUESTS) then
    -- Below min-requests the gate does not call it an outage; a soak that got no success at all still failed.
    breaches[#breaches + 1] = string.format("breach: 0 successes among %d requests", s.requests)
  end
  if failed > 0 then breaches[#breaches + 1] = string.format("breach: %d flows raised an error", failed) end
  if server == nil then
    out:write("duplicate check skipped: no /__stats at ", url, "\n")
  elseif server.duplicate_executions > 0 then
    breaches[#breaches + 1] = string.format("breach: %d duplicate executions of keyed requests", server.duplicate_executions)
  end
  for _, b in ipairs(breaches) do out:write(b, "\n") end
  if opts.report then
    local written, rerr = require("retryfreeze.report").write(opts.report, { ledger_path },
      { lock = pos[1], thresholds = thresholds, title = "retryfreeze soak: " .. pos[1],
        after_line = { [ledger_path] = lines_before } })
    if not written then
      err:write("retryfreeze soak: --report: ", rerr, "\n")
      return 2
    end
    out:write("report: ", opts.report, "\n")
  end
  return #breaches > 0 and 1 or 0
end

return M
