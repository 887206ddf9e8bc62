-- `retryfreeze replay` against `retryfreeze stats` on the same generated ledgers of 100 000 and 1 000 000 lines
-- (bench/evidence/bench_stats.lua's generator), measured in the same run: the replay's throughput must be at least half
-- the statistics' (it reads the same lines, counts them twice and decides every try again through the engine),
-- and its peak memory must not grow with the ledger. Each measurement runs in its own process, so its VmHWM is
-- its own; times are that process's CPU seconds, the fastest of three (a loaded machine only adds time).
--
-- Usage: lua5.4 bench/evidence/bench_replay.lua [--dir DIR] [--sizes 100000,1000000] [--lock CANDIDATE]
-- (bench/run runs it; LUA_PATH and LUA_CPATH must find retryfreeze, as in bench/run).
-- Internal: lua5.4 bench/evidence/bench_replay.lua --measure stats|replay LEDGER LOCK
local TARGET <const> = 0.5 -- replay lines/s over stats lines/s, at least

local measure = require "bench.lib.measure"

if arg[1] == "--measure" then
  local mode, path, lock = arg[2], arg[3], arg[4]
  local rf = require "retryfreeze"
  local policy = assert(rf.load(lock))
  local t0 = os.clock()
  local s
  if mode == "stats" then
    s = assert(rf.ledger.stats(path))
  else
    local r = assert(rf.replay(path, policy))
    s = r.recorded
    s.predicted_attempts = r.predicted.attempts
  end
  local cpu = os.clock() - t0
  measure.print(s.lines, cpu, s.requests)
  os.exit(0)
end

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local opts = dofile(here .. "/../lib/options.lua")("bench_replay", { sizes = { 100000, 1000000 }, lock = "examples/service.lock.json" },
  { ["--dir"] = { "dir", "value" }, ["--lock"] = { "lock", "value" }, ["--sizes"] = { "sizes", "sizes" } })

local shell_quote = measure.q

local dir = opts.dir or os.getenv("TMPDIR") or "/tmp"
local lua = arg[-1] or "lua5.4"
local script = arg[0]
local generator = script:gsub("bench_replay%.lua$", "bench_stats.lua")
print("bench_replay: `retryfreeze replay` under " .. opts.lock .. " vs `retryfreeze stats`, same ledgers, same run "
  .. "(CPU time of one process per row, the fastest of 3; peak memory = VmHWM)")
print(string.format("  %-10s %-28s %12s %9s %10s", "lines", "what", "lines/s", "cpu s", "peak KiB"))
local last, peaks = nil, {}
for _, n in ipairs(opts.sizes) do
  local path = string.format("%s/rf-bench-replay-%d-%d.jsonl", dir, n, os.time())
  assert(os.execute(shell_quote(lua) .. " " .. shell_quote(generator) .. " --generate " .. shell_quote(path) .. " " .. n))
  local function cmd(mode)
    return shell_quote(lua) .. " " .. shell_quote(script) .. " --measure " .. mode .. " " .. shell_quote(path) .. " "
      .. shell_quote(opts.lock)
  end
  local stats = measure.best_of("bench_replay", 3, cmd("stats"))
  local replay = measure.best_of("bench_replay", 3, cmd("replay"))
  os.remove(path)
  for _, row in ipairs({ { "stats (rf.ledger.stats)", stats }, { "replay (rf.replay)", replay } }) do
    local m = row[2]
    if m.lines ~= n then
      io.stderr:write(string.format("bench_replay: %s read %d lines of %d\n", row[1], m.lines, n))
      os.exit(1)
    end
    print(string.format("  %-10d %-28s %12.0f %9.2f %10d", n, row[1], m.lines / m.cpu, m.cpu, m.kb))
  end
  peaks[#peaks + 1] = replay.kb
  last = { n = n, ratio = stats.cpu / replay.cpu }
end
-- A `ratio:` line, so that bench/run's table (and the README's) carries it.
print(string.format("ratio: replay speed over stats at %d lines: %.2fx (target >= %gx) %s", last.n, last.ratio,
  TARGET, last.ratio >= TARGET and "met" or "NOT MET"))
if #peaks > 1 then
  print(string.format("replay peak memory: %d KiB at %d lines, %d KiB at %d lines (%+.1f%%)", peaks[1], opts.sizes[1],
    peaks[#peaks], opts.sizes[#opts.sizes], (peaks[#peaks] - peaks[1]) * 100 / peaks[1]))
end
