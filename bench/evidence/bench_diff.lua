-- `retryfreeze diff` (diff.compare) on generated locks of N routes, against loading the same two locks
-- (rf.load_string) in the same run. A lock of N routes has N / 8 services, each with 8 routes of the shapes a
-- service lock has (literals, {param}s, a last "*", 4 methods); the old lock has N - 1 of them, the new one
-- raises one route's maxAttempts and adds one route. The diff walks every request class of both locks (docs/governance.md "Request classes").
--
-- Usage: lua5.4 bench/evidence/bench_diff.lua [--sizes 256,2000,10000] [--rounds 3]
-- (bench/run sets LUA_PATH and LUA_CPATH to the source tree and the build). A size over the engine's route
-- limit is reported as refused by the loader.
local rf = require "retryfreeze"
local diff = require "retryfreeze.diff"
local json = require "retryfreeze.json"

-- The diff walks every request class and compares the routes that changed: a few times the work of loading the
-- locks (the enumeration of sampled shapes it replaced took 44x at 256 routes).
local TARGET = 20

local opts = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/../lib/options.lua")("bench_diff",
  { sizes = { 256, 2000, 10000 }, rounds = 3 }, { ["--sizes"] = { "sizes", "sizes" }, ["--rounds"] = { "rounds", "integer" } })

local SHAPES = { "GET /v1/svc%d/items", "GET /v1/svc%d/items/{id}", "POST /v1/svc%d/items",
  "PUT /v1/svc%d/items/{id}", "DELETE /v1/svc%d/items/{id}", "GET /v1/svc%d/items/{id}/events",
  "GET /v1/svc%d/*", "GET /v2/svc%d/{kind}/{id}/*" }

local function lock(n, changed)
  local routes = {}
  for k = 1, n - 1 do
    local endpoint = string.format(SHAPES[(k - 1) % #SHAPES + 1], (k - 1) // #SHAPES + 1)
    routes[k] = { endpoint = endpoint, maxAttempts = 1 + k % 3 }
  end
  if changed then
    routes[n // 2].maxAttempts = 4
    routes[#routes + 1] = { endpoint = "GET /v1/new/{id}", maxAttempts = 2 }
  end
  return json.encode({ version = 1, routes = routes, defaults = { perAttemptTimeoutMs = 500, totalBudgetMs = 2000,
    retryable = { "HTTP_503", "TIMEOUT" }, idempotencyRequired = { "POST", "PUT", "DELETE" } } })
end

-- The best of `rounds` CPU times of f.
local function best(rounds, f)
  local t = math.huge
  for _ = 1, rounds do
    local t0 = os.clock()
    f()
    t = math.min(t, os.clock() - t0)
  end
  return t
end

for _, n in ipairs(opts.sizes) do
  local old_text, new_text = lock(n, false), lock(n, true)
  local old, err = rf.load_string(old_text)
  local new = old and rf.load_string(new_text)
  if not old or not new then
    print(string.format("bench_diff: %d routes: refused by the loader (%s)", n, err or "new lock"))
  else
    local load_s = best(opts.rounds, function()
      for _ = 1, 10 do
        rf.load_string(old_text)
        rf.load_string(new_text)
      end
    end) / 10
    local changes
    local diff_s = best(opts.rounds, function() changes = diff.compare(old, new) end)
    print(string.format("bench_diff: %d routes: diff.compare %.3f s (%d changes, widening %s), loading both locks "
      .. "%.4f s", n, diff_s, #changes, tostring(diff.widens(changes)), load_s))
    local ratio = diff_s / load_s
    print(string.format("ratio: diff.compare / loading both locks, %d routes: %.1fx (target <= %dx) %s", n, ratio,
      TARGET, ratio <= TARGET and "met" or "NOT MET"))
    print(string.format("note: diff.compare of two generated locks of %d routes: %.3f s", n, diff_s))
  end
end
