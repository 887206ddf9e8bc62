-- One process of the storm test (spec/50-fleet_spec.lua): sends N requests, one after another, to a
-- failing upstream through a client whose retry budget is either its own ("local") or the fleet's bucket
-- in Redis ("shared"). Prints "done <requests> <attempts> <shared> <fallback>" (verdict budgets counted).
-- usage: lua5.4 storm_worker.lua LOCK_FILE UPSTREAM_URL REDIS_URL|local N
local rf = require "retryfreeze"
local lock_file, url, redis, n = arg[1], arg[2], arg[3], math.tointeger(tonumber(arg[4]))
local policy = assert(rf.load(lock_file))
local budget = redis == "local" and true or { redis = redis, timeout_ms = 200 }
local client <close> = rf.client{ policy = policy, base_url = url, retry_budget = budget, rng_seed = 1 }
local attempts, shared, fallback = 0, 0, 0
for _ = 1, n do
  local r = client:request{ method = "GET", path = "/storm" }
  attempts = attempts + r.attempts
  if r.budget == "shared" then shared = shared + 1 elseif r.budget == "local-fallback" then fallback = fallback + 1 end
end
print(string.format("done %d %d %d %d", n, attempts, shared, fallback))
