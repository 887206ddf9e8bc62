-- `retryfreeze report` time and peak memory on generated ledgers of 100 000 and 1 000 000 lines, against
-- `stats` (ledger_stats.stats) on the same file in the same run. Each measurement runs in its own process, so
-- its VmHWM (peak resident memory) is its own; times are that process's CPU seconds (os.clock). The ledgers
-- come from spec/ledger_gen.lua (4 routes, 6 hours, retries, Retry-After, an incident in the middle).
--
-- Usage: lua5.4 bench/evidence/bench_report.lua [--dir DIR] [--sizes 100000,1000000] [--keep]
-- (bench/run sets LUA_PATH and LUA_CPATH to the source tree and the build).
-- Internal: lua5.4 bench/evidence/bench_report.lua --measure stats|report LEDGER [OUT.html]
local vmhwm_kb = require "bench.lib.peak_memory"

if arg[1] == "--measure" then
  local mode, path, out = arg[2], arg[3], arg[4]
  local t0 = os.clock()
  local requests
  if mode == "stats" then
    requests = assert(require("retryfreeze.ledger_stats").stats(path)).requests
  else
    requests = assert(require("retryfreeze.report").write(out, { path })).stats.requests
  end
  print(string.format("requests %d cpu_s %.3f vmhwm_kb %d", requests, os.clock() - t0, vmhwm_kb()))
  os.exit(0)
end

local opts = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../lib/options.lua")("bench_report",
  { sizes = { 100000, 1000000 }, dir = os.getenv("TMPDIR") or "/tmp", keep = false },
  { ["--dir"] = { "dir", "value" }, ["--keep"] = { "keep", "flag" }, ["--sizes"] = { "sizes", "sizes" } })

local q = require("retryfreeze.util").shell_quote
local lua, script = arg[-1] or "lua5.4", arg[0]

local function measure(mode, path, out)
  local p = assert(io.popen(table.concat({ q(lua), q(script), "--measure", mode, q(path), out and q(out) or "" }, " ")))
  local text = p:read("a")
  local ok = p:close()
  local requests, cpu, kb = text:match("requests (%d+) cpu_s ([%d.]+) vmhwm_kb (%-?%d+)")
  if not ok or not requests then
    io.stderr:write("bench_report: measurement failed: ", text, "\n")
    os.exit(1)
  end
  return { requests = tonumber(requests), cpu = tonumber(cpu), kb = tonumber(kb) }
end

print("bench_report: `retryfreeze report` against `stats` on the same ledger (CPU s of one process; "
  .. "peak memory = VmHWM)")
print(string.format("  %-10s %-34s %9s %12s %10s %10s", "lines", "what", "cpu s", "lines/s", "vs stats", "peak KiB"))
local rows = {}
for _, n in ipairs(opts.sizes) do
  local path = string.format("%s/rf-bench-report-%d-%d.jsonl", opts.dir, n, os.time())
  local out = path:gsub("%.jsonl$", ".html")
  require("spec.ledger_gen").generate(path, n, { seed = 1 })
  local s = measure("stats", path)
  local r = measure("report", path, out)
  for _, m in ipairs({ s, r }) do
    if m.requests ~= n then
      io.stderr:write(string.format("bench_report: counted %d requests of %d\n", m.requests, n))
      os.exit(1)
    end
  end
  print(string.format("  %-10d %-34s %9.2f %12.0f %10s %10d", n, "stats (ledger_stats.stats)", s.cpu, n / s.cpu,
    "1.00x", s.kb))
  print(string.format("  %-10d %-34s %9.2f %12.0f %10s %10d", n, "report (stats + timeline + HTML)", r.cpu, n / r.cpu,
    string.format("%.2fx", r.cpu / s.cpu), r.kb))
  rows[#rows + 1] = { n = n, r = r }
  if not opts.keep then
    os.remove(path)
    os.remove(out)
  end
end
if #rows > 1 then
  print(string.format("report peak memory: %d KiB at %d lines, %d KiB at %d lines (ratio %.2f)", rows[1].r.kb,
    rows[1].n, rows[#rows].r.kb, rows[#rows].n, rows[#rows].r.kb / rows[1].r.kb))
end
