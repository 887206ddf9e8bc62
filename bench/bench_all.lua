-- client:all at a caller-set concurrency against a plain libcurl multi loop at the same concurrency (bench_multi:
-- keep-alive, each finished handle reused for the next request), the same GET /v1/jobs/<i> with the same User-Agent,
-- against one retryfreeze-serve on loopback, in one run. Each side's CPU is the CPU time of its request loop only
-- (client:all's call under os.clock, bench_multi's loop under getrusage): both open their connections cold (a new
-- client each round), and client:all's time includes building every response table. The two alternate for ROUNDS
-- rounds of REQUESTS requests; the ratio is the median of the rounds' ratios (other processes on a shared machine
-- steal CPU unevenly; the median of pairs resists that). Prints a `ratio:` line for bench/run.
-- Usage: lua5.4 bench/bench_all.lua BUILD_DIR [REQUESTS [CONCURRENCY [ROUNDS]]] (from the source root); REQUESTS at
-- most 10000 (client:all's maximum), default 10000; CONCURRENCY default 64; ROUNDS default 9.
local build = arg[1] or "build"
local n, conc, rounds = tonumber(arg[2] or "10000"), tonumber(arg[3] or "64"), tonumber(arg[4] or "9")
local target = 1.3
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = build .. "/lib/lua/5.4/?.so;" .. package.cpath
local rf = require "retryfreeze"
local upstream = require "retryfreeze.upstream"

if not io.open(build .. "/bin/retryfreeze-serve") or not io.open(build .. "/bench_multi") then
  print("bench_all: skipped (no " .. build .. "/bin/retryfreeze-serve or " .. build .. "/bench_multi)")
  return
end

local UA = "rf-bench"
local up = assert(upstream.start{ bindir = build .. "/bin", max_seconds = 600 })
local policy = assert(rf.load_string('{"endpoint":"GET /v1/jobs/{id}","maxAttempts":3,"perAttemptTimeoutMs":5000,'
  .. '"totalBudgetMs":10000,"retryable":["HTTP_503"]}', "bench_all.lock"))
local reqs = {}
for i = 1, n do reqs[i] = { method = "GET", path = "/v1/jobs/" .. i } end

--- bench_multi's CPU microseconds per request (its loop, getrusage).
local function plain()
  local p = assert(io.popen(("%s/bench_multi %s %d %d '' %s"):format(build, up.url, n, conc, UA)))
  local out = p:read("a")
  p:close()
  return assert(tonumber(out:match("([%d.]+) us CPU/request")), "bench_multi: " .. out)
end

--- client:all's CPU microseconds per request (the call, os.clock), on a new client: cold connections, as bench_multi's.
local function all()
  local c = rf.client{ policy = policy, base_url = up.url, rng_seed = 1, user_agent = UA }
  local t0 = os.clock()
  local rs = c:all(reqs, { concurrency = conc })
  local cpu = os.clock() - t0
  c:close()
  for i = 1, n do assert(rs[i].status == 200 and rs[i].attempts == 1, "client:all: not a 200 in one attempt") end
  return cpu / n * 1e6
end

all() -- warm-up: the module's code and the allocator's caches
local ratios = {}
for round = 1, rounds do
  local a, b
  if round % 2 == 1 then a = plain(); b = all() else b = all(); a = plain() end
  ratios[round] = b / a
  print(("round %d: plain libcurl multi %.1f us CPU/request; client:all %.1f us CPU/request; ratio %.2fx"):format(
    round, a, b, ratios[round]))
end
up.stop()
table.sort(ratios)
local median = rounds % 2 == 1 and ratios[(rounds + 1) // 2] or (ratios[rounds // 2] + ratios[rounds // 2 + 1]) / 2
print(("client:all: %d requests, concurrency %d, %d rounds alternated (CPU of each side's request loop)"):format(n, conc,
  rounds))
print(("ratio: client:all CPU per request vs plain curl-multi (%d in flight): %.2fx (target <= %sx) %s"):format(conc,
  median, target, median <= target and "met" or "NOT MET"))
