-- The Lua side of bench/client/bench_client.c: loaded in the bench's embedded Lua state with (base_url, path,
-- lock_text); returns a function that makes one request through client:request and checks it. The C side
-- times each call against a plain libcurl request made in the same loop (see bench_client.c).
local base_url, path, lock_text = ...
local rf = require "retryfreeze"

local policy = assert(rf.load_string(lock_text, "bench.lock"))
local client = rf.client{ policy = policy, base_url = base_url, rng_seed = 1 }

return function()
  -- A fresh request table each call, as a caller would write it.
  local r = client:request{ method = "GET", path = path }
  if not (r.ok and r.status == 200 and r.attempts == 1) then
    error(string.format("client:request: %s %s after %d attempt(s)", r.outcome, r.reason, r.attempts))
  end
end
