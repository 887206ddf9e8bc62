-- `retryfreeze stats` throughput and peak memory on generated ledgers of 100 000 and 1 000 000 lines, against
-- two floors measured in the same run: the C reader alone (bench/evidence/bench_stats.c: rf_ledger_reader_next, no
-- Lua) and the Lua iteration alone (rf.ledger.read, no statistics). Each measurement runs in its own process,
-- so its VmHWM (peak resident memory) is its own; times are that process's CPU seconds (os.clock / clock).
--
-- Usage: lua5.4 bench/evidence/bench_stats.lua [--floor BUILD/bench_stats] [--dir DIR] [--sizes 100000,1000000] [--keep]
-- (bench/run passes the floor; LUA_PATH and LUA_CPATH must find retryfreeze, as in bench/run).
-- Internal: lua5.4 bench/evidence/bench_stats.lua --measure stats|read|cli-text|cli-json LEDGER, or --generate PATH N
local TARGET <const> = 500000 -- lines per second

local measure = require "bench.lib.measure"

if arg[1] == "--measure" then
  local mode, path = arg[2], arg[3]
  local t0 = os.clock()
  local lines, requests
  if mode == "stats" then
    local s = assert(require("retryfreeze.ledger_stats").stats(path))
    lines, requests = s.lines, s.requests
  elseif mode == "cli-text" or mode == "cli-json" then
    -- The whole command as `retryfreeze stats` runs it: parse, stats, render, every byte through the text
    -- writer (util.printable), written to /dev/null.
    local null = assert(io.open("/dev/null", "w"))
    local argv = { [0] = "retryfreeze", "stats", path, mode == "cli-json" and "--json" or nil }
    assert(require("retryfreeze.cli").main(argv, null, null) == 0)
    null:close()
    local cpu = os.clock() - t0
    local s = assert(require("retryfreeze.ledger_stats").stats(path)) -- the counts printed below, not timed
    measure.print(s.lines, cpu, s.requests)
    os.exit(0)
  else
    local rf = require "retryfreeze"
    local it, state = rf.ledger.read(path)
    local n = 0
    for rec in it, state do n = n + rec.attempts end
    lines, requests = state.lines, n
  end
  local cpu = os.clock() - t0
  measure.print(lines, cpu, requests)
  os.exit(0)
end

-- (--generate's arguments are read where the generator is defined)
local opts = { sizes = { 100000, 1000000 }, dir = nil, floor = nil, keep = false }
if arg[1] ~= "--generate" then
  dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../lib/options.lua")("bench_stats", opts, {
    ["--floor"] = { "floor", "value" }, ["--dir"] = { "dir", "value" }, ["--keep"] = { "keep", "flag" },
    ["--sizes"] = { "sizes", "sizes" } })
end

local shell_quote = measure.q

-- A deterministic ledger in the writer's exact line format (core/src/ledger/ledger_format.c: every field, this
-- order; tries entries class, status, elapsed_ms, delay_ms, reason, retry_after). The mix: 4 routes;
-- 90% first-try successes, 5% successes after 1-2 retries, 2% terminal, 2% exhausted, 1% refused.
local POLICY <const> = "sha256:af6eb1cd4b418a64b5123c7db12c9016026a6397e08fe4821afa6f28e6205289"
local routes <const> = {
  { "POST /v1/jobs", "POST", "/v1/jobs" }, { "POST /v1/jobs", "POST", "/v1/jobs" },
  { "GET /v1/jobs/{id}", "GET", "/v1/jobs/42" }, { "DELETE /v1/jobs/{id}", "DELETE", "/v1/jobs/42" },
  { "POST /v1/refunds", "POST", "/v1/refunds" },
}

local function try_json(class, status, ms, delay, reason, ra)
  return string.format('{"class":"%s","status":%d,"elapsed_ms":%d,"delay_ms":%d,"reason":"%s","retry_after":%s}',
    class, status, ms, delay, reason, ra and ('"' .. ra .. '"') or "null")
end

local function generate(path, n)
  math.randomseed(42)
  local out = require("spec.ledger_gen").lines_to(path)
  local random = math.random
  for i = 1, n do
    local route = routes[random(#routes)]
    local key = route[2] == "GET" and "null"
      or string.format('"%08x-%04x-4%03x-8%03x-%012x"', random(0, 0x7fffffff), random(0, 0xffff),
        random(0, 0xfff), random(0, 0xfff), i)
    local ms1 = math.floor(-math.log(1 - random()) * 40) + 1
    local u = random(100)
    local tries, attempts, outcome, reason, ok, status
    if u <= 90 then
      tries, attempts, outcome, reason, ok, status = { try_json("HTTP_200", 200, ms1, 0, "success") }, 1,
        "success", "success", "true", 200
    elseif u <= 95 then
      attempts = random(2, 3)
      tries = {}
      for k = 1, attempts - 1 do tries[k] = try_json("HTTP_503", 503, ms1, k == 1 and 0 or 50 * k, "pinned-status", "1") end
      tries[attempts] = try_json("HTTP_200", 200, ms1, 100, "success")
      outcome, reason, ok, status = "success", "success", "true", 200
    elseif u <= 97 then
      tries, attempts, outcome, reason, ok, status = { try_json("HTTP_500", 500, ms1, 0, "status-not-retryable") }, 1,
        "terminal", "status-not-retryable", "false", 500
    elseif u <= 99 then
      tries = { try_json("HTTP_504", 504, ms1, 0, "pinned-status"), try_json("HTTP_504", 504, ms1, 80, "max-attempts") }
      attempts, outcome, reason, ok, status = 2, "exhausted", "max-attempts", "false", 504
    else
      tries, attempts, outcome, reason, ok, status = {}, 0, "refused", "no-route", "false", 0
    end
    local elapsed = attempts * ms1 + (attempts > 1 and 100 * (attempts - 1) or 0)
    out.add(string.format('{"ts":"2026-11-29T17:%02d:%02d.%03dZ","route":"%s","method":"%s","path":"%s",'
      .. '"key":%s,"policy":"%s","attempts":%d,"elapsed_ms":%d,"outcome":"%s","reason":"%s","ok":%s,"status":%d,'
      .. '"body_len":%d,"tries":[%s]}\n', (i // 60000) % 60, (i // 1000) % 60, i % 1000,
      reason == "no-route" and "" or route[1], route[2], route[3], key, POLICY, attempts, elapsed, outcome, reason,
      ok, status, ok == "true" and 17 or 0, table.concat(tries, ",")))
  end
  out.close()
end

-- Internal: lua5.4 bench/evidence/bench_stats.lua --generate PATH N writes that ledger (bench/evidence/bench_replay.lua's input).
if arg[1] == "--generate" then
  generate(arg[2], math.tointeger(tonumber(arg[3])))
  os.exit(0)
end

local dir = opts.dir or os.getenv("TMPDIR") or "/tmp"
local lua = arg[-1] or "lua5.4"
local script = arg[0]
local results = {}
print("bench_stats: `retryfreeze stats` over generated ledgers (CPU time of one process per row; "
  .. "peak memory = VmHWM)")
print(string.format("  %-10s %-34s %12s %9s %12s %10s", "lines", "what", "lines/s", "cpu s", "vs C reader",
  "peak KiB"))
for _, n in ipairs(opts.sizes) do
  local path = string.format("%s/rf-bench-stats-%d-%d.jsonl", dir, n, os.time())
  generate(path, n)
  local rows = {}
  local function lua_cmd(mode) return shell_quote(lua) .. " " .. shell_quote(script) .. " --measure " .. mode .. " " .. shell_quote(path) end
  if opts.floor then
    rows[#rows + 1] = { "C reader only (bench_stats.c)",
      measure.run("bench_stats", shell_quote(opts.floor) .. " " .. shell_quote(path)) }
  end
  rows[#rows + 1] = { "rf.ledger.read loop (no stats)", measure.run("bench_stats", lua_cmd("read")) }
  rows[#rows + 1] = { "retryfreeze stats (text out)", measure.best_of("bench_stats", 5, lua_cmd("cli-text")) }
  rows[#rows + 1] = { "retryfreeze stats --json", measure.best_of("bench_stats", 5, lua_cmd("cli-json")) }
  -- Last: the throughput target is judged on it, and the command's rows above are compared with it.
  rows[#rows + 1] = { "ledger_stats.stats (full stats)", measure.best_of("bench_stats", 5, lua_cmd("stats")) }
  local floor_rate = opts.floor and rows[1][2].lines / rows[1][2].cpu
  for _, row in ipairs(rows) do
    local m = row[2]
    if m.lines ~= n then
      io.stderr:write(string.format("bench_stats: %s read %d lines of %d\n", row[1], m.lines, n))
      os.exit(1)
    end
    local rate = m.lines / m.cpu
    print(string.format("  %-10d %-34s %12.0f %9.2f %12s %10d", n, row[1], rate, m.cpu,
      floor_rate and string.format("%.2fx", floor_rate / rate) or "-", m.kb))
  end
  results[#results + 1] = { n = n, stats = rows[#rows][2], cli = rows[#rows - 2][2], json = rows[#rows - 1][2] }
  if not opts.keep then os.remove(path) end
end
local last = results[#results]
local rate = last.stats.lines / last.stats.cpu
print(string.format("stats throughput at %d lines: %.0f lines/s — target > %d lines/s: %s", last.n, rate, TARGET,
  rate > TARGET and "met" or "NOT met"))
-- What the command adds to the statistics (parsing, rendering, making every byte printable): a ratio of CPU
-- times in the same run, judged at the largest size.
for _, which in ipairs({ "cli", "json" }) do
  local ratio = last[which].cpu / last.stats.cpu
  print(string.format("ratio: retryfreeze stats%s / ledger_stats.stats at %d lines: %.2fx (target <= 1.05x) %s",
    which == "json" and " --json" or "", last.n, ratio, ratio <= 1.05 and "met" or "NOT MET"))
end
if #results > 1 then
  print(string.format("stats peak memory: %d KiB at %d lines, %d KiB at %d lines (ratio %.2f)", results[1].stats.kb,
    results[1].n, last.stats.kb, last.n, last.stats.kb / results[1].stats.kb))
end
