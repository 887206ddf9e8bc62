--- `retryfreeze soak LOCK [options]`: drives many concurrent flows through the real client (curl multi; the
--- default flow from C, scheduler.run_generated; a --script flow in Lua coroutines), writes a ledger, prints
--- its stats and applies gate thresholds. Exit 1 on a breach or a duplicate execution of a keyed request.
local math = require("retryfreeze.compat").math
local rf = require "retryfreeze"
local cli_args = require "retryfreeze.cli.args"
local cli_gate = require "retryfreeze.cli.gate"
local gate = require "retryfreeze.gate"
local output = require "retryfreeze.output"
local progress = require "retryfreeze.cli.progress"
local scheduler = require "retryfreeze.scheduler"
local stats = require "retryfreeze.ledger_stats"
local upstream = require "retryfreeze.upstream"
local util = require "retryfreeze.util"

local M_DEFAULT_FAULTS = "503=0.1,429=0.02,reset=0.01"

local M = {}

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

--- The policy without hedging: every route's `hedging` taken out of the lock's canonical form (the rest unchanged),
--- for `soak --compare-hedging`. Returns the policy, or nil when the lock hedges no route.
function M.without_hedging(policy)
  local json = require "retryfreeze.json"
  local t, found = json.decode(policy:canonical_json()), false
  local function strip(route)
    if type(route) == "table" and route.hedging ~= nil then
      route.hedging, found = nil, true
    end
  end
  strip(t)
  strip(t.defaults)
  for _, r in ipairs(t.routes or {}) do strip(r) end
  if not found then return nil end
  return assert(rf.load_string(json.encode(t), "lock without hedging"))
end

--- The run's second pass for --compare-hedging: the same flows (the same keys, so the upstream, reset, draws the
--- same faults for each attempt) through a client of the lock without hedging, into a ledger of its own. Returns
--- its stats.
local function run_without_hedging(policy, url, seed, n, concurrency, key_prefix, ledger_path)
  assert(upstream.reset(url))
  local ledger = assert(rf.ledger.open(ledger_path))
  ledger:_tally_appends()
  local client = rf.client{ policy = policy, base_url = url, ledger = ledger, rng_seed = seed,
    retry_budget = policy.retry_budget ~= nil }
  scheduler.run_generated(client, n, concurrency, M.default_routes(policy), key_prefix, nil)
  client:close()
  ledger:close()
  return stats.of_appends(ledger, ledger_path)
end

--- Whether url's host is loopback: nil, or the message refusing it (a soak's traffic stays on this machine).
local function loopback_error(url)
  if M.is_loopback(url) then return nil end
  return "refusing --url " .. url .. ": soak traffic goes to loopback addresses only"
end

--- Runs `retryfreeze soak` (see retryfreeze.cli for ctx).
local function run(ctx, opts, pos)
  local out = ctx.out
  local n, concurrency, seed = opts.requests, opts.concurrency, opts.seed
  local policy = ctx.load_lock(pos[1])
  local thresholds = gate.merge(policy.gate, cli_gate.thresholds_of(opts))
  local ledger_path = opts.ledger
  local outputs_ok, outputs_err = output.check({ { ledger_path, "append", "ledger" },
    { opts.report, "replace", "report" } })
  if not outputs_ok then ctx.fail(outputs_err) end
  out = output.text_stream(out, ctx.err, opts.report) -- the page alone on standard output with --report -
  local lines_before, lerr = stats.lines_before_append(ledger_path)
  if not lines_before then ctx.fail(lerr) end
  local up
  local url = opts.url
  if not url then
    local why
    up, why = upstream.start{ bindir = ctx.bindir, seed = seed, stall_ms = 10000, faults = opts.faults }
    if not up then ctx.fail(why, 1) end
    url = up.url
  end
  local ledger, oerr = rf.ledger.open(ledger_path)
  if not ledger then
    if up then up.stop() end
    ctx.fail(oerr)
  end
  ledger:_tally_appends() -- the run's stats, counted as its lines are written (no reading the ledger back)
  local client = rf.client{ policy = policy, base_url = url, ledger = ledger, rng_seed = seed,
    retry_budget = policy.retry_budget ~= nil }
  local flow
  if opts.script then
    local chunk, why = require("retryfreeze.flow").load(opts.script)
    local ok, made = true, nil
    if chunk then ok, made = pcall(chunk) end
    if not ok or type(made) ~= "function" then
      client:close(); ledger:close(); if up then up.stop() end
      ctx.fail("--script must return function(client, i): " .. (why or not ok and tostring(made) or type(made)))
    end
    flow = function(i) made(client, i) end
  end
  local key_prefix = string.format("soak-%d", seed) .. (opts.url and "-" .. rf.new_key() or "") .. "-"
  local bar, done, flow_errors = progress.bar(ctx.err, n), 0, {}
  local clock0 = os.clock()
  local failed
  if flow then
    failed = scheduler.run(client, n, concurrency, flow, function(i, ok, flow_err)
      if not ok and #flow_errors < 3 then flow_errors[#flow_errors + 1] = string.format("flow %d: %s", i, flow_err) end
      done = done + 1
      if bar and (done % 64 == 0 or done == n) then bar.update(done) end -- not per flow: a redraw costs
    end)
  else
    -- The default flow runs from C: no Lua per request (its CPU is what soak measures).
    failed, flow_errors = scheduler.run_generated(client, n, concurrency, M.default_routes(policy), key_prefix,
      bar and bar.update or nil)
  end
  local cpu = os.clock() - clock0
  if bar then bar.finish() end
  client:close()
  ledger:close()
  local server = upstream.stats(url)
  local unhedged, unhedged_err
  if opts.compare_hedging then
    local plain = M.without_hedging(policy)
    if plain == nil then
      unhedged_err = "--compare-hedging: the lock hedges no route"
    else
      local path = os.tmpname()
      unhedged = run_without_hedging(plain, url, seed, n, concurrency, key_prefix, path)
      os.remove(path)
    end
  end
  if up then up.stop() end
  if unhedged_err then ctx.fail(unhedged_err) end
  for _, e in ipairs(flow_errors) do ctx.note(e) end

  local s = stats.of_appends(ledger, ledger_path)
  out:printf("soak: %d flows (%d failed), concurrency %d, against %s; ledger %s%s\n", n, failed,
    concurrency, url, ledger_path, lines_before > 0 and string.format(" (appended after line %d)", lines_before) or "")
  out:printf("requests=%d successes=%d attempts=%d retries=%d retry-ratio=%.3f client-cpu=%.0fus/request\n",
    s.requests, s.successes, s.attempts, s.retries, s.retry_ratio, 1e6 * stats.ratio(cpu, s.requests))
  out:write(gate.summary(s), "\n")
  for _, k in ipairs(util.sorted_keys(s.by_reason)) do out:printf("  %-42s %d\n", k, s.by_reason[k]) end
  if s.hedges > 0 then
    out:printf("hedges=%d in %d requests (%.3f per request), won by a hedge=%d (%.2f%%)\n", s.hedges, s.hedged,
      s.hedges_per_request, s.hedge_wins, 100 * s.hedge_win_rate)
  end
  if unhedged then
    -- The same flows, faults and seed without the lock's hedging: what hedging bought and what it cost, for the
    -- whole run and for each route (a hedged route's tail hides behind an unhedged route's in the whole run).
    local function compared(with, without)
      local e, u = with.elapsed_ms, without.elapsed_ms
      return string.format("p99 %d ms with hedging, %d ms without; p50 %d ms, %d ms; attempts %d with, %d without "
        .. "(%+d)", e.p99 or 0, u.p99 or 0, e.p50 or 0, u.p50 or 0, with.attempts, without.attempts,
        with.attempts - without.attempts)
    end
    out:printf("hedging compared (same flows, same faults), whole run: %s\n", compared(s, unhedged))
    local routes, seen = {}, {}
    for _, by in ipairs({ s.by_route, unhedged.by_route }) do
      for route in pairs(by) do
        if not seen[route] then routes[#routes + 1], seen[route] = route, true end
      end
    end
    table.sort(routes)
    local none = { elapsed_ms = {}, attempts = 0 }
    for _, route in ipairs(routes) do
      out:printf("  %s: %s\n", stats.route_label(route),
        compared(s.by_route[route] or none, unhedged.by_route[route] or none))
    end
  end

  local verdict = gate.evaluate(s, thresholds)
  local breaches = verdict.breaches
  for _, note in ipairs(verdict.notes) do out:printf("%s\n", note) end
  if s.successes == 0 and s.requests < (thresholds.min_requests or gate.DEFAULT_MIN_REQUESTS) then
    -- Below min-requests the gate does not call it an outage; a soak that got no success at all still failed.
    breaches[#breaches + 1] = string.format("breach: 0 successes among %d requests", s.requests)
  end
  if failed > 0 then breaches[#breaches + 1] = string.format("breach: %d flows raised an error", failed) end
  if server == nil then
    out:printf("duplicate check skipped: no /__stats at %s\n", url)
  elseif server.duplicate_executions > 0 then
    breaches[#breaches + 1] = string.format("breach: %d duplicate executions of keyed requests", server.duplicate_executions)
  end
  for _, b in ipairs(breaches) do out:printf("%s\n", b) end
  if opts.report then
    local written, rerr = require("retryfreeze.report").write(opts.report, { ledger_path },
      { lock = pos[1], thresholds = thresholds, title = "retryfreeze soak: " .. pos[1],
        after_line = { [ledger_path] = lines_before } })
    if not written then ctx.fail("--report: " .. rerr) end
    out:printf("report: %s\n", opts.report)
  end
  return #breaches > 0 and 1 or 0
end

local options = {
  { "--requests", "integer N", "how many flows (logical requests) to run", default = 1000, range = { 1, math.huge } },
  { "--concurrency", "integer N", "flows in flight at once", default = 16, range = { 1, 4096 } },
  { "--faults", "string SPEC", "the upstream's injected faults (as for serve)", default = M_DEFAULT_FAULTS,
    excludes = "--url",
    check = function(spec, ctx) return upstream.faults_error(ctx.bindir, spec) end },
  { "--seed", "integer S", "the seed of the faults and the jitter: the same seed gives the same counts", default = 1,
    range = { 0, math.huge } },
  { "--url", "string URL", "send to this loopback upstream (127.0.0.0/8, localhost, [::1]) instead of starting the "
    .. "fault-injecting one", check = loopback_error },
  { "--script", "string FLOW.lua", "a flow script returning function(client, i) that makes flow i's requests" },
  { "--compare-hedging", "flag", "run the same flows again without the lock's hedging (the upstream reset: the "
    .. "same faults) and print p99, p50 and attempts of both", excludes = "--url" },
  { "--ledger", "string FILE", "the ledger to append this run's lines to", default = "soak-ledger.jsonl" },
  { "--report", "string FILE", "also write the HTML report of this run's lines to this file (as `retryfreeze "
    .. "report`, judged with the same thresholds; - for standard output, the run's text then on standard error)" },
}
for _, row in ipairs(cli_gate.threshold_options) do options[#options + 1] = row end

M.name = "soak"
M.summary = "drive concurrent flows through the real client; print ledger stats and apply the gate"
M.args = "LOCK"
M.description = "  The run appends to the ledger (never truncates it) and summarizes only the lines it appended; a\n"
  .. "  ledger whose last line is torn is refused. Without --url the project's fault-injecting upstream runs on\n"
  .. "  a free loopback port and each request draws its faults by its own identity, so the same seed gives the\n"
  .. "  same counts; the default faults have no Retry-After, so retries wait the lock's backoff. --script\n"
  .. "  FLOW.lua returns function(client, i) making requests with client:request. Thresholds not given on the\n"
  .. "  command line come from the lock's gate object. Exit 0 ok, 1 a threshold breached, no success at all,\n"
  .. "  or a duplicate execution, 2 bad usage or a ledger or report path that is a directory, FIFO or device."
M.options = options
M.run = run
return cli_args.command(M)
