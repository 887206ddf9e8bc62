-- One measurement per process, for the benches that compare CPU time and peak memory (bench_stats, bench_replay):
-- the child runs one thing and prints one line, `lines N cpu_s X vmhwm_kb K requests R` (bench/evidence/bench_stats.c, the
-- C floor, prints the same); the parent runs the child through a shell and reads the line back. A process of its
-- own gives each measurement its own VmHWM.
local util = require "retryfreeze.util"
local vmhwm_kb = require "bench.lib.peak_memory"

local M = {}

--- One word for a POSIX shell (retryfreeze.util.shell_quote).
M.q = util.shell_quote

--- The child's side: prints the measurement line (the peak memory read now, from bench.lib.peak_memory).
-- @param lines integer: ledger lines read; cpu_s number: CPU seconds of the measured work; requests integer
function M.print(lines, cpu_s, requests)
  print(string.format("lines %d cpu_s %.3f vmhwm_kb %d requests %d", lines, cpu_s, vmhwm_kb(), requests))
end

--- The parent's side: runs the shell command cmd and reads its measurement line. A failed command or a missing
--- line ends the bench (exit 1) with bench's name, the command and what it printed.
-- @param bench string: the bench's name for the message; cmd string: a shell command line
-- @return {lines = integer, cpu = CPU seconds, kb = peak KiB}
function M.run(bench, cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  local lines, cpu, kb = out:match("lines (%d+) cpu_s ([%d.]+) vmhwm_kb (%-?%d+)")
  if not ok or not lines then
    io.stderr:write(bench, ": measurement failed: ", cmd, "\n", out)
    os.exit(1)
  end
  return { lines = tonumber(lines), cpu = tonumber(cpu), kb = tonumber(kb) }
end

--- The fastest of `times` runs of M.run(bench, cmd): what a ratio of two short CPU times compares, since a loaded
--- machine only ever adds time.
function M.best_of(bench, times, cmd)
  local best
  for _ = 1, times do
    local m = M.run(bench, cmd)
    if not best or m.cpu < best.cpu then best = m end
  end
  return best
end

return M
