-- refund_flow.lua — money-moving POSTs. Every refund carries an idempotency key, the same on every attempt,
-- so a retry after a lost response can never refund twice; a refund without a key is sent once, never retried.
--
-- Usage: retryfreeze run examples/refund_flow.lua BASE_URL [COUNT]
local rf = require "retryfreeze"

local base_url = arg[1]
local count = math.tointeger(tonumber(arg[2] or "20"))
if not base_url or not count then
  io.stderr:write("usage: retryfreeze run examples/refund_flow.lua BASE_URL [COUNT]\n")
  os.exit(2)
end

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local policy = assert(rf.load(here .. "/service.lock.json"))
local client <close> = rf.client{ policy = policy, base_url = base_url }

local outcomes = {}
for i = 1, count do
  local r = client:request{
    method = "POST", path = "/v1/refunds", idempotency_key = rf.new_key(),
    body = string.format('{"charge":"ch_%d","amount_cents":%d}', i, 100 * i),
    headers = { ["Content-Type"] = "application/json" },
    -- A flow may stop earlier than the policy allows (narrow), never later: no retry after an attempt that
    -- took two seconds or more.
    on_attempt = function(try) return try.elapsed_ms < 2000 end,
  }
  outcomes[r.outcome] = (outcomes[r.outcome] or 0) + 1
end
for outcome, n in pairs(outcomes) do print(string.format("%-10s %d", outcome, n)) end
