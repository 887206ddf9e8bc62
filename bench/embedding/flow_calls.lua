-- A loop of rf.flow requests shaped like the nginx example's (examples/nginx/retry_proxy.lua): one GET attempt
-- answered at once with a 200 by a fake transport, the lock's retry budget and an RNG in io, the ledger holding its
-- lines (written in batches, as each worker's). For callgrind: bench/embedding/flow_instructions.sh counts the instructions of
-- N and of 2N requests and divides the difference by N.
-- Usage: luajit bench/embedding/flow_calls.lua N LEDGER_PATH (from the source root, with LUA_PATH and LUA_CPATH set).
local rf = require "retryfreeze"
local n, ledger_path = assert(tonumber(arg[1]), "N"), assert(arg[2], "LEDGER_PATH")
local policy = assert(rf.load("examples/nginx/proxy.lock.json"))
local ledger = assert(rf.ledger.open(ledger_path))
assert(ledger:hold(65536))
local reply_headers = { ["content-length"] = "2", connection = "keep-alive" }
local io = { send = function() return { status = 200, transport = "ok", headers = reply_headers, body = "ok" } end,
             sleep = function() end, now_ms = rf.monotonic_ms, ledger = ledger, rng = rf.rng(1),
             retry_budget = rf.retry_budget(policy) }
local flow = rf.flow
for _ = 1, n do
  local r = flow(policy, { method = "GET", path = "/items/1" }, io)
  if r.status ~= 200 then error("unexpected status " .. tostring(r.status)) end
end
assert(ledger:flush())
