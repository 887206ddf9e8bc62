-- client:all at a caller-set concurrency against a plain libcurl multi loop at the same concurrency, in one process,
-- against one retryfreeze-serve on loopback. The baseline is bench/client/multi_loop.h's loop (the rf_bench_multi module, the
-- loop bench_multi runs for soak): keep-alive, each finished handle reused for the next request, the same GET
-- /v1/jobs/<i> with the same User-Agent, a 5 s timeout, and every response's status, header block and body kept until
-- the loop ends, as client:all must keep them to return them. client:all on top reads each request table, matches
-- its route, decides on each attempt, parses the headers and builds a response table per request (status, headers,
-- body, tries, ...): that is the overhead measured. Each side's CPU is user + system CPU (getrusage, the same clock for
-- both) of its request loop only, in the same Lua process (the same heap and libraries, no process start on either
-- side); both open their connections cold (a new multi, a new client each round). The two alternate for ROUNDS rounds
-- of REQUESTS requests; the ratio is the median of the rounds' ratios (other processes on a shared machine steal CPU
-- unevenly; the median of pairs resists that). A note gives the ratio against the same loop discarding every body
-- and header (soak's baseline), for comparison; with valgrind, another gives each side's user-space instructions per
-- request (callgrind, only inside each side's C function: steady on a loaded machine, but the kernel's part, about half
-- of either side's CPU and the same work on both, is not counted, so that ratio is above the CPU one). Prints a
-- `ratio:` line for bench/run.
-- Usage: lua5.4 bench/client/bench_all.lua BUILD_DIR [REQUESTS [CONCURRENCY [ROUNDS]]] (from the source root); REQUESTS at
-- most 10000 (client:all's maximum), default 10000; CONCURRENCY default 64; ROUNDS default 15.
local build = arg[1] or "build"
local n, conc, rounds = tonumber(arg[2] or "10000"), tonumber(arg[3] or "64"), tonumber(arg[4] or "15")
local count_side, count_url = (arg[5] or ""):match("^count:(%a+)$"), arg[6] -- the instruction count's child run
local target = 1.3
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = build .. "/lib/lua/5.4/?.so;" .. build .. "/bench/?.so;" .. package.cpath
local rf = require "retryfreeze"
local upstream = require "retryfreeze.upstream"

if not io.open(build .. "/bin/retryfreeze-serve") or not io.open(build .. "/bench/rf_bench_multi.so") then
  print("bench_all: skipped (no " .. build .. "/bin/retryfreeze-serve or " .. build .. "/bench/rf_bench_multi.so)")
  return
end
local multi = require "rf_bench_multi"

local UA = "rf-bench"
local up = count_side and { url = count_url } or assert(upstream.start{ bindir = build .. "/bin", max_seconds = 600 })
local policy = assert(rf.load_string('{"endpoint":"GET /v1/jobs/{id}","maxAttempts":3,"perAttemptTimeoutMs":5000,'
  .. '"totalBudgetMs":10000,"retryable":["HTTP_503"]}', "bench_all.lock"))
local reqs = {}
for i = 1, n do reqs[i] = { method = "GET", path = "/v1/jobs/" .. i } end

--- The plain loop's CPU microseconds per request (keep: it keeps every response, as client:all does).
local function plain(keep)
  local cpu, _, failed = multi.run(up.url, n, conc, UA, keep)
  assert(failed == 0, "plain libcurl multi: " .. failed .. " requests failed")
  return cpu / n * 1e6
end

--- client:all's CPU microseconds per request (the call), on a new client: cold connections, as the plain loop's.
local function all()
  local c = rf.client{ policy = policy, base_url = up.url, rng_seed = 1, user_agent = UA }
  local t0 = multi.cpu()
  local rs = c:all(reqs, { concurrency = conc })
  local cpu = multi.cpu() - t0
  c:close()
  for i = 1, n do assert(rs[i].status == 200 and rs[i].attempts == 1, "client:all: not a 200 in one attempt") end
  return cpu / n * 1e6
end

if count_side then -- a child of instructions(): one run of one side under callgrind
  if count_side == "plain" then plain(true) else all() end
  return
end

--- User-space instructions per request of each side's call (callgrind: only inside l_bench_multi_run, the plain loop,
--- and client_all, client:all's C function; kernel time, half of either side's CPU, is not counted), the median of 3
--- alternated runs of `count` requests each (libcurl's work varies a little with how many transfers end per call into
--- it, which the machine's load sets); nil when valgrind is missing or the functions have no symbols.
local function instructions(count)
  if not os.execute("command -v valgrind >/dev/null 2>&1") then return nil end
  local function run(side, fn)
    local p = assert(io.popen(("valgrind --tool=callgrind --callgrind-out-file=/dev/null --collect-atstart=no "
      .. "--toggle-collect=%s lua5.4 bench/client/bench_all.lua %s %d %d 1 count:%s %s 2>&1"):format(fn, build, count, conc,
      side, up.url)))
    local out = p:read("a")
    p:close()
    local ir = tonumber((out:match("Collected : ([%d,]+)") or ""):gsub(",", ""), 10)
    return ir and ir > 0 and ir / count or nil
  end
  local a, b = {}, {}
  for i = 1, 3 do
    a[i], b[i] = run("plain", "l_bench_multi_run"), run("all", "client_all")
    if not (a[i] and b[i]) then return nil end
  end
  table.sort(a)
  table.sort(b)
  return a[2], b[2]
end

all() -- warm-up: the module's code and the allocator's caches
plain(true)
local ratios, bare = {}, {}
for round = 1, rounds do
  local a, b, d
  if round % 2 == 1 then
    a = plain(true); b = all(); d = plain(false)
  else
    d = plain(false); b = all(); a = plain(true)
  end
  ratios[round], bare[round] = b / a, b / d
  print(("round %d: plain libcurl multi %.1f us CPU/request (%.1f discarding responses); client:all %.1f us "
    .. "CPU/request; ratio %.2fx"):format(round, a, d, b, ratios[round]))
end
local ir_plain, ir_all = instructions(2000)
up.stop()
local median = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../lib/rounds.lua").median -- sorts its list
local m = median(ratios)
print(("client:all: %d requests, concurrency %d, %d rounds alternated (CPU of each side's request loop; ratios from "
  .. "%.2fx to %.2fx)"):format(n, conc, rounds, ratios[1], ratios[#ratios]))
print(("ratio: client:all CPU per request vs plain curl-multi (%d in flight): %.2fx (target <= %sx) %s"):format(conc,
  m, target, m <= target and "met" or "NOT MET"))
print(("note: client:all against a plain curl-multi loop that discards every response (soak's baseline): %.2fx "
  .. "(median of %d rounds)"):format(median(bare), rounds))
if ir_plain then
  print(("note: user-space instructions per request (callgrind, median of 3 runs of 2000 requests, kernel not counted): "
    .. "plain curl-multi "
    .. "%.0f, client:all %.0f: %.2fx"):format(ir_plain, ir_all, ir_all / ir_plain))
end
